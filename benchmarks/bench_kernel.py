"""The kernel toolkit's own cost per snippet: what run_python adds to a bare ``exec`` of the code.

The namespace holds 1,000 variables (numbers, strings, lists, dicts, small frames) and one 1 GB
DataFrame (``--quick``: 256 MB). Contenders, same code, same namespace, alternating:

* ``exec``: ``exec(compile(code), namespace)``, the floor;
* ``run_python``: the toolkit's tool function, awaited as the loop awaits it: compile, the snapshot
  (references and signatures of every name, fingerprints and undo copies of the names the code
  mentions), the snippet's own thread, the output capture, the diff, the result for the model and
  the person. The agent loop around it is not counted (see benchmark 1).

Cases: a snippet that does not touch the big frame (its cost must not grow with it: no copy, no
hash), and one that edits a 100 MB frame in place (undo copies it first: that copy's cost is the
price of undoing an in-place change, reported). The peak memory the toolkit adds is measured
with tracemalloc (NumPy reports its buffers to it).
"""

from __future__ import annotations

import asyncio
import gc
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from _common import Section, compare, main, median_of

MIN_MEASURE_SECONDS = 0.3


def _namespace(big_bytes: int) -> dict[str, Any]:
    import numpy as np
    import pandas as pd

    namespace: dict[str, Any] = {}
    for i in range(1_000):
        kind = i % 5
        namespace[f"v{i}"] = (
            i
            if kind == 0
            else f"text {i}"
            if kind == 1
            else list(range(i % 50))
            if kind == 2
            else {"k": i, "v": [i]}
            if kind == 3
            else pd.DataFrame({"a": range(10)})
        )
    namespace["big"] = pd.DataFrame({"x": np.zeros(big_bytes // 8)})
    namespace["edited"] = pd.DataFrame({"y": np.arange(100 * 1024 * 1024 // 8, dtype="float64")})
    return namespace


def _toolkit(namespace: dict[str, Any]) -> Callable[[str], float]:
    from nbagent import kernel_tools
    from nbagent.tools import ToolCall, ToolContext

    kit = kernel_tools(namespace)
    run = kit[0]
    calls = iter(range(10**9))
    loop = asyncio.new_event_loop()  # one loop for every snippet, as a kernel has

    def once(code: str) -> float:
        call = ToolCall(f"c{next(calls)}", "run_python", "{}")
        context = ToolContext(call, {"code": code}, run, run_id="bench", step=1)
        assert run.execute is not None
        started = time.perf_counter()
        result = loop.run_until_complete(run.execute(context))  # type: ignore[arg-type]
        elapsed = time.perf_counter() - started
        assert not result.is_error, result.text
        kit.journal.snippets.clear()  # undo copies of earlier rounds are not kept
        return elapsed

    return once


def _exec(namespace: dict[str, Any]) -> Callable[[str], float]:
    def once(code: str) -> float:
        started = time.perf_counter()
        exec(compile(code, "<bench>", "exec"), namespace)
        return time.perf_counter() - started

    return once


def _repeat(measure: Callable[[str], float], code: str) -> Callable[[], float]:
    def run() -> float:
        gc.collect()
        total = 0.0
        count = 0
        while total < MIN_MEASURE_SECONDS or count < 3:
            total += measure(code)
            count += 1
        return total / count

    return run


def _peak(measure: Callable[[str], float], code: str) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        measure(code)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def build(quick: bool) -> Section:
    global MIN_MEASURE_SECONDS
    if quick:
        MIN_MEASURE_SECONDS = 0.05
    big = (256 if quick else 1024) * 1024 * 1024
    section = Section("kernel", "14. Kernel toolkit: cost per snippet above a bare exec")
    namespace = _namespace(big)
    plain, toolkit = _exec(namespace), _toolkit(namespace)
    cases = {
        "does not touch the big frame": "y = v0 + 1\nv2[0] = y",
        "edits a 100 MB frame in place": "edited['y'] += 1",
    }
    rounds = 3 if quick else 7
    for label, code in cases.items():
        compare(
            section,
            label,
            {
                "exec": lambda c=code: _repeat(plain, c),
                "run_python": lambda c=code: _repeat(toolkit, c),
            },
            rounds=rounds,
            reference="exec",
            unit="ms",
            scale=1e3,
        )
    untouched = "does not touch the big frame"
    base = median_of(section.row(untouched, "exec"))
    ours = median_of(section.row(untouched, "run_python"))
    peak = _peak(toolkit, cases[untouched])
    gb = big / 1024**3
    if base is not None and ours is not None:
        above = (ours - base) * 1e3
        section.goal(
            f"under 5 ms above exec per snippet, 1,000 variables and a {gb:g} GB frame it does "
            "not touch",
            above < 5,
            f"{above:.2f} ms above exec",
        )
    section.goal(
        f"no copy of the {gb:g} GB frame: the toolkit's peak memory stays far below it",
        peak < big / 20,
        f"peak {peak / 1024**2:,.1f} MB while the snippet ran",
    )
    edit_base = median_of(section.row("edits a 100 MB frame in place", "exec"))
    edit_ours = median_of(section.row("edits a 100 MB frame in place", "run_python"))
    if edit_base is not None and edit_ours is not None:
        section.notes.append(
            f"editing the 100 MB frame in place costs {(edit_ours - edit_base) * 1e3:,.0f} ms "
            "more than exec: undo's copy of it, taken before the snippet runs "
            "(KernelLimits.copy_budget bounds it), and its fingerprint before and after"
        )
    section.notes.append(
        "run_python includes starting its own thread and the capture of stdout, displays and "
        "figures; the agent loop, approval and the notebook view are not counted"
    )
    return section


if __name__ == "__main__":
    main(build)
