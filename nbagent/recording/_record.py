"""Recording: any Generator's stream, passed through and folded into a few events per step."""

from __future__ import annotations

import datetime
import re
import time
from collections.abc import AsyncIterator
from typing import Any

from .. import errors
from ..generation import (
    Finish,
    Generator,
    ProviderToolResultReceived,
    ReasoningDelta,
    Request,
    StreamError,
    StreamEvent,
    StreamRetry,
    TextDelta,
    ToolCallReceived,
    ToolInputDelta,
    ToolInputEnd,
    ToolInputStart,
)
from ..messages import UserMessage
from ..redact import redact_secrets
from ..tools import ToolCall
from ._format import MessageHashes, Recording, Step, fingerprint
from ._format import redacted as _redacted

__all__ = ["RecordingGenerator", "record"]


# --- recording ---------------------------------------------------------------------------------


class _Coalescer:
    """Folds one response's stream events into a few recorded events."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._started = time.monotonic()
        self._calls: dict[str, dict[str, Any]] = {}
        self._parts: dict[str, list[str]] = {}
        self._text: dict[str, Any] | None = None
        self._text_parts: list[str] = []
        self._reasoning: dict[str, Any] | None = None  # unsigned reasoning still growing
        self._reasoning_parts: list[str] = []

    def _ms(self) -> int:
        return int((time.monotonic() - self._started) * 1000)

    def _close_text(self) -> None:
        # Pieces are joined once, when the block ends: joining per piece costs the square of
        # the text's length (300,000 pieces would take minutes).
        if self._text is not None:
            self._text["text"] = redact_secrets("".join(self._text_parts))
            self._text = None
            self._text_parts = []

    def _close_reasoning(self) -> None:
        if self._reasoning is not None:
            # Reasoning is model output too, signed or not: a key the model repeats while it
            # thinks must not reach the file. A signature may carry the text as well (the
            # Responses adapter keeps the whole item in it), so it is redacted the same way.
            # Untouched when nothing credential-shaped is in it (the usual case); when
            # something was, a replay that goes on live may have that block refused by the
            # provider, which is the price of never writing the key.
            item = self._reasoning
            item["text"] = redact_secrets("".join(self._reasoning_parts))
            for key in ("signature", "redacted"):
                if isinstance(item.get(key), str):
                    item[key] = redact_secrets(item[key])
            self._reasoning = None
            self._reasoning_parts = []

    def add(self, event: StreamEvent) -> None:
        now = self._ms()
        if isinstance(event, TextDelta):
            self._close_reasoning()
            if self._text is None:
                self._text = {"type": "text", "text": "", "t": now, "d": 0}
                self.events.append(self._text)
            self._text_parts.append(event.text)
            self._text["d"] = now - self._text["t"]
            return
        self._close_text()
        if isinstance(event, ReasoningDelta):
            item = self._reasoning
            if item is None:
                item = {"type": "reasoning", "text": "", "t": now, "d": 0}
                self.events.append(item)
                self._reasoning = item
            self._reasoning_parts.append(event.text)
            item["d"] = now - item["t"]
            if event.signature is not None:
                item["signature"] = event.signature
            if event.redacted is not None:
                item["redacted"] = event.redacted
            if event.signature is not None or event.redacted is not None:
                self._close_reasoning()  # a signed block is whole: later reasoning is another
            return
        self._close_reasoning()
        if isinstance(event, ToolInputStart):
            call: dict[str, Any] = {
                "type": "call",
                "id": event.call_id,
                "name": event.name,
                "arguments": "",
            }
            call.update({"t": now, "d": 0, "complete": False})
            if event.provider_executed:
                call["provider_executed"] = True
            self._calls[event.call_id] = call
            self._parts[event.call_id] = []
            self.events.append(call)
        elif isinstance(event, ToolInputDelta):
            found = self._calls.get(event.call_id)
            if found is not None:
                self._parts[event.call_id].append(event.delta)
                found["d"] = now - found["t"]
        elif isinstance(event, ToolInputEnd):
            pass
        elif isinstance(event, ToolCallReceived):
            self._received(event.call, now)
        elif isinstance(event, ProviderToolResultReceived):
            result = event.result
            self.events.append(
                {
                    "type": "provider_result",
                    "call_id": result.call_id,
                    "name": result.name,
                    "content": _redacted(result.content),
                    "is_error": result.is_error,
                    "raw": _redacted(result.raw),
                    "t": now,
                }
            )
        elif isinstance(event, Finish):
            usage = event.usage
            self.events.append(
                {
                    "type": "finish",
                    "reason": event.reason,
                    "raw_reason": event.raw_reason,
                    "usage": {
                        "input_tokens": usage.input_tokens,
                        "output_tokens": usage.output_tokens,
                        "cache_read_tokens": usage.cache_read_tokens,
                        "cache_write_tokens": usage.cache_write_tokens,
                    },
                    "t": now,
                }
            )
        elif isinstance(event, StreamError):
            message = redact_secrets(str(event.error))
            self.events.append({"type": "error", "message": message, "t": now})

    def _received(self, call: ToolCall, now: int) -> None:
        found = self._calls.get(call.id)
        streamed = "".join(self._parts.get(call.id, []))
        if found is None:  # a provider that sends complete calls without streaming them
            found = {"type": "call", "id": call.id, "name": call.name, "t": now, "d": 0}
            if call.provider_executed:
                found["provider_executed"] = True
            self.events.append(found)
            self._calls[call.id] = found
            streamed = call.arguments
        found["complete"] = True
        found["arguments"] = redact_secrets(streamed)
        if call.arguments != streamed:  # the provider cleaned the arguments up at the end
            found["final"] = redact_secrets(call.arguments)
        raw = getattr(call, "raw", None)
        if raw is not None:
            found["raw"] = _redacted(raw)

    def finish(self) -> list[dict[str, Any]]:
        """The recorded events; a stream that stopped without an end gets one saying so."""
        self._close_text()
        self._close_reasoning()
        for call_id, call in self._calls.items():
            if not call.get("complete"):
                call["arguments"] = redact_secrets("".join(self._parts.get(call_id, [])))
        if not self.events or self.events[-1]["type"] not in ("finish", "error", "raise"):
            self.events.append(
                {
                    "type": "error",
                    "message": "the recorded run was stopped here, while the model answered",
                    "t": self._ms(),
                }
            )
        return self.events


class RecordingGenerator:
    """A Generator that passes another one's stream through and records it (see the module)."""

    def __init__(self, inner: Generator, recording: Recording | None = None) -> None:
        self.inner = inner
        self.model = getattr(inner, "model", "")
        self.recording = recording or Recording(
            model=_model_name(inner), created=_now(), source="live"
        )
        self._hashes = MessageHashes()

    def __repr__(self) -> str:
        return f"record({self.inner!r})"

    def native_answers(self, schema: Any) -> tuple[bool, str]:
        """A typed answer is asked of the recorded model as it would be without recording."""
        native = getattr(self.inner, "native_answers", None)
        if callable(native):
            answered: tuple[bool, str] = native(schema)
            return answered
        return False, f"{type(self.inner).__name__} has no native structured output"

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        if not self.recording.prompt:  # for people: the first request's latest words
            said = [m for m in request.messages if isinstance(m, UserMessage)]
            self.recording.prompt = redact_secrets(said[-1].text) if said else ""
        step = Step(fingerprint(request, self._hashes))
        self.recording.steps.append(step)
        coalescer = _Coalescer()
        try:
            async for event in self.inner.stream(request):
                if isinstance(event, StreamRetry):
                    coalescer = _Coalescer()  # the void part is not part of the recording
                else:
                    coalescer.add(event)
                yield event
        except errors.NbagentError as exc:  # raised before the stream began: record it too
            step.events = coalescer.finish()
            message = redact_secrets(str(exc))
            step.events.append({"type": "raise", "error": type(exc).__name__, "message": message})
            raise
        finally:
            if not step.events:
                step.events = coalescer.finish()


def record(generator: Generator) -> RecordingGenerator:
    """Wrap ``generator`` so that everything it streams is recorded in ``.recording``."""
    return RecordingGenerator(generator)


def _model_name(generator: Generator) -> str:
    """``provider:model`` for people, e.g. ``OpenAIChat:gpt-4.1-mini`` (no address, no key).
    A model given as a file (``local:/home/me/models/x.gguf``) is named by the file's name: the
    recording travels, and the folders of its author's machine are nobody's business."""
    model = redact_secrets(str(getattr(generator, "model", "") or ""))
    if re.match(r"^(?:[/~\\]|[A-Za-z]:[/\\])", model):
        model = re.split(r"[/\\]", model)[-1]
    kind = type(generator).__name__
    return f"{kind}:{model}" if model and model != kind else kind


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
