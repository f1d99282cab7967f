"""Resuming a batch: from an earlier results table or a checkpoint file, only what is not done
runs again; a checkpoint keeps every finished row even when the process is killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from nbagent import Agent
from nbagent.batch import Batch, load_checkpoint
from nbagent.errors import BatchInputError
from nbagent.generation import Request
from nbagent.models import Call, FunctionModel, Turn

ROOT = Path(__file__).resolve().parent.parent


class Counting:
    """A model that answers "echo PROMPT", fails for prompts in ``failing``, counts prompts."""

    def __init__(self, failing: set[str] | None = None) -> None:
        self.failing = failing or set()
        self.prompts: list[str] = []

    def model(self) -> FunctionModel:
        def decide(request: Request) -> Any:
            prompt = request.messages[0].text  # type: ignore[union-attr]
            self.prompts.append(prompt)
            if prompt in self.failing:
                raise ConnectionAbortedError(f"{prompt} could not be reached")
            return f"echo {prompt}"

        return FunctionModel(decide)


def frame(count: int) -> pd.DataFrame:
    return pd.DataFrame(
        {"q": [f"q{i}" for i in range(count)]}, index=[f"row-{i}" for i in range(count)]
    )


async def test_resuming_from_a_table_runs_only_what_is_not_done() -> None:
    first = Counting(failing={"ask q3", "ask q7"})
    out = await Agent(first.model()).map(frame(10), "ask {q}", progress=None, retries=0)
    assert list(out["status"]).count("failed") == 2

    second = Counting()
    again = await Agent(second.model()).map(frame(10), "ask {q}", resume=out, progress=None)
    assert sorted(second.prompts) == ["ask q3", "ask q7"]
    assert (again["status"] == "done").all()
    assert list(again.index) == list(out.index)
    # rows taken over keep their result objects
    assert again["result"]["row-0"] is out["result"]["row-0"]
    assert again["text"]["row-3"] == "echo ask q3"


async def test_a_changed_prompt_or_a_new_row_runs_again() -> None:
    first = Counting()
    out = await Agent(first.model()).map(frame(3), "ask {q}", progress=None)
    changed = frame(4)
    changed.loc["row-1", "q"] = "q1 (edited)"
    second = Counting()
    await Agent(second.model()).map(changed, "ask {q}", resume=out, progress=None)
    assert sorted(second.prompts) == ["ask q1 (edited)", "ask q3"]
    with pytest.raises(TypeError, match="results table"):
        Batch(Agent(second.model()), frame(2), "ask {q}", resume=frame(2))


async def test_the_checkpoint_holds_each_finished_row_and_resumes_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "grades.jsonl"
    first = Counting(failing={"ask q2"})
    out = await Agent(first.model()).map(
        frame(5), "ask {q}", checkpoint=path, progress=None, retries=0
    )
    lines = path.read_text().splitlines()
    assert json.loads(lines[0]) == {"format": "nbagent-batch", "version": 2}
    assert set(json.loads(lines[1])) == {"configuration"}  # what the answers depend on
    assert len(lines) == 7  # those and one line per finished row, failed ones too
    loaded = load_checkpoint(path)
    statuses = sorted(row.status for row in loaded.rows.values())
    assert statuses == ["done"] * 4 + ["failed"]

    second = Counting()
    again = await Agent(second.model()).map(frame(5), "ask {q}", checkpoint=path, progress=None)
    assert second.prompts == ["ask q2"]
    assert (again["status"] == "done").all()
    # a row read back from the checkpoint has its run's result, rebuilt from the file
    resumed = again["result"]["row-0"]
    assert resumed.text == "echo ask q0" and resumed.stop_reason == "finished"
    assert resumed.messages == out["result"]["row-0"].messages
    # the retried row was appended, after the line describing that batch's configuration
    assert len(path.read_text().splitlines()) == 9

    third = Counting()
    await Agent(third.model()).map(frame(5), "ask {q}", checkpoint=path, progress=None)
    assert third.prompts == []  # everything was done: nothing runs


async def test_a_line_cut_short_by_a_crash_is_skipped_and_said(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl"
    await Agent(Counting().model()).map(frame(3), "ask {q}", checkpoint=path, progress=None)
    text = path.read_text()
    path.write_text(text[: len(text) - 40])  # the last row is half written
    again = Counting()
    with pytest.warns(UserWarning, match="1 damaged line"):
        out = await Agent(again.model()).map(frame(3), "ask {q}", checkpoint=path, progress=None)
    assert again.prompts == ["ask q2"]
    assert (out["status"] == "done").all()
    # the next row went on a line of its own, after the damaged one
    assert len(load_checkpoint(path).rows) == 3


async def test_hand_edited_lines_are_damaged_lines_and_those_rows_run_again(
    tmp_path: Path,
) -> None:
    path = tmp_path / "edited.jsonl"
    await Agent(Counting().model()).map(frame(3), "ask {q}", checkpoint=path, progress=None)
    header, configuration, first, second, third = path.read_text().splitlines()
    row = json.loads(second)
    edited = [
        header,
        configuration,
        first,
        json.dumps({**row, "messages": {"not": "a list"}, "stop_reason": "finished"}),
        "[1, 2]",
        '"a string"',
        "[" * 100_000 + "]" * 100_000,
        json.dumps({**json.loads(third), "status": "bogus"}),
    ]
    path.write_text("\n".join(edited) + "\n")
    again = Counting()
    with pytest.warns(UserWarning, match="5 damaged line"):
        out = await Agent(again.model()).map(frame(3), "ask {q}", checkpoint=path, progress=None)
    assert again.prompts == ["ask q1", "ask q2"]
    assert (out["status"] == "done").all()
    for version in ('"abc"', "{}", "true"):
        path.write_text(f'{{"format": "nbagent-batch", "version": {version}}}\n')
        with pytest.raises(BatchInputError, match="no valid format version"):
            Batch(Agent(Counting().model()), frame(2), "ask {q}", checkpoint=path)


def test_a_file_that_is_not_a_checkpoint_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text('{"hello": "world"}\n')
    with pytest.raises(BatchInputError, match="not an nbagent batch checkpoint"):
        Batch(Agent(Counting().model()), frame(2), "ask {q}", checkpoint=path)
    newer = tmp_path / "newer.jsonl"
    newer.write_text('{"format": "nbagent-batch", "version": 99}\n')
    with pytest.raises(BatchInputError, match="newer nbagent"):
        Batch(Agent(Counting().model()), frame(2), "ask {q}", checkpoint=newer)


def refused_at_once(make: Any, fifo: Path | None = None) -> BatchInputError:
    """Run ``make()`` in a thread and give the BatchInputError it raised; fail (instead of
    hanging the test run) when it is still waiting after 10 s, first unblocking a wait on
    ``fifo`` by opening its other end."""
    outcome: list[BaseException | None] = []

    def attempt() -> None:
        try:
            make()
        except BaseException as exc:  # handed over to the test's thread
            outcome.append(exc)
        else:
            outcome.append(None)

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(10)
    if worker.is_alive():
        if fifo is not None:  # release the open() that waits for the other end
            for flags in (os.O_RDONLY | os.O_NONBLOCK, os.O_WRONLY | os.O_NONBLOCK):
                try:
                    os.close(os.open(fifo, flags))
                except OSError:
                    pass
        raise AssertionError("the checkpoint path was waited on instead of refused")
    assert outcome and isinstance(outcome[0], BatchInputError), outcome
    return outcome[0]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_checkpoint_path_that_is_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "grades.jsonl"
    os.mkfifo(fifo)
    model = Counting()
    for make in (
        lambda: Agent(model.model()).map_sync(frame(2), "ask {q}", checkpoint=fifo),
        lambda: load_checkpoint(fifo),
    ):
        error = refused_at_once(make, fifo)
        assert "it is a FIFO (named pipe)" in str(error) and str(fifo) in str(error)
    assert model.prompts == []


@pytest.mark.parametrize("path", ["/dev/null", "/dev/zero", "folder"])
def test_a_checkpoint_path_that_is_a_device_or_a_folder_is_refused_at_once(
    path: str, tmp_path: Path
) -> None:
    target = tmp_path if path == "folder" else Path(path)
    if not target.exists():
        pytest.skip(f"{target} does not exist on this system")
    model = Counting()
    error = refused_at_once(
        lambda: Agent(model.model()).map_sync(frame(2), "ask {q}", checkpoint=target)
    )
    kind = "a folder" if path == "folder" else "a character device"
    assert f"it is {kind}" in str(error)
    assert model.prompts == []


def test_a_link_to_a_checkpoint_is_followed(tmp_path: Path) -> None:
    real = tmp_path / "real.jsonl"
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    Agent(Counting().model()).map_sync(frame(2), "ask {q}", checkpoint=link, progress=None)
    again = Counting()
    Agent(again.model()).map_sync(frame(2), "ask {q}", checkpoint=link, progress=None)
    assert again.prompts == [] and len(load_checkpoint(real).rows) == 2


@dataclass
class Score:
    points: int
    note: str


async def test_structured_outputs_come_back_from_the_checkpoint_as_their_type(
    tmp_path: Path,
) -> None:
    path = tmp_path / "scores.jsonl"

    def decide(request: Request) -> Any:
        prompt = request.messages[0].text  # type: ignore[union-attr]
        return Turn(Call("final_answer", {"points": len(prompt), "note": prompt}))

    await Agent(FunctionModel(decide)).map(
        ["a", "bb"], output=Score, checkpoint=path, progress=None
    )
    out = await Agent(Counting().model()).map(
        ["a", "bb"], output=Score, checkpoint=path, progress=None
    )
    assert list(out["output"]) == [Score(1, "a"), Score(2, "bb")]


SCRIPT = """
import asyncio, sys
from nbagent import Agent
from nbagent.models import FunctionModel

async def decide(request):
    number = int(request.messages[0].text.split()[-1])
    if number >= {quick}:
        await asyncio.sleep(3600)  # these are in flight when the process is killed
    return f"answer {{number}}"

Agent(FunctionModel(decide)).map_sync(
    [f"item {{i}}" for i in range({total})], concurrency=4, checkpoint=sys.argv[1],
    progress=None,
)
"""


def test_a_checkpoint_survives_a_killed_process(tmp_path: Path) -> None:
    """30 inputs; the process is killed (SIGKILL: no clean-up at all) after 12 rows finished.
    Resuming runs the other 18 only, and the 12 finished rows are intact."""
    path = tmp_path / "job.jsonl"
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(SCRIPT.format(quick=12, total=30)))
    process = subprocess.Popen(
        [sys.executable, str(script), str(path)], cwd=ROOT, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 60
        rows = 0
        while time.monotonic() < deadline:
            if path.exists():
                rows = len(path.read_text().splitlines()) - 2  # the header, the configuration
                if rows >= 12:
                    break
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            time.sleep(0.05)
        assert rows == 12, f"{rows} rows before the kill"
        time.sleep(0.2)  # the four runs in flight stay in flight
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
    assert process.returncode == -signal.SIGKILL

    loaded = load_checkpoint(path)
    assert loaded.damaged == 0
    assert sorted(r.text for r in loaded.rows.values()) == sorted(f"answer {i}" for i in range(12))
    ran = Counting()
    out = Agent(ran.model()).map_sync(
        [f"item {i}" for i in range(30)], checkpoint=path, progress=None
    )
    assert sorted(ran.prompts) == sorted(f"item {i}" for i in range(12, 30))
    assert (out["status"] == "done").all()
    assert list(out["text"][:12]) == [f"answer {i}" for i in range(12)]
