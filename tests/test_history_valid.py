"""The history can never be poisoned: after any bad turn, the next request is valid for every
provider. Each case runs a real agent loop on a bad turn, then rebuilds the next request with
both adapters' ``build_body`` and checks it is JSON, answers every call exactly once with unique
ids, and carries nothing oversized."""

from __future__ import annotations

import io
import json
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from PIL import Image

from nbagent import Agent, ImagePart, TextPart, Tool, ToolCall, ToolContext, ToolResult
from nbagent.generation import (
    Finish,
    Request,
    StreamEvent,
    TextDelta,
    ToolCallReceived,
    ToolInputDelta,
    ToolInputStart,
)
from nbagent.messages import user
from nbagent.models import Call, FunctionModel, ScriptedModel, Turn
from nbagent.providers.anthropic import AnthropicMessages
from nbagent.providers.openai import OpenAIChat

from .conftest import assert_history_valid

#: No request after a bad turn may be larger than this (the bad turns below carry megabytes).
MAX_BODY = 400_000
#: A function name both APIs accept.
NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def bomb_png() -> bytes:
    buffer = io.BytesIO()
    Image.new("1", (20000, 20000)).save(buffer, format="PNG")
    return buffer.getvalue()


def raw_turn(*calls: tuple[str, str, str], text: str = "") -> Callable[[Any], Any]:
    """A model whose first answer streams ``calls`` (id, name, arguments) as given."""

    async def decide(request: Request) -> AsyncIterator[StreamEvent]:
        if any(type(m).__name__ == "ToolMessage" for m in request.messages):
            yield TextDelta("done")
            yield Finish("stop")
            return
        if text:
            yield TextDelta(text)
        for call_id, name, arguments in calls:
            yield ToolInputStart(call_id, name)
            yield ToolInputDelta(call_id, arguments)
        for call_id, name, arguments in calls:
            yield ToolCallReceived(ToolCall(call_id, name, arguments))
        yield Finish("tool_calls")

    return decide


def returning(value: Any) -> Tool:
    def run(ctx: ToolContext) -> Any:
        return value

    return Tool(name="t", input_schema={"type": "object"}, execute=run)


BAD_TURNS: dict[str, tuple[Callable[[Any], Any], Tool]] = {
    "NaN": (raw_turn(("c1", "t", '{"n": NaN}')), returning("x")),
    "Infinity": (raw_turn(("c1", "t", '{"n": -Infinity, "m": 1e999}')), returning("x")),
    "duplicate keys": (raw_turn(("c1", "t", '{"p": "a", "p": "/etc/passwd"}')), returning("x")),
    "escaped surrogate": (raw_turn(("c1", "t", '{"s": "\\udfff"}')), returning("x")),
    "raw surrogates": (
        raw_turn(("c1", "t\ud800", '{"s": "\ud800"}'), text="hi \udc00"),
        returning("x"),
    ),
    "huge arguments": (
        raw_turn(("c1", "t", '{"s": "' + "A" * 50_000_000 + '"}')),
        returning("x"),
    ),
    "deep nesting": (raw_turn(("c1", "t", "[" * 100_000 + "]" * 100_000)), returning("x")),
    "duplicate ids": (
        raw_turn(("same", "t", '{"a": 1}'), ("same", "t", '{"a": 2}'), ("same", "t", "{}")),
        returning("x"),
    ),
    "empty ids": (raw_turn(("", "t", "{}"), ("", "t", "{}")), returning("x")),
    "200 calls": (
        raw_turn(*[(f"c{i}", "t", f'{{"i": {i}}}') for i in range(200)]),
        returning("x"),
    ),
    "bad image": (
        raw_turn(("c1", "t", "{}")),
        returning(ToolResult((ImagePart(b"not a png", "image/png"),))),
    ),
    "decompression bomb": (
        raw_turn(("c1", "t", "{}")),
        returning(ToolResult((ImagePart(bomb_png(), "image/png"),))),
    ),
    "huge result": (raw_turn(("c1", "t", "{}")), returning("R" * 20_000_000)),
    "surrogate result": (
        raw_turn(("c1", "t", "{}")),
        returning(ToolResult((TextPart("bytes \udcff\udcfe"),))),
    ),
    "set result": (raw_turn(("c1", "t", "{}")), returning({"b", "a", float("nan")})),
    "not an object": (raw_turn(("c1", "t", "[1, 2]")), returning("x")),
    "unknown tool": (raw_turn(("c1", "no_such_tool" * 1000, "{}")), returning("x")),
    "odd tool name": (raw_turn(("c1", "read file/../../etc", "{}")), returning("x")),
}


def check_openai(body: dict[str, Any]) -> None:
    pending: list[str] = []
    seen: set[str] = set()
    for message in body["messages"]:
        if message["role"] == "tool":
            assert pending and message["tool_call_id"] == pending.pop(0)
            continue
        assert not pending, f"calls {pending} were never answered"
        for call in message.get("tool_calls", ()):
            assert call["id"] not in seen, f"duplicate id {call['id']!r}"
            assert NAME.fullmatch(call["function"]["name"]), call["function"]["name"][:80]
            seen.add(call["id"])
            pending.append(call["id"])
            json.loads(call["function"]["arguments"])  # the arguments are JSON text
    assert not pending


def check_anthropic(body: dict[str, Any]) -> None:
    pending: list[str] = []
    seen: set[str] = set()
    for message in body["messages"]:
        blocks = message["content"]
        results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
        assert results == pending, f"results {results} do not answer {pending}"
        pending = []
        for block in blocks:
            if block["type"] == "tool_use":
                assert block["id"] not in seen, f"duplicate id {block['id']!r}"
                assert NAME.fullmatch(block["name"]), block["name"][:80]
                assert isinstance(block["input"], dict)
                seen.add(block["id"])
                pending.append(block["id"])
    assert not pending


def encoded(body: dict[str, Any]) -> bytes:
    """The body as a client sends it: strict JSON, UTF-8."""
    return json.dumps(body, allow_nan=False, ensure_ascii=False).encode("utf-8")


@pytest.mark.parametrize("case", list(BAD_TURNS))
async def test_next_request_is_valid_for_every_provider(case: str) -> None:
    decide, tool = BAD_TURNS[case]
    agent = Agent(FunctionModel(decide), [tool])
    result = await agent.run("go")
    assert result.stop_reason == "finished", result.error
    assert_history_valid(agent.messages)
    request = Request([*agent.messages, user("and now?")], tools=[tool.definition])
    for adapter, check in (
        (OpenAIChat("gpt-4.1-mini", api_key="sk-test"), check_openai),
        (AnthropicMessages("claude-sonnet-4-5", api_key="sk-test"), check_anthropic),
    ):
        body = adapter.build_body(request)
        data = encoded(body)
        assert len(data) < MAX_BODY, f"{type(adapter).__name__}: {len(data):,} bytes"
        check(json.loads(data))
        assert b"not a png" not in data


async def test_a_scripted_bad_turn_then_a_good_one() -> None:
    """The agent keeps working after every kind of bad call in one batch."""
    calls = [
        Call("t", '{"n": NaN}'),
        Call("t", '{"a": 1, "a": 2}'),
        Call("t", "[" * 5000),
        Call("t", {"fine": True}),
    ]
    model = ScriptedModel([Turn(*calls), "recovered", "again"])
    agent = Agent(model, [returning("ok")])
    assert (await agent.run("go")).text == "recovered"
    assert (await agent.run("more")).text == "again"
    assert_history_valid(model.requests[-1].messages)
