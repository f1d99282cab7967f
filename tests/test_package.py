"""The package surface: pinned exports, no front-end imports in the core, typed."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import nbagent
from nbagent._surface.names import _LAZY


def test_public_names_are_pinned() -> None:
    assert nbagent.__all__ == sorted(nbagent.__all__, key=str)
    for name in nbagent.__all__:
        assert hasattr(nbagent, name), name
    assert {"Agent", "tool", "Tool", "Definition", "compile_schema", "ScriptedModel"} <= set(
        nbagent.__all__
    )
    # what a person writes in code (docs/howto/step.md, rules.md, lesson 12) comes from nbagent
    assert {"next_step", "run_to_end", "stop_run", "Resume", "compare", "parse_rule"} <= set(
        nbagent.__all__
    )


def test_the_face_s_table_and_what_type_checkers_read_agree() -> None:
    """nbagent/_surface/names.py says each lazy name twice: an import for type checkers (never
    run) and the table ``__getattr__`` loads it by. A name in one and not the other is either
    unloadable or untyped."""
    source = Path(nbagent.__file__).parent / "_surface" / "names.py"
    typed = {}
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            for alias in node.names:
                assert alias.asname == alias.name, f"{alias.name}: import it as itself"
                typed[alias.name] = (node.module or "").removeprefix(".")
    assert typed == _LAZY
    for name, module in _LAZY.items():
        assert getattr(nbagent, name) is getattr(importlib.import_module(f"nbagent.{module}"), name)


def test_import_does_not_pull_in_front_ends_or_http() -> None:
    code = (
        "import sys, nbagent\n"
        "bad = [m for m in ('IPython', 'ipywidgets', 'httpx2', 'httpx', 'ipykernel',"
        " 'jsonschema', 'PIL', 'asyncio') if m in sys.modules]\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_typed_marker_ships() -> None:
    assert (Path(nbagent.__file__).parent / "py.typed").exists()


#: Packages that load on first use, outside the core (the layering rule of DESIGN.md).
FRONT_ENDS_AND_CLIENTS = (
    "IPython",
    "ipywidgets",
    "ipykernel",
    "httpx2",
    "httpx",
    "mcp",
    "opentelemetry",
    "pandas",
    "dask",
    "distributed",
    "xllamacpp",
)
#: Modules outside the core: front ends, providers, protocols, exporters.
NOT_CORE = ("notebook", "providers", "terminal", "mcp", "telemetry", "__main__")


def _core_modules() -> list[str]:
    root = Path(nbagent.__file__).parent
    names = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[0] in NOT_CORE or parts[0].removesuffix(".py") in NOT_CORE:
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names.append(".".join(("nbagent", *parts)))
    return names


def test_no_core_module_imports_a_front_end_or_client() -> None:
    """Every core module, imported alone, leaves the front ends and HTTP clients unloaded."""
    modules = _core_modules()
    assert {"nbagent.agent", "nbagent.loop.run", "nbagent.batch", "nbagent.recording"} <= set(
        modules
    )
    code = (
        "import importlib, sys\n"
        f"bad = {FRONT_ENDS_AND_CLIENTS!r}\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "    loaded = [m for m in bad if m in sys.modules]\n"
        "    if loaded:\n"
        "        print(name, loaded)\n"
        "        break\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", out.stdout
