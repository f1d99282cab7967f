"""The class report over 200 submitted notebooks, with their recordings: time and peak memory.

200 notebooks from ``nbagent.course._samples.write_samples`` (100 students, a homework and an
exam each; the flagged kinds among them), each homework given a 150 KB figure output as a lesson
with a plot has, and every run's recording beside it. Contenders, alternating, each over all the
notebooks: ``json.load`` of every file (the floor: parsing alone, no checks), and
``read_class`` (the bounded strict read, the scan of every cell, the provenance reader, the
recordings' digests and answers) plus the CSV and HTML written. The command line
(``python -m nbagent report``, a fresh interpreter) is timed too, once per round.

Peak memory (``tracemalloc``) over the whole report, at 50 and at 200 notebooks: bounded per file
means the peak does not grow with the number of notebooks; and for one notebook just under the
size limit, the peak over its size.

Goals (issue 28): the 200-notebook report under 10 s on this machine; its peak memory at 200
notebooks within 1.5x of that at 50; one file's peak under 6x the size limit.
"""

from __future__ import annotations

import base64
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from _common import Row, Section, compare, main, median_of

ROOT = Path(__file__).resolve().parent.parent
FIGURE = base64.b64encode(os.urandom(110_000)).decode()  # ~150 KB, as a saved PNG output


def _submissions(folder: Path, notebooks: int) -> list[Path]:
    from nbagent.course._samples import write_samples

    samples = write_samples(folder, notebooks // 2, policy=b"[course]\n")
    for sample in samples:
        if sample.flag == "unreadable" or sample.path.name != "homework-1.ipynb":
            continue
        nb = json.loads(sample.path.read_text())
        nb["cells"].append(
            {"cell_type": "code", "execution_count": 3, "id": "plot", "metadata": {},
             "source": "monthly.plot()",
             "outputs": [{"output_type": "display_data", "metadata": {},
                          "data": {"image/png": FIGURE, "text/plain": "<Figure>"}}]}
        )  # fmt: skip
        sample.path.write_text(json.dumps(nb, indent=1))
    paths = [s.path for s in samples]
    while len(paths) < notebooks:  # the broken file has no exam beside it: one more homework
        extra = folder / f"student-extra-{len(paths)}" / "homework-1.ipynb"
        extra.parent.mkdir()
        extra.write_bytes(paths[-1].read_bytes())
        paths.append(extra)
    return paths


def _floor(paths: list[Path]) -> float:
    gc.collect()
    started = time.perf_counter()
    for path in paths:
        try:
            with path.open(encoding="utf-8") as file:
                json.load(file)
        except ValueError:
            pass
    return time.perf_counter() - started


def _report(folder: Path, out: Path) -> float:
    from nbagent.course import read_class, write_csv, write_html

    gc.collect()
    started = time.perf_counter()
    rows = read_class([folder])
    write_csv(rows, out / "r.csv")
    write_html(rows, out / "r.html")
    return time.perf_counter() - started


def _cli(folder: Path, out: Path) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "nbagent", "report", str(folder),
         "--csv", str(out / "c.csv"), "--html", str(out / "c.html")],
        check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    return time.perf_counter() - started


def _peak(folder: Path, out: Path) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        _report(folder, out)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _big_file_peak(folder: Path) -> tuple[int, int]:
    from nbagent.course import read_class
    from nbagent.course._submissions import MAX_NOTEBOOK_BYTES

    path = folder / "big" / "hw.ipynb"
    path.parent.mkdir(parents=True)
    blob = "x" * (MAX_NOTEBOOK_BYTES - 1000)
    cell = {"cell_type": "markdown", "id": "m", "metadata": {}, "source": blob}
    path.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4,
                                "nbformat_minor": 5}))  # fmt: skip
    del blob, cell
    gc.collect()
    tracemalloc.start()
    try:
        read_class([folder])
        return tracemalloc.get_traced_memory()[1], path.stat().st_size
    finally:
        tracemalloc.stop()


def build(quick: bool) -> Section:
    section = Section("class-report", "16. The class report: 200 submitted notebooks")
    rounds = 2 if quick else 5
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        folder, small, out = base / "subs", base / "subs50", base / "out"
        out.mkdir()
        paths = _submissions(folder, 200)
        _submissions(small, 50)
        size = sum(p.stat().st_size for p in paths)
        label = f"{len(paths)} notebooks ({size / 2**20:.1f} MiB), whole report"
        compare(
            section,
            label,
            {
                "json.load (floor)": lambda: lambda: _floor(paths),
                "read_class + CSV + HTML": lambda: lambda: _report(folder, out),
                "python -m nbagent report": lambda: lambda: _cli(folder, out),
            },
            rounds=rounds,
            reference="json.load (floor)",
            unit="s",
            scale=1.0,
        )
        whole = median_of(section.row(label, "python -m nbagent report"))
        section.goal(
            "the 200-notebook report under 10 s (the command, interpreter start included)",
            None if whole is None else whole < 10,
            "not measured" if whole is None else f"{whole:.2f} s",
        )
        peak_small, peak_large = _peak(small, out), _peak(folder, out)
        for name, peak in (("50 notebooks", peak_small), ("200 notebooks", peak_large)):
            row = Row("peak memory (tracemalloc)", name, unit="MiB", scale=1 / 2**20)
            row.values = [float(peak)]
            section.rows.append(row)
        growth = peak_large / peak_small
        section.goal(
            "peak memory at 200 notebooks within 1.5x of 50 (bounded per file, not per class)",
            growth <= 1.5,
            f"{peak_small / 2**20:.1f} -> {peak_large / 2**20:.1f} MiB ({growth:.2f}x)",
        )
        peak, big = _big_file_peak(base / "big")
        section.goal(
            "one notebook at the size limit: peak under 6x its size",
            peak < 6 * big,
            f"{peak / 2**20:.0f} MiB for a {big / 2**20:.0f} MiB file ({peak / big:.1f}x)",
        )
    section.notes.append(
        "generated samples (nbagent.course._samples), 2-4 runs per homework with recordings, "
        "one exam each; the floor parses each file with json.load and checks nothing"
    )
    return section


if __name__ == "__main__":
    main(build)
