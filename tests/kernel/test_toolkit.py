"""The kernel toolkit on a plain namespace (no IPython): what a snippet shows, what it changed,
undo, cells, and what hostile code gets. Real kernels: tests/notebook/test_kernel_snippets.py."""

from __future__ import annotations

import asyncio
import re
import tracemalloc
from typing import Any

import pytest

from nbagent import Agent, AutoApprove, KernelLimits, kernel_tools, tool
from nbagent.content import Shown, Table
from nbagent.events import RunResult, ToolFinished
from nbagent.models import Call, ScriptedModel, Turn

from ..conftest import assert_history_valid


def _run(namespace: dict[str, Any], *codes: str, **options: Any) -> tuple[Any, list[Any]]:
    """Run each code as one run_python call, in order; (toolkit, each call's ToolResult)."""
    kit = kernel_tools(namespace, **options)
    turns = [Turn(Call("run_python", {"code": code})) for code in codes]
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


def test_a_snippet_shows_what_a_cell_would() -> None:
    ns: dict[str, Any] = {}
    _, (result,) = _run(ns, "import sys\nprint('hello')\nprint('careful', file=sys.stderr)\n6 * 7")
    text = result.text
    assert text.startswith("hello\n[stderr]\ncareful\nOut: 42")
    assert "Namespace: +sys = module sys." in text
    assert not result.is_error


def test_a_trailing_semicolon_hides_the_value_as_in_a_cell() -> None:
    ns: dict[str, Any] = {}
    _, (quiet, loud) = _run(ns, "x = [1]\nx.append(2);  # quiet", "len(x)")
    assert "Out:" not in quiet.text and ns["x"] == [1, 2]
    assert "Out: 2" in loud.text


def test_a_syntax_error_runs_nothing_and_says_where() -> None:
    ns: dict[str, Any] = {"x": 1}
    kit, (result,) = _run(ns, "x = 2\nprint(x\n")
    assert result.is_error and "SyntaxError" in result.text and "line 2" in result.text
    assert "Nothing ran" in result.text and ns["x"] == 1
    assert kit.snippets()[0].status == "refused"


def test_an_error_shows_the_snippets_own_traceback_and_what_ran_before_it() -> None:
    ns: dict[str, Any] = {}
    _, (result,) = _run(ns, "a = 1\nb = [][3]\n")
    text = result.text
    assert result.is_error and "IndexError: list index out of range" in text
    assert 'File "<nbagent run-' in text and "b = [][3]" in text  # its own line, shown
    assert "nbagent/kernel" not in text and "_execute.py" not in text  # not nbagent's frames
    assert "+a = 1" in text and ns["a"] == 1


def test_the_diff_names_added_rebound_deleted_and_changed_in_place() -> None:
    ns: dict[str, Any] = {"keep": 1, "gone": "x", "xs": [1, 2], "n": 1.5, "other": {"a": 1}}
    kit, (result,) = _run(ns, "del gone\nxs.append(3)\nn = 'now text'\nnew = {'k': 1}\n")
    diff = kit.snippets()[0].diff
    kinds = {c.name: c.kind for c in diff.changes}
    assert kinds == {"gone": "deleted", "xs": "changed", "n": "rebound", "new": "added"}
    line = next(s for s in result.text.splitlines() if s.startswith("Namespace:"))
    assert "+new = dict (1 items)" in line and "-gone (was 'x')" in line
    assert "n: 1.5 → 'now text'" in line and "xs changed in place (list (3 items))" in line
    table = next(p for p in result.value if isinstance(p, Shown) and p.label == "Namespace")
    assert isinstance(table.value, Table) and table.value.rows[2][:2] == ("xs", "changed in place")


def test_undo_puts_back_rebound_deleted_added_and_in_place_changes() -> None:
    pd = pytest.importorskip("pandas")
    np = pytest.importorskip("numpy")
    df = pd.DataFrame({"x": [1, 2, 3]})
    arr = np.zeros(4)
    ns: dict[str, Any] = {"df": df, "arr": arr, "xs": [1, 2], "label": "old", "tmp": 3}
    kit, _ = _run(
        ns,
        "df.drop(index=0, inplace=True)\narr[0] = 9\nxs.append(3)",
        "label = 'new'\ndel tmp\nmade = 1",
    )
    report = kit.undo()
    assert sorted(report.restored) == ["arr", "df", "label", "tmp", "xs"]
    assert report.removed == ["made"] and not report.conflicts and not report.unrestorable
    assert ns["df"]["x"].tolist() == [1, 2, 3] and ns["arr"][0] == 0 and ns["xs"] == [1, 2]
    assert ns["label"] == "old" and ns["tmp"] == 3 and "made" not in ns
    assert "files the code wrote" in str(report)
    assert not kit.undo()  # nothing left to undo
    assert [s.undone for s in kit.snippets()] == [True, True]


def test_undo_never_overwrites_what_the_person_changed_since() -> None:
    ns: dict[str, Any] = {"a": [1], "b": [1], "c": 0}
    kit, _ = _run(ns, "a.append(2)\nb.append(2)\nc = 5\nd = 1")
    ns["a"] = ["the person's own"]  # rebound by the person afterwards
    ns["b"].append("theirs too")  # changed in place afterwards
    ns["d"] = 2  # the name the agent added, rebound
    report = kit.undo()
    assert set(report.conflicts) == {"a", "b", "d"}
    assert "changed in place after" in report.conflicts["b"]
    assert ns["a"] == ["the person's own"] and ns["b"] == [1, 2, "theirs too"] and ns["d"] == 2
    assert report.restored == ["c"] and ns["c"] == 0  # what was not touched is put back


def test_an_object_over_the_copy_budget_is_never_copied_and_undo_says_so() -> None:
    np = pytest.importorskip("numpy")
    ns: dict[str, Any] = {"big": np.zeros(1_000_000), "small": [1]}  # 8 MB
    limits = KernelLimits(copy_budget=1_000_000)
    kit, (result,) = _run(ns, "big[0] = 1\nsmall.append(2)", limits=limits)
    assert "Undo cannot restore in-place changes to big (larger than the copy budget" in result.text
    report = kit.undo()
    assert "big" in report.unrestorable and "copy budget" in report.unrestorable["big"]
    assert report.restored == ["small"] and ns["big"][0] == 1


def test_a_big_dataframe_the_snippet_does_not_name_is_neither_copied_nor_read() -> None:
    pd = pytest.importorskip("pandas")
    np = pytest.importorskip("numpy")
    big = pd.DataFrame({"a": np.zeros(25_000_000), "b": np.ones(25_000_000)})  # 400 MB
    ns: dict[str, Any] = {"big": big, "xs": list(range(10))}
    kit = kernel_tools(ns)
    agent = Agent(
        ScriptedModel([Turn(Call("run_python", {"code": "xs.append(1)"})), "ok"]),
        list(kit),
        approver=AutoApprove(),
    )
    tracemalloc.start()
    try:
        agent.run_sync("go")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20_000_000, peak  # no copy of the 400 MB frame, no read of it
    assert [c.name for c in kit.snippets()[0].diff.changes] == ["xs"]


def test_nbagents_own_names_and_tools_cannot_be_taken_away() -> None:
    import nbagent

    @tool
    def helper() -> str:
        """Help."""
        return "ok"

    ns: dict[str, Any] = {"nbagent": nbagent, "helper": helper, "data": 1}
    _kit, (result,) = _run(ns, "del nbagent\nhelper = None\ndata = 2")
    assert ns["nbagent"] is nbagent and ns["helper"] is helper and ns["data"] == 2
    assert "Restored helper, nbagent" in result.text or "Restored nbagent, helper" in result.text


def test_input_and_exit_get_a_clear_result_and_nothing_ends() -> None:
    ns: dict[str, Any] = {}
    _, (asked, exited) = _run(
        ns, "name = input('your name? ')", "before = 1\nimport sys\nsys.exit(3)"
    )
    assert asked.is_error and "input() is not available to code the agent runs" in asked.text
    assert exited.is_error and "sys.exit(3): nothing exited, the kernel goes on" in exited.text
    assert ns["before"] == 1


def test_a_thread_that_outlives_the_snippet_is_said() -> None:
    ns: dict[str, Any] = {}
    code = (
        "import threading, time\n"
        "t = threading.Thread(target=time.sleep, args=(2,), name='slowpoke')\nt.start()"
    )
    _, (result,) = _run(ns, code)
    assert "Threads it started are still running: slowpoke" in result.text


def test_huge_output_displays_and_reprs_are_bounded_with_markers() -> None:
    ns: dict[str, Any] = {}
    limits = KernelLimits(max_output_chars=1_000, max_repr_chars=500)
    _, (printed, value) = _run(
        ns, "print('x' * 5_000_000)", "big = 'y' * 50_000_000\nbig", limits=limits
    )
    assert len(printed.text) < 2_000 and "5,000,001 more characters" not in printed.text
    assert "4,999,001 more characters of output were not kept" in printed.text
    assert len(value.text) < 2_000 and "'yyyy" in value.text


def test_a_thousand_figures_send_a_few_images_and_close_the_rest() -> None:
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns: dict[str, Any] = {}
    code = (
        "import matplotlib.pyplot as plt\n"
        "for i in range(1000):\n    plt.figure()\n    plt.plot([i, 1])"
    )
    _, (result,) = _run(ns, code, limits=KernelLimits(max_images=3))
    assert len(result.images) == 3
    assert "997 more figures or images were not kept" in result.text
    assert plt.get_fignums() == []  # every one closed: none drawn again under the next cell


def test_cells_hold_the_code_that_ran_in_order_and_leave_out_what_failed() -> None:
    ns: dict[str, Any] = {}
    kit, _ = _run(ns, "a = 1", "b = a + 1\nraise ValueError('no')", "c = a * 3")
    cells = kit.cells()
    assert len(cells) == 3
    assert cells[0].startswith("# nbagent run-") and cells[0].endswith("step 1\na = 1\n")
    assert "(left out: it raised an error)" in cells[1] and "# b = a + 1" in cells[1]
    assert cells[2].endswith("c = a * 3\n")
    fresh: dict[str, Any] = {}
    exec("\n".join(cells), fresh)  # Run All re-creates the result without the agent
    assert fresh["c"] == 3 and "b" not in fresh


async def test_stop_interrupts_a_running_snippet_and_the_next_run_works() -> None:
    ns: dict[str, Any] = {"spins": 0}
    kit = kernel_tools(ns)
    model = ScriptedModel([Turn(Call("run_python", {"code": "while True:\n    spins += 1"}))])
    agent = Agent(model, list(kit), approver=AutoApprove())
    run = agent.start("spin")
    for _ in range(200):
        await asyncio.sleep(0.01)
        if ns["spins"] > 1000:
            break
    run.cancel()
    result: RunResult = await run.result()
    assert result.stop_reason == "cancelled"
    assert_history_valid(agent.messages)
    for _ in range(100):  # the thread ends: interrupted, not abandoned
        if kit.snippets()[0].status != "running":
            break
        await asyncio.sleep(0.02)
    assert kit.snippets()[0].status == "interrupted"
    spun = ns["spins"]
    await asyncio.sleep(0.1)
    assert ns["spins"] == spun  # nothing runs any more
    model.add(Turn(Call("run_python", {"code": "after = spins"})), "done")
    again = await agent.run("once more")
    assert again.stop_reason == "finished" and ns["after"] == spun


async def test_a_snippet_blocked_in_c_is_reported_running_and_ends_later() -> None:
    ns: dict[str, Any] = {}
    kit = kernel_tools(ns)
    model = ScriptedModel(
        [Turn(Call("run_python", {"code": "import time\ntime.sleep(2.5)\nwoke = 1"}))]
    )
    agent = Agent(model, list(kit), approver=AutoApprove())
    events: list[Any] = []
    run = agent.start("sleep")

    async def watch() -> None:
        async for event in run.events():
            events.append(event)

    watcher = asyncio.ensure_future(watch())
    await asyncio.sleep(0.5)
    run.cancel()
    await run.result()
    await watcher
    finished = next(e for e in events if isinstance(e, ToolFinished))
    assert finished.status == "cancelled" and finished.abandoned is not None
    for _ in range(100):
        if kit.snippets()[0].status != "running":
            break
        await asyncio.sleep(0.05)
    # time.sleep is not interrupted: the snippet ends when it returns, and says it was stopped
    assert kit.snippets()[0].status == "interrupted" and "woke" not in ns


def test_list_and_describe_run_no_code_and_summarise() -> None:
    pd = pytest.importorskip("pandas")

    class Touchy:
        def __repr__(self) -> str:
            raise AssertionError("repr must not be called")

        def __len__(self) -> int:
            raise AssertionError("len must not be called")

    ns: dict[str, Any] = {
        "sales": pd.DataFrame({"region": ["n", "s"] * 50, "amount": range(100)}),
        "touchy": Touchy(),
        "n": 3,
        "_private": 1,
    }
    kit = kernel_tools(ns)
    model = ScriptedModel(
        [
            Turn(Call("list_variables", {})),
            Turn(Call("describe_variable", {"name": "sales"})),
            Turn(Call("describe_variable", {"name": "nope"})),
            Turn(Call("describe_variable", {"name": "n"})),
            "ok",
        ]
    )
    agent = Agent(model, list(kit))  # no approver: these need none
    finished: list[Any] = []
    agent.observe(
        lambda _run, event: (
            finished.append(event.result) if isinstance(event, ToolFinished) else None
        )
    )
    agent.run_sync("look")
    listed, described, missing, number = finished
    assert "sales: pandas.DataFrame (100×2)" in listed.text and "n: int (3)" in listed.text
    assert "touchy: tests.Touchy" in listed.text and "_private" not in listed.text
    assert re.search(r"columns: region \((object|str)\), amount \(int64\)", described.text)
    assert "memory: about " in described.text
    assert "first 5 rows" in described.text and described.text.count("\n") < 20
    assert missing.is_error and "no variable named 'nope'" in missing.text
    # what the person sees names the variable once ("sales: sales: pandas.DataFrame" it was)
    from nbagent.notebook.shown.render import result_outputs

    for shown, name in ((described, "sales"), (number, "n")):
        outputs = result_outputs(shown)
        plain = "\n".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
        assert plain.count(f"{name}: ") == 1 and plain.startswith(f"{name}: "), plain


def test_run_python_asks_for_approval_by_default_and_a_denied_snippet_never_runs() -> None:
    from nbagent import DenyAll

    ns: dict[str, Any] = {}
    kit = kernel_tools(ns)
    agent = Agent(
        ScriptedModel([Turn(Call("run_python", {"code": "ran = True"})), "ok"]),
        list(kit),
        approver=DenyAll(),
    )
    agent.run_sync("go")
    assert "ran" not in ns and kit.snippets() == []
    assert kit[0].needs_approval is True and kit[0].code_arguments == {"code": "python"}
