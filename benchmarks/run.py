"""Run every benchmark and print one report: ratios against peers measured in the same run.

    .venv/bin/python benchmarks/run.py            # full run (several minutes)
    .venv/bin/python benchmarks/run.py --quick    # CI smoke, well under a minute
    .venv/bin/python benchmarks/run.py --only loop,streaming --markdown out.md

Each benchmark runs in its own fresh interpreter (no shared imports, caches or GC state) and
hands its results back as JSON. A peer that is not installed is reported as such, with the
reason; a contender that crashes makes this command exit non-zero after printing everything.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from _common import JSON_MARK, Section, render

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

BENCHMARKS = [
    ("loop", "bench_loop.py"),
    ("streaming", "bench_streaming.py"),
    ("notebook", "notebook_traffic.py"),
    ("schema", "bench_schema.py"),
    ("startup", "bench_startup.py"),
    ("concurrency", "bench_concurrency.py"),
    ("event_path", "bench_event_path.py"),
    ("first-text", "bench_first_text.py"),
    ("saved-size", "bench_saved_size.py"),
    ("recording", "bench_recording.py"),
    ("batch", "bench_batch.py"),
    ("serve", "bench_serve.py"),
    ("local", "bench_local.py"),
    ("long_stream", "bench_long_stream.py"),
    ("kernel", "bench_kernel.py"),
    ("undo", "bench_undo.py"),
    ("nested", "bench_nested.py"),
    ("class-report", "bench_class_report.py"),
    ("notebook-edits", "bench_notebook.py"),
    ("acp", "bench_acp.py"),
]
# --quick for a benchmark with its own command line (flag -> arguments), used when it has the flag.
QUICK_ARGS = {"notebook_traffic.py": ("--tokens", ["--tokens", "2000", "--rate", "1000"])}
PACKAGES = [
    "nbagent",
    "pydantic-ai-slim",
    "openai-agents",
    "openai",
    "anthropic",
    "httpx2",
    "jsonschema",
    "jsonschema-rs",
    "ipywidgets",
    "ipykernel",
    "ipython",
    "anywidget",
    "nbclient",
    "jupyterlab",
    "playwright",
    "xllamacpp",
]


def machine() -> list[str]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        cpu = platform.processor() or "unknown"
    versions = []
    for name in PACKAGES:
        try:
            versions.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{name} (not installed)")
    now = datetime.datetime.now(datetime.timezone.utc).astimezone()
    return [
        f"- date: {now:%a %d %b %Y %H:%M:%S %Z}",
        f"- machine: {os.cpu_count()} CPUs (nproc), {cpu}, {platform.platform()}",
        f"- python: {platform.python_version()} ({platform.python_implementation()})",
        f"- packages: {', '.join(versions)}",
    ]


def run_one(key: str, script: str, quick: bool) -> tuple[Section, float]:
    path = HERE / script
    if not path.exists():
        section = Section(key, f"{key}: {script}")
        section.notes.append(
            f"benchmarks/{script} does not exist yet (it is written with the notebook front "
            "end): nothing measured"
        )
        return section, 0.0
    source = path.read_text()
    ours = "from _common import" in source  # speaks --quick / --json through _common.main
    args = [sys.executable, str(path)]
    if quick and (ours or "--quick" in source):
        args.append("--quick")
    elif quick and script in QUICK_ARGS and QUICK_ARGS[script][0] in source:
        args += QUICK_ARGS[script][1]
    if ours:
        args.append("--json")
    started = time.perf_counter()
    limit = 300 if quick else 1800
    try:
        done = subprocess.run(
            args, cwd=ROOT, capture_output=True, text=True, check=False, timeout=limit
        )
    except subprocess.TimeoutExpired as exc:
        section = Section(key, f"{key}: {script}")
        output = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
        section.crashes.append(f"{script} did not finish within {limit} s\n{output[-4000:]}")
        return section, time.perf_counter() - started
    elapsed = time.perf_counter() - started
    if JSON_MARK in done.stdout:
        section = Section.from_json(done.stdout.split(JSON_MARK, 1)[1].strip())
    else:  # a benchmark with its own output format: show what it printed
        section = Section(key, f"{key}: {script}" + (f" {' '.join(args[2:])}" if args[2:] else ""))
        if done.stdout.strip():
            section.notes.append("output:\n\n```\n" + done.stdout.strip() + "\n```")
        for line in done.stdout.splitlines():  # "goal <text>: met" / "goal <text>: NOT met"
            if line.startswith("goal ") and ":" in line:
                text, _, verdict = line[5:].rpartition(":")
                section.goal(text.strip(), verdict.strip().lower() == "met")
    if done.returncode != 0 and not section.crashes:
        section.crashes.append(
            f"{script} exited with status {done.returncode}:\n{done.stderr.strip()[-4000:]}"
        )
    return section, elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="CI smoke: fewer, shorter rounds")
    parser.add_argument(
        "--only", default="", help="comma-separated: " + ", ".join(key for key, _ in BENCHMARKS)
    )
    parser.add_argument("--markdown", type=Path, help="also write the report to this file")
    args = parser.parse_args()
    chosen = [item for item in BENCHMARKS if not args.only or item[0] in args.only.split(",")]
    started = time.perf_counter()
    report = [
        "## nbagent benchmarks" + (" (--quick)" if args.quick else ""),
        "",
        *machine(),
        "",
        "Per-unit figures: median [min-max] (n < 5) or [IQR] (n >= 5) over rounds with the",
        "contenders alternating; a ratio is the median of per-round ratios to the reference",
        "measured in the same round (> 1: slower than the reference).",
        "",
    ]
    crashes: list[str] = []
    goals: list[str] = []
    for key, script in chosen:
        print(f"== {key} ...", file=sys.stderr, flush=True)
        section, elapsed = run_one(key, script, args.quick)
        print(f"   {key} took {elapsed:.1f} s", file=sys.stderr, flush=True)
        report += [render(section), ""]
        crashes += section.crashes
        for goal in section.goals:
            mark = {True: "MET", False: "MISSED", None: "NOT MEASURED"}[goal.met]
            goals.append(f"- {mark}: {goal.text}" + (f" ({goal.detail})" if goal.detail else ""))
    total = time.perf_counter() - started
    report += ["### Goals", "", *goals, "", f"Total wall time: {total:.1f} s", ""]
    text = "\n".join(report)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    if crashes:
        print(f"\n{len(crashes)} contender(s) crashed: see CRASH above", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
