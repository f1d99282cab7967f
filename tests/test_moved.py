"""Module paths that moved keep working for one more release, and say where they went.

Each case runs in a fresh interpreter (an alias is loaded, and warns, once per process), as a
script a person runs: Python's default warning filters show a DeprecationWarning attributed to
``__main__``, so the warning must point at the person's own line.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

from nbagent._surface.moved import MOVED

ROOT = Path(__file__).resolve().parents[1]

#: What code written against the older docs did with each old path.
OLD_CODE = {
    "nbagent.approval": "from nbagent.approval import InteractiveApprover",
    "nbagent.exchange": "from nbagent.exchange import Exchange",
    "nbagent.fork": "from nbagent.fork import compare",
    "nbagent.hooks": "from nbagent.hooks import veto",
    "nbagent.rules": "from nbagent.rules import RuleApprover, RuleSet",
    "nbagent.run": "from nbagent.run import Run",
    "nbagent.stepping": "from nbagent.stepping import next_step, run_to_end",
    "nbagent.notebook.cellnote": "from nbagent.notebook.cellnote import CellNote",
    "nbagent.notebook.frontend": "from nbagent.notebook.frontend import detect",
    "nbagent.notebook.grammar": "from nbagent.notebook.grammar import GRAMMARS",
}


def _script(tmp_path: Path, body: str, *flags: str) -> subprocess.CompletedProcess[str]:
    """Run ``body`` as a script (``__main__``) with the default warning filters."""
    script = tmp_path / "old_code.py"
    script.write_text(textwrap.dedent(body), encoding="utf-8")
    return subprocess.run(
        [sys.executable, *flags, str(script)], capture_output=True, text=True, cwd=tmp_path
    )


_RECORD = """\
import json, sys, warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
{code}
print(json.dumps([[str(w.message), w.category.__name__, w.filename, w.lineno] for w in seen]))
"""


def _warnings_of(tmp_path: Path, code: str) -> tuple[list[list[object]], Path]:
    """The warnings ``code`` (indented into a ``with``) raised, each [message, category, file,
    line]; line 5 of the script is the first line of ``code``."""
    body = _RECORD.format(code=textwrap.indent(textwrap.dedent(code), "    "))
    done = _script(tmp_path, body)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1]), tmp_path / "old_code.py"


def test_every_old_path_has_code_here_and_a_new_path_that_is_a_module() -> None:
    assert set(OLD_CODE) == set(MOVED)
    for old, new in MOVED.items():
        assert not (ROOT / (old.replace(".", "/") + ".py")).exists(), f"{old} is a module again"
        assert not (ROOT / old.replace(".", "/")).is_dir(), f"{old} is a package again"
        assert (ROOT / (new.replace(".", "/") + ".py")).exists(), new


def test_every_old_import_works_warns_once_at_its_line_and_names_the_new_path(
    tmp_path: Path,
) -> None:
    lines = []
    for old in sorted(MOVED):
        new = MOVED[old]
        names = OLD_CODE[old].split(" import ", 1)[1].split(", ")
        lines += [
            OLD_CODE[old],
            f"import {old}, {new}",
            OLD_CODE[old],  # again: the module is loaded, nothing more is said
            f"assert sys.modules[{old!r}] is sys.modules[{new!r}]",
            f"assert all(globals()[n] is getattr(sys.modules[{new!r}], n) for n in {names!r})",
        ]
    seen, script = _warnings_of(tmp_path, "\n".join(lines))
    said = {}
    for message, category, filename, line in seen:
        assert category == "DeprecationWarning", message
        old = str(message).split(" ", 1)[0]
        assert old not in said, f"{old} warned twice"
        said[old] = (str(message), filename, line)
    for number, old in enumerate(sorted(MOVED)):
        message, filename, line = said[old]
        assert f"{old} moved to {MOVED[old]}" in message
        assert (filename, line) == (str(script), 5 + 5 * number)  # the importer's line


def test_each_way_of_reaching_an_old_path_warns_at_the_line_that_did(tmp_path: Path) -> None:
    code = """\
    import nbagent.stepping
    nbagent.stepping.next_step
    from nbagent import fork
    import nbagent
    nbagent.exchange.Exchange
    import importlib
    importlib.import_module("nbagent.rules")
    """
    seen, script = _warnings_of(tmp_path, code)
    where = {str(w[0]).split(" ", 1)[0]: (w[1], w[2], w[3]) for w in seen}
    assert len(seen) == len(where) == 4, seen
    assert where == {
        "nbagent.stepping": ("DeprecationWarning", str(script), 5),
        "nbagent.fork": ("DeprecationWarning", str(script), 7),
        "nbagent.exchange": ("DeprecationWarning", str(script), 9),  # read as an attribute
        "nbagent.rules": ("DeprecationWarning", str(script), 11),  # importlib's caller
    }


def test_a_person_s_script_shows_the_warning_with_python_s_default_filters(
    tmp_path: Path,
) -> None:
    done = _script(tmp_path, "from nbagent.stepping import next_step\nprint(next_step())\n")
    assert done.returncode == 0, done.stderr
    assert "Resume(" in done.stdout
    assert f"{tmp_path / 'old_code.py'}:1: DeprecationWarning: nbagent.stepping moved to" in (
        done.stderr
    )
    assert "nbagent.inspection.stepping" in done.stderr
    # and a test suite that turns warnings into errors sees the import fail, at that line
    strict = _script(tmp_path, "import nbagent.fork\n", "-W", "error::DeprecationWarning")
    assert strict.returncode == 1 and "DeprecationWarning: nbagent.fork moved to" in strict.stderr


def test_a_path_that_never_existed_is_still_not_found(tmp_path: Path) -> None:
    seen, _ = _warnings_of(
        tmp_path,
        """\
        try:
            import nbagent.steppin
        except ModuleNotFoundError as exc:
            print(exc, file=sys.stderr)
        else:
            raise SystemExit("nbagent.steppin imported")
        assert not hasattr(__import__("nbagent"), "steppin")
        """,
    )
    assert seen == []


def test_import_nbagent_loads_no_moved_module_and_one_finder(tmp_path: Path) -> None:
    code = (
        "import sys, importlib, nbagent\n"
        f"targets = {sorted(MOVED.values())!r}\n"
        "print([m for m in targets if m in sys.modules])\n"
        "importlib.reload(nbagent)\n"
        "print(sum(type(f).__module__ == 'nbagent._surface.moved' for f in sys.meta_path))\n"
        "print(type(sys.meta_path[-1]).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:3] == ["[]", "1", "MovedFinder"]


def _imported_modules(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """Every module an import statement of ``path`` names (relative ones resolved from
    ``root``), with its line: ``from a import b`` names a and a.b (b may be a module)."""
    package = list(path.relative_to(root).parts[:-1])  # a module's package, or an __init__'s
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = package[: len(package) - (node.level - 1)]
                base = ".".join([*here, *([node.module] if node.module else [])])
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def test_nothing_of_ours_imports_an_old_path() -> None:
    """The package, its tests and benchmarks use the new paths: an alias is for code that
    follows older docs, and the package's own import of one would warn every person."""
    files = [*(ROOT / "nbagent").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")]
    files += [p for p in (ROOT / "tests").rglob("*.py") if p.name != "test_moved.py"]
    old = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in files
        for line, name in _imported_modules(path)
        if name in MOVED
    ]
    assert not old, "\n".join(old)


def test_the_import_check_of_old_paths_sees_one(tmp_path: Path) -> None:
    module = tmp_path / "nbagent" / "loop" / "mine.py"
    module.parent.mkdir(parents=True)
    module.write_text(
        "from ..stepping import next_step\nimport nbagent.fork\n"
        "def f():\n    from nbagent import rules\n    from .. import tools\n"
    )
    found = _imported_modules(module, tmp_path)
    assert [(line, name) for line, name in found if name in MOVED] == [
        (1, "nbagent.stepping"),
        (2, "nbagent.fork"),
        (4, "nbagent.rules"),
    ]
    assert (5, "nbagent.tools") in found


CHANGELOG = ROOT / "CHANGELOG.md"
SECTIONS = ["Removed", "Deprecated", "Changed", "Added", "Fixed", "Security"]


def _unreleased() -> str:
    text = CHANGELOG.read_text(encoding="utf-8")
    return text.split("\n## [Unreleased]\n", 1)[1].split("\n## [", 1)[0]


def test_the_changelog_keeps_its_sections_and_lists_every_moved_path() -> None:
    """Keep a Changelog, breaking changes first; each alias is a Deprecated line naming both
    paths (the alias and its line go together, and so does their removal)."""
    unreleased = _unreleased()
    headings = [line[4:] for line in unreleased.splitlines() if line.startswith("### ")]
    assert headings == SECTIONS
    deprecated = unreleased.split("### Deprecated\n", 1)[1].split("\n### ", 1)[0]
    for old, new in MOVED.items():
        assert f"`{old}` is `{new}`" in deprecated, f"CHANGELOG.md: say that {old} is {new}"
