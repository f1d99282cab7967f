"""``%agent report`` in a real kernel: each run with its calls, decisions and code, as one static
output that a notebook saved with nbformat and read back still shows; hostile text escaped."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import nbformat

from .kernel import Kernel
from .test_kernel_approval import setup_run, wait_ended
from .test_kernel_snippets import _start, _turns

PROMPT = "tidy <script>alert(1)</script> with sk-abcdefghijklmnopqrstuvwxyz0123456789"


def _saved_and_reopened(kernel: Kernel, cells: list[tuple[str, str]], path: Path) -> Any:
    """The cells with the outputs the kernel sent, as a notebook saved to ``path`` and read
    back (nbformat validates both ways)."""
    nb = nbformat.v4.new_notebook()
    for source, msg_id in cells:
        cell = nbformat.v4.new_code_cell(source)
        cell.outputs = [nbformat.from_dict(o) for o in kernel.cell_outputs(msg_id)]
        nb.cells.append(cell)
    nbformat.validate(nb)
    nbformat.write(nb, str(path))
    reopened = nbformat.read(str(path), as_version=4)
    nbformat.validate(reopened)
    return reopened


def test_report_lists_each_run_with_its_calls_and_code_and_survives_saving(
    kernel: Kernel, tmp_path: Path
) -> None:
    _start(kernel, _turns("made = 41 + 1", "junk = 'x'"))
    first = kernel.submit(f"%agent --new --kernel --approve auto {PROMPT}")
    wait_ended(kernel, first)
    run_id = kernel.eval("nbagent.notebook.current_session().jobs[-1].run.id")
    undo = kernel.submit(f"%agent undo {run_id} step 2")
    kernel.finish(undo)
    cells = kernel.submit(f"%agent cells {run_id}")
    kernel.finish(cells)
    report = kernel.submit("%agent report")
    kernel.finish(report)
    reopened = _saved_and_reopened(
        kernel,
        [
            (f"%agent --kernel {PROMPT}", first),
            (f"%agent undo {run_id} step 2", undo),
            (f"%agent cells {run_id}", cells),
            ("%agent report", report),
        ],
        tmp_path / "n.ipynb",
    )
    (output,) = [o for o in reopened.cells[3].outputs if o.output_type == "display_data"]
    shown, plain = output.data["text/html"], output.data["text/plain"]
    assert "<script" not in shown and html.escape("<script>alert(1)</script>") in shown
    assert "sk-abcdefghijklmnopqrstuvwxyz" not in shown + plain  # a secret never lands
    assert "application/vnd.jupyter.widget-view+json" not in output.data  # static: no widget
    assert f"{run_id} · offline stand-in · scripted" in plain, plain
    assert "call run_python: auto, done" in plain, plain
    assert "made = 41 + 1" in shown and "junk = &#x27;x&#x27;" in shown
    assert "code (kept as cells (%agent cells)): made = 41 + 1" in plain, plain
    assert "code (undone (%agent undo)): junk = 'x'" in plain, plain
    assert "1 run(s): 0 live, 0 replayed, 1 offline, 0 refused" in plain
    assert "no cost (no live run)" in plain and "models: scripted" in plain


def test_after_a_restart_the_report_reads_the_earlier_runs_from_the_saved_notebook(
    kernel: Kernel, tmp_path: Path
) -> None:
    setup_run(kernel, '["Hello <b>there</b>."]')
    first = kernel.submit("%agent --new say hello before the restart")
    wait_ended(kernel, first)
    saved = tmp_path / "lesson.ipynb"
    _saved_and_reopened(kernel, [("%agent say hello before the restart", first)], saved)
    clear = "s = nbagent.notebook.current_session(); s.jobs.clear(); s.refusals.clear()"
    kernel.execute(f"import nbagent.notebook\n{clear}")  # a new kernel session's memory
    # the kernel's notebook, as ipykernel names it from JPY_SESSION_NAME
    kernel.execute(f"__session__ = {str(saved)!r}")
    try:
        setup_run(kernel, '["Hello again."]')
        second = kernel.submit("%agent --new say hello after the restart")
        wait_ended(kernel, second)
        report = kernel.submit("%agent report")
        kernel.finish(report)
        plain = kernel.cell_text(report)
        assert plain.index("say hello before the restart") < plain.index("after the restart")
        assert "2 run(s): 0 live, 0 replayed, 2 offline" in plain, plain
        assert "1 earlier run(s) read from the saved notebook lesson.ipynb" in plain, plain
        # saved with this session's run in it too: each run is listed once
        _saved_and_reopened(
            kernel,
            [("%agent say hello before the restart", first), ("%agent say hello after", second)],
            saved,
        )
        again = kernel.submit("%agent report")
        kernel.finish(again)
        plain = kernel.cell_text(again)
        assert plain.count("say hello after the restart") == 1, plain
        assert "2 run(s)" in plain and "1 earlier run(s)" in plain, plain
        # a saved file that is not a notebook is said, never a crash
        saved.write_text("{not json")
        broken = kernel.submit("%agent report")
        kernel.finish(broken)
        assert "the saved notebook lesson.ipynb could not be read" in kernel.cell_text(broken)
    finally:
        kernel.execute(f"del __session__\n{clear}")


def test_the_class_report_reads_a_notebook_the_kernel_saved(kernel: Kernel, tmp_path: Path) -> None:
    from nbagent.course import read_class

    setup_run(kernel, '["Hello <b>there</b>."]')
    first = kernel.submit("%agent --new say hello")
    wait_ended(kernel, first)
    report = kernel.submit("%agent report")
    kernel.finish(report)
    (tmp_path / "ada").mkdir()
    _saved_and_reopened(
        kernel,
        [("%agent say hello", first), ("%agent report", report)],
        tmp_path / "ada" / "a.ipynb",
    )
    (row,) = read_class([tmp_path])
    assert (row.student, row.notebook, row.runs, row.offline) == ("ada", "a.ipynb", 1, 1), row
    assert row.flags == "" and row.problems == "", row
    assert row.models == "scripted"


def test_report_with_no_run_says_so(kernel: Kernel) -> None:
    kernel.execute(
        "import nbagent.notebook\ns = nbagent.notebook.current_session()\n"
        "s.jobs.clear(); s.refusals.clear()"
    )
    cell = kernel.submit("%agent report")
    kernel.finish(cell)
    assert "No %agent run in this notebook's session yet." in kernel.cell_text(cell)


def test_report_takes_no_words(kernel: Kernel) -> None:
    cell = kernel.submit("%agent report everything please")
    kernel.finish(cell, allow_errors=True)
    reply = kernel.replies[cell]["content"]
    assert reply["status"] == "error" and "report" in reply["evalue"], reply


def test_a_recorded_run_checks_out_against_its_recording_until_it_is_edited(
    kernel: Kernel, tmp_path: Path
) -> None:
    from nbagent.course import read_class

    setup_run(kernel, '["The answer is 42."]')
    cell = kernel.submit("%agent --new --record what is the answer")
    wait_ended(kernel, cell)
    store = Path(kernel.eval("str(nbagent.notebook.current_session().recordings.folder)"))
    student = tmp_path / "submissions" / "ada"
    student.mkdir(parents=True)
    notebook = _saved_and_reopened(
        kernel, [("%agent --record what is", cell)], tmp_path / "n.ipynb"
    )
    (record,) = [
        o.metadata["nbagent"]["provenance"]
        for o in notebook.cells[0].outputs
        if "provenance" in o.get("metadata", {}).get("nbagent", {})
    ]
    assert record["recording"] and record["recording_digest"] and record["output_digest"]
    # handed in as it was saved: the recording where the record says, beside the notebook
    copy = student / record["recording"]
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_bytes((store / Path(record["recording"]).name).read_bytes())
    nbformat.write(notebook, str(student / "hw.ipynb"))
    (row,) = read_class([tmp_path / "submissions"])
    assert row.flags == "" and row.runs == 1, row  # the answer is the recorded one
    copy.write_text(copy.read_text().replace("The answer is 42.", "The answer is 41."))
    (row,) = read_class([tmp_path / "submissions"])
    assert row.flags == "output_mismatch" and "the recording changed since the run" in row.problems
