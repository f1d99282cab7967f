"""The one interface between the loop and every model: Request in, StreamEvents out.

A :class:`Generator` streams :data:`StreamEvent` values for a :class:`Request`. It only forwards
tool *definitions*; it never runs a tool. :class:`Answer` assembles a stream, and hands out tool
calls only when the response finished normally (rule 8).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, Union, runtime_checkable

from .content import TextPart
from .errors import AnswerIncompleteError
from .messages import AssistantMessage, AssistantPart, Message, ProviderToolResult, ReasoningPart
from .tools import Definition, ToolCall

__all__ = [
    "Answer",
    "AnswerFormat",
    "AnswerStatus",
    "Finish",
    "FinishReason",
    "Generator",
    "NamedToolChoice",
    "Options",
    "ProviderToolResultReceived",
    "ReasoningDelta",
    "Request",
    "StreamError",
    "StreamEvent",
    "StreamRetry",
    "TextDelta",
    "ToolCallReceived",
    "ToolChoice",
    "ToolInputDelta",
    "ToolInputEnd",
    "ToolInputStart",
    "Usage",
    "MAX_CALL_ID",
    "generate",
]


@dataclass(frozen=True, slots=True)
class NamedToolChoice:
    """Force the model to call this one tool."""

    name: str


ToolChoice = Union[Literal["auto", "none", "required"], NamedToolChoice]


@dataclass(frozen=True)
class Options:
    """Generation settings; ``None`` leaves the provider's default. ``extra`` is merged into the
    provider's request body as-is (for settings nbagent does not name)."""

    tool_choice: ToolChoice = "auto"
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    parallel_tool_calls: bool | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AnswerFormat:
    """Ask for the answer as JSON text matching ``schema``, through the API's own structured
    output (a typed run, see :mod:`nbagent.output`; only sent to a Generator whose
    ``native_answers`` accepted the schema). ``name`` names it where the API wants a name."""

    schema: Mapping[str, Any]
    name: str = "answer"


@dataclass(frozen=True)
class Request:
    """Everything a Generator needs for one model turn."""

    messages: Sequence[Message]
    model: str = ""
    tools: Sequence[Definition] = ()
    instructions: str | None = None
    options: Options = field(default_factory=Options)
    answer_format: AnswerFormat | None = None


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one response (or a sum of them)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


#: Why a response ended, mapped from each provider's own words. "pause": the provider paused a
#: long turn (Anthropic ``pause_turn``) and expects it to be sent back to continue.
FinishReason = Literal["stop", "tool_calls", "pause", "length", "content_filter", "error", "other"]


# --- stream events: a flat tagged union ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of assistant text.

    ``raw``: the provider's item this text belongs to, to send back with it (see
    :attr:`nbagent.content.TextPart.raw`); text with another ``raw`` is another part.
    """

    text: str
    raw: Any = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of model reasoning, or the signature that closes a reasoning block."""

    text: str = ""
    signature: str | None = None
    redacted: str | None = None


@dataclass(frozen=True, slots=True)
class ToolInputStart:
    """The model began a tool call; its arguments follow as :class:`ToolInputDelta`."""

    call_id: str
    name: str
    provider_executed: bool = False


@dataclass(frozen=True, slots=True)
class ToolInputDelta:
    """A fragment of a call's JSON arguments."""

    call_id: str
    delta: str


@dataclass(frozen=True, slots=True)
class ToolInputEnd:
    """The call's arguments are complete (not yet validated)."""

    call_id: str


@dataclass(frozen=True, slots=True)
class ToolCallReceived:
    """A complete call; usable only if the response then finishes normally."""

    call: ToolCall


@dataclass(frozen=True, slots=True)
class ProviderToolResultReceived:
    """The provider ran one of its own tools and sent the result."""

    result: ProviderToolResult


@dataclass(frozen=True, slots=True)
class Finish:
    """The response ended; ``raw_reason`` is the provider's own word for why."""

    reason: FinishReason
    usage: Usage = Usage()
    raw_reason: str | None = None


@dataclass(frozen=True, slots=True)
class StreamError:
    """The response failed mid-stream; ``error`` says how (never carries a key)."""

    error: Exception


@dataclass(frozen=True, slots=True)
class StreamRetry:
    """The request is about to be sent again (nothing was run): an overloaded or rate-limited
    answer, a dropped connection, or a response that broke after output began.

    Yielded *before* the new request is sent, so a consumer that counts requests (a run's
    :class:`~nbagent.Budget`) can refuse it by closing the stream. Everything the turn streamed
    so far is void: consumers drop it and start the turn afresh. ``attempt`` counts from 1;
    ``delay`` is the wait before the new request, in seconds.
    """

    reason: str
    attempt: int = 1
    delay: float = 0.0


#: Every event a Generator streams for one model answer (nothing else knows a wire format).
StreamEvent = Union[
    StreamRetry,
    TextDelta,
    ReasoningDelta,
    ToolInputStart,
    ToolInputDelta,
    ToolInputEnd,
    ToolCallReceived,
    ProviderToolResultReceived,
    Finish,
    StreamError,
]


@runtime_checkable
class Generator(Protocol):
    """A model behind one API. ``stream`` yields events for one turn and executes nothing.

    Errors before the first event (HTTP status, connection) are raised; errors after it are
    yielded as :class:`StreamError` so the partial answer stays inspectable.
    """

    model: str

    def stream(self, request: Request) -> AsyncIterator[StreamEvent]: ...


AnswerStatus = Literal["streaming", "complete", "length", "failed", "aborted"]


#: Longest call id kept as sent; a longer one is replaced (see :class:`Answer`).
MAX_CALL_ID = 128


class _CallIds:
    """Makes every call id unique in the conversation, deterministically.

    The first call with an id keeps it. A later call with an id already used (in this answer or
    in ``taken``, the ids already in the history), an empty one, one longer than
    :data:`MAX_CALL_ID` or one with unprintable characters gets ``<id>_<n>`` (``call_<n>`` for an
    unusable id) with the smallest ``n >= 2`` (``>= 1``) not used yet. Fragments follow the
    most recent call started under their original id; the k-th complete call with an id is the
    k-th call started with it. Provider-executed calls keep their ids (their results refer to
    them).
    """

    __slots__ = ("_current", "_received", "_reserved", "_started", "_used")

    def __init__(self, reserved: Collection[str]) -> None:
        self._reserved = reserved  # the history's ids: read, never copied (it may be long)
        self._used: set[str] = set()
        self._started: dict[str, list[str]] = {}
        self._current: dict[str, str] = {}
        self._received: dict[str, int] = {}

    def _taken(self, call_id: str) -> bool:
        return call_id in self._used or call_id in self._reserved

    def _assign(self, original: str, provider_executed: bool) -> str:
        usable = 0 < len(original) <= MAX_CALL_ID and original.isprintable()
        if provider_executed or (usable and not self._taken(original)):
            new = original
        else:
            base, n = (original, 2) if usable else ("call", 1)
            while self._taken(f"{base}_{n}"):
                n += 1
            new = f"{base}_{n}"
        self._used.add(new)
        return new

    def start(self, event: ToolInputStart) -> ToolInputStart:
        new = self._assign(event.call_id, event.provider_executed)
        self._started.setdefault(event.call_id, []).append(new)
        self._current[event.call_id] = new
        return event if new == event.call_id else replace(event, call_id=new)

    def follow(self, call_id: str) -> str:
        return self._current.get(call_id, call_id)

    def receive(self, call: ToolCall) -> ToolCall:
        index = self._received.get(call.id, 0)
        self._received[call.id] = index + 1
        started = self._started.get(call.id, ())
        if index < len(started):
            new = started[index]
        else:
            new = self._assign(call.id, call.provider_executed)
        return call if new == call.id else replace(call, id=new)


#: Text pieces an Answer keeps separate before joining them into one chunk.
_FOLD_TEXT = 64


class Answer:
    """A model turn assembled from its stream.

    ``tool_calls()`` answers only when the response finished normally ("stop"/"tool_calls"):
    failed, aborted, filtered and length-stopped answers may hold truncated calls, which must
    never run (rule 8). ``partial_tool_calls`` shows them for display only.

    Every call gets an id unique in the conversation: ``taken_ids`` are the ids already in the
    history, and a repeated, empty or unusable id is renamed deterministically (see
    :class:`_CallIds`), so no call is lost, none runs twice, and the history stays valid.
    :meth:`add` returns the event as the loop should see it (renamed where needed).
    """

    __slots__ = (
        "_calls",
        "_ids",
        "_order",
        "_parts",
        "_taken",
        "_text",
        "_text_chunks",
        "_text_raw",
        "_thinking",
        "error",
        "finish",
        "status",
        "usage",
    )

    def __init__(self, taken_ids: Collection[str] = ()) -> None:
        self._taken = taken_ids
        self._reset()

    def _reset(self) -> None:
        self._parts: list[AssistantPart] = []
        self._text: list[str] = []  # the newest text pieces, folded into _text_chunks now and then
        self._text_chunks: list[str] = []
        self._text_raw: Any = None  # the provider item of the open text
        self._thinking: list[str] = []  # the open reasoning part (no signature yet), in pieces
        self._calls: dict[str, ToolCall] = {}
        self._order: list[str] = []
        self._ids = _CallIds(self._taken)
        self.status: AnswerStatus = "streaming"
        self.finish: Finish | None = None
        self.error: Exception | None = None
        self.usage = Usage()

    def add(self, event: StreamEvent) -> StreamEvent:
        """Fold one event into the answer; return it with its call id made unique if needed.

        An ending is final and the worst one wins: a finish after an error, or a normal finish
        after a length stop, never makes the answer complete, and anything after a finish
        (text, a call) fails it. Its calls are then never executed.
        """
        if self.status != "streaming" and not isinstance(event, (StreamRetry, StreamError)):
            if isinstance(event, Finish):
                if (
                    event.reason not in ("stop", "tool_calls", "pause")
                    and self.status == "complete"
                ):
                    self.finish, self.usage = event, event.usage
                    self.status = "length" if event.reason == "length" else "failed"
                return event
            if self.status != "failed":
                from .errors import StreamError as StreamBroken

                self.status = "failed"
                self.error = StreamBroken("the response went on after it had ended")
        if isinstance(event, ToolInputDelta):
            new = self._ids.follow(event.call_id)
            return event if new == event.call_id else ToolInputDelta(new, event.delta)
        if isinstance(event, ToolInputStart):
            return self._ids.start(event)
        if isinstance(event, ToolInputEnd):
            new = self._ids.follow(event.call_id)
            return event if new == event.call_id else ToolInputEnd(new)
        if isinstance(event, StreamRetry):
            self._reset()  # the partial answer was abandoned; the retry streams it anew
        elif isinstance(event, TextDelta):
            self._flush_thinking()
            if event.raw is not self._text_raw:  # another of the provider's items
                self._flush_text()
                self._text_raw = event.raw
            self._append_text(event.text)
        elif isinstance(event, ToolCallReceived):
            self._flush_thinking()
            self._flush_text()
            call = self._ids.receive(event.call)
            if call is not event.call:
                event = ToolCallReceived(call)
            self._calls[call.id] = call
            self._order.append(call.id)
            self._parts.append(call)
        elif isinstance(event, ReasoningDelta):
            self._reason(event)
        elif isinstance(event, ProviderToolResultReceived):
            self._flush_thinking()
            self._flush_text()
            self._parts.append(event.result)
        elif isinstance(event, Finish):
            self.finish = event
            self.usage = event.usage
            if event.reason in ("stop", "tool_calls", "pause"):
                self.status = "complete"
            elif event.reason == "length":
                self.status = "length"
            else:
                self.status = "failed"
        elif isinstance(event, StreamError):
            self.error = event.error
            self.status = "failed"
        return event

    def abort(self) -> None:
        """Mark the answer aborted (the run was cancelled mid-stream)."""
        if self.status == "streaming":
            self.status = "aborted"

    def end(self) -> None:
        """Called when the stream ended: an answer with no finish event failed."""
        if self.status == "streaming":
            from .errors import StreamError as StreamBroken

            self.status = "failed"
            self.error = StreamBroken("the response ended without a finish reason")

    def _append_text(self, text: str) -> None:
        pieces = self._text
        pieces.append(text)
        if len(pieces) >= _FOLD_TEXT:  # a str per piece costs ~50 bytes more than its text
            self._text_chunks.append("".join(pieces))
            pieces.clear()

    def _reason(self, event: ReasoningDelta) -> None:
        """Reasoning pieces join the open part (one without a signature) until one closes it.

        Pieces are kept in a list and joined once: rebuilding the part for each piece made a
        long reasoning stream cost time quadratic in its length.
        """
        self._flush_text()
        if not self._thinking:
            last = self._parts[-1] if self._parts else None
            if isinstance(last, ReasoningPart) and last.signature is None and not last.redacted:
                self._parts.pop()  # still open (message() was read mid-stream): reopen it
                self._thinking.append(last.text)
        if not self._thinking and (event.signature is not None or event.redacted):
            self._parts.append(ReasoningPart(event.text, event.signature, event.redacted))
            return
        self._thinking.append(event.text)
        if event.signature is not None or event.redacted:
            self._flush_thinking(event.signature, event.redacted)

    def _flush_thinking(self, signature: str | None = None, redacted: str | None = None) -> None:
        if self._thinking:
            self._parts.append(ReasoningPart("".join(self._thinking), signature, redacted))
            self._thinking.clear()

    def _flush_text(self) -> None:
        if self._text or self._text_chunks:
            self._parts.append(TextPart("".join([*self._text_chunks, *self._text]), self._text_raw))
            self._text_chunks.clear()
            self._text.clear()

    @property
    def ok(self) -> bool:
        """True when the response finished normally."""
        return self.status == "complete"

    @property
    def text(self) -> str:
        """All assistant text so far."""
        done = "".join(p.text for p in self._parts if isinstance(p, TextPart))
        return done + "".join(self._text_chunks) + "".join(self._text)

    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The calls to execute; raises :class:`AnswerIncompleteError` unless :attr:`ok`."""
        if not self.ok:
            reason = self.finish.raw_reason if self.finish else self.status
            raise AnswerIncompleteError(
                f"the response did not finish normally ({reason}); its tool calls may be "
                "truncated and must not be executed"
            )
        return tuple(self._calls[i] for i in self._order if not self._calls[i].provider_executed)

    @property
    def partial_tool_calls(self) -> tuple[ToolCall, ...]:
        """Every call seen, complete or not: for display, never for execution."""
        return tuple(self._calls[i] for i in self._order)

    def message(self, *, with_calls: bool | None = None) -> AssistantMessage:
        """The assistant message for the conversation history.

        Calls are included only when the answer is ok (a failed answer's calls would have no
        results, and every provider rejects a history with an unanswered call).
        """
        self._flush_thinking()
        self._flush_text()
        include = self.ok if with_calls is None else with_calls
        parts = (
            self._parts
            if include
            else [p for p in self._parts if not isinstance(p, (ToolCall, ProviderToolResult))]
        )
        return AssistantMessage(tuple(parts))


async def generate(generator: Generator, request: Request) -> Answer:
    """Run one turn to completion and return the assembled :class:`Answer`.

    Errors raised before the stream starts propagate; errors inside it mark the answer failed.
    """
    answer = Answer()
    stream = generator.stream(request)
    try:
        async for event in stream:
            answer.add(event)
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()
    answer.end()
    return answer
