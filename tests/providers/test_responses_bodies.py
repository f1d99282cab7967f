"""The request body the Responses adapter sends: input items, images, tool results, tools with
``strict``, tool choice, instructions, store/include, and reasoning items sent back verbatim
(only beside the item that followed them)."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from nbagent import errors
from nbagent.content import TextPart
from nbagent.generation import NamedToolChoice, Options, Request
from nbagent.messages import (
    AssistantMessage,
    Message,
    ReasoningPart,
    ToolMessage,
    ToolResultPart,
    messages_from_json,
    messages_to_json,
    user,
)
from nbagent.providers._responses_items import reasoning_signature
from nbagent.tools import Definition, ToolCall

from . import wire
from .conftest import Reply, Server
from .helpers import collect, on_transport, responses
from .test_request_bodies import HISTORY, IMAGE, PNG_B64, SEARCH, WEATHER, Capture, now

DATA_URL = f"data:image/png;base64,{PNG_B64}"
MODEL = "gpt-5-mini"  # the adapter's model (see helpers.on_transport)


async def send(request: Request, **options: Any) -> dict[str, Any]:
    capture = Capture(wire.responses_text())
    model = on_transport("responses", httpx2.MockTransport(capture), **options)
    await collect(model, request)
    assert capture.urls == ["http://mock/v1/responses"]
    return capture.bodies[0]


async def test_history_images_and_tool_results() -> None:
    body = await send(Request(HISTORY, instructions="Be brief."))
    assert body["instructions"] == "Be brief."
    assert body["input"] == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "What is in this picture, and the weather?"},
                {"type": "input_image", "image_url": DATA_URL},
            ],
        },
        # Anthropic's signed and redacted thinking is not the Responses API's: left out
        {"role": "assistant", "content": "Checking."},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city": "Zürich"}',
        },
        {"type": "function_call", "call_id": "call_2", "name": "plot", "arguments": "{}"},
        {"type": "function_call", "call_id": "call_3", "name": "now", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "Sunny, 21 °C"},
        {
            "type": "function_call_output",
            "call_id": "call_2",
            "output": [
                {"type": "input_text", "text": "the chart"},
                {"type": "input_image", "image_url": DATA_URL},
            ],
        },
        {"type": "function_call_output", "call_id": "call_3", "output": "Error: clock broke"},
        {"role": "user", "content": "Thanks!"},
    ]
    assert body["model"] == MODEL and body["stream"] is True
    assert "tools" not in body and "tool_choice" not in body


async def test_an_image_only_error_result_keeps_the_error_mark() -> None:
    history = [
        user("plot"),
        AssistantMessage((ToolCall("c", "plot", "{}"),)),
        ToolMessage((ToolResultPart("c", "plot", (IMAGE,), is_error=True),)),
    ]
    body = await send(Request(history))
    assert body["input"][-1] == {
        "type": "function_call_output",
        "call_id": "c",
        "output": [
            {"type": "input_text", "text": "Error:"},
            {"type": "input_image", "image_url": DATA_URL},
        ],
    }


async def test_function_tools_always_say_whether_they_are_strict() -> None:
    book = Definition(
        name="book",
        input_schema={
            "type": "object",
            "properties": {"when": {"type": "string"}, "seats": {"type": "integer"}},
            "required": ["when"],
        },
        strict=True,
        provider_options={"openai": {"x-extra": 1}},
    )
    web_search = Definition(name="web_search", provider_options={"tool": {"type": "web_search"}})
    object.__setattr__(web_search, "provider_executed", True)
    body = await send(Request([user("hi")], tools=(WEATHER, now, book, web_search, SEARCH)))
    weather, clock, strict, search, verbatim = body["tools"]
    assert weather == {
        "type": "function",
        "name": "get_weather",
        "description": 'Current weather for a city.\n\nExamples:\n{"city": "Zürich"}\n'
        '{"city": "Paris", "units": "F"}',
        "parameters": WEATHER.input_schema,
        "strict": False,  # the API would otherwise treat it as strict and reject this schema
    }
    assert clock == {
        "type": "function",
        "name": "now",
        "description": "The current time.",
        "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
        "strict": False,
    }
    assert strict["strict"] is True and strict["x-extra"] == 1
    assert strict["parameters"] == {
        "type": "object",
        "properties": {"when": {"type": "string"}, "seats": {"type": ["integer", "null"]}},
        "required": ["when", "seats"],
        "additionalProperties": False,
    }
    assert search == {"type": "web_search"}
    assert verbatim == {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
    assert body["tool_choice"] == "auto" and "parallel_tool_calls" not in body


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        (NamedToolChoice("get_weather"), {"type": "function", "name": "get_weather"}),
    ],
)
async def test_tool_choice(choice: Any, expected: Any) -> None:
    options = Options(tool_choice=choice, parallel_tool_calls=False)
    body = await send(Request([user("hi")], tools=(WEATHER,), options=options))
    assert body["tool_choice"] == expected and body["parallel_tool_calls"] is False


async def test_options_and_model_override() -> None:
    options = Options(max_tokens=99, temperature=0.2, top_p=0.9, extra={"truncation": "auto"})
    body = await send(Request([user("hi")], model="o4-mini", options=options))
    assert body["model"] == "o4-mini" and body["max_output_tokens"] == 99
    assert (body["temperature"], body["top_p"], body["truncation"]) == (0.2, 0.9, "auto")
    assert "max_tokens" not in body and "max_completion_tokens" not in body


async def test_stop_sequences_are_refused_before_any_request() -> None:
    capture = Capture(wire.responses_text())
    model = on_transport("responses", httpx2.MockTransport(capture))
    with pytest.raises(errors.ConfigurationError, match="no stop sequences"):
        await collect(model, Request([user("hi")], options=Options(stop=("END",))))
    assert capture.bodies == []


@pytest.mark.parametrize(
    ("model", "settings", "store", "include"),
    [
        ("gpt-5-mini", {}, False, True),
        ("o3", {}, False, True),
        ("openai/gpt-5", {}, False, True),
        # a host's prefix, and a suffix of its own, before and after the model's name
        ("openai.gpt-5.6-luna", {}, False, True),
        ("us.openai.gpt-oss-120b-1:0", {}, False, True),
        ("eu.openai.o4-mini-2025-04-16-v1:0", {}, False, True),
        ("azure/o3-mini", {}, False, True),
        ("openrouter/openai/gpt-5.1-codex", {}, False, True),
        ("ft:gpt-5-mini-2025-08-07:acme::abc123", {}, False, True),
        ("GPT-5.2", {}, False, True),
        ("openai.gpt-5.1-chat-latest", {}, False, False),
        ("us.meta.llama3-3-70b-instruct-v1:0", {}, False, False),
        ("openai.gpt-4.1-mini", {}, False, False),
        ("bedrock.ollama", {}, False, False),
        ("gpt-4.1-mini", {}, False, False),  # non-reasoning models answer 400 to the include
        ("gpt-5-chat-latest", {}, False, False),
        ("gpt-4.1-mini", {"encrypted_reasoning": True}, False, True),
        ("my-reasoner", {"encrypted_reasoning": True}, False, True),
        ("gpt-5-mini", {"encrypted_reasoning": False}, False, False),
        ("gpt-5-mini", {"store": True}, True, False),  # stored: sent back by id instead
    ],
)
async def test_store_and_encrypted_reasoning(
    model: str, settings: dict[str, Any], store: bool, include: bool
) -> None:
    body = await send(Request([user("hi")], model=model), **settings)
    assert body["store"] is store
    assert body.get("include") == (["reasoning.encrypted_content"] if include else None)


async def test_reasoning_settings_are_sent() -> None:
    body = await send(Request([user("hi")]), reasoning={"effort": "low", "summary": "auto"})
    assert body["reasoning"] == {"effort": "low", "summary": "auto"}


# --- reasoning items, sent back -------------------------------------------------------------------


def item(item_id: str, encrypted: str | None = "enc") -> dict[str, Any]:
    made: dict[str, Any] = {
        "id": item_id,
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "Thinking."}],
    }
    if encrypted is not None:
        made["encrypted_content"] = encrypted
    return made


def reasoning(
    item_id: str,
    follower: dict[str, Any] | None,
    *,
    model: str = MODEL,
    encrypted: str | None = "enc",
) -> ReasoningPart:
    return ReasoningPart(
        "Thinking.", reasoning_signature(model, item(item_id, encrypted), follower)
    )


TEXT_AFTER = {"type": "message", "id": "msg_1"}
CALL_AFTER = {"type": "function_call", "id": "fc_1", "call_id": "c1"}
CALL = ToolCall("c1", "get_weather", '{"city": "Bern"}')
SIBLING = ToolCall("c2", "now", "{}")
RESULTS = ToolMessage(
    (ToolResultPart("c1", "get_weather", (TextPart("Sunny"),)), ToolResultPart("c2", "now", ()))
)


def sent_call(call: ToolCall, item_id: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "function_call", "call_id": call.id, "name": call.name}
    out["arguments"] = call.arguments
    if item_id:
        out["id"] = item_id
    return out


async def assistant_items(*parts: Any, store: bool = False) -> list[dict[str, Any]]:
    calls = [p for p in parts if isinstance(p, ToolCall)]
    history: list[Message] = [user("hi"), AssistantMessage(tuple(parts))]
    if calls:
        history.append(
            ToolMessage(tuple(ToolResultPart(c.id, c.name, (TextPart("ok"),)) for c in calls))
        )
    body = await send(Request(history), store=store)
    items = body["input"][1:]
    return [i for i in items if i.get("type") != "function_call_output"]


async def test_reasoning_goes_back_verbatim_with_the_message_that_followed_it() -> None:
    phased = {**TEXT_AFTER, "phase": "final_answer"}
    items = await assistant_items(reasoning("rs_1", phased), TextPart("Sunny."))
    assert items == [
        item("rs_1"),
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Sunny.", "annotations": []}],
            "phase": "final_answer",
        },
    ]


async def test_reasoning_goes_back_with_the_call_that_followed_it_and_its_siblings() -> None:
    items = await assistant_items(reasoning("rs_1", CALL_AFTER), CALL, SIBLING)
    assert items == [item("rs_1"), sent_call(CALL, "fc_1"), sent_call(SIBLING)]


async def test_reasoning_items_in_a_row_go_back_together() -> None:
    parts = (
        reasoning("rs_1", {"type": "reasoning", "id": "rs_2"}),
        reasoning("rs_2", CALL_AFTER),
        CALL,
    )
    assert await assistant_items(*parts) == [item("rs_1"), item("rs_2"), sent_call(CALL, "fc_1")]
    broken = (reasoning("rs_1", {"type": "reasoning", "id": "rs_2"}), reasoning("rs_2", None), CALL)
    assert await assistant_items(*broken) == [sent_call(CALL)]  # the second cannot go: neither


@pytest.mark.parametrize(
    ("parts", "why"),
    [
        ((reasoning("rs_1", CALL_AFTER, model="gpt-5"), CALL), "made by another model"),
        ((reasoning("rs_1", CALL_AFTER, encrypted=None), CALL), "no encrypted content"),
        ((reasoning("rs_1", CALL_AFTER), ToolCall("c1_2", "f", "{}")), "its call was renamed"),
        ((reasoning("rs_1", CALL_AFTER), TextPart("cut")), "its call was not kept"),
        ((reasoning("rs_1", TEXT_AFTER), CALL), "its message was not kept"),
        ((reasoning("rs_1", None), TextPart("after")), "nothing followed it"),
        ((reasoning("rs_1", {"type": "web_search_call", "id": "ws_1"}), CALL), "a provider call"),
        ((ReasoningPart("Hm.", "EqQBCgIYAhIM1gbc"), CALL), "Anthropic's signature"),
        ((ReasoningPart("Hm."), CALL), "no signature (another provider's reasoning)"),
        ((ReasoningPart("Hm.", "openai-responses:{not json"), CALL), "a damaged signature"),
        ((ReasoningPart("Hm.", 'openai-responses:{"model": "gpt-5-mini"}'), CALL), "no item"),
    ],
)
async def test_reasoning_that_cannot_pair_is_left_out_and_ids_with_it(
    parts: tuple[Any, ...], why: str
) -> None:
    items = await assistant_items(*parts)
    assert all(i.get("type") != "reasoning" for i in items), why
    assert all("id" not in i for i in items), why  # nothing the API would try to pair


async def test_stored_reasoning_goes_back_by_id_without_encrypted_content() -> None:
    parts = (reasoning("rs_1", CALL_AFTER, encrypted=None), CALL)
    assert await assistant_items(*parts, store=True) == [
        item("rs_1", None),
        sent_call(CALL, "fc_1"),
    ]


async def test_carried_reasoning_survives_saving_the_conversation() -> None:
    history = [user("hi"), AssistantMessage((reasoning("rs_1", CALL_AFTER), CALL)), RESULTS]
    history[1] = AssistantMessage((*history[1].content, SIBLING))  # type: ignore[union-attr]
    reloaded = messages_from_json(messages_to_json(history))
    assert reloaded == history
    body = await send(Request(reloaded))
    assert body["input"][1:4] == [item("rs_1"), sent_call(CALL, "fc_1"), sent_call(SIBLING)]


async def test_the_anthropic_adapter_leaves_responses_reasoning_out() -> None:
    capture = Capture(wire.anthropic_text())
    model = on_transport("anthropic", httpx2.MockTransport(capture))
    history = [
        user("hi"),
        AssistantMessage((reasoning("rs_1", TEXT_AFTER), TextPart("Sunny."))),
        user("ok"),
    ]
    await collect(model, Request(history))
    assert capture.bodies[0]["messages"][1]["content"] == [{"type": "text", "text": "Sunny."}]


async def test_history_over_the_socket(server: Server) -> None:
    """The same bodies reach a real server intact (UTF-8, images, sizes)."""
    server.queue(Reply(wire.responses_text()))
    model = responses(server)
    await collect(model, Request(HISTORY, tools=(WEATHER,)))
    await model.aclose()
    sent = server.requests[0]
    assert sent.path == "/v1/responses" and sent.headers["content-type"] == "application/json"
    assert sent.json["input"][5] == {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": "Sunny, 21 °C",
    }
    assert sent.json["input"][6]["output"][1]["image_url"] == DATA_URL
