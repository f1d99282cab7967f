"""What a run reports as it happens: the AgentEvent union every front end consumes.

Front ends (notebook view, terminal, tests) read these and nothing else; the only channel back
into the loop is the Approver. Events are values: frozen, safe to keep and to render later.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Literal, Union

from .approval import ApprovalRequest, Decision
from .content import ToolResult
from .generation import FinishReason, Usage, parse_partial_json
from .messages import Message
from .tools import ToolCall

__all__ = [
    "AgentEvent",
    "ApprovalRequested",
    "ApprovalResolved",
    "AssistantTextDelta",
    "CallStatus",
    "ReasoningTextDelta",
    "RunCancelled",
    "RunFailed",
    "RunFinished",
    "RunResult",
    "RunStarted",
    "StepFinished",
    "StepRetried",
    "StepStarted",
    "StopReason",
    "ToolArgumentsDelta",
    "ToolCallReady",
    "ToolCallStarted",
    "ToolFinished",
    "ToolProgress",
    "ToolStarted",
]

#: Why a run stopped. "finished": the model answered without calls; "terminated": every call of
#: the last batch asked to terminate; "max_steps": the step limit; "length": the model hit its
#: token limit (its calls were not run); "cancelled"; "failed".
StopReason = Literal["finished", "terminated", "max_steps", "length", "cancelled", "failed"]

#: How one call ended: ran and succeeded, ran and failed (or timed out), was denied, never ran
#: because the call itself was invalid, or was cancelled.
CallStatus = Literal["done", "error", "timeout", "denied", "invalid", "cancelled"]


@dataclass(frozen=True)
class RunResult:
    """The outcome of one run: final text, messages it added, steps, usage, why it stopped."""

    text: str
    messages: tuple[Message, ...]
    steps: int
    usage: Usage
    stop_reason: StopReason
    error: BaseException | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class RunStarted:
    run_id: str
    prompt: str
    model: str


@dataclass(frozen=True, slots=True)
class StepStarted:
    step: int


@dataclass(frozen=True, slots=True)
class StepRetried:
    """The model's answer broke after it began and is being requested again: front ends drop
    what this step streamed so far (text, reasoning, calls) and show why. Nothing had run."""

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


@dataclass(frozen=True)
class ToolArgumentsDelta:
    """A fragment of a call's arguments; ``partial`` is the best parse so far (for display)."""

    call_id: str
    name: str
    delta: str
    text: str

    @functools.cached_property
    def partial(self) -> Any:
        return parse_partial_json(self.text)


@dataclass(frozen=True, slots=True)
class ToolCallReady:
    """The response finished normally and this call will be handled (validated, approved, run)."""

    step: int
    call: ToolCall
    input: Any


@dataclass(frozen=True, slots=True)
class ApprovalRequested:
    request: ApprovalRequest


@dataclass(frozen=True, slots=True)
class ApprovalResolved:
    call_id: str
    decision: Decision


@dataclass(frozen=True, slots=True)
class ToolStarted:
    """The call is running now."""

    call: ToolCall


@dataclass(frozen=True, slots=True)
class ToolProgress:
    """A provisional update from a running tool; never enters the conversation."""

    call_id: str
    update: ToolResult
    elapsed: float


@dataclass(frozen=True, slots=True)
class ToolFinished:
    """The call's final result, as the model will read it; ``traceback`` only for the person."""

    call: ToolCall
    result: ToolResult
    status: CallStatus
    elapsed: float = 0.0
    traceback: str | None = None


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


AgentEvent = Union[
    RunStarted,
    StepStarted,
    StepRetried,
    AssistantTextDelta,
    ReasoningTextDelta,
    ToolCallStarted,
    ToolArgumentsDelta,
    ToolCallReady,
    ApprovalRequested,
    ApprovalResolved,
    ToolStarted,
    ToolProgress,
    ToolFinished,
    StepFinished,
    RunFinished,
    RunFailed,
    RunCancelled,
]
