"""The package's shape, read from its source: imports run one way (no circle, lazy and type-only
imports included), and no module is longer than a person reads in one sitting (600 lines).

Nothing is imported here: every module of ``nbagent/`` is parsed with ``ast`` and every import
statement counts, at module level, inside functions, under ``if TYPE_CHECKING:``. Relative
imports are resolved; ``from . import x`` is an import of the module ``x`` when there is one,
else of the package itself (its ``__init__``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

import nbagent

ROOT = Path(nbagent.__file__).parent
MAX_LINES = 600


def _modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """Every module under ``root`` by dotted name, with its file and whether it is a package."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = (root.name, *path.relative_to(root).with_suffix("").parts)
        package = parts[-1] == "__init__"
        if package:
            parts = parts[:-1]
        found[".".join(parts)] = (path, package)
    return found


def _targets(module: str, package: bool, node: ast.AST, known: Mapping[str, object]) -> list[str]:
    """The modules of the package that one import statement names."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        here = module.split(".") if package else module.split(".")[:-1]
        base = here[: len(here) - (node.level - 1)]
        source = ".".join([*base, *([node.module] if node.module else [])])
    else:
        source = node.module or ""
    # `from a import b` imports the module a.b when there is one, else the name b of module a
    return [f"{source}.{a.name}" if f"{source}.{a.name}" in known else source for a in node.names]


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports (anywhere in its text)."""
    modules = _modules(root)
    graph: dict[str, set[str]] = {}
    for name, (path, package) in modules.items():
        imported = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            for target in _targets(name, package, node, modules):
                # `import nbagent.x.y` names y; a name that is no module means its package
                while target not in modules and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in modules and target != name:
                    imported.add(target)
        graph[name] = imported
    return graph


def circles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
    return found


def _describe(group: list[str], graph: Mapping[str, Iterable[str]]) -> str:
    members = set(group)
    ties = [f"  {a} -> {b}" for a in group for b in sorted(graph[a]) if b in members]
    return f"circle of {len(group)} modules:\n" + "\n".join(ties)


def test_no_import_circle() -> None:
    graph = import_graph(ROOT)
    assert {"nbagent.agent", "nbagent.loop.run", "nbagent.notebook.magics"} <= set(graph)
    found = circles(graph)
    assert not found, "\n".join(_describe(group, graph) for group in found)


#: The rooms of the package, bottom to top (docs/architecture.md draws them). A room is a package
#: (every module under it) or, for the top-level modules, a named group of them: every module of
#: nbagent/ is in exactly one room, so a new top-level module must be given one here.
ROOMS: dict[str, tuple[str, ...]] = {
    # what every room may use: no import of the rest of nbagent
    "ground": (
        "nbagent._ground",
        "nbagent._version",
        "nbagent.errors",
        "nbagent.limits",
        "nbagent.redact",
        "nbagent.timeline",
    ),
    "schema": ("nbagent.schema",),
    # the words every room speaks: content, tools, messages, a model's request and answer
    "vocabulary": (
        "nbagent._digest",
        "nbagent._gates",
        "nbagent._history",
        "nbagent._prices",
        "nbagent.content",
        "nbagent.generation",
        "nbagent.messages",
        "nbagent._prices",
        "nbagent.tools",
    ),
    "inspection": ("nbagent.inspection",),
    "approvals": ("nbagent.approvals",),
    "events": ("nbagent.events",),
    "output": ("nbagent.output",),
    "models": ("nbagent.models",),
    "providers": ("nbagent.providers",),
    "recording": ("nbagent.recording",),
    "mcp": ("nbagent.mcp",),
    # external agents over the Agent Client Protocol: their processes, sessions, turns as runs
    "acp": ("nbagent.acp",),
    "delegation": ("nbagent.delegation",),
    "loop": ("nbagent.loop",),
    "batch": ("nbagent.batch",),
    "agent": ("nbagent.agent",),
    "kernel": ("nbagent.kernel",),
    # the notebook as the agent's workspace: its cells read, edits proposed, undone
    "document": ("nbagent.document",),
    "telemetry": ("nbagent.telemetry",),
    # a course: the teacher's policy, the provenance each cell carries, the class report
    "course": ("nbagent.course",),
    "notebook": ("nbagent.notebook",),
    "terminal": ("nbagent.terminal",),
    # the package's face (it loads what it hands on, and its table of names and of moved paths)
    # and ``python -m nbagent``; an old path kept for a release (nbagent._surface.moved) is no
    # module, so it has no room: tests/test_moved.py holds the aliases
    "face": ("nbagent", "nbagent.__main__", "nbagent._surface"),
}

_WORDS = {"ground", "schema", "vocabulary"}
_CORE = _WORDS | {"inspection", "approvals", "events"}
_BELOW_THE_AGENT = _CORE | {
    "output",
    "models",
    "providers",
    "recording",
    "mcp",
    "delegation",
    "loop",
    "batch",
    "agent",
}

#: Which rooms each room may import (besides itself). Lower never imports upper: the table is
#: checked to hold no circle of its own.
MAY_IMPORT: dict[str, set[str]] = {
    "ground": set(),
    "schema": {"ground"},
    "vocabulary": {"ground", "schema"},
    "inspection": _WORDS,
    "approvals": _WORDS | {"inspection"},
    "events": _WORDS | {"inspection", "approvals"},
    "output": _WORDS,
    "models": _WORDS,
    "providers": _WORDS | {"models"},  # "scripted:" / "offline:" model strings
    "recording": _WORDS,
    "mcp": _WORDS,
    "acp": _CORE,
    "delegation": _CORE | {"output", "recording"},  # a helper's run recorded with its caller's
    "loop": _CORE | {"providers", "output", "delegation"},  # a model string: the providers' face
    "batch": _CORE | {"providers", "output", "loop"},
    "agent": _CORE | {"providers", "output", "delegation", "loop", "batch"},
    "kernel": _CORE | {"agent"},
    "document": _WORDS,
    "telemetry": _CORE | {"delegation", "agent"},
    "course": _CORE | {"recording", "document"},
    "notebook": _BELOW_THE_AGENT | {"kernel", "telemetry", "course", "document", "acp"},
    "terminal": _BELOW_THE_AGENT | {"kernel", "telemetry", "course", "document", "acp"},
    "face": set(ROOMS) - {"face"},
}


def room_of(module: str, rooms: Mapping[str, Iterable[str]] = ROOMS) -> str | None:
    """The room a module is in: the longest member it equals or lies under (a member that is
    the whole package, ``nbagent`` itself, stands for its face only)."""
    best: tuple[int, str] | None = None
    for room, members in rooms.items():
        for member in members:
            inside = module == member or ("." in member and module.startswith(member + "."))
            if inside and (best is None or len(member) > best[0]):
                best = (len(member), room)
    return best[1] if best else None


def wrong_way(
    graph: Mapping[str, Iterable[str]],
    rooms: Mapping[str, Iterable[str]] = ROOMS,
    may_import: Mapping[str, set[str]] = MAY_IMPORT,
) -> list[str]:
    """Every import from one room into a room the table does not let it import."""
    wrong = []
    for module, imported in sorted(graph.items()):
        here = room_of(module, rooms)
        for target in sorted(imported):
            there = room_of(target, rooms)
            if there != here and there not in may_import.get(here or "", set()):
                wrong.append(f"{module} ({here}) -> {target} ({there})")
    return wrong


def test_every_module_is_in_one_room() -> None:
    homeless = sorted(m for m in import_graph(ROOT) if room_of(m) is None)
    assert not homeless, f"give these a room in ROOMS (and docs/architecture.md): {homeless}"
    assert set(MAY_IMPORT) == set(ROOMS)


def test_the_rooms_table_runs_one_way() -> None:
    assert not circles(MAY_IMPORT), circles(MAY_IMPORT)


def test_imports_run_the_rooms_way() -> None:
    """A lower room never imports an upper one, lazily or for types only (the table above)."""
    wrong = wrong_way(import_graph(ROOT))
    assert not wrong, "imports against the rooms' direction:\n" + "\n".join(wrong)


ARCHITECTURE = ROOT.parent / "docs" / "architecture.md"


def _page_rooms() -> dict[str, tuple[set[str], set[str]]]:
    """The rooms table of docs/architecture.md: room -> (its files and folders, what it may
    import)."""
    text = ARCHITECTURE.read_text(encoding="utf-8").split("## The rooms, bottom to top", 1)[1]
    rows = {}
    for line in text.split("\n## ", 1)[0].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`"):
            where = {w.strip(" `").removesuffix("/") for w in cells[1].split(",")}
            may = cells[2]
            others = set(ROOMS) - {cells[0].strip("`")}
            if may == "nothing":
                allowed: set[str] = set()
            elif may.startswith("every room"):  # "every room", or "every room but a and b"
                allowed = others - set(may.removeprefix("every room but ").split(" and "))
            else:
                allowed = {r.strip() for r in may.split(",")}
            rows[cells[0].strip("`")] = (where, allowed)
    return rows


def test_the_architecture_page_draws_these_rooms() -> None:
    """docs/architecture.md lists each room with its members and what it may import, as here."""
    page = _page_rooms()
    assert list(page) == list(ROOMS)
    for room, members in ROOMS.items():
        files = {
            ("__init__.py" if m == "nbagent" else m.split(".", 1)[1].replace(".", "/"))
            + ("" if (ROOT.parent / m.replace(".", "/")).is_dir() or m == "nbagent" else ".py")
            for m in members
        }
        assert page[room] == (files, MAY_IMPORT[room]), room


#: Front ends: they consume the loop's events and own the person; nothing below imports them.
FRONT_ENDS = ("nbagent.notebook", "nbagent.terminal")
#: Modules above everything, which load what they hand on: the package's face and ``-m``.
TOP = ROOMS["face"]


def _within(module: str, rooms: Iterable[str]) -> str | None:
    return next((r for r in rooms if module == r or module.startswith(r + ".")), None)


def test_nothing_below_the_front_ends_imports_one() -> None:
    """The loop, the providers, MCP, the kernel tools … know no front end (a protocol client
    is handed what it needs from one, e.g. a sign-in presenter); front ends know no other."""
    wrong = []
    for module, imported in import_graph(ROOT).items():
        if module in TOP:
            continue
        own = _within(module, FRONT_ENDS)
        wrong += [
            f"{module} -> {target}"
            for target in sorted(imported)
            if _within(target, FRONT_ENDS) not in (None, own)
        ]
    assert not wrong, "\n".join(wrong)


def test_the_core_reaches_the_providers_through_their_face_only() -> None:
    """Model strings resolve through ``nbagent/providers/__init__.py``: no module below the
    front ends, outside the providers, imports an adapter (and with it the HTTP client)."""
    wrong = [
        f"{module} -> {target}"
        for module, imported in import_graph(ROOT).items()
        if room_of(module) not in ("providers", "notebook", "terminal", "face")
        for target in sorted(imported)
        if target.startswith("nbagent.providers.")
    ]
    assert not wrong, "\n".join(wrong)


#: The notebook front end's own rooms, bottom to top (docs/architecture.md draws them): the
#: command language and what every view is made of first, then the saved and the live view,
#: the session, the course policy on it, the tools' front ends, the features, and at the top
#: the magics that dispatch to all of them (``nbagent.notebook`` itself: its modules outside
#: the rooms below).
NOTEBOOK_ROOMS: dict[str, tuple[str, ...]] = {
    "command": ("nbagent.notebook.command",),
    "shown": ("nbagent.notebook.shown",),
    "saved": ("nbagent.notebook.saved",),
    "live": ("nbagent.notebook.live",),
    "core": ("nbagent.notebook.core",),
    "policy": ("nbagent.notebook.policy",),
    "toolkit": ("nbagent.notebook.toolkit",),
    "editing": ("nbagent.notebook.editing",),
    "serving": ("nbagent.notebook.serving",),
    "map": ("nbagent.notebook.map",),
    "reports": ("nbagent.notebook.reports",),
    "external": ("nbagent.notebook.external",),
    "magics": ("nbagent.notebook",),
}
#: What every feature of the notebook may build on: they reach each other only through it.
_SHARED = {"command", "shown", "saved", "live", "core", "policy"}
#: The features' front ends: none imports another (the tools' rooms below them are shared by
#: the features that serve or run those tools).
NOTEBOOK_FEATURES = ("serving", "map", "reports", "external")
NOTEBOOK_MAY_IMPORT: dict[str, set[str]] = {
    "command": set(),
    "shown": set(),
    "saved": {"shown"},
    "live": {"shown", "saved"},
    "core": {"shown", "saved", "live"},
    "policy": {"shown", "saved", "live", "core"},
    "toolkit": _SHARED,
    "editing": _SHARED | {"toolkit"},  # a cell runs through the kernel toolkit's journal
    "serving": _SHARED | {"toolkit", "editing"},  # it serves the kernel and the notebook tools
    "map": _SHARED,
    "reports": _SHARED,
    "external": _SHARED,
    "magics": set(NOTEBOOK_ROOMS) - {"magics"},
}


def _notebook_graph() -> dict[str, set[str]]:
    inside = "nbagent.notebook"
    return {
        module: {t for t in imported if t == inside or t.startswith(inside + ".")}
        for module, imported in import_graph(ROOT).items()
        if module == inside or module.startswith(inside + ".")
    }


def test_the_notebook_s_rooms_run_one_way() -> None:
    """Every module of the notebook is in one of its rooms, the table holds no circle, and
    imports follow it, lazily or for types only: features never import one another."""
    graph = _notebook_graph()
    assert {"nbagent.notebook.live.view", "nbagent.notebook.core.session"} <= set(graph)
    homeless = [m for m in graph if room_of(m, NOTEBOOK_ROOMS) is None]
    assert not homeless and set(NOTEBOOK_MAY_IMPORT) == set(NOTEBOOK_ROOMS)
    assert not circles(NOTEBOOK_MAY_IMPORT), circles(NOTEBOOK_MAY_IMPORT)
    for feature in NOTEBOOK_FEATURES:
        assert not NOTEBOOK_MAY_IMPORT[feature] & set(NOTEBOOK_FEATURES), feature
    wrong = wrong_way(graph, NOTEBOOK_ROOMS, NOTEBOOK_MAY_IMPORT)
    assert not wrong, "imports against the notebook rooms' direction:\n" + "\n".join(wrong)


def test_the_architecture_page_draws_the_notebook_s_rooms() -> None:
    """docs/architecture.md's table of the notebook's rooms names each room, in this order,
    with what it may import."""
    text = ARCHITECTURE.read_text(encoding="utf-8").split("## The notebook's rooms", 1)[1]
    rows = {}
    for line in text.split("\n## ", 1)[0].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`"):
            may = cells[2]
            rows[cells[0].strip("`")] = (
                set() if may == "nothing" else {r.strip() for r in may.split(",")}
            )
    assert list(rows) == list(NOTEBOOK_ROOMS)
    for room, allowed in rows.items():
        expected = NOTEBOOK_MAY_IMPORT[room]
        assert allowed == expected or (room == "magics" and allowed == {"every room"}), room


#: Modules of its own (outside its subfolders) a folder of the package holds at most.
MAX_FOLDER_MODULES = 20


def test_no_folder_over_20_modules() -> None:
    folders: dict[str, int] = {}
    for path, _ in _modules(ROOT).values():
        if path.name != "__init__.py":
            key = str(path.parent.relative_to(ROOT.parent))
            folders[key] = folders.get(key, 0) + 1
    assert folders["nbagent/notebook/live"] > 5
    full = {folder: n for folder, n in folders.items() if n > MAX_FOLDER_MODULES}
    assert not full, f"give these folders rooms of their own (at most {MAX_FOLDER_MODULES}): {full}"


def test_each_script_sits_beside_the_module_that_sends_it() -> None:
    """A widget's script or style (``_esm``, ``_css``) is a file in the same folder as the
    module that names it: a person who opens a room finds both."""
    scripts = [p for p in ROOT.rglob("*") if p.suffix in (".js", ".css")]
    assert len(scripts) >= 8
    alone = []
    for script in scripts:
        beside = [p for p in script.parent.glob("*.py") if f'"{script.name}"' in p.read_text()]
        if not beside:
            alone.append(str(script.relative_to(ROOT.parent)))
    assert not alone, f"no module beside these names them: {alone}"


def _lengths() -> dict[str, int]:
    return {
        str(path.relative_to(ROOT.parent)): len(path.read_text(encoding="utf-8").splitlines())
        for path, _ in _modules(ROOT).values()
    }


def test_no_module_over_600_lines() -> None:
    long = {name: lines for name, lines in _lengths().items() if lines > MAX_LINES}
    assert not long, f"split these by responsibility (at most {MAX_LINES} lines): {long}"


#: A package's ``__init__.py`` is its room's face: what the room holds, which rooms it may
#: import, what it hands on; the code lives in the modules it belongs to.
MAX_FACE_LINES = 150
#: Faces still over it, each with why: the test fails once one is under (take it out then).
FACES_WAITING: dict[str, str] = {}


def test_no_package_face_over_150_lines() -> None:
    faces = {name: lines for name, lines in _lengths().items() if name.endswith("__init__.py")}
    assert "nbagent/__init__.py" in faces and "nbagent/kernel/__init__.py" in faces
    long = {
        name: lines
        for name, lines in faces.items()
        if lines > MAX_FACE_LINES and name not in FACES_WAITING
    }
    assert not long, (
        f"move the code into the modules it belongs to (a face: {MAX_FACE_LINES} lines): {long}"
    )
    under = [name for name in FACES_WAITING if faces.get(name, 0) <= MAX_FACE_LINES]
    assert not under, (
        f"these faces are under {MAX_FACE_LINES} lines now: take them out of FACES_WAITING: {under}"
    )


# --- the checks check: each must see what it is for --------------------------------------------

_TINY = {
    "__init__.py": "from . import a\n",
    "a.py": "def f():\n    from .sub import c\n",
    "sub/__init__.py": (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .. import b\n"
    ),
    "sub/c.py": "import tiny.b\n",
    "b.py": "from tiny.sub.c import thing\n",
    "alone.py": "from .a import f\n",
}


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    root = tmp_path / "tiny"
    for name, text in _TINY.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_the_graph_reads_lazy_type_only_and_relative_imports(tiny: Path) -> None:
    graph = import_graph(tiny)
    assert graph == {
        "tiny": {"tiny.a"},
        "tiny.a": {"tiny.sub.c"},
        "tiny.alone": {"tiny.a"},
        "tiny.b": {"tiny.sub.c"},
        "tiny.sub": {"tiny.b"},
        "tiny.sub.c": {"tiny.b"},
    }
    assert circles(graph) == [["tiny.b", "tiny.sub.c"]]


def test_a_circle_through_a_package_face_is_found(tiny: Path) -> None:
    (tiny / "sub" / "c.py").write_text("from .. import f\n")  # a name of tiny/__init__.py
    (tiny / "b.py").write_text("")
    graph = import_graph(tiny)
    assert graph["tiny.sub.c"] == {"tiny"}
    assert circles(graph) == [["tiny", "tiny.a", "tiny.sub.c"]]
    assert "tiny.sub.c -> tiny\n" in _describe(circles(graph)[0], graph) + "\n"


def test_an_import_against_the_rooms_is_found(tiny: Path) -> None:
    rooms = {"low": ("tiny.b",), "high": ("tiny.sub",), "face": ("tiny", "tiny.a", "tiny.alone")}
    table = {"low": set(), "high": {"low"}, "face": {"low", "high"}}
    graph = import_graph(tiny)
    # tiny.b -> tiny.sub.c runs up; tiny.sub.c -> tiny.b and tiny.sub -> tiny.b run down
    assert wrong_way(graph, rooms, table) == ["tiny.b (low) -> tiny.sub.c (high)"]
    (tiny / "b.py").write_text("")
    assert wrong_way(import_graph(tiny), rooms, table) == []
    assert room_of("tiny.sub.c", rooms) == "high" and room_of("tiny", rooms) == "face"
    assert room_of("tiny.subway", rooms) is None  # a prefix of the name is not a room
    assert circles({"low": {"high"}, "high": {"low"}}) == [["high", "low"]]
