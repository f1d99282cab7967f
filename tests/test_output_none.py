"""A typed answer that is ``None`` (``output=int | None``, the model answered ``null``) is an
answer, not the absence of one: in the result, for a caller whose helper gave it, in a map's
rows and checkpoints, in the notebook's saved output, and through a recording and its replay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nbagent import Agent
from nbagent.events import RunFinished
from nbagent.generation import Request
from nbagent.messages import ToolMessage, UserMessage
from nbagent.models import Call, FunctionModel, Turn
from nbagent.notebook.saved.static import run_markdown, run_plain
from nbagent.notebook.shown.transcript import Transcript
from nbagent.output import ANSWER_TOOL
from nbagent.recording import Recording, RecordingGenerator, ReplayGenerator


def answering(value: Any) -> FunctionModel:
    """A model that answers every typed question with ``value`` through the answer tool."""

    def decide(request: Request) -> Any:
        if isinstance(request.messages[-1], ToolMessage):
            return "done"
        return Turn(Call(ANSWER_TOOL, {"value": value}))

    return FunctionModel(decide)


def caller() -> FunctionModel:
    def decide(request: Request) -> Any:
        last = request.messages[-1]
        if isinstance(last, UserMessage):
            return Turn(Call("count", {"prompt": "how many unicorns?"}))
        result = last.results[0]  # type: ignore[union-attr]
        return f"error={result.is_error} text={result.text}"

    return FunctionModel(decide)


async def test_a_none_answer_is_an_answer_in_the_result() -> None:
    result = await Agent(answering(None)).run("how many?", output=int | None)
    assert result.stop_reason == "terminated"
    assert result.has_output and result.output is None
    five = await Agent(answering(5)).run("how many?", output=int | None)
    assert five.has_output and five.output == 5
    plain = await Agent(answering(5)).run("how many?")
    assert not plain.has_output  # a run that asked for no type has no typed answer


async def test_a_helpers_none_answer_reaches_the_caller_as_null() -> None:
    helper = Agent(answering(None))
    agent = Agent(
        caller(), [helper.as_tool(name="count", description="Counts.", output=int | None)]
    )
    result = await agent.run("go")
    assert result.text == "error=False text=null", result.text
    tool_message = result.messages[2]
    assert isinstance(tool_message, ToolMessage) and not tool_message.results[0].is_error


async def test_a_map_row_with_a_none_answer_is_done_and_resumes_as_done(tmp_path: Path) -> None:
    checkpoint = tmp_path / "rows.jsonl"
    agent = Agent(answering(None))
    table = await agent.map(["a", "b"], output=int | None, checkpoint=checkpoint, progress=None)
    assert list(table["status"]) == ["done", "done"] and list(table["output"]) == [None, None]
    asked: list[Request] = []
    again = Agent(FunctionModel(lambda request: asked.append(request) or "never"))
    resumed = await again.map(["a", "b"], output=int | None, checkpoint=checkpoint, progress=None)
    assert asked == [], "rows answered None ran again, as if they had no answer"
    assert list(resumed["status"]) == ["done", "done"]


async def test_the_saved_output_shows_a_none_answer() -> None:
    transcript = Transcript()
    agent = Agent(answering(None))
    run = agent.start("how many?", output=int | None)
    async for event in run.events():
        transcript.handle(event)
        if isinstance(event, RunFinished):
            assert event.result.has_output
    assert "Answer:\nnull" in run_plain(transcript), run_plain(transcript)
    assert "**Answer**" in run_markdown(transcript)


async def test_a_recorded_helpers_none_answer_replays_as_one() -> None:
    helper = Agent(answering(None))
    tool_ = helper.as_tool(name="count", description="Counts.", output=int | None)
    recorder = RecordingGenerator(caller(), Recording())
    first = await Agent(recorder, [tool_]).run("go")
    assert first.text == "error=False text=null"
    replayed = await Agent(
        ReplayGenerator(Recording.from_json(recorder.recording.to_json())),
        [
            Agent(FunctionModel(lambda r: "never asked")).as_tool(
                name="count", description="Counts.", output=int | None
            )
        ],
    ).run("go")
    assert replayed.text == first.text
