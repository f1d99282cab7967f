"""Tool calls through structured output (``tool_calls="structured"``), against the loopback server.

The server speaks Chat Completions as llama.cpp does when a response is constrained to a JSON
Schema: the answer is ``delta.content`` text holding one JSON object. The request must carry
no ``tools`` but a ``response_format`` union; the stream must become the same events as a
native call; a wrong, cut or approval-needing call must be caught by the loop, not run.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent.agent import Agent
from nbagent.approvals.approval import ScriptedApprover, deny
from nbagent.content import TextPart
from nbagent.errors import ConfigurationError
from nbagent.generation import (
    Finish,
    NamedToolChoice,
    Options,
    Request,
    TextDelta,
    ToolCallReceived,
    ToolInputDelta,
    ToolInputEnd,
    ToolInputStart,
)
from nbagent.messages import AssistantMessage, ToolMessage, ToolResultPart, user
from nbagent.providers._structured import INCOMPLETE_CALL, StructuredParser
from nbagent.providers.openai import OpenAIChat
from nbagent.tools import Definition, ToolCall, tool

from . import wire
from .conftest import Reply, Server
from .helpers import FAST, answer_of, collect

WEATHER = Definition(
    name="weather",
    description="Current weather for a city.",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
NESTED = Definition(
    name="plan",
    description="Plan a trip.",
    input_schema={
        "type": "object",
        "$defs": {"stop": {"type": "object", "properties": {"city": {"type": "string"}}}},
        "properties": {"stops": {"type": "array", "items": {"$ref": "#/$defs/stop"}}},
    },
)


def structured(server: Server, **options: Any) -> OpenAIChat:
    settings: dict[str, Any] = {
        "base_url": server.url + "/v1",
        "tool_calls": "structured",
        "max_tokens_field": "max_tokens",
        **FAST,
    }
    settings.update(options)
    return OpenAIChat("smollm2", **settings)


def content_stream(pieces: list[str], finish: str = "stop") -> bytes:
    """A constrained answer as llama.cpp streams it: content deltas, then the finish."""
    chunks: list[Any] = [wire.oa_chunk({"role": "assistant", "content": None})]
    chunks += [wire.oa_chunk({"content": piece}) for piece in pieces]
    chunks += [wire.oa_chunk({}, finish), wire.oa_usage(50, len(pieces))]
    return wire.openai_sse(chunks)


def split(text: str, size: int = 3) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


# --- the request ---------------------------------------------------------------------------


async def test_the_request_carries_no_tools_but_a_union_schema(server: Server) -> None:
    server.queue(Reply(content_stream(['{"reply": "hi"}'])))
    request = Request(
        [user("Weather in Paris?")], tools=[WEATHER, NESTED], instructions="Be brief."
    )
    await collect(structured(server), request)
    body = server.requests[0].json
    assert "tools" not in body and "tool_choice" not in body
    form = body["response_format"]
    assert form["type"] == "json_schema"
    branches = form["json_schema"]["schema"]["oneOf"]
    assert [b["properties"].get("tool", {}).get("const") for b in branches] == [
        "weather",
        "plan",
        None,
    ]
    assert branches[0]["properties"]["arguments"] == {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    }
    assert branches[2]["required"] == ["reply"]
    # the nested tool's reference still points at its own $defs, now inside the union
    items = branches[1]["properties"]["arguments"]["properties"]["stops"]["items"]
    assert items == {"$ref": "#/oneOf/1/properties/arguments/$defs/stop"}
    system = body["messages"][0]
    assert system["role"] == "system"
    assert "weather: Current weather for a city." in system["content"]
    assert system["content"].endswith("Be brief.")


@pytest.mark.parametrize(
    ("choice", "expect"),
    [
        ("required", ["weather", "plan"]),
        (NamedToolChoice("plan"), ["plan"]),
        ("none", None),
    ],
)
async def test_tool_choice_shapes_the_union(server: Server, choice: Any, expect: Any) -> None:
    server.queue(Reply(content_stream(['{"reply": "hi"}'])))
    request = Request([user("x")], tools=[WEATHER, NESTED], options=Options(tool_choice=choice))
    await collect(structured(server), request)
    body = server.requests[0].json
    if expect is None:
        assert "response_format" not in body and "tools" not in body
        return
    schema = body["response_format"]["json_schema"]["schema"]
    branches = schema.get("oneOf", [schema])
    assert [b["properties"]["tool"]["const"] for b in branches] == expect


async def test_the_history_goes_back_without_tool_roles(server: Server) -> None:
    server.queue(Reply(content_stream(['{"reply": "ok"}'])))
    call = ToolCall("call_1", "weather", '{"city": "Paris"}')
    history = [
        user("Weather in Paris?"),
        AssistantMessage((call,)),
        ToolMessage((ToolResultPart("call_1", "weather", (TextPart("Paris: sunny"),)),)),
        user("And tomorrow?"),
    ]
    await collect(structured(server), Request(history, tools=[WEATHER]))
    messages = server.requests[0].json["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert all("tool_calls" not in m for m in messages)
    assert json.loads(messages[2]["content"]) == {"tool": "weather", "arguments": {"city": "Paris"}}
    # the result and the next prompt are one user message: roles alternate
    assert messages[3]["content"] == "Result of weather: Paris: sunny\n\nAnd tomorrow?"


async def test_a_response_format_of_the_callers_own_is_refused(server: Server) -> None:
    request = Request(
        [user("x")], tools=[WEATHER], options=Options(extra={"response_format": {"type": "text"}})
    )
    with pytest.raises(ConfigurationError, match="response_format"):
        await collect(structured(server), request)
    assert server.requests == []


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="native"):
        OpenAIChat("m", base_url="http://127.0.0.1:9/v1", tool_calls="guess")  # type: ignore[arg-type]


# --- the answer ----------------------------------------------------------------------------


async def test_a_constrained_call_streams_as_a_native_call(server: Server) -> None:
    text = '{\n  "tool": "weather",\n  "arguments": {\n    "city": "Par\\u00eds \\"x\\""\n  }\n}'
    server.queue(Reply(content_stream(split(text))))
    events = await collect(structured(server), Request([user("x")], tools=[WEATHER]))
    kinds = [type(e).__name__ for e in events]
    assert kinds[0] == "ToolInputStart"
    assert kinds[-3:] == ["ToolInputEnd", "ToolCallReceived", "Finish"]
    start = events[0]
    assert isinstance(start, ToolInputStart) and start.name == "weather"
    deltas = "".join(e.delta for e in events if isinstance(e, ToolInputDelta))
    assert len([e for e in events if isinstance(e, ToolInputDelta)]) > 1  # it fills in live
    received = events[-2]
    assert isinstance(received, ToolCallReceived)
    assert received.call.arguments == deltas
    assert json.loads(deltas) == {"city": 'París "x"'}
    assert received.call.id == start.call_id
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.reason == "tool_calls"
    assert answer_of(events).tool_calls()[0].name == "weather"


async def test_a_reply_streams_as_text_with_escapes_split_anywhere(server: Server) -> None:
    reply = 'Line one\nsecond "quoted" é 🌍 \\ end'
    text = json.dumps({"reply": reply})  # ASCII escapes, a surrogate pair for the globe
    server.queue(Reply(content_stream(split(text, 1))))
    events = await collect(structured(server), Request([user("x")], tools=[WEATHER]))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == reply
    assert not any(isinstance(e, ToolInputStart) for e in events)
    assert isinstance(events[-1], Finish) and events[-1].reason == "stop"


async def test_a_server_that_ignored_the_format_gives_plain_text(server: Server) -> None:
    server.queue(Reply(content_stream(["It is ", "sunny."])))
    events = await collect(structured(server), Request([user("x")], tools=[WEATHER]))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "It is sunny."


async def test_an_object_of_another_shape_is_passed_on_as_text(server: Server) -> None:
    server.queue(Reply(content_stream(['{"answer": ', "42}"])))
    events = await collect(structured(server), Request([user("x")], tools=[WEATHER]))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == '{"answer": 42}'


async def test_a_call_cut_by_max_tokens_is_never_run(server: Server) -> None:
    server.queue(Reply(content_stream(['{"tool": "weather", "arguments": {"ci'], "length")))
    events = await collect(structured(server), Request([user("x")], tools=[WEATHER]))
    received = [e for e in events if isinstance(e, ToolCallReceived)]
    assert received[0].call.arguments.startswith(INCOMPLETE_CALL)
    assert any(isinstance(e, ToolInputEnd) for e in events)  # a view closes the card
    answer = answer_of(events)
    assert answer.status == "length"
    with pytest.raises(Exception, match="did not finish normally"):
        answer.tool_calls()


async def test_in_a_run_validation_denial_and_cut_calls_stop_bad_calls(server: Server) -> None:
    ran: list[str] = []

    @tool
    def weather(city: str) -> str:
        """Current weather for a city."""
        ran.append(city)
        return f"{city}: sunny"

    @tool(needs_approval=True)
    def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return "deleted"

    server.queue(
        # a wrong argument type: fails the schema, never runs
        Reply(content_stream(['{"tool": "weather", "arguments": {"city": 42}}'])),
        # needs approval: denied, never runs
        Reply(content_stream(['{"tool": "delete_file", "arguments": {"path": "/x"}}'])),
        # stopped (a stop sequence) in the middle of the object: never runs
        Reply(content_stream(['{"tool": "weather", "arguments": {"city": "Pa'])),
        Reply(content_stream(['{"tool": "weather", "arguments": {"city": "Bern"}}'])),
        Reply(content_stream(['{"reply": "Bern is sunny."}'])),
    )
    agent = Agent(
        structured(server),
        [weather, delete_file],
        approver=ScriptedApprover({"delete_file": deny("not today")}),
    )
    result = await agent.run("Weather?")
    assert result.stop_reason == "finished"
    assert result.text == "Bern is sunny."
    assert ran == ["Bern"]
    errors = [
        r for m in agent.messages if isinstance(m, ToolMessage) for r in m.results if r.is_error
    ]
    assert len(errors) == 3
    assert "city" in errors[0].text
    assert "not today" in errors[1].text  # the denial's reason
    # every call in the history has exactly one result: the conversation stays valid
    calls = [c.id for m in agent.messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    results = [r.call_id for m in agent.messages if isinstance(m, ToolMessage) for r in m.results]
    assert sorted(calls) == sorted(results)
    # and it went back to the server as plain messages
    last = server.requests[-1].json["messages"]
    assert all(m["role"] in ("system", "user", "assistant") for m in last)


# --- any split of any answer ---------------------------------------------------------------


class _Inner:
    """A parser that hands on text as given: what StructuredParser wraps."""

    def __init__(self) -> None:
        self.out: list[Any] = []

    def event(self, name: bytes, data: bytes) -> bool:
        self.out.append(TextDelta(data.decode()))
        return False

    def finished(self) -> bool:
        return False

    def end(self) -> None:
        self.out.append(Finish("stop"))


def _parse(pieces: list[str]) -> list[Any]:
    parser = StructuredParser(_Inner())
    events: list[Any] = []
    for piece in pieces:
        parser.event(b"", piece.encode())
        events += parser.out
        parser.out.clear()
    parser.end()
    return events + parser.out


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(
    arguments=st.dictionaries(st.text(max_size=6), _json, max_size=4),
    name=st.text(min_size=1, max_size=10),
    indent=st.sampled_from([None, 2]),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
)
def test_any_split_of_a_call_gives_the_same_call(
    arguments: dict[str, Any], name: str, indent: int | None, cuts: list[int]
) -> None:
    text = json.dumps({"tool": name, "arguments": arguments}, indent=indent)
    points = sorted({c % (len(text) + 1) for c in cuts})
    pieces = [
        text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True) if text[a:b]
    ]
    events = _parse(pieces)
    received = [e for e in events if isinstance(e, ToolCallReceived)]
    assert len(received) == 1
    call = received[0].call
    assert call.name == name
    assert json.loads(call.arguments) == arguments
    assert "".join(e.delta for e in events if isinstance(e, ToolInputDelta)) == call.arguments
