"""The person's objects are code: the toolkit survives any one of them, on a plain namespace.

Each object below does something its methods may do (block in C, spin in Python, raise, lie
about its class, die under a weak proxy); the toolkit's own reads (signatures, fingerprints,
reprs, list, describe, copies) are bounded, stopped, and say what happened. A blocked method is
released by the test when it ends, so no thread outlives it for long. Real kernels:
tests/notebook/test_kernel_hostile.py.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nbagent import Agent, AutoApprove, KernelLimits, kernel_tools
from nbagent.content import Shown, Table
from nbagent.events import ToolFinished
from nbagent.models import Call, ScriptedModel, Turn

from ..conftest import assert_history_valid

#: Short bounds, so a test about a method that never returns stays quick.
FAST = KernelLimits(read_timeout=0.3, copy_timeout=0.3)


def _calls(
    namespace: dict[str, Any], *calls: tuple[str, dict[str, Any]], limits: KernelLimits = FAST
) -> tuple[Any, list[Any]]:
    """Run each (tool, input) as one call, in order; (toolkit, each call's ToolResult)."""
    kit = kernel_tools(namespace, limits=limits)
    turns = [Turn(Call(name, arguments)) for name, arguments in calls]
    agent = Agent(ScriptedModel([*turns, "done"]), list(kit), approver=AutoApprove())
    finished: list[Any] = []
    agent.observe(
        lambda _run, event: (
            finished.append(event.result) if isinstance(event, ToolFinished) else None
        )
    )
    agent.run_sync("go")
    assert_history_valid(agent.messages)
    return kit, finished


def _code(code: str) -> tuple[str, dict[str, Any]]:
    return ("run_python", {"code": code})


LIST = ("list_variables", {})


def _describe(name: str) -> tuple[str, dict[str, Any]]:
    return ("describe_variable", {"name": name})


class Gate:
    """Blocks whoever calls :meth:`block` (in C, as time.sleep would) until the test ends."""

    def __init__(self) -> None:
        self.called = threading.Event()
        self.release = threading.Event()

    def block(self) -> None:
        self.called.set()
        self.release.wait(60)


@pytest.fixture
def gate() -> Iterator[Gate]:
    made = Gate()
    yield made
    made.release.set()


class Spin:
    """A method that loops in Python until interrupted, and says that it was."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.interrupted = threading.Event()

    def run(self) -> None:
        self.started.set()
        try:
            while True:
                pass
        except KeyboardInterrupt:
            self.interrupted.set()
            raise


def test_a_container_whose_len_blocks_is_never_asked_for_it(gate: Gate) -> None:
    """A list subclass whose __len__ blocks, named by the snippet or not, and an object that
    claims to be a list (its __class__ lies to isinstance): the snippet, the list and the
    description come back, and no __len__ ever ran (its length is the list's own storage)."""

    class Slow(list):  # type: ignore[type-arg]
        def __len__(self) -> int:
            gate.block()
            return 0

    class Liar:
        @property  # type: ignore[misc]
        def __class__(self) -> type:
            return list

        def __len__(self) -> int:
            gate.block()
            return 0

        def __iter__(self) -> Iterator[int]:
            gate.block()
            return iter(())

    ns: dict[str, Any] = {"slow": Slow([1, 2]), "liar": Liar()}
    _, (unnamed, named, listed, described, lied) = _calls(
        ns,
        _code("y = 1"),
        _code("slow.append(3)"),
        LIST,
        _describe("slow"),
        _describe("liar"),
    )
    assert not gate.called.is_set()
    assert "+y = 1" in unnamed.text and not unnamed.is_error
    assert "slow changed in place (tests.Slow (3 items))" in named.text and not named.is_error
    assert "slow: tests.Slow (3 items)" in listed.text and "liar: tests.Liar" in listed.text
    assert described.text.startswith("slow: tests.Slow")
    assert lied.text.startswith("liar: tests.Liar")


def test_a_len_that_raises_is_no_failure_of_nbagent() -> None:
    class Broken(list):  # type: ignore[type-arg]
        def __len__(self) -> int:
            raise ValueError("no length today")

    ns: dict[str, Any] = {"broken": Broken([1])}
    _, (result,) = _calls(ns, _code("broken.append(2)\nbroken[-1]"))
    assert not result.is_error and "nbagent could not run" not in result.text
    assert "Out: 2" in result.text and "broken changed in place" in result.text


def test_a_dead_weak_proxy_anywhere_is_just_a_dead_proxy() -> None:
    class Thing:
        pass

    thing = Thing()
    ns: dict[str, Any] = {"ghost": weakref.proxy(thing), "n": 1}
    del thing
    _, (ran, listed, described, named) = _calls(
        ns, _code("n = 2"), LIST, _describe("ghost"), _code("g = ghost")
    )
    for result in (ran, listed, described, named):
        assert not result.is_error and "ReferenceError: weakly" not in result.text, result.text
    assert "n: 1 → 2" in ran.text and "ghost: weakref.ProxyType" in listed.text


def test_reprs_that_raise_spin_or_raise_a_nasty_error_become_text() -> None:
    """The last value's repr raising (with an exception whose own __str__ never returns), and
    spinning: the result says which, the spin was interrupted, the run goes on."""
    spin, nasty = Spin(), Spin()

    class Nasty(Exception):
        def __str__(self) -> str:
            nasty.run()
            return ""

    class Raises:
        def __repr__(self) -> str:
            raise Nasty("hidden")

    class Spins:
        def __repr__(self) -> str:
            spin.run()
            return ""

    ns: dict[str, Any] = {"raises": Raises(), "spins": Spins()}
    _, (raised, spun, described) = _calls(ns, _code("raises"), _code("spins"), _describe("raises"))
    assert "Out: <tests.Raises: its repr raised " in raised.text and "Nasty" in raised.text
    assert not nasty.started.is_set()  # the exception's __str__ was never asked
    assert "Out: <tests.Spins: its repr did not answer: it did not finish within 0.3 s" in spun.text
    assert spin.interrupted.wait(10)  # the spinning repr was stopped, not left running
    assert "value: <tests.Raises: its repr raised " in described.text


def test_describe_stops_a_repr_that_never_returns(gate: Gate) -> None:
    """describe_variable of an object whose repr spins, then of one whose repr blocks in C:
    each answer says so within the bound; the spinning one was interrupted."""
    spin = Spin()

    class Spins:
        def __repr__(self) -> str:
            spin.run()
            return ""

    class Blocks:
        def __repr__(self) -> str:
            gate.block()
            return ""

    ns: dict[str, Any] = {"spins": Spins(), "blocks": Blocks()}
    _, (spun, blocked, listed) = _calls(ns, _describe("spins"), _describe("blocks"), LIST)
    assert "its repr did not answer: it did not finish within 0.3 s" in spun.text
    assert spin.interrupted.wait(10)
    assert gate.called.is_set() and not gate.release.is_set()  # came back while blocked
    assert "its repr did not answer" in blocked.text
    assert "spins: tests.Spins" in listed.text


def test_attribute_lookups_and_metaclasses_of_someone_else_never_run(gate: Gate) -> None:
    """An object whose __getattr__ blocks (a figure check asked it for savefig), whose class's
    metaclass blocks in __eq__, __hash__ and every attribute lookup (type_name asked it for
    __module__), whose __dict__ is a property that blocks, and a huge int (its repr is refused)."""

    class Meta(type):
        def __eq__(cls, other: object) -> bool:
            gate.block()
            return False

        def __hash__(cls) -> int:
            gate.block()
            return 0

        def __getattribute__(cls, name: str) -> Any:
            if name in ("__module__", "__qualname__", "__name__", "__mro__", "__dict__"):
                gate.block()
            return super().__getattribute__(name)

    class Odd(metaclass=Meta):
        pass

    class Sticky:
        def __getattr__(self, name: str) -> Any:
            if name == "savefig":  # (copy.deepcopy asks it for __deepcopy__: bounded too)
                gate.block()
            raise AttributeError(name)

    class Hidden:
        @property
        def __dict__(self) -> dict[str, Any]:  # type: ignore[override]
            gate.block()
            return {}

    ns: dict[str, Any] = {"odd": Odd(), "sticky": Sticky(), "big": 10**100_000}
    ns["hidden"] = Hidden()
    _, (value, listed, odd, big) = _calls(
        ns, _code("sticky"), LIST, _describe("odd"), _describe("big")
    )
    assert not gate.called.is_set()  # none of their code ran
    assert "Out: <" in value.text and "Sticky object>" in value.text
    assert "odd: tests.Odd" in listed.text and "big: int (332,193 bits)" in listed.text
    assert odd.text.startswith("odd: tests.Odd") and big.text.startswith("big: int")
    assert not [r for r in (value, listed, odd, big) if r.is_error]
    # named by a snippet: reading hidden's __dict__ (its fingerprint) and copying odd (copy
    # hashes its class) run their code, bounded, and the result says what it could not do
    _, (touched,) = _calls(ns, _code("odd.x = 1\nhidden_seen = 1 if hidden else 0"))
    assert not touched.is_error and "+hidden_seen = 1" in touched.text
    assert "Not compared for in-place changes: hidden" in touched.text, touched.text
    assert "Undo cannot restore in-place changes to odd (its copy did not answer" in touched.text


def test_copies_for_undo_are_bounded_and_say_why_not() -> None:
    """An object whose __deepcopy__ spins is not copied within copy_timeout: the snippet runs,
    and the result says undo cannot restore it, and why."""
    spin = Spin()

    class Uncopyable:
        def __init__(self) -> None:
            self.items: list[int] = []

        def __deepcopy__(self, memo: dict[int, Any]) -> Any:
            spin.run()

    ns: dict[str, Any] = {"thing": Uncopyable()}
    _, (result,) = _calls(ns, _code("thing.items.append(1)\nthing.n = 2"))
    assert spin.interrupted.wait(10)
    assert "Undo cannot restore in-place changes to thing (its copy did not answer" in result.text
    assert ns["thing"].n == 2


def test_an_in_place_change_shows_what_it_was_before() -> None:
    """`xs.append(3)` on a 2-item list: the table's before column says 2 items (it said 3)."""
    pd = pytest.importorskip("pandas")
    ns: dict[str, Any] = {"xs": [1, 2], "df": pd.DataFrame({"a": [1, 2]}), "other": [0]}
    ns["alias"] = ns["other"]
    _, (result,) = _calls(ns, _code("xs.append(3)\ndf['b'] = 1\nalias.extend([1, 2])"))
    table = next(p for p in result.value if isinstance(p, Shown) and p.label == "Namespace")
    assert isinstance(table.value, Table)
    rows = {row[0]: row[1:] for row in table.value.rows}
    assert rows["xs"] == ("changed in place", "list (2 items)", "list (3 items)")
    assert rows["df"] == ("changed in place", "pandas.DataFrame (2×1)", "pandas.DataFrame (2×2)")
    # not named by the code, changed through another name: its length then and now
    assert rows["other"] == ("changed in place", "list (1 items)", "list (3 items)")


def test_a_frame_with_a_hostile_cell_is_shown_without_touching_it_again() -> None:
    """A DataFrame holding an object whose repr raises: the card's table is nbagent's own
    texts (made bounded, on the snippet's thread), never the live frame for the front end."""
    pd = pytest.importorskip("pandas")

    class Cell:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

        def __str__(self) -> str:
            return "a cell"

    ns: dict[str, Any] = {"df": pd.DataFrame({"a": [1, 2], "b": [Cell(), "x"]})}
    ns["long"] = pd.DataFrame({"n": range(100)})
    _, (result, described, long) = _calls(ns, _code("df"), _describe("df"), _code("long"))
    (cut,) = [p for p in long.value if isinstance(p, Shown) and p.kind == "table"]
    assert cut.label == "Out: the first 50 of 100 rows" and len(cut.value.rows) == 50
    shown = [p for p in result.value if isinstance(p, Shown) and p.label == "Out"]
    assert shown and isinstance(shown[0].value, Table)
    assert shown[0].value.rows[0] == ("0", 1, "a cell")
    assert "Out: pandas.DataFrame (2×2)" in result.text and "a cell" in result.text
    tables = [p.value for p in described.value if isinstance(p, Shown) and p.kind == "table"]
    assert tables and all(isinstance(t, Table) for t in tables)


def test_process_state_a_snippet_changes_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """os.chdir, sys.path, the environment (names only: a value may be a key) and imports are
    named in the result; a snippet that changes none of them says nothing about them."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("NBAGENT_PROBE_OLD", "old")
    monkeypatch.delenv("NBAGENT_PROBE_TOKEN", raising=False)
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "nbagent_probe_module.py").write_text("import nbagent_probe_hidden\n")
    (tmp_path / "lib" / "nbagent_probe_hidden.py").write_text("VALUE = 1\n")
    (tmp_path / "lib" / "nbagent_probe_lazy.py").write_text("VALUE = 2\n")
    (tmp_path / "elsewhere").mkdir()
    key = "sk-probe-Zq81mN4vT0xR7pL2wK9s"
    code = (
        "import os, sys\n"
        f"sys.path.insert(0, {str(tmp_path / 'lib')!r})\n"
        "import nbagent_probe_module\n"
        "os.chdir('elsewhere')\n"
        f"os.environ['NBAGENT_PROBE_TOKEN'] = {key!r}\n"
        "os.environ['NBAGENT_PROBE_OLD'] = 'new value'\n"
    )
    try:
        _, (changed, lazy, quiet) = _calls(
            {}, _code(code), _code("__import__('nbagent_probe_lazy')"), _code("z = 1")
        )
    finally:
        os.environ.pop("NBAGENT_PROBE_TOKEN", None)
        for name in ("nbagent_probe_module", "nbagent_probe_hidden", "nbagent_probe_lazy"):
            sys.modules.pop(name, None)
    text = changed.text
    assert "Process: working directory is now " in text and "elsewhere" in text
    assert f"sys.path: added '{tmp_path / 'lib'}'" in text
    assert "environment variables: set NBAGENT_PROBE_TOKEN; changed NBAGENT_PROBE_OLD" in text
    assert key not in text and "new value" not in text
    # what its imports import in turn differs between library versions: not named (a replay
    # elsewhere would depart); a module imported by code it called is named, as a package, to
    # the person only: whether it was loaded already depends on the kernel's history, and the
    # model's text must be the same in any kernel for a recorded run to replay
    assert "imported nbagent_probe_module (with the modules they need)" in text
    assert "nbagent_probe_hidden" not in text
    assert "Process:" not in lazy.text
    shown_lazy = [p for p in lazy.value if isinstance(p, Shown) and p.label == "Process"]
    assert shown_lazy and "imported nbagent_probe_lazy (by code it called)" in shown_lazy[0].value
    assert "Undo does not change these back" in text
    shown = [p for p in changed.value if isinstance(p, Shown) and p.label == "Process"]
    assert shown and key not in str(shown[0].value)
    assert "Process:" not in quiet.text


def test_what_the_model_reads_of_imports_does_not_depend_on_the_kernels_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recorded run replays in a kernel that had loaded its modules already (a student ran
    an import cell first): the model's text of a snippet is the same in both kernels, and the
    person still sees what was loaded for the first time."""
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    (tmp_path / "nbagent_probe_first.py").write_text("VALUE = 1\n")
    (tmp_path / "nbagent_probe_called.py").write_text("VALUE = 2\n")
    snippets = (
        _code("import nbagent_probe_first\nx = nbagent_probe_first.VALUE"),
        _code("y = __import__('nbagent_probe_called').VALUE"),
    )
    try:
        _, fresh = _calls({}, *snippets)
        _, again = _calls({}, *snippets)  # both modules are in sys.modules now
    finally:
        for name in ("nbagent_probe_first", "nbagent_probe_called"):
            sys.modules.pop(name, None)
    assert [r.text for r in fresh] == [r.text for r in again]
    assert "Process: imported nbagent_probe_first (with the modules they need)" in fresh[0].text
    assert "Process:" not in fresh[1].text
    shown = [p for p in fresh[1].value if isinstance(p, Shown) and p.label == "Process"]
    assert shown and "imported nbagent_probe_called (by code it called)" in shown[0].value
    assert not [p for p in again[1].value if isinstance(p, Shown) and p.label == "Process"]
