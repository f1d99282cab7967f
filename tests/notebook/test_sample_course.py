"""The sample course works when a teacher opens it (``notebooks/sample-course/``): executed as
JupyterLab's Run All executes it, with no API key, an exam is AI off by the course policy (its
``%agent`` cell is refused in the very words it was saved with, and nothing is asked) and a
homework replays every answer from the recordings beside it; the class report over the files
as saved again agrees with them."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_client import AsyncKernelManager
from nbclient import NotebookClient

from nbagent.course import read_class
from nbagent.course.policy import load_policy
from nbagent.course.provenance import Provenance, read_output

from .conftest import ROOT, kernel_env
from .kernel import make_kernel_manager

SAMPLE = ROOT / "notebooks" / "sample-course"


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("sample") / "sample-course"
    shutil.copytree(SAMPLE, copy)
    return copy


def _execute(python: str, path: Path, spec: Path) -> Any:
    """Run every cell of the notebook in its own folder, as a front end does, with no key."""
    nb = nbformat.read(path, as_version=4)
    env = {
        k: v for k, v in kernel_env().items() if k not in ("OPENAI_API_KEY", "NBAGENT_RECORDINGS")
    }
    km = make_kernel_manager(python, spec, AsyncKernelManager)
    client = NotebookClient(
        nb, km=km, timeout=120, resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute(env=env)
    nbformat.write(nb, path)
    return nb


def _records(nb: Any) -> list[Provenance]:
    found = [read_output(o.get("metadata", {})) for c in nb.cells for o in c.get("outputs", [])]
    return [r for r in found if isinstance(r, Provenance)]


def test_an_exam_opened_from_a_students_folder_is_ai_off_and_asks_for_no_key(
    kernel_python: str, course: Path, tmp_path: Path
) -> None:
    path = course / "submissions" / "student-001" / "exams" / "final.ipynb"
    saved = nbformat.read(path, as_version=4)
    assert saved.cells[1].source == "%load_ext nbagent"
    before = saved.cells[2].outputs[0]["data"]
    nb = _execute(kernel_python, path, tmp_path / "spec")
    (output,) = nb.cells[2].outputs
    assert output["data"] == before  # the product's refusal is the sample's, word for word
    assert "AI is off here: This is an exam: AI is off" in before["text/plain"]
    assert "API key" not in str(nb.cells[2].outputs)
    (record,) = _records(nb)
    assert (
        record.ai_off and record.refused and record.policy_source == "../../../nbagent-course.toml"
    )


def test_a_homework_replays_every_answer_with_no_key(
    kernel_python: str, course: Path, tmp_path: Path
) -> None:
    path = course / "submissions" / "student-003" / "homework-1.ipynb"
    asked = [
        c.source for c in nbformat.read(path, as_version=4).cells if c.source.startswith("%agent")
    ]
    nb = _execute(kernel_python, path, tmp_path / "spec")
    records = _records(nb)
    assert len(records) == len(asked) >= 2
    assert {r.mode for r in records} == {"replayed"}, records
    assert all(r.stop_reason == "finished" and r.refused is None for r in records)
    # the class report over the course as it is now: this homework replayed, nothing flagged
    rows = read_class([course / "submissions"], policy=load_policy(course / "nbagent-course.toml"))
    (row,) = [r for r in rows if r.path == str(path)]
    assert (row.runs, row.replayed, row.flags) == (len(asked), len(asked), ""), row
