"""What the loop's parts read from one another, named as Protocols so that imports run one way.

An :class:`~nbagent.Agent` starts a :class:`~nbagent.run.Run` and hands it itself; the run hands
each valid call to :mod:`nbagent._calls`. The run reads the agent's conversation and settings,
and a call reads its run, through these Protocols rather than the classes, so the imports go
``agent -> run -> _calls -> _loopstate`` and never back up.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .approval import Approver
    from .content import ToolResult
    from .events import AbandonedCall, AgentEvent
    from .generation import Generator
    from .hooks import AfterToolHook, BeforeToolHook
    from .limits import Limits
    from .messages import Message
    from .schema import CompiledSchema
    from .tools import Tool

__all__ = ["AgentState", "RunState"]


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
    """A run as each of its calls reads it (:class:`~nbagent.run.Run` is the one): its id,
    approver, limits, tools and agent, the step it is at, and where events and progress go."""

    id: str
    approver: Approver
    limits: Limits
    tools: dict[str, Tool]
    agent: AgentState
    _steps: int

    def emit(self, event: AgentEvent) -> None: ...

    def _progress(self, call_id: str) -> Callable[[ToolResult, float], None]: ...

    def _abandon(self, handle: AbandonedCall) -> None: ...
