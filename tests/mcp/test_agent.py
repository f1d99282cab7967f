"""MCP tools in the agent loop: approval by default, results in the history, concurrent calls,
a cancelled run, and the translated schema as a provider receives it (loopback OpenAI server)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs the extra)")

from nbagent import Agent, AutoApprove
from nbagent.events import ToolCallStarted
from nbagent.messages import ToolMessage
from nbagent.models.scripted import Call, ScriptedModel, Turn

from ..conftest import assert_history_valid
from ..providers import wire
from ..providers.conftest import Reply, Server
from ..providers.helpers import openai
from .conftest import call


def results_of(agent: Agent) -> list[Any]:
    return [r for m in agent.messages if isinstance(m, ToolMessage) for r in m.results]


def test_mcp_tools_need_approval_by_default_and_a_denied_call_never_runs(
    demo: Any, tmp_path: Path
) -> None:
    target = tmp_path / "made-by-the-server"
    model = ScriptedModel([Turn(Call("demo__touch", {"path": str(target)})), "done"])
    agent = Agent(model, demo.tools)  # no approver: calls that need approval are denied
    agent.run_sync("touch it")
    assert not target.exists()
    [result] = results_of(agent)
    assert result.is_error and "denied" in result.text
    assert_history_valid(agent.messages)


def test_an_approved_call_runs_on_the_server_and_its_result_reaches_the_model(
    demo: Any, tmp_path: Path
) -> None:
    target = tmp_path / "made-by-the-server"
    model = ScriptedModel(
        [
            Turn(
                Call("demo__touch", {"path": str(target)}),
                Call("demo__count", {"steps": 2}),
                Call("demo__add", {"a": "1", "b": 2}),  # fails the schema: never sent
            ),
            "done",
        ]
    )
    agent = Agent(model, demo.tools, approver=AutoApprove())
    agent.run_sync("go")
    assert target.exists()
    touched, counted, refused = results_of(agent)
    assert touched.text == f"touched {target}" and counted.text == "counted to 2"
    assert refused.is_error and "/a" in refused.text
    sent = model.requests[1].messages[-1]
    assert isinstance(sent, ToolMessage) and sent.results[0].text == f"touched {target}"
    assert_history_valid(agent.messages)


async def test_cancelling_a_run_during_a_call_leaves_a_valid_history_and_the_server_usable(
    demo: Any,
) -> None:
    model = ScriptedModel([Turn(Call("demo__hang", {})), "never"])
    agent = Agent(model, demo.tools, approver=AutoApprove())
    run = agent.start("wait forever")
    async for event in run.events():
        if isinstance(event, ToolCallStarted):
            run.cancel()
    result = await run.result()
    assert result.stop_reason == "cancelled"
    assert_history_valid(agent.messages)
    add = next(t for t in demo.tools if t.name == "demo__add")
    assert (await asyncio.to_thread(call, add, {"a": 1, "b": 1})).text == "2"


@pytest.fixture
async def loopback() -> AsyncIterator[Server]:
    server = Server()
    await server.start()
    try:
        yield server
    finally:
        await server.close()


def openai_call(call_id: str, name: str, arguments: str) -> bytes:
    return wire.openai_sse(
        [
            wire.oa_chunk({"role": "assistant", "content": ""}),
            wire.oa_chunk({"tool_calls": [wire.oa_call(0, call_id, name, arguments)]}),
            wire.oa_chunk({}, "tool_calls"),
        ]
    )


async def test_a_provider_gets_the_translated_schema_and_the_result_of_the_real_call(
    demo: Any, loopback: Server
) -> None:
    loopback.queue(
        Reply(openai_call("c1", "demo__pair", '{"pair": ["x", 7]}')),
        Reply(wire.openai_text("x is 7")),
    )
    agent = Agent(openai(loopback), demo.tools, approver=AutoApprove())
    result = await agent.run("pair x with 7")
    assert result.text == "x is 7"
    first, second = (r.json for r in loopback.requests)
    [pair] = [t for t in first["tools"] if t["function"]["name"] == "demo__pair"]
    parameters = pair["function"]["parameters"]
    assert "$schema" not in parameters
    assert parameters["properties"]["pair"]["prefixItems"] == [
        {"type": "string"},
        {"type": "integer"},
    ]
    answer = second["messages"][-1]
    assert answer["role"] == "tool" and answer["tool_call_id"] == "c1"
    assert answer["content"] == "x=7"
