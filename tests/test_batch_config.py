"""A checkpoint (or an earlier results table) holds answers to one configuration: a batch with
other instructions, tools, model, options, output or approver runs those rows again and says
what differs; the file keeps both, so going back finds the earlier answers again.

The model is a FunctionModel whose answers show what its request carried (the instructions,
the tools offered, the temperature), so an answer reused from another configuration is seen.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from nbagent import Agent, Tool, tool
from nbagent.batch import Batch
from nbagent.generation import Options, Request
from nbagent.messages import user
from nbagent.models import Call, FunctionModel, Turn

PROMPTS = ["answer 1", "answer 2", "answer 3", "answer 4"]


class Grader:
    """Answers from what the request carries; counts the prompts it was asked."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def model(self, name: str = "grader") -> FunctionModel:
        def decide(request: Request) -> Any:
            self.prompts.append(request.messages[-1].text)  # type: ignore[union-attr]
            offered = sorted(d.name for d in request.tools)
            if "final_answer" in offered:
                return Turn(Call("final_answer", {"value": 7}))
            temperature = request.options.temperature
            return f"{request.instructions} · tools {offered} · temperature {temperature}"

        return FunctionModel(decide, model=name)


def grade_tool(description: str = "Grade one answer.") -> Tool:
    def grade(answer: str) -> str:
        return "graded"

    return tool(name="grade", description=description)(grade)


def lookup(query: str) -> str:
    """Look something up."""
    return "found"


#: name -> (what the first batch is, what the second is, the words that must say what differs)
Setup = Callable[[Grader], tuple[Agent, dict[str, Any]]]
CHANGES: dict[str, tuple[Setup, Setup, str]] = {
    "instructions": (
        lambda g: (Agent(g.model(), instructions="grade strictly"), {}),
        lambda g: (Agent(g.model(), instructions="grade leniently"), {}),
        "changed: the instructions",
    ),
    "model": (
        lambda g: (Agent(g.model("grader-a")), {}),
        lambda g: (Agent(g.model("grader-b")), {}),
        "the model (FunctionModel:grader-a → FunctionModel:grader-b)",
    ),
    "a tool's definition": (
        lambda g: (Agent(g.model(), [grade_tool()]), {}),
        lambda g: (Agent(g.model(), [grade_tool("Grade one answer, leniently.")]), {}),
        "the definition of grade",
    ),
    "a tool added": (
        lambda g: (Agent(g.model(), [grade_tool()]), {}),
        lambda g: (Agent(g.model(), [grade_tool(), tool(lookup)]), {}),
        "tools added (lookup)",
    ),
    "the tools offered": (
        lambda g: (Agent(g.model(), [grade_tool(), tool(lookup)]), {}),
        lambda g: (Agent(g.model(), [grade_tool(), tool(lookup)]), {"tools": ["grade"]}),
        "tools removed (lookup)",
    ),
    "the agent's options": (
        lambda g: (Agent(g.model(), options=Options(temperature=0.0)), {}),
        lambda g: (Agent(g.model(), options=Options(temperature=1.0)), {}),
        "the generation options",
    ),
    "the batch's options": (
        lambda g: (Agent(g.model()), {}),
        lambda g: (Agent(g.model()), {"options": Options(temperature=0.5)}),
        "the generation options",
    ),
    "the output asked for": (  # the issue's: rows came back done with no output
        lambda g: (Agent(g.model()), {}),
        lambda g: (Agent(g.model()), {"output": int}),
        "the output (none → int)",
    ),
    "the output's type": (
        lambda g: (Agent(g.model()), {"output": int}),
        lambda g: (Agent(g.model()), {"output": float}),
        "the output (int → float)",
    ),
    "the approver": (
        lambda g: (Agent(g.model(), [grade_tool()]), {"approver": "deny"}),
        lambda g: (Agent(g.model(), [grade_tool()]), {"approver": "auto"}),
        "the approver (DenyAll → AutoApprove)",
    ),
    "the conversation each run starts from": (
        lambda g: (Agent(g.model(), messages=[user("be strict")]), {"keep_history": True}),
        lambda g: (Agent(g.model(), messages=[user("be kind")]), {"keep_history": True}),
        "the conversation each run starts from",
    ),
}


@pytest.mark.parametrize("change", list(CHANGES))
async def test_a_checkpoint_of_another_configuration_runs_again_and_says_what_differs(
    change: str, tmp_path: Path
) -> None:
    before, after, words = CHANGES[change]
    path = tmp_path / "grades.jsonl"
    first = Grader()
    agent, options = before(first)
    earlier = await agent.map(PROMPTS, checkpoint=path, progress=None, **options)
    assert (earlier["status"] == "done").all()

    second = Grader()
    agent, options = after(second)
    with pytest.warns(UserWarning, match="answered under another configuration") as warned:
        out = await agent.map(PROMPTS, checkpoint=path, progress=None, **options)
    said = " ".join(str(w.message) for w in warned)
    assert "4 done row(s) of these inputs answered under another configuration" in said
    assert words in said, said
    assert second.prompts == PROMPTS  # every row ran again, none came back from the file
    assert (out["status"] == "done").all()
    if "output" in options:
        assert list(out["output"]) == [7] * 4

    third = Grader()  # going back: the file kept the first configuration's answers
    agent, options = before(third)
    again = await agent.map(PROMPTS, checkpoint=path, progress=None, **options)
    assert third.prompts == []
    assert list(again["text"]) == list(earlier["text"])


async def test_the_issues_grading_example_gives_the_lenient_answers(tmp_path: Path) -> None:
    path = tmp_path / "grades.jsonl"
    strict = Agent(Grader().model(), instructions="grade strictly")
    await strict.map(PROMPTS, checkpoint=path, progress=None)
    lenient = Agent(Grader().model(), instructions="grade leniently")
    with pytest.warns(UserWarning, match="the instructions"):
        out = await lenient.map(PROMPTS, checkpoint=path, progress=None)
    assert all(text.startswith("grade leniently") for text in out["text"])
    kinds = [next(iter(json.loads(line))) for line in path.read_text().splitlines()]
    assert (
        kinds == ["format", "configuration"] + ["config"] * 4 + ["configuration"] + ["config"] * 4
    )


async def test_the_same_configuration_reuses_the_rows_whatever_the_template_was(
    tmp_path: Path,
) -> None:
    """The prompt is matched row by row: another template that makes the same prompts (or a
    new process, a new agent object) finds the rows done."""
    path = tmp_path / "same.jsonl"
    frame = pd.DataFrame({"q": PROMPTS})
    await Agent(Grader().model(), instructions="grade").map(
        frame, "{q}", checkpoint=path, progress=None
    )
    grader = Grader()
    batch = Batch(Agent(grader.model(), instructions="grade"), frame, "{q!s}", checkpoint=path)
    assert batch.notes == []
    await batch.result()
    assert grader.prompts == []


async def test_a_results_table_of_another_configuration_runs_again(tmp_path: Path) -> None:
    earlier = await Agent(Grader().model(), instructions="grade strictly").map(
        PROMPTS, progress=None
    )
    grader = Grader()
    with pytest.warns(UserWarning, match="the results table holds 4 done row.*instructions"):
        out = await Agent(grader.model(), instructions="grade leniently").map(
            PROMPTS, resume=earlier, progress=None
        )
    assert grader.prompts == PROMPTS
    assert all(text.startswith("grade leniently") for text in out["text"])
    same = Grader()  # the same configuration takes the table's rows, as before
    await Agent(same.model(), instructions="grade leniently").map(
        PROMPTS, resume=out, progress=None
    )
    assert same.prompts == []
    built = out.copy()  # a table that does not say where it came from is taken as it is
    built.attrs.clear()
    unknown = Grader()
    await Agent(unknown.model(), instructions="grade strictly").map(
        PROMPTS, resume=built, progress=None
    )
    assert unknown.prompts == []


def legacy_checkpoint(path: Path, *, texts: list[str]) -> None:
    """A checkpoint as nbagent wrote it before rows named their configuration (version 1)."""
    lines = [{"format": "nbagent-batch", "version": 1}]
    for position, (prompt, text) in enumerate(zip(PROMPTS, texts, strict=True)):
        lines.append(
            {
                "key": str(position),
                "position": position,
                "prompt": prompt,
                "status": "done",
                "text": text,
                "output": None,
                "steps": 1,
                "stop_reason": "finished",
                "attempts": 1,
                "messages": None,
            }
        )
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


async def test_a_checkpoint_from_before_configurations_is_taken_as_it_is_and_said(
    tmp_path: Path,
) -> None:
    """A version-1 file recorded nothing of its configuration: its done rows are kept (a job
    half done before an upgrade does not start over), and the batch says so, with how to run
    them again; rows without the output now asked for run again, and new rows get tagged."""
    path = tmp_path / "old.jsonl"
    legacy_checkpoint(path, texts=["old 1", "old 2", "old 3", "old 4"])
    grader = Grader()
    with pytest.warns(UserWarning, match="older nbagent.*4 done row.*another checkpoint path"):
        out = await Agent(grader.model()).map(PROMPTS, checkpoint=path, progress=None)
    assert grader.prompts == [] and list(out["text"]) == ["old 1", "old 2", "old 3", "old 4"]

    typed = Grader()
    with pytest.warns(UserWarning, match="4 done row.*without the structured output"):
        out = await Agent(typed.model()).map(PROMPTS, checkpoint=path, output=int, progress=None)
    assert typed.prompts == PROMPTS and list(out["output"]) == [7] * 4
    after = Grader()
    await Agent(after.model()).map(PROMPTS, checkpoint=path, output=int, progress=None)
    assert after.prompts == []  # the new rows name their configuration and are found
