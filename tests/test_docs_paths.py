"""Every path the docs show is the code's: each ``import nbagent…`` / ``from nbagent… import …``
of an example imports, each ``nbagent.x.y`` a page names (in code, prose, a cross-reference or
an autodoc directive, and each member that directive lists) exists at that path, and none is
an old path kept for a release (the docs show the new ones) or, in an import, a private one.

The pages: README.md, docs/**/*.md, and the lessons (notebooks/*.ipynb, every cell's source;
docs/course/ is the docs build's copy of them). Everything is resolved in one fresh interpreter,
so that what this process imported or patched cannot hide a missing name.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Fenced blocks read as Python (an import in them is what a person runs).
PYTHON = {"python", "py", "ipython", "ipython3", "pycon"}
#: ``nbagent.x.y`` not inside a longer name, a path or an address.
DOTTED = re.compile(r"(?<![\w./-])nbagent(?:\.[A-Za-z_]\w*)+")
AUTODOC = re.compile(
    r"^\s*\.\. auto(?:module|class|function|data|attribute|exception|method)::\s*(\S+)"
)
MEMBERS = re.compile(r"^\s+:members:\s*(.*)$")


@dataclass(frozen=True)
class Shown:
    """One path a page shows. ``how``: "module" (``import X`` / ``from X import``: X must be a
    module), "import" (``from X import n``: X.n), "name" (named anywhere), "member" (listed in
    an autodoc ``:members:``)."""

    page: str
    line: int
    path: str
    how: str

    def where(self) -> str:
        return f"{self.page}:{self.line}: {self.path}"


def pages() -> list[Path]:
    found = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = [p for p in found if not {"_build", "course"} & set(p.relative_to(ROOT).parts[1:2])]
    return [*found, *sorted((ROOT / "notebooks").glob("*.ipynb"))]


def _fences(text: str) -> Iterator[tuple[str, int, str]]:
    """Each fenced block of a Markdown text: (its info string, the line of its first line of
    code, the code)."""
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        opened = re.match(r"^(\s*)(`{3,}|~{3,})\s*(.*)$", lines[index])
        if not opened:
            index += 1
            continue
        fence, info = opened.group(2), opened.group(3).strip()
        body: list[str] = []
        index += 1
        start = index + 1
        while index < len(lines) and not re.match(
            rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$", lines[index]
        ):
            body.append(lines[index])
            index += 1
        index += 1
        yield info, start, "\n".join(body)


def _python_imports(code: str, first: int, page: str) -> Iterator[Shown]:
    """The imports of nbagent in one example or cell (IPython's ``%`` and ``!`` lines are not
    Python; a ``%%`` cell's body is not Python at all)."""
    if code.lstrip().startswith("%%"):
        return
    source = "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in code.splitlines()
    )
    try:
        tree = ast.parse(source)
    except SyntaxError:  # pseudo-code: its one-line imports still count
        for number, line in enumerate(source.splitlines()):
            yield from _python_imports_of_line(line, first + number, page)
        return
    for node in ast.walk(tree):
        line = first + getattr(node, "lineno", 1) - 1
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "nbagent":
                    yield Shown(page, line, alias.name, "module")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "nbagent":
            assert node.module is not None
            yield Shown(page, line, node.module, "module")
            for alias in node.names:
                yield Shown(page, line, f"{node.module}.{alias.name}", "import")


def _python_imports_of_line(line: str, number: int, page: str) -> Iterator[Shown]:
    try:
        tree = ast.parse(line.strip())
    except SyntaxError:
        return
    for shown in _python_imports(ast.unparse(tree), 1, page):
        yield Shown(page, number, shown.path, shown.how)


def _autodoc(code: str, first: int, page: str) -> Iterator[Shown]:
    """The targets of autodoc directives and the members each lists."""
    target = None
    for number, line in enumerate(code.splitlines(), first):
        directive = AUTODOC.match(line)
        if directive:
            target = directive.group(1)
            yield Shown(page, number, target, "name")
            continue
        members = MEMBERS.match(line)
        if members and target:
            for name in filter(None, (m.strip() for m in members.group(1).split(","))):
                yield Shown(page, number, f"{target}.{name}", "member")


def _inline_imports(text: str, page: str) -> Iterator[Shown]:
    """Imports written in prose, as inline code (``from nbagent import next_step``), which may
    wrap over lines; fenced blocks are read as blocks."""
    fenced = re.sub(
        r"^(\s*)(`{3,}|~{3,}).*?^\s*\2\s*$",
        lambda m: "\n" * m.group(0).count("\n"),
        text,
        flags=re.S | re.M,
    )
    for match in re.finditer(r"(?<!`)`([^`]+)`(?!`)", fenced):
        code = " ".join(match.group(1).split())
        if code.startswith(("from nbagent", "import nbagent")):
            line = fenced.count("\n", 0, match.start()) + 1
            yield from _python_imports_of_line(code, line, page)


def _named(text: str, first: int, page: str) -> Iterator[Shown]:
    for number, line in enumerate(text.splitlines(), first):
        for match in DOTTED.finditer(line):
            yield Shown(page, number, match.group(0), "name")


def shown_in(path: Path, root: Path = ROOT) -> list[Shown]:
    """Every path a page (Markdown or a notebook) shows."""
    page = str(path.relative_to(root))
    found: list[Shown] = []
    if path.suffix == ".ipynb":
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            source = "".join(cell["source"])
            where = f"{page} (cell {cell.get('id', '?')})"
            found += _named(source, 1, where)
            if cell["cell_type"] == "code":
                found += _python_imports(source, 1, where)
            else:
                found += _inline_imports(source, where)
        return found
    text = path.read_text(encoding="utf-8")
    found += _named(text, 1, page)
    found += _inline_imports(text, page)
    for info, start, code in _fences(text):
        language = info.strip("{}").split()[0] if info else ""
        if language in PYTHON:
            found += _python_imports(code, start, page)
        elif language == "eval-rst":
            found += _autodoc(code, start, page)
    return found


# --- resolving, in a fresh interpreter ---------------------------------------------------------


def _problem(path: str, how: str) -> str | None:
    """What is wrong with a path a page shows, or None. Runs where nbagent is importable."""
    import importlib

    from nbagent._surface.moved import MOVED

    for old, new in MOVED.items():
        if path == old or path.startswith(old + "."):
            return f"{old} is an old path, kept for a release: show {new}{path[len(old) :]}"
    parts = path.split(".")
    private = [p for p in parts if p.startswith("_") and not p.startswith("__")]
    if how in ("module", "import") and private:
        return f"an example imports a private name ({private[0]}): show its public path"
    module = None
    for size in range(len(parts), 0, -1):
        name = ".".join(parts[:size])
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name and (name == exc.name or name.startswith(exc.name + ".")):
                continue  # not a module: an attribute of a shorter prefix
            return f"importing {name} fails: {exc}"
        except Exception as exc:
            return f"importing {name} fails: {type(exc).__name__}: {exc}"
        break
    if module is None:
        return "no such module"
    if how == "module" and size < len(parts):
        return f"not a module ({'.'.join(parts[:size])} has no module {parts[size]})"
    value: object = module
    for index, attribute in enumerate(parts[size:], size):
        if hasattr(value, attribute):
            value = getattr(value, attribute)
            continue
        if index == len(parts) - 1 and attribute in _instance_attributes(value):
            return None  # a field every instance has
        return f"{'.'.join(parts[:index])} has no {attribute!r}"
    return None


def _instance_attributes(value: object) -> set[str]:
    """What instances of a class have that the class does not: dataclass fields, annotations,
    slots, and what its methods assign to ``self``."""
    import inspect

    found = set(getattr(value, "__dataclass_fields__", ()))
    for klass in getattr(value, "__mro__", ()):
        found |= set(getattr(klass, "__annotations__", {})) | set(getattr(klass, "__slots__", ()))
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        found |= set(re.findall(r"\bself\.(\w+)\s*(?::[^=]+)?=(?!=)", source))
    return found


def resolve_all(shown: list[tuple[str, str]]) -> dict[str, str | None]:
    """``path|how`` -> its problem (or None) for each (path, how)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # third-party imports' own deprecations
        return {f"{path}|{how}": _problem(path, how) for path, how in shown}


def resolve_fresh(shown: list[Shown]) -> dict[Shown, str]:
    """The problems of ``shown``, resolved in a fresh interpreter."""
    wanted = sorted({(s.path, s.how) for s in shown})
    code = (
        "import json, sys\n"
        "from tests.test_docs_paths import resolve_all\n"
        "print(json.dumps(resolve_all(json.load(sys.stdin))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(wanted),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answers = json.loads(done.stdout.splitlines()[-1])
    return {s: answers[f"{s.path}|{s.how}"] for s in shown if answers[f"{s.path}|{s.how}"]}


@pytest.fixture(scope="module")
def problems() -> dict[str, list[str]]:
    """Each page's problems: ``page:line: path: what is wrong``."""
    shown = [s for page in pages() for s in shown_in(page)]
    assert len(shown) > 500, len(shown)  # the pages were read
    found: dict[str, list[str]] = {}
    for item, problem in resolve_fresh(shown).items():
        page = item.page.split(" (cell", 1)[0]
        found.setdefault(page, []).append(f"{item.where()}: {problem}")
    return found


@pytest.mark.parametrize("page", [str(p.relative_to(ROOT)) for p in pages()])
def test_every_path_a_page_shows_is_the_code_s(page: str, problems: dict[str, list[str]]) -> None:
    wrong = sorted(set(problems.get(page, [])))
    assert not wrong, "the page shows paths the code does not have:\n" + "\n".join(wrong)


# --- the check checks ------------------------------------------------------------------------

_DISAGREEING = """\
# A page that disagrees with the code

```python
from nbagent import Agent, next_step, no_such_name
from nbagent.stepping import run_to_end
from nbagent.inspection.stepping import Resume
import nbagent.no_such_module
from nbagent.loop._execution import CANCEL_GRACE
from nbagent import (
    tool,
    not_here_either,
)
```

```ipython
%load_ext nbagent
from nbagent.fork import compare
```

Prose names `nbagent.tools.Tool`, {class}`~nbagent.events.RunResult.output`,
`nbagent.events.NoSuchEvent` and `nbagent.approval.Decision`; an address such as
https://example.org/nbagent.git is no path. In prose: `from nbagent import Agent,
no_such_prose_name`.

```{eval-rst}
.. automodule:: nbagent.inspection.fork
   :members: compare, Comparison, no_such_member
```
"""


def test_a_page_that_disagrees_with_the_code_is_caught(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(_DISAGREEING, encoding="utf-8")
    found = {
        (s.line, s.path): problem for s, problem in resolve_fresh(shown_in(page, tmp_path)).items()
    }
    assert set(found) == {
        (4, "nbagent.no_such_name"),
        (5, "nbagent.stepping"),
        (5, "nbagent.stepping.run_to_end"),
        (7, "nbagent.no_such_module"),
        (8, "nbagent.loop._execution"),
        (8, "nbagent.loop._execution.CANCEL_GRACE"),
        (9, "nbagent.not_here_either"),  # a statement's names are on its first line
        (17, "nbagent.fork"),
        (17, "nbagent.fork.compare"),
        (21, "nbagent.events.NoSuchEvent"),
        (21, "nbagent.approval.Decision"),
        (22, "nbagent.no_such_prose_name"),  # inline code, over a line break
        (27, "nbagent.inspection.fork.no_such_member"),
    }, found
    assert "show nbagent.inspection.stepping" in found[(5, "nbagent.stepping")]
    assert "private" in found[(8, "nbagent.loop._execution")]
    assert "has no 'no_such_name'" in found[(4, "nbagent.no_such_name")]


def test_a_lesson_s_cells_are_read(tmp_path: Path) -> None:
    lesson = {
        "cells": [
            {"cell_type": "markdown", "id": "a", "source": ["See `nbagent.nope`.\n"]},
            {
                "cell_type": "code",
                "id": "b",
                "source": ["%load_ext nbagent\n", "import nbagent.hooks\n"],
            },
            {"cell_type": "code", "id": "c", "source": ["%%agent\n", "from nbagent.x import y\n"]},
        ]
    }
    path = tmp_path / "lesson.ipynb"
    path.write_text(json.dumps(lesson), encoding="utf-8")
    found = {(s.page, s.path) for s in resolve_fresh(shown_in(path, tmp_path))}
    assert found == {
        ("lesson.ipynb (cell a)", "nbagent.nope"),
        ("lesson.ipynb (cell b)", "nbagent.hooks"),
        # a %%agent cell's body is a prompt: only its text is read for names
        ("lesson.ipynb (cell c)", "nbagent.x"),
    }
