"""What a run reports as it happens: the AgentEvent union every front end consumes.

Front ends (notebook view, terminal, tests) read these and nothing else; the only channel back
into the loop is the Approver. Events are values: frozen, safe to keep and to render later.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Union

from ._ground.textbuf import StreamedArguments, TextBuffer
from .approvals.approval import ApprovalRequest, Decision
from .content import ToolResult
from .generation import FinishReason, Usage
from .messages import Message
from .tools import ToolCall

if TYPE_CHECKING:
    from .inspection.exchange import Exchange
    from .inspection.stepping import StepPause
    from .timeline import Timeline, Timing

__all__ = [
    "STOP_WORDS",
    "AbandonedCall",
    "AgentEvent",
    "ApprovalRequested",
    "ApprovalResolved",
    "HelperEvent",
    "AssistantTextDelta",
    "CallStatus",
    "ReasoningTextDelta",
    "RunCancelled",
    "RunFailed",
    "RunFinished",
    "RunResult",
    "RunStarted",
    "StepFinished",
    "StepPaused",
    "StepResumed",
    "StepRetried",
    "StepStarted",
    "StopReason",
    "ToolArgumentsChanged",
    "ToolArgumentsDelta",
    "ToolCallReady",
    "ToolCallRepeated",
    "ToolCallStarted",
    "ToolFinished",
    "ToolHookApplied",
    "ToolPreviewed",
    "ToolProgress",
    "ToolStarted",
    "abandoned_calls_shown",
]

log = logging.getLogger("nbagent")

#: Why a run stopped. "finished": the model answered without calls; "terminated": every call of
#: the last batch asked to terminate; "max_steps": the step limit; "length": the model hit its
#: token limit (its calls were not run); "budget": the run's budget (tokens, requests or
#: dollars, its helpers' included) could not pay for the next model request, reserved before
#: each is sent (``RunResult.stop_detail`` says which); "repeated_call": the model made the
#: same call again and again with the same result, and nobody let it go on (see
#: nbagent.loop._repeats); "cancelled"; "failed".
StopReason = Literal[
    "finished",
    "terminated",
    "max_steps",
    "length",
    "budget",
    "repeated_call",
    "cancelled",
    "failed",
]

#: Each stop reason in the words a person reads under a run: "budget" or "max_steps" alone read
#: as if the run had simply ended, when it was cut short before its answer.
STOP_WORDS: dict[str, str] = {
    "finished": "finished",
    "terminated": "finished: a tool ended the run",
    "max_steps": "stopped at the step limit, before the model answered",
    "length": "stopped: the model hit its output token limit",
    "budget": "stopped: its budget was spent, so no further request was sent",
    "repeated_call": "stopped: the model made the same call again and again, getting the same "
    "result",
    "cancelled": "cancelled",
    "failed": "failed",
}

#: How one call ended: ran and succeeded, ran and failed (or timed out), was denied, never ran
#: because the call itself was invalid, or was cancelled.
CallStatus = Literal["done", "error", "timeout", "denied", "invalid", "cancelled"]


@dataclass(frozen=True)
class RunResult:
    """The outcome of one run: final text, messages it added, steps, usage, why it stopped.

    ``exchanges`` holds, for each model turn, the request exactly as the model received it and
    what came back (:class:`~nbagent.inspection.exchange.Exchange`):
    ``result.exchanges[0].request``.
    :meth:`fork` starts a new conversation from any of those steps.
    """

    text: str
    messages: tuple[Message, ...]
    steps: int
    usage: Usage
    stop_reason: StopReason
    error: BaseException | None = field(default=None, compare=False)
    timing: Timing | None = field(default=None, compare=False, repr=False)
    exchanges: tuple[Exchange, ...] = field(default=(), compare=False, repr=False)
    run_id: str = field(default="", compare=False)
    #: The agent that ran it, for :meth:`fork` (not pickled: a result travels without it).
    agent: Any = field(default=None, compare=False, repr=False)
    #: A typed run's validated answer (``output=``, see :mod:`nbagent.output`): an instance of
    #: the type asked for, which may itself be None (``output=Optional[int]``): whether there
    #: is one at all is :attr:`has_output`, never ``output is None``.
    output: Any = field(default=None, compare=False)
    #: The typed run ended with a valid answer (its value is :attr:`output`, None included);
    #: False for a run that asked for none or ended without one.
    has_output: bool = field(default=False, compare=False)
    #: Why the run stopped, in one sentence, where the stop reason alone does not say: a
    #: budget that was spent or could not be kept (``"budget"``); "" otherwise.
    stop_detail: str = field(default="", compare=False)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["agent"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for key, value in state.items():
            object.__setattr__(self, key, value)

    def exchange(self, step: int) -> Exchange:
        """The exchange of model turn ``step`` (1-based); a clear error for a step the run does
        not have."""
        from .inspection.exchange import exchange_of

        return exchange_of(self.exchanges, step, self.run_id or "this run")

    def fork(self, step: int, *, agent: Any = None, **changes: Any) -> Any:
        """A new :class:`~nbagent.Agent` whose conversation is this run's as the model saw it at
        ``step`` (see :meth:`nbagent.Agent.fork`): run it with another prompt, model or tools.
        The original is untouched. ``agent``: the agent to copy (default: the one that ran)."""
        source = agent if agent is not None else self.agent
        if source is None:
            from .errors import AgentError

            raise AgentError(
                "this result does not know its agent (it was loaded or pickled): "
                "agent.fork(result, step) forks it from an agent of your choice"
            )
        return source.fork(self, step, **changes)

    def timeline(self) -> Timeline:
        """The run over time (:class:`~nbagent.timeline.Timeline`): steps, calls, waits; its
        ``svg()`` is a picture, and in a notebook it shows itself."""
        from .timeline import Timeline

        if self.timing is not None:
            return self.timing.build(self.stop_reason)
        return Timeline((), 0.0, self.stop_reason, self.steps)


@dataclass(frozen=True, slots=True)
class RunStarted:
    run_id: str
    prompt: str
    model: str
    #: The agent's conversation (:attr:`nbagent.Agent.conversation_id`): the same for every run
    #: of one conversation, unique across processes.
    conversation_id: str = ""
    #: A typed run's way of answering (``output=``, see :mod:`nbagent.output`): "native" (the
    #: answer streams as JSON text) or "tool" (as the ``final_answer`` call's arguments); ""
    #: for a run that answers text. A front end shows the value filling in from it.
    answer_mode: str = ""
    #: The typed answer's value is its ``value`` property (an output that is not an object).
    answer_wrapped: bool = False


@dataclass(frozen=True, slots=True)
class StepStarted:
    step: int


@dataclass(frozen=True, slots=True)
class StepPaused:
    """Step mode: the run waits at ``pause`` (before a model request, or before a batch of
    calls) until its approver gives a :class:`~nbagent.inspection.stepping.Resume`."""

    pause: StepPause


@dataclass(frozen=True, slots=True)
class StepResumed:
    """The run goes on from a pause: ``action`` "next", "run" or "stop"; ``edits`` says, one line
    each, what was changed before the request (results rewritten or removed, instructions, the
    model); ``kind`` which pause it was."""

    pause_id: str
    step: int
    action: str
    edits: tuple[str, ...] = ()
    #: "request" (the pause was before a model request) or "calls" (before a batch of calls).
    kind: str = "request"


@dataclass(frozen=True, slots=True)
class StepRetried:
    """The model request is being sent again (the answer broke off, or the server was
    overloaded or limited the rate): front ends drop what this step streamed so far (text,
    reasoning, calls; often nothing) and show why. Nothing had run. Each retry counts against
    ``Budget(requests=...)``."""

    step: int
    reason: str
    attempt: int = 1
    delay: float = 0.0


@dataclass(frozen=True, slots=True)
class AssistantTextDelta:
    step: int
    text: str


@dataclass(frozen=True, slots=True)
class ReasoningTextDelta:
    step: int
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    """The model began a call; its arguments stream next."""

    step: int
    call_id: str
    name: str
    title: str | None = None
    provider_executed: bool = False
    #: Arguments that hold code, and their language (the tool's ``code_arguments``).
    code_arguments: Mapping[str, str] = field(default_factory=dict)


class ToolArgumentsDelta(StreamedArguments):
    """New fragment(s) of a call's arguments as the model streams them.

    ``delta`` is what arrived since the previous ToolArgumentsDelta of this call: append the
    deltas to rebuild the arguments (a reader that fell more than ``Limits.event_backlog``
    events behind gets consecutive fragments merged into one delta; nothing is lost). Once a
    call's arguments pass ``Limits.max_argument_bytes``, no more deltas come for it: such a
    call is refused, and its ToolFinished says why.
    ``text`` (the arguments so far) and ``partial`` (its best parse, for display) are computed
    on first read and cached, so reading only ``delta`` costs nothing. (Reading ``text`` of
    every event costs time quadratic in the arguments' size: accumulate ``delta`` instead.)
    """

    __slots__ = ("call_id", "delta", "name")
    __match_args__ = ("call_id", "name", "delta", "text")
    call_id: str
    name: str
    delta: str

    def __init__(
        self,
        call_id: str,
        name: str,
        delta: str,
        text: str | None = None,
        *,
        source: tuple[TextBuffer, int] | None = None,
    ) -> None:
        object.__setattr__(self, "call_id", call_id)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "delta", delta)
        self._init_arguments(text if text is not None or source else delta, source)

    def __repr__(self) -> str:
        return (
            f"ToolArgumentsDelta(call_id={self.call_id!r}, name={self.name!r}, "
            f"delta={self.delta!r})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolArgumentsDelta):
            return NotImplemented
        return (self.call_id, self.name, self.delta, self.text) == (
            other.call_id,
            other.name,
            other.delta,
            other.text,
        )

    def __hash__(self) -> int:
        return hash((self.call_id, self.name, self.delta))


@dataclass(frozen=True, slots=True)
class ToolCallReady:
    """The response finished normally and this call will be handled (validated, approved, run)."""

    step: int
    call: ToolCall
    input: Any


@dataclass(frozen=True, slots=True)
class ToolArgumentsChanged:
    """A call's arguments changed before it ran: ``by`` "person" (edited on approval) or
    "hook" (a before-tool hook, named in ``hook``). It runs with ``arguments`` (checked against
    the tool's schema); ``previous`` is what it had before. The model reads a note saying so."""

    call_id: str
    by: str
    arguments: Any
    previous: Any
    hook: str | None = None


@dataclass(frozen=True, slots=True)
class ToolHookApplied:
    """A hook acted on a call: a before hook "vetoed" it, an after hook "rewrote the result"
    the model reads, or a hook "failed" (raised or hung; the call was refused, or its result
    withheld from the model). ``detail`` says why or what, for people. (A before hook that
    rewrote the arguments is a :class:`ToolArgumentsChanged`.)"""

    call_id: str
    stage: Literal["before", "after"]
    hook: str
    action: Literal["vetoed", "rewrote the result", "failed"]
    detail: str = ""


@dataclass(frozen=True, slots=True)
class ApprovalRequested:
    request: ApprovalRequest


@dataclass(frozen=True, slots=True)
class ToolPreviewed:
    """What a call waiting for approval would do, from its tool's preview: ``status`` "done"
    (``result`` is the preview), "error" (it raised) or "timeout"; then ``result`` says why.
    For the person only: a preview never enters the conversation.

    ``arguments`` are the arguments it previewed; ``revision`` 0 means those the call was
    proposed with, 1, 2, … the edits a person asked to preview, in order (only the newest edit's
    preview is ever reported)."""

    call_id: str
    result: ToolResult
    status: Literal["done", "error", "timeout"]
    elapsed: float = 0.0
    arguments: Any = None
    revision: int = 0


@dataclass(frozen=True, slots=True)
class ApprovalResolved:
    """The decision for a call; ``decision.binding`` ties it to the run, the call id and the
    hash of the arguments it was about (those that run, when approved)."""

    call_id: str
    decision: Decision


@dataclass(frozen=True, slots=True)
class ToolStarted:
    """The call is running now, with ``input`` (after any edit or hook; None when unknown)."""

    call: ToolCall
    input: Any = None


@dataclass(frozen=True, slots=True)
class ToolProgress:
    """A provisional update from a running tool; never enters the conversation."""

    call_id: str
    update: ToolResult
    elapsed: float


_SHOWN: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "nbagent_abandoned_calls_shown", default=False
)


@contextlib.contextmanager
def abandoned_calls_shown() -> Iterator[None]:
    """Runs started inside this block are shown by a front end that reports every abandoned
    call itself (``ToolFinished.abandoned``): the loop then logs its own notice at INFO, where
    it would otherwise warn, so that it is not repeated, unstyled, beside the front end's."""
    token = _SHOWN.set(True)
    try:
        yield
    finally:
        _SHOWN.reset(token)


def abandonment_is_shown() -> bool:
    """Whether the current run's front end reports abandoned calls (see
    :func:`abandoned_calls_shown`)."""
    return _SHOWN.get()


class AbandonedCall:
    """A tool function the loop gave up on that may still be running.

    A tool that does not stop when cancelled (a sync function cannot be interrupted; an async
    one may swallow ``CancelledError``) is abandoned after a grace period: its call is answered
    (the model reads that its function is still running and its result will be ignored) and the
    run goes on. Front ends use this handle to show when the function really ends:
    :meth:`done` says whether it has, and :meth:`add_done_callback` calls ``fn(handle)`` once
    when it returns or raises, from whichever thread it ends on (at once, on the caller's
    thread, if it already ended). A callback that raises is logged, never propagated.
    """

    __slots__ = ("_callbacks", "_done", "_lock", "call_id", "name")

    def __init__(self, call_id: str, name: str) -> None:
        self.call_id = call_id
        self.name = name
        self._lock = threading.Lock()
        self._done = False
        self._callbacks: list[Callable[[AbandonedCall], object]] = []

    def done(self) -> bool:
        """True once the abandoned function has returned or raised."""
        return self._done

    def add_done_callback(self, fn: Callable[[AbandonedCall], object]) -> None:
        """Call ``fn(self)`` once when the function ends (now, if it already has)."""
        with self._lock:
            if not self._done:
                self._callbacks.append(fn)
                return
        self._call(fn)

    def _finish(self) -> None:
        """The function ended (called by the loop, from any thread)."""
        with self._lock:
            if self._done:
                return
            self._done = True
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            self._call(fn)

    def _call(self, fn: Callable[[AbandonedCall], object]) -> None:
        try:
            fn(self)
        except Exception:
            log.exception("a done callback of abandoned call %s failed", self.call_id)

    def __repr__(self) -> str:
        state = "ended" if self._done else "still running"
        return f"AbandonedCall({self.name!r}, {self.call_id!r}, {state})"


@dataclass(frozen=True, slots=True)
class ToolFinished:
    """The call's final result, as the model will read it; ``traceback`` only for the person.

    ``abandoned`` is set when the call was answered while its function was still running (it
    ignored cancellation after a timeout, a cancelled run, or a sibling that stopped the run):
    see :class:`AbandonedCall`. None when the function had ended (or never started).
    ``original`` is what the tool itself returned when the model reads something else (an
    after-tool hook rewrote it, or a note says the arguments were changed): show it to people.
    """

    call: ToolCall
    result: ToolResult
    status: CallStatus
    elapsed: float = 0.0
    traceback: str | None = None
    abandoned: AbandonedCall | None = None
    original: ToolResult | None = None


@dataclass(frozen=True, slots=True)
class ToolCallRepeated:
    """The call about to finish (its ToolFinished comes next) repeats an earlier one: the same
    tool, the same arguments (canonical JSON) and the same result, ``times`` times in a row now,
    counting from the call ``first_call_id`` (see :mod:`nbagent.loop._repeats`). Front ends fold it
    into that call's card ("the same call, 3 times"); the model reads a note with its result."""

    call_id: str
    name: str
    first_call_id: str
    times: int


@dataclass(frozen=True, slots=True)
class StepFinished:
    step: int
    usage: Usage
    finish_reason: FinishReason | None
    tool_calls: int


@dataclass(frozen=True, slots=True)
class RunFinished:
    result: RunResult


@dataclass(frozen=True, slots=True)
class RunFailed:
    """The run stopped on an error; the conversation is still valid for the next run."""

    error: BaseException
    result: RunResult


@dataclass(frozen=True, slots=True)
class RunCancelled:
    """The run was cancelled; every call in the history has exactly one result."""

    result: RunResult


#: Every event a run emits, the one stream every front end reads (see the events concept page).
@dataclass(frozen=True)
class HelperEvent:
    """An event of a helper agent's run (``agent.as_tool``), inside the call that runs it.

    ``call_id`` / ``tool_name``: the caller's call; ``depth``: 1 for a helper of this run, 2 for
    a helper of that helper (whose events arrive wrapped once more); ``run_id``: the helper's
    run; ``event``: its event, as its own readers see it.
    """

    call_id: str
    tool_name: str
    depth: int
    run_id: str
    event: Any


AgentEvent = Union[
    RunStarted,
    StepStarted,
    StepRetried,
    StepPaused,
    StepResumed,
    AssistantTextDelta,
    ReasoningTextDelta,
    ToolCallStarted,
    ToolArgumentsDelta,
    ToolCallReady,
    ToolArgumentsChanged,
    ToolHookApplied,
    ApprovalRequested,
    ToolPreviewed,
    ApprovalResolved,
    ToolStarted,
    ToolProgress,
    ToolFinished,
    ToolCallRepeated,
    StepFinished,
    RunFinished,
    RunFailed,
    RunCancelled,
    HelperEvent,
]
