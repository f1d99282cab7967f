"""Protocol-accurate SSE bodies, written from the public API references.

OpenAI: ``chat.completion.chunk`` objects as ``data:`` lines, ``usage: null`` on every chunk
when ``stream_options.include_usage`` is set, then a final chunk with ``choices: []`` and the
usage, then ``data: [DONE]``. Anthropic: named events (``event:`` + ``data:`` whose ``type``
matches) in the order message_start, content blocks (start, deltas, stop), message_delta,
message_stop, with ``ping`` anywhere. OpenAI Responses: named events (``event:`` + ``data:``
whose ``type`` matches, each with its ``sequence_number``): ``response.created``,
``response.in_progress``, then per output item ``response.output_item.added``, its content
events and ``response.output_item.done``, then ``response.completed`` (or ``.incomplete`` /
``.failed``) holding the whole response; no ``[DONE]``.
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


# --- OpenAI Responses ---------------------------------------------------------------------------

RS_MODEL = "gpt-5-mini-2025-08-07"
RS_ENCRYPTED = "gAAAAABo0_enc-reasoning-blob-Zm9vYmFy"


def rs_usage(input_tokens: int = 82, output_tokens: int = 17, cached: int = 0) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + output_tokens,
    }


class ResponsesTurn:
    """A protocol-accurate Responses stream, built item by item.

    ``message``, ``call`` and ``reasoning`` append an output item with every event the API
    sends for it; ``completed``, ``incomplete`` and ``failed`` end the response (the final
    response repeats every item in ``output``). ``events`` may be edited before ``body()``.
    """

    def __init__(self, model: str = RS_MODEL) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.output: list[dict[str, Any]] = []
        self.model = model
        self.add("response.created", response=self.response("in_progress"))
        self.add("response.in_progress", response=self.response("in_progress"))

    def response(self, status: str, **fields: Any) -> dict[str, Any]:
        return {
            "id": "resp_68af4030592c81938ec0a5fbab4a3e9f05438e46b5f69a3b",
            "object": "response",
            "created_at": 1756315696,
            "status": status,
            "background": False,
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "max_output_tokens": None,
            "model": self.model,
            "output": list(self.output) if status != "in_progress" else [],
            "parallel_tool_calls": True,
            "previous_response_id": None,
            "reasoning": {"effort": "medium", "summary": None},
            "store": False,
            "temperature": 1.0,
            "text": {"format": {"type": "text"}, "verbosity": "medium"},
            "tool_choice": "auto",
            "tools": [],
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": None,
            "metadata": {},
            **fields,
        }

    def add(self, kind: str, **fields: Any) -> None:
        self.events.append((kind, {"type": kind, "sequence_number": len(self.events), **fields}))

    def message(
        self,
        *pieces: str,
        item_id: str = "msg_68af403f3c1c8193b5b2c43e",
        phase: str | None = None,
    ) -> None:
        index = len(self.output)
        text = "".join(pieces)
        ids = {"item_id": item_id, "output_index": index, "content_index": 0}
        item: dict[str, Any] = {
            "id": item_id,
            "type": "message",
            "status": "in_progress",
            "content": [],
        }
        if phase is not None:  # gpt-5.3-codex and later label each message
            item["phase"] = phase
        self.add(
            "response.output_item.added", output_index=index, item={**item, "role": "assistant"}
        )
        part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
        self.add("response.content_part.added", **ids, part=part)
        for piece in pieces:
            self.add("response.output_text.delta", **ids, delta=piece, logprobs=[])
        self.add("response.output_text.done", **ids, text=text, logprobs=[])
        self.add("response.content_part.done", **ids, part={**part, "text": text})
        done = {
            **item,
            "status": "completed",
            "content": [{**part, "text": text}],
            "role": "assistant",
        }
        self.add("response.output_item.done", output_index=index, item=done)
        self.output.append(done)

    def call(
        self,
        call_id: str,
        name: str,
        *fragments: str,
        item_id: str | None = None,
        **fields: Any,
    ) -> None:
        """A function call; ``fields`` are more of its item's fields (``namespace`` …)."""
        index = len(self.output)
        item_id = item_id or "fc_" + call_id
        item = {
            "id": item_id,
            "type": "function_call",
            "status": "in_progress",
            "arguments": "",
            "call_id": call_id,
            "name": name,
            **fields,
        }
        self.add("response.output_item.added", output_index=index, item=item)
        for fragment in fragments:
            self.add(
                "response.function_call_arguments.delta",
                item_id=item_id,
                output_index=index,
                delta=fragment,
            )
        arguments = "".join(fragments)
        self.add(
            "response.function_call_arguments.done",
            item_id=item_id,
            output_index=index,
            arguments=arguments,
        )
        done = {**item, "status": "completed", "arguments": arguments}
        self.add("response.output_item.done", output_index=index, item=done)
        self.output.append(done)

    def reasoning(
        self,
        *summary: Sequence[str],
        encrypted: str | None = RS_ENCRYPTED,
        item_id: str = "rs_68af4030baa48193b0b43b4c2a176a1a",
    ) -> dict[str, Any]:
        """A reasoning item with one summary part per sequence of deltas; returns the item."""
        index = len(self.output)
        ids = {"item_id": item_id, "output_index": index}
        added: dict[str, Any] = {"id": item_id, "type": "reasoning", "summary": []}
        if encrypted is not None:
            added["encrypted_content"] = encrypted[: len(encrypted) // 2]  # may be partial here
        self.add("response.output_item.added", output_index=index, item=added)
        parts = []
        for number, pieces in enumerate(summary):
            text = "".join(pieces)
            empty = {"type": "summary_text", "text": ""}
            self.add(
                "response.reasoning_summary_part.added", **ids, summary_index=number, part=empty
            )
            for piece in pieces:
                self.add(
                    "response.reasoning_summary_text.delta",
                    **ids,
                    summary_index=number,
                    delta=piece,
                    obfuscation="x1",
                )
            self.add("response.reasoning_summary_text.done", **ids, summary_index=number, text=text)
            part = {"type": "summary_text", "text": text}
            self.add("response.reasoning_summary_part.done", **ids, summary_index=number, part=part)
            parts.append(part)
        done: dict[str, Any] = {"id": item_id, "type": "reasoning", "summary": parts}
        if encrypted is not None:
            done["encrypted_content"] = encrypted
        self.add("response.output_item.done", output_index=index, item=done)
        self.output.append(done)
        return done

    def tool_search(self, query: str, namespace: str, functions: list[str]) -> None:
        """A hosted (server-run) tool search that loads ``functions`` of ``namespace``: a
        ``tool_search_call`` item and its ``tool_search_output``, as gpt-5.4 and later send."""
        index = len(self.output)
        call = {
            "id": f"ts_{index}",
            "type": "tool_search_call",
            "status": "in_progress",
            "execution": "server",
            "call_id": None,
            "arguments": {"query": query},
            "created_by": "resp_68af",
        }
        self.add("response.output_item.added", output_index=index, item=call)
        done = {**call, "status": "completed"}
        self.add("response.output_item.done", output_index=index, item=done)
        self.output.append(done)
        tools = [
            {
                "type": "namespace",
                "name": namespace,
                "description": f"{namespace} tools",
                "tools": [
                    {
                        "type": "function",
                        "name": name,
                        "description": name,
                        "defer_loading": True,
                        "parameters": {"type": "object", "properties": {}},
                        "strict": False,
                    }
                    for name in functions
                ],
            }
        ]
        found = {
            "id": f"tso_{index + 1}",
            "type": "tool_search_output",
            "status": "completed",
            "execution": "server",
            "call_id": None,
            "tools": tools,
            "created_by": "resp_68af",
        }
        self.add("response.output_item.added", output_index=index + 1, item=found)
        self.add("response.output_item.done", output_index=index + 1, item=found)
        self.output.append(found)

    def completed(self, usage: dict[str, Any] | None = None) -> ResponsesTurn:
        usage = usage or rs_usage()
        self.add("response.completed", response=self.response("completed", usage=usage))
        return self

    def incomplete(self, reason: str = "max_output_tokens") -> ResponsesTurn:
        response = self.response(
            "incomplete", incomplete_details={"reason": reason}, usage=rs_usage()
        )
        self.add("response.incomplete", response=response)
        return self

    def failed(
        self, code: str = "server_error", message: str = "The model failed."
    ) -> ResponsesTurn:
        error = {"code": code, "message": message}
        self.add("response.failed", response=self.response("failed", error=error))
        return self

    def body(self, eol: str = "\n") -> bytes:
        return responses_sse(self.events, eol=eol)


def responses_sse(events: Iterable[tuple[str, dict[str, Any]] | str], *, eol: str = "\n") -> bytes:
    """``event:`` + ``data:`` per event (a str is written as-is, for comments and faults)."""
    return anthropic_sse(events, eol=eol)  # the same framing: named events


def responses_text(text: str = "héllo 🌍") -> bytes:
    turn = ResponsesTurn()
    turn.message(text)
    return turn.completed().body()


def split_every(body: bytes, at: int) -> Sequence[bytes]:
    return [body[:at], body[at:]]
