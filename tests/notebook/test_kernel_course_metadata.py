"""The cell metadata of refused cells and of the cells ``%agent cells`` makes, in a real kernel.

The kernel cannot write a cell's metadata: it puts each record into the output's metadata and
opens a :class:`~nbagent.notebook.live.cellnote.CellNote` whose script (in the page) copies the
record into the cell (tests/browser/test_cell_metadata.py checks the page's side in JupyterLab
and Notebook 7). Here: what the kernel sends (the record, the note asking for it, the note
closed once the page answers), and what the class report and ``notebook_report`` read from a
notebook holding that metadata, validated by nbformat.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import nbformat
import pytest

from nbagent.course import FollowUp, StepRecord, notebook_report, read_class
from nbagent.course.provenance import read_output

from ..course.gateway import Gateway
from .conftest import SECRET
from .kernel import Kernel
from .test_kernel_approval import wait_ended
from .test_kernel_course import MODEL, course, digest, gateway, run
from .test_kernel_snippets import _start, _turns

__all__ = ["gateway"]  # the fixture, shared with test_kernel_course

ID = re.compile(r"refused-[0-9a-f]{12}")
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def _note(kernel: Kernel, find: str, key: str) -> str:
    """The comm id of the CellNote that asks the page to mark a cell."""
    (found,) = kernel.wait_for(
        lambda: kernel.widget_ids("AnyModel", find=find, key=key), what=f"the {find} note"
    )
    return str(found)


def _saved(cells: list[Any], path: Path) -> Any:
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    nbformat.validate(nb)
    nbformat.write(nb, str(path))
    back = nbformat.read(str(path), as_version=4)
    nbformat.validate(back)
    return back


@pytest.mark.parametrize(
    ("policy", "line", "rule"),
    [
        ("ai = false\n", f"%agent -m {MODEL} hi", "ai"),
        ('models = ["anthropic:*"]\n', f"%agent -m {MODEL} hi", "models"),
        ("kernel_tools = false\n", f"%agent -m {MODEL} --kernel hi", "kernel_tools"),
        ("notebook_tools = false\n", f"%agent -m {MODEL} --notebook hi", "notebook_tools"),
        ("auto_approve = false\n", f"%agent -m {MODEL} --approve auto hi", "auto_approve"),
        ("live = false\n", f"%agent -m {MODEL} nothing recorded", "live"),
        ("[budget.run]\nusd = 0.5\n", "%agent -m openai:no-such-model-7 hi", "budget.run.usd"),
    ],
)
def test_a_refusal_names_its_rule_and_time_and_asks_the_page_to_mark_its_cell(
    kernel: Kernel, gateway: Gateway, tmp_path: Path, policy: str, line: str, rule: str
) -> None:
    data = course(kernel, tmp_path, policy)
    text, record, outputs = run(kernel, line)  # the kernel has a key (SECRET): never shown
    assert record is not None and record.refused == text.strip(), text
    assert record.rule == rule and ID.fullmatch(record.run_id)
    assert record.at is not None and TIME.fullmatch(record.at)
    assert record.policy_digest == digest(data) and record.policy_source == "nbagent-course.toml"
    assert gateway.requests == []
    note = _note(kernel, "output", record.run_id)
    # the page copies the output's record into the cell, then answers; the kernel closes it
    kernel.send_comm(note, {"method": "custom", "content": {"event": "done", "marked": True}})
    kernel.wait_for(lambda: note in kernel.closed, what="the note closed")
    raw = next(o["metadata"]["nbagent"] for o in outputs if "nbagent" in o.get("metadata", {}))
    assert SECRET not in str(raw) and SECRET not in text
    cell = nbformat.v4.new_code_cell(line, metadata={"nbagent": raw})
    cell.outputs = [nbformat.from_dict(o) for o in outputs]
    _saved([cell], tmp_path / "n.ipynb")


def test_refusals_get_their_own_ids_and_the_saved_cell_alone_tells_the_reports(
    kernel: Kernel, tmp_path: Path
) -> None:
    course(kernel, tmp_path, "ai = false\nmessage = 'Exam: no AI.'\n")
    kernel.execute("s = nbagent.notebook.current_session(); s.jobs.clear(); s.refusals.clear()")
    ids = []
    cells = []
    for n in range(3):
        if n == 2:  # as after a kernel restart: no run counted in this session
            kernel.execute("s.jobs.clear()")
        _, record, outputs = run(kernel, "%agent what is 2 + 2?")
        assert record is not None
        ids.append(record.run_id)
        raw = next(o["metadata"]["nbagent"] for o in outputs if "nbagent" in o.get("metadata"))
        # the page writes the record into the cell; a student then clears the cell's output
        # (the page takes it away then) or strips only the outputs' metadata (it stays)
        cells.append(nbformat.v4.new_code_cell("%agent what is 2 + 2?", metadata={"nbagent": raw}))
        cells[-1].outputs = [nbformat.from_dict({**o, "metadata": {}}) for o in outputs]
    assert len(set(ids)) == 3 and all(ID.fullmatch(i) for i in ids), ids
    folder = tmp_path / "ada"
    folder.mkdir()
    saved = _saved(cells, folder / "exam.ipynb")
    assert [c.metadata["nbagent"]["run_id"] for c in saved.cells] == ids  # stable once saved
    report = notebook_report(folder / "exam.ipynb")
    assert [r.run_id for r in report.runs] == ids
    assert all(r.refused and r.rule == "ai" and r.ai_off for r in report.runs)
    assert "3 run(s): 0 live, 0 replayed, 0 offline, 3 refused" in str(report), str(report)
    (row,) = read_class([folder])
    assert (row.runs, row.refused) == (3, 3)
    assert "metadata_removed" not in row.flag_list, row.problems


def test_the_cell_agent_cells_makes_carries_each_step_and_the_policy(
    kernel: Kernel, tmp_path: Path
) -> None:
    data = course(kernel, tmp_path, 'models = ["openai:*"]\n')
    _start(kernel, _turns("step_one = 1", "1/0"))
    first = kernel.submit("%agent --new --kernel --approve auto two steps")
    run_id = wait_ended(kernel, first)["run_id"]
    command = kernel.submit(f"%agent cells {run_id}")
    kernel.finish(command)
    (payload,) = kernel.replies[command]["content"]["payload"]
    found = [read_output(o.get("metadata", {})) for o in kernel.cell_outputs(command)]
    (record,) = [f for f in found if isinstance(f, FollowUp)]
    kept, failed = StepRecord(run_id, 1, True, None), StepRecord(run_id, 2, False, "error")
    assert record.steps == (kept, failed)
    assert record.policy_digest == digest(data) and record.runs == (run_id,)
    note = _note(kernel, "below", str(record.code_digest))
    kernel.send_comm(note, {"method": "custom", "content": {"event": "done", "marked": True}})
    kernel.wait_for(lambda: note in kernel.closed, what="the note closed")
    report = kernel.submit("%agent report")
    kernel.finish(report)
    plain = kernel.cell_text(report)
    assert "1 cell(s) made by %agent cells:" in plain, plain
    assert f"from {run_id}: {run_id} step 1 kept, {run_id} step 2 left out (error)" in plain
    # the notebook as the page saves it: the new cell below the command, with the record
    (raw,) = [o["metadata"]["nbagent"] for o in kernel.cell_outputs(command)
              if "nbagent" in o.get("metadata", {})]  # fmt: skip
    made = nbformat.v4.new_code_cell(payload["text"], metadata={"nbagent": raw})
    cells = [nbformat.v4.new_code_cell(f"%agent cells {run_id}"), made]
    cells[0].outputs = [nbformat.from_dict(o) for o in kernel.cell_outputs(command)]
    folder = tmp_path / "bo"
    folder.mkdir()
    _saved(cells, folder / "lesson.ipynb")
    saved = notebook_report(folder / "lesson.ipynb")
    assert (saved.agent_cells, saved.agent_cells_edited) == (1, 0)
    assert "holds 1 cell(s) the agent made" in str(saved) and len(saved.follow_ups) == 1
    made.source += "step_one += 1\n"  # the student edits the cell the agent made
    _saved(cells, folder / "lesson.ipynb")
    (row,) = read_class([folder])
    assert (row.agent_cells, row.agent_cells_edited) == (1, 1)


def test_notes_nobody_answers_are_bounded(kernel: Kernel) -> None:
    kernel.execute(
        "from nbagent.notebook.live import cellnote\n"
        "for n in range(cellnote.MAX_OPEN + 5):\n"
        "    cellnote.note_cell('output', f'refused-{n:012x}')"
    )
    assert kernel.eval("cellnote.open_notes() == cellnote.MAX_OPEN")
    opened = kernel.widget_ids("AnyModel", find="output", key="refused-000000000000")
    kernel.wait_for(lambda: set(opened) <= kernel.closed, what="the oldest note closed")
