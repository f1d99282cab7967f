"""Diff, undo and ``%agent cells`` in a real kernel: their cost per name must not grow with N.

One fresh kernel per size (10^3, 10^4, 10^5 names; ``--quick``: 10^3 and 10^4). Its namespace
holds N numbers ``v0 … v{N-1}``; a scripted model asks for one ``run_python`` snippet that rebinds
every one of them (``globals()[f"v{i}"] = -i - 1`` in a loop), with ``--approve auto``. Each round,
in every kernel (the order rotating), timed from the client as a person waits for the cell:

* ``exec``: a plain cell running the same loop (the floor: the snippet itself);
* ``run (diff)``: the ``%agent --kernel`` cell: the snippet, the snapshot and the diff of N names,
  the card and the result, the loop; minus nothing (``exec`` is beside it);
* ``cells``: ``%agent cells`` (every run's code, as a new cell);
* ``undo``: ``%agent undo`` (N names put back, each checked first).

Reported in microseconds per name. Before the fix undo rescanned the namespace for every name
(2,000 / 4,000 / 8,000 names: 0.95 / 4 / 17 s; 10^5 did not end in 30 s). **Goal:** per name, 10^5
within 1.5x of 10^4 for the run, undo and cells (linear), each round paired.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import Row, Section, main

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CASES = ("exec", "run (diff)", "cells", "undo")


def _kernel(spec: Path) -> Any:
    from tests.notebook.conftest import kernel_env, start_kernel

    kernel = start_kernel(sys.executable, spec, kernel_env())
    kernel.execute(
        "%load_ext nbagent\nimport nbagent, nbagent.notebook\n"
        "from nbagent.models import ScriptedModel, Call, Turn\n"
        "model = ScriptedModel([])\nnbagent.notebook.current_session().set_model(model)"
    )
    return kernel


def _timed(kernel: Any, code: str) -> float:
    started = time.perf_counter()
    kernel.execute(code, timeout=600)
    return time.perf_counter() - started


def _round(kernel: Any, n: int) -> dict[str, float]:
    loop = f"for i in range({n}):\n    globals()[f'v{{i}}'] = -i - 1"
    kernel.execute(f"for i in range({n}):\n    globals()[f'v{{i}}'] = i")
    seconds = {"exec": _timed(kernel, loop)}
    kernel.execute(f"for i in range({n}):\n    globals()[f'v{{i}}'] = i")
    kernel.execute(f"model.add(Turn(Call('run_python', {{'code': {loop!r}}})), 'done')")
    seconds["run (diff)"] = _timed(kernel, "%agent --new --kernel --approve auto rebind them")
    if kernel.eval("v7") != -8:
        raise RuntimeError("the snippet did not rebind the names")
    seconds["cells"] = _timed(kernel, "%agent cells")
    seconds["undo"] = _timed(kernel, "%agent undo")
    if kernel.eval("v7") != 7 or kernel.eval(f"v{n - 1}") != n - 1:
        raise RuntimeError("undo did not put the names back")
    kernel.execute("nbagent.notebook.current_session().kernel.journal.snippets.clear()")
    return seconds


def build(quick: bool) -> Section:
    sizes = [1_000, 10_000] if quick else [1_000, 10_000, 100_000]
    rounds = 2 if quick else 5
    section = Section("undo", "15. Diff, undo and cells with many names, in a real kernel")
    rows = {
        (case, n): Row(case, f"{n:,} names", unit="us per name", reference=f"{sizes[0]:,} names")
        for case in CASES
        for n in sizes
    }
    section.rows.extend(rows.values())
    kernels: dict[int, Any] = {}
    try:
        with tempfile.TemporaryDirectory() as spec:
            for n in sizes:
                kernels[n] = _kernel(Path(spec) / str(n))
            for index in range(rounds):
                order = sizes[index % len(sizes) :] + sizes[: index % len(sizes)]
                if index % 2:
                    order.reverse()
                measured = {n: _round(kernels[n], n) for n in order}
                for case in CASES:
                    base = measured[sizes[0]][case] / sizes[0]
                    for n in sizes:
                        row = rows[(case, n)]
                        row.values.append(measured[n][case] / n)
                        row.ratios.append(measured[n][case] / n / base)
    finally:
        for kernel in kernels.values():
            kernel.shutdown()
    big, mid = sizes[-1], sizes[-2]
    for case in ("run (diff)", "undo", "cells"):
        pairs = [
            a / b for a, b in zip(rows[(case, big)].values, rows[(case, mid)].values, strict=True)
        ]
        growth = statistics.median(pairs)
        total = statistics.median(rows[(case, big)].values) * big
        section.goal(
            f"{case}: per name at {big:,} names within 1.5x of {mid:,} (linear)"
            if not quick
            else f"{case}: per name at {big:,} names within 1.5x of {mid:,} (linear; --quick)",
            growth <= 1.5,
            f"{growth:.2f}x paired; {total:.2f} s for the {big:,} names",
        )
    section.notes.append(
        "times are the client's, from sending the cell to its reply: what a person waits for; "
        "'run (diff)' includes the snippet itself (see 'exec' beside it), the agent loop and "
        "the card"
    )
    return section


if __name__ == "__main__":
    main(build)
