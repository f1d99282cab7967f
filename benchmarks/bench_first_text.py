"""First words of a run in JupyterLab: from Shift-Enter to the run's first text on the page.

A person presses Shift-Enter on an ``%agent`` cell and waits for words. This measures that wait
in JupyterLab in headless Chromium, with a scripted model that streams at once (its first words
at the start, then a word every 20 ms, like a fast real model), so the figure is nbagent's own
cost plus JupyterLab's, never a model's. Both ends use the page's clock: a keydown listener takes
the key press time and a ``MutationObserver``, armed before the press, takes the moment the first
words are in a new visible output of the cell (``performance.now()`` both).

* **fresh kernel**: the first ``%agent`` of a new kernel (the kernel is restarted through the
  server's API each round, then a setup cell loads the extension and sets the model): the
  widgets, the run view and everything they import are made on first use.
* **warm**: a later ``%agent`` in the same kernel.
* **baseline**: Shift-Enter to the output of ``print("x")`` in the same notebook and rounds, so
  a reader can tell nbagent's share from JupyterLab's.

The kernel notes, on its own clock, when each cell starts, when the model yields its first text
and when the run view first sends text: the notes split the wait into nbagent's start-up (cell
start to the model's first delta), the view's coalescing (delta to first send) and the rest
(messages and the browser's rendering). For a fresh kernel, the modules the first run imports are
timed with ``-X importtime`` in a fresh interpreter.

Goals (issue 9): first text <= 0.5 s warm, <= 1.5 s on a fresh kernel.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
from collections import defaultdict
from pathlib import Path

from _common import Row, Section, main

SETUP = """
%load_ext nbagent
import json, sys, time
import nbagent.notebook
from nbagent.generation import TextDelta
from nbagent.models import ScriptedModel, Text, Turn

# Benchmark probes, on the kernel's clock: cell start, the model's first text, the view's first
# send of text. Nothing here imports what the first run would import.
_bench = {{"runs": 0}}

def _bench_cell_started(info):
    _bench["cell"] = time.perf_counter()

def _bench_patch():  # at the first run's first text, when the view's modules are loaded
    stream = sys.modules.get("nbagent.notebook.live.stream")
    if stream is None or getattr(stream.TextStream.flush, "bench", False):
        return
    original = stream.TextStream.flush
    def flush(self, *args, **kwargs):  # finish() passes everything=True
        sent = original(self, *args, **kwargs)
        if sent and "sent" not in _bench:
            _bench["sent"] = time.perf_counter()
        return sent
    flush.bench = True
    stream.TextStream.flush = flush

def _bench_cell_ended(result):
    if "delta" not in _bench:
        return
    record = {{
        "fresh": _bench["fresh"],
        "start_to_delta": _bench["delta"] - _bench["cell"],
        "delta_to_sent": _bench["sent"] - _bench["delta"] if "sent" in _bench else None,
    }}
    if _bench["fresh"]:
        record["imported"] = [m for m in _bench["loaded"] if m not in _bench["setup"]]
    with open({log!r}, "a") as log:
        log.write(json.dumps(record) + "\\n")
    for key in ("delta", "sent", "loaded"):
        _bench.pop(key, None)

class TimedModel(ScriptedModel):
    async def stream(self, request):
        async for event in super().stream(request):
            if isinstance(event, TextDelta) and "delta" not in _bench:
                _bench["delta"] = time.perf_counter()
                _bench["fresh"] = _bench["runs"] == 0
                _bench["runs"] += 1
                if _bench["fresh"]:
                    _bench["loaded"] = list(sys.modules)
                _bench_patch()
            yield event

get_ipython().events.register("pre_run_cell", _bench_cell_started)
get_ipython().events.register("post_run_cell", _bench_cell_ended)
_rest = {rest!r}
nbagent.notebook.current_session().set_model(
    TimedModel([Turn(Text({marker!r}), Text(_rest, chunks=60))] * 100, chunk_delay=0.02)
)
_bench["setup"] = set(sys.modules)  # what the first run imports is what comes after this
"""

MARKER = "Sunrise"
REST = (
    " over the harbour: the first boats slip out past the breakwater while gulls argue over the "
    "nets, the fish market opens its shutters, a baker carries trays of bread along the quay, "
    "and the lighthouse keeper, done with the night, walks home along the sea wall as the tide "
    "turns and the water goes from grey to silver to a clear, cold blue."
)
BASELINE = 'print("x")'
PROMPT = "describe the harbour at dawn"
CELLS: list[str | tuple[str, str]] = [
    "",  # the setup, filled in per run (it names the probe's log file)
    BASELINE,
    f"%agent {PROMPT}",
    ("markdown", "Shift-Enter on the last code cell lands here instead of adding a cell."),
]
GOAL_WARM = 0.5
GOAL_FRESH = 1.5
FRESH, WARM = "fresh kernel", "warm kernel"
CASES = (FRESH, WARM)
AGENT_ROW, BASE_ROW = "%agent: first text", 'print("x"): output'
VIEW_ROW = "%agent: its view appears"
START_ROW = "kernel: cell start -> model's first text"
SENT_ROW = "kernel: model's first text -> view sends it"


def _row(section: Section, label: str, contender: str, reference: str = "") -> Row:
    row = Row(label, contender, unit="ms", scale=1e3, reference=reference)
    section.rows.append(row)
    return row


def _not_measured(section: Section, reason: str) -> None:
    for label in CASES:
        for contender in (AGENT_ROW, VIEW_ROW, BASE_ROW):
            row = _row(section, label, contender)
            row.status, row.reason = "not installed", reason
    _goals(section, None, None, reason)


def _goals(section: Section, warm: float | None, fresh: float | None, reason: str = "") -> None:
    for goal, value, label in ((GOAL_WARM, warm, "warm"), (GOAL_FRESH, fresh, "fresh kernel")):
        section.goal(
            f"first text of a run <= {goal} s after Shift-Enter ({label}, JupyterLab)",
            None if value is None else value <= goal,
            reason if value is None else f"median {value * 1e3:,.0f} ms",
        )


def measure(quick: bool, section: Section, home: Path) -> None:
    """Drive the rounds in JupyterLab (server and notebook under ``home``) and fill ``section``."""
    from _browser import lab_pages, notebook_page, write_notebook

    rounds, warm_per_round = (2, 1) if quick else (7, 2)
    work = home / "work"
    work.mkdir()
    log = work / "probes.jsonl"
    cells = list(CELLS)
    setup = SETUP.format(log=str(log), marker=MARKER, rest=REST)
    cells[0] = textwrap.dedent(setup).strip()
    write_notebook(work / "first_text.ipynb", cells)

    rows = {
        (label, who): _row(section, label, who, BASE_ROW)
        for label in CASES
        for who in (AGENT_ROW, VIEW_ROW, BASE_ROW)
    }
    where: dict[str, int] = defaultdict(int)
    shares: dict[str, list[float]] = defaultdict(list)
    first_round_fresh = None
    with (
        lab_pages(work, home) as (lab, browser),
        notebook_page(lab, browser, "first_text.ipynb") as page,
    ):
        section.notes.append(f"{_versions()}, Chromium {browser.version} (headless)")
        for index in range(rounds):
            page.restart_kernel()
            page.run(0)  # setup: %load_ext, the probes, the model
            if page.prompt(0) != "[1]:":  # the first cell of a new kernel
                raise RuntimeError(f"the kernel was not restarted: setup ran as {page.prompt(0)}")
            for label in [FRESH] + [WARM] * warm_per_round:
                base = page.run(1, {"text": "x"}).after_key("text")
                run = page.run(2, {"view": PROMPT, "text": MARKER})
                text = run.after_key("text")
                measured = ((BASE_ROW, base), (AGENT_ROW, text), (VIEW_ROW, run.after_key("view")))
                for who, value in measured:
                    rows[label, who].values.append(value)
                    rows[label, who].ratios.append(value / base)
                shares[label].append(text - base)
                where[run.where["text"]] += 1
                if index == 0 and label == FRESH:
                    first_round_fresh = text
    for label in CASES:
        if shares[label]:
            rows[label, AGENT_ROW].extra = (
                f"nbagent's share (minus the baseline, paired): "
                f"{statistics.median(shares[label]) * 1e3:,.0f} ms"
            )
    fresh = statistics.median(rows[FRESH, AGENT_ROW].values)
    warm = statistics.median(rows[WARM, AGENT_ROW].values)
    _goals(section, warm, fresh)
    if where.keys() - {"live"}:
        section.notes.append(
            f"where the first words appeared: {dict(where)} (live = the streaming widget; "
            "static = only once the run had ended, i.e. the live view showed nothing)"
        )
    if first_round_fresh is not None:
        section.notes.append(
            f"round 1 (the first run this page ever showed) took {first_round_fresh * 1e3:,.0f} "
            "ms to its first text; later fresh rounds had the widget code loaded in the page"
        )
    _kernel_notes(section, log)


def _versions() -> str:
    import importlib.metadata

    names = ("jupyterlab", "ipykernel", "ipywidgets", "anywidget", "playwright")
    return ", ".join(f"{name} {importlib.metadata.version(name)}" for name in names)


def _kernel_notes(section: Section, log: Path) -> None:
    """Where the time goes, from the kernel probes' log: two rows per case, and a note that
    puts them beside what the page saw."""
    if not log.exists():
        section.notes.append("the kernel probes wrote nothing: no kernel-side breakdown")
        return
    records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    groups = {
        FRESH: [r for r in records if r["fresh"]],
        WARM: [r for r in records if not r["fresh"]],
    }
    for label, mine in groups.items():
        if not mine:
            continue
        start = _row(section, label, START_ROW)
        start.values = [r["start_to_delta"] for r in mine]
        sent = _row(section, label, SENT_ROW)
        sent.values = [r["delta_to_sent"] for r in mine if r["delta_to_sent"] is not None]
        total, view = section.row(label, AGENT_ROW), section.row(label, VIEW_ROW)
        if not (total and total.values and view and view.values and sent.values):
            continue
        rest = total.median - start.median - sent.median
        section.notes.append(
            f"{label}: the run's view (its header) showed at {view.median * 1e3:,.0f} ms and "
            f"its first words at {total.median * 1e3:,.0f} ms; in the kernel, "
            f"{start.median * 1e3:,.0f} ms went before the model's first text (the magic, the "
            "agent, the view's widgets"
            + (", the first run's imports" if label == FRESH else "")
            + f") and the view held the text {sent.median * 1e3:,.0f} ms; about "
            f"{rest * 1e3:,.0f} ms remain for the request, the messages and the page's rendering"
        )
    section.notes.append(f"the view's coalescing: {_coalescing()}")
    if groups[FRESH] and groups[FRESH][0].get("imported"):
        section.notes.append(_import_profile(groups[FRESH][0]["imported"]))


def _coalescing() -> str:
    """How the run view batches text, in its own constants."""
    try:
        from nbagent.notebook.live import view
    except ImportError as exc:
        return f"the run view's coalescing (unreadable here: {exc})"
    return (
        f"the run view sends text at most every {view.INTERVAL:g} s and, below "
        f"{view.MIN_CHARS} new characters, waits up to {view.MAX_WAIT:g} s for more"
    )


PROFILE = """
import importlib, sys
import ipykernel.ipkernel, IPython, nbagent, nbagent.notebook, nbagent.models, nbagent.agent
sys.stderr.write("@@BENCH-MARK@@\\n")
for name in {names!r}:
    try:
        importlib.import_module(name)
    except Exception:
        pass
"""


def _import_profile(names: list[str], runs: int = 5, top: int = 8) -> str:
    """``-X importtime`` of the modules the first run imported, after what the setup imports:
    the median of ``runs`` fresh interpreters, per package (one run drifts too much here)."""
    samples: dict[str, list[int]] = defaultdict(list)
    totals = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", PROFILE.format(names=names)],
            capture_output=True,
            text=True,
            check=False,
            cwd="/",
        )
        groups: dict[str, int] = defaultdict(int)
        for line in done.stderr.split("@@BENCH-MARK@@", 1)[-1].splitlines():
            if not line.startswith("import time:") or "self [us]" in line:
                continue
            _, own, _, name = line.split("|")[0:1] + line.split("|")
            key = name.strip()
            key = key if key.startswith("nbagent") else key.split(".")[0]
            groups[key] += int(own.split(":")[-1])
        totals.append(sum(groups.values()))
        for key, own_us in groups.items():
            samples[key].append(own_us)
    medians = {k: statistics.median(got + [0] * (runs - len(got))) for k, got in samples.items()}
    ranked = sorted(medians.items(), key=lambda item: item[1], reverse=True)[:top]
    return (
        f"the first run of a fresh kernel imports {len(names)} modules: "
        f"{statistics.median(totals) / 1000:,.0f} ms of import time in a fresh interpreter "
        f"(-X importtime, median of {runs}; own time by package): "
        + "; ".join(f"{name} {us / 1000:.0f} ms" for name, us in ranked)
    )


def build(quick: bool) -> Section:
    from _browser import unavailable

    section = Section("first-text", "8. First text of a run in JupyterLab (Shift-Enter to words)")
    reason = unavailable()
    if reason is not None:
        _not_measured(section, reason)
        return section
    started = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="nbagent-bench-first-text-") as home:
            measure(quick, section, Path(home))
    except Exception as exc:
        trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        section.crashes.append(f"first-text / JupyterLab:\n{trace}")
        if not section.goals:
            _goals(section, None, None, f"crashed: {type(exc).__name__}: {exc}")
    section.notes.append(f"the whole benchmark took {time.perf_counter() - started:,.0f} s")
    return section


if __name__ == "__main__":
    main(build)
