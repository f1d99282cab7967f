"""The request body each adapter sends: messages, images, tool results, tools, tool_choice."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx2
import pytest

from nbagent import errors
from nbagent.content import ImagePart, TextPart
from nbagent.generation import NamedToolChoice, Options, Request
from nbagent.messages import (
    AssistantMessage,
    Message,
    ProviderToolResult,
    ReasoningPart,
    ToolMessage,
    ToolResultPart,
    user,
)
from nbagent.tools import Definition, ToolCall, tool

from . import wire
from .conftest import Reply, Server
from .helpers import KEY, anthropic, collect, on_transport, openai

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
PNG_B64 = base64.b64encode(PNG).decode()
IMAGE = ImagePart(PNG, "image/png", 1, 1)

WEATHER = Definition(
    name="get_weather",
    description="Current weather for a city.",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}, "units": {"enum": ["C", "F"], "default": "C"}},
        "required": ["city"],
    },
    input_examples=({"city": "Zürich"}, {"city": "Paris", "units": "F"}),
)
SEARCH = Definition(
    name="web_search",
    provider_options={"tool": {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}},
)


@tool
def now() -> str:
    """The current time."""
    return "12:00"


object.__setattr__(SEARCH, "provider_executed", True)  # as a provider-executed Tool has it

HISTORY: list[Message] = [
    user("What is in this picture, and the weather?", IMAGE),
    AssistantMessage(
        (
            ReasoningPart("Let me look.", "sig-1"),
            ReasoningPart("", None, "redacted-blob"),
            TextPart("Checking."),
            ToolCall("call_1", "get_weather", '{"city": "Zürich"}'),
            ToolCall("call_2", "plot", "{}"),
            ToolCall("call_3", "now", ""),
        )
    ),
    ToolMessage(
        (
            ToolResultPart("call_1", "get_weather", (TextPart("Sunny, 21 °C"),)),
            ToolResultPart("call_2", "plot", (TextPart("the chart"), IMAGE)),
            ToolResultPart("call_3", "now", (TextPart("clock broke"),), is_error=True),
        )
    ),
    user("Thanks!"),
]


class Capture:
    """A transport that records each request body and answers with a short valid stream."""

    def __init__(self, body: bytes) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[httpx2.Headers] = []
        self.urls: list[str] = []
        self.reply = body

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.bodies.append(json.loads(request.content))
        self.headers.append(request.headers)
        self.urls.append(str(request.url))
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=self.reply
        )


async def send(kind: str, request: Request, **options: Any) -> dict[str, Any]:
    capture = Capture(wire.openai_text() if kind == "openai" else wire.anthropic_text())
    model = on_transport(kind, httpx2.MockTransport(capture), **options)
    await collect(model, request)
    return capture.bodies[0]


# --- OpenAI ---------------------------------------------------------------------------------------


async def test_openai_history_images_and_tool_results() -> None:
    body = await send("openai", Request(HISTORY, instructions="Be brief."))
    data_url = f"data:image/png;base64,{PNG_B64}"
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in this picture, and the weather?"},
                {"type": "image_url", "image_url": {"url": data_url}},
            ],
        },
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Zürich"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "plot", "arguments": "{}"},
                },
                {
                    "id": "call_3",
                    "type": "function",
                    "function": {"name": "now", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 21 °C"},
        {"role": "tool", "tool_call_id": "call_2", "content": "the chart"},
        {"role": "tool", "tool_call_id": "call_3", "content": "Error: clock broke"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Images from tool call call_2 (plot):"},
                {"type": "image_url", "image_url": {"url": data_url}},
            ],
        },
        {"role": "user", "content": "Thanks!"},
    ]
    assert body["model"] == "m" and body["stream"] is True
    assert "tools" not in body and "tool_choice" not in body


async def test_openai_image_only_result_says_where_the_image_is() -> None:
    history = [
        user("plot"),
        AssistantMessage((ToolCall("c", "plot", "{}"),)),
        ToolMessage((ToolResultPart("c", "plot", (IMAGE,)),)),
    ]
    body = await send("openai", Request(history))
    assert body["messages"][1]["content"] is None
    assert body["messages"][2]["content"] == "(the result is the image in the next message)"
    assert body["messages"][3]["content"][0]["text"] == "Images from tool call c (plot):"


async def test_openai_tools_examples_strict_and_provider_tools() -> None:
    strict = Definition(
        name="book",
        input_schema={
            "type": "object",
            "properties": {"when": {"type": "string"}, "seats": {"type": "integer"}},
            "required": ["when"],
        },
        strict=True,
        provider_options={"openai": {"x-extra": 1}},
    )
    body = await send("openai", Request([user("hi")], tools=(WEATHER, now, strict, SEARCH)))
    weather, clock, book, search = body["tools"]
    assert weather == {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": 'Current weather for a city.\n\nExamples:\n{"city": "Zürich"}\n'
            '{"city": "Paris", "units": "F"}',
            "parameters": WEATHER.input_schema,
        },
    }
    assert clock["function"]["name"] == "now"
    assert clock["function"]["parameters"] == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }
    assert book["function"]["strict"] is True and book["function"]["x-extra"] == 1
    assert book["function"]["parameters"] == {
        "type": "object",
        "properties": {"when": {"type": "string"}, "seats": {"type": ["integer", "null"]}},
        "required": ["when", "seats"],
        "additionalProperties": False,
    }
    assert search == {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
    assert body["tool_choice"] == "auto"


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        (NamedToolChoice("get_weather"), {"type": "function", "function": {"name": "get_weather"}}),
    ],
)
async def test_openai_tool_choice(choice: Any, expected: Any) -> None:
    body = await send(
        "openai", Request([user("hi")], tools=(WEATHER,), options=Options(tool_choice=choice))
    )
    assert body["tool_choice"] == expected


async def test_openai_options_and_model_override() -> None:
    options = Options(
        max_tokens=99,
        temperature=0.2,
        top_p=0.9,
        stop=("END",),
        parallel_tool_calls=False,
        extra={"seed": 7},
    )
    body = await send(
        "openai", Request([user("hi")], model="gpt-5", tools=(WEATHER,), options=options)
    )
    assert body["model"] == "gpt-5"
    assert body["max_completion_tokens"] == 99
    assert (body["temperature"], body["top_p"], body["stop"]) == (0.2, 0.9, ["END"])
    assert body["parallel_tool_calls"] is False and body["seed"] == 7
    legacy = await send(
        "openai", Request([user("hi")], options=options), max_tokens_field="max_tokens"
    )
    assert legacy["max_tokens"] == 99 and "max_completion_tokens" not in legacy


async def test_openai_strict_nulls_are_removed_from_the_call(server: Server) -> None:
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "units": {"type": "string"},
            "note": {"type": ["string", "null"]},
            "where": {
                "type": "object",
                "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                "required": ["lat"],
            },
        },
        "required": ["city"],
    }
    strict = Definition(name="w", input_schema=schema, strict=True)
    args = '{"city": "Bern", "units": null, "note": null, "where": {"lat": 1.5, "lon": null}}'
    server.queue(
        Reply(
            wire.openai_sse(
                [
                    wire.oa_chunk({"tool_calls": [wire.oa_call(0, "c", "w", args)]}),
                    wire.oa_chunk({}, "tool_calls"),
                ]
            )
        )
    )
    model = openai(server)
    events = await collect(model, Request([user("hi")], tools=(strict,)))
    received = [e for e in events if type(e).__name__ == "ToolCallReceived"]
    assert json.loads(received[0].call.arguments) == {
        "city": "Bern",
        "note": None,
        "where": {"lat": 1.5},
    }
    await model.aclose()


async def test_openai_unfit_tools_raise_before_any_request(server: Server) -> None:
    model = openai(server)
    bad_strict = Definition(
        name="m",
        input_schema={"type": "object", "additionalProperties": {"type": "string"}},
        strict=True,
    )
    with pytest.raises(errors.ToolDefinitionError, match="cannot be made strict"):
        await collect(model, Request([user("hi")], tools=(bad_strict,)))
    no_spec = Definition(name="s")
    object.__setattr__(no_spec, "provider_executed", True)
    with pytest.raises(errors.ToolDefinitionError, match=r"provider_options\['tool'\]"):
        await collect(model, Request([user("hi")], tools=(no_spec,)))
    assert server.requests == []
    await model.aclose()


# --- Anthropic ------------------------------------------------------------------------------------


async def test_anthropic_history_images_reasoning_and_tool_results() -> None:
    history = [
        *HISTORY[:2],
        AssistantMessage(()),  # nothing to send: skipped
        HISTORY[2],
        HISTORY[3],
    ]
    body = await send("anthropic", Request(history, instructions="Be brief."))
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64},
    }
    assert body["system"] == "Be brief."
    assert body["max_tokens"] == 8192
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in this picture, and the weather?"},
                image,
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Let me look.", "signature": "sig-1"},
                {"type": "redacted_thinking", "data": "redacted-blob"},
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool_use",
                    "id": "call_1",
                    "name": "get_weather",
                    "input": {"city": "Zürich"},
                },
                {"type": "tool_use", "id": "call_2", "name": "plot", "input": {}},
                {"type": "tool_use", "id": "call_3", "name": "now", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "Sunny, 21 °C"},
                {
                    "type": "tool_result",
                    "tool_use_id": "call_2",
                    "content": [{"type": "text", "text": "the chart"}, image],
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "call_3",
                    "content": "clock broke",
                    "is_error": True,
                },
                {"type": "text", "text": "Thanks!"},  # same role: merged into one turn
            ],
        },
    ]


async def test_anthropic_provider_tool_blocks_go_back_verbatim() -> None:
    content = [
        {
            "type": "web_search_result",
            "url": "https://example.org",
            "title": "t",
            "encrypted_content": "x",
        }
    ]
    history = [
        user("search"),
        AssistantMessage(
            (
                ToolCall("srvtoolu_1", "web_search", '{"query": "q"}', provider_executed=True),
                ProviderToolResult("srvtoolu_1", "web_search", content),
                TextPart("Found it."),
                ReasoningPart("unsigned thoughts from another provider"),
            )
        ),
        user("more"),
    ]
    body = await send("anthropic", Request(history, tools=(SEARCH,)))
    assert body["messages"][1]["content"] == [
        {
            "type": "server_tool_use",
            "id": "srvtoolu_1",
            "name": "web_search",
            "input": {"query": "q"},
        },
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": content},
        {"type": "text", "text": "Found it."},
    ]
    assert body["tools"] == [{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}]


async def test_anthropic_tools() -> None:
    strict = Definition(
        name="book",
        description="Book it.",
        input_schema={"properties": {"when": {"type": "string"}}},
        strict=True,
        provider_options={"anthropic": {"cache_control": {"type": "ephemeral"}}},
    )
    body = await send("anthropic", Request([user("hi")], tools=(WEATHER, now, strict)))
    assert body["tools"] == [
        {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "input_schema": WEATHER.input_schema,
            "input_examples": [{"city": "Zürich"}, {"city": "Paris", "units": "F"}],
        },
        {
            "name": "now",
            "description": "The current time.",
            "input_schema": {"type": "object", "properties": {}, "additionalProperties": False},
        },
        {
            "name": "book",
            "description": "Book it.",
            "input_schema": {"type": "object", "properties": {"when": {"type": "string"}}},
            "strict": True,
            "cache_control": {"type": "ephemeral"},
        },
    ]
    assert body["tool_choice"] == {"type": "auto"}


@pytest.mark.parametrize(
    ("choice", "parallel", "expected"),
    [
        ("auto", None, {"type": "auto"}),
        ("none", False, {"type": "none"}),
        ("required", None, {"type": "any"}),
        (NamedToolChoice("get_weather"), None, {"type": "tool", "name": "get_weather"}),
        ("auto", False, {"type": "auto", "disable_parallel_tool_use": True}),
        ("required", False, {"type": "any", "disable_parallel_tool_use": True}),
    ],
)
async def test_anthropic_tool_choice(choice: Any, parallel: bool | None, expected: Any) -> None:
    options = Options(tool_choice=choice, parallel_tool_calls=parallel)
    body = await send("anthropic", Request([user("hi")], tools=(WEATHER,), options=options))
    assert body["tool_choice"] == expected


async def test_anthropic_options_headers_and_url() -> None:
    capture = Capture(wire.anthropic_text())
    model = on_transport(
        "anthropic", httpx2.MockTransport(capture), betas=("b-1", "b-2"), max_tokens=100
    )
    options = Options(
        max_tokens=50, temperature=0.1, top_p=0.5, stop=("X",), extra={"metadata": {"user_id": "u"}}
    )
    await collect(model, Request([user("hi")], options=options))
    body, headers = capture.bodies[0], capture.headers[0]
    assert body["max_tokens"] == 50 and body["stop_sequences"] == ["X"]
    assert (body["temperature"], body["top_p"], body["metadata"]) == (0.1, 0.5, {"user_id": "u"})
    assert headers["anthropic-beta"] == "b-1,b-2" and headers["x-api-key"] == KEY
    assert capture.urls[0] == "http://mock/v1/messages"
    v1 = on_transport("anthropic", httpx2.MockTransport(capture))
    v1.base_url = "http://mock/v1"
    await collect(v1, Request([user("hi")]))
    assert capture.urls[1] == "http://mock/v1/messages"


async def test_history_over_the_socket(server: Server) -> None:
    """The same bodies reach a real server intact (UTF-8, images, sizes)."""
    server.queue(Reply(wire.openai_text()), Reply(wire.anthropic_text()))
    for model in (openai(server), anthropic(server)):
        await collect(model, Request(HISTORY, tools=(WEATHER,)))
        await model.aclose()
    first, second = (r.json for r in server.requests)
    assert first["messages"][2] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "Sunny, 21 °C",
    }
    assert second["messages"][2]["content"][1]["content"][1]["source"]["data"] == PNG_B64
    assert server.requests[0].headers["content-type"] == "application/json"


async def test_a_lone_surrogate_in_the_history_is_sent_escaped() -> None:
    history = [user("broken \ud83c emoji")]
    body = await send("openai", Request(history))
    assert body["messages"][0]["content"] == "broken \ud83c emoji"
