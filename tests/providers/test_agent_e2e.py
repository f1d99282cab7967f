"""The agent loop through each adapter against the loopback server: a multi-step conversation
with a parallel batch, a denied call and an image result; a failed stream; a cancelled run."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from typing import Any

import pytest

from nbagent.agent import Agent
from nbagent.approvals.approval import ScriptedApprover, deny
from nbagent.content import ToolResult, image_result
from nbagent.events import StepRetried
from nbagent.limits import Budget
from nbagent.messages import AssistantMessage
from nbagent.tools import Tool, tool

from . import wire
from .conftest import Reply, Server
from .helpers import ADAPTERS

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
PNG_B64 = base64.b64encode(PNG).decode()

# (call id, tool, arguments) per model turn; the last turn answers in text
TURNS: list[list[tuple[str, str, str]]] = [
    [
        ("c_weather", "get_weather", '{"city": "Zürich"}'),
        ("c_delete", "delete_file", '{"path": "/tmp/x"}'),
        ("c_plot", "plot", "{}"),
    ],
    [("c_weather2", "get_weather", '{"city": "Bern"}')],
]
FINAL = "Zürich and Bern are sunny; I did not delete anything."


def openai_turn(calls: list[tuple[str, str, str]], text: str = "") -> bytes:
    chunks: list[Any] = [wire.oa_chunk({"role": "assistant", "content": ""})]
    if text:
        chunks += [wire.oa_chunk({"content": text[:10]}), wire.oa_chunk({"content": text[10:]})]
    for index, (call_id, name, args) in enumerate(calls):
        chunks.append(wire.oa_chunk({"tool_calls": [wire.oa_call(index, call_id, name)]}))
        half = len(args) // 2
        chunks.append(wire.oa_chunk({"tool_calls": [wire.oa_call(index, args=args[:half])]}))
        chunks.append(wire.oa_chunk({"tool_calls": [wire.oa_call(index, args=args[half:])]}))
    chunks += [wire.oa_chunk({}, "tool_calls" if calls else "stop"), wire.oa_usage(100, 10)]
    return wire.openai_sse(chunks)


def anthropic_turn(calls: list[tuple[str, str, str]], text: str = "") -> bytes:
    events: list[Any] = [wire.an_message_start(100)]
    index = 0
    if text:
        events += [
            wire.an_block_start(0, {"type": "text", "text": ""}),
            wire.an_text(0, text[:10]),
            wire.an_text(0, text[10:]),
            wire.an_block_stop(0),
        ]
        index = 1
    for offset, (call_id, name, args) in enumerate(calls):
        i = index + offset
        half = len(args) // 2
        events += [
            wire.an_block_start(i, {"type": "tool_use", "id": call_id, "name": name, "input": {}}),
            wire.an_json(i, args[:half]),
            wire.an_json(i, args[half:]),
            wire.an_block_stop(i),
        ]
    events += [wire.an_message_delta("tool_use" if calls else "end_turn", 10), wire.MESSAGE_STOP]
    return wire.anthropic_sse(events)


def responses_turn(calls: list[tuple[str, str, str]], text: str = "", reasoning: str = "") -> bytes:
    turn = wire.ResponsesTurn()
    if reasoning:
        turn.reasoning(
            [reasoning[:8], reasoning[8:]], item_id="rs_" + (calls[0][0] if calls else "end")
        )
    if text:
        turn.message(text[:10], text[10:], item_id="msg_" + (calls[0][0] if calls else "end"))
    for call_id, name, args in calls:
        half = len(args) // 2
        turn.call(call_id, name, args[:half], args[half:])
    return turn.completed(wire.rs_usage(100, 10)).body()


TURN_BUILDERS: dict[str, Callable[..., bytes]] = {
    "openai": openai_turn,
    "anthropic": anthropic_turn,
    "responses": responses_turn,
}


def make_tools(ran: list[str]) -> list[Any]:
    @tool
    async def get_weather(city: str) -> str:
        """Current weather for a city."""
        ran.append(f"get_weather:{city}")
        await asyncio.sleep(0.01)
        return f"Sunny in {city}"

    @tool(needs_approval=True)
    def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(f"delete_file:{path}")
        return "deleted"

    @tool
    def plot() -> ToolResult:
        """Draw the chart."""
        ran.append("plot")
        return image_result(PNG, "image/png")

    return [get_weather, delete_file, plot]


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_multi_step_conversation(kind: str, server: Server, history_valid: Any) -> None:
    build = TURN_BUILDERS[kind]
    server.queue(
        Reply(build(TURNS[0], "Let me look at that.")),
        Reply(build(TURNS[1])),
        Reply(build([], FINAL)),
    )
    ran: list[str] = []
    approver = ScriptedApprover({"delete_file": deny("not today")})
    model = ADAPTERS[kind](server)
    agent = Agent(model=model, tools=make_tools(ran), approver=approver, instructions="Be brief.")
    result = await agent.run("Weather in Zürich and Bern? Delete /tmp/x. Plot it.")
    await model.aclose()

    assert result.stop_reason == "finished", result.error
    assert result.text.endswith(FINAL)
    assert sorted(ran) == ["get_weather:Bern", "get_weather:Zürich", "plot"]  # never deleted
    assert [r.tool_name for r in approver.requests] == ["delete_file"]
    assert result.steps == 3 and result.usage.output_tokens == 30
    history_valid(agent.messages)
    assert len(server.requests) == 3

    second = server.requests[1].json
    third = server.requests[2].json
    if kind == "openai":
        messages = second["messages"]
        assert messages[0] == {"role": "system", "content": "Be brief."}
        assert [c["id"] for c in messages[2]["tool_calls"]] == ["c_weather", "c_delete", "c_plot"]
        assert messages[3] == {
            "role": "tool",
            "tool_call_id": "c_weather",
            "content": "Sunny in Zürich",
        }
        assert messages[4]["tool_call_id"] == "c_delete" and "not today" in messages[4]["content"]
        assert messages[4]["content"].startswith("Error: ")
        assert messages[5]["tool_call_id"] == "c_plot"
        assert messages[6]["role"] == "user"
        assert messages[6]["content"][0]["text"] == "Images from tool call c_plot (plot):"
        assert messages[6]["content"][1]["image_url"]["url"] == f"data:image/png;base64,{PNG_B64}"
        assert third["messages"][-1] == {
            "role": "tool",
            "tool_call_id": "c_weather2",
            "content": "Sunny in Bern",
        }
        assert [t["function"]["name"] for t in second["tools"]] == [
            "get_weather",
            "delete_file",
            "plot",
        ]
    else:
        assert second["system"] == "Be brief."
        assistant, results = second["messages"][1], second["messages"][2]
        assert [b["type"] for b in assistant["content"]] == [
            "text",
            "tool_use",
            "tool_use",
            "tool_use",
        ]
        assert assistant["content"][1]["input"] == {"city": "Zürich"}
        blocks = {b["tool_use_id"]: b for b in results["content"]}
        assert blocks["c_weather"]["content"] == "Sunny in Zürich"
        assert (
            blocks["c_delete"]["is_error"] is True and "not today" in blocks["c_delete"]["content"]
        )
        image = blocks["c_plot"]["content"][0]
        assert image == {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64},
        }
        assert third["messages"][-1]["content"][0]["content"] == "Sunny in Bern"
        assert [t["name"] for t in second["tools"]] == ["get_weather", "delete_file", "plot"]
    await server.wait_all_closed()


@pytest.mark.parametrize("kind", ["openai", "anthropic", "responses"])
async def test_a_broken_stream_runs_no_tool(kind: str, server: Server, history_valid: Any) -> None:
    body = TURN_BUILDERS[kind](TURNS[0])
    cut = body.index(b"c_plot")  # the third call has started; the response then drops
    server.queue(Reply([body[:cut]], end="drop"))
    ran: list[str] = []
    model = ADAPTERS[kind](server, max_retries=0)
    agent = Agent(model=model, tools=make_tools(ran))
    result = await agent.run("go", raise_on_error=False)
    await model.aclose()
    assert result.stop_reason == "failed"
    assert "dropped mid-response" in str(result.error)
    assert ran == []  # complete-looking calls of a failed answer never run
    history_valid(agent.messages)


@pytest.mark.parametrize("kind", ["openai", "anthropic", "responses"])
async def test_cancelling_a_run_closes_the_connection(kind: str, server: Server) -> None:
    body = TURN_BUILDERS[kind]([], "A long answer that never ends")
    server.queue(Reply([body[: body.index(b"\n\n", body.index(b"A long")) + 2]], end="hang"))
    model = ADAPTERS[kind](server)
    agent = Agent(model=model, tools=make_tools([]))
    run = agent.start("go")
    async for event in run.events():
        if type(event).__name__ == "AssistantTextDelta":
            break
    run.cancel()
    result = await run.result()
    assert result.stop_reason == "cancelled"
    await server.wait_all_closed(timeout=1.0)
    await model.aclose()
    sent = json.loads(server.requests[0].body)
    assert sent.get("messages") or sent.get("input")


@pytest.mark.parametrize("kind", ["openai", "anthropic", "responses"])
async def test_a_stream_cut_mid_call_is_asked_again_and_runs_each_call_once(
    kind: str, server: Server, history_valid: Any
) -> None:
    build = TURN_BUILDERS[kind]
    body = build(TURNS[0])
    cut = body.index(b"c_plot")  # two calls complete, the third begun: then the drop
    server.queue(
        Reply([body[:cut]], end="drop"),
        Reply(build(TURNS[0])),
        Reply(build([], FINAL)),
    )
    ran: list[str] = []
    model = ADAPTERS[kind](server, max_retries=1)
    approver = ScriptedApprover({"delete_file": deny("no")})
    agent = Agent(model=model, tools=make_tools(ran), approver=approver)
    run = agent.start("go")
    seen = [event async for event in run.events()]
    result = await run.result()
    await model.aclose()
    assert result.stop_reason == "finished", result.error
    assert sorted(ran) == ["get_weather:Zürich", "plot"]  # once each, from the new answer
    retried = [e for e in seen if isinstance(e, StepRetried)]
    assert len(retried) == 1 and "dropped mid-response" in retried[0].reason
    assert retried[0].step == 1 and retried[0].attempt == 1
    history_valid(agent.messages)
    calls = [c.id for m in agent.messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert calls == ["c_weather", "c_delete", "c_plot"]  # the void attempt left nothing
    assert len(server.requests) == 3


# --- a budget counts every request sent ---------------------------------------------------------


def error_reply(kind: str, status: int) -> Reply:
    """An overloaded / unavailable answer before any output, in the API's own error shape."""
    if kind == "anthropic":
        body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    else:
        body = {"error": {"message": "busy", "type": "server_error", "code": None}}
    return Reply(json.dumps(body).encode(), status, content_type="application/json")


@pytest.mark.parametrize("kind", ["openai", "anthropic", "responses"])
async def test_a_request_budget_counts_a_retry_before_output(
    kind: str, server: Server, history_valid: Any
) -> None:
    """529/503 then a good answer with calls: two requests sent, so requests=2 allows no third."""
    build = TURN_BUILDERS[kind]
    status = 529 if kind == "anthropic" else 503
    server.queue(error_reply(kind, status), Reply(build(TURNS[1])), Reply(build([], FINAL)))
    ran: list[str] = []
    model = ADAPTERS[kind](server, max_retries=2)
    agent = Agent(model=model, tools=make_tools(ran), budget=Budget(requests=2))
    run = agent.start("go")
    seen = [event async for event in run.events()]
    result = await run.result()
    await model.aclose()
    assert len(server.requests) == 2  # the 529 and the answer: the third is not paid for
    assert result.stop_reason == "budget" and result.steps == 1
    assert ran == ["get_weather:Bern"]
    retried = [e for e in seen if isinstance(e, StepRetried)]
    assert len(retried) == 1 and f"HTTP {status}" in retried[0].reason
    history_valid(agent.messages)


@pytest.mark.parametrize("kind", ["openai", "anthropic", "responses"])
async def test_a_retry_the_request_budget_cannot_pay_for_is_not_sent(
    kind: str, server: Server, history_valid: Any
) -> None:
    build = TURN_BUILDERS[kind]
    body = build(TURNS[0])
    server.queue(Reply([body[: body.index(b"c_plot")]], end="drop"), Reply(build(TURNS[0])))
    ran: list[str] = []
    model = ADAPTERS[kind](server, max_retries=2)
    agent = Agent(model=model, tools=make_tools(ran), budget=Budget(requests=1))
    result = await agent.run("go", raise_on_error=False)
    await model.aclose()
    assert result.stop_reason == "budget", result.error
    assert len(server.requests) == 1 and ran == []  # the cut answer ran nothing
    history_valid(agent.messages)
    await server.wait_all_closed()


OVERLOADED_EVENT = (
    b'event: error\ndata: {"type": "error", "error": {"details": null, "type": '
    b'"overloaded_error", "message": "Overloaded"}, "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"}'
    b"\n\n"
)


@pytest.mark.parametrize("where", ["first", "after-message-start", "mid-text", "mid-call"])
async def test_an_overloaded_event_after_http_200_is_retried_like_a_529(
    where: str, server: Server, history_valid: Any
) -> None:
    """Nothing from the answer ran, so it is asked for again with the same backoff and the same
    max_retries as a 529 before the response; the retry is announced and counted."""
    body = anthropic_turn(TURNS[1], "Checking the weather.")
    cut = {
        "first": 0,
        "after-message-start": body.index(b"event: content_block_start"),
        "mid-text": body.index(b"event:", body.index(b"weather.")),  # at an event's end
        "mid-call": body.index(b"event:", body.index(b"Bern")),
    }[where]
    server.queue(
        Reply(body[:cut] + OVERLOADED_EVENT), Reply(body), Reply(anthropic_turn([], FINAL))
    )
    ran: list[str] = []
    model = ADAPTERS["anthropic"](server, max_retries=1)
    agent = Agent(model=model, tools=make_tools(ran), budget=Budget(requests=3))
    run = agent.start("go")
    seen = [event async for event in run.events()]
    result = await run.result()
    assert result.stop_reason == "finished", result.error
    assert ran == ["get_weather:Bern"] and len(server.requests) == 3
    (retried,) = [e for e in seen if isinstance(e, StepRetried)]
    assert "overloaded_error" in retried.reason and retried.attempt == 1
    history_valid(agent.messages)
    # with no retries left it is final, as a 529 would be
    server.queue(Reply(body[:cut] + OVERLOADED_EVENT))
    final = await Agent(ADAPTERS["anthropic"](server, max_retries=0), make_tools([])).run(
        "go", raise_on_error=False
    )
    assert final.stop_reason == "failed" and "overloaded_error" in str(final.error)
    await model.aclose()


def openai_raw(chunks: list[bytes]) -> bytes:
    return b"".join(b"data: " + c + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


def damaged_turn(kind: str) -> bytes:
    """Two calls: the first one's arguments hold an invalid byte (\\xff); text holds one too."""
    if kind == "responses":
        turn = wire.ResponsesTurn()
        turn.message("caf#!")
        turn.call("c_bad", "get_weather", '{"city": "Z#rich"}')
        turn.call("c_ok", "get_weather", '{"city": "Bern"}')
        return turn.completed().body().replace(b"#", b"\xff")
    if kind == "openai":
        return openai_raw(
            [
                b'{"choices": [{"index": 0, "delta": {"content": "caf\xff!"}}]}',
                b'{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c_bad", '
                b'"type": "function", "function": {"name": "get_weather", "arguments": '
                b'"{\\"city\\": \\"Z\xffrich\\"}"}}]}}]}',
                b'{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "id": "c_ok", '
                b'"type": "function", "function": {"name": "get_weather", "arguments": '
                b'"{\\"city\\": \\"Bern\\"}"}}]}}]}',
                b'{"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}',
            ]
        )
    return (
        wire.anthropic_sse(
            [
                wire.an_message_start(),
                wire.an_block_start(0, {"type": "text", "text": ""}),
            ]
        )
        + b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, '
        b'"delta": {"type": "text_delta", "text": "caf\xff!"}}\n\n'
        + wire.anthropic_sse(
            [
                wire.an_block_stop(0),
                wire.an_block_start(
                    1, {"type": "tool_use", "id": "c_bad", "name": "get_weather", "input": {}}
                ),
            ]
        )
        + b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 1, '
        b'"delta": {"type": "input_json_delta", "partial_json": "{\\"city\\": \\"Z\xffrich\\"}"}}'
        b"\n\n"
        + wire.anthropic_sse(
            [
                wire.an_block_stop(1),
                wire.an_block_start(
                    2, {"type": "tool_use", "id": "c_ok", "name": "get_weather", "input": {}}
                ),
                wire.an_json(2, '{"city": "Bern"}'),
                wire.an_block_stop(2),
                wire.an_message_delta("tool_use"),
                wire.MESSAGE_STOP,
            ]
        )
    )


@pytest.mark.parametrize("kind", ["openai", "anthropic", "responses"])
async def test_invalid_utf8_in_arguments_never_runs_that_call_but_its_sibling_runs(
    kind: str, server: Server, history_valid: Any
) -> None:
    server.queue(Reply(damaged_turn(kind)), Reply(TURN_BUILDERS[kind]([], FINAL)))
    ran: list[str] = []
    model = ADAPTERS[kind](server)
    agent = Agent(model=model, tools=make_tools(ran))
    result = await agent.run("weather?")
    await model.aclose()
    assert result.stop_reason == "finished", result.error
    assert ran == ["get_weather:Bern"]  # never with "Z\ufffdrich"
    history_valid(agent.messages)
    first = agent.messages[1]
    assert isinstance(first, AssistantMessage) and first.text == "caf\ufffd!"
    results = {r.call_id: r for r in agent.messages[2].results}  # type: ignore[union-attr]
    assert results["c_bad"].is_error and "nothing was run" in results["c_bad"].text
    assert not results["c_ok"].is_error and results["c_ok"].text == "Sunny in Bern"
    sent = server.requests[1].json
    if kind == "openai":
        bad = sent["messages"][1]["tool_calls"][0]["function"]["arguments"]
        assert bad == "{}"  # the history keeps a valid stand-in; the result says what was wrong
        tool_message = sent["messages"][2]
        assert tool_message["tool_call_id"] == "c_bad"
        assert tool_message["content"].startswith("Error: Invalid arguments")
    elif kind == "responses":
        items = sent["input"]
        assert items[1] == {"role": "assistant", "content": "caf\ufffd!"}
        assert items[2]["call_id"] == "c_bad" and items[2]["arguments"] == "{}"
        assert items[3]["call_id"] == "c_ok" and items[3]["arguments"] == '{"city": "Bern"}'
        assert items[4]["call_id"] == "c_bad"
        assert items[4]["output"].startswith("Error: Invalid arguments")
    else:
        blocks = sent["messages"][1]["content"]
        assert [b["type"] for b in blocks] == ["text", "tool_use", "tool_use"]
        assert blocks[1]["input"] == {} and blocks[2]["input"] == {"city": "Bern"}
        outcome = {b["tool_use_id"]: b for b in sent["messages"][2]["content"]}
        assert outcome["c_bad"]["is_error"] is True


PROVIDER_TOOL = {
    "openai": {"type": "web_search", "search_context_size": "low"},
    "responses": {"type": "web_search", "search_context_size": "low"},
    "anthropic": {"type": "web_search_20250305", "name": "web_search", "max_uses": 2},
}


@pytest.mark.parametrize("kind", ["openai", "anthropic", "responses"])
async def test_a_provider_executed_tool_is_sent_as_the_providers_own_spec(
    kind: str, server: Server
) -> None:
    web_search = Tool(
        name="web_search",
        provider_executed=True,
        provider_options={"tool": PROVIDER_TOOL[kind]},
    )
    server.queue(Reply(TURN_BUILDERS[kind]([], FINAL)))
    model = ADAPTERS[kind](server)
    agent = Agent(model=model, tools=[*make_tools([]), web_search])
    result = await agent.run("search the web")
    await model.aclose()
    assert result.stop_reason == "finished", result.error
    tools = server.requests[0].json["tools"]
    assert tools[-1] == PROVIDER_TOOL[kind]  # verbatim, not a function named web_search
    assert len(tools) == 4
