"""``%agent --kernel`` in a real kernel (ipykernel 7.4 and 6.29): the agent's snippets run in the
notebook's namespace, shown in their card and read by the model; approval, deny, edit and rules
apply; Stop and Kernel > Interrupt stop a running snippet; the diff, undo and cells; and a
recorded analysis replayed with no model and no network."""

from __future__ import annotations

import json
import re
import textwrap
import time
from pathlib import Path

from nbagent.course.provenance import FollowUp, Provenance, read_output, sha256_digest
from nbagent.kernel import RUNNING_NOTE
from nbagent.notebook.shown.render import CODE_COLORS

from .kernel import Kernel
from .test_kernel_approval import in_cell, setup_run, wait_ended
from .test_kernel_edit import type_text

#: The cell that gives the kernel its data (as a person's notebook would).
DATA = textwrap.dedent(
    """
    import pandas as pd
    import matplotlib
    sales = pd.DataFrame({"region": ["n", "s", "n", "e"], "amount": [10, 12, 11, 400]})
    """
)
ANALYSIS = (
    "import matplotlib.pyplot as plt\n"
    "sales['z'] = (sales.amount - sales.amount.mean()) / sales.amount.std()\n"
    "outliers = sales[sales.z.abs() > 1]\n"
    "print(f'{len(outliers)} outlier(s)')\n"
    "plt.bar(sales.region, sales.amount)\n"
    "outliers"
)


def _turns(*codes: str, end: str | None = "Done.") -> str:
    calls = [f"Turn(Call('run_python', {{'code': {c!r}}}))" for c in codes]
    return f"[{', '.join(calls + ([repr(end)] if end is not None else []))}]"


def _start(kernel: Kernel, turns: str) -> int:
    kernel.execute("%agent rules clear")
    since = setup_run(kernel, turns, tools=DATA)
    return since


def _approve_all(kernel: Kernel, cell: str, since: int, count: int) -> None:
    """Click Approve on each snippet as it asks (the cell waits meanwhile)."""
    clicked: set[str] = set()
    for _ in range(count):
        found = kernel.wait_for(
            lambda: [
                b for b in kernel.buttons("Approve", enabled=True, since=since) if b not in clicked
            ],
            what="a snippet asking for approval",
        )
        clicked.add(found[0])
        kernel.click(found[0])


def _sent(kernel: Kernel) -> str:
    """What the model read last: the last tool message, as text, and its image count."""
    return str(
        kernel.eval(
            "[(r.text, sum(1 for p in r.content if type(p).__name__ == 'ImagePart'))"
            " for r in model.requests[-1].messages[-1].results]"
        )
    )


def test_a_snippet_reaches_the_card_and_the_model(kernel: Kernel) -> None:
    since = _start(kernel, _turns(ANALYSIS, "1 / 0"))
    cell = kernel.submit("%agent --new --kernel find the outliers in sales")
    _approve_all(kernel, cell, since, 2)
    record = wait_ended(kernel, cell)
    assert record["stop_reason"] == "finished"
    # the namespace changed, as a cell's would
    assert kernel.eval("list(sales.columns)") == ["region", "amount", "z"]
    assert kernel.eval("len(outliers)") == 1
    # the model read stdout, the value as a table in text, the figure as an image, the diff
    first = kernel.eval("model.requests[1].messages[-1].results[0].text")
    assert first.startswith("1 outlier(s)\n[figure 1: ")
    assert "Out: pandas.DataFrame (1×3)" in first and "e     400" in first
    assert "+outliers = pandas.DataFrame (1×3)" in first and "sales changed in place" in first
    images = kernel.eval(
        "sum(type(p).__name__ == 'ImagePart'"
        " for p in model.requests[1].messages[-1].results[0].content)"
    )
    assert images == 1
    second = kernel.eval("model.requests[2].messages[-1].results[0].text")
    assert "ZeroDivisionError: division by zero" in second and "1 / 0" in second
    # the person's saved card: the code highlighted, the table, the figure, the traceback
    html = kernel.cell_text(cell, "text/html")
    number = f'<span style="color:{CODE_COLORS["Literal.Number"]}">'
    assert (
        "sales[sales.z.abs() &gt; 1]" in html.replace("</span>", "").replace(number, "")
        or "outliers" in html
    )
    assert f'<span style="color:{CODE_COLORS["Keyword"]}">import' in html  # highlighted
    assert "<table" in html and "400" in html and "Namespace" in html
    assert "ZeroDivisionError" in html
    images_out = [o for o in kernel.cell_outputs(cell) if "image/png" in o.get("data", {})]
    if in_cell(kernel):
        assert len(images_out) == 1
    else:  # a background run updates the one output it began with: the image is inside
        assert html.count('src="data:image/png;base64,') == 1
    # captured once: the figure is not drawn again under the next cell
    after = kernel.submit("x_after = 1")
    kernel.finish(after)
    assert not [o for o in kernel.cell_outputs(after) if "image/png" in o.get("data", {})]


def _next_button(kernel: Kernel, label: str, since: int, seen: set[str]) -> str:
    """The first enabled button ``label`` of a card that had none before (the next call's)."""
    found = kernel.wait_for(
        lambda: [b for b in kernel.buttons(label, enabled=True, since=since) if b not in seen],
        what=f"the next call's {label}",
    )
    return str(found[0])


def test_deny_edit_and_rules_apply_to_snippets(kernel: Kernel) -> None:
    since = _start(kernel, _turns("denied_ran = True", "edited = 'model'", "ruled = 1"))
    cell = kernel.submit("%agent --new --kernel three steps")
    seen: set[str] = set()
    kernel.wait_for(lambda: kernel.buttons("Edit", enabled=True, since=since))  # the whole bar
    for label in ("Approve", "Edit", "Always allow"):
        seen |= set(kernel.buttons(label, since=since))
    kernel.click(kernel.buttons("Deny", enabled=True, since=since)[0])
    edit = _next_button(kernel, "Edit", since, seen)
    approve = _next_button(kernel, "Approve", since, seen)
    for label in ("Approve", "Edit", "Always allow"):
        seen |= set(kernel.buttons(label, since=since))
    kernel.click(edit)
    type_text(kernel, since, "edited = 'model'", "edited = 'person'")
    kernel.click(approve)
    kernel.click(_next_button(kernel, "Always allow", since, seen))
    wait_ended(kernel, cell)
    assert kernel.eval("'denied_ran' in dir()") is False
    assert kernel.eval("edited") == "person" and kernel.eval("ruled") == 1
    # "always allow" became a rule: the next snippet runs without asking
    kernel.execute("model.add(Turn(Call('run_python', {'code': 'later = 2'})), 'ok')")
    nxt = kernel.submit("%agent --kernel once more")
    wait_ended(kernel, nxt)
    assert kernel.eval("later") == 2
    assert kernel.eval("nbagent.notebook.current_session().rules.numbered()[0][1].text") == (
        "allow run_python"
    )


def test_without_kernel_the_tools_are_not_offered(kernel: Kernel) -> None:
    _start(kernel, "['No kernel tools here.']")
    kernel.execute("%agent --new --kernel --approve auto hello")  # registered once
    kernel.execute("model.add('plain')")
    kernel.execute("%agent plain run")
    offered = kernel.eval("[d.name for d in model.requests[-1].tools]")
    assert "run_python" not in offered and "list_variables" not in offered


def _running(kernel: Kernel, since: int) -> None:
    kernel.wait_for(
        lambda: any("run_python" in h and "running" in h for h in kernel.html_texts(since)),
        what="the snippet running",
    )


def test_stop_interrupts_a_running_snippet(kernel: Kernel) -> None:
    since = _start(kernel, _turns("spins = 0\nwhile True:\n    spins += 1", end=None))
    cell = kernel.submit("%agent --new --kernel spin")  # asks: the cell takes clicks
    _approve_all(kernel, cell, since, 1)
    _running(kernel, since)
    # the card says whose it is to stop a snippet that never returns
    kernel.wait_for(
        lambda: kernel.widget_ids("LabelModel", since=since, value=RUNNING_NOTE),
        what="the card's note on how to stop it",
    )
    time.sleep(0.5)
    stop = kernel.wait_for(lambda: kernel.buttons("Stop", enabled=True, since=since))
    kernel.click(stop[0])
    record = wait_ended(kernel, cell)
    assert record["stop_reason"] == "cancelled"
    spins = kernel.eval("spins")
    time.sleep(0.3)
    assert spins > 0 and kernel.eval("spins") == spins  # the loop stopped
    snippet = kernel.eval("nbagent.notebook.current_session().kernel.snippets()[-1].status")
    assert snippet == "interrupted"
    kernel.execute("model.add(Turn(Call('run_python', {'code': 'after_stop = spins'})), 'ok')")
    again = kernel.submit("%agent --kernel --approve auto again")
    assert wait_ended(kernel, again)["stop_reason"] == "finished"
    assert kernel.eval("after_stop") == spins


def test_kernel_interrupt_stops_a_running_snippet(kernel: Kernel) -> None:
    _start(kernel, _turns("ticks = 0\nwhile True:\n    ticks += 1", end=None))
    since = kernel.mark()
    cell = kernel.submit("%agent --new --kernel --approve auto tick")
    _running(kernel, since)
    time.sleep(0.5)
    kernel.km.interrupt_kernel()
    kernel.finish(cell, allow_errors=True, timeout=30)
    reply = kernel.replies[cell]["content"]
    assert reply["ename"] == "KeyboardInterrupt"
    shown = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(reply["traceback"]))
    assert "stopped by a kernel interrupt" in shown
    ticks = kernel.eval("ticks")
    time.sleep(0.3)
    assert kernel.eval("ticks") == ticks
    kernel.execute("model.add('after the interrupt')")
    again = kernel.submit("%agent --kernel --approve auto still there?")
    assert wait_ended(kernel, again)["stop_reason"] == "finished"


def test_undo_restores_in_place_changes_and_keeps_the_persons_newer_values(kernel: Kernel) -> None:
    code = (
        "sales['double'] = sales.amount * 2\nnotes = ['checked']\nsales_total = sales.amount.sum()"
    )
    since = _start(kernel, _turns(code))
    cell = kernel.submit("%agent --new --kernel --approve auto add a column")
    wait_ended(kernel, cell)
    assert kernel.eval("list(sales.columns)") == ["region", "amount", "double"]
    assert kernel.buttons("Undo this run's changes", since=since)
    kernel.execute("sales_total = -1  # the person's own value")
    undo = kernel.submit("%agent undo")
    kernel.finish(undo)
    said = kernel.cell_text(undo)
    assert "Restored: sales." in said and "Removed (the agent added them): notes." in said
    assert "Left as it is: sales_total: it was bound again" in said
    assert kernel.eval("list(sales.columns)") == ["region", "amount"]
    assert kernel.eval("'notes' in dir()") is False and kernel.eval("sales_total") == -1
    # the button became text when the next cell ran (a widget would not survive saving)
    last = kernel.cell_outputs(cell)[-1]
    assert "application/vnd.jupyter.widget-view+json" not in last["data"]
    assert re.fullmatch(
        r"To put back what run-[a-z0-9]+-\d+ changed: %agent undo run-[a-z0-9]+-\d+",
        last["data"]["text/plain"],
    )


def test_the_undo_button_undoes_the_run(kernel: Kernel) -> None:
    since = _start(kernel, _turns("clicked_var = 1\nsales['flag'] = True"))
    cell = kernel.submit("%agent --new --kernel --approve auto flag them")
    wait_ended(kernel, cell)
    (button,) = kernel.wait_for(lambda: kernel.buttons("Undo this run's changes", since=since))
    kernel.click(button)
    kernel.wait_for(lambda: kernel.eval("'clicked_var' in dir()") is False, what="the undo")
    assert kernel.eval("list(sales.columns)") == ["region", "amount"]
    kernel.wait_for(
        lambda: "Undid run-" in json.dumps(kernel.cell_outputs(cell)), what="the report"
    )


def test_cells_come_below_in_order_and_headless_sees_the_code(kernel: Kernel) -> None:
    _start(kernel, _turns("step_one = 1", "step_two = step_one + 1", "1/0"))
    cell = kernel.submit("%agent --new --kernel --approve auto two steps")
    run_id = wait_ended(kernel, cell)["run_id"]
    cells = kernel.submit(f"%agent cells {run_id}")
    kernel.finish(cells)
    (payload,) = kernel.replies[cells]["content"]["payload"]
    assert payload["source"] == "set_next_input" and payload["replace"] is False
    text = payload["text"]
    assert text.index("step_one = 1") < text.index("step_two = step_one + 1") < text.index("# 1/0")
    assert f"# nbagent {run_id} · step 1" in text and "(left out: it raised an error)" in text
    assert "step_two = step_one + 1" in kernel.cell_text(cells)  # for headless runs too
    # provenance: the run's record lists its snippets, and the command's output says which
    # runs' code became the new cell, with that cell's digest (the report finds the cell by it)
    found = [read_output(o.get("metadata", {})) for o in kernel.cell_outputs(cells)]
    (follow_up,) = [f for f in found if isinstance(f, FollowUp)]
    assert follow_up.action == "cells" and follow_up.runs == (run_id,)
    assert follow_up.code_digest == sha256_digest(text)
    records = [read_output(o.get("metadata", {})) for o in kernel.cell_outputs(cell)]
    (record,) = [r for r in records if isinstance(r, Provenance)]
    assert [s.code for s in record.snippets] == ["step_one = 1", "step_two = step_one + 1", "1/0"]


def test_a_recorded_analysis_replays_with_no_model_and_no_network(
    kernel: Kernel, tmp_path: Path
) -> None:
    kernel.execute(f"import os; os.environ['NBAGENT_RECORDINGS'] = {str(tmp_path)!r}")
    _start(kernel, _turns(ANALYSIS, end="One outlier: e, 400."))
    # none of the names the analysis binds, whatever the tests before left in this kernel (the
    # snippet's result says which names it made and which it changed)
    unbound = "for _name in ('outliers', 'plt'):\n    globals().pop(_name, None)\n"
    kernel.execute(unbound)
    kernel.execute("%agent --new --record --kernel --approve auto find the outliers")
    assert list(tmp_path.glob("*.json"))
    # a student's kernel: the same data, no model, and no network at all
    kernel.execute(DATA + unbound + "nbagent.notebook.current_session().set_model(None)")
    kernel.execute(
        "import socket\n"
        "def _no_network(*a, **k):\n    raise OSError('network blocked by the test')\n"
        "socket.socket.connect = _no_network\nsocket.create_connection = _no_network"
    )
    replay = kernel.submit("%agent --new --kernel --approve auto find the outliers")
    record = wait_ended(kernel, replay)
    assert record["stop_reason"] == "finished"
    assert kernel.eval("len(outliers)") == 1 and "z" in kernel.eval("list(sales.columns)")
    assert [o for o in kernel.cell_outputs(replay) if "image/png" in o.get("data", {})] or (
        'src="data:image/png;base64,' in kernel.cell_text(replay, "text/html")
    )
    assert "One outlier: e, 400." in kernel.cell_text(replay)
    # the data changed: the snippet's result departs from the recording, and says so
    kernel.execute(DATA + "\nsales.loc[3, 'amount'] = 13")
    departed = kernel.submit("%agent --new --kernel --approve auto find the outliers")
    ended = wait_ended(kernel, departed)
    assert ended["stop_reason"] == "failed"
    said = kernel.cell_text(departed)
    assert "ReplayDivergedError" in said and "now the result of run_python" in said
    assert "2 outlier(s)" in said


def test_exit_input_and_protected_names_in_a_real_kernel(kernel: Kernel) -> None:
    """exit() would shut the kernel down, input() would wait for nobody, and rebinding nbagent
    or a tool would break the session: each gets a clear result and the kernel goes on."""
    tools = """
        @tool
        def helper() -> str:
            \"\"\"Help.\"\"\"
            return "ok"
        """
    kernel.execute("%agent rules clear")
    setup_run(kernel, _turns("exit()", "input('name? ')", "del nbagent\nhelper = 1"), tools=tools)
    cell = kernel.submit("%agent --new --kernel --approve auto try these")
    assert wait_ended(kernel, cell)["stop_reason"] == "finished"
    read = [kernel.eval(f"model.requests[{i}].messages[-1].results[0].text") for i in (1, 2, 3)]
    assert "ExitRefused: exit() and quit() are not available" in read[0]
    assert "InputRefused: input() is not available" in read[1]
    assert "Restored" in read[2] and "nbagent" in read[2] and "helper" in read[2]
    assert kernel.eval("type(helper).__name__") == "Tool"
    assert kernel.eval("get_ipython().exit_now") is False
    again = kernel.submit("print('still here', nbagent.__name__)")
    kernel.finish(again)
    assert "still here nbagent" in kernel.cell_text(again)
