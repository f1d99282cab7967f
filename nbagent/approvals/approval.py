"""Who decides whether a call that needs approval may run: the Approver and its policies.

The loop asks ``await approver.decide(request)`` once per call that needs approval and runs the
call only on an explicit approve decision for that exact call. Policies: :class:`AutoApprove`,
:class:`DenyAll`, :class:`CallbackApprover` (ask a function, e.g. a terminal prompt),
:class:`~nbagent.approvals.rules.RuleApprover` (allow or deny by tool and by the arguments; it lives
with its rules, above this module), :class:`ScriptedApprover` (tests, headless notebooks) and
:class:`InteractiveApprover` (futures resolved by buttons).

An approval may carry edited arguments (``approve(arguments={...})``): the loop checks them
against the tool's schema, runs the call with exactly those, and tells the model so. Every
decision the loop acts on is bound (:class:`ApprovalBinding`) to the run, the call id and a hash
of the arguments it was about.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, Union, runtime_checkable

from ..errors import ArgumentsError
from ..tools import ToolCall

if TYPE_CHECKING:
    import asyncio

    from ..inspection.stepping import Resume, StepPause

__all__ = [
    "ApprovalBinding",
    "ApprovalRequest",
    "Approver",
    "AutoApprove",
    "CallPreviews",
    "CallbackApprover",
    "Decision",
    "DenyAll",
    "InteractiveApprover",
    "ScriptedApprover",
    "approval_policy",
    "approve",
    "arguments_hash",
    "deny",
]


def arguments_hash(value: Any) -> str:
    """The SHA-256 of ``value`` as canonical JSON (sorted keys, no spaces): the same arguments
    always hash the same, whatever order their keys arrived in."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _fingerprint(call: ToolCall, input: Any, run_id: str) -> str:
    try:
        shown = arguments_hash(input)
    except (TypeError, ValueError):
        shown = call.arguments
    text = f"{run_id}\0{call.id}\0{call.name}\0{shown}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class CallPreviews(Protocol):
    """The previews of one call waiting for approval, as a front end uses them (the loop's
    :class:`~nbagent.loop._previews.Previews`); each arrives as a
    :class:`~nbagent.events.ToolPreviewed`, which :meth:`wait` returns."""

    @property
    def timeout(self) -> float | None:
        """Seconds one preview may take (None: no limit)."""

    @property
    def closed(self) -> bool:
        """Whether the call was answered (no preview runs any more)."""

    def ask(self, arguments: Any) -> int | None:
        """Preview edited ``arguments`` (thread-safe): the revision its ToolPreviewed will carry,
        None once the call is answered; raises ArgumentsError for arguments an approval would
        refuse."""

    async def wait(self, revision: int = 0) -> Any:
        """The ToolPreviewed of ``revision`` once it is there, None if the call was answered
        first or a newer edit replaced it (on the run's loop)."""

    def wait_blocking(self, revision: int = 0, timeout: float | None = None) -> Any:
        """:meth:`wait` from another thread, for at most ``timeout`` seconds."""

    def close(self) -> None:
        """The call was answered: stop what still runs and release every waiter."""


@dataclass(frozen=True)
class ApprovalRequest:
    """One call waiting for a decision.

    ``input`` is what will run unless the person edits it (a before-tool hook may already have
    changed what the model sent). ``fingerprint`` binds a decision to the run, the call id and
    those arguments: a click from a stale card (another run, other arguments) is refused.
    ``timeout``: seconds until the call is answered "approval timed out" (None: no limit).
    ``preview``: the tool declared a preview, which front ends show while the call waits.
    ``schema``: the tool's input schema (read-only), for front ends that offer an edit form;
    :meth:`check_arguments` says whether edited arguments would be accepted. ``previews``
    (when ``preview``): the call's previews, to wait for the first one (``wait``) or to preview
    an edit before approving it (``ask``); see :class:`CallPreviews`.
    """

    call: ToolCall
    input: Any
    title: str | None = None
    fingerprint: str = ""
    run_id: str = ""
    timeout: float | None = None
    preview: bool = False
    checker: Callable[[Any], Any] | None = field(default=None, compare=False, repr=False)
    schema: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    previews: CallPreviews | None = field(default=None, compare=False, repr=False)

    @classmethod
    def for_call(
        cls,
        call: ToolCall,
        input: Any,
        title: str | None = None,
        *,
        run_id: str = "",
        timeout: float | None = None,
        preview: bool = False,
        checker: Callable[[Any], Any] | None = None,
        schema: Mapping[str, Any] | None = None,
        previews: CallPreviews | None = None,
    ) -> ApprovalRequest:
        fingerprint = _fingerprint(call, input, run_id)
        return cls(
            call, input, title, fingerprint, run_id, timeout, preview, checker, schema, previews
        )

    @property
    def tool_name(self) -> str:
        return self.call.name

    def check_arguments(self, arguments: Any) -> Any:
        """Edited arguments as the call would run with them (a fresh JSON copy).

        Raises :class:`~nbagent.errors.ArgumentsError` saying why they would be refused: not a
        JSON object, too large or deep, or not matching the tool's schema. Without a checker
        (a request made by hand) only the JSON checks apply.
        """
        if self.checker is not None:
            return self.checker(arguments)
        from ._edits import checked_arguments

        return checked_arguments(arguments, self.tool_name)


@dataclass(frozen=True)
class ApprovalBinding:
    """What a decision was about: the run, the call id, and the SHA-256 of the exact arguments
    (:func:`arguments_hash`) that ran, or would have run."""

    run_id: str
    call_id: str
    arguments_hash: str


@dataclass(frozen=True)
class Decision:
    """Approve or deny one call.

    ``reason`` reaches the model on a denial (and names the rule that decided, ``by="rule"``).
    ``always`` asks the approver to allow this tool without asking for the rest of the session.
    ``arguments``: an approval with edited arguments (None: as proposed); the call runs with
    exactly these once they pass the tool's schema, and the model is told. ``binding`` is set
    by the loop when it acts on the decision.
    """

    approved: bool
    reason: str | None = None
    always: bool = False
    by: str = ""
    arguments: Any = field(default=None, compare=False)
    binding: ApprovalBinding | None = field(default=None, compare=False)

    @property
    def by_policy(self) -> bool:
        """Decided without a person (a policy, a rule, "always allow", a script or an error):
        however long it took, nobody was waited for."""
        return self.by in _POLICY_DECIDERS


#: The ``by`` of decisions no person made (a person's are "person", "terminal", "timeout"
#: after waiting for one, or "" from an approver of the user's own).
_POLICY_DECIDERS = frozenset({"auto", "deny", "rule", "always", "script", "error"})


def approve(reason: str | None = None, *, always: bool = False, arguments: Any = None) -> Decision:
    """An approve decision; ``arguments`` runs the call with edited arguments instead."""
    return Decision(True, reason, always, arguments=arguments)


def deny(reason: str | None = None) -> Decision:
    """A deny decision; the model reads ``reason``."""
    return Decision(False, reason)


@runtime_checkable
class Approver(Protocol):
    """Gives a decision for one call. May take as long as a person needs; may be cancelled."""

    async def decide(self, request: ApprovalRequest) -> Decision: ...


# An approver may also define ``known_decision(request) -> Decision | None``: a decision it can
# give without asking anyone (an "always allow" rule). The loop then skips ApprovalRequested.
# And ``forbidden(request) -> Decision | None``: a denial that holds for every call, also one
# that needs no approval and one a person approved with edited arguments (a deny rule).
# And ``pause(pause) -> Resume`` (sync or async): step mode's door, the same one decisions come
# through (see nbagent.inspection.stepping); an approver without it cannot step a run. The repeat
# guard (nbagent.loop._repeats) asks through it too, at a pause of kind "repeat"; without it, a run
# that repeats itself is stopped. And ``known_resume(pause) -> Resume | None``: an answer it can
# give without asking anyone (an "allow repeats TOOL" rule).


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


class ScriptedApprover:
    """Decisions given in advance: a sequence (in request order) or a mapping by tool name.

    Records every request it saw. Running out of scripted decisions denies, saying so.
    """

    def __init__(
        self,
        decisions: Iterable[DecisionLike] | Mapping[str, DecisionLike] = (),
        *,
        pauses: Iterable[Resume] = (),
    ) -> None:
        self.by_tool: dict[str, DecisionLike] = {}
        self.queue: list[DecisionLike] = []
        if isinstance(decisions, Mapping):
            self.by_tool = dict(decisions)
        else:
            self.queue = list(decisions)
        self.requests: list[ApprovalRequest] = []
        #: Step mode: the resumes to give, one per pause, in order (then: run to the end).
        self.pauses: list[Resume] = list(pauses)
        self.paused: list[StepPause] = []

    async def pause(self, pause: StepPause) -> Resume:
        """The next scripted :class:`~nbagent.inspection.stepping.Resume` (once none is left: run to
        the end, or at a ``"repeat"`` pause stop); every pause is kept in :attr:`paused`."""
        from ..inspection.stepping import run_to_end, stop_run

        self.paused.append(pause)
        if self.pauses:
            return self.pauses.pop(0)
        # a repeat nobody scripted ends the run, as a call nobody scripted is denied
        return stop_run() if pause.kind == "repeat" else run_to_end()

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


@dataclass
class _PendingPause:
    pause: StepPause
    future: asyncio.Future[Resume]
    loop: asyncio.AbstractEventLoop


class InteractiveApprover:
    """Waits for a person: each request becomes a future that :meth:`resolve` settles.

    ``resolve`` is thread-safe (widget callbacks may arrive on another thread) and idempotent:
    only the first decision for a call counts, a decision whose fingerprint does not match the
    pending call (another run, other arguments) is refused, an approval with edited arguments
    that the tool's schema refuses is refused, and a decision after the run ended does nothing.
    Tools allowed "always" are approved without asking for the rest of the session, unless
    ``remember_always`` is False (a :class:`~nbagent.approvals.rules.RuleApprover` in front keeps
    them as rules instead, which can be removed).
    """

    def __init__(self, *, remember_always: bool = True) -> None:
        # By call id, oldest first: calls of two runs may share an id (offline and scripted
        # models number their calls alike), and each must wait for its own decision.
        self._pending: dict[str, list[_Pending]] = {}
        self._lock = threading.Lock()
        self.remember_always = remember_always
        self.always_allowed: set[str] = set()
        self.decided: dict[str, Decision] = {}
        self._pauses: dict[str, _PendingPause] = {}

    async def pause(self, pause: StepPause) -> Resume:
        """Step mode: wait until :meth:`resume` answers ``pause`` (a Next, Run to end or Stop
        click)."""
        import asyncio

        loop = asyncio.get_running_loop()
        waiting = _PendingPause(pause, loop.create_future(), loop)
        with self._lock:
            self._pauses[pause.id] = waiting
        try:
            return await waiting.future
        finally:
            with self._lock:
                self._pauses.pop(pause.id, None)

    def paused(self) -> list[StepPause]:
        """Pauses waiting for a resume."""
        with self._lock:
            return [p.pause for p in self._pauses.values() if not p.future.done()]

    def resume(self, pause_id: str, resume: Resume) -> bool:
        """Answer the pause ``pause_id`` (thread-safe, first answer wins); False when there is no
        such pause waiting, or ``resume`` would break the history (``StepPause.check`` says why)."""
        from ..inspection.stepping import StepEditError

        with self._lock:
            waiting = self._pauses.get(pause_id)
            if waiting is None or waiting.future.done():
                return False
            try:
                waiting.pause.check(resume)
            except StepEditError:
                return False
            del self._pauses[pause_id]

        return _settle(waiting.loop, waiting.future, resume)

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
            self._pending.setdefault(request.call.id, []).append(pending)
        try:
            return await pending.future
        finally:
            with self._lock:
                pending.done = True
                waiting = [p for p in self._pending.get(request.call.id, ()) if p is not pending]
                if waiting:
                    self._pending[request.call.id] = waiting
                else:
                    self._pending.pop(request.call.id, None)

    def pending(self) -> list[ApprovalRequest]:
        """Requests still waiting for a decision."""
        with self._lock:
            return [p.request for same in self._pending.values() for p in same if not p.done]

    def resolve(self, call_id: str, decision: Decision, *, fingerprint: str | None = None) -> bool:
        """Settle the pending request for ``call_id`` (the one ``fingerprint`` names, when calls
        of several runs share the id; else the oldest); False if there is none (or it was
        settled, or ``fingerprint`` matches no call waiting, or the edited arguments do not fit
        the tool: :meth:`ApprovalRequest.check_arguments` says why)."""
        with self._lock:
            pending = next(
                (
                    p
                    for p in self._pending.get(call_id, ())
                    if not p.done and fingerprint in (None, p.request.fingerprint)
                ),
                None,
            )
            if pending is None:
                return False
            if decision.approved and decision.arguments is not None:
                try:
                    pending.request.check_arguments(decision.arguments)
                except ArgumentsError:
                    return False
            pending.done = True
            if decision.approved and decision.always and self.remember_always:
                self.always_allowed.add(pending.request.tool_name)
            self.decided[call_id] = decision

        return _settle(pending.loop, pending.future, decision)


def _settle(loop: Any, future: Any, value: Any) -> bool:
    """Give ``future`` its value on its own loop, from any thread (first value wins); False
    when the loop is closed (the run is over)."""

    def settle() -> None:
        if not future.done():
            future.set_result(value)

    try:
        loop.call_soon_threadsafe(settle)
    except RuntimeError:
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
