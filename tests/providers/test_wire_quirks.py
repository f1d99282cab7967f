"""Streams as real servers send them, beyond the documented happy path.

Fixtures imitate recorded wire traffic: keep-alives followed by empty ``data:`` lines, invalid
UTF-8, Mistral's typed content parts, DeepSeek's ``reasoning_content``, Anthropic's MCP
connector blocks, ``null`` in optional fields, and a line that never ends.
"""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import pytest

from nbagent import errors
from nbagent.agent import Agent
from nbagent.generation import (
    Finish,
    ProviderToolResultReceived,
    ReasoningDelta,
    Request,
    StreamError,
    StreamEvent,
    TextDelta,
    ToolCallReceived,
    ToolInputDelta,
    ToolInputEnd,
    ToolInputStart,
    Usage,
)
from nbagent.messages import (
    AssistantMessage,
    ProviderToolResult,
    ReasoningPart,
    ToolMessage,
    ToolResultPart,
    messages_from_json,
    messages_to_json,
    user,
)
from nbagent.providers.openai import OpenAIChat
from nbagent.tools import ToolCall, tool

from . import wire
from .conftest import Reply, Server
from .helpers import ADAPTERS, KEY, answer_of, collect, openai
from .wire import oa_call, oa_chunk, openai_sse

# --- empty data: lines ---------------------------------------------------------------------------

#: OpenRouter-style keep-alive comments, each followed by an empty ``data:`` line.
OPENAI_WITH_EMPTY_DATA = (
    b": OPENROUTER PROCESSING\n\ndata:\n\n"
    + openai_sse([oa_chunk({"content": "hé"})], done=False)
    + b": keep-alive\ndata: \n\ndata:   \n\n"
    + openai_sse([oa_chunk({}, "stop")])
)
ANTHROPIC_WITH_EMPTY_DATA = (
    wire.anthropic_sse([wire.an_message_start(), wire.an_block_start(0, {"type": "text"})])
    + b": keep-alive\ndata:\n\nevent: ping\ndata: \n\n"
    + wire.anthropic_sse(
        [wire.an_text(0, "hé"), wire.an_block_stop(0), wire.an_message_delta("end_turn", 5)]
    )
    + b"data:\n\n"
    + wire.anthropic_sse([wire.MESSAGE_STOP])
)
RESPONSES_WITH_EMPTY_DATA = (
    b": keep-alive\ndata:\n\n"
    + wire.responses_sse(
        [
            wire.an_event("response.output_item.added", item={"id": "m", "type": "message"}),
            wire.an_event("response.output_text.delta", item_id="m", delta="hé"),
        ]
    )
    + b": keep-alive\ndata: \n\ndata:   \n\n"
    + wire.responses_sse(
        [
            wire.an_event("response.output_item.done", item={"id": "m", "type": "message"}),
            wire.an_event("response.completed", response={"status": "completed"}),
        ]
    )
    + b"data:\n\n"
)
EMPTY_DATA = {
    "openai": (OPENAI_WITH_EMPTY_DATA, [TextDelta("hé"), Finish("stop", Usage(), "stop")]),
    "responses": (
        RESPONSES_WITH_EMPTY_DATA,
        [TextDelta("hé"), Finish("stop", Usage(), "completed")],
    ),
    "anthropic": (
        ANTHROPIC_WITH_EMPTY_DATA,
        [TextDelta("hé"), Finish("stop", Usage(472, 5), "end_turn")],
    ),
}


@pytest.mark.parametrize("kind", ["openai", "anthropic", "responses"])
async def test_empty_data_lines_are_skipped_at_every_split(kind: str, server: Server) -> None:
    body, expected = EMPTY_DATA[kind]
    model = ADAPTERS[kind](server)
    server.queue(Reply(body))
    assert await collect(model) == expected
    for at in range(1, len(body)):
        server.queue(Reply([body[:at], body[at:]]))
        assert await collect(model) == expected, f"split at byte {at}"
    await model.aclose()


async def test_a_byte_order_mark_before_the_first_chunk_is_skipped(server: Server) -> None:
    # Without a role-only chunk first, the first line carries text: a BOM must not hide it.
    plain = openai_sse([oa_chunk({"content": "Hi"}), oa_chunk({}, "stop")])
    marked = b"\xef\xbb\xbf" + plain
    model = openai(server)
    server.queue(Reply(marked), Reply([marked[:1], marked[1:2], marked[2:]]))
    expected = [TextDelta("Hi"), Finish("stop", Usage(), "stop")]
    assert await collect(model) == expected
    assert await collect(model) == expected
    await model.aclose()


# --- invalid UTF-8 ------------------------------------------------------------------------------

#: Text with a bad byte, a call whose arguments hold one, and a clean sibling call.
OPENAI_DAMAGED = (
    b'data: {"choices": [{"index": 0, "delta": {"content": "caf\xe9!"}}]}\n\n'
    b'data: {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "a", '
    b'"function": {"name": "f", "arguments": "{\\"q\\": \\"\xc3"}}]}}]}\n\n'
    b'data: {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, '
    b'"function": {"arguments": "x\\"}"}}]}}]}\n\n'
    b'data: {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "id": "b", '
    b'"function": {"name": "f", "arguments": "{\\"q\\": \\"\xc3\xa9\\"}"}}]}}]}\n\n'
    b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}\n\n'
    b"data: [DONE]\n\n"
)
ANTHROPIC_DAMAGED = (
    wire.anthropic_sse([wire.an_message_start(), wire.an_block_start(0, {"type": "text"})])
    + b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, '
    b'"delta": {"type": "text_delta", "text": "caf\xe9!"}}\n\n'
    + wire.anthropic_sse(
        [
            wire.an_block_stop(0),
            wire.an_block_start(1, {"type": "tool_use", "id": "a", "name": "f", "input": {}}),
        ]
    )
    + b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 1, '
    b'"delta": {"type": "input_json_delta", "partial_json": "{\\"q\\": \\"\xc3"}}\n\n'
    + wire.anthropic_sse(
        [
            wire.an_json(1, 'x"}'),
            wire.an_block_stop(1),
            wire.an_block_start(2, {"type": "tool_use", "id": "b", "name": "f", "input": {}}),
            wire.an_json(2, '{"q": "é"}'),
            wire.an_block_stop(2),
            wire.an_message_delta("tool_use", 5),
            wire.MESSAGE_STOP,
        ]
    )
)
DAMAGED_NOTE = "(not run: the provider sent these arguments with invalid UTF-8 bytes"


def check_damaged(events: list[StreamEvent]) -> None:
    answer = answer_of(events)
    assert answer.ok, events
    assert answer.text == "caf\ufffd!"
    bad, good = answer.tool_calls()
    assert bad.id == "a" and bad.arguments.startswith(DAMAGED_NOTE)
    assert bad.arguments.endswith('{"q": "\ufffdx"}')  # what arrived, shown but never run
    with pytest.raises(errors.ArgumentsError):
        bad.input  # noqa: B018 - not JSON: the loop answers it with an error
    assert good == ToolCall("b", "f", '{"q": "é"}')


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_invalid_utf8_is_replaced_and_damaged_calls_are_marked_at_every_split(
    kind: str, server: Server
) -> None:
    body = OPENAI_DAMAGED if kind == "openai" else ANTHROPIC_DAMAGED
    model = ADAPTERS[kind](server)
    server.queue(Reply(body))
    check_damaged(await collect(model))
    for at in range(1, len(body)):
        server.queue(Reply([body[:at], body[at:]]))
        check_damaged(await collect(model))
    await model.aclose()


async def test_a_real_replacement_character_is_not_damage(server: Server) -> None:
    args = '{"q": "\ufffd"}'  # the model itself wrote U+FFFD, in valid UTF-8
    server.queue(
        Reply(
            openai_sse(
                [
                    oa_chunk({"tool_calls": [oa_call(0, "c", "f", args)]}),
                    oa_chunk({}, "tool_calls"),
                ]
            )
        )
    )
    model = openai(server)
    assert answer_of(await collect(model)).tool_calls() == (ToolCall("c", "f", args),)
    await model.aclose()


# --- Mistral: delta.content as typed parts -------------------------------------------------------


def mistral_chunk(content: Any, finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "2b4d7f0e6c1a4b8f9e3d5c7a1b2c3d4e",
        "object": "chat.completion.chunk",
        "created": 1750152000,
        "model": "magistral-medium-2506",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}],
    }


MISTRAL = [
    {
        **mistral_chunk(""),
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
    },
    mistral_chunk([{"type": "thinking", "thinking": [{"type": "text", "text": "The user "}]}]),
    mistral_chunk([{"type": "thinking", "thinking": [{"type": "text", "text": "greets me."}]}]),
    mistral_chunk([{"type": "text", "text": "Bonjour"}]),
    mistral_chunk([{"type": "reference", "reference_ids": [1, 2]}]),
    mistral_chunk([{"type": "text", "text": " !"}, {"type": "image_url", "image_url": "x"}]),
    mistral_chunk({"type": "text", "text": " Ça va ?"}),
    mistral_chunk([{"type": "future_part"}, {"type": "text"}, 7, None]),
    {
        **mistral_chunk("", "stop"),
        "usage": {"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21},
    },
]


async def test_mistral_typed_content_parts(server: Server) -> None:
    body = openai_sse(MISTRAL)
    expected = [
        ReasoningDelta("The user "),
        ReasoningDelta("greets me."),
        TextDelta("Bonjour"),
        TextDelta(" !"),
        TextDelta(" Ça va ?"),
        Finish("stop", Usage(12, 9), "stop"),
    ]
    model = openai(server)
    server.queue(Reply(body))
    events = await collect(model)
    assert events == expected
    answer = answer_of(events)
    assert answer.text == "Bonjour ! Ça va ?"
    assert answer.message().content[0] == ReasoningPart("The user greets me.")
    await model.aclose()


@pytest.mark.parametrize("content", [42, True, {"type": "text", "text": 5}])
async def test_content_of_another_type_is_a_clear_stream_error(
    server: Server, content: Any
) -> None:
    server.queue(Reply(openai_sse([mistral_chunk(content), mistral_chunk("", "stop")])))
    model = openai(server, max_retries=0)
    events = await collect(model)
    await model.aclose()
    if isinstance(content, dict):  # a part whose text is not text: nothing to show
        assert events == [Finish("stop", Usage(), "stop")]
        return
    assert len(events) == 1 and isinstance(events[0], StreamError)
    assert "unexpected shape" in str(events[0].error)
    assert "delta.content should be text or parts" in str(events[0].error)


# --- DeepSeek: reasoning_content goes back on tool-call turns -------------------------------------


def deepseek_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "0f3c1c1e-5b1e-4f7a-9d2a-6a1c7e0d4b11",
        "object": "chat.completion.chunk",
        "created": 1750152000,
        "model": "deepseek-reasoner",
        "system_fingerprint": "fp_7e0991cad4_prod0820_fp8_kvcache",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


DEEPSEEK_CALL = openai_sse(
    [
        deepseek_chunk({"role": "assistant", "content": None, "reasoning_content": ""}),
        deepseek_chunk({"content": None, "reasoning_content": "Need the weather."}),
        deepseek_chunk(
            {
                "content": None,
                "reasoning_content": None,
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_00_xK8",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": ""},
                    }
                ],
            }
        ),
        deepseek_chunk(
            {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Bern"}'}}]}
        ),
        deepseek_chunk({"content": "", "reasoning_content": None}, "tool_calls"),
    ]
)
DEEPSEEK_ANSWER = openai_sse(
    [
        deepseek_chunk({"role": "assistant", "content": None, "reasoning_content": "Done."}),
        deepseek_chunk({"content": "Sunny in Bern.", "reasoning_content": None}),
        deepseek_chunk({"content": ""}, "stop"),
    ]
)


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"Sunny in {city}"


async def test_deepseek_gets_reasoning_content_back_on_the_tool_call_turn(server: Server) -> None:
    server.queue(Reply(DEEPSEEK_CALL), Reply(DEEPSEEK_ANSWER))
    model = OpenAIChat(
        "deepseek-reasoner", api_key=KEY, base_url=server.url + "/v1", backoff_base=0.001
    )
    agent = Agent(model=model, tools=[get_weather])
    result = await agent.run("Weather in Bern?")
    await model.aclose()
    assert result.stop_reason == "finished", result.error
    first, second = (r.json["messages"] for r in server.requests)
    assert all("reasoning_content" not in m for m in first)
    assistant = second[1]
    assert assistant["role"] == "assistant" and assistant["tool_calls"][0]["id"] == "call_00_xK8"
    assert assistant["reasoning_content"] == "Need the weather."


def history_with_reasoning() -> list[Any]:
    return [
        user("weather?"),
        AssistantMessage((ReasoningPart("Need it."), ToolCall("c", "get_weather", "{}"))),
        ToolMessage((ToolResultPart("c", "get_weather", ()),)),
        AssistantMessage((ToolCall("d", "get_weather", "{}"),)),  # no reasoning at all
        ToolMessage((ToolResultPart("d", "get_weather", ()),)),
        AssistantMessage((ReasoningPart("Thought."), wire_text("Sunny."))),
    ]


def wire_text(text: str) -> Any:
    from nbagent.content import TextPart

    return TextPart(text)


@pytest.mark.parametrize(
    ("base_url", "option", "sent"),
    [
        ("https://api.deepseek.com/v1", None, True),  # known to need it
        ("https://api.openai.com/v1", None, False),  # rejects unknown fields
        ("http://localhost:8080/v1", None, False),  # unknown until it sends reasoning_content
        ("http://localhost:8080/v1", True, True),
        ("https://api.deepseek.com/v1", False, False),
    ],
)
def test_who_gets_reasoning_content(base_url: str, option: bool | None, sent: bool) -> None:
    model = OpenAIChat("m", api_key=KEY, base_url=base_url, reasoning_content=option)
    messages = model.build_body(Request(history_with_reasoning()))["messages"]
    assistants = [m for m in messages if m["role"] == "assistant"]
    if not sent:
        assert all("reasoning_content" not in m for m in assistants)
        return
    # every tool-call turn carries it, "" when it had no reasoning
    assert [m.get("reasoning_content") for m in assistants] == ["Need it.", "", "Thought."]


def test_reasoning_content_is_never_forced_on_openai() -> None:
    with pytest.raises(errors.ConfigurationError, match=r"api\.openai\.com rejects"):
        OpenAIChat("gpt-4.1", api_key=KEY, reasoning_content=True)


# --- Anthropic MCP connector blocks -------------------------------------------------------------

MCP_USE = {
    "type": "mcp_tool_use",
    "id": "mcptoolu_014Q35RayjACSWkSj4X2yov1",
    "name": "echo",
    "server_name": "example-mcp",
    "input": {},
}
MCP_RESULT = {
    "type": "mcp_tool_result",
    "tool_use_id": "mcptoolu_014Q35RayjACSWkSj4X2yov1",
    "is_error": False,
    "content": [{"type": "text", "text": "Hello"}],
}
MCP_TURN = wire.anthropic_sse(
    [
        wire.an_message_start(),
        wire.an_block_start(0, {"type": "text", "text": ""}),
        wire.an_text(0, "Let me echo that."),
        wire.an_block_stop(0),
        wire.an_block_start(1, MCP_USE),
        wire.an_json(1, '{"message": '),
        wire.an_json(1, '"Hello"}'),
        wire.an_block_stop(1),
        wire.an_block_start(2, MCP_RESULT),
        wire.an_block_stop(2),
        wire.an_block_start(3, {"type": "text", "text": ""}),
        wire.an_text(3, "It said Hello."),
        wire.an_block_stop(3),
        wire.an_message_delta("end_turn", 40),
        wire.MESSAGE_STOP,
    ]
)


async def test_mcp_blocks_are_a_provider_executed_call_and_result(server: Server) -> None:
    server.queue(Reply(MCP_TURN))
    model = ADAPTERS["anthropic"](server, betas=["mcp-client-2025-04-04"])
    events = await collect(model)
    call_id = MCP_USE["id"]
    assert events[1:5] == [
        ToolInputStart(call_id, "echo", provider_executed=True),
        ToolInputDelta(call_id, '{"message": '),
        ToolInputDelta(call_id, '"Hello"}'),
        ToolInputEnd(call_id),
    ]
    received = events[5]
    assert isinstance(received, ToolCallReceived)
    assert received.call == ToolCall(call_id, "echo", '{"message": "Hello"}', True)
    assert received.call.raw == MCP_USE
    assert events[6] == ProviderToolResultReceived(
        ProviderToolResult(call_id, "mcp", MCP_RESULT["content"], False)
    )
    answer = answer_of(events)
    assert answer.ok and answer.tool_calls() == ()  # the loop runs nothing
    await model.aclose()


async def test_mcp_blocks_go_back_verbatim_and_survive_saving(server: Server) -> None:
    server.queue(Reply(MCP_TURN), Reply(wire.anthropic_text("ok")))
    model = ADAPTERS["anthropic"](server)
    agent = Agent(model=model)
    assert (await agent.run("echo Hello")).stop_reason == "finished"
    restored = messages_from_json(messages_to_json(agent.messages))
    assert restored == agent.messages
    agent.messages[:] = restored  # as after reloading a saved conversation
    assert (await agent.run("again")).stop_reason == "finished"
    await model.aclose()
    assistant = server.requests[1].json["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["content"] == [
        {"type": "text", "text": "Let me echo that."},
        {**MCP_USE, "input": {"message": "Hello"}},  # server_name and all
        MCP_RESULT,
        {"type": "text", "text": "It said Hello."},
    ]


# --- null and odd fields ------------------------------------------------------------------------


def first_choice(delta: Any, finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


TOLERATED_OPENAI = [
    {"choices": None},
    first_choice(None),
    first_choice({"content": None, "tool_calls": None, "refusal": None}),
    first_choice({"reasoning": {"summary": "not text"}}),
    first_choice({"tool_calls": [{"index": None, "id": "c", "function": None}]}),
    first_choice({"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": None}}]}),
    first_choice({}, "tool_calls"),
    {
        "choices": [],
        "usage": {"prompt_tokens": "12", "completion_tokens": None, "prompt_tokens_details": None},
    },
]


async def test_null_and_odd_optional_fields_are_tolerated(server: Server) -> None:
    server.queue(Reply(openai_sse(TOLERATED_OPENAI)))
    model = openai(server)
    events = await collect(model)
    await model.aclose()
    assert events == [
        ToolInputStart("c", "f"),
        ToolInputEnd("c"),
        ToolCallReceived(ToolCall("c", "f", "{}")),
        Finish("tool_calls", Usage(0, 0), "tool_calls"),
    ]


@pytest.mark.parametrize(
    "chunk",
    [
        {"choices": [{"index": 0, "delta": {"content": 42}}]},
        {"choices": [{"index": 0, "delta": {"refusal": ["no"]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": 5}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"function": {"name": ["f"]}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": {"index": 0}}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": 7}]},
        {"choices": ["nope"]},
        {"usage": {"prompt_tokens_details": 3, "prompt_tokens": 1}},
        'data: "text"\n\n',
    ],
)
async def test_openai_shapes_that_cannot_be_read_are_clear_stream_errors(
    server: Server, chunk: Any
) -> None:
    server.queue(Reply(openai_sse([oa_chunk({"content": "hi"}), chunk, oa_chunk({}, "stop")])))
    model = openai(server, max_retries=0)
    events = await collect(model)
    await model.aclose()
    assert events[0] == TextDelta("hi")
    assert isinstance(events[-1], StreamError), events
    assert "unexpected shape" in str(events[-1].error)
    assert all(isinstance(e.text, str) for e in events if isinstance(e, TextDelta))


@pytest.mark.parametrize(
    "event",
    [
        wire.an_delta(0, {"type": "text_delta", "text": 5}),
        wire.an_delta(0, {"type": "thinking_delta", "thinking": 5}),
        wire.an_delta(0, {"type": "signature_delta", "signature": {"s": 1}}),
        wire.an_block_start(1, {"type": "tool_use", "id": ["x"], "name": "f"}),
        wire.an_block_start(1, {"type": 3}),
        wire.an_event("content_block_start", index=1, content_block=None),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": ["end_turn"]}}),
        ("x", [1, 2]),  # type: ignore[list-item]
    ],
)
async def test_anthropic_shapes_that_cannot_be_read_are_clear_stream_errors(
    server: Server, event: Any
) -> None:
    body = wire.anthropic_sse(
        [
            wire.an_message_start(),
            wire.an_block_start(0, {"type": "text", "text": ""}),
            wire.an_text(0, "hi"),
            event,
            wire.an_message_delta("end_turn"),
            wire.MESSAGE_STOP,
        ]
    )
    server.queue(Reply(body))
    model = ADAPTERS["anthropic"](server, max_retries=0)
    events = await collect(model)
    await model.aclose()
    assert events[0] == TextDelta("hi")
    assert isinstance(events[-1], StreamError), events
    assert "unexpected shape" in str(events[-1].error)


async def test_anthropic_null_and_odd_optional_fields_are_tolerated(server: Server) -> None:
    body = wire.anthropic_sse(
        [
            ("message_start", {"type": "message_start", "message": None}),
            wire.an_block_start(0, {"type": "text", "text": None}),
            wire.an_text(0, "hi"),
            wire.an_block_stop(0),
            wire.an_block_start(1, {"type": "thinking", "thinking": None, "signature": None}),
            wire.an_block_stop(1),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn"},
                    "usage": {"output_tokens": True, "input_tokens": -3, "server_tool_use": None},
                },
            ),
            wire.MESSAGE_STOP,
        ]
    )
    server.queue(Reply(body))
    model = ADAPTERS["anthropic"](server)
    assert await collect(model) == [TextDelta("hi"), Finish("stop", Usage(), "end_turn")]
    await model.aclose()


# --- a line that never ends ---------------------------------------------------------------------


LINE_STARTS = {
    "openai": b'data: {"choices": [{"index": 0, "delta": {"content": "',
    "anthropic": (
        b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, '
        b'"delta": {"type": "text_delta", "text": "'
    ),
    "responses": (
        b'event: response.output_text.delta\ndata: {"type": "response.output_text.delta", '
        b'"item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": "'
    ),
}


@pytest.mark.parametrize("kind", ["openai", "anthropic", "responses"])
async def test_a_line_without_end_fails_at_the_limit_holding_about_the_limit(
    kind: str, server: Server
) -> None:
    limit = 1024 * 1024
    piece = b"x" * 65536
    start = LINE_STARTS[kind]
    server.queue(Reply([start, *[piece] * 512], end="hang"))  # 32 MiB, never a newline
    model = ADAPTERS[kind](server, max_event_bytes=limit, max_retries=0)
    tracemalloc.start()
    try:
        events = await collect(model)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    await model.aclose()
    assert len(events) == 1 and isinstance(events[0], StreamError)
    message = str(events[0].error)
    assert f"{model.provider} sent a line longer than 1,048,576 bytes (max_event_bytes)" in message
    assert peak < 4 * limit, f"peak {peak:,} bytes"
    await server.wait_all_closed()


# --- Gemini's OpenAI-compatible endpoint: thought signatures on tool calls -----------------------


def gemini_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    """A chunk as Gemini's OpenAI-compatible endpoint streams it (calls without ``index``)."""
    return {
        "choices": [{"delta": delta, "finish_reason": finish, "index": 0}],
        "created": 1767225600,
        "id": "zq1uaPmdBoWgz7IPmOTZ8Ac",
        "model": "gemini-3-flash-preview",
        "object": "chat.completion.chunk",
    }


def gemini_call(call_id: str, city: str, signature: str | None) -> dict[str, Any]:
    call: dict[str, Any] = {
        "function": {"arguments": json.dumps({"city": city}), "name": "get_weather"},
        "id": call_id,
        "type": "function",
    }
    if signature is not None:
        call["extra_content"] = {"google": {"thought_signature": signature}}
    return call


#: Two parallel calls, each whole in its own chunk and without ``index``; only the first carries
#: a thought signature (as Gemini 3 sends them); the stop is "stop", not "tool_calls".
GEMINI_CALLS = openai_sse(
    [
        gemini_chunk(
            {"role": "assistant", "tool_calls": [gemini_call("g1", "Bern", "CpwCAb4+9vs=")]}
        ),
        gemini_chunk({"role": "assistant", "tool_calls": [gemini_call("g2", "Zug", None)]}),
        gemini_chunk({"role": "assistant", "content": ""}, "stop"),
    ]
)
GEMINI_ANSWER = openai_sse([gemini_chunk({"content": "Sunny in both."}, "stop")])


async def test_gemini_thought_signatures_go_back_with_their_calls(server: Server) -> None:
    server.queue(Reply(GEMINI_CALLS), Reply(GEMINI_ANSWER))
    model = OpenAIChat("gemini-3-flash-preview", api_key=KEY, base_url=server.url + "/v1")
    agent = Agent(model=model, tools=[get_weather])
    result = await agent.run("Weather in Bern and Zug?")
    await model.aclose()
    assert result.stop_reason == "finished", result.error
    assert result.text == "Sunny in both."
    assistant = server.requests[1].json["messages"][1]
    assert assistant["role"] == "assistant"
    assert [c["id"] for c in assistant["tool_calls"]] == ["g1", "g2"]
    first, second = assistant["tool_calls"]
    assert first["extra_content"] == {"google": {"thought_signature": "CpwCAb4+9vs="}}
    assert "extra_content" not in second
    assert [m["tool_call_id"] for m in server.requests[1].json["messages"][2:4]] == ["g1", "g2"]


async def test_a_signature_in_a_later_delta_of_the_call_is_kept(server: Server) -> None:
    late = {"extra_content": {"google": {"thought_signature": "late=="}}}
    body = openai_sse(
        [
            oa_chunk({"tool_calls": [oa_call(0, "c1", "get_weather", '{"city": "Bern"}')]}),
            oa_chunk({"tool_calls": [{"index": 0, **late}]}),
            oa_chunk({}, "tool_calls"),
        ]
    )
    server.queue(Reply(body))
    model = openai(server)
    answer = answer_of(await collect(model))
    await model.aclose()
    (call,) = answer.tool_calls()
    assert call.arguments == '{"city": "Bern"}'
    sent = model.build_body(Request([user("hi"), answer.message()]))["messages"][1]
    assert sent["tool_calls"][0]["extra_content"] == late["extra_content"]


def test_call_metadata_goes_back_only_to_the_server_it_came_from() -> None:
    call = ToolCall(
        "g1",
        "get_weather",
        "{}",
        raw={"extra_content": {"google": {"thought_signature": "s"}}, "origin": "gemini.test"},
    )
    history = [user("hi"), AssistantMessage((call,))]
    here = OpenAIChat("m", api_key=KEY, base_url="https://gemini.test/v1beta/openai")
    other = OpenAIChat("m", api_key=KEY, base_url="https://api.openai.com/v1")
    (sent,) = here.build_body(Request(history))["messages"][1]["tool_calls"]
    assert sent["extra_content"] == {"google": {"thought_signature": "s"}}
    (elsewhere,) = other.build_body(Request(history))["messages"][1]["tool_calls"]
    assert "extra_content" not in elsewhere
    saved = messages_from_json(messages_to_json(history))
    assert here.build_body(Request(saved))["messages"][1]["tool_calls"][0] == sent


async def test_a_tool_call_entry_that_carries_nothing_starts_no_call(server: Server) -> None:
    body = openai_sse(
        [
            oa_chunk({"tool_calls": [{"index": 0, "type": "function"}]}),
            oa_chunk({"tool_calls": [oa_call(0, "c1", "get_weather", '{"city": "Bern"}')]}),
            oa_chunk({}, "tool_calls"),
        ]
    )
    server.queue(Reply(body))
    model = openai(server)
    answer = answer_of(await collect(model))
    await model.aclose()
    assert answer.tool_calls() == (ToolCall("c1", "get_weather", '{"city": "Bern"}'),)


async def test_groq_usage_under_x_groq_is_read(server: Server) -> None:
    # Groq reported usage only under x_groq in the chunk with the finish reason.
    groq_usage = {
        "queue_time": 0.0415,
        "prompt_tokens": 45,
        "prompt_time": 0.0039,
        "completion_tokens": 662,
        "completion_time": 2.65,
        "total_tokens": 707,
        "total_time": 2.656,
    }
    finish = oa_chunk({}, "stop")
    finish["x_groq"] = {"id": "req_01kh52ndshfr2azv0xe6tnv4fx", "usage": groq_usage}
    del finish["usage"]
    first = oa_chunk({"role": "assistant", "content": "Hi"})
    first["x_groq"] = {"id": "req_01kh52ndshfr2azv0xe6tnv4fx", "seed": 689520654}
    server.queue(Reply(openai_sse([first, finish])))
    model = openai(server)
    events = await collect(model)
    await model.aclose()
    assert events == [TextDelta("Hi"), Finish("stop", Usage(45, 662), "stop")]


# --- OpenRouter: reasoning_details must come back on tool-call turns ----------------------------


def router_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "gen-1764600000-aBcDeFgHiJkLmNoPqRsT",
        "provider": "Google AI Studio",
        "model": "google/gemini-3-flash-preview",
        "object": "chat.completion.chunk",
        "created": 1764600000,
        "choices": [
            {
                "index": 0,
                "delta": {"role": "assistant", "content": "", **delta},
                "finish_reason": finish,
                "native_finish_reason": finish and finish.upper(),
                "logprobs": None,
            }
        ],
    }


def router_thought(text: str) -> dict[str, Any]:
    detail = {"type": "reasoning.text", "text": text, "format": "google-gemini-v1", "index": 0}
    return router_chunk({"reasoning": text, "reasoning_details": [detail]})


ENCRYPTED = {
    "type": "reasoning.encrypted",
    "data": "CiQBjz1rX2Vuc3J5cHRlZA==",
    "id": "tool_get_weather_k1",
    "format": "google-gemini-v1",
    "index": 0,
}
ROUTER_CALL = openai_sse(
    [
        router_thought("Need the "),
        router_thought("weather."),
        router_chunk(
            {
                "tool_calls": [oa_call(0, "tool_get_weather_k1", "get_weather", '{"city":"Bern"}')],
                "reasoning_details": [ENCRYPTED],
            }
        ),
        router_chunk({}, "tool_calls"),
    ]
)
ROUTER_ANSWER = openai_sse([router_chunk({"content": "Sunny in Bern."}, "stop")])
MERGED_DETAILS = [
    {
        "type": "reasoning.text",
        "text": "Need the weather.",
        "format": "google-gemini-v1",
        "index": 0,
    },
    ENCRYPTED,
]


async def test_openrouter_reasoning_details_go_back_with_the_tool_call_turn(
    server: Server,
) -> None:
    server.queue(Reply(ROUTER_CALL), Reply(ROUTER_ANSWER))
    model = OpenAIChat(
        "google/gemini-3-flash-preview", api_key=KEY, base_url=server.url + "/api/v1"
    )
    agent = Agent(model=model, tools=[get_weather])
    result = await agent.run("Weather in Bern?")
    await model.aclose()
    assert result.stop_reason == "finished", result.error
    assert result.text == "Sunny in Bern."
    assert "reasoning_details" not in server.requests[0].json["messages"][-1]
    assistant = server.requests[1].json["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["tool_calls"][0]["id"] == "tool_get_weather_k1"
    assert assistant["reasoning_details"] == MERGED_DETAILS
    # the history keeps them through saving, and they reach no other server or API
    history = messages_from_json(messages_to_json(result.messages))
    here = OpenAIChat("m", api_key=KEY, base_url=server.url + "/api/v1")
    assert here.build_body(Request(history))["messages"][1]["reasoning_details"] == MERGED_DETAILS
    other = OpenAIChat("m", api_key=KEY, base_url="https://api.openai.com/v1")
    assert all("reasoning_details" not in m for m in other.build_body(Request(history))["messages"])
    claude = ADAPTERS["anthropic"](server).build_body(Request(history))
    assert all(
        block["type"] != "thinking"
        for message in claude["messages"]
        for block in message["content"]
    )


# --- Azure OpenAI: content filter annotations around the chunks ---------------------------------

FILTERS = {
    name: {"filtered": False, "severity": "safe"}
    for name in ("hate", "self_harm", "sexual", "violence")
}


def azure_chunk(delta: dict[str, Any] | None, finish: str | None = None) -> dict[str, Any]:
    choice: dict[str, Any] = {
        "content_filter_results": FILTERS,
        "finish_reason": finish,
        "index": 0,
    }
    if delta is not None:
        choice["delta"] = delta
    return {
        "choices": [choice],
        "created": 1741569952,
        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
        "model": "gpt-4o-2024-11-20",
        "object": "chat.completion.chunk",
        "system_fingerprint": "fp_b705f0c291",
    }


AZURE_PROMPT_FILTER = {
    "choices": [],
    "created": 0,
    "id": "",
    "model": "",
    "object": "",
    "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": FILTERS}],
}
AZURE_TRAILER = {  # after the finish reason: offsets of the last filtered span, no delta
    **azure_chunk(None),
    "choices": [
        {
            "content_filter_offsets": {"check_offset": 0, "start_offset": 0, "end_offset": 5},
            "content_filter_results": FILTERS,
            "finish_reason": None,
            "index": 0,
        }
    ],
}


async def test_azure_filter_annotations_are_read_past(server: Server) -> None:
    body = openai_sse(
        [
            AZURE_PROMPT_FILTER,
            azure_chunk({"role": "assistant", "content": ""}),
            azure_chunk({"content": "Hello"}),
            azure_chunk({}, "stop"),
            AZURE_TRAILER,
        ]
    )
    server.queue(Reply(body))
    model = openai(server)
    events = await collect(model)
    await model.aclose()
    assert events == [TextDelta("Hello"), Finish("stop", Usage(), "stop")]


async def test_azure_filtering_a_call_mid_stream_never_runs_it(server: Server) -> None:
    body = openai_sse(
        [
            AZURE_PROMPT_FILTER,
            azure_chunk({"tool_calls": [oa_call(0, "c1", "get_weather", '{"city": "Be')]}),
            azure_chunk({}, "content_filter"),
        ]
    )
    server.queue(Reply(body))
    model = openai(server)
    answer = answer_of(await collect(model))
    await model.aclose()
    assert answer.status == "failed" and answer.finish is not None
    assert answer.finish.reason == "content_filter"
    with pytest.raises(errors.AnswerIncompleteError):
        answer.tool_calls()


# --- Anthropic: web search with citations -------------------------------------------------------


async def test_anthropic_web_search_with_citations_keeps_text_and_goes_back_valid(
    server: Server,
) -> None:
    citation = {
        "type": "web_search_result_location",
        "cited_text": "Bern is the de facto capital of Switzerland.",
        "url": "https://en.wikipedia.org/wiki/Bern",
        "title": "Bern - Wikipedia",
        "encrypted_index": "EpMBCioIAhgBIiQ0NGFlNjc=",
    }
    result = [
        {
            "type": "web_search_result",
            "title": "Bern - Wikipedia",
            "url": "https://en.wikipedia.org/wiki/Bern",
            "encrypted_content": "EqgfCioIARgBIiQ3YTAw",
            "page_age": None,
        }
    ]
    server_call = {
        "type": "server_tool_use",
        "id": "srvtoolu_01",
        "name": "web_search",
        "input": {},
    }
    events = [
        wire.an_message_start(2679),
        wire.an_block_start(0, {"type": "text", "text": ""}),
        wire.an_text(0, "I'll search."),
        wire.an_block_stop(0),
        wire.an_block_start(1, server_call),
        wire.an_json(1, '{"query": "capital of'),
        wire.an_json(1, ' Switzerland"}'),
        wire.an_block_stop(1),
        wire.an_block_start(
            2, {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "content": result}
        ),
        wire.an_block_stop(2),
        wire.an_block_start(3, {"type": "text", "text": "", "citations": []}),
        wire.an_delta(3, {"type": "citations_delta", "citation": citation}),
        wire.an_text(3, "The capital is Bern."),
        wire.an_block_stop(3),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {
                    "input_tokens": 10682,
                    "output_tokens": 510,
                    "server_tool_use": {"web_search_requests": 1},
                },
            },
        ),
        wire.MESSAGE_STOP,
    ]
    server.queue(Reply(wire.anthropic_sse(events)))
    model = ADAPTERS["anthropic"](server)
    answer = answer_of(await collect(model))
    await model.aclose()
    assert answer.ok and answer.text == "I'll search.The capital is Bern."
    assert answer.tool_calls() == ()  # the provider ran its own search
    assert answer.usage == Usage(10682, 510)
    body = model.build_body(Request([user("Capital of Switzerland?"), answer.message()]))
    blocks = body["messages"][1]["content"]
    assert [b["type"] for b in blocks] == [
        "text",
        "server_tool_use",
        "web_search_tool_result",
        "text",
    ]
    assert blocks[1]["input"] == {"query": "capital of Switzerland"}
    assert blocks[2]["content"] == result


# --- an answer that never ends: max_response_bytes -----------------------------------------------

TEXT_BODIES = {
    "openai": wire.openai_text,
    "anthropic": wire.anthropic_text,
    "responses": wire.responses_text,
}


@pytest.mark.parametrize("kind", ["openai", "anthropic", "responses"])
async def test_an_answer_past_max_response_bytes_fails_once_and_stops_reading(
    kind: str, server: Server
) -> None:
    # Well-formed small events, without end: no line is long, the answer as a whole is.
    piece = "x" * 1000
    events = TEXT_BODIES[kind](piece).split(b"\n\n")
    delta = next(event for event in events if piece.encode() in event)  # the text's delta
    at = events.index(delta)
    body = [*events[:at], *[delta] * 4000, *events[at + 1 :]]  # about 4 MB
    server.queue(Reply([event + b"\n\n" for event in body if event], end="hang"))
    limit = 1024 * 1024
    model = ADAPTERS[kind](server, max_event_bytes=65536, max_response_bytes=limit, max_retries=2)
    out = await collect(model)
    await model.aclose()
    assert isinstance(out[-1], StreamError)
    message = str(out[-1].error)
    assert f"more than {limit:,} bytes in one answer (max_response_bytes)" in message
    text = "".join(event.text for event in out if isinstance(event, TextDelta))
    assert 0 < len(text) <= limit
    assert len(server.requests) == 1  # not retried: the same request would send as much again
    await server.wait_all_closed()


def test_max_response_bytes_cannot_be_below_max_event_bytes() -> None:
    with pytest.raises(errors.ConfigurationError, match="max_response_bytes"):
        OpenAIChat("m", api_key="k", max_event_bytes=4096, max_response_bytes=2048)
