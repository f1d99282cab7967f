"""@tool, Definition vs Tool, and the validation helpers (rule 1 and rule 4)."""

from __future__ import annotations

import asyncio
import dataclasses
from enum import Enum
from typing import Annotated, Any, Literal

import pytest

from nbagent import (
    Agent,
    ArgumentsError,
    Definition,
    SchemaError,
    ScriptedModel,
    Tool,
    ToolCall,
    ToolContext,
    ToolDefinitionError,
    decode_arguments,
    tool,
    validate_arguments,
    validate_tools,
)
from nbagent.models import Call, Turn


class Unit(Enum):
    C = "celsius"
    F = "fahrenheit"


@dataclasses.dataclass
class Place:
    city: str
    country: str = "FR"


def test_tool_from_hints_and_docstring() -> None:
    @tool
    def forecast(place: Place, days: int, unit: Unit = Unit.C, note: str | None = None) -> str:
        """Forecast the weather.

        Args:
            place: Where to forecast.
            days: How many days ahead.
        """
        return f"{place.city}/{place.country} {days} {unit.value} {note}"

    assert isinstance(forecast, Tool)
    assert forecast.name == "forecast"
    assert forecast.description.startswith("Forecast the weather.")
    schema = forecast.input_schema
    assert schema is not None
    assert set(schema["required"]) == {"place", "days"}
    assert schema["properties"]["days"]["description"] == "How many days ahead."
    assert forecast(Place("Lyon"), 2) == "Lyon/FR 2 celsius None"  # still a plain function


async def test_decorated_tool_runs_with_typed_arguments() -> None:
    seen: list[Any] = []

    @tool(title="Weather", needs_approval=False)
    async def forecast(place: Place, unit: Unit, days: Annotated[int, "days ahead"] = 1) -> str:
        """Forecast."""
        seen.append((place, unit, days))
        return "ok"

    model = ScriptedModel(
        [Turn(Call("forecast", {"place": {"city": "Oslo"}, "unit": "fahrenheit"})), "done"]
    )
    await Agent(model, [forecast]).run("go")
    assert seen == [(Place("Oslo", "FR"), Unit.F, 1)]
    assert forecast.title == "Weather"


async def test_context_parameter_gets_progress_and_is_not_in_schema() -> None:
    @tool
    def slow(n: int, ctx: ToolContext) -> str:
        """Count."""
        ctx.update(f"{n} to go")
        return "counted"

    assert "ctx" not in (slow.input_schema or {})["properties"]
    model = ScriptedModel([Turn(Call("slow", {"n": 3})), "done"])
    events = [type(e).__name__ async for e in Agent(model, [slow]).stream("go")]
    assert "ToolProgress" in events


def test_unsupported_hints_fail_at_decoration_with_escape_hatch() -> None:
    with pytest.raises(ToolDefinitionError, match="data"):

        @tool
        def takes_bytes(data: bytes) -> str:
            return ""

    @tool(schema={"type": "object", "properties": {"data": {"type": "string"}}})
    def raw(data: Any) -> str:
        """Raw schema."""
        return str(data)

    assert raw.input_schema == {"type": "object", "properties": {"data": {"type": "string"}}}


def test_schema_escape_hatch_is_still_strict() -> None:
    with pytest.raises(SchemaError, match="/properties/x/\\$ref"):

        @tool(schema={"type": "object", "properties": {"x": {"$ref": "https://x.test/s"}}})
        def remote(x: Any) -> str:
            return ""


def test_validate_tools_checks_every_rule() -> None:
    ok = Tool(name="ok", execute=lambda c: "x")
    assert set(validate_tools([ok])) == {"ok"}
    cases: list[tuple[list[Any], str]] = [
        ([Tool(name="bad name!", execute=print)], "name"),
        ([ok, Tool(name="ok", execute=print)], "registered twice"),
        ([Tool(name="noexec")], "no execute"),
        ([Tool(name="m", execute=print, execution_mode="parallel")], "execution_mode"),  # type: ignore[arg-type]
        ([Tool(name="t", execute=print, timeout=0)], "timeout"),
        (["not a tool"], "register a Tool"),
        ([Tool(name="n", execute=print, needs_approval="yes")], "needs_approval"),  # type: ignore[arg-type]
    ]
    for tools, fragment in cases:
        with pytest.raises(ToolDefinitionError, match=fragment):
            validate_tools(tools)
    with pytest.raises(SchemaError):
        validate_tools([Tool(name="s", execute=print, input_schema={"type": "array"})])


def test_definition_is_what_a_generator_sees() -> None:
    @tool(needs_approval=True)
    def ping() -> str:
        """Ping."""
        return "pong"

    definition = ping.definition
    assert type(definition) is Definition
    assert definition.name == "ping" and definition.input_schema == ping.input_schema
    assert not hasattr(definition, "execute")


def test_validate_and_decode_arguments() -> None:
    assert validate_arguments(ToolCall("1", "t", '{"a": 1}')) == {"a": 1}
    assert validate_arguments(ToolCall("1", "t", "")) == {}  # empty string from some servers
    for bad in ("[1]", '"text"', "1", "{"):
        with pytest.raises(ArgumentsError):
            validate_arguments(ToolCall("1", "t", bad))
    place = decode_arguments(ToolCall("1", "t", '{"city": "Nice"}'), Place)
    assert place == Place("Nice")
    with pytest.raises(ArgumentsError, match="/city"):
        decode_arguments({"city": 123}, Place)
    assert decode_arguments({"x": "123"}, dict[str, str]) == {"x": "123"}
    with pytest.raises(ArgumentsError):
        decode_arguments({"x": "123"}, dict[str, int])  # no coercion


def test_literal_and_sync_tool_run_on_a_thread() -> None:
    import threading

    threads: list[str] = []

    @tool
    def pick(mode: Literal["fast", "slow"]) -> str:
        """Pick."""
        threads.append(threading.current_thread().name)
        return mode

    model = ScriptedModel([Turn(Call("pick", {"mode": "slow"})), "done"])
    result = asyncio.run(Agent(model, [pick]).run("go"))
    assert result.text == "done"
    assert threads and threads[0] != threading.main_thread().name
    assert (pick.input_schema or {})["properties"]["mode"]["enum"] == ["fast", "slow"]
