"""OpenTelemetry spans for runs, with the SDK's in-memory exporter (the real SDK, no mock)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from nbagent import Agent, ScriptedApprover, deny, tool
from nbagent.models import Call, ScriptedModel, Text, Turn

sdk = pytest.importorskip("opentelemetry.sdk.trace", reason="the test extra installs the SDK")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from nbagent.telemetry import instrument  # noqa: E402

SECRET_ARG = "the-password-is-hunter2"


@tool
def lookup(code: str) -> str:
    """Look something up."""
    return f"found {code}"


@tool(needs_approval=True)
def remove(path: str) -> str:
    """Remove a file."""
    return f"removed {path}"


@tool
def broken(x: int) -> str:
    """Always fails."""
    raise ValueError("nope")


def traced(capture: bool = False) -> tuple[Agent, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    model = ScriptedModel(
        [
            Turn(
                Text("Working."),
                Call("lookup", {"code": SECRET_ARG}),
                Call("remove", {"path": "a.txt"}),
                Call("broken", {"x": 1}),
            ),
            "All done.",
        ]
    )
    agent = Agent(model, [lookup, remove, broken], approver=ScriptedApprover([deny("no")]))
    instrument(agent, tracer_provider=provider, capture_content=capture)
    return agent, exporter


def by_name(exporter: InMemorySpanExporter) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for span in exporter.get_finished_spans():
        found.setdefault(span.name, []).append(span)
    return found


def test_a_run_is_one_span_with_a_child_per_request_and_per_call() -> None:
    agent, exporter = traced()
    result = agent.run_sync("do it")
    spans = by_name(exporter)
    run = spans["invoke_agent nbagent"][0]
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["nbagent.stop_reason"] == result.stop_reason == "finished"
    assert run.attributes["gen_ai.usage.output_tokens"] == result.usage.output_tokens
    chats = spans["chat scripted"]
    assert len(chats) == 2 and all(c.parent.span_id == run.context.span_id for c in chats)
    assert chats[0].attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert chats[0].attributes["gen_ai.operation.name"] == "chat"
    # calls that ran are spans; the denied one is an approval event on the run
    assert "execute_tool remove" not in spans
    ok = spans["execute_tool lookup"][0]
    assert ok.parent.span_id == run.context.span_id
    assert ok.attributes["gen_ai.tool.name"] == "lookup" and ok.status.is_ok
    failed = spans["execute_tool broken"][0]
    assert not failed.status.is_ok and failed.attributes["error.type"] == "error"
    events = [e.name for e in run.events]
    assert events == ["nbagent.approval.requested", "nbagent.approval.resolved"]
    assert run.events[1].attributes["nbagent.approval.approved"] is False
    # spans nest in time
    assert run.start_time <= chats[0].start_time and chats[-1].end_time <= run.end_time


def test_no_content_unless_asked() -> None:
    agent, exporter = traced()
    agent.run_sync("do it")
    everything = str([dict(s.attributes) for s in exporter.get_finished_spans()])
    assert SECRET_ARG not in everything and "do it" not in everything
    agent, exporter = traced(capture=True)
    agent.run_sync("do it")
    spans = by_name(exporter)
    assert SECRET_ARG in spans["execute_tool lookup"][0].attributes["gen_ai.tool.call.arguments"]
    assert "do it" in spans["invoke_agent nbagent"][0].attributes["gen_ai.input.messages"]


def test_a_cancelled_run_ends_its_open_spans() -> None:
    agent, exporter = traced()

    @tool
    async def slow() -> str:
        """Slow."""
        await asyncio.sleep(30)
        return "x"

    agent.add_tool(slow)
    agent.generator = ScriptedModel([Turn(Call("slow"))])

    async def go() -> None:
        run = agent.start("wait")
        async for event in run.events():
            if type(event).__name__ == "ToolStarted":
                run.cancel()
        await run.result()

    asyncio.run(go())
    spans = by_name(exporter)
    assert spans["invoke_agent nbagent"][0].attributes["nbagent.stop_reason"] == "cancelled"
    assert not spans["execute_tool slow"][0].status.is_ok


def test_stopping_the_instrumentation() -> None:
    agent, exporter = traced()
    agent.observers.clear()
    agent.run_sync("do it")
    assert exporter.get_finished_spans() == ()


# --- the conventions' required attributes, errors and conversation ids (release 1.41.0) ---------


def test_every_span_names_its_provider_and_conversation() -> None:
    agent, exporter = traced()
    agent.run_sync("do it")
    spans = exporter.get_finished_spans()
    run = by_name(exporter)["invoke_agent nbagent"][0]
    assert run.attributes["gen_ai.provider.name"] == "ScriptedModel"  # Required on invoke_agent
    conversation = run.attributes["gen_ai.conversation.id"]
    assert conversation == agent.conversation_id and conversation.startswith("conv_")
    assert {s.attributes.get("gen_ai.conversation.id") for s in spans} == {conversation}


def test_a_conversation_id_is_the_conversations_not_the_runs() -> None:
    agent, exporter = traced()
    agent.run_sync("first")
    agent.generator = ScriptedModel(["Again."])
    agent.run_sync("second")  # the same conversation goes on
    runs = by_name(exporter)["invoke_agent nbagent"]
    ids = [r.attributes["gen_ai.conversation.id"] for r in runs]
    assert len(ids) == 2 and ids[0] == ids[1]
    twin = agent.fork()
    assert twin.conversation_id != agent.conversation_id
    before = agent.conversation_id
    agent.reset()
    assert agent.conversation_id != before


def test_conversation_ids_are_unique_across_processes() -> None:
    """Each kernel, script or batch worker numbers its runs from 1: the id must not."""
    import subprocess
    import sys

    script = (
        "from tests.test_telemetry import traced, by_name\n"
        "agent, exporter = traced()\n"
        "agent.run_sync('do it')\n"
        "run = by_name(exporter)['invoke_agent nbagent'][0]\n"
        "print(run.attributes['gen_ai.conversation.id'])\n"
    )
    seen = [
        subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
        ).stdout.strip()
        for _ in range(2)
    ]
    assert all(s.startswith("conv_") for s in seen), seen
    assert seen[0] != seen[1]


@pytest.mark.parametrize(
    ("status", "body", "error_type"),
    [
        (
            401,
            b'{"error": {"message": "bad key", "type": "invalid_request_error"}}',
            "AuthenticationError",
        ),
        (
            400,
            b'{"error": {"message": "no such tool", "type": "invalid_request_error"}}',
            "BadRequestError",
        ),
    ],
)
async def test_a_failed_model_request_is_an_error_span_with_its_type(
    status: int, body: bytes, error_type: str
) -> None:
    """A request refused before any answer: the chat span is an ERROR with ``error.type`` (it
    was left 'cancelled' with no type), and so is the run."""
    from tests.providers.conftest import Reply, Server
    from tests.providers.helpers import openai

    server = Server()
    await server.start()
    try:
        server.queue(Reply(body, status, content_type="application/json"))
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        model = openai(server)
        agent = Agent(model, [lookup])
        instrument(agent, tracer_provider=provider)
        result = await agent.run("hi", raise_on_error=False)
        await model.aclose()
    finally:
        await server.close()
    assert result.stop_reason == "failed"
    spans = by_name(exporter)
    (chat,) = spans["chat gpt-4.1-mini"]
    assert chat.status.status_code.name == "ERROR"
    assert chat.attributes["error.type"] == error_type
    assert "cancelled" not in (chat.status.description or "")
    assert chat.attributes["gen_ai.provider.name"] == "openai"
    assert chat.attributes["server.address"] == "127.0.0.1"
    run = spans["invoke_agent nbagent"][0]
    assert run.attributes["gen_ai.provider.name"] == "openai"
    assert run.attributes["error.type"] == error_type


async def test_an_answer_that_broke_off_is_an_error_span_with_its_type() -> None:
    from tests.providers import wire
    from tests.providers.conftest import Reply, Server
    from tests.providers.helpers import anthropic

    server = Server()
    await server.start()
    try:
        partial = wire.anthropic_sse(
            [
                wire.an_message_start(),
                wire.an_block_start(0, {"type": "text", "text": ""}),
                wire.an_text(0, "hal"),
            ]
        )
        server.queue(Reply([partial], end="drop"))
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        model = anthropic(server, max_retries=0)
        agent = Agent(model, [lookup])
        instrument(agent, tracer_provider=provider)
        result = await agent.run("hi", raise_on_error=False)
        await model.aclose()
    finally:
        await server.close()
    assert result.stop_reason == "failed"
    spans = by_name(exporter)
    (chat,) = spans["chat claude-sonnet-4-5"]
    assert chat.status.status_code.name == "ERROR"
    assert chat.attributes["error.type"] == "StreamError"
    assert "dropped" in chat.status.description
    assert chat.attributes["gen_ai.provider.name"] == "anthropic"
    assert chat.end_time <= spans["invoke_agent nbagent"][0].end_time


async def test_a_helper_agents_run_span_nests_inside_the_call_that_runs_it() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    helper = Agent(ScriptedModel([Turn(Call("lookup", {"code": "x"})), "found it"]), [lookup])
    instrument(helper, tracer_provider=provider, name="researcher")
    caller = Agent(
        ScriptedModel([Turn(Call("researcher", {"prompt": "look x up"})), "Done."]),
        [helper.as_tool(name="researcher", description="Looks things up.")],
    )
    instrument(caller, tracer_provider=provider, name="planner")
    await caller.run("go")
    spans = by_name(exporter)
    outer = spans["invoke_agent planner"][0]
    call = spans["execute_tool researcher"][0]
    inner = spans["invoke_agent researcher"][0]
    inner_call = spans["execute_tool lookup"][0]
    assert call.parent.span_id == outer.context.span_id
    assert inner.parent.span_id == call.context.span_id  # invoke_agent inside execute_tool
    assert inner_call.parent.span_id == inner.context.span_id
    assert len({s.context.trace_id for s in (outer, call, inner, inner_call)}) == 1
