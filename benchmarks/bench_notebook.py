"""The notebook tools in JupyterLab: from the model's call to the diff on screen, and reading a
500-cell notebook (its time, and what the model is sent).

A real JupyterLab in headless Chromium, a real kernel, the real page (``page.js``), a scripted
model. Each round, in the same notebook and alternately:

* **proposal → diff**: ``%agent --notebook`` whose model reads the notebook, then proposes an
  ``edit_cell``; timed from the moment the model's stream yields that call (the kernel's clock,
  ``time.time()``) to the moment the diff's new line is in a visible output of the cell (the
  page's clock, ``performance.timeOrigin + performance.now()``: the same machine's clock). The
  way there: the call validated, the page asked for the cell (the plan), the approval asked, the
  page asked again (the preview), the diff made and drawn.
* **reference: an approval card with a preview**: the same loop with an ordinary tool whose
  preview returns a text at once (no page round trip): what any approval card with a preview
  costs, so that the notebook tools' own share shows.

Then ``read_notebook`` on a notebook of 500 code cells (each 6 lines, with one output), through
the page: the tool's own time (the kernel's ``ToolFinished.elapsed``), and the characters the
model is sent, beside what a tool that reads the notebook whole would send (every cell's source
and text outputs; the ``.ipynb`` file's JSON), and beside reading and parsing that file with
nbformat in the kernel (the time of a file read, which nbagent does not do: the notebook open in
the page may not be saved).

Goals: the diff on screen within 1 s of the model's call, and within 0.5 s of the reference;
the 500-cell read within 1.5 s; what the model is sent within ``NotebookLimits.max_read_chars``
(40,000 characters).
"""

from __future__ import annotations

import json
import shutil
import statistics
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from _browser import TIMEOUT, Page, lab_pages, notebook_page, unavailable, write_notebook
from _common import Row, Section, main

SETUP = """
%load_ext nbagent
import json, time
import nbagent.notebook
from nbagent import tool
from nbagent.generation import ToolCallReceived
from nbagent.models import Call, ScriptedModel, Turn

_bench = {{}}

class TimedModel(ScriptedModel):
    async def stream(self, request):
        async for event in super().stream(request):
            if isinstance(event, ToolCallReceived) and event.call.name in ("edit_cell", "archive"):
                _bench["call"] = time.time()
            yield event

@tool(needs_approval=True, preview=lambda a: f"would archive {{a['name']}}")
def archive(name: str) -> str:
    \"\"\"Archive one thing.\"\"\"
    return f"archived {{name}}"

def _finished(run_id, event):
    if type(event).__name__ == "ToolFinished" and event.call.name == "read_notebook":
        _bench["read"] = (event.elapsed, len(event.result.text))

def _logged(result):  # each cell's probes, for the benchmark to read
    with open("bench.jsonl", "a") as log:
        log.write(json.dumps(_bench) + "\\n")

get_ipython().events.register("post_run_cell", _logged)
model = TimedModel({turns})
_session = nbagent.notebook.current_session()
_session.set_model(model)
_session.agent.observe(_finished)
"""

TARGET = "value = 0"
_ARM = """
([index, text]) => {
  const cell = document.querySelectorAll('.jp-Notebook .jp-Cell')[index];
  const old = new WeakSet(cell.querySelectorAll('.jp-OutputArea-output'));
  const state = {seen: null};
  const check = () => {
    if (state.seen !== null) return;
    for (const out of cell.querySelectorAll('.jp-OutputArea-output')) {
      if (old.has(out) || !out.textContent.includes(text) || !out.checkVisibility()) continue;
      state.seen = performance.timeOrigin + performance.now();
      observer.disconnect();
      return;
    }
  };
  const observer = new MutationObserver(check);
  observer.observe(cell, {subtree: true, childList: true, characterData: true});
  window.__seen = state;
}
"""


def _write(path: Path, sources: list[str | tuple[str, str]]) -> None:
    """The notebook, its second cell's id ``target`` (the cell the proposals edit)."""
    write_notebook(path, sources)
    saved = json.loads(path.read_text())
    saved["cells"][1]["id"] = "target"
    path.write_text(json.dumps(saved))


def _cells_500() -> list[str | tuple[str, str]]:
    sources: list[str | tuple[str, str]] = []
    for n in range(500):
        lines = [f"# step {n}: tidy the column", f"frame_{n} = load({n})"]
        lines += [f"frame_{n}['c{k}'] = frame_{n}['c{k}'].fillna(0)" for k in range(3)]
        lines.append(f"frame_{n}.head()")
        sources.append("\n".join(lines))
    return sources


def _shown(page: Page, index: int, text: str, accept: str) -> float:
    """Shift+Enter in cell ``index``; the epoch time ``text`` was first visible in a new output
    of it; then Accept (the button ``accept``) and wait for the cell to end."""
    page.click_editor(index)
    page.page.evaluate(_ARM, [index, text])
    page.page.keyboard.press("Shift+Enter")
    page.page.wait_for_function("() => window.__seen.seen !== null", timeout=TIMEOUT * 1000)
    seen = float(page.page.evaluate("() => window.__seen.seen")) / 1000
    button = page.page.locator(
        ".jp-OutputArea-output button.jupyter-button:visible", has_text=accept
    )
    button.first.click()
    prompt = page.page.locator(".jp-Notebook .jp-Cell .jp-InputArea-prompt").nth(index)
    deadline = time.monotonic() + TIMEOUT
    while prompt.inner_text().strip() in ("[*]:", "[ ]:"):
        if time.monotonic() > deadline:
            raise RuntimeError(f"cell {index} did not end")
        time.sleep(0.05)
    return seen


def _last(work: Path) -> dict[str, Any]:
    """The kernel's probes after the newest cell."""
    lines = (work / "bench.jsonl").read_text().strip().splitlines()
    found: dict[str, Any] = json.loads(lines[-1])
    return found


def build(quick: bool) -> Section:
    section = Section(
        "notebook", "19. The notebook tools in JupyterLab: proposal to diff, reading 500 cells"
    )
    diff = Row("proposal -> diff on screen", "edit_cell (notebook tools)", unit="ms", scale=1e3)
    card = Row(
        "proposal -> diff on screen",
        "reference: approval card with a preview",
        unit="ms",
        scale=1e3,
        reference="reference: approval card with a preview",
    )
    diff.reference = card.reference
    read = Row("read_notebook, 500 cells", "nbagent (through the page)", unit="ms", scale=1e3)
    parse = Row(
        "read_notebook, 500 cells",
        "reference: nbformat.read of the saved file",
        unit="ms",
        scale=1e3,
        reference="nbagent (through the page)",
    )
    read.reference = read.contender
    sent = Row(
        "characters the model is sent, 500 cells", "nbagent read_notebook", unit="chars", scale=1
    )
    whole = Row(
        "characters the model is sent, 500 cells",
        "a whole-notebook read (every cell's source)",
        unit="chars",
        scale=1,
        reference="nbagent read_notebook",
    )
    raw = Row(
        "characters the model is sent, 500 cells",
        "the .ipynb file's JSON",
        unit="chars",
        scale=1,
        reference="nbagent read_notebook",
    )
    sent.reference = sent.contender
    section.rows += [diff, card, read, parse, sent, whole, raw]
    reason = unavailable()
    if reason is not None:
        for row in section.rows:
            row.status, row.reason = "not installed", reason
        section.goal("the diff on screen within 1 s of the model's call", None, reason)
        return section
    rounds = 3 if quick else 8
    home = Path(tempfile.mkdtemp(prefix="bench-notebook-"))
    work = home / "work"
    work.mkdir()
    try:
        edit_turns, read_turns = [], []
        for n in range(rounds):
            diff_first = n % 2 == 0
            mine = [
                "Turn(Call('read_notebook', {}))",
                f"Turn(Call('edit_cell', {{'cell_id': 'target', 'source': 'value = {n + 1}'}}))",
                "'ok'",
            ]
            theirs = [f"Turn(Call('archive', {{'name': 'box {n}'}}))", "'ok'"]
            edit_turns += mine + theirs if diff_first else theirs + mine
            read_turns += ["Turn(Call('read_notebook', {}))", "'ok'"]
        _write(
            work / "edits.ipynb",
            [
                SETUP.format(turns=f"[{', '.join(edit_turns)}]"),
                TARGET,
                "%agent --new --notebook change it",
                "%agent --new call archive",
                ("markdown", "end"),
            ],
        )
        big = _cells_500()
        _write(
            work / "big.ipynb",
            [
                SETUP.format(turns=f"[{', '.join(read_turns)}]"),
                *big,
                "%agent --new --notebook read it",
                ("markdown", "end"),
            ],
        )
        with lab_pages(work, home) as (lab, browser):
            with notebook_page(lab, browser, "edits.ipynb") as page:
                page.run(0)
                page.run(1)
                for n in range(rounds):
                    cases = (diff, card) if n % 2 == 0 else (card, diff)
                    for case in cases:
                        if case is diff:
                            seen = _shown(page, 2, f"+value = {n + 1}", "Accept")
                        else:
                            seen = _shown(page, 3, f"would archive box {n}", "Approve")
                        case.values.append(seen - float(_last(work)["call"]))
                    diff.ratios.append(diff.values[-1] / card.values[-1])
                    card.ratios.append(1.0)
            with notebook_page(lab, browser, "big.ipynb") as page:
                page.run(0)
                for _ in range(rounds):
                    page.run(501, {"done": "finished"})
                    elapsed, chars = _last(work)["read"]
                    started = time.perf_counter()
                    import nbformat

                    nbformat.read(work / "big.ipynb", as_version=4)
                    parsed = time.perf_counter() - started
                    read.values.append(elapsed)
                    parse.values.append(parsed)
                    read.ratios.append(1.0)
                    parse.ratios.append(parsed / elapsed)
                    sent.values.append(float(chars))
        saved = json.loads((work / "big.ipynb").read_text())
        whole_text = sum(len("".join(c["source"])) for c in saved["cells"])
        for row, value in ((whole, float(whole_text)), (raw, float(len(json.dumps(saved))))):
            row.values = [value] * len(sent.values)
            row.ratios = [value / s for s in sent.values]
        sent.ratios = [1.0] * len(sent.values)
    except Exception:
        section.crashes.append(traceback.format_exc())
        for row in section.rows:
            if not row.values:
                row.status = "crashed"
        return section
    finally:
        shutil.rmtree(home, ignore_errors=True)
    to_screen = statistics.median(diff.values)
    over = statistics.median(diff.ratios)
    section.goal(
        "the diff on screen within 1 s of the model's call",
        to_screen <= 1.0,
        f"{to_screen * 1000:.0f} ms",
    )
    section.goal(
        "the notebook tools add at most 0.5 s to an approval card with a preview",
        to_screen - statistics.median(card.values) <= 0.5,
        f"{(to_screen - statistics.median(card.values)) * 1000:.0f} ms more ({over:.2f}x)",
    )
    section.goal(
        "read_notebook of 500 cells within 1.5 s",
        statistics.median(read.values) <= 1.5,
        f"{statistics.median(read.values) * 1000:.0f} ms",
    )
    section.goal(
        "what the model is sent stays within NotebookLimits.max_read_chars (40,000)",
        max(sent.values) <= 40_000,
        f"{max(sent.values):,.0f} characters, of {whole_text:,} in the cells' sources",
    )
    section.notes.append(
        "proposal -> diff: from the model's call (kernel clock) to the diff's new line visible in "
        "the page (page clock, same machine); the reference is the same loop with an ordinary "
        "tool whose preview needs no page round trip"
    )
    return section


if __name__ == "__main__":
    main(build)
