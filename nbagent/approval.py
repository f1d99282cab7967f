"""Who decides whether a call that needs approval may run: the Approver and its policies.

The loop asks ``await approver.decide(request)`` once per call that needs approval and runs the
call only on an explicit approve decision for that exact call. Policies: :class:`AutoApprove`,
:class:`DenyAll`, :class:`CallbackApprover` (ask a function, e.g. a terminal prompt),
:class:`RuleApprover` (per-tool rules, "always allow"), :class:`ScriptedApprover` (tests,
headless notebooks) and :class:`InteractiveApprover` (futures resolved by buttons).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, Union, runtime_checkable

from .tools import ToolCall

if TYPE_CHECKING:
    import asyncio

__all__ = [
    "ApprovalRequest",
    "Approver",
    "AutoApprove",
    "CallbackApprover",
    "Decision",
    "DenyAll",
    "InteractiveApprover",
    "RuleApprover",
    "ScriptedApprover",
    "approval_policy",
    "approve",
    "deny",
]


def _fingerprint(call: ToolCall) -> str:
    digest = hashlib.sha256(f"{call.id}\0{call.name}\0{call.arguments}".encode()).hexdigest()
    return digest[:16]


@dataclass(frozen=True)
class ApprovalRequest:
    """One call waiting for a decision; ``fingerprint`` binds a decision to id and arguments."""

    call: ToolCall
    input: Any
    title: str | None = None
    fingerprint: str = ""

    @classmethod
    def for_call(cls, call: ToolCall, input: Any, title: str | None = None) -> ApprovalRequest:
        return cls(call, input, title, _fingerprint(call))

    @property
    def tool_name(self) -> str:
        return self.call.name


@dataclass(frozen=True)
class Decision:
    """Approve or deny one call. ``reason`` reaches the model on a denial; ``always`` asks the
    approver to allow this tool without asking for the rest of the session."""

    approved: bool
    reason: str | None = None
    always: bool = False
    by: str = ""


def approve(reason: str | None = None, *, always: bool = False) -> Decision:
    """An approve decision."""
    return Decision(True, reason, always)


def deny(reason: str | None = None) -> Decision:
    """A deny decision; the model reads ``reason``."""
    return Decision(False, reason)


@runtime_checkable
class Approver(Protocol):
    """Gives a decision for one call. May take as long as a person needs; may be cancelled."""

    async def decide(self, request: ApprovalRequest) -> Decision: ...


# An approver may also define ``known_decision(request) -> Decision | None``: a decision it can
# give without asking anyone (an "always allow" rule). The loop then skips ApprovalRequested.


class AutoApprove:
    """Approve every call (trusted tools, demos, headless runs that opted in)."""

    async def decide(self, request: ApprovalRequest) -> Decision:
        return Decision(True, "approved by policy: auto", by="auto")


class DenyAll:
    """Deny every call that needs approval, with a reason the model reads."""

    def __init__(
        self, reason: str = "denied by policy: no one can approve calls in this run"
    ) -> None:
        self.reason = reason

    async def decide(self, request: ApprovalRequest) -> Decision:
        return Decision(False, self.reason, by="deny")


DecisionLike = Union[Decision, bool]


def _as_decision(value: Any, by: str) -> Decision:
    if isinstance(value, Decision):
        return value
    if isinstance(value, bool):
        return Decision(value, None, by=by)
    raise TypeError(f"an approver must return a Decision or a bool, got {type(value).__name__}")


class CallbackApprover:
    """Ask a function (sync or async) for each call; it returns a Decision or a bool.

    Sync functions run on a worker thread (a terminal ``input()`` must not block the loop), one
    at a time so that prompts never interleave.
    """

    def __init__(self, ask: Callable[[ApprovalRequest], DecisionLike | Awaitable[DecisionLike]]):
        import asyncio

        self.ask = ask
        self._lock = asyncio.Lock()

    async def decide(self, request: ApprovalRequest) -> Decision:
        import asyncio
        import inspect

        async with self._lock:
            if inspect.iscoroutinefunction(self.ask):
                value = await self.ask(request)
            else:
                value = await asyncio.to_thread(self.ask, request)
                if inspect.isawaitable(value):
                    value = await value
        return _as_decision(value, "callback")


Rule = Literal["allow", "deny", "ask"]


class RuleApprover:
    """Per-tool rules ("allow", "deny", "ask"); "ask" and unlisted tools go to ``fallback``.

    A decision with ``always=True`` from the fallback turns into an "allow" rule for that tool.
    """

    def __init__(self, rules: Mapping[str, Rule] | None = None, fallback: Approver | None = None):
        self.rules: dict[str, Rule] = dict(rules or {})
        self.fallback: Approver = fallback or DenyAll()

    def allow_always(self, tool_name: str) -> None:
        self.rules[tool_name] = "allow"

    def known_decision(self, request: ApprovalRequest) -> Decision | None:
        rule = self.rules.get(request.tool_name, "ask")
        if rule == "allow":
            return Decision(True, "allowed by rule", by="rule")
        if rule == "deny":
            return Decision(False, f"calls to {request.tool_name} are denied by rule", by="rule")
        known = getattr(self.fallback, "known_decision", None)
        return known(request) if known is not None else None

    async def decide(self, request: ApprovalRequest) -> Decision:
        known = self.known_decision(request)
        if known is not None:
            return known
        decision = await self.fallback.decide(request)
        if decision.approved and decision.always:
            self.allow_always(request.tool_name)
        return decision


class ScriptedApprover:
    """Decisions given in advance: a sequence (in request order) or a mapping by tool name.

    Records every request it saw. Running out of scripted decisions denies, saying so.
    """

    def __init__(self, decisions: Iterable[DecisionLike] | Mapping[str, DecisionLike] = ()) -> None:
        self.by_tool: dict[str, DecisionLike] = {}
        self.queue: list[DecisionLike] = []
        if isinstance(decisions, Mapping):
            self.by_tool = dict(decisions)
        else:
            self.queue = list(decisions)
        self.requests: list[ApprovalRequest] = []

    async def decide(self, request: ApprovalRequest) -> Decision:
        self.requests.append(request)
        if request.tool_name in self.by_tool:
            return _as_decision(self.by_tool[request.tool_name], "script")
        if self.queue:
            return _as_decision(self.queue.pop(0), "script")
        return Decision(False, "denied: no scripted decision left for this call", by="script")


@dataclass
class _Pending:
    request: ApprovalRequest
    future: asyncio.Future[Decision]
    loop: asyncio.AbstractEventLoop
    done: bool = False


class InteractiveApprover:
    """Waits for a person: each request becomes a future that :meth:`resolve` settles.

    ``resolve`` is thread-safe (widget callbacks may arrive on another thread) and idempotent:
    only the first decision for a call counts, a decision whose fingerprint does not match the
    pending call is refused, and a decision after the run ended does nothing. Tools allowed
    "always" are approved without asking for the rest of the session.
    """

    def __init__(self) -> None:
        self._pending: dict[str, _Pending] = {}
        self._lock = threading.Lock()
        self.always_allowed: set[str] = set()
        self.decided: dict[str, Decision] = {}

    def known_decision(self, request: ApprovalRequest) -> Decision | None:
        if request.tool_name in self.always_allowed:
            return Decision(True, "always allowed this session", by="always")
        return None

    async def decide(self, request: ApprovalRequest) -> Decision:
        known = self.known_decision(request)
        if known is not None:
            return known
        import asyncio

        loop = asyncio.get_running_loop()
        pending = _Pending(request, loop.create_future(), loop)
        with self._lock:
            self._pending[request.call.id] = pending
        try:
            return await pending.future
        finally:
            with self._lock:
                pending.done = True
                self._pending.pop(request.call.id, None)

    def pending(self) -> list[ApprovalRequest]:
        """Requests still waiting for a decision."""
        with self._lock:
            return [p.request for p in self._pending.values() if not p.done]

    def resolve(self, call_id: str, decision: Decision, *, fingerprint: str | None = None) -> bool:
        """Settle the pending request for ``call_id``; False if there is none (or it was settled,
        or ``fingerprint`` does not match the call the person saw)."""
        with self._lock:
            pending = self._pending.get(call_id)
            if pending is None or pending.done:
                return False
            if fingerprint is not None and fingerprint != pending.request.fingerprint:
                return False
            pending.done = True
            if decision.approved and decision.always:
                self.always_allowed.add(pending.request.tool_name)
            self.decided[call_id] = decision

        def settle() -> None:
            if not pending.future.done():
                pending.future.set_result(decision)

        try:
            pending.loop.call_soon_threadsafe(settle)
        except RuntimeError:  # the loop is closed: the run is over
            return False
        return True


def approval_policy(name: str) -> Approver:
    """The approver for a policy name: "auto", "deny" or "ask" (an InteractiveApprover)."""
    key = name.strip().lower()
    if key in ("auto", "approve", "allow", "yes"):
        return AutoApprove()
    if key in ("deny", "no", "never"):
        return DenyAll()
    if key == "ask":
        return InteractiveApprover()
    raise ValueError(f"unknown approval policy {name!r}: use 'ask', 'auto' or 'deny'")
