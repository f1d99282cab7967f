"""Agent.map: one run per input, rows in order, bounded concurrency, failures as rows, Stop.

The model is a FunctionModel (a real Generator streaming real events through the real loop),
so what is tested is the batch and the loop, not a mock; providers over HTTP are in
``test_batch_http.py``, resumption and checkpoints in ``test_batch_resume.py``, Dask in
``test_batch_dask.py``.
"""

from __future__ import annotations

import asyncio
import io
from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd
import pytest

from nbagent import (
    Agent,
    AutoApprove,
    DenyAll,
    InteractiveApprover,
    RuleApprover,
    Tool,
    tool,
)
from nbagent.batch import Batch, BatchProgress, ProgressLine
from nbagent.errors import BatchInputError
from nbagent.generation import Request
from nbagent.messages import ToolMessage, UserMessage, user
from nbagent.models import Call, FunctionModel, Turn


@tool
def grade(answer: str, key: str) -> str:
    """Compare an answer with the key."""
    if answer == "boom":
        raise RuntimeError("this row breaks the tool")
    return "right" if answer.strip() == key.strip() else "wrong"


def grading_model(delay: dict[str, float] | None = None) -> FunctionModel:
    """Calls grade with the two halves of the prompt ("A|K"), then reports the result."""

    async def decide(request: Request) -> Any:
        last = request.messages[-1]
        if isinstance(last, UserMessage):
            answer, key = last.text.split("|")
            await asyncio.sleep((delay or {}).get(answer, 0.0))
            return Turn(Call("grade", {"answer": answer, "key": key}))
        assert isinstance(last, ToolMessage)
        return f"{last.results[0].text}"

    return FunctionModel(decide)


async def until(check: Any, seconds: float = 30.0) -> None:
    """Wait (polling the event loop) until ``check()`` holds."""
    for _ in range(int(seconds / 0.01)):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the batch never got there")


def table() -> pd.DataFrame:
    return pd.DataFrame(
        {"answer": ["4", "5", "boom", "7"], "key": ["4", "4", "1", "7"]},
        index=pd.Index(["q1", "q2", "q3", "q4"], name="question"),
    )


async def test_rows_keep_the_inputs_order_and_index_whatever_order_runs_end_in() -> None:
    # the first rows take longest, so runs end in reverse order
    agent = Agent(grading_model({"4": 0.15, "5": 0.1, "boom": 0.05}), [grade])
    out = await agent.map(table(), "{answer}|{key}", progress=None)
    assert list(out.index) == ["q1", "q2", "q3", "q4"]
    assert out.index.name == "question"
    assert list(out["prompt"]) == ["4|4", "5|4", "boom|1", "7|7"]
    assert list(out.loc[["q1", "q2", "q4"], "text"]) == ["right", "wrong", "right"]
    assert "this row breaks the tool" in out["text"]["q3"]
    assert list(out["status"]) == ["done"] * 4
    assert list(out["steps"]) == [2, 2, 2, 2]
    assert all(r.stop_reason == "finished" for r in out["result"])
    assert out["seconds"].min() > 0


async def test_a_tool_that_fails_on_some_rows_leaves_the_others_alone() -> None:
    agent = Agent(grading_model(), [grade])
    out = await agent.map(table(), "{answer}|{key}", progress=None)
    broken = out.loc["q3"]
    result = broken["result"]
    results = [m for m in result.messages if isinstance(m, ToolMessage)]
    assert results[0].results[0].is_error  # the model read the tool's error
    assert "this row breaks the tool" in results[0].results[0].text
    assert broken["status"] == "done"  # the run itself went on and answered
    assert list(out.loc[["q1", "q2", "q4"], "text"]) == ["right", "wrong", "right"]


async def test_the_callers_agent_is_left_untouched() -> None:
    agent = Agent(grading_model(), [grade], instructions="be fair")
    agent.messages.append(user("an earlier question"))
    before_tools = dict(agent.tools)
    out = await agent.map(["1|1", "2|1"], progress=None, output={"type": "string"})
    assert agent.messages == [user("an earlier question")]
    # each run had a conversation of its own: the earlier question was not in it
    assert all(len(r.messages) >= 2 and r.messages[0] == user("1|1") for r in out["result"][:1])
    assert agent.tools == before_tools
    assert agent.instructions == "be fair"
    assert not agent._running


async def test_concurrency_never_exceeds_the_bound() -> None:
    now = peak = 0

    async def decide(request: Request) -> Any:
        nonlocal now, peak
        now += 1
        peak = max(peak, now)
        try:
            await asyncio.sleep(0.01)
        finally:
            now -= 1
        return "ok"

    agent = Agent(FunctionModel(decide))
    out = await agent.map([f"p{i}" for i in range(60)], concurrency=5, progress=None)
    assert (out["status"] == "done").all()
    assert peak == 5  # reached, never exceeded
    assert list(out.index) == list(range(60))


async def test_a_run_that_fails_is_a_row_with_its_error() -> None:
    def decide(request: Request) -> Any:
        text = request.messages[-1].text  # type: ignore[union-attr]
        if text == "bad":
            raise ValueError("the model broke on this one")
        return "fine"

    out = await Agent(FunctionModel(decide)).map(["a", "bad", "c"], progress=None)
    assert list(out["status"]) == ["done", "failed", "done"]
    assert "the model broke on this one" in out["error"][1]
    assert out["result"][1].stop_reason == "failed"
    assert out["error"][0] is None


async def test_per_run_timeout_and_step_limit() -> None:
    async def decide(request: Request) -> Any:
        text = request.messages[0].text  # type: ignore[union-attr]
        if text == "slow":
            await asyncio.sleep(30)
        if text == "loop":
            return Turn(Call("grade", {"answer": "1", "key": "1"}))
        return "quick"

    agent = Agent(FunctionModel(decide), [grade])
    out = await agent.map(["slow", "quick", "loop"], timeout=0.3, max_steps=3, progress=None)
    assert list(out["status"]) == ["failed", "done", "failed"]
    assert "timed out after 0.3 s" in out["error"][0]
    assert out["stop_reason"][0] == "cancelled"
    assert out["stop_reason"][2] == "max_steps"
    assert "step limit" in out["error"][2]
    assert out["steps"][2] == 3


@tool(needs_approval=True)
def delete(path: str) -> str:
    """Delete a file (pretend)."""
    return f"deleted {path}"


def deleting_model() -> FunctionModel:
    def decide(request: Request) -> Any:
        last = request.messages[-1]
        if isinstance(last, UserMessage):
            return Turn(Call("delete", {"path": last.text}))
        return last.results[0].text  # type: ignore[union-attr]

    return FunctionModel(decide)


@pytest.mark.parametrize(
    "approver",
    ["ask", InteractiveApprover(), RuleApprover({"delete": "allow"}, InteractiveApprover())],
    ids=["ask", "interactive", "rules-asking-a-person"],
)
def test_an_approver_that_asks_a_person_is_refused(approver: Any) -> None:
    with pytest.raises(BatchInputError, match="nobody") as caught:
        Batch(Agent(deleting_model(), [delete]), ["a.txt"], approver=approver)
    assert "approver='auto'" in str(caught.value)
    # the agent's own interactive approver is refused too, unless another is given
    agent = Agent(deleting_model(), [delete], approver=InteractiveApprover())
    with pytest.raises(BatchInputError, match="this agent's approver"):
        Batch(agent, ["a.txt"])
    assert Batch(agent, ["a.txt"], approver="deny").plan.approver is not None


@pytest.mark.parametrize(
    ("approver", "expected"),
    [
        ("auto", "deleted a.txt"),
        (AutoApprove(), "deleted a.txt"),
        ("deny", "not run"),
        (DenyAll("no deleting in batches"), "no deleting in batches"),
        (RuleApprover({"delete": "deny"}), "the rule `deny delete` denies it"),
    ],
)
async def test_non_interactive_approvers_decide_every_call(approver: Any, expected: str) -> None:
    out = await Agent(deleting_model(), [delete]).map(["a.txt"], approver=approver, progress=None)
    assert expected in out["text"][0]


@dataclass
class Verdict:
    correct: bool
    score: int
    label: Literal["pass", "fail"]


def answering_model(bad_first: bool = False, text_only: tuple[str, ...] = ()) -> FunctionModel:
    def decide(request: Request) -> Any:
        assert any(d.name == "final_answer" for d in request.tools)
        assert "final_answer" in (request.instructions or "")
        prompt = request.messages[0].text  # type: ignore[union-attr]
        if prompt in text_only:
            return "I would rather say it in words."
        tries = sum(isinstance(m, ToolMessage) for m in request.messages)
        if bad_first and tries == 0:
            return Turn(Call("final_answer", {"correct": "yes", "score": 1, "label": "pass"}))
        good = prompt == "4"
        args = {"correct": good, "score": 10 if good else 2, "label": "pass" if good else "fail"}
        return Turn(Call("final_answer", args))

    return FunctionModel(decide)


async def test_structured_output_is_validated_and_decoded_into_the_type() -> None:
    agent = Agent(answering_model(bad_first=True, text_only=("6",)))
    out = await agent.map(["4", "5", "6"], output=Verdict, progress=None)
    assert out["output"][0] == Verdict(True, 10, "pass")
    assert out["output"][1] == Verdict(False, 2, "fail")
    assert list(out["status"]) == ["done", "done", "failed"]
    # the invalid first answer went back to the model as an error, and it answered again
    assert out["steps"][0] == 2
    # one that only writes text is reminded to answer, a bounded number of times (the run's
    # own typed answer: the same mechanism as agent.run(output=...))
    assert "did not answer in the asked form in 3 tries" in out["error"][2]
    assert out["steps"][2] == 3
    assert out["output"][2] is None


async def test_structured_output_from_a_json_schema_and_a_plain_type() -> None:
    schema = {
        "type": "object",
        "properties": {"correct": {"type": "boolean"}, "score": {"type": "integer"}},
        "required": ["correct", "score"],
    }
    out = await Agent(answering_model()).map(["4"], output=schema, progress=None)
    assert out["output"][0] == {"correct": True, "score": 10, "label": "pass"}

    def number(request: Request) -> Any:
        return Turn(Call("final_answer", {"value": len(request.messages[0].text)}))  # type: ignore[union-attr]

    out = await Agent(FunctionModel(number)).map(["abc", "hello"], output=int, progress=None)
    assert list(out["output"]) == [3, 5]


def test_a_bad_output_schema_fails_before_any_run() -> None:
    from nbagent.errors import SchemaError

    with pytest.raises(SchemaError, match="id"):
        Batch(Agent(answering_model()), ["4"], output={"$id": "x", "type": "object"})

    class Thing:
        pass

    with pytest.raises(BatchInputError, match="cannot be an answer type") as caught:
        Batch(Agent(answering_model()), ["4"], output=Thing)
    assert "the output has type" in str(caught.value)
    assert "pass a JSON Schema as output=" in str(caught.value)


@pytest.mark.parametrize("name", [0, "my.q", "a}b", "{q}"])
def test_a_series_without_a_template_runs_its_values_whatever_its_name(name: Any) -> None:
    batch = Batch(Agent(grading_model(), [grade]), pd.Series(["4|4", "2|3"], name=name))
    assert [item.prompt for item in batch.items] == ["4|4", "2|3"]


def test_a_template_field_is_a_whole_column_name_digits_and_dots_included() -> None:
    frame = pd.DataFrame([["4", "4"], ["2", "3"]])  # as read from a CSV without a header
    batch = Batch(Agent(grading_model(), [grade]), frame, "{0}|{1}")
    assert [item.prompt for item in batch.items] == ["4|4", "2|3"]
    dotted = pd.DataFrame({"q": ["4", "2"], "q.1": ["4", "3"]})  # pandas' name for a repeat
    batch = Batch(Agent(grading_model(), [grade]), dotted, "{q}|{q.1}")
    assert [item.prompt for item in batch.items] == ["4|4", "2|3"]


def test_a_template_naming_a_missing_column_fails_at_once_naming_the_columns() -> None:
    agent = Agent(grading_model(), [grade])
    with pytest.raises(BatchInputError) as caught:
        Batch(agent, table(), "Grade {anwser} against {key}")
    message = str(caught.value)
    assert "anwser" in message and "its columns: answer, key" in message
    assert "did you mean {answer}" in message
    with pytest.raises(BatchInputError, match="needs a template"):
        Batch(agent, table())
    with pytest.raises(BatchInputError, match="names no column"):
        Batch(agent, table(), "Grade this")
    with pytest.raises(BatchInputError, match="empty field"):
        Batch(agent, table(), "Grade {}")
    with pytest.raises(BatchInputError, match="names a whole column"):
        Batch(agent, table(), "Grade {answer.upper}")
    with pytest.raises(BatchInputError, match="not one string"):
        Batch(agent, "4|4")
    with pytest.raises(BatchInputError, match="is a int"):
        Batch(agent, ["4|4", 5])
    with pytest.raises(BatchInputError, match="max_inputs"):
        Batch(agent, ["x"] * 11, max_inputs=10)


async def test_empty_cells_and_oversized_prompts_are_failed_rows_not_runs() -> None:
    calls = 0

    def decide(request: Request) -> Any:
        nonlocal calls
        calls += 1
        return "ok"

    frame = pd.DataFrame({"answer": ["1", None, float("nan"), "x" * 50]})
    out = await Agent(FunctionModel(decide)).map(frame, "A: {answer}", progress=None, max_inputs=10)
    assert list(out["status"]) == ["done", "failed", "failed", "done"]
    assert out["error"][1] == "column 'answer' is empty in this row"
    assert calls == 2


async def test_empty_input_gives_an_empty_table_with_the_columns() -> None:
    out = await Agent(grading_model()).map([], progress=None)
    assert len(out) == 0
    assert list(out.columns) == [
        "prompt",
        "status",
        "text",
        "steps",
        "tokens",
        "seconds",
        "stop_reason",
        "error",
        "attempts",
        "result",
    ]
    frame = pd.DataFrame({"answer": [], "key": []})
    out = await Agent(grading_model()).map(frame, "{answer}|{key}", progress=None)
    assert len(out) == 0


async def test_lists_of_mappings_and_series_fill_the_template() -> None:
    agent = Agent(grading_model(), [grade])
    out = await agent.map([{"a": "1", "k": "1"}, {"a": "2", "k": "1"}], "{a}|{k}", progress=None)
    assert list(out["text"]) == ["right", "wrong"]
    series = pd.Series(["3|3", "3|4"], index=[10, 20], name="pair")
    out = await agent.map(series, progress=None)
    assert list(out.index) == [10, 20]
    assert list(out["text"]) == ["right", "wrong"]


async def test_stop_half_way_keeps_finished_rows_and_cancels_the_rest() -> None:
    started: list[str] = []
    release = asyncio.Event()

    async def decide(request: Request) -> Any:
        text = request.messages[0].text  # type: ignore[union-attr]
        started.append(text)
        if int(text) >= 4:
            await release.wait()  # the runs after the first four hang until stopped
        return f"answer {text}"

    batch = Batch(Agent(FunctionModel(decide)), [str(i) for i in range(20)], concurrency=3)
    batch.start()
    await until(lambda: batch.progress().done >= 4 and batch.progress().running == 3)
    assert batch.cancel()
    out = await batch.result()
    assert list(out["status"][:4]) == ["done"] * 4
    assert list(out["text"][:4]) == [f"answer {i}" for i in range(4)]
    assert list(out["status"][4:7]) == ["cancelled"] * 3
    assert set(out["status"][7:]) == {"not run"}
    assert len(started) == 7  # nothing started after the stop
    final = batch.progress(final=True)
    assert (final.done, final.cancelled, final.not_run) == (4, 3, 13)


async def test_cancelling_the_awaiting_task_stops_the_batch_and_keeps_its_rows() -> None:
    async def decide(request: Request) -> Any:
        if request.messages[0].text != "0":  # type: ignore[union-attr]
            await asyncio.sleep(30)
        return "first"

    batch = Batch(Agent(FunctionModel(decide)), ["0", "1", "2", "3"], concurrency=2, progress=None)
    waiting = asyncio.ensure_future(batch.result())
    await until(lambda: batch.progress().done >= 1)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    out = batch.table()
    # "1" and then "2" ran when the cell was interrupted; "3" never started
    assert list(out["status"]) == ["done", "cancelled", "cancelled", "not run"]


def test_map_sync_works_inside_a_running_loop_and_outside() -> None:
    agent = Agent(grading_model(), [grade])
    out = agent.map_sync(["1|1", "1|2"], progress=None)
    assert list(out["text"]) == ["right", "wrong"]

    async def inside() -> Any:
        return agent.map_sync(["2|2"], progress=None)

    assert list(asyncio.run(inside())["text"]) == ["right"]


async def test_progress_reports_are_bounded_and_end_with_a_final_one() -> None:
    seen: list[BatchProgress] = []

    async def decide(request: Request) -> Any:
        await asyncio.sleep(0.002)
        return "ok"

    out = await Agent(FunctionModel(decide)).map(
        [str(i) for i in range(200)], concurrency=4, progress=seen.append, interval=0.05
    )
    assert len(out) == 200
    assert seen[-1].final and seen[-1].done == 200 and seen[-1].pending == 0
    assert sum(s.final for s in seen) == 1
    # fewer reports than runs: the view is never sent one message per run
    assert len(seen) < 100
    counts = [s.finished for s in seen]
    assert counts == sorted(counts)


def test_the_progress_line_on_a_terminal_and_in_a_log() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    line = ProgressLine(terminal)
    line(BatchProgress(total=10, done=3, running=2, tokens=1200, elapsed=3.0))
    line(BatchProgress(total=10, done=10, tokens=4000, elapsed=9.5, final=True))
    text = terminal.getvalue()
    assert text.startswith("\rnbagent map: 3/10 · done 3 · failed 0 · running 2 · 1,200 tokens")
    assert "ETA 7.0 s" in text  # 7 left at 1 run/s
    assert text.endswith("\n") and text.rstrip().endswith("took 9.5 s")
    log = io.StringIO()
    quiet = ProgressLine(log, every=3600)
    quiet(BatchProgress(total=10, done=1, elapsed=1.0))
    quiet(BatchProgress(total=10, done=2, elapsed=2.0))  # within `every`: not printed
    quiet(BatchProgress(total=10, done=10, elapsed=5.0, final=True))
    assert "\r" not in log.getvalue()
    assert log.getvalue().count("\n") == 2


async def test_a_broken_progress_view_does_not_stop_the_batch() -> None:
    def broken(snapshot: BatchProgress) -> None:
        raise RuntimeError("view gone")

    batch = Batch(Agent(grading_model(), [grade]), ["1|1"], progress=broken)
    with pytest.warns(UserWarning, match="view gone"):
        out = await batch.result()
    assert list(out["status"]) == ["done"]
    assert any("view gone" in note for note in batch.notes)


def test_bad_settings_are_refused_before_any_run() -> None:
    agent = Agent(grading_model(), [grade])
    for bad in ({"concurrency": 0}, {"timeout": 0}, {"max_steps": 0}, {"retries": -1}):
        with pytest.raises(BatchInputError):
            Batch(agent, ["1|1"], **bad)  # type: ignore[arg-type]
    with pytest.raises(BatchInputError, match="engine"):
        Batch(agent, ["1|1"], engine=object())
    with pytest.raises(BatchInputError, match="unknown tools"):
        Batch(agent, ["1|1"], tools=["nope"])
    named = Tool(name="final_answer", input_schema={"type": "object"}, execute=lambda c: "x")
    with pytest.raises(BatchInputError, match="rename the tool"):
        Batch(Agent(grading_model(), [named]), ["1"], output=int)


def test_the_batch_module_is_core_it_loads_no_front_end_table_or_cluster() -> None:
    import subprocess
    import sys

    code = (
        "import sys, nbagent.batch\n"
        "bad = [m for m in ('IPython', 'ipywidgets', 'httpx2', 'pandas', 'distributed', 'dask',"
        " 'cloudpickle') if m in sys.modules]\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
