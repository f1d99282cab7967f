"""What the loop's parts read from one another, named as Protocols so that imports run one way.

An :class:`~nbagent.Agent` starts a :class:`~nbagent.loop.run.Run` and hands it itself; the run's
step driver hands each part of a step to its room (:mod:`nbagent.loop._turn`,
:mod:`nbagent.loop._callbatch`, :mod:`nbagent.loop._stepmode`, :mod:`nbagent.loop._ending`), and
each valid call to :mod:`nbagent.loop._calls`.
The run reads the agent's conversation and settings, the step's parts read and write the run,
and a call reads its run, through these Protocols rather than the classes, so the imports go
``agent -> run -> _callbatch -> _calls -> _loopstate`` and never back up.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .._ground.spending import Account, Reservation
    from ..approvals.approval import Approver
    from ..approvals.hooks import AfterToolHook, BeforeToolHook
    from ..content import ToolResult
    from ..events import AbandonedCall, AgentEvent, RunResult
    from ..generation import Answer, Generator, Options, Usage
    from ..inspection.exchange import Exchange
    from ..inspection.stepping import StepPause
    from ..limits import Budget, Limits
    from ..messages import Message, ToolResultPart
    from ..output import TypedAnswer
    from ..schema import CompiledSchema
    from ..tools import Definition, Tool, ToolCall
    from ._eventqueue import EventQueue
    from ._snapshots import HistoryLog
    from ._timing import TimelineBuilder

__all__ = ["AgentState", "LoopState", "RunState"]


class AgentState(Protocol):
    """The agent as its runs read it (:class:`~nbagent.Agent` is the one): the conversation a
    run adds to, the model, limits, timeouts and hooks, and whether a run holds it."""

    generator: Generator
    messages: list[Message]
    instructions: str | None
    limits: Limits
    observers: list[Callable[[str, AgentEvent], Any]]
    conversation_id: str
    max_concurrency: int | None
    tool_timeout: float | None
    approval_timeout: float | None
    hook_timeout: float | None
    preview_timeout: float | None
    before_tool_hooks: list[BeforeToolHook]
    after_tool_hooks: list[AfterToolHook]
    _schemas: dict[str, CompiledSchema]
    _running: bool


class RunState(Protocol):
    """A run as each of its calls reads it (:class:`~nbagent.loop.run.Run` is the one): its id,
    approver, limits, tools and agent, the step it is at, and where events and progress go."""

    id: str
    approver: Approver
    limits: Limits
    tools: dict[str, Tool]
    schemas: dict[str, CompiledSchema]
    agent: AgentState
    _steps: int

    def emit(self, event: AgentEvent) -> None: ...

    def _progress(self, call_id: str) -> Callable[[ToolResult, float], None]: ...

    def _abandon(self, handle: AbandonedCall) -> None: ...


class LoopState(RunState, Protocol):
    """A run as the parts of its step read and write it (:class:`~nbagent.loop.run.Run` is the one):
    the request's settings, the answer streaming and the calls still open (what a repair
    answers), counts for the budget, step mode's pauser, the event queue and the result."""

    options: Options
    definitions: tuple[Definition, ...]
    answer: TypedAnswer | None
    exchanges: list[Exchange]
    final: RunResult | None
    _queue: EventQueue
    _history: HistoryLog
    _keep_events: bool
    _heard: bool
    _timeline: TimelineBuilder
    _start_index: int
    _answer: Answer | None
    _open_calls: tuple[ToolCall, ...]
    _finished: dict[str, ToolResultPart]
    _abandoned: dict[str, AbandonedCall]
    _taken: set[str]
    _silenced: set[tuple[str, str]]
    _usage: Usage
    _requests: int
    _observers: tuple[Callable[[str, AgentEvent], Any], ...]
    _budget: Budget | None
    _account: Account | None
    _reservation: Reservation | None
    _stop_detail: str
    _pauser: Callable[[StepPause], Any] | None

    def _tell(self, event: AgentEvent) -> None: ...
