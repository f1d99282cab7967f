"""Saved size of a long run: the bytes a run's outputs take in the saved ``.ipynb`` vs its text.

A notebook with one ``%agent`` cell whose scripted model streams 20,000 tokens of ordinary prose
(a token is a word here, with its space or punctuation), and, as a second case, the same amount
of prose around four tool calls whose results are text. Each runs in a real kernel twice:

* **nbclient** (headless, the way CI and teachers' scripts run notebooks), saved with
  ``nbformat.write``;
* **JupyterLab** in headless Chromium: Run > Run All Cells, then File > Save Notebook; the file
  the server wrote is what counts.

The figure is the bytes of that cell's ``outputs`` as written (the file's size minus the same
notebook written without them, so indentation and escaping count) over the bytes of the run's
text: what the model streamed plus the calls' arguments (UTF-8). The tool results are saved too;
their size is given beside it. The notes split the saved bytes by form (HTML, Markdown, plain
text, metadata, the JSON around them).

Goal (issue 9): saved size <= 2x the text, on both frontends.
"""

from __future__ import annotations

import copy
import json
import os
import random
import tempfile
import textwrap
import time
import traceback
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import Row, Section, main

GOAL = 2.0
_VOCABULARY = (
    "the a of and to in that it is was for on with as his her they be at by this had not but "
    "from or have an what all were when we there can been one if would who so out up about "
    "into than them some could time these two may first then do any like my now over such our "
    "man me even most made after also did many before must through back years where much your "
    "way well down should because each just those people how too little state good very make "
    "world still own see men work long get here between both life being under never day same "
    "another know while last might us great old year off come since against go came right used "
    "take three it's don't isn't river village market morning letter garden winter harbour "
    "bridge street teacher window kitchen evening weather station answer question number "
    "notebook"
)
WORDS = _VOCABULARY.split()
SETUP = '''
%load_ext nbagent
import json
import nbagent, nbagent.notebook
from nbagent.models import Call, ScriptedModel, Text, Turn

with open({script!r}, encoding="utf-8") as f:
    script = json.load(f)

@nbagent.tool
def look_up(topic: str) -> str:
    """Notes on a topic, as text."""
    return script["results"][topic]

nbagent.notebook.current_session().set_model(ScriptedModel([
    Turn(*(Text(i["text"]) if "text" in i else Call(i["call"], i["arguments"]) for i in turn))
    for turn in script["turns"]
]))
'''
AGENT = "%agent write the report"
NBCLIENT, LAB = "nbclient (headless)", "JupyterLab (Run All, Save)"


def prose(count: int, rng: random.Random) -> list[str]:
    """``count`` tokens of plain English-like prose: sentences, commas, paragraphs."""
    tokens: list[str] = []
    in_sentence, in_paragraph = 0, rng.randint(3, 6)
    while len(tokens) < count:
        word = rng.choice(WORDS)
        if in_sentence == 0:  # a new sentence, perhaps in a new paragraph
            in_sentence = rng.randint(6, 18)
            if tokens and in_paragraph == 0:
                in_paragraph = rng.randint(3, 6)
                word = "\n\n" + word.capitalize()
            else:
                word = (" " if tokens else "") + word.capitalize()
            in_paragraph -= 1
        else:
            word = " " + word
        in_sentence -= 1
        if in_sentence == 0:
            word += "."
        elif rng.random() < 0.08:
            word += ","
        tokens.append(word)
    return tokens


@dataclass
class Case:
    """One run to save: the model's turns, the tools' results, and the run's text in bytes."""

    name: str
    turns: list[list[dict[str, Any]]]
    results: dict[str, str] = field(default_factory=dict)

    @property
    def text_bytes(self) -> int:
        """What the model streamed plus the calls' arguments, UTF-8."""
        total = 0
        for turn in self.turns:
            for item in turn:
                if "text" in item:
                    total += len(item["text"].encode())
                else:
                    total += len(json.dumps(item["arguments"]).encode())
        return total

    @property
    def result_bytes(self) -> int:
        return sum(len(text.encode()) for text in self.results.values())

    @property
    def answer_tail(self) -> str:
        """The last words of the final answer: a saved run without them lost text."""
        last = "".join(i["text"] for i in self.turns[-1] if "text" in i)
        return last.rsplit("\n\n", 1)[-1][-40:]


def cases(tokens: int) -> list[Case]:
    rng = random.Random(9)
    answer = prose(tokens, rng)
    plain = Case(f"{tokens:,}-token answer", [[{"text": t} for t in answer]])
    text = prose(tokens, rng)
    topics = ["tides", "markets", "bridges", "winters"]
    results = {topic: "".join(prose(250, rng)).strip() for topic in topics}
    first, second = len(text) // 20, len(text) // 10

    def call(topic: str) -> dict[str, Any]:
        return {"call": "look_up", "arguments": {"topic": topic}}

    tools = Case(
        f"{tokens:,} tokens + 4 tool calls",
        [
            [{"text": t} for t in text[:first]] + [call(t) for t in topics[:3]],
            [{"text": t} for t in text[first:second]] + [call(topics[3])],
            [{"text": t} for t in text[second:]],
        ],
        results,
    )
    return [plain, tools]


def write_case(case: Case, folder: Path) -> Path:
    """The case's notebook (setup cell + ``%agent`` cell) and its script, in ``folder``."""
    from _browser import write_notebook

    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "script.json"
    script.write_text(json.dumps({"turns": case.turns, "results": case.results}), "utf-8")
    path = folder / "run.ipynb"
    setup = textwrap.dedent(SETUP.format(script=str(script))).strip()
    write_notebook(path, [setup, AGENT])
    return path


@dataclass
class Saved:
    """What one saved run weighs, in bytes."""

    outputs: int  # the cell's outputs as written
    forms: dict[str, int]  # by form: text/html, text/markdown, text/plain, metadata, JSON
    exact: bool  # nbformat writes the file byte for byte (so the subtraction is exact)
    widgets: int  # widget outputs left in the saved cell (a live view that was saved)


def measure_saved(text: str, case: Case) -> Saved:
    """Weigh the ``%agent`` cell's outputs in a saved notebook's text."""
    import nbformat

    notebook = nbformat.reads(text, as_version=4)
    index = next(i for i, c in enumerate(notebook.cells) if c.source.startswith("%agent"))
    written = nbformat.writes(notebook)
    stripped = copy.deepcopy(notebook)
    stripped.cells[index].outputs = []
    outputs = len(written.encode()) - len(nbformat.writes(stripped).encode())
    forms: dict[str, int] = defaultdict(int)
    widgets = 0
    html_parts: list[str] = []
    for output in notebook.cells[index].outputs:
        for mime, value in output.get("data", {}).items():
            forms[mime] += len(json.dumps(value, ensure_ascii=False).encode())
            widgets += mime == "application/vnd.jupyter.widget-view+json"
            if mime == "text/html":
                html_parts.append("".join(value) if isinstance(value, list) else value)
        if output.get("metadata"):
            forms["metadata"] += len(json.dumps(output["metadata"], ensure_ascii=False).encode())
        if output.get("output_type") == "stream":
            forms["stream"] += len(json.dumps(output.get("text", ""), ensure_ascii=False).encode())
    forms["JSON around them"] = outputs - sum(forms.values())
    if case.answer_tail not in "".join(html_parts):
        raise RuntimeError(
            f"{case.name}: the saved outputs lack the answer's last words {case.answer_tail!r}"
        )
    return Saved(outputs, dict(forms), written.rstrip("\n") == text.rstrip("\n"), widgets)


def run_nbclient(path: Path) -> str:
    """Execute like ``jupyter execute`` (from the notebook's folder) and save with nbformat."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        kernel_name="python3",
        timeout=600,
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    saved = path.with_name("saved-nbclient.ipynb")
    nbformat.write(notebook, saved)
    return saved.read_text(encoding="utf-8")


def run_lab(paths: list[Path], home: Path) -> list[str]:
    """Run All and Save in JupyterLab for each notebook; the files as the server wrote them."""
    from _browser import TIMEOUT, cells_done, kernel_idle, lab_pages, menu, notebook_page

    texts = []
    root = home / "lab"
    with lab_pages(root, home) as (lab, browser):
        for path in paths:
            relative = path.relative_to(root).as_posix()
            with notebook_page(lab, browser, relative) as page:
                menu(page.page, "Run", "Run All Cells")
                deadline = time.monotonic() + TIMEOUT
                settled: float | None = None
                while True:
                    if cells_done(page.page) and kernel_idle(page.page):
                        settled = settled or time.monotonic()
                        if time.monotonic() - settled >= 1.0:
                            break
                    else:
                        settled = None
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"Run All did not finish in {relative}")
                    time.sleep(0.1)
                page.save(path)
                texts.append(path.read_text(encoding="utf-8"))
    return texts


def _record(section: Section, case: Case, frontend: str, saved: Saved, quick: bool) -> None:
    text = case.text_bytes
    row = Row(case.name, frontend, unit="x text", scale=1.0)
    row.values.append(saved.outputs / text)
    shares = ", ".join(f"{form} {size / text:.2f}x" for form, size in saved.forms.items())
    row.extra = f"{saved.outputs:,} B saved / {text:,} B of text; {shares}"
    section.rows.append(row)
    section.goal(
        f"saved outputs <= {GOAL:g}x the text of a 20,000-token run: {case.name}, {frontend}",
        None if quick else saved.outputs <= GOAL * text,
        f"{saved.outputs / text:.2f}x" + (" (--quick: a shorter run than the goal's)" * quick),
    )
    if case.results:
        section.notes.append(
            f"{case.name}, {frontend}: the tool results ({case.result_bytes:,} B, not counted "
            f"as the run's text) are saved too: {saved.outputs / (text + case.result_bytes):.2f}x "
            "text + results"
        )
    if not saved.exact:
        section.notes.append(
            f"{case.name}, {frontend}: nbformat does not write the saved file byte for byte; "
            "the figure is measured on nbformat's writing of it"
        )
    if saved.widgets:
        section.notes.append(
            f"{case.name}, {frontend}: {saved.widgets} widget output(s) were saved (a live view "
            "that a reopened notebook cannot show)"
        )


def _missing_rows(section: Section, names: list[str], frontend: str, reason: str) -> None:
    for name in names:
        row = Row(name, frontend, unit="x text", scale=1.0)
        row.status, row.reason = "not installed", reason
        section.rows.append(row)
        section.goal(
            f"saved outputs <= {GOAL:g}x the text of a 20,000-token run: {name}, {frontend}",
            None,
            reason,
        )


def _crash(section: Section, where: str, exc: BaseException) -> None:
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    section.crashes.append(f"saved-size / {where}:\n{trace}")


def measure(quick: bool, section: Section, runs: list[Case], home: Path) -> None:
    """Run each case with nbclient, then (when the browser parts are here) in JupyterLab."""
    from _browser import unavailable

    for number, case in enumerate(runs):
        started = time.perf_counter()
        try:
            path = write_case(case, home / "nbclient" / f"case{number}")
            _record(section, case, NBCLIENT, measure_saved(run_nbclient(path), case), quick)
        except Exception as exc:
            _crash(section, f"{case.name} / {NBCLIENT}", exc)
        section.notes.append(
            f"{case.name}, {NBCLIENT}: executed and saved in {time.perf_counter() - started:.1f} s"
        )
    reason = unavailable()
    if reason is not None:
        _missing_rows(section, [case.name for case in runs], LAB, reason)
        return
    started = time.perf_counter()
    try:
        paths = [write_case(c, home / "lab" / f"case{i}") for i, c in enumerate(runs)]
        for case, text in zip(runs, run_lab(paths, home), strict=True):
            _record(section, case, LAB, measure_saved(text, case), quick)
    except Exception as exc:
        _crash(section, LAB, exc)
    section.notes.append(
        f"{LAB}: both cases run and saved in {time.perf_counter() - started:.1f} s (with the "
        "server's and the browser's start)"
    )


def build(quick: bool) -> Section:
    for name in list(os.environ):  # the kernels see none of the developer's settings or keys
        if name.startswith(("NBAGENT_", "OPENAI_", "ANTHROPIC_")):
            del os.environ[name]
    tokens = 2_000 if quick else 20_000
    section = Section("saved-size", f"9. Saved size of a {tokens:,}-token run vs its text")
    with tempfile.TemporaryDirectory(prefix="nbagent-bench-saved-") as home:
        measure(quick, section, cases(tokens), Path(home))
    return section


if __name__ == "__main__":
    main(build)
