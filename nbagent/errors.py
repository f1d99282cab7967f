"""Every error nbagent raises, as one tree::

    NbagentError
    ├── SchemaError               a tool schema breaks the strict Draft 2020-12 policy
    ├── ToolDefinitionError       a tool cannot be built or registered (bad name, hint, mode …)
    ├── ArgumentsError            call arguments are not a JSON object or fail the schema
    ├── ResultError               a tool result cannot be given to the model
    │   └── ImageError            image bytes that do not decode, or a decompression bomb
    ├── AnswerIncompleteError     tool calls asked of an answer that did not finish normally
    ├── ConfigurationError        no provider/key/model could be resolved; says how to set one
    ├── MCPServerError            an MCP server could not be started or reached; says why
    │   └── MCPSignInError            signing in to it (OAuth) failed, or nobody could sign in
    ├── ExternalAgentError        an external agent (ACP) is missing, failed to start or broke
    ├── RequestRefusedError       a gate on the request path (a course policy) refused it
    ├── RecordingError            a recording is malformed, truncated, or of a newer format
    │   └── ReplayDivergedError       a replayed run asked what the recording does not hold
    ├── GenerationError           talking to a model failed
    │   ├── ProviderError         the provider answered with an HTTP error status
    │   │   ├── BadRequestError           400 — fix the request (schema, model name, history)
    │   │   ├── AuthenticationError       401 — the key is missing or wrong
    │   │   ├── PermissionDeniedError     403 — the key may not use this model/endpoint
    │   │   ├── NotFoundError             404 — wrong model name or base URL
    │   │   ├── RateLimitError            429 — retried, then raised
    │   │   ├── SpendingLimitError        402 / a gateway's budget_exceeded — never retried
    │   │   └── ServerError               5xx / 408 / 409 — retried, then raised
    │   ├── ProviderConnectionError      could not connect / connection dropped (retried)
    │   ├── ProviderTimeoutError         connect or read timeout
    │   └── StreamError                  the stream broke, carried an error event or bad data
    └── AgentError                 the agent loop cannot do what was asked
        ├── RunInProgressError     a second run on a conversation that is already running
        ├── ApprovalError          an approval could not be obtained (no approver able to ask)
        ├── RunFailedError         Agent.run / run_sync: the run failed; carries its RunResult
        ├── BatchInputError        Agent.map: inputs or template unusable (names what is wrong)
        ├── OutputTypeError        output=T cannot be an answer type (no schema, unsatisfiable)
        ├── OutputInvalidError     the model never answered in the asked form (tries used up)
        └── RunAbortedError        a tool (or callback) raised KeyboardInterrupt, SystemExit …

Control flow (step limit, terminate, cancel) is not an error: a run reports why it stopped.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, Generic, Protocol, TypeVar

from .redact import redact_secrets

__all__ = [
    "AgentError",
    "AnswerIncompleteError",
    "ApprovalError",
    "ArgumentsError",
    "AuthenticationError",
    "BadRequestError",
    "BatchInputError",
    "ConfigurationError",
    "ExternalAgentError",
    "FailedRun",
    "GenerationError",
    "ImageError",
    "MCPServerError",
    "MCPSignInError",
    "NbagentError",
    "NotFoundError",
    "OutputInvalidError",
    "OutputTypeError",
    "PermissionDeniedError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderTimeoutError",
    "RecordingError",
    "ReplayDivergedError",
    "RequestRefusedError",
    "RateLimitError",
    "ResultError",
    "RunAbortedError",
    "RunFailedError",
    "RunInProgressError",
    "SchemaError",
    "ServerError",
    "SpendingLimitError",
    "StreamError",
    "ToolDefinitionError",
]


class NbagentError(Exception):
    """Base of every error nbagent raises on purpose."""


class SchemaError(NbagentError):
    """A schema breaks the strict Draft 2020-12 policy; ``pointer`` names where (JSON pointer)."""

    def __init__(self, message: str, pointer: str = "") -> None:
        self.pointer = pointer
        self.reason = message
        where = f" at {pointer!r}" if pointer else " at the schema root"
        super().__init__(f"{message}{where}")


class ToolDefinitionError(NbagentError):
    """A tool cannot be built or registered; the message names the tool and the fix."""


class ArgumentsError(NbagentError):
    """Arguments are not a JSON object or fail the schema; ``violations`` lists (path, message)."""

    def __init__(self, message: str, violations: Sequence[tuple[str, str]] = ()) -> None:
        self.violations: tuple[tuple[str, str], ...] = tuple(violations)
        if self.violations:
            lines = "\n".join(f"  - {path or '(root)'}: {msg}" for path, msg in self.violations)
            message = f"{message}\n{lines}"
        super().__init__(message)


class ResultError(NbagentError):
    """A tool result cannot be given to the model (wrong type, empty image …)."""


class ImageError(ResultError):
    """Image data that does not decode, has an unsupported type, or is a decompression bomb."""


class AnswerIncompleteError(NbagentError):
    """Tool calls were asked of an answer that did not finish normally (rule 8: never run them)."""


class ConfigurationError(NbagentError):
    """No provider, key or model could be resolved; the message says how to set one."""


class MCPServerError(NbagentError):
    """An MCP server could not be used: its command is missing, it crashed or gave no answer
    while starting, its URL cannot be reached. The message says which, with its last stderr."""


class MCPSignInError(MCPServerError):
    """Signing in to an MCP server (OAuth) did not succeed: the authorization server refused
    or did not answer, the browser came back with a wrong ``state``, nobody signed in in time,
    or nobody could (a headless run). The message says which, never a token or a code."""


class ExternalAgentError(NbagentError):
    """An external agent spoken to over the Agent Client Protocol could not be used: it is not
    installed (the message gives the install line), it exited or gave no answer while starting,
    it crashed mid-turn, or it broke the protocol past its bounds (messages too large, too
    many, malformed). The message says which, with the last lines it wrote to stderr."""


class RequestRefusedError(NbagentError):
    """A model request a gate on the request path refused before anything was sent (the
    course policy: AI off, a model not allowed, a budget spent …). The message is one sentence
    naming the rule and where it is written; ``rule`` is the rule's key (``ai``, ``models``,
    ``budget.session.usd`` …), ``ai_off`` whether AI is off. Never retried."""

    def __init__(self, sentence: str, *, rule: str = "", ai_off: bool = False) -> None:
        super().__init__(sentence)
        self.sentence = sentence
        self.rule = rule
        self.ai_off = ai_off


class RecordingError(NbagentError):
    """A recording cannot be used: malformed, truncated, edited into an invalid stream, or
    written by a newer nbagent. The message names the file (or cell) and the problem."""


class ReplayDivergedError(RecordingError):
    """A replayed run departed from its recording: a different tool set or schema, another
    request, a call the recording does not hold. ``step`` is the first diverging step (1-based)
    and ``difference`` says what differed."""

    def __init__(self, message: str, *, step: int = 0, difference: str = "") -> None:
        self.step = step
        self.difference = difference
        super().__init__(message)

    def __reduce__(self) -> Any:
        return (_rebuild_diverged, (str(self), self.step, self.difference))


def _rebuild_diverged(message: str, step: int, difference: str) -> ReplayDivergedError:
    return ReplayDivergedError(message, step=step, difference=difference)


class GenerationError(NbagentError):
    """Talking to a model failed."""

    retryable: bool = False


class ProviderError(GenerationError):
    """The provider answered with an HTTP error status."""

    def __init__(self, message: str, *, status: int | None = None, provider: str = "") -> None:
        self.status = status
        self.provider = provider
        super().__init__(message)


class BadRequestError(ProviderError):
    """HTTP 400: the provider rejected the request; its message says which part."""


class AuthenticationError(ProviderError):
    """HTTP 401: the API key is missing or wrong."""


class PermissionDeniedError(ProviderError):
    """HTTP 403: the key may not use this model or endpoint."""


class NotFoundError(ProviderError):
    """HTTP 404: the model name or base URL is wrong."""


class RateLimitError(ProviderError):
    """HTTP 429: too many requests; retried with backoff before this is raised."""

    retryable = True


class SpendingLimitError(ProviderError):
    """The key's budget or credits are spent: HTTP 402 (OpenRouter), or a gateway's
    ``budget_exceeded`` error (LiteLLM's proxy, on 400 or 429). Never retried: asking again
    costs a request and cannot succeed until someone raises the limit."""


class ServerError(ProviderError):
    """HTTP 5xx, 408 or 409: the provider failed; retried with backoff before this is raised."""

    retryable = True


class ProviderConnectionError(GenerationError):
    """The connection could not be made or dropped; retried before this is raised."""

    retryable = True


class ProviderTimeoutError(GenerationError):
    """A connect or read timeout expired."""

    retryable = True


class StreamError(GenerationError):
    """The response stream broke: dropped, an error event, invalid JSON or UTF-8, no finish."""


class AgentError(NbagentError):
    """The agent loop cannot do what was asked."""


class RunInProgressError(AgentError):
    """A run was started on a conversation that is already running one."""


class ApprovalError(AgentError):
    """A call needs approval and the approver could not give a decision."""


class FailedRun(Protocol):
    """What :class:`RunFailedError` reads from the result it carries (the loop's
    :class:`~nbagent.events.RunResult`): the error tree sits below the loop and names no type
    of it."""

    @property
    def error(self) -> BaseException | None: ...

    @property
    def steps(self) -> int: ...


_Result = TypeVar("_Result", bound=FailedRun)


class RunFailedError(AgentError, Generic[_Result]):
    """A run failed, raised by :meth:`Agent.run` / :meth:`Agent.run_sync` (unless
    ``raise_on_error=False``), so that a failure never looks like an empty answer.

    ``result`` is the run's :class:`~nbagent.events.RunResult` (partial text, the messages it
    added, usage; ``stop_reason == "failed"``); ``error`` (also ``__cause__``) is why it failed.
    The conversation stays valid: the agent can run again.
    """

    def __init__(self, result: _Result) -> None:
        self.result = result
        self.error: BaseException | None = result.error
        cause = result.error
        if cause is not None:
            from ._ground.formatting import error_text

            reason = error_text(cause)  # bounded: the cause may be the person's exception
        else:
            reason = "unknown error"
        reason = redact_secrets(reason)  # the message is printed, logged, saved in a cell
        super().__init__(f"the run failed after {result.steps} step(s): {reason}")

    def __reduce__(self) -> tuple[type[RunFailedError[_Result]], tuple[_Result]]:
        return (type(self), (self.result,))


class BatchInputError(AgentError):
    """:meth:`Agent.map <nbagent.Agent.map>` cannot start: the inputs or the template are not
    usable (a template naming a column the table lacks, a single string instead of a list …).
    Raised before any run starts; the message names what is wrong and what there is."""


class OutputTypeError(AgentError):
    """``output=`` cannot be asked of a run: the Python type has no JSON Schema, the schema is
    one no value can satisfy, or a tool already has the answer tool's name. Raised before any
    request; the message names why."""


class OutputInvalidError(AgentError):
    """The model did not answer in the asked form (``output=``) within the allowed tries.

    The run failed with this as its error; ``answer`` is the model's last answer as it wrote
    it (JSON text, bounded), ``problems`` why it did not fit (the validator's words)."""

    def __init__(self, message: str, *, answer: str = "", problems: str = "") -> None:
        self.answer = answer
        self.problems = problems
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_invalid, (str(self), self.answer, self.problems))


def _rebuild_invalid(message: str, answer: str, problems: str) -> OutputInvalidError:
    return OutputInvalidError(message, answer=answer, problems=problems)


class RunAbortedError(AgentError):
    """User code raised a ``BaseException`` that is not an ``Exception`` (``KeyboardInterrupt``,
    ``SystemExit`` …) inside a run, which stopped the run (``stop_reason == "failed"``).

    Inside the run it never propagates as it is (through the event loop it would kill a
    kernel); once the run ended with every call answered, :meth:`Agent.run
    <nbagent.Agent.run>`, ``run_sync`` and ``stream`` re-raise ``raised`` itself, so Ctrl-C and
    ``sys.exit()`` in a tool mean what they mean in a script. ``tool`` names the tool (None when
    a callback raised it), ``raised`` is what was raised (also ``__cause__``).
    """

    def __init__(self, message: str, *, tool: str | None, raised: BaseException) -> None:
        self.tool = tool
        self.raised = raised
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_aborted, (str(self), self.tool, self.raised))


def raised_to_caller(error: BaseException | None) -> BaseException | None:
    """What a run that ended with ``error`` hands to whoever ran it: the ``KeyboardInterrupt``,
    ``SystemExit`` or other non-``Exception`` a tool or callback raised (None otherwise).

    A ``CancelledError`` a tool raised by itself stays the run's failure: handed on, it would
    read as a cancel of the caller's own task.
    """
    if not isinstance(error, RunAbortedError):
        return None
    raised = error.raised
    # asyncio is not imported for this: where it is not loaded, nothing raised CancelledError
    cancelled = getattr(sys.modules.get("asyncio"), "CancelledError", GeneratorExit)
    if isinstance(raised, (Exception, GeneratorExit, cancelled)):
        return None
    return raised


def _rebuild_aborted(message: str, tool: str | None, raised: BaseException) -> RunAbortedError:
    return RunAbortedError(message, tool=tool, raised=raised)
