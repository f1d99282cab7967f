"""An ACP client: one external agent's process, its ACP session, and its turns as runs.

:class:`ExternalAgentSession` starts the agent on first use (``initialize``, ``session/new``),
sends each prompt (``session/prompt``) and reports the turn as an :class:`ExternalRun`, whose
events are nbagent's own (see :mod:`.updates`) and whose permission requests its approver
answers (see :mod:`.permission`). The next prompt continues the same ACP session; ``new=True``
starts another. A cancel sends ``session/cancel``, answers every open permission request
"cancelled", and kills the agent if its turn has not ended within ``cancel_grace``. An agent
that crashes, is not installed, or breaks the protocol past its bounds ends the run as failed
in one sentence (with its last stderr); the next prompt starts it afresh, in a new session.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
import uuid
import weakref
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

from .._version import __version__
from ..approvals.approval import Approver
from ..errors import ExternalAgentError
from ..events import (
    AgentEvent,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunResult,
    RunStarted,
    StepStarted,
)
from ..limits import ExternalAgentLimits
from ..redact import redact_secrets
from .process import AgentLoop, kill_group, spawn
from .registry import ExternalAgent, resolve_command
from .relay import EventRelay
from .turn import ActiveTurn, refusal_text
from .updates import Turn
from .wire import BoundedWire, StderrTail

if TYPE_CHECKING:
    from acp.schema import SessionNotification

__all__ = ["ExternalAgentSession", "ExternalRun"]

#: What each ACP stop reason is as a run's stop reason.
_STOPS: dict[str, Any] = {
    "end_turn": "finished",
    "max_tokens": "length",
    "max_turn_requests": "max_steps",
    "refusal": "finished",
    "cancelled": "cancelled",
}


class _StoppedBeforePrompt(Exception):
    """The run was stopped while its agent was starting: nothing was asked."""


class ExternalRun:
    """One prompt to an external agent, read as a run: :meth:`events` (nbagent's events, in
    order), :meth:`result` (its :class:`~nbagent.events.RunResult`), :meth:`cancel` (from any
    thread)."""

    def __init__(self, owner: ExternalAgentSession, prompt: str, approver: Approver, run_id: str):
        self.id = run_id
        self.prompt = prompt
        self.approver = approver
        self.final: RunResult | None = None
        self._owner = owner
        self._relay = EventRelay()
        self._done: concurrent.futures.Future[RunResult] = concurrent.futures.Future()
        self._reader: asyncio.AbstractEventLoop | None = None
        self.cancelled = threading.Event()

    def emit(self, event: AgentEvent) -> None:
        self._relay.put(event)

    @property
    def reader_loop(self) -> asyncio.AbstractEventLoop | None:
        """The loop the run is read on (where the approver is asked), once it is read."""
        return self._reader

    def _attach(self) -> None:
        if self._reader is None:
            self._reader = asyncio.get_running_loop()

    async def events(self) -> AsyncIterator[AgentEvent]:
        self._attach()
        while (event := await self._relay.get()) is not None:
            yield event

    async def result(self) -> RunResult:
        self._attach()
        return await asyncio.wrap_future(self._done)

    def cancel(self) -> None:
        """Stop the turn: ``session/cancel``, then the agent is killed after a grace."""
        self.cancelled.set()
        self._owner._wake(self)

    def _end(self, result: RunResult, event: AgentEvent) -> None:
        self.final = result
        self.emit(event)
        self._relay.close()
        if not self._done.done():
            self._done.set_result(result)


class _Client:
    """What the agent may ask of the client (the SDK's ``Client``): permission; file and
    terminal requests are not offered (the client's capabilities say so) and are refused."""

    def __init__(self, owner: ExternalAgentSession) -> None:
        self._owner = weakref.ref(owner)

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> Any:
        owner = self._owner()
        if owner is None:
            from acp.schema import DeniedOutcome, RequestPermissionResponse

            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return await owner._permission(session_id, tool_call, options)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None  # the wire hands every update on itself, in order (see .wire)

    def __getattr__(self, name: str) -> Any:
        # fs/*, terminal/*, elicitation: not offered; the SDK answers "method not found"
        raise AttributeError(name)


class ExternalAgentSession:
    """One external agent (a process speaking ACP on stdio) and one conversation with it.

    ``cwd``: the folder the agent works in (default: the current one); ``limits``: its bounds.
    Close it (or use it as a context manager) to end the process; it also ends when this object
    is collected and when the interpreter exits.
    """

    def __init__(
        self,
        agent: ExternalAgent,
        *,
        cwd: str | None = None,
        limits: ExternalAgentLimits | None = None,
    ) -> None:
        self.agent = agent
        self.cwd = os.path.abspath(cwd or os.getcwd())
        self.limits = limits or ExternalAgentLimits()
        self.session_id: str | None = None
        self.agent_info = ""
        self._loop = AgentLoop(agent.name)
        self._process: asyncio.subprocess.Process | None = None
        self._conn: Any = None
        self._wire: BoundedWire | None = None
        self._stderr = StderrTail(self.limits.stderr_tail)
        self._stderr_task: asyncio.Task[None] | None = None
        self._broken: asyncio.Event | None = None
        self._broken_reason = ""
        self._active: ActiveTurn | None = None
        self._busy = threading.Lock()
        self._running: ExternalRun | None = None
        self._closed = False

    def __repr__(self) -> str:
        state = f"session {self.session_id}" if self.session_id else "not started"
        return f"<ExternalAgentSession {self.agent.label}: {state}>"

    def __enter__(self) -> ExternalAgentSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def alive(self) -> bool:
        """Whether the agent's process is running."""
        return self._process is not None and self._process.returncode is None

    @property
    def busy(self) -> bool:
        return self._running is not None

    # --- a turn -------------------------------------------------------------------------------

    def start(
        self, prompt: str, *, approver: Approver, new: bool = False, run_id: str | None = None
    ) -> ExternalRun:
        """Send ``prompt`` (``new``: in a new ACP session) and return its run at once."""
        if self._closed:
            raise ExternalAgentError(f"{self.agent.label}: this session was closed")
        with self._busy:
            previous = self._running
            if previous is not None and not previous.cancelled.is_set():
                raise ExternalAgentError(
                    f"{self.agent.label} is still answering the previous prompt: wait for it "
                    "to end (or stop it) first"
                )
            run = ExternalRun(self, prompt, approver, run_id or f"acp-{uuid.uuid4().hex[:10]}")
            self._running = run
        # a stopped turn may still be winding down (a kernel interrupt does not wait for it):
        # this one starts when it ended, within its grace
        self._loop.submit(self._turn(run, new, previous))
        return run

    def _wake(self, run: ExternalRun) -> None:
        loop = self._loop.loop

        def wake() -> None:
            active = self._active
            if active is not None and active.run is run:
                active.stop("")

        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(wake)

    async def _turn(self, run: ExternalRun, new: bool, previous: ExternalRun | None) -> None:
        turn = Turn(run.emit, self.limits)
        error: BaseException | None = None
        stop = "failed"
        started = False
        interrupted: BaseException | None = None
        try:
            if previous is not None:
                await self._after(previous)
            if run.cancelled.is_set():
                stop = "cancelled"
            else:
                await self._connect(new)
                assert self.session_id is not None
                if run.cancelled.is_set():  # stopped while the agent started: no prompt
                    raise _StoppedBeforePrompt
                run.emit(RunStarted(run.id, run.prompt, f"acp:{self.agent.name}", self.session_id))
                run.emit(StepStarted(1))
                started = True
                self._active = ActiveTurn(self, run, turn)
                stop, usage = await self._active.prompt()
                turn.finish(stop, usage)
        except _StoppedBeforePrompt:
            stop = "cancelled"
        except ExternalAgentError as exc:
            error = exc
            if started:
                turn.finish("failed")
        except Exception as exc:  # never lost: the run says what broke
            error = ExternalAgentError(
                f"{self.agent.label}: the turn failed: {redact_secrets(str(exc))[:500]}"
            )
            if started:
                turn.finish("failed")
        except BaseException as exc:  # the agent's loop is stopping: the run still ends
            interrupted, stop = exc, "cancelled"
            if started:
                turn.finish("cancelled")
        finally:
            self._active = None
        result = RunResult(
            "".join(turn.text),
            (),
            1 if started else 0,
            turn.usage,
            "failed" if error is not None else _STOPS.get(stop, stop),
            error,
            run_id=run.id,
        )
        if error is not None:
            event: AgentEvent = RunFailed(error, result)
        elif result.stop_reason == "cancelled":
            event = RunCancelled(result)
        else:
            event = RunFinished(result)
        with self._busy:
            if self._running is run:
                self._running = None
        run._end(result, event)
        if interrupted is not None:
            raise interrupted

    async def _after(self, previous: ExternalRun) -> None:
        """Wait for a stopped turn to end; one that outlives its grace loses its agent."""
        wait = self.limits.cancel_grace + 3
        try:
            await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(previous._done)), wait)
        except asyncio.TimeoutError:
            await self._drop()

    # --- the process and the session ----------------------------------------------------------

    def failure(self, what: str) -> ExternalAgentError:
        """``what`` went wrong, as an error with the agent's last stderr."""
        tail = redact_secrets(self._stderr.text())
        said = f"; its stderr ends: {tail[-600:]}" if tail else ""
        return ExternalAgentError(f"{self.agent.label} {what}{said}")

    async def _connect(self, new: bool) -> None:
        if self._conn is not None and self.alive and not (self._broken and self._broken.is_set()):
            if new or self.session_id is None:
                await self._new_session()
            return
        await self._drop()
        from acp import PROTOCOL_VERSION
        from acp.client.connection import ClientSideConnection
        from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation

        path = resolve_command(self.agent)
        self._stderr = StderrTail(self.limits.stderr_tail)
        self._broken = asyncio.Event()
        self._broken_reason = ""
        try:
            process = await spawn(
                path, self.agent.args, dict(self.agent.env), self.cwd, self.limits.max_message_bytes
            )
        except OSError as exc:
            raise ExternalAgentError(
                f"{self.agent.label} could not be started ({self.agent.command_line}): {exc}"
            ) from None
        self._process = process
        weakref.finalize(self, kill_group, process)
        assert process.stdout is not None and process.stdin is not None
        assert process.stderr is not None
        self._stderr_task = asyncio.ensure_future(self._stderr.drain(process.stderr))
        self._wire = BoundedWire(
            process.stdout, process.stdin, self.limits, self._on_update, self._on_broken
        )
        self._conn = ClientSideConnection(cast(Any, _Client(self)), self._wire)
        capabilities = ClientCapabilities(
            fs=FileSystemCapabilities(read_text_file=False, write_text_file=False),
            terminal=False,
        )
        answer = await self._ask(
            "initialize",
            self._conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=capabilities,
                client_info=Implementation(name="nbagent", version=__version__),
            ),
        )
        if answer.protocol_version != PROTOCOL_VERSION:
            await self._drop()
            raise self.failure(
                f"speaks ACP version {answer.protocol_version}, and nbagent speaks "
                f"{PROTOCOL_VERSION}"
            )
        info = answer.agent_info
        self.agent_info = f"{info.name} {info.version}" if info is not None else ""
        await self._new_session()

    async def _new_session(self) -> None:
        self.session_id = None
        answer = await self._ask(
            "session/new", self._conn.new_session(cwd=self.cwd, mcp_servers=[])
        )
        self.session_id = str(answer.session_id)

    async def _ask(self, method: str, request: Any) -> Any:
        """An answer to ``request`` within the start timeout, or a sentence saying why not."""
        from acp.exceptions import RequestError
        from pydantic import ValidationError

        try:
            return await asyncio.wait_for(request, self.limits.start_timeout)
        except asyncio.TimeoutError:
            await self._drop()
            raise self.failure(
                f"did not answer {method} within {self.limits.start_timeout:g} s"
            ) from None
        except RequestError as exc:
            await self._drop()
            raise self.failure(f"refused {method}: {refusal_text(exc)}") from None
        except ValidationError:
            await self._drop()
            raise self.failure(f"answered {method} with something ACP does not define") from None
        except (ConnectionError, OSError, EOFError):
            code = await self.exit_code()
            await self._drop()
            if self._broken_reason:
                raise self.failure(f"was stopped: {self._broken_reason}") from None
            raise self.failure(f"exited before it answered {method} (exit code {code})") from None

    async def exit_code(self, wait: float = 2.0) -> int | None:
        """The process's exit code, waiting up to ``wait`` seconds for it to end."""
        process = self._process
        if process is None:
            return None
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(process.wait(), wait)
        return process.returncode

    def _on_update(self, notification: SessionNotification) -> None:
        active = self._active
        if active is not None and notification.session_id == self.session_id:
            active.update(notification.update)

    def _on_broken(self, reason: str) -> None:
        self._broken_reason = reason
        if self._broken is not None:
            self._broken.set()
        if self._process is not None:
            kill_group(self._process)

    @property
    def broken(self) -> asyncio.Event:
        assert self._broken is not None
        return self._broken

    @property
    def broken_reason(self) -> str:
        return self._broken_reason

    @property
    def connection(self) -> Any:
        return self._conn

    @property
    def process(self) -> asyncio.subprocess.Process | None:
        return self._process

    async def _permission(self, session_id: str, tool_call: Any, options: list[Any]) -> Any:
        from acp.schema import DeniedOutcome, RequestPermissionResponse

        active = self._active
        if active is None or session_id != self.session_id:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return await active.permission(tool_call, options)

    async def _drop(self) -> None:
        """End the process and forget the session (the next prompt starts it again)."""
        conn, process, wire = self._conn, self._process, self._wire
        self._conn = self._wire = None
        self.session_id = None
        if wire is not None:
            await wire.close()  # its stdin closed: an agent that behaves ends on it
        if process is not None and process.returncode is None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(process.wait(), 0.5)
            kill_group(process)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(process.wait(), 2.0)
        if conn is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.close(), 2.0)
        task = self._stderr_task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(task, 1.0)

    async def forget(self) -> None:
        """After a turn that killed or lost the agent: the next prompt starts afresh."""
        await self._drop()

    # --- the end -------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop any turn, end the agent's process and its thread (from any thread but the
        agent's own; idempotent)."""
        if self._closed:
            return
        self._closed = True
        running = self._running
        if running is not None:
            running.cancel()
        try:
            future = self._loop.submit(self._shutdown())
            future.result(timeout=self.limits.cancel_grace + 5)
        except (concurrent.futures.TimeoutError, RuntimeError):
            pass
        finally:
            if self._process is not None:
                kill_group(self._process)
            self._loop.stop()

    async def _shutdown(self) -> None:
        running = self._running
        if running is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(
                    asyncio.wrap_future(running._done), self.limits.cancel_grace + 3
                )
        await self._drop()
