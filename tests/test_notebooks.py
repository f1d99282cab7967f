"""Every teaching notebook runs top to bottom, headless, on the offline model, and leaks no key.

Each notebook is executed by nbclient in a real ``python3`` kernel (the kernelspec that ipykernel
installs into this environment, so the kernel runs this interpreter). The environment holds fake
API keys but no model setting: a notebook that picked up a key instead of the offline model, or
printed one, fails here.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from .notebook.kernel import AsyncLocalKernelManager

NOTEBOOKS_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))
CELL_TIMEOUT = 120
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}

#: Fresh fake keys each session, so that finding one in an output cannot be a coincidence.
FAKE_KEYS = {
    "OPENAI_API_KEY": f"sk-test-{secrets.token_hex(16)}",
    "ANTHROPIC_API_KEY": f"sk-ant-test-{secrets.token_hex(16)}",
}


@pytest.fixture
def headless_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Fake keys set, every nbagent setting cleared: the notebooks must choose the offline model."""
    import os

    for name in list(os.environ):
        if name.startswith("NBAGENT_") or name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
            monkeypatch.delenv(name)
    for name, value in FAKE_KEYS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    return dict(FAKE_KEYS)


def _folder_state(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (but Jupyter's checkpoints) and a hash of its content."""
    import hashlib

    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and ".ipynb_checkpoints" not in p.parts
    }


def tiny_notebook(path: Path, *sources: str) -> Path:
    """Write a notebook of code cells, with the kernelspec every notebook here has."""
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(source) for source in sources],
        metadata={"kernelspec": KERNELSPEC},
    )
    nbformat.write(notebook, path)
    return path


def execute(path: Path, out_dir: Path) -> nbformat.NotebookNode:
    """Run a notebook like ``jupyter execute`` does, from its own folder; save the result."""
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        kernel_name="python3",
        kernel_manager_class=AsyncLocalKernelManager,
        timeout=CELL_TIMEOUT,
        resources={"metadata": {"path": str(path.parent)}},
    )
    try:
        client.execute()
    finally:
        nbformat.write(notebook, out_dir / path.name)
    return notebook


def test_the_course_is_complete() -> None:
    numbers = [p.name[:2] for p in NOTEBOOKS]
    assert numbers == [f"{i:02d}" for i in range(1, 16)], [p.name for p in NOTEBOOKS]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_saved_without_outputs_and_with_a_kernelspec(path: Path) -> None:
    """Outputs are made by running (CI, the docs build), never committed; the kernelspec saves a
    kernel-picker dialog in JupyterLab."""
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    assert notebook.metadata.get("kernelspec", {}).get("name") == "python3"
    stale = [i for i, c in enumerate(notebook.cells) if c.cell_type == "code" and c.outputs]
    assert not stale, f"cells {stale} have saved outputs: clear them before committing"
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert len(code) >= 3, "a notebook teaches by running code"
    assert len(notebook.cells) <= 30, "keep each notebook short"


@pytest.mark.timeout(CELL_TIMEOUT * 3)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_headless(path: Path, tmp_path: Path, headless_env: dict[str, str]) -> None:
    before = _folder_state(path.parent)
    try:
        executed = execute(path, tmp_path)
    except CellExecutionError as error:
        pytest.fail(f"{path.name} failed (executed copy in {tmp_path}):\n{error}", pytrace=False)

    outputs = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs]
    assert outputs, f"{path.name} produced no output at all"
    errors = [o for o in outputs if o.get("output_type") == "error"]
    assert not errors, f"{path.name} recorded errors: {errors}"

    # running a lesson leaves its folder as it was (no recording written or rewritten)
    assert _folder_state(path.parent) == before
    if path.stem == "05_streaming_and_control":  # the timeline is an SVG output, exported too
        svgs = [o for o in outputs if "image/svg+xml" in o.get("data", {})]
        assert svgs, "no timeline under the run with three calls"
        from nbconvert import HTMLExporter

        page, _ = HTMLExporter().from_notebook_node(executed)
        svg = svgs[0]["data"]["image/svg+xml"]
        svg = svg if isinstance(svg, str) else "".join(svg)
        # the picture itself is in the exported page (nbconvert embeds SVG as a base64 image)
        embedded = re.findall(r'<img[^>]+src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"', page)
        pictures = [base64.b64decode(data).decode() for data in embedded]
        assert svg.strip() in [p.strip() for p in pictures], f"{len(pictures)} SVG images"
    if path.stem == "08_record_and_replay":  # the shipped recording still matches the lesson
        printed = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
        assert "replayed: finished | the model said: A kilo of apples costs 3.20 EUR" in printed
    if path.stem == "09_many_runs":  # the batches ran, and the resumed one ran one row only
        printed = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
        assert "6 points out of 10" in printed
        assert "6 runs for 6 rows; the second batch ran only: ['Oslo | Oslo']" in printed
        shown = json.dumps([o.get("data", {}) for o in outputs])
        assert "nbagent map (finished): quiz" in shown
        assert "application/vnd.jupyter.widget-view+json" not in shown
    elif path.stem == "10_a_real_tiny_model":  # the real model's recorded mistakes, replayed
        printed = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
        shown = json.dumps([o.get("data", {}).get("text/plain", "") for o in outputs])
        assert "replay of LocalChat:smollm2" in shown
        assert "50 is greater than the maximum of 30" in shown  # validation
        assert printed.count("refused: This call to delete_file was not run") >= 3  # denial
        assert "Sint Maarten: no data for this city" in printed
        assert printed.count("run stopped: max_steps after 3 model turns") >= 3  # the step limit
    elif path.stem == "11_the_agent_in_your_kernel":  # the recorded snippets ran for real here
        printed = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
        shown = "\n".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
        assert "replay of ScriptedModel:stand-in" in shown and "finished · 5 steps" in shown
        assert "2025-07   East" in shown and "2025-10   West" in shown  # flagged, then shown
        assert [o for o in outputs if "image/png" in o.get("data", {})]  # the plot
        assert "Removed (the agent added them): plt, region, rows, flagged" in shown  # step 4
        # a figure is read only by its own code: undo cannot vouch for it, and leaves it
        assert (
            "Left as it is: fig: nbagent cannot tell whether it changed after the agent's step: "
            "nbagent cannot read an object of type matplotlib.Figure without running its code"
        ) in shown
        assert "still there: ['fig', 'ax']" in printed and "'z', 'outlier']" in printed
        assert re.search(r"# nbagent run-[a-z0-9]{5}-1 · step 3: flag the unusual months", shown)
    elif path.stem == "12_step_and_fork":  # exchanges, step mode headless, an edit, a fork
        printed = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
        shown = "\n".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
        html = "\n".join(str(o.get("data", {}).get("text/html", "")) for o in outputs)
        assert "What the model saw, step by step (2 requests)" in html
        assert "step 2: 3 messages in, stop out" in printed
        assert "--step: nobody can click Next here" in shown
        assert "the model read: Oslo: sunny, 25 °C | edited: True" in printed
        assert "pack a raincoat and boots" in printed
        assert "they first differ at step 2: they answered differently" in printed
    elif path.stem == "14_typed_answers_and_helpers":  # a typed value, a retry, two helpers
        printed = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
        shown = "\n".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
        html = "\n".join(str(o.get("data", {}).get("text/html", "")) for o in outputs)
        assert "Booking(guest='Ann Berg', nights=3, city='Oslo')" in printed
        assert "nights + 1 = 4" in printed
        assert "/nights: 'three' is not of type 'integer'" in printed  # what went back
        assert "after 2 steps" in printed
        assert "research answered: Oslo: rain, 9 °C today." in printed
        assert "write answered: Pack a raincoat" in printed
        # the saved output keeps each helper's own run inside its call
        assert "research: its own run" in html and "write: its own run" in html
        assert "[tool] weather" in shown  # the researcher's own call, in the plain text too

    elif path.stem == "15_the_agent_fixes_a_notebook":  # a fix, a rule's rejection, undo, save
        printed = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
        shown = "\n".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
        assert printed.count("""[3] code report: 'print(f"Total: {total:.2f}")'""") == 2
        assert "'accepted': 'by policy'" in printed  # nobody could click: the lesson's policy
        assert "the rule `deny insert_cell` denies it" in shown
        assert """[3] code report: 'print(f"Total: {totl:.2f}")'""" in printed  # undone
        assert "edit of cell 3 (id report): taken back" in shown
        assert '"tool": "edit_cell"' in printed  # the record, in the saved file
        assert "No page can show this notebook here" in shown  # the open notebook: none here

    # the class report over the executed lesson: every run it shows is the run it recorded
    from nbagent.course import read_class

    (row,) = read_class([tmp_path / path.name])
    wrong = set(row.flag_list) & {"output_mismatch", "metadata_removed", "metadata_tampered"}
    assert not wrong, f"{path.name}: the class report flags {wrong}: {row.problems}"

    saved = json.dumps(executed)
    for name, key in headless_env.items():
        # The whole key, and its random half alone (a truncated or re-quoted key is still a leak).
        assert key not in saved, f"{name} appears in the executed {path.name}"
        assert key[-16:] not in saved, f"part of {name} appears in the executed {path.name}"


@pytest.mark.timeout(CELL_TIMEOUT)
def test_a_failing_cell_fails_the_run(tmp_path: Path, headless_env: dict[str, str]) -> None:
    """The harness itself can fail: a broken notebook is reported, not silently saved."""
    path = tiny_notebook(tmp_path / "broken.ipynb", "print('before')", "1 / 0")
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(CellExecutionError, match="ZeroDivisionError"):
        execute(path, out)


@pytest.mark.timeout(CELL_TIMEOUT)
def test_the_kernel_is_this_environment(tmp_path: Path) -> None:
    """``python3`` must start this interpreter, or the notebooks would test another install."""
    import sys

    path = tiny_notebook(
        tmp_path / "probe.ipynb", "import sys, nbagent; print(sys.prefix); print(nbagent.__file__)"
    )
    out = tmp_path / "out"
    out.mkdir()
    ran = execute(path, out)
    prefix, package = ran.cells[0].outputs[0]["text"].split()
    assert Path(prefix).resolve() == Path(sys.prefix).resolve()
    import nbagent

    assert Path(package).resolve() == Path(nbagent.__file__).resolve()
