"""The npm reference server (@modelcontextprotocol/server-everything): its real draft-07
schemas, translated exactly; its results of every kind; a run through the agent loop."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs the extra)")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft7Validator

from nbagent import Agent, AutoApprove
from nbagent.content import ImagePart
from nbagent.messages import ToolMessage
from nbagent.models.scripted import Call, ScriptedModel, Turn
from nbagent.schema import compile_schema

from ..conftest import assert_history_valid
from .conftest import alive, by_name, call, everything_command


@pytest.fixture(scope="module")
def raw_schemas() -> dict[str, dict[str, Any]]:
    """The input schemas exactly as the server lists them, read with the SDK alone."""
    from mcp import Client, StdioServerParameters

    command = everything_command()

    async def listing() -> dict[str, dict[str, Any]]:
        params = StdioServerParameters(command=command[0], args=command[1:])
        async with Client(params, cache=None) as client:
            return {t.name: t.input_schema for t in (await client.list_tools()).tools}

    return asyncio.run(listing())


def test_every_reference_tool_registers_from_its_draft_07_schema(
    everything: Any, raw_schemas: dict[str, dict[str, Any]]
) -> None:
    assert raw_schemas, "the reference server listed no tools"
    assert all(
        s.get("$schema") == "http://json-schema.org/draft-07/schema#" for s in raw_schemas.values()
    )
    # the one tool that runs only as an MCP task is refused (see test_listings.py)
    [task_only] = everything.rejected
    assert task_only.startswith("tool 'simulate-research-query' ")
    assert set(everything.origins.values()) == set(raw_schemas) - {"simulate-research-query"}
    for tool in everything.tools:
        assert "$schema" not in tool.input_schema
        compile_schema(tool.input_schema)  # the same strict compile every tool passes


values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 20) | st.floats(allow_nan=False, width=32)
    | st.sampled_from(["hi", "", "Chicago", "Text", "Blob", "error", "resource"]),
    lambda inner: st.lists(inner, max_size=2),
    max_leaves=4,
)  # fmt: skip


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_the_translated_schemas_accept_exactly_what_the_originals_accept(
    everything: Any, raw_schemas: dict[str, dict[str, Any]], data: st.DataObject
) -> None:
    for tool in everything.tools:
        original = raw_schemas[everything.origins[tool.name]]
        keys = [*sorted(original.get("properties", {})), "other"]
        instance = data.draw(st.dictionaries(st.sampled_from(keys), values, max_size=3))
        expected = Draft7Validator(original).is_valid(instance)
        assert compile_schema(tool.input_schema).is_valid(instance) == expected, (
            tool.name,
            instance,
        )


def test_results_of_every_kind(everything: Any) -> None:
    assert call(by_name(everything, "everything__echo"), {"message": "hi"}).text == "Echo: hi"
    total = call(by_name(everything, "everything__get-sum"), {"a": 2, "b": 3.5})
    assert "5.5" in total.text
    image = call(by_name(everything, "everything__get-tiny-image"), {})
    # its PNG carries a colour profile with a bad checksum: that chunk is left out, the image
    # is kept (as the PNG specification allows), and it decodes
    [picture] = image.images
    assert isinstance(picture, ImagePart) and (picture.width, picture.height) == (20, 20)
    structured = call(
        by_name(everything, "everything__get-structured-content"), {"location": "Chicago"}
    )
    assert set(json.loads(structured.text)) >= {"temperature", "conditions", "humidity"}
    resource = call(by_name(everything, "everything__get-resource-reference"), {})
    assert "[resource <demo://resource/" in resource.text
    links = call(by_name(everything, "everything__get-resource-links"), {"count": 2})
    assert links.text.count("[resource link ") == 2
    updates: list[Any] = []
    slow = call(
        by_name(everything, "everything__trigger-long-running-operation"),
        {"duration": 0.4, "steps": 2},
        updates,
    )
    assert not slow.is_error and len(updates) >= 1
    env = call(by_name(everything, "everything__get-env"), {})
    assert "OPENAI_API_KEY" not in env.text and "PATH" in env.text


def test_a_run_through_the_loop_with_the_reference_server(everything: Any) -> None:
    model = ScriptedModel([Turn(Call("everything__echo", {"message": "from the loop"})), "ok"])
    agent = Agent(model, everything.tools, approver=AutoApprove())
    agent.run_sync("echo")
    sent = model.requests[1].messages[-1]
    assert isinstance(sent, ToolMessage) and sent.results[0].text == "Echo: from the loop"
    assert_history_valid(agent.messages)


def test_closing_the_reference_server_ends_its_node_process() -> None:
    from nbagent.mcp import mcp_server

    server = mcp_server("ref", everything_command())
    pid = server.pid
    assert pid is not None and alive(pid)
    server.close()
    assert not alive(pid)
