"""A notebook executed headless (nbclient, as ``jupyter execute``, papermill and autograders
run one) against a loopback model server: every run's saved output carries its provenance and
its cost, a headless ``%agent serve`` session its served record, and the class report over the
saved file counts them as runs, not as "a run record without provenance"."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_client import AsyncKernelManager
from nbclient import NotebookClient

from nbagent.course import read_class
from nbagent.course.provenance import Provenance, read_output

from ..course.gateway import Gateway
from ..providers import wire
from .conftest import SECRET, kernel_env
from .kernel import make_kernel_manager

SERVES = importlib.util.find_spec("mcp") is not None and importlib.util.find_spec("uvicorn")


def _records(cell: Any) -> list[Provenance]:
    found = [read_output(o.get("metadata", {})) for o in cell.outputs]
    return [r for r in found if isinstance(r, Provenance)]


@pytest.fixture(scope="module")
def executed(kernel_python: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    tmp = tmp_path_factory.mktemp("headless-record")
    folder = tmp / "submissions" / "alice"
    folder.mkdir(parents=True)
    cells = [
        "%load_ext nbagent",
        "%agent -m openai:gpt-4.1-mini What is 2 + 2?",
        "%agent --new -m openai:gpt-4.1-mini And 3 + 3?",
    ]
    if SERVES:
        cells += ["%agent serve", "%agent serve stop"]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    nb.metadata["kernelspec"] = {"name": "nbagent-test", "display_name": "t", "language": "python"}
    with Gateway() as gateway:
        gateway.sse(wire.openai_text("Four."))
        gateway.sse(wire.openai_text("Six."))
        km = make_kernel_manager(kernel_python, tmp / "spec", AsyncKernelManager)
        client = NotebookClient(
            nb, km=km, timeout=120, resources={"metadata": {"path": str(folder)}}
        )
        env = kernel_env(OPENAI_BASE_URL=gateway.url, NBAGENT_RECORDINGS=str(tmp / "recordings"))
        client.execute(env=env)
        assert len(gateway.requests) == 2
    path = folder / "homework.ipynb"
    nbformat.write(nb, path)
    return nb, path


def test_each_live_run_saved_headless_carries_its_record_and_cost(
    executed: tuple[Any, Path],
) -> None:
    nb, path = executed
    for index, answer in ((1, "Four."), (2, "Six.")):
        (record,) = _records(nb.cells[index])
        assert record.mode == "live" and record.model == "openai:gpt-4.1-mini"
        assert (record.input_tokens, record.output_tokens, record.requests) == (82, 17, 1)
        assert record.cost_usd is not None and record.cost_usd > 0
        shown = "\n".join(
            str(o.get("data", {}).get("text/plain", "")) for o in nb.cells[index].outputs
        )
        assert answer in shown and "$0.00006" in shown  # the footer knows the cost too
    assert SECRET not in path.read_text()


def test_the_class_report_counts_the_headless_runs(executed: tuple[Any, Path]) -> None:
    _, path = executed
    (row,) = read_class([path.parent.parent])
    assert "no_provenance" not in row.problems and "without provenance" not in row.problems
    assert row.live == 2 and row.runs == (3 if SERVES else 2), row
    assert row.cost_usd > 0 and row.input_tokens == 164 and row.flags == "", row


@pytest.mark.skipif(not SERVES, reason="the mcp extra (mcp, uvicorn) is not installed")
def test_a_headless_serving_saves_its_served_record(executed: tuple[Any, Path]) -> None:
    nb, _ = executed
    found = [r for cell in nb.cells[3:] for r in _records(cell)]
    assert [r.mode for r in found] == ["served"], json.dumps([c.outputs for c in nb.cells[3:]])
    assert found[0].stop_reason == "stopped"


@pytest.mark.parametrize("form", ["text/plain", "text/html", "text/markdown", "text"])
def test_an_answer_edited_in_the_saved_file_is_flagged(
    executed: tuple[Any, Path], form: str, tmp_path: Path
) -> None:
    import copy

    nb, _ = executed
    edited = copy.deepcopy(nb)
    for output in edited.cells[1].outputs:
        if form == "text":  # the run view's own record keeps the answer's start
            record = output.get("metadata", {}).get("nbagent", {})
            if "provenance" in record:
                record["text"] = record["text"].replace("Four", "Five")
        elif form in output.get("data", {}):
            output["data"][form] = output["data"][form].replace("Four", "Five")
    assert edited != nb
    path = tmp_path / "bob" / "homework.ipynb"
    path.parent.mkdir()
    nbformat.write(edited, path)
    (row,) = read_class([tmp_path])
    assert row.flag_list == ["output_mismatch"], row
    said = "the run's own record" if form == "text" else form
    assert f"({said}) is not what the run showed" in row.problems
