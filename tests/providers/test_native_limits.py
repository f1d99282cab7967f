"""A typed run asks for the provider's native structured output only where the schema is within
every limit the vendor documents, else it answers through the ``final_answer`` tool: for each
limit a schema at it and one past it, asserted on the request body the loopback server got.

OpenAI (Chat Completions and Responses): 5,000 object properties, 10 levels of nesting, 1,000
enum values, 120,000 characters of names and enum/const values, 15,000 characters in one string
enum of more than 250 values; recursion allowed. Anthropic: no recursion, ``minItems`` 0 or 1
only, a fixed list of formats, enum values that are not objects, 16 union properties."""

from __future__ import annotations

from typing import Any

import pytest

from nbagent.agent import Agent
from nbagent.output import ANSWER_TOOL

from . import wire
from .conftest import Reply, Server
from .helpers import anthropic, openai, responses


def closed(properties: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
        **more,
    }


def many_properties(count: int) -> dict[str, Any]:
    return closed({f"p{i}": {"type": "integer"} for i in range(count)})


def nested(levels: int) -> dict[str, Any]:
    node = closed({"leaf": {"type": "integer"}})
    for _ in range(levels - 1):
        node = closed({"child": node})
    return node


def enums(values: int) -> dict[str, Any]:
    """``values`` enum values in all, at most 250 per property."""
    properties = {}
    for start in range(0, values, 250):
        chunk = range(start, min(values, start + 250))
        properties[f"e{start}"] = {"type": "string", "enum": [f"v{i}" for i in chunk]}
    return closed(properties)


def name_chars(total: int) -> dict[str, Any]:
    """Property names of ``total`` characters together (12 names, the last takes the rest)."""
    size = total // 12
    names = [chr(ord("a") + i) * size for i in range(11)]
    names.append("z" * (total - 11 * size))
    return closed({name: {"type": "integer"} for name in names})


def large_enum(chars: int) -> dict[str, Any]:
    """One string enum of 251 values of ``chars`` characters together."""
    each = chars // 251
    values = [f"{i:03d}" + "x" * (each - 3) for i in range(250)]
    values.append("999" + "y" * (chars - 250 * each - 3))
    return closed({"choice": {"type": "string", "enum": values}})


RECURSIVE = {
    "$defs": {
        "Node": closed(
            {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
            }
        )
    },
    **closed({"root": {"$ref": "#/$defs/Node"}}),
}
REFERENCED = {
    "$defs": {"Leaf": closed({"name": {"type": "string"}})},
    **closed({"first": {"$ref": "#/$defs/Leaf"}, "second": {"$ref": "#/$defs/Leaf"}}),
}


def unions(count: int) -> dict[str, Any]:
    return closed({f"u{i}": {"type": ["integer", "null"]} for i in range(count)})


def chat_text() -> bytes:
    return wire.openai_text("{}")


def anthropic_text() -> bytes:
    return wire.anthropic_text("{}")


def responses_text() -> bytes:
    return wire.responses_text("{}")


ADAPTERS = {
    "chat": (openai, chat_text),
    "responses": (responses, responses_text),
    "anthropic": (anthropic, anthropic_text),
}


async def asked(server: Server, adapter: str, schema: dict[str, Any]) -> str:
    """How the run asked for ``schema``: "native" or "tool", read from the request body."""
    make, reply = ADAPTERS[adapter]
    server.queue(Reply(reply()))
    model = make(server)
    await Agent(model).run("answer", output=schema, output_tries=1, raise_on_error=False)
    await model.aclose()
    body = server.requests[-1].json
    native = {
        "chat": "response_format" in body,
        "responses": "format" in body.get("text", {}),
        "anthropic": "output_config" in body,
    }[adapter]
    tools = [t.get("name") or t.get("function", {}).get("name") for t in body.get("tools", ())]
    assert native != (ANSWER_TOOL in tools), body.keys()
    return "native" if native else "tool"


OPENAI_LIMITS = [
    ("10 levels of nesting", nested(10), nested(11)),
    ("1,000 enum values", enums(1_000), enums(1_001)),
    ("120,000 characters of names", name_chars(120_000), name_chars(120_001)),
    ("15,000 characters in a large enum", large_enum(15_000), large_enum(15_001)),
]


@pytest.mark.parametrize("adapter", ["chat", "responses"])
@pytest.mark.parametrize(("limit", "at", "past"), OPENAI_LIMITS, ids=[x[0] for x in OPENAI_LIMITS])
async def test_openai_takes_a_schema_at_each_limit_natively_and_one_past_it_as_a_tool(
    server: Server, adapter: str, limit: str, at: dict[str, Any], past: dict[str, Any]
) -> None:
    assert await asked(server, adapter, at) == "native", limit
    assert await asked(server, adapter, past) == "tool", limit


async def test_openai_takes_5000_properties_natively_and_5001_as_a_tool(server: Server) -> None:
    # slow tier: compiling a schema of 5,000 properties takes half a minute (its metaschema
    # check grows faster than the schema), so one adapter here; both share the measure
    assert await asked(server, "chat", many_properties(5_000)) == "native"
    assert await asked(server, "responses", many_properties(5_001)) == "tool"


@pytest.mark.parametrize("adapter", ["chat", "responses"])
async def test_openai_takes_a_recursive_schema_natively(server: Server, adapter: str) -> None:
    assert await asked(server, adapter, RECURSIVE) == "native"
    assert "$defs" in str(server.requests[-1].json)


ANTHROPIC_LIMITS = [
    ("recursion", REFERENCED, RECURSIVE),
    (
        "minItems 0 or 1",
        closed({"xs": {"type": "array", "items": {"type": "integer"}, "minItems": 1}}),
        closed({"xs": {"type": "array", "items": {"type": "integer"}, "minItems": 2}}),
    ),
    (
        "the formats it lists",
        closed({"when": {"type": "string", "format": "date-time"}}),
        closed({"when": {"type": "string", "format": "iri-reference"}}),
    ),
    (
        "enum values that are not objects",
        closed({"pick": {"enum": ["a", 1, None]}}),
        closed({"pick": {"enum": [{"a": 1}, {"a": 2}]}}),
    ),
    ("16 union properties", unions(16), unions(17)),
    (
        "no numeric bounds",
        closed({"n": {"type": "integer"}}),
        closed({"n": {"type": "integer", "minimum": 1}}),
    ),
]


@pytest.mark.parametrize(
    ("limit", "at", "past"), ANTHROPIC_LIMITS, ids=[x[0] for x in ANTHROPIC_LIMITS]
)
async def test_anthropic_takes_a_schema_within_each_limit_natively_and_one_past_it_as_a_tool(
    server: Server, limit: str, at: dict[str, Any], past: dict[str, Any]
) -> None:
    assert await asked(server, "anthropic", at) == "native", limit
    assert await asked(server, "anthropic", past) == "tool", limit


def test_the_reason_is_said_for_config_and_the_request_view() -> None:
    from nbagent.output import typed_answer
    from nbagent.providers import AnthropicMessages

    model = AnthropicMessages("claude-sonnet-4-5", api_key="sk-ant-test-0123456789abcdef")
    chosen = typed_answer(RECURSIVE, model, {})
    assert chosen.mode == "tool"
    assert "recursive (#/$defs/Node refers to itself)" in chosen.how, chosen.how
