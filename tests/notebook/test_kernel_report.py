"""``%agent report`` in a real kernel: each run with its calls, decisions and code, as one static
output that a notebook saved with nbformat and read back still shows; hostile text escaped."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import nbformat

from .kernel import Kernel
from .test_kernel_approval import wait_ended
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
    kernel.execute("%agent undo run-1 step 2", allow_errors=True)
    report = kernel.submit("%agent report")
    kernel.finish(report)
    reopened = _saved_and_reopened(
        kernel,
        [(f"%agent --kernel {PROMPT}", first), ("%agent report", report)],
        tmp_path / "n.ipynb",
    )
    (output,) = [o for o in reopened.cells[1].outputs if o.output_type == "display_data"]
    shown, plain = output.data["text/html"], output.data["text/plain"]
    assert "<script" not in shown and html.escape("<script>alert(1)</script>") in shown
    assert "sk-abcdefghijklmnopqrstuvwxyz" not in shown + plain  # a secret never lands
    assert "application/vnd.jupyter.widget-view+json" not in output.data  # static: no widget
    run_id = kernel.eval("nbagent.notebook.current_session().jobs[-1].run.id")
    assert f"{run_id} · " in plain and "run_python: auto, done" in plain, plain
    assert "made = 41 + 1" in shown and "junk = &#x27;x&#x27;" in shown
    assert "code (kept in the kernel): made = 41 + 1" in plain
    assert "code (undone (%agent undo)): junk = 'x'" in plain
    assert "1 run(s)" in plain and "tokens" in plain


def test_report_with_no_run_says_so(kernel: Kernel) -> None:
    kernel.execute("import nbagent.notebook; nbagent.notebook.current_session().jobs.clear()")
    cell = kernel.submit("%agent report")
    kernel.finish(cell)
    assert "No %agent run in this notebook's session yet." in kernel.cell_text(cell)


def test_report_takes_no_words(kernel: Kernel) -> None:
    cell = kernel.submit("%agent report everything please")
    kernel.finish(cell, allow_errors=True)
    reply = kernel.replies[cell]["content"]
    assert reply["status"] == "error" and "report" in reply["evalue"], reply
