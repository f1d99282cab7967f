"""Reading a Chat Completions stream: ``chat.completion.chunk`` events → StreamEvents.

The rules (quirks tolerated, how a response ends, invalid UTF-8) are described in
:mod:`nbagent.providers.openai`, whose adapter is the only user of this parser.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from ..generation import (
    Finish,
    FinishReason,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallReceived,
    ToolInputDelta,
    ToolInputEnd,
    ToolInputStart,
    Usage,
)
from ..tools import ToolCall
from ._failures import StreamFailure
from ._shared import CHAT_REASONING_MARK, DAMAGED_ARGUMENTS, damaged, retryable_error, text_of
from ._sse import loads
from ._strict import drop_added_nulls

__all__ = ["ChunkParser", "reasoning_details"]

#: Finish reasons, lower-cased: OpenAI's, and other servers' words for them (text-generation-
#: inference's ``eos_token``, gateways that pass Anthropic's or Gemini's reasons through).
_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "eos_token": "stop",
    "eos": "stop",
    "stop_sequence": "stop",
    "end_turn": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "tool_use": "tool_calls",
    "length": "length",
    "max_tokens": "length",
    "content_filter": "content_filter",
    "error": "error",
}


class _Call:
    __slots__ = ("args", "damaged", "extra", "id", "name", "started")

    def __init__(self, call_id: str, name: str) -> None:
        self.id = call_id
        self.name = name
        self.args: list[str] = []
        self.started = False
        self.damaged = False  # some of its bytes were invalid UTF-8
        self.extra: Mapping[str, Any] | None = None  # extra_content, to be sent back with it


class ChunkParser:
    """``chat.completion.chunk`` events → StreamEvents (first choice only)."""

    __slots__ = (
        "_by_id",
        "_by_index",
        "_calls",
        "_closed",
        "_details",
        "_done",
        "_learn",
        "_lossy",
        "_origin",
        "_provider",
        "_reason",
        "_strict",
        "_usage",
        "out",
    )

    def __init__(
        self,
        provider: str,
        strict: dict[str, Mapping[str, Any] | None],
        learn_reasoning_content: Callable[[], None] | None = None,
        origin: str = "",
    ) -> None:
        self.out: list[StreamEvent] = []
        self._provider = provider
        self._origin = origin  # the server's host: call metadata goes back only there
        self._strict = strict
        self._learn = learn_reasoning_content
        self._calls: list[_Call] = []
        self._by_index: dict[int, _Call] = {}
        self._by_id: dict[str, _Call] = {}  # every id a call was given, also changed ones
        self._reason: str | None = None
        self._usage: Usage | None = None
        self._closed = False
        self._details: list[dict[str, Any]] = []  # reasoning_details, streamed pieces merged
        self._done = False  # [DONE] arrived
        self._lossy = False  # the current event had invalid UTF-8

    def event(self, name: bytes, data: bytes) -> bool:
        if data == b"[DONE]" or (len(data) < 16 and data.strip() == b"[DONE]"):
            self._done = True
            return True
        chunk, self._lossy = loads(data)
        if not isinstance(chunk, dict):
            raise TypeError(f"a chunk should be a JSON object, not {type(chunk).__name__}")
        error = chunk.get("error")
        if error:
            raise StreamFailure(
                _error_message(self._provider, error), retryable=retryable_error(error)
            )
        choices = chunk.get("choices")
        if choices and not choices[0].get("index"):  # the first choice only (n > 1 is ignored)
            choice = choices[0]
            delta = choice.get("delta")
            if delta:
                self._delta(delta)
            reason = choice.get("finish_reason")
            if reason:
                self._reason = text_of(reason, "finish_reason")
                self._close_calls()
        usage = chunk.get("usage")
        if not usage:
            vendor = chunk.get("x_groq")  # where Groq put the usage before include_usage
            usage = vendor.get("usage") if isinstance(vendor, Mapping) else None
        if usage:
            details = usage.get("prompt_tokens_details") or {}
            self._usage = Usage(
                input_tokens=_count(usage.get("prompt_tokens")),
                output_tokens=_count(usage.get("completion_tokens")),
                cache_read_tokens=_count(details.get("cached_tokens")),
            )
        return False

    def _delta(self, delta: Mapping[str, Any]) -> None:
        content = delta.get("content")
        if content:
            if isinstance(content, str):
                self.out.append(TextDelta(content))
            else:
                self._content_parts(content)
        calls = delta.get("tool_calls")
        if calls:
            self._tool_deltas(calls)
        reasoning = delta.get("reasoning_content")
        if isinstance(reasoning, str) and self._learn is not None:
            self._learn()  # this server speaks reasoning_content: it gets it back
        reasoning = reasoning or delta.get("reasoning")
        if reasoning and isinstance(reasoning, str):  # other shapes are summaries: not text
            self.out.append(ReasoningDelta(reasoning))
        details = delta.get("reasoning_details")
        if details and isinstance(details, list):
            self._add_details(details)
        refusal = delta.get("refusal")
        if refusal:
            self.out.append(TextDelta(text_of(refusal, "refusal")))

    def _add_details(self, details: list[Any]) -> None:
        """Collect ``reasoning_details`` (OpenRouter): pieces of one detail are merged.

        A piece with the ``index`` and ``type`` of the detail before it continues that detail:
        its text fields are appended, its other fields set when not null.
        """
        for piece in details:
            if not isinstance(piece, Mapping):
                continue
            last = self._details[-1] if self._details else None
            if (
                last is not None
                and piece.get("index") is not None
                and piece.get("index") == last.get("index")
                and piece.get("type") == last.get("type")
            ):
                for key, value in piece.items():
                    if key in _DETAIL_TEXT and isinstance(value, str):
                        before = last.get(key)
                        last[key] = (before if isinstance(before, str) else "") + value
                    elif value is not None:
                        last[key] = value
            else:
                self._details.append(dict(piece))

    def _reasoning_details(self) -> None:
        """Hand on the collected ``reasoning_details``, to be sent back to this host."""
        if self._details:
            payload = {"origin": self._origin, "details": self._details}
            signature = CHAT_REASONING_MARK + json.dumps(
                payload, ensure_ascii=False, separators=(",", ":")
            )
            self.out.append(ReasoningDelta(signature=signature))
            self._details = []

    def _content_parts(self, content: Any) -> None:
        """``content`` as typed parts (Mistral): text → text, thinking → reasoning."""
        parts = [content] if isinstance(content, Mapping) else content
        if not isinstance(parts, list):
            raise TypeError(f"delta.content should be text or parts, not {type(content).__name__}")
        kind: Any
        value: Any
        for part in parts:
            if isinstance(part, str):
                kind, value = "text", part
            elif isinstance(part, Mapping):
                kind = part.get("type")
                value = part.get(kind) if isinstance(kind, str) else None
            else:
                continue
            text = _part_text(value)
            if not text:
                continue
            if kind == "text":
                self.out.append(TextDelta(text))
            elif kind in ("thinking", "reasoning"):
                self.out.append(ReasoningDelta(text))
            # other part types (references, images, audio …) carry no text to show here

    def _tool_deltas(self, items: list[dict[str, Any]]) -> None:
        out = self.out
        for position, item in enumerate(items):
            index = item.get("index")
            if not isinstance(index, int):
                index = position
            call_id = item.get("id")
            if call_id is not None and not isinstance(call_id, str):
                raise TypeError(
                    f"a tool call's id should be a string, not {type(call_id).__name__}"
                )
            function = item.get("function") or {}
            name = function.get("name")
            call = self._call_for(index, call_id, bool(name), bool(function))
            if call is None:
                continue  # nothing to start a call with (a stray metadata-only entry)
            extra = item.get("extra_content")
            if isinstance(extra, Mapping) and extra:
                call.extra = extra  # Gemini's thought signature: the API wants it back
            if name and not call.name:
                call.name = text_of(name, "a tool call's name")
                call.damaged |= damaged(call.name, self._lossy)
            args = function.get("arguments")
            if args is not None and not isinstance(args, str):
                args = json.dumps(args)  # a server that sends the object itself
            if args and self._lossy:
                call.damaged |= damaged(args, True)
            if call.started:
                if args:
                    call.args.append(args)
                    out.append(ToolInputDelta(call.id, args))
                continue
            if args:
                call.args.append(args)
            if call.name:
                self._start(call)

    def _call_for(self, index: int, call_id: str | None, named: bool, body: bool) -> _Call | None:
        """The call a fragment belongs to (a new one when it starts a call), or None.

        By the spec a call is named by ``id`` and ``name`` in its first fragment and followed by
        ``index``. Servers differ, so: an id seen before is that call, whatever the index; a new
        id with a name starts a call even at a used index (servers that put every call at
        index 0); a new id without a name continues the call at its index (servers that change
        a call's id after its first fragment); a fragment with neither, at an index never seen,
        continues the latest call (servers whose tail fragments carry another index).
        """
        call = self._by_id.get(call_id) if call_id else None
        if call is None:
            current = self._by_index.get(index)
            if current is not None and call_id and (named or not current.name):
                current = None  # a new call at an index already used
            if current is None and not call_id and not named and self._calls:
                current = self._calls[-1]
            if current is None and not (call_id or body):
                return None
            call = current
        if call is None:
            call = _Call(call_id or f"call_{uuid.uuid4().hex[:24]}", "")
            self._calls.append(call)
        self._by_index[index] = call
        if call_id:
            self._by_id.setdefault(call_id, call)
        return call

    def _start(self, call: _Call) -> None:
        call.started = True
        self.out.append(ToolInputStart(call.id, call.name))
        if call.args:
            self.out.append(ToolInputDelta(call.id, "".join(call.args)))

    def _close_calls(self) -> None:
        if self._closed:
            return
        self._closed = True
        out = self.out
        for call in self._calls:
            if not call.started:
                self._start(call)
            arguments = "".join(call.args)
            if call.damaged:
                arguments = DAMAGED_ARGUMENTS + arguments
            elif not arguments.strip():
                arguments = "{}"
            elif call.name in self._strict:
                arguments = drop_added_nulls(arguments, self._strict[call.name])
            raw = None
            if call.extra is not None:
                raw = {"extra_content": call.extra, "origin": self._origin}
            out.append(ToolInputEnd(call.id))
            out.append(ToolCallReceived(ToolCall(call.id, call.name, arguments, raw=raw)))

    def finished(self) -> bool:
        return self._reason is not None

    def end(self) -> None:
        raw = self._reason
        if raw is None:
            self._end_without_reason()
            return
        self._close_calls()
        reason = _REASONS.get(raw.lower(), "other")
        if reason == "stop" and self._calls:
            reason = "tool_calls"
        elif reason == "tool_calls" and not self._calls:
            reason = "stop"
        self._reasoning_details()
        self.out.append(Finish(reason, self._usage or Usage(), raw))

    def _end_without_reason(self) -> None:
        """[DONE] without a finish reason completes the answer unless a call was cut short."""
        if not self._done:
            raise StreamFailure(
                f"the {self._provider} stream ended without a finish reason; the answer is "
                "incomplete",
                retryable=True,
            )
        for call in self._calls:
            if not call.damaged and not _is_json("".join(call.args)):
                raise StreamFailure(
                    f"the {self._provider} stream ended with [DONE] but no finish reason, and "
                    f"the arguments of call {call.name or call.id!r} are incomplete; the answer "
                    "is incomplete",
                    retryable=True,
                )
        self._close_calls()
        self._reasoning_details()
        self.out.append(Finish("tool_calls" if self._calls else "stop", self._usage or Usage()))


#: The fields of a reasoning detail that stream in pieces.
_DETAIL_TEXT = frozenset({"text", "summary", "data"})


def reasoning_details(signature: str | None, origin: str | None) -> list[Any] | None:
    """The ``reasoning_details`` a reasoning part carries for ``origin``, or None."""
    if not signature or origin is None or not signature.startswith(CHAT_REASONING_MARK):
        return None
    try:
        payload = json.loads(signature[len(CHAT_REASONING_MARK) :])
    except (ValueError, RecursionError):
        return None
    if not isinstance(payload, dict) or payload.get("origin") != origin:
        return None
    details = payload.get("details")
    return details if isinstance(details, list) else None


def _is_json(text: str) -> bool:
    if not text.strip():
        return True  # no arguments: sent on as {}
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def _count(value: Any) -> int:
    """A token count: a non-negative int, or 0 for anything else (null, text, negatives)."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return 0


def _part_text(value: Any) -> str:
    """The text of a typed part's payload: a string, or a list of parts holding text."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        pieces = []
        for item in value:
            if isinstance(item, str):
                pieces.append(item)
            elif isinstance(item, Mapping) and isinstance(item.get("text"), str):
                pieces.append(item["text"])
        return "".join(pieces)
    return ""


def _error_message(provider: str, error: Any) -> str:
    if isinstance(error, Mapping):
        message = error.get("message") or json.dumps(error)[:300]
        kind = error.get("type") or error.get("code")
        where = f" ({kind})" if kind else ""
        return f"{provider} reported an error mid-stream{where}: {message}"
    return f"{provider} reported an error mid-stream: {error}"
