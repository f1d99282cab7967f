"""The offline default: calls the tools a prompt names, answers from results, says so."""

from __future__ import annotations

from typing import Any

from nbagent import Agent, OfflineModel, Tool, ToolContext
from nbagent.generation import NamedToolChoice, Options
from nbagent.models import OFFLINE_LABEL

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
        "units": {"enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city", "days", "units"],
    "additionalProperties": False,
}


def forecast(log: list[Any]) -> Tool:
    def run(ctx: ToolContext) -> str:
        log.append(ctx.input)
        return f"{ctx.input['city']}: sunny for {ctx.input['days']} days"

    return Tool(name="forecast", description="Weather forecast", input_schema=SCHEMA, execute=run)


async def test_calls_named_tool_with_prompt_values_and_answers() -> None:
    log: list[Any] = []
    agent = Agent(OfflineModel(), [forecast(log)])
    result = await agent.run('Use forecast for "Lyon" over 3 days in fahrenheit')
    assert log == [{"city": "Lyon", "days": 3, "units": "fahrenheit"}]
    assert result.text.startswith(OFFLINE_LABEL)
    assert "Lyon: sunny for 3 days" in result.text
    assert result.steps == 2


async def test_without_a_named_tool_it_says_what_it_is() -> None:
    log: list[Any] = []
    result = await Agent(OfflineModel(), [forecast(log)]).run("What is the meaning of life?")
    assert log == []
    assert (
        OFFLINE_LABEL in result.text and "not an LLM" in result.text and "forecast" in result.text
    )


async def test_values_are_clamped_to_the_schema() -> None:
    log: list[Any] = []
    await Agent(OfflineModel(), [forecast(log)]).run('forecast "Oslo" for 30 days')
    assert log[0]["days"] == 7 and log[0]["units"] == "celsius"


async def test_named_tool_choice_forces_the_call() -> None:
    log: list[Any] = []
    options = Options(tool_choice=NamedToolChoice("forecast"))
    await Agent(OfflineModel(), [forecast(log)], options=options).run('"Rome" 2')
    assert log == [{"city": "Rome", "days": 2, "units": "celsius"}]


async def test_number_at_the_end_of_a_sentence() -> None:
    from nbagent import tool

    @tool
    def add(a: float, b: float) -> float:
        """Add."""
        return a + b

    result = await Agent(OfflineModel(), [add]).run("Please add 2 and 3.")
    assert "returned: 5.0" in result.text


def named(log: list[Any], name: str, title: str | None = None) -> Tool:
    """A tool that records the name it was called by."""

    def run(ctx: ToolContext) -> str:
        log.append(name)
        return "ok"

    schema = {"type": "object", "properties": {"message": {"type": "string"}}}
    return Tool(name=name, description="", input_schema=schema, title=title, execute=run)


async def test_an_mcp_tool_is_named_by_its_short_name_or_its_title() -> None:
    log: list[Any] = []
    tools = [
        named(log, "everything__echo", "Echo Tool"),
        named(log, "everything__get-sum", "Get Sum Tool"),
        named(log, "fs__read_text_file", "Read Text File"),
    ]
    await Agent(OfflineModel(), tools).run('Echo "hello" with the everything server')
    assert log == ["everything__echo"]
    await Agent(OfflineModel(), tools).run("get sum of 2 and 3")
    assert log[1:] == ["everything__get-sum"]
    await Agent(OfflineModel(), tools).run('Read Text File "notes.txt"')  # its title
    assert log[2:] == ["fs__read_text_file"]


async def test_a_short_name_or_title_two_tools_share_names_neither() -> None:
    log: list[Any] = []
    tools = [named(log, "a__echo", "Echo"), named(log, "b__echo", "Echo")]
    result = await Agent(OfflineModel(), tools).run('Echo "hi"')
    assert log == [] and "a__echo, b__echo" in result.text  # it says which names to use
    await Agent(OfflineModel(), tools).run('b__echo "hi"')  # the full name always works
    assert log == ["b__echo"]
    mine = [named(log, "echo"), named(log, "everything__echo")]  # a tool of that very name
    await Agent(OfflineModel(), mine).run('echo "hi"')
    assert log[1:] == ["echo"]
