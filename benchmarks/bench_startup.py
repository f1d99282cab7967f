"""Start-up cost: ``import nbagent`` and ``%load_ext nbagent`` beside importing the peers.

Each import runs in a fresh interpreter (``python -c "import X"``) and is paired with a bare
``python -c pass`` in the same measurement: the figure is the difference, i.e. what the import
adds. ``%load_ext nbagent`` is timed inside a fresh interpreter around
``InteractiveShell.instance().run_line_magic("load_ext", "nbagent")`` (nbagent not yet imported,
so it includes the import). Goals: import < 100 ms above bare, load_ext < 600 ms.

When run, ``-X importtime`` of ``import nbagent`` is summarized: which packages cost what.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from _common import NotInstalled, Section, compare, fmt, main, median_of

PYTHON = sys.executable
ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
ENV.pop("PYTHONPATH", None)
WARM_UP = True  # --quick: no separate warm-up run (the rotated rounds spread the cold one)

FIRST_AGENT = """
import nbagent
async def noop(ctx):
    return "ok"
nbagent.Agent("offline", [nbagent.Tool(name="noop", input_schema={"type": "object"}, execute=noop)])
"""
# What-if for the fix proposed in the notes: jsonschema imports rfc3987_syntax (an optional
# format checker, present wherever jupyter-events is) inside `suppress(ImportError)`; it builds a
# lark grammar at import (~1 s). nbagent treats `format` as an annotation, so it never needs it.
BLOCKED = "import sys; sys.modules['rfc3987_syntax'] = None\n"

LOAD_EXT = """
import time
from IPython.core.interactiveshell import InteractiveShell
ip = InteractiveShell.instance()
started = time.perf_counter()
ip.run_line_magic("load_ext", "nbagent")
print(time.perf_counter() - started)
"""


def _run(code: str) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [PYTHON, "-c", code], cwd="/", env=ENV, capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"python -c {code!r} failed:\n{done.stderr[-2000:]}")
    return elapsed


def import_setup(
    module: str, package: str, code: str | None = None
) -> Callable[[], Callable[[], float]]:
    def setup() -> Callable[[], float]:
        if importlib.util.find_spec(module) is None:
            raise NotInstalled(f"{package} is not installed (no module {module!r})")

        def measure() -> float:
            bare = _run("pass")
            return max(0.0, _run(code or f"import {module}") - bare)

        if WARM_UP:
            measure()  # warm the OS file cache and the bytecode caches
        return measure

    return setup


def load_ext_setup() -> Callable[[], float]:
    if (
        importlib.util.find_spec("nbagent.notebook") is None
        or not (ROOT / "nbagent" / "notebook" / "__init__.py").exists()
    ):
        raise NotInstalled("nbagent/notebook does not exist yet: %load_ext cannot be timed")
    if importlib.util.find_spec("IPython") is None:
        raise NotInstalled("IPython is not installed")

    def measure() -> float:
        done = subprocess.run(
            [PYTHON, "-c", LOAD_EXT], cwd="/", env=ENV, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"%load_ext nbagent failed:\n{done.stderr[-2000:]}")
        return float(done.stdout.strip().splitlines()[-1])

    if WARM_UP:
        measure()
    return measure


def importtime_summary(module: str = "nbagent", top: int = 8) -> list[str]:
    """Own import time of ``module``'s dependencies grouped by top-level package (``-X
    importtime``), largest first; nbagent's own modules are listed one by one."""
    done = subprocess.run(
        [PYTHON, "-X", "importtime", "-c", f"import {module}"],
        cwd="/",
        env=ENV,
        capture_output=True,
        text=True,
        check=False,
    )
    groups: dict[str, int] = defaultdict(int)
    total = 0
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        _, own, _, name = (part.strip() for part in line.split("|", 1)[0:1] + line.split("|"))
        own_us = int(own.split(":")[-1])
        name = name.strip()
        key = name if name.startswith("nbagent") else name.split(".")[0]
        groups[key] += own_us
        total += own_us
    ranked = sorted(groups.items(), key=lambda item: item[1], reverse=True)[:top]
    return [f"total {total / 1000:.0f} ms own time"] + [
        f"{name} {us / 1000:.1f} ms" for name, us in ranked
    ]


def build(quick: bool) -> Section:
    global WARM_UP
    WARM_UP = not quick
    section = Section("startup", "5. Start-up: import / %load_ext wall time (above bare python)")
    rounds = 3 if quick else 15
    peer_rounds = 2 if quick else 10
    contenders = {
        "import nbagent": import_setup("nbagent", "nbagent"),
        "import nbagent + first Agent(tools)": import_setup("nbagent", "nbagent", FIRST_AGENT),
        "same, rfc3987_syntax blocked (fix)": import_setup(
            "nbagent", "nbagent", BLOCKED + FIRST_AGENT
        ),
        "import pydantic_ai": import_setup("pydantic_ai", "pydantic-ai-slim"),
        "import openai": import_setup("openai", "openai"),
        "import jsonschema": import_setup("jsonschema", "jsonschema"),
        "import ipywidgets": import_setup("ipywidgets", "ipywidgets"),
        "%load_ext nbagent": load_ext_setup,
    }
    compare(
        section,
        "start-up",
        contenders,
        rounds=rounds,
        reference="import nbagent",
        unit="ms",
        scale=1e3,
        rounds_for={
            "import nbagent + first Agent(tools)": peer_rounds,
            "same, rfc3987_syntax blocked (fix)": peer_rounds,
            "import pydantic_ai": peer_rounds,
            "import openai": peer_rounds,
            "import jsonschema": peer_rounds,
            "%load_ext nbagent": peer_rounds,
        },
    )
    imported = median_of(section.row("start-up", "import nbagent"))
    section.goal(
        "import nbagent < 100 ms above a bare interpreter",
        None if imported is None else imported < 0.100,
        f"{fmt(None if imported is None else imported * 1e3)} ms",
    )
    loaded_row = section.row("start-up", "%load_ext nbagent")
    loaded = median_of(loaded_row)
    section.goal(
        "%load_ext nbagent < 600 ms",
        None if loaded is None else loaded < 0.600,
        f"{fmt(loaded * 1e3)} ms"
        if loaded is not None
        else (loaded_row.reason if loaded_row else ""),
    )
    section.notes.append(
        "import nbagent, -X importtime own time by package: " + "; ".join(importtime_summary())
    )
    first = median_of(section.row("start-up", "import nbagent + first Agent(tools)"))
    fixed = median_of(section.row("start-up", "same, rfc3987_syntax blocked (fix)"))
    if first is not None and fixed is not None:
        section.notes.append(
            f"the first Agent with a tool (first compile_schema -> import jsonschema) costs "
            f"{first * 1e3:,.0f} ms after python starts; with rfc3987_syntax kept out of "
            f"jsonschema's optional format checkers, {fixed * 1e3:,.0f} ms"
        )
    return section


if __name__ == "__main__":
    main(build)
