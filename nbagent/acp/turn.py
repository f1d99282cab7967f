"""The turn being answered: the prompt in flight, its permission requests, its stop.

Everything here runs on the agent's loop. A turn ends in one of four ways, whichever comes
first: the agent answers the prompt; the run is stopped (Stop, an interrupt, a bound passed),
and then ``session/cancel`` goes out, every open permission request is answered "cancelled",
and an agent that has not ended its turn within ``cancel_grace`` is killed; the agent breaks
the protocol past its bounds; or its process exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
from typing import Any, Protocol

from ..approvals.approval import ApprovalRequest, Approver, Decision
from ..events import ApprovalRequested, ApprovalResolved
from ..generation import Usage
from ..redact import redact_secrets
from .permission import bound, chosen_option, decided_without_asking, request_for
from .updates import Turn, TurnOverflow

__all__ = ["ActiveTurn", "refusal_text"]


def refusal_text(error: Any) -> str:
    """A JSON-RPC error as a person reads it: its message, and its ``data.details`` (what
    agents put the cause in), bounded and with secrets hidden."""
    text = str(error)
    data = getattr(error, "data", None)
    details = data.get("details") if isinstance(data, dict) else None
    if isinstance(details, str) and details.strip():
        text = f"{text}: {details.strip()}"
    return f"{redact_secrets(text)[:300]} (error {getattr(error, 'code', '?')})"


class _Run(Protocol):
    """What a turn reads of its run (:class:`~nbagent.acp.client.ExternalRun`)."""

    id: str
    prompt: str
    approver: Approver
    cancelled: threading.Event

    @property
    def reader_loop(self) -> asyncio.AbstractEventLoop | None: ...

    def emit(self, event: Any) -> None: ...


class _Owner(Protocol):
    """What a turn uses of its session (:class:`~nbagent.acp.client.ExternalAgentSession`)."""

    session_id: str | None
    limits: Any

    @property
    def connection(self) -> Any: ...

    @property
    def process(self) -> asyncio.subprocess.Process | None: ...

    @property
    def broken(self) -> asyncio.Event: ...

    @property
    def broken_reason(self) -> str: ...

    def failure(self, what: str) -> Exception: ...

    async def exit_code(self, wait: float = 2.0) -> int | None: ...

    async def forget(self) -> None: ...


def _usage(answer: Any) -> Usage | None:
    usage = getattr(answer, "usage", None)
    if usage is None:
        return None
    return Usage(
        int(getattr(usage, "input_tokens", 0) or 0),
        int(getattr(usage, "output_tokens", 0) or 0),
        int(getattr(usage, "cached_read_tokens", 0) or 0),
        int(getattr(usage, "cached_write_tokens", 0) or 0),
    )


class ActiveTurn:
    """One prompt in flight on ``owner``'s connection, reported through ``run``."""

    def __init__(self, owner: _Owner, run: _Run, turn: Turn) -> None:
        self.owner = owner
        self.run = run
        self.turn = turn
        self.stopping = asyncio.Event()
        self.why = ""  # why it was stopped when a bound stopped it ("" for Stop)
        if run.cancelled.is_set():
            self.stopping.set()

    def stop(self, why: str) -> None:
        """Stop the turn (on the agent's loop); ``why``: the bound it passed, if any."""
        if why and not self.why:
            self.why = why
        self.stopping.set()

    def update(self, update: Any) -> None:
        if self.stopping.is_set():
            return  # a stopped turn shows nothing more
        try:
            self.turn.update(update)
        except TurnOverflow as exc:
            self.stop(str(exc))

    # --- the prompt ------------------------------------------------------------------------------

    async def prompt(self) -> tuple[str, Usage | None]:
        """The turn's ACP stop reason and usage, once it ended; raises ExternalAgentError
        when the agent crashed, broke the protocol, or passed a bound."""
        from acp import text_block

        owner = self.owner
        conn = owner.connection
        process = owner.process
        assert owner.session_id is not None and process is not None
        asked = asyncio.ensure_future(
            conn.prompt(session_id=owner.session_id, prompt=[text_block(self.run.prompt)])
        )
        stopped = asyncio.ensure_future(self.stopping.wait())
        broken = asyncio.ensure_future(owner.broken.wait())
        try:
            await asyncio.wait({asked, stopped, broken}, return_when=asyncio.FIRST_COMPLETED)
            if broken.done() and not asked.done():
                asked.cancel()
                await owner.forget()
                raise owner.failure(f"was stopped: {owner.broken_reason}")
            if not asked.done():
                return await self._cancel(asked)
            return await self._answered(asked)
        finally:
            for task in (stopped, broken):
                task.cancel()

    async def _answered(self, asked: asyncio.Future[Any]) -> tuple[str, Usage | None]:
        from acp.exceptions import RequestError
        from pydantic import ValidationError

        owner = self.owner
        try:
            answer = asked.result()
        except RequestError as exc:
            raise owner.failure(f"refused the prompt: {refusal_text(exc)}") from None
        except ValidationError:
            raise owner.failure("answered the prompt with something ACP does not define") from None
        except (ConnectionError, OSError, EOFError):
            code = await owner.exit_code()
            reason = owner.broken_reason
            await owner.forget()
            if reason:
                raise owner.failure(f"was stopped: {reason}") from None
            raise owner.failure(
                f"exited in the middle of its turn (exit code {code}); the next prompt starts "
                "it again, in a new conversation"
            ) from None
        if self.why:
            raise owner.failure(f"was stopped: {self.why}")
        return str(answer.stop_reason), _usage(answer)

    async def _cancel(self, asked: asyncio.Future[Any]) -> tuple[str, Usage | None]:
        """``session/cancel``, then the turn's end within the grace, or the agent killed."""
        owner = self.owner
        with contextlib.suppress(Exception):
            await asyncio.wait_for(owner.connection.cancel(session_id=owner.session_id), 1.0)
        grace = owner.limits.cancel_grace
        done, _ = await asyncio.wait({asked}, timeout=grace)
        if not done:
            asked.cancel()
            await owner.forget()
            if self.why:
                raise owner.failure(f"was stopped: {self.why}")
            return "cancelled", None  # killed: it did not end its turn within the grace
        if self.why:
            raise owner.failure(f"was stopped: {self.why}")
        try:
            stop, usage = await self._answered(asked)
        except Exception:
            return "cancelled", None  # it ended its turn badly after a cancel: still cancelled
        return ("cancelled" if stop == "end_turn" else stop), usage

    # --- permission ------------------------------------------------------------------------------

    async def permission(self, tool_call: Any, options: list[Any]) -> Any:
        from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

        cancelled = RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        if self.stopping.is_set():
            return cancelled
        try:
            call = self.turn.call(tool_call)
            tool_call_ = self.turn.ready(call)
        except TurnOverflow as exc:
            self.stop(str(exc))
            return cancelled
        request = request_for(tool_call_, call.arguments, call.title, self.run.id)
        approver = self.run.approver
        decision = decided_without_asking(approver, request)
        if decision is None:
            self.run.emit(ApprovalRequested(request))
            decision = await self._decide(request)
        if decision is None:  # the turn stopped while it waited
            decision = Decision(False, "cancelled: the turn was stopped", by="error")
            self.run.emit(ApprovalResolved(call.call_id, bound(decision, request)))
            return cancelled
        option, note = chosen_option(decision, options, request)
        if note:
            decision = dataclasses.replace(decision, approved=False, reason=note)
        self.run.emit(ApprovalResolved(call.call_id, bound(decision, request)))
        if option is None:
            return cancelled
        return RequestPermissionResponse(
            outcome=AllowedOutcome(option_id=option, outcome="selected")
        )

    async def _decide(self, request: ApprovalRequest) -> Decision | None:
        """The approver's decision, asked on the loop the run is read on; None when the turn
        stopped first."""
        approver = self.run.approver
        reader = self.run.reader_loop
        if reader is not None and reader is not asyncio.get_running_loop():
            future: asyncio.Future[Decision] = asyncio.wrap_future(
                asyncio.run_coroutine_threadsafe(approver.decide(request), reader)
            )
        else:
            future = asyncio.ensure_future(approver.decide(request))
        stopped: asyncio.Future[Any] = asyncio.ensure_future(self.stopping.wait())
        try:
            await asyncio.wait([future, stopped], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
        if not future.done():
            future.cancel()
            return None
        try:
            decision = future.result()
        except asyncio.CancelledError:
            return None
        except Exception as exc:  # the approver broke: nothing runs that nobody approved
            reason = redact_secrets(str(exc))[:300]
            return Decision(False, f"denied: the approver failed ({reason})", by="error")
        if not isinstance(decision, Decision):
            return Decision(False, "denied: the approver gave no decision", by="error")
        return decision
