"""Edits at a step-mode pause and forks keep the history valid for every provider: runs against
the loopback server on protocol-accurate streams (Anthropic thinking with its signature and two
tool_use blocks; a Responses reasoning item with encrypted content before a function_call; Chat
Completions tool calls), then the next request each adapter builds is checked against that
API's own history rules."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from PIL import Image

from nbagent import Agent, ScriptedApprover, tool
from nbagent.content import ImagePart, ToolResult, image_part
from nbagent.errors import AgentError
from nbagent.generation import Options
from nbagent.inspection.stepping import next_step
from nbagent.limits import Limits
from nbagent.messages import ReasoningPart, ToolMessage
from nbagent.models import ScriptedModel

from . import wire
from .conftest import Reply, Server
from .helpers import anthropic, openai, responses


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"Sunny in {city}"


@tool
def now() -> str:
    """The time."""
    return "12:00"


TOOLS = [get_weather, now]


# --- the providers' history rules ----------------------------------------------------------------


def anthropic_rules(body: Mapping[str, Any]) -> None:
    """Each tool_use answered by a tool_result in the next user message (and only those);
    thinking blocks first in their turn, each with its signature."""
    messages = body["messages"]
    for index, message in enumerate(messages):
        blocks = message["content"] if isinstance(message["content"], list) else []
        if message["role"] == "assistant":
            kinds = [b["type"] for b in blocks]
            thinking = [i for i, k in enumerate(kinds) if k in ("thinking", "redacted_thinking")]
            assert thinking == list(range(len(thinking))), f"thinking not first: {kinds}"
            for block in blocks:
                if block["type"] == "thinking":
                    assert block["signature"], "a thinking block without its signature"
            uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
            if uses:
                answer = messages[index + 1]
                assert answer["role"] == "user"
                results = [
                    b["tool_use_id"] for b in answer["content"] if b["type"] == "tool_result"
                ]
                assert results == uses, f"tool_use {uses} answered by {results}"
        else:
            results = [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
            if results:
                before = messages[index - 1]
                uses = [b["id"] for b in before["content"] if b["type"] == "tool_use"]
                assert results == uses, f"tool_result {results} without its tool_use {uses}"


def chat_rules(body: Mapping[str, Any]) -> None:
    """Each assistant tool_calls followed by one tool message per call id, in order."""
    messages = body["messages"]
    index = 0
    while index < len(messages):
        message = messages[index]
        if message["role"] == "assistant" and message.get("tool_calls"):
            ids = [c["id"] for c in message["tool_calls"]]
            answers = [m["tool_call_id"] for m in messages[index + 1 : index + 1 + len(ids)]]
            assert answers == ids, f"tool_calls {ids} answered by {answers}"
            index += 1 + len(ids)
            continue
        assert message["role"] != "tool", f"a tool message without its call at {index}"
        index += 1


def responses_rules(body: Mapping[str, Any]) -> None:
    """Each function_call_output after its function_call; each call answered once; a reasoning
    item goes back only right before the item that followed it."""
    items = body["input"]
    calls: list[str] = []
    outputs: list[str] = []
    for index, item in enumerate(items):
        kind = item.get("type", "message")
        if kind == "function_call":
            calls.append(item["call_id"])
        elif kind == "function_call_output":
            assert item["call_id"] in calls, f"output {item['call_id']} before its call"
            outputs.append(item["call_id"])
        elif kind == "reasoning":
            after = items[index + 1] if index + 1 < len(items) else {}
            assert after.get("type", "message") in ("function_call", "message"), after
    assert sorted(calls) == sorted(outputs) and len(set(outputs)) == len(outputs)


RULES = {"anthropic": anthropic_rules, "openai": chat_rules, "responses": responses_rules}


# --- the streams ---------------------------------------------------------------------------------


def anthropic_tool_turn() -> bytes:
    return wire.anthropic_sse(wire.ANTHROPIC_TURN)


def responses_tool_turn() -> bytes:
    turn = wire.ResponsesTurn()
    turn.reasoning(["Weather first."], item_id="rs_1", encrypted="enc-1")
    turn.call("call_w", "get_weather", '{"city": ', '"Zürich"}')
    turn.call("call_n", "now", "{}")
    return turn.completed(wire.rs_usage(100, 10)).body()


def chat_tool_turn() -> bytes:
    chunks: list[Any] = [wire.oa_chunk({"role": "assistant", "content": ""})]
    for index, (call_id, name, args) in enumerate(
        [("call_w", "get_weather", '{"city": "Zürich"}'), ("call_n", "now", "{}")]
    ):
        chunks.append(wire.oa_chunk({"tool_calls": [wire.oa_call(index, call_id, name)]}))
        chunks.append(wire.oa_chunk({"tool_calls": [wire.oa_call(index, args=args)]}))
    chunks += [wire.oa_chunk({}, "tool_calls"), wire.oa_usage(100, 10)]
    return wire.openai_sse(chunks)


TOOL_TURNS = {
    "anthropic": (anthropic, anthropic_tool_turn, wire.anthropic_text),
    "openai": (openai, chat_tool_turn, wire.openai_text),
    "responses": (responses, responses_tool_turn, wire.responses_text),
}


@pytest.mark.parametrize("provider", sorted(TOOL_TURNS))
async def test_an_edited_result_goes_back_valid(server: Server, provider: str) -> None:
    make, tool_turn, final = TOOL_TURNS[provider]
    server.queue(Reply(tool_turn()), Reply(final("It is sunny.")))
    model = make(server)
    first_call: list[str] = []
    approver = ScriptedApprover(pauses=[next_step(), next_step()])
    agent = Agent(model, TOOLS, approver=approver)

    async def edit(pause: Any) -> Any:  # the third pause: rewrite one result, remove the other
        if pause.kind == "request" and pause.results:
            first_call.extend(r.call_id for r in pause.results)
            return next_step(
                results={pause.results[0].call_id: "Raining in Zürich"},
                remove=(pause.results[1].call_id,),
            )
        return await ScriptedApprover.pause(approver, pause)

    approver.pause = edit  # type: ignore[method-assign]
    result = await agent.run("Weather in Zürich, and the time?", step=True)
    await model.aclose()
    assert result.stop_reason == "finished", result.error
    body = server.requests[1].json
    RULES[provider](body)
    sent = str(body)
    assert "Raining in Zürich" in sent and "removed by the person" in sent
    assert result.exchanges[1].edited[0].startswith("rewrote the result of get_weather")
    if provider == "anthropic":  # the signed thinking goes back as it came
        assistant = body["messages"][1]["content"]
        assert assistant[0] == {
            "type": "thinking",
            "thinking": "The user wants the weather.",
            "signature": "EqQBCgIYAhIM1gbcDa9GJwZA",
        }
    if provider == "responses":
        assert body["input"][1]["type"] == "reasoning" and body["input"][1]["encrypted_content"]


@pytest.mark.parametrize("source", sorted(TOOL_TURNS))
@pytest.mark.parametrize("target", sorted(TOOL_TURNS))
async def test_a_fork_onto_any_provider_sends_a_valid_history(
    server: Server, source: str, target: str
) -> None:
    make, tool_turn, final = TOOL_TURNS[source]
    server.queue(Reply(tool_turn()), Reply(final("Done.")))
    model = make(server)
    agent = Agent(model, TOOLS)
    original = await agent.run("Weather in Zürich, and the time?")
    await model.aclose()
    assert original.stop_reason == "finished", original.error

    make_target, _, target_final = TOOL_TURNS[target]
    server.queue(Reply(target_final("Forked.")))
    other = make_target(server)
    forked = original.fork(2, model=other)  # the history as step 2 saw it: results unread
    answered = await forked.run(None)
    await other.aclose()
    assert answered.text == "Forked.", answered.error
    body = server.requests[-1].json
    RULES[target](body)
    reasoning = [
        p
        for m in forked.messages
        for p in getattr(m, "content", ())
        if isinstance(p, ReasoningPart)
    ]
    if source == target == "anthropic":
        assert body["messages"][1]["content"][0]["type"] == "thinking"  # kept for its own API
    elif source != target:
        assert "EqQBCgIYAhIM1gbcDa9GJwZA" not in str(body) and "enc-1" not in str(body)
        assert reasoning or source == "openai"  # kept in the history, only not sent across


async def test_a_fork_onto_anthropic_thinking_from_another_model_is_refused(server: Server) -> None:
    server.queue(Reply(chat_tool_turn()), Reply(wire.openai_text("Done.")))
    model = openai(server)
    agent = Agent(model, TOOLS)
    original = await agent.run("Weather in Zürich, and the time?")
    await model.aclose()
    thinking = Options(extra={"thinking": {"type": "enabled", "budget_tokens": 1024}})
    target = anthropic(server)
    agent.options = thinking
    with pytest.raises(AgentError, match="Anthropic needs the assistant turn whose tool calls"):
        agent.fork(original, 2, model=target)
    # at a step that begins with the prompt, there is nothing to refuse
    assert agent.fork(original, 1, model=target).messages[-1].text.startswith("Weather")
    await target.aclose()


def test_scripted_models_have_no_body() -> None:
    agent = Agent(ScriptedModel(["hi"]))
    (exchange,) = agent.run_sync("hello").exchanges
    with pytest.raises(TypeError):
        exchange.body(agent.generator)


# --- an edit at a pause goes through a tool result's pipeline ------------------------------------


def _strict_strings(node: Any) -> list[str]:
    """Every string in a JSON body that is not valid Unicode (a lone surrogate)."""
    if isinstance(node, str):
        try:
            node.encode("utf-8")
        except UnicodeEncodeError:
            return [node]
        return []
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strict_strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in _strict_strings(v)]
    return []


def _editing(approver: ScriptedApprover, edit: Any) -> Any:
    """``approver`` whose pause before a request that reads results gives ``edit(pause)``."""

    async def pause(pause: Any) -> Any:
        if pause.kind == "request" and pause.results:
            return edit(pause)
        return await ScriptedApprover.pause(approver, pause)

    return pause


@pytest.mark.parametrize("provider", sorted(TOOL_TURNS))
async def test_an_edited_result_is_cleaned_and_bounded_as_a_tool_s_result(
    server: Server, provider: str
) -> None:
    """A lone surrogate typed (or pasted) into a result is replaced, as a tool's would be, and
    a 5 MB replacement is cut at the run's limit with the marker; the edit stays marked."""
    make, tool_turn, final = TOOL_TURNS[provider]
    server.queue(Reply(tool_turn()), Reply(final("It is sunny.")))
    model = make(server)
    approver = ScriptedApprover(pauses=[next_step(), next_step()])
    big = "x" * 5_000_000

    def edit(pause: Any) -> Any:
        first, second = (r.call_id for r in pause.results)
        return next_step(results={first: "Raining \ud800 in Zürich", second: big})

    approver.pause = _editing(approver, edit)  # type: ignore[method-assign]
    agent = Agent(model, TOOLS, approver=approver)
    result = await agent.run("Weather in Zürich, and the time?", step=True)
    await model.aclose()
    assert result.stop_reason == "finished", result.error
    raw = server.requests[1].body
    body = json.loads(raw.decode("utf-8"))  # strict UTF-8, as a strict server reads it
    assert _strict_strings(body) == [], "a lone surrogate reached the request body"
    RULES[provider](body)
    sent = str(body)
    assert "Raining \ufffd in Zürich" in sent
    limit = Limits().max_result_chars
    assert len(raw) < limit + 50_000, f"the request body is {len(raw):,} bytes"
    assert f"a tool result may send at most {limit:,} characters to the model" in sent
    edited = [p for m in agent.messages if isinstance(m, ToolMessage) for p in m.results]
    assert [p.edited for p in edited] == [True, True]
    assert sum(len(p.text) for p in edited) < limit + 30_000  # the history holds no more


async def test_an_edited_result_s_images_are_checked_and_bounded(server: Server) -> None:
    """An image put in place of a result is decode-checked as a tool's is (a broken one is
    refused, saying why, and nothing is sent), and images beyond the limit are left out."""
    png = image_part(Image.new("RGB", (8, 8), "red"))
    broken = ToolResult((ImagePart(b"\x89PNG\r\n\x1a\n not an image", "image/png"),))
    server.queue(Reply(chat_tool_turn()))
    model = openai(server)
    approver = ScriptedApprover(pauses=[next_step(), next_step()])
    approver.pause = _editing(  # type: ignore[method-assign]
        approver, lambda pause: next_step(results={pause.results[0].call_id: broken})
    )
    agent = Agent(model, TOOLS, approver=approver)
    result = await agent.run("Weather?", step=True, raise_on_error=False)
    assert result.stop_reason == "failed"
    assert "step mode, at step 2: the result of 'call_w' cannot be a ToolResult" in str(
        result.error
    )
    assert "image data does not decode" in str(result.error)
    assert len(server.requests) == 1  # the edited request was never sent

    server.queue(Reply(chat_tool_turn()), Reply(wire.openai_text("Seen.")))
    many = ToolResult(tuple([png] * 3))
    approver = ScriptedApprover(pauses=[next_step(), next_step()])
    approver.pause = _editing(  # type: ignore[method-assign]
        approver, lambda pause: next_step(results={pause.results[0].call_id: many})
    )
    agent = Agent(model, TOOLS, approver=approver, limits=Limits(max_result_images=2))
    result = await agent.run("Weather?", step=True)
    await model.aclose()
    assert result.stop_reason == "finished", result.error
    body = server.requests[-1].json
    chat_rules(body)
    assert "1 more image left out: a tool result may send at most 2 images" in str(body)
