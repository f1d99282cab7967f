"""The tiers (tests/tiers.py) stay true: their marks registered, what they name there, and the
fast tier importing every module of nbagent, so that ``scripts/test --fast`` leaves none unrun.

Read from the sources (the imports of each test module and of the test helpers it uses, and of
each nbagent module), not by running the tier: the check costs a second and says which module
fell out, and through which removal.
"""

from __future__ import annotations

import ast
import functools
import itertools
from collections.abc import Iterable
from pathlib import Path

import pytest

from .tiers import BY_PATH, BY_TEST, MARKS, SPREAD

TESTS = Path(__file__).parent
ROOT = TESTS.parent
PACKAGE = ROOT / "nbagent"


def _name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache  # each test helper is read once, not once per test module using it
def _imported(path: Path) -> frozenset[str]:
    """Every dotted name ``path`` imports (``from a import b`` gives ``a`` and ``a.b``), lazy
    imports inside functions included, and every module it runs as ``[..., "-m", name]``."""
    me = _name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, (ast.List, ast.Tuple)):
            items = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            for flag, program in itertools.pairwise(items):
                if flag == "-m" and isinstance(program, str):
                    found.update((program, f"{program}.__main__"))
    return frozenset(found)


def _modules(root: Path) -> dict[str, Path]:
    return {_name(path): path for path in sorted(root.rglob("*.py"))}


def _resolve(names: Iterable[str], known: dict[str, Path]) -> set[str]:
    """The modules of ``known`` that ``names`` are or are in."""
    found = set()
    for name in names:
        while name not in known and "." in name:
            name = name.rpartition(".")[0]
        if name in known:
            found.add(name)
    return found


def _in_tier(path: str) -> bool:
    return not any(
        path == where or (where.endswith("/") and path.startswith(where)) for where in BY_PATH
    )


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.name.startswith("test")
    }


def _fast_test_modules() -> list[Path]:
    """The test modules the fast tier runs at least one test of."""
    found = []
    for path in sorted(TESTS.rglob("test_*.py")):
        relative = path.relative_to(TESTS).as_posix()
        slow = {name for (where, name) in BY_TEST if where == relative}
        if _in_tier(relative) and _test_names(path) - slow:
            found.append(path)
    return found


def test_the_tier_marks_are_registered_with_pytest(pytestconfig: pytest.Config) -> None:
    registered = {line.split(":")[0] for line in pytestconfig.getini("markers")}
    assert set(MARKS) <= registered, "pyproject.toml's [tool.pytest.ini_options] markers"
    # a misspelt mark would otherwise put a test in the fast tier without a word
    assert "--strict-markers" in pytestconfig.getini("addopts")


def test_what_the_tiers_name_exists() -> None:
    for where in (*BY_PATH, *SPREAD):
        assert (TESTS / where).exists(), f"tests/tiers.py names tests/{where}, which is gone"
    for where in SPREAD:  # spread over workers, a module fixture would start on each of them
        source = (TESTS / where).read_text(encoding="utf-8")
        assert 'scope="module"' not in source, f"tests/{where} has a module fixture"
    for (where, name), mark in BY_TEST.items():
        assert mark in MARKS, mark
        assert name in _test_names(TESTS / where), f"tests/{where} has no {name} any more"


def test_the_fast_tier_imports_every_module_of_nbagent() -> None:
    package = _modules(PACKAGE)
    helpers = _modules(TESTS)
    graph = {name: _resolve(_imported(path), package) for name, path in package.items()}

    reached: dict[str, str] = {}  # module -> the fast test module through which it is reached
    for test in _fast_test_modules():
        names: set[str] = set()
        # the test module, the conftests above it, the test helpers they import, and theirs
        conftests = [f / "conftest.py" for f in test.parents if f.is_relative_to(TESTS)]
        todo, done = [test, *(c for c in conftests if c.exists())], set()
        while todo:
            path = todo.pop()
            if path in done:
                continue
            done.add(path)
            imported = _imported(path)
            names |= imported
            todo.extend(helpers[h] for h in _resolve(imported, helpers) if helpers[h] != path)
        todo_modules = list(_resolve(names, package))
        while todo_modules:  # and what nbagent imports from there, with every parent package
            module = todo_modules.pop()
            if module in reached:
                continue
            reached[module] = test.relative_to(TESTS).as_posix()
            parents = [module.rsplit(".", depth)[0] for depth in range(1, module.count(".") + 1)]
            todo_modules.extend([*graph[module], *parents])
    missing = sorted(set(package) - set(reached))
    assert not missing, f"no test of the fast tier imports {missing}"
