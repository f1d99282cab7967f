"""A model that repeats itself, in a real kernel: the folded card ("the same call, 3 times")
live and saved, Go on / Allow repeats / Stop clicked as a browser clicks them, the headless
stop, ``%agent allow repeats TOOL``, and the text view's card updated in place."""

from __future__ import annotations

from .kernel import Kernel
from .test_kernel_approval import WIDGET_MIME, setup_run, wait_ended

TOOLS = """
listed = []

@tool
def list_variables() -> str:
    \"\"\"The variables in the namespace.\"\"\"
    listed.append(1)
    return "df: DataFrame (3 rows)"
"""
#: The same call, ten times, then an answer.
LOOP = "[" + ", ".join(f'Turn(Call("list_variables", {{}}, id="c{i}"))' for i in range(10))
LOOP += ', "The columns are a and b."]'

STOP_TIP = "Do not make the call: end the run here"


def _cards(kernel: Kernel, cell: str) -> int:
    return kernel.cell_text(cell).count("[tool] list_variables")


def test_go_on_then_stop_and_one_card_counts_the_repeats_live_and_saved(kernel: Kernel) -> None:
    since = setup_run(kernel, LOOP, tools=TOOLS)
    cell = kernel.submit("%agent --new -o looped What are the columns of df?")
    go_on = kernel.wait_for(lambda: kernel.buttons("Go on", enabled=True, since=since))
    assert len(go_on) == 1
    # live: the three calls so far are one card that counts them, then the fourth asks
    live = "\n".join(kernel.html_texts(since))
    assert "the same call, 3 times (the same result each time)" in live
    assert "The model asks for list_variables {} a 4th time" in live
    kernel.click(go_on[0])
    kernel.click(go_on[0])  # a double click does nothing more
    stops = kernel.wait_for(
        lambda: kernel.widget_ids("ButtonModel", since=since, tooltip=STOP_TIP)[1:],
        what="the second repeat pause",
    )
    kernel.click(stops[-1])
    record = wait_ended(kernel, cell)
    assert record["stop_reason"] == "repeated_call"
    assert kernel.eval("len(listed)") == 6 and kernel.eval("looped.stop_reason") == "repeated_call"
    # saved: one card for the six, the pauses in words, the unrun seventh call, no widgets
    assert _cards(kernel, cell) == 2
    plain = kernel.cell_text(cell)
    assert "the same call, 6 times (the same result each time)" in plain
    assert "the model asked for list_variables again, after 3 times that got nowhere; went on" in (
        plain
    )
    assert "after 6 times that got nowhere; stopped the run" in plain
    assert "This call was not run, and the run was stopped" in plain
    assert "stopped: the model made the same call again and again" in plain
    outputs = kernel.cell_outputs(cell)
    assert not [o for o in outputs if WIDGET_MIME in o.get("data", {})]
    folded = [c for c in record["calls"] if c["repeat_of"] == "c0"]
    assert [c["id"] for c in folded] == ["c1", "c2", "c3", "c4", "c5"]
    assert kernel.eval("nbagent.notebook.current_session().agent.messages[-1].results[0].is_error")


def test_allow_repeats_goes_on_and_keeps_a_rule(kernel: Kernel) -> None:
    since = setup_run(kernel, LOOP, tools=TOOLS)
    cell = kernel.submit("%agent --new What are the columns of df?")
    allow = kernel.wait_for(
        lambda: kernel.buttons("Allow repeats of list_variables", enabled=True, since=since)
    )
    kernel.click(allow[0])
    record = wait_ended(kernel, cell)
    assert record["stop_reason"] == "finished"
    assert kernel.eval("len(listed)") == 10
    assert "the same call, 10 times" in kernel.cell_text(cell)
    rules = kernel.execute("%agent rules")
    assert "allow repeats list_variables" in "".join(
        str(m["content"].get("text", m["content"].get("data", ""))) for m in rules
    )
    # with the rule, the next run is not asked
    since = setup_run(kernel, LOOP, tools=TOOLS)
    cell = kernel.submit("%agent --new again?")
    record = wait_ended(kernel, cell)
    assert record["stop_reason"] == "finished" and not kernel.buttons("Go on", since=since)
    assert "allowed by the rule `allow repeats list_variables`" in kernel.cell_text(cell)
    kernel.execute("%agent rules clear")


def test_with_approve_auto_nobody_is_asked_and_the_run_stops_on_its_own_reason(
    kernel: Kernel,
) -> None:
    since = setup_run(kernel, LOOP, tools=TOOLS)
    cell = kernel.submit("%agent --new --approve auto What are the columns of df?")
    record = wait_ended(kernel, cell)
    assert record["stop_reason"] == "repeated_call"
    assert not kernel.buttons("Go on", since=since)
    assert kernel.eval("len(listed)") == 3
    assert _cards(kernel, cell) == 2  # the three as one, and the fourth, not run
    assert "the same call, 3 times" in kernel.cell_text(cell)
    assert "nobody could be asked whether to go on" in kernel.cell_text(cell)


def test_the_allow_repeats_magic_makes_a_rule_and_a_bad_one_says_why(kernel: Kernel) -> None:
    setup_run(kernel, LOOP, tools=TOOLS)
    out = kernel.execute("%agent allow repeats list_variables")
    said = "".join(m["content"].get("text", "") for m in out if m["msg_type"] == "stream")
    assert "allow repeats list_variables" in said and "rules remove" in said
    bad = kernel.execute("%agent allow repeats no_such_tool", allow_errors=True)
    said = str([m["content"] for m in bad])
    assert "there is no tool named 'no_such_tool'" in said
    assert kernel.eval("nbagent.notebook.current_session().rules.numbered()[-1][1].text") == (
        "allow repeats list_variables"
    )
    kernel.execute("%agent rules clear")


def test_the_text_view_updates_the_first_card_in_place(kernel: Kernel) -> None:
    setup_run(kernel, LOOP, tools=TOOLS)
    kernel.execute("import os; os.environ['NBAGENT_MODE'] = 'headless'")
    try:
        cell = kernel.submit("%agent --new --approve auto What are the columns of df?")
        record = wait_ended(kernel, cell)
    finally:
        kernel.execute("os.environ.pop('NBAGENT_MODE', None)")
    assert record["stop_reason"] == "repeated_call"
    assert _cards(kernel, cell) == 2
    assert "the same call, 3 times" in kernel.cell_text(cell)
    assert "the same call, 3 times" in kernel.cell_text(cell, "text/html")
