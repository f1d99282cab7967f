"""Provider preflight: each rule names what the API would reject, where, and why; a tool the
model's provider would reject is reported when the agent gets it, not at the first request."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from nbagent import Agent, Tool
from nbagent.providers import ToolSchemaWarning, configured_providers, preflight
from nbagent.tools import Definition

from .conftest import Server
from .helpers import anthropic, openai


def definition(schema: dict[str, Any], *, strict: bool | None = None) -> Definition:
    return Definition(name="t", input_schema=schema, strict=strict)


PLAIN = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def reasons(schema: dict[str, Any], provider: str, **kw: Any) -> list[tuple[str, str]]:
    return [(p.pointer, p.reason) for p in preflight(definition(schema, **kw), provider)]


def test_a_plain_tool_passes_everywhere() -> None:
    for provider in ("openai", "anthropic", "ollama", "openai-compatible"):
        assert preflight(definition(PLAIN), provider) == []
    # OpenAI's adapter rewrites a schema for strict mode (additionalProperties, required) ...
    assert preflight(definition(PLAIN, strict=True), "openai") == []
    # ... Anthropic's sends it as written, so strict mode needs it written that way
    (problem,) = preflight(definition(PLAIN, strict=True), "anthropic")
    assert (problem.pointer, problem.provider) == ("", "anthropic")
    assert "additionalProperties: false" in problem.message
    strict_ok = {**PLAIN, "additionalProperties": False}
    assert preflight(definition(strict_ok, strict=True), "anthropic") == []


def test_openai_needs_items_on_every_array() -> None:
    schema = {
        "type": "object",
        "properties": {
            "tags": {"type": "array"},
            "grid": {"type": "array", "items": {"type": "array"}},
        },
    }
    found = reasons(schema, "openai")
    assert [p for p, _ in found] == ["/properties/tags", "/properties/grid/items"]
    assert "needs `items`" in found[0][1]
    assert reasons(schema, "anthropic") == []  # Anthropic takes it


def test_openai_strict_reports_what_strict_schema_cannot_rewrite() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "string", "maxLength": 3}}}
    (found,) = reasons(schema, "openai", strict=True)
    assert "'maxLength' is not supported in strict mode" in found[1]
    assert reasons(schema, "openai") == []  # without strict mode it is fine
    free = {
        "type": "object",
        "properties": {"meta": {"type": "object", "additionalProperties": True}},
    }
    assert "additionalProperties must be false" in reasons(free, "openai", strict=True)[0][1]


def test_openai_strict_reports_free_form_values_at_their_pointers() -> None:
    """``settings: dict`` made strict could only ever be ``{}``: reported, never narrowed."""
    from nbagent import tool
    from nbagent.errors import ToolDefinitionError
    from nbagent.generation import Request
    from nbagent.messages import user
    from nbagent.providers.openai import OpenAIChat
    from nbagent.providers.responses import OpenAIResponses

    @tool(strict=True)
    def configure(name: str, settings: dict, value: Any, tags: list[dict]) -> str:
        """Store settings."""
        return name

    found = [(p.pointer, p.reason) for p in preflight(configure, "openai")]
    assert [pointer for pointer, _ in found] == [
        "/properties/settings",
        "/properties/value",
        "/properties/tags/items",
    ]
    assert "free-form object" in found[0][1] and "could only be {}" in found[0][1]
    assert "any type" in found[1][1]
    for pointer, reason in found:
        assert pointer not in reason  # the pointer is in its field; the message adds it once
    assert preflight(configure, "openai-responses") == preflight(configure, "openai")
    # and no adapter sends the narrowed schema instead
    for adapter in (OpenAIChat("gpt-4.1-mini", api_key="k"), OpenAIResponses("gpt-5", api_key="k")):
        with pytest.raises(ToolDefinitionError, match="/properties/settings"):
            adapter.build_body(Request([user("hi")], tools=[configure]))


def test_openai_strict_limits() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(11):
        deep = {"type": "object", "properties": {"x": deep}, "required": ["x"]}
    assert any("10 levels of nesting" in r for _, r in reasons(deep, "openai", strict=True))
    assert reasons(deep, "openai") == []
    many = {"type": "object", "properties": {"e": {"enum": list(range(1001))}}}
    assert any("1,000 enum values" in r for _, r in reasons(many, "openai", strict=True))


def test_anthropic_refuses_combinators_at_the_root() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        "anyOf": [{"required": ["a"]}, {"required": ["b"]}],
    }
    assert reasons(schema, "anthropic") == [
        ("/anyOf", "`anyOf` is not allowed at the root of input_schema (move it into a property)")
    ]
    assert reasons(schema, "openai") == []


def test_anthropic_strict() -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 1},
            "child": {"type": "object", "properties": {}},
            "list": {"type": "array", "items": {"type": "string"}, "minItems": 2},
        },
        "additionalProperties": False,
    }
    found = reasons(schema, "anthropic", strict=True)
    assert ("/properties/n/minimum", "strict tool use does not support `minimum`") in found
    assert any(p == "/properties/child" and "additionalProperties: false" in r for p, r in found)
    assert any(p == "/properties/list/minItems" for p, _ in found)
    recursive = {
        "type": "object",
        "properties": {"tree": {"$ref": "#/$defs/node"}},
        "additionalProperties": False,
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                "additionalProperties": False,
            }
        },
    }
    assert ("", "strict tool use does not support recursive schemas") in reasons(
        recursive, "anthropic", strict=True
    )
    assert ("", "strict tool use does not support recursive schemas") not in reasons(
        {**recursive, "$defs": {"node": {"type": "string"}}}, "anthropic", strict=True
    )


def test_provider_run_and_unknown_providers_are_not_checked() -> None:
    assert preflight(definition({"type": "object", "anyOf": [{}]}), "gemini") == []
    spec = Definition(name="web_search", provider_executed=True, input_schema={"anyOf": [{}]})
    assert preflight(spec, "anthropic") == []


def test_configured_providers() -> None:
    env = {"OPENAI_API_KEY": "sk-x", "NBAGENT_MODEL": "anthropic:claude-sonnet-4-5"}
    assert configured_providers(None, env) == ["anthropic", "openai"]
    assert configured_providers("ollama:qwen2.5", {}) == ["openai"]
    assert configured_providers(None, {}) == []  # the offline model takes anything


async def test_an_agent_warns_at_once_about_a_tool_its_provider_would_reject(
    server: Server,
) -> None:
    bad = Tool(
        name="tags",
        input_schema={"type": "object", "properties": {"t": {"type": "array"}}},
        execute=lambda c: None,
    )
    with pytest.warns(ToolSchemaWarning, match="OpenAI would reject tool 'tags': an array"):
        Agent(openai(server), [bad])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Agent(anthropic(server), [bad])  # Anthropic takes it: no warning
        agent = Agent(anthropic(server))
    root = Tool(
        name="either", input_schema={"type": "object", "oneOf": [{}, {}]}, execute=lambda c: None
    )
    with pytest.warns(ToolSchemaWarning, match="Anthropic would reject tool 'either'"):
        agent.add_tool(root)
