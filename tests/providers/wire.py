"""Protocol-accurate SSE bodies, written from the public API references.

OpenAI: ``chat.completion.chunk`` objects as ``data:`` lines, ``usage: null`` on every chunk
when ``stream_options.include_usage`` is set, then a final chunk with ``choices: []`` and the
usage, then ``data: [DONE]``. Anthropic: named events (``event:`` + ``data:`` whose ``type``
matches) in the order message_start, content blocks (start, deltas, stop), message_delta,
message_stop, with ``ping`` anywhere.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from nbagent.generation import (
    Finish,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallReceived,
    ToolInputDelta,
    ToolInputEnd,
    ToolInputStart,
    Usage,
)
from nbagent.tools import ToolCall

_UNSET: Any = object()


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


# --- OpenAI -------------------------------------------------------------------------------------


def oa_chunk(
    delta: dict[str, Any] | None = None,
    finish: str | None = None,
    *,
    usage: Any = None,
    choices: bool = True,
) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
        "object": "chat.completion.chunk",
        "created": 1741569952,
        "model": "gpt-4.1-mini-2025-04-14",
        "service_tier": "default",
        "system_fingerprint": "fp_44709d6fcb",
        "choices": [],
    }
    if choices:
        chunk["choices"] = [
            {"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish}
        ]
    chunk["usage"] = usage
    return chunk


def oa_usage(prompt: int = 82, completion: int = 17, cached: int = 0) -> dict[str, Any]:
    return oa_chunk(
        choices=False,
        usage={
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        },
    )


def oa_call(
    index: int, call_id: str | None = None, name: str | None = None, args: str = ""
) -> dict[str, Any]:
    item: dict[str, Any] = {"index": index}
    if call_id is not None:
        item["id"] = call_id
        item["type"] = "function"
    function: dict[str, Any] = {"arguments": args}
    if name is not None:
        function["name"] = name
    item["function"] = function
    return item


def openai_sse(
    chunks: Iterable[dict[str, Any] | str], *, done: bool = True, eol: str = "\n"
) -> bytes:
    """``data:`` lines for each chunk (a str is written as-is, for comments and faults)."""
    out = []
    for chunk in chunks:
        if isinstance(chunk, str):
            out.append(chunk)
        else:
            out.append(f"data: {dumps(chunk)}{eol}{eol}")
    if done:
        out.append(f"data: [DONE]{eol}{eol}")
    return "".join(out).encode()


#: A turn with text (multi-byte UTF-8) and two parallel calls, arguments in fragments.
OPENAI_TURN = [
    oa_chunk({"role": "assistant", "content": "", "refusal": None}),
    oa_chunk({"content": "héllo"}),
    oa_chunk({"content": " 🌍"}),
    oa_chunk({"tool_calls": [oa_call(0, "call_a", "get_weather")]}),
    oa_chunk({"tool_calls": [oa_call(0, args='{"ci')]}),
    oa_chunk({"tool_calls": [oa_call(0, args='ty": "Zürich"}')]}),
    oa_chunk({"tool_calls": [oa_call(1, "call_b", "now")]}),
    oa_chunk({"tool_calls": [oa_call(1, args="{}")]}),
    oa_chunk({}, "tool_calls"),
    oa_usage(82, 17, cached=64),
]

OPENAI_TURN_EVENTS: list[StreamEvent] = [
    TextDelta("héllo"),
    TextDelta(" 🌍"),
    ToolInputStart("call_a", "get_weather"),
    ToolInputDelta("call_a", '{"ci'),
    ToolInputDelta("call_a", 'ty": "Zürich"}'),
    ToolInputStart("call_b", "now"),
    ToolInputDelta("call_b", "{}"),
    ToolInputEnd("call_a"),
    ToolCallReceived(ToolCall("call_a", "get_weather", '{"city": "Zürich"}')),
    ToolInputEnd("call_b"),
    ToolCallReceived(ToolCall("call_b", "now", "{}")),
    Finish("tool_calls", Usage(82, 17, 64), "tool_calls"),
]


def openai_text(text: str = "héllo 🌍", finish: str = "stop") -> bytes:
    return openai_sse(
        [
            oa_chunk({"role": "assistant", "content": ""}),
            oa_chunk({"content": text}),
            oa_chunk({}, finish),
            oa_usage(),
        ]
    )


# --- Anthropic ----------------------------------------------------------------------------------


def an_event(kind: str, **fields: Any) -> tuple[str, dict[str, Any]]:
    return kind, {"type": kind, **fields}


def an_message_start(
    input_tokens: int = 472, cache_read: int = 0, cache_write: int = 0
) -> tuple[str, dict[str, Any]]:
    return an_event(
        "message_start",
        message={
            "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": "claude-sonnet-4-5-20250929",
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": input_tokens,
                "cache_creation_input_tokens": cache_write,
                "cache_read_input_tokens": cache_read,
                "output_tokens": 2,
            },
        },
    )


def an_block_start(index: int, block: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return an_event("content_block_start", index=index, content_block=block)


def an_delta(index: int, delta: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return an_event("content_block_delta", index=index, delta=delta)


def an_text(index: int, text: str) -> tuple[str, dict[str, Any]]:
    return an_delta(index, {"type": "text_delta", "text": text})


def an_json(index: int, fragment: str) -> tuple[str, dict[str, Any]]:
    return an_delta(index, {"type": "input_json_delta", "partial_json": fragment})


def an_block_stop(index: int) -> tuple[str, dict[str, Any]]:
    return an_event("content_block_stop", index=index)


def an_message_delta(
    stop_reason: str | None, output_tokens: int = 89
) -> tuple[str, dict[str, Any]]:
    return an_event(
        "message_delta",
        delta={"stop_reason": stop_reason, "stop_sequence": None},
        usage={"output_tokens": output_tokens},
    )


PING = an_event("ping")
MESSAGE_STOP = an_event("message_stop")


def anthropic_sse(events: Iterable[tuple[str, dict[str, Any]] | str], *, eol: str = "\n") -> bytes:
    out = []
    for event in events:
        if isinstance(event, str):
            out.append(event)
        else:
            name, data = event
            out.append(f"event: {name}{eol}data: {dumps(data)}{eol}{eol}")
    return "".join(out).encode()


ANTHROPIC_TURN = [
    an_message_start(472, cache_read=100, cache_write=20),
    PING,
    an_block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
    an_delta(0, {"type": "thinking_delta", "thinking": "The user wants "}),
    an_delta(0, {"type": "thinking_delta", "thinking": "the weather."}),
    an_delta(0, {"type": "signature_delta", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA"}),
    an_block_stop(0),
    an_block_start(1, {"type": "text", "text": ""}),
    an_text(1, "héllo"),
    an_text(1, " 🌍"),
    an_block_stop(1),
    an_block_start(2, {"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {}}),
    an_json(2, ""),
    an_json(2, '{"ci'),
    an_json(2, 'ty": "Zürich"}'),
    an_block_stop(2),
    an_block_start(3, {"type": "tool_use", "id": "toolu_01B", "name": "now", "input": {}}),
    an_block_stop(3),
    an_message_delta("tool_use", 89),
    MESSAGE_STOP,
]

ANTHROPIC_TURN_EVENTS: list[StreamEvent] = [
    ReasoningDelta("The user wants "),
    ReasoningDelta("the weather."),
    ReasoningDelta(signature="EqQBCgIYAhIM1gbcDa9GJwZA"),
    TextDelta("héllo"),
    TextDelta(" 🌍"),
    ToolInputStart("toolu_01A", "get_weather"),
    ToolInputDelta("toolu_01A", '{"ci'),
    ToolInputDelta("toolu_01A", 'ty": "Zürich"}'),
    ToolInputEnd("toolu_01A"),
    ToolCallReceived(ToolCall("toolu_01A", "get_weather", '{"city": "Zürich"}')),
    ToolInputStart("toolu_01B", "now"),
    ToolInputEnd("toolu_01B"),
    ToolCallReceived(ToolCall("toolu_01B", "now", "{}")),
    Finish("tool_calls", Usage(592, 89, 100, 20), "tool_use"),
]


def anthropic_text(text: str = "héllo 🌍", stop_reason: str = "end_turn") -> bytes:
    return anthropic_sse(
        [
            an_message_start(),
            an_block_start(0, {"type": "text", "text": ""}),
            an_text(0, text),
            an_block_stop(0),
            an_message_delta(stop_reason, 5),
            MESSAGE_STOP,
        ]
    )


def split_every(body: bytes, at: int) -> Sequence[bytes]:
    return [body[:at], body[at:]]
