"""Undo's promise on a plain namespace: exact fingerprints of every kind of object a notebook
holds, read without running the person's code; chains of steps; and a cost linear in the names.
The same in real kernels: tests/notebook/test_kernel_undo.py."""

from __future__ import annotations

import collections
import copy
import dataclasses
import enum
import sys
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest

from nbagent import Agent, AutoApprove, kernel_tools
from nbagent.kernel._exact import Budget, Print, exact_print, unchanged
from nbagent.kernel._namespace import Before
from nbagent.models import Call, ScriptedModel, Turn

from ..conftest import assert_history_valid

np = pytest.importorskip("numpy")
pd = pytest.importorskip("pandas")


@dataclasses.dataclass
class Sale:
    region: str
    amounts: list[float]


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self) -> None:
        self.a = [1]


class Point(NamedTuple):
    x: int
    tags: list[str]


class Color(enum.Enum):
    RED = 1


class Loud:
    """Every method a fingerprint could be tempted to call raises: none may run."""

    def __init__(self) -> None:
        self.values = [1, 2]

    def __eq__(self, other: object) -> bool:
        raise AssertionError("__eq__ ran")

    def __hash__(self) -> int:
        raise AssertionError("__hash__ ran")

    def __repr__(self) -> str:
        raise AssertionError("__repr__ ran")

    def __len__(self) -> int:
        raise AssertionError("__len__ ran")

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise AssertionError("__reduce_ex__ ran")

    def __getattribute__(self, name: str) -> Any:
        if name != "__class__":
            raise AssertionError(f"getattr {name} ran")
        return object.__getattribute__(self, name)


class Hidden:
    """Its attributes are a property: reading them would run its code."""

    @property  # type: ignore[misc]
    def __dict__(self) -> dict[str, Any]:  # type: ignore[override]
        raise AssertionError("the __dict__ property ran")


def _objects() -> dict[str, Any]:
    frame = pd.DataFrame(
        {
            "n": np.arange(300_000.0),
            "s": ["x"] * 300_000,
            "c": pd.Categorical(["a", "b"] * 150_000),
            "i": pd.array([1, None] * 150_000, dtype="Int64"),
            "t": pd.date_range("2020", periods=300_000, freq="s", tz="UTC"),
        }
    )
    return {
        "array": np.zeros(1_000_000),
        "strided": np.arange(24.0).reshape(4, 6)[:, ::2],
        "objects": np.array([1, "a", [2]], dtype=object),
        "numbers": list(range(50_000)),
        "nested": [[1, 2], {"k": {1, 2}}, (3, [4])],
        "frame": frame,
        "series": pd.Series([1.5, 2.5], name="s"),
        "multi": pd.DataFrame({"v": [1, 2]}, index=pd.MultiIndex.from_tuples([(1, "a"), (2, "b")])),
        "sale": Sale("north", [1.0, 2.0]),
        "slotted": Slotted(),
        "point": Point(1, ["a"]),
        "enums": [Color.RED],
        "counter": collections.Counter("hello"),
        "ordered": collections.OrderedDict(a=1, b=2),
        "default": collections.defaultdict(list, a=[1]),
        "queue": collections.deque([1, 2], maxlen=5),
        "bag": {1, "a", (2, 3)},
        "loud": Loud(),
        "raw": bytearray(b"xyz"),
    }


MUTATIONS: dict[str, Callable[[Any], None]] = {
    "array": lambda v: v.__setitem__(123457, 1.0),
    "strided": lambda v: v.__setitem__((2, 1), -1.0),
    "objects": lambda v: v[2].append(3),
    "numbers": lambda v: v.__setitem__(12345, "mine"),
    "nested": lambda v: v[1]["k"].add(3),
    "frame": lambda v: v.iloc.__setitem__((250_001, 1), "mine"),
    "series": lambda v: v.__setitem__(1, 9.0),
    "multi": lambda v: v.__setitem__("v", [3, 4]),
    "sale": lambda v: v.amounts.append(3.0),
    "slotted": lambda v: setattr(v, "b", 1),
    "point": lambda v: v.tags.append("b"),
    "enums": lambda v: v.append(Color.RED),
    "counter": lambda v: v.update("z"),
    "ordered": lambda v: v.move_to_end("a"),
    "default": lambda v: setattr(v, "default_factory", set),
    "queue": lambda v: v.append(3),
    "bag": lambda v: v.discard(1),
    "loud": lambda v: object.__getattribute__(v, "values").append(3),
    "raw": lambda v: v.append(1),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_an_exact_fingerprint_sees_any_change_and_no_change(name: str) -> None:
    value = _objects()[name]
    taken = exact_print(value, Budget(256 << 20))
    assert isinstance(taken, Print), taken
    assert unchanged(value, taken)  # read again: the same
    duplicate = value.copy(deep=True) if name in ("frame", "series", "multi") else None
    if duplicate is None and name != "loud":
        duplicate = copy.deepcopy(value)
    if duplicate is not None:  # undo's copy reads as what it was copied from
        assert unchanged(duplicate, taken)
    MUTATIONS[name](value)
    assert not unchanged(value, taken)


def test_a_set_reads_the_same_whatever_order_it_iterates_in() -> None:
    grown = set(range(1000))
    for n in range(1, 1000, 2):
        grown.discard(n)
    fresh = set(range(0, 1000, 2))  # equal, laid out differently
    taken = exact_print(grown, Budget(1 << 20))
    assert isinstance(taken, Print) and unchanged(fresh, taken)


def test_what_cannot_be_read_without_running_code_is_said_never_run() -> None:
    budget = Budget(1 << 20)
    assert exact_print([Hidden()], budget) == (
        "it holds an object of type tests.Hidden, which nbagent cannot read without running "
        "its code"
    )
    assert exact_print(threading.Lock(), budget) == (
        "nbagent cannot read an object of type _thread.lock without running its code"
    )
    masked = np.ma.masked_array([1, 2], mask=[0, 1])  # an ndarray subclass
    assert "numpy.MaskedArray" in str(exact_print(masked, budget))
    loops: list[Any] = [1]
    loops.append(loops)  # a cycle reads as one
    assert isinstance(exact_print(loops, budget), Print)
    holder = Slotted()
    ring = {1, holder, Color.RED}
    holder.b = ring
    taken = exact_print([ring, holder], budget)  # a cycle through a set
    assert isinstance(taken, Print) and unchanged([ring, holder], taken)

    class Meta(type):
        def __eq__(cls, other: object) -> bool:
            raise AssertionError("the metaclass's __eq__ ran")

        def __hash__(cls) -> int:
            raise AssertionError("the metaclass's __hash__ ran")

    odd = Meta("Odd", (), {})
    assert exact_print([odd()], budget) == (
        "it holds an object of type tests.Odd, which nbagent cannot read without running its code"
    )


def test_an_object_over_the_budget_is_one_undo_cannot_vouch_for() -> None:
    budget = Budget(1_000_000)
    assert exact_print(np.zeros(200_000), budget).startswith("larger than the budget")  # type: ignore[union-attr]
    small = exact_print(np.zeros(100_000), budget)
    assert isinstance(small, Print)
    assert "the fingerprints of the other names used the budget" in str(
        exact_print(np.zeros(100_000), budget)
    )
    grown = np.zeros(100_000)
    taken = exact_print(grown, Budget(1_000_000))
    assert isinstance(taken, Print)
    assert not unchanged(np.zeros(110_000), taken)  # more to read than before: it changed


def _run(namespace: dict[str, Any], *runs: tuple[str, ...]) -> Any:
    """Each run a list of snippets, one run_python call each, all on one toolkit."""
    kit = kernel_tools(namespace)
    for codes in runs:
        turns = [Turn(Call("run_python", {"code": code})) for code in codes]
        agent = Agent(ScriptedModel([*turns, "done"]), list(kit), approver=AutoApprove())
        agent.run_sync("go")
        assert_history_valid(agent.messages)
    return kit


def test_steps_that_changed_one_object_in_turn_are_undone_to_its_first_state() -> None:
    ns: dict[str, Any] = {"xs": [0]}
    kit = _run(ns, ("xs.append(1)", "xs.append(2)", "xs.append(3)"))
    report = kit.undo()
    assert ns["xs"] == [0] and report.restored == ["xs"] and not report.conflicts


def test_a_change_between_two_runs_stays_and_the_report_says_how_far_undo_went() -> None:
    ns: dict[str, Any] = {"xs": [0]}
    kit = kernel_tools(ns)
    first_turn, second_turn = (
        Turn(Call("run_python", {"code": code})) for code in ("xs.append(1)", "xs.append(2)")
    )
    model = ScriptedModel([first_turn, "done", second_turn, "done"])
    agent = Agent(model, list(kit), approver=AutoApprove())
    agent.run_sync("first")
    ns["xs"].append("mine")  # the person, between the runs
    agent.run_sync("second")
    first, second = (s.run_id for s in kit.snippets())
    report = kit.undo([first, second])
    assert ns["xs"] == [0, 1, "mine"]  # back to before the second run, and no further
    assert report.conflicts == {
        "xs": "it was changed in place after the agent's step (kept your newer value); it is "
        f"as it was before {second} · step 1"
    }
    assert report.restored == [] and report.snippets == [f"{second} · step 1", f"{first} · step 1"]


def test_a_name_rebound_after_an_in_place_change_gets_the_copy_back() -> None:
    ns: dict[str, Any] = {"xs": [0], "ys": [0]}
    ys = ns["ys"]
    kit = _run(ns, ("xs.append(1)\nxs = 'gone'\nalias = ys\nys = None",))
    report = kit.undo()
    assert sorted(report.restored) == ["xs", "ys"] and report.removed == ["alias"]
    assert ns["xs"] == [0]  # its copy: the object it found was changed first
    assert ns["ys"] is ys  # the object itself: it had not changed


def _operations(work: Callable[[], Any]) -> int:
    """Python and C calls made while ``work`` runs: a count, not a time."""
    count = 0

    def tick(frame: Any, event: str, arg: Any) -> None:
        nonlocal count
        count += 1

    sys.setprofile(tick)
    try:
        work()
    finally:
        sys.setprofile(None)
    return count


def _rebinding(n: int) -> tuple[int, int, int]:
    """Operations of the diff, of undo and of cells, for a snippet that rebound ``n`` names."""
    ns: dict[str, Any] = {f"v{i}": i for i in range(n)}
    before = Before.take(ns, None, frozenset(), 1 << 20)
    for i in range(n):
        ns[f"v{i}"] = -i - 1
    diffing = _operations(lambda: before.diff(ns, None))
    for i in range(n):
        ns[f"v{i}"] = i
    kit = _run(ns, (f"for i in range({n}):\n    globals()[f'v{{i}}'] = -i - 1",))
    undoing = _operations(kit.undo)
    assert ns["v7"] == 7
    celling = _operations(kit.cells)
    return diffing, undoing, celling


def test_diff_undo_and_cells_cost_grows_linearly_with_the_names() -> None:
    small, large = _rebinding(1_000), _rebinding(4_000)
    for what, few, many in zip(("diff", "undo", "cells"), small, large, strict=True):
        assert many <= 5 * few + 100, (
            f"{what}: {few:,} operations for 1,000 names, {many:,} for 4,000"
        )


@pytest.mark.parametrize(
    ("setup", "code"),
    [
        ("np.zeros(1_000_000)", "obj[123457] = 2.0"),
        ("list(range(50_000))", "obj[31_337] = -1"),
        ("{i: [i] for i in range(20_000)}", "obj[17_001].append(0)"),
    ],
)
def test_an_agent_change_to_one_item_of_a_large_object_is_seen_and_undone(
    setup: str, code: str
) -> None:
    # the in-place check after a snippet compared a sample: one item changed among a million
    # was not in the card's Namespace table, and undo left the agent's change in place
    ns: dict[str, Any] = {"obj": eval(setup, {"np": np})}
    expected = copy.deepcopy(ns["obj"])
    kit = _run(ns, (code,))
    (snippet,) = kit.snippets()
    assert snippet.diff is not None and snippet.diff.names("changed") == ["obj"]
    report = kit.undo()
    assert report.restored == ["obj"] and not report.conflicts
    same = ns["obj"] == expected
    assert bool(same.all()) if hasattr(same, "all") else same
