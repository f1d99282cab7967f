"""Typed answers (``output=``): a run answers with a validated value, through the API's own
structured output or a final-answer tool; bad answers go back to the model a bounded number of
times; output types that cannot be answered are refused before any request."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, TypedDict

import pytest

from nbagent import Agent
from nbagent.errors import OutputInvalidError, OutputTypeError, RunFailedError, SchemaError
from nbagent.events import AssistantTextDelta, RunFinished
from nbagent.generation import Request
from nbagent.messages import ToolMessage, UserMessage
from nbagent.models import Call, FunctionModel, Turn
from nbagent.output import ANSWER_TOOL, typed_answer
from nbagent.tools import tool


@dataclasses.dataclass
class Person:
    name: str
    age: int


class Movie(TypedDict):
    title: str
    year: int


class NativeModel(FunctionModel):
    """A FunctionModel that says its API can constrain answers (as the HTTP adapters do)."""

    def native_answers(self, schema: Any) -> tuple[bool, str]:
        return True, "test format"


def replies(*texts: str) -> NativeModel:
    def decide(request: Request) -> Any:
        asked = sum(isinstance(m, UserMessage) for m in request.messages)
        return texts[min(asked, len(texts)) - 1]

    return NativeModel(decide)


async def test_a_dataclass_answer_through_the_final_answer_tool(history_valid: Any) -> None:
    def decide(request: Request) -> Any:
        return Turn(Call(ANSWER_TOOL, {"name": "Ann", "age": 31}))

    model = FunctionModel(decide)
    agent = Agent(model)
    result = await agent.run("Ann is 31", output=Person)
    assert result.output == Person("Ann", 31) and isinstance(result.output, Person)
    assert result.stop_reason == "terminated"
    request = model.requests[0]
    assert request.answer_format is None
    assert [d.name for d in request.tools] == [ANSWER_TOOL]
    assert ANSWER_TOOL in (request.instructions or "")
    assert ANSWER_TOOL not in agent.tools  # the run's own tool: the agent is unchanged
    history_valid(agent.messages)
    plain = await agent.run("and now?")  # the next run answers text again
    assert plain.output is None


async def test_a_native_answer_is_parsed_validated_and_decoded() -> None:
    model = replies('{"title": "Alien", "year": 1979}')
    result = await Agent(model).run("the film", output=Movie)
    assert result.output == {"title": "Alien", "year": 1979}
    assert result.stop_reason == "finished"
    request = model.requests[0]
    assert request.answer_format is not None and request.tools == ()
    assert request.answer_format.schema["required"] == ["title", "year"]


async def test_non_object_types_are_wrapped_and_unwrapped() -> None:
    model = replies('{"value": ["a", "b"]}')
    result = await Agent(model).run("letters", output=list[str])
    assert result.output == ["a", "b"]
    assert model.requests[0].answer_format.schema["properties"]["value"]["type"] == "array"  # type: ignore[union-attr]


async def test_an_answer_that_does_not_fit_goes_back_with_the_errors(history_valid: Any) -> None:
    model = replies('{"name": "Ann"}', "not json at all", '{"name": "Ann", "age": 31}')
    agent = Agent(model)
    result = await agent.run("Ann is 31", output=Person)
    assert result.output == Person("Ann", 31)
    assert result.steps == 3
    notes = [m.text for m in agent.messages if isinstance(m, UserMessage)][1:]
    assert len(notes) == 2
    assert "age" in notes[0] and "required" in notes[0]
    assert "JSON" in notes[1]
    history_valid(agent.messages)


async def test_a_model_that_never_answers_in_the_form_fails_in_one_sentence() -> None:
    model = replies("I'd rather chat.")
    agent = Agent(model)
    with pytest.raises(RunFailedError) as caught:
        await agent.run("Ann is 31", output=Person, output_tries=2)
    error = caught.value.error
    assert isinstance(error, OutputInvalidError)
    assert str(error).startswith("the model did not answer in the asked form in 2 tries")
    assert "\n" not in str(error)
    assert error.answer == "I'd rather chat."  # the last answer is kept
    assert caught.value.result.text == "I'd rather chat."
    assert len(model.requests) == 2
    assert caught.value.result.output is None


async def test_a_tool_mode_model_that_only_writes_text_is_reminded_then_fails() -> None:
    model = FunctionModel(lambda request: "Ann, 31.")
    result = await Agent(model).run("Ann", output=Person, raise_on_error=False)
    assert result.stop_reason == "failed" and isinstance(result.error, OutputInvalidError)
    assert len(model.requests) == 3
    reminder = model.requests[1].messages[-1]
    assert isinstance(reminder, UserMessage) and ANSWER_TOOL in reminder.text


async def test_invalid_final_answer_calls_count_as_tries() -> None:
    def decide(request: Request) -> Any:
        return Turn(Call(ANSWER_TOOL, {"name": "Ann", "age": "thirty"}))

    model = FunctionModel(decide)
    agent = Agent(model)
    result = await agent.run("Ann", output=Person, output_tries=2, raise_on_error=False)
    assert isinstance(result.error, OutputInvalidError)
    assert "age" in result.error.problems
    assert len(model.requests) == 2
    errors = [p for m in agent.messages if isinstance(m, ToolMessage) for p in m.results]
    assert all(p.is_error for p in errors) and len(errors) == 2


async def test_the_answer_can_come_after_other_tool_calls() -> None:
    @tool
    def lookup(name: str) -> str:
        """Look a person up."""
        return "31"

    def decide(request: Request) -> Any:
        if not any(isinstance(m, ToolMessage) for m in request.messages):
            return Turn(Call("lookup", {"name": "Ann"}))
        return Turn(Call(ANSWER_TOOL, {"name": "Ann", "age": 31}))

    result = await Agent(FunctionModel(decide), [lookup]).run("Ann?", output=Person)
    assert result.output == Person("Ann", 31) and result.steps == 2


async def test_a_huge_typed_answer_is_bounded_like_any_arguments() -> None:
    huge = json.dumps({"name": "x" * 10_000_000, "age": 1})
    model = replies(huge, '{"name": "Ann", "age": 31}')
    agent = Agent(model)
    result = await agent.run("Ann", output=Person)
    assert result.output == Person("Ann", 31)
    note = [m.text for m in agent.messages if isinstance(m, UserMessage)][1]
    assert "bytes" in note and len(note) < 2_000

    def decide(request: Request) -> Any:
        return Turn(Call(ANSWER_TOOL, {"name": "x" * 10_000_000, "age": 1}))

    failed = await Agent(FunctionModel(decide)).run("Ann", output=Person, raise_on_error=False)
    assert isinstance(failed.error, OutputInvalidError)
    assert len(failed.error.answer) <= 2_000 and len(str(failed.error)) < 1_000


def test_output_types_that_cannot_be_answered_are_refused_before_any_request() -> None:
    model = replies("{}")
    agent = Agent(model)

    class Opaque:
        pass

    with pytest.raises(OutputTypeError, match="cannot be an answer type"):
        agent.run_sync("x", output=Opaque)
    with pytest.raises(
        OutputTypeError, match="never be satisfied: at /properties/a, no string is at least 5"
    ):
        agent.run_sync(
            "x",
            output={
                "type": "object",
                "properties": {"a": {"type": "string", "minLength": 5, "maxLength": 2}},
                "required": ["a"],
            },
        )
    with pytest.raises(SchemaError):
        agent.run_sync("x", output={"$id": "x", "type": "object"})
    with pytest.raises(OutputTypeError, match="at least 1"):
        agent.run_sync("x", output=Person, output_tries=0)
    assert model.requests == []
    assert not agent._running and agent.messages == []


def test_a_tool_named_like_the_answer_tool_is_refused() -> None:
    @tool(name=ANSWER_TOOL)
    def mine(text: str) -> str:
        """Mine."""
        return text

    agent = Agent(FunctionModel(lambda r: "x"), [mine])
    with pytest.raises(OutputTypeError, match="rename the tool"):
        agent.run_sync("x", output=Person)


def test_the_mode_is_chosen_per_model_and_said() -> None:
    native = typed_answer(Person, NativeModel(lambda r: ""), {})
    assert native.mode == "native" and native.how == "native: test format"
    tool_mode = typed_answer(Person, FunctionModel(lambda r: ""), {})
    assert tool_mode.mode == "tool" and "no native structured output" in tool_mode.how
    forced = typed_answer(Person, NativeModel(lambda r: ""), {}, mode="tool")
    assert forced.mode == "tool"
    with pytest.raises(OutputTypeError, match="native"):
        typed_answer(Person, FunctionModel(lambda r: ""), {}, mode="native")


async def test_stream_and_start_carry_the_output() -> None:
    model = replies('{"name": "Ann", "age": 31}')
    agent = Agent(model)
    events = [e async for e in agent.stream("Ann", output=Person)]
    assert "".join(e.text for e in events if isinstance(e, AssistantTextDelta)).startswith("{")
    finished = events[-1]
    assert isinstance(finished, RunFinished) and finished.result.output == Person("Ann", 31)
    run = agent.start("again", output=Person)
    assert (await run.result()).output == Person("Ann", 31)


def test_run_sync_with_output() -> None:
    result = Agent(replies('{"title": "Heat", "year": 1995}')).run_sync("x", output=Movie)
    assert result.output == {"title": "Heat", "year": 1995}


@pytest.mark.parametrize("native", [True, False])
async def test_a_recorded_typed_run_replays_offline_as_recorded(native: bool) -> None:
    from nbagent.recording import Recording, RecordingGenerator, ReplayGenerator

    def decide(request: Request) -> Any:
        if request.answer_format is not None:
            return '{"name": "Ann", "age": 31}'
        return Turn(Call(ANSWER_TOOL, {"name": "Ann", "age": 31}))

    live = NativeModel(decide) if native else FunctionModel(decide)
    recorder = RecordingGenerator(live)
    first = await Agent(recorder).run("Ann is 31", output=Person)
    assert first.output == Person("Ann", 31)
    text = recorder.recording.to_json()
    assert ('"answer_format"' in text) is native

    replayer = ReplayGenerator(Recording.from_json(text))
    again = await Agent(replayer).run("Ann is 31", output=Person)
    assert again.output == Person("Ann", 31) and replayer.finished
    assert (again.exchanges[0].request.answer_format is not None) is native

    other = ReplayGenerator(Recording.from_json(text))
    changed = await Agent(other).run("Ann is 31", output=Movie, raise_on_error=False)
    assert changed.stop_reason == "failed"
    assert "diverged at step 1" in str(changed.error)  # another output type: not the recording


async def test_a_pydantic_model_answers_as_an_instance() -> None:
    pydantic = pytest.importorskip("pydantic", reason="pydantic is not installed")

    class Address(pydantic.BaseModel):
        city: str

    class Customer(pydantic.BaseModel):
        name: str
        address: Address
        tags: list[str]

    model = replies('{"name": "Ann", "address": {"city": "Bern"}, "tags": ["vip"]}')
    result = await Agent(model).run("Ann from Bern", output=Customer)
    assert isinstance(result.output, Customer) and result.output.address.city == "Bern"
    schema = model.requests[0].answer_format.schema  # type: ignore[union-attr]
    assert "$defs" in schema and schema["required"] == ["name", "address", "tags"]
    from nbagent.output import to_json

    assert to_json(result.output) == {"name": "Ann", "address": {"city": "Bern"}, "tags": ["vip"]}
    again = await Agent(
        replies(
            '{"name": "Ann", "address": {}, "tags": []}',
            '{"name": "B", "address": {"city": "C"}, "tags": []}',
        )
    ).run("x", output=Customer)
    assert again.output.name == "B"  # the first answer lacked address.city: sent back
