"""Approve, Deny, Always allow and Stop, clicked in a real kernel exactly as a browser clicks.

On ipykernel ≥ 7.4 the ``%agent`` cell awaits its run, so the clicks arrive while the cell is
still running; on 6.29 a run that may ask goes on in the background. Both are tested (the
``kernel`` fixture runs each test on both kernels).
"""

from __future__ import annotations

import textwrap
from typing import Any

from .kernel import Kernel

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def setup_run(kernel: Kernel, turns: str, *, tools: str = "") -> int:
    """Define tools and a ScriptedModel in the kernel; returns the widget bookmark."""
    code = textwrap.dedent(
        """
        from nbagent.models import ScriptedModel, Call, Turn, Pause, Text
        import nbagent.notebook
        ran = []

        @tool(needs_approval=True)
        def delete_file(path: str) -> str:
            \"\"\"Delete a file.\"\"\"
            ran.append(path)
            return f"deleted {path}"
        """
    )
    kernel.execute(code + textwrap.dedent(tools))
    kernel.execute(
        f"model = ScriptedModel({turns})\nnbagent.notebook.current_session().set_model(model)"
    )
    in_cell(kernel)
    return kernel.mark()


def in_cell(kernel: Kernel) -> bool:
    """This kernel lets a cell await a run that waits for clicks (ipykernel ≥ 7.4); asked once
    (at :func:`setup_run`), since the kernel cannot answer while a cell runs."""
    known = getattr(kernel, "_in_cell", None)
    if known is None:
        known = bool(kernel.eval("nbagent.notebook.core.frontend.awaiting_cells_take_clicks()[0]"))
        kernel._in_cell = known  # type: ignore[attr-defined]
    return known


def run_record(kernel: Kernel, msg_id: str) -> dict[str, Any] | None:
    """The run's saved record, once the run ended and its output became static."""
    for output in kernel.cell_outputs(msg_id):
        record = output.get("metadata", {}).get("nbagent")
        if record and record.get("stop_reason"):
            return dict(record)
    return None


def wait_ended(kernel: Kernel, msg_id: str) -> dict[str, Any]:
    """Wait for the cell and for its run; return the run's record."""
    kernel.finish(msg_id, allow_errors=True)
    return dict(kernel.wait_for(lambda: run_record(kernel, msg_id), what="the run's end"))


DELETE_THEN_DONE = '[Turn("I will delete it.", Call("delete_file", {"path": "a.txt"})), "Done."]'


def test_approve_while_the_cell_waits_and_the_next_line_has_the_result(kernel: Kernel) -> None:
    since = setup_run(kernel, DELETE_THEN_DONE)
    cell = kernel.submit("%agent --new -o res Delete a.txt\nprint('next line:', res.text)")
    approve = kernel.wait_for(lambda: kernel.buttons("Approve", enabled=True, since=since))
    assert len(approve) == 1
    if in_cell(kernel):
        assert kernel.running(cell)  # the cell waits for the run: Run All goes in order
    kernel.click(approve[0])
    kernel.click(approve[0])  # a double click: the second one must do nothing
    record = wait_ended(kernel, cell)
    assert record["stop_reason"] == "finished"
    assert kernel.eval("ran") == ["a.txt"]
    assert kernel.eval("len(model.requests)") == 2
    assert kernel.eval("model.requests[1].messages[-1].results[0].text") == "deleted a.txt"
    assert kernel.eval("res.stop_reason") == "finished"
    assert kernel.eval("res.text") == "Done."
    text = kernel.cell_text(cell)
    if in_cell(kernel):
        assert "next line: Done." in text
    else:  # the cell ran on: the result was not there yet, and it said so
        assert kernel.replies[cell]["content"]["ename"] == "RunNotFinishedError"
        assert "in the background" in text
    # the saved output: plain outputs only, the decision in words, the widgets closed
    outputs = kernel.cell_outputs(cell)
    assert not [o for o in outputs if WIDGET_MIME in o.get("data", {})]
    html = kernel.cell_text(cell, "text/html")
    assert "I will delete it." in html and "approved by you" in html and "deleted a.txt" in html
    assert "Done." in kernel.cell_text(cell, "text/markdown")
    run_widgets = list(kernel.widgets)[since:]
    assert run_widgets
    kernel.wait_for(lambda: set(run_widgets) <= kernel.closed, what="every widget closed")
    # a click after the run ended changes nothing and raises nothing
    kernel.click(approve[0])
    kernel.drain(0.5)
    assert kernel.eval("ran") == ["a.txt"]


def test_deny_reason_reaches_the_model_and_the_call_never_runs(kernel: Kernel) -> None:
    since = setup_run(kernel, DELETE_THEN_DONE)
    cell = kernel.submit("%agent --new Delete a.txt")
    deny = kernel.wait_for(lambda: kernel.buttons("Deny", enabled=True, since=since))
    reason = kernel.wait_for(lambda: kernel.widget_ids("TextModel", since=since))
    assert len(reason) == 1
    kernel.type_into(reason[0], "keep that file, it is the only copy")
    kernel.click(deny[0])
    record = wait_ended(kernel, cell)
    assert kernel.eval("ran") == []
    sent = kernel.eval("model.requests[1].messages[-1].results[0].text")
    assert "keep that file, it is the only copy" in sent
    assert kernel.eval("model.requests[1].messages[-1].results[0].is_error") is True
    assert "denied by you: keep that file" in kernel.cell_text(cell, "text/html")
    assert record["calls"][0]["approval"] == {
        "approved": False,
        "reason": "keep that file, it is the only copy",
        "by": "person",
        "always": False,
    }


def test_always_allow_is_shown_and_can_be_revoked(kernel: Kernel) -> None:
    turns = (
        '[Turn(Call("delete_file", {"path": "a"})), "one", '
        'Turn(Call("delete_file", {"path": "b"})), "two", '
        'Turn(Call("delete_file", {"path": "c"})), "three"]'
    )
    since = setup_run(kernel, turns)
    first = kernel.submit("%agent --new first")
    always = kernel.wait_for(lambda: kernel.buttons("Always allow", enabled=True, since=since))
    kernel.click(always[0])
    wait_ended(kernel, first)
    second_mark = kernel.mark()
    second = kernel.submit("%agent --new second")
    wait_ended(kernel, second)
    assert kernel.eval("ran") == ["a", "b"]
    assert kernel.buttons("Approve", since=second_mark) == []  # --new keeps the rule
    # "Always allow" became a rule like any other: named on the card, listed, removable
    assert "allowed by rule: allow delete_file" in kernel.cell_text(second, "text/html")
    rules = kernel.execute("%agent rules")
    assert "allow delete_file" in str(rules) and "%agent rules remove 1" in str(rules)
    config = kernel.execute("%agent config")
    assert "#1 allow delete_file" in str(config)
    kernel.execute("%agent rules remove delete_file")
    third_mark = kernel.mark()
    third = kernel.submit("%agent third")
    deny = kernel.wait_for(lambda: kernel.buttons("Deny", enabled=True, since=third_mark))
    kernel.click(deny[0])
    wait_ended(kernel, third)
    assert kernel.eval("ran") == ["a", "b"]
    assert "No approval rules" in str(kernel.execute("%agent rules"))


def test_stop_cancels_a_running_tool_and_leaves_a_valid_history(kernel: Kernel) -> None:
    tools = """
    import asyncio

    @tool
    async def slow(seconds: float) -> str:
        \"\"\"Wait a while.\"\"\"
        await asyncio.sleep(seconds)
        return "slept"
    """
    since = setup_run(
        kernel, '[Turn("Waiting.", Call("slow", {"seconds": 60})), "never"]', tools=tools
    )
    cell = kernel.submit("%agent --new -o res wait")
    kernel.wait_for(
        lambda: any("slow" in h and "running" in h for h in kernel.html_texts(since)),
        what="the tool running",
    )
    stop = kernel.buttons("Stop", enabled=True, since=since)
    assert len(stop) == 1
    kernel.click(stop[0])
    record = wait_ended(kernel, cell)
    assert kernel.replies[cell]["content"]["status"] == "ok"  # Stop is not an error
    assert record["stop_reason"] == "cancelled"
    assert kernel.eval("res.stop_reason") == "cancelled"
    messages = "nbagent.notebook.current_session().agent.messages"
    assert kernel.eval(f"type({messages}[-1]).__name__") == "ToolMessage"
    assert "cancelled" in kernel.eval(f"{messages}[-1].results[0].text")
    kernel.execute('model.add("after the stop")')
    again = kernel.submit("%agent again")
    assert wait_ended(kernel, again)["stop_reason"] == "finished"


def test_stop_while_waiting_for_approval_folds_the_bar_and_later_clicks_do_nothing(
    kernel: Kernel,
) -> None:
    since = setup_run(kernel, DELETE_THEN_DONE)
    cell = kernel.submit("%agent --new Delete a.txt")
    approve = kernel.wait_for(lambda: kernel.buttons("Approve", enabled=True, since=since))
    kernel.click(kernel.buttons("Stop", since=since)[0])
    record = wait_ended(kernel, cell)
    assert record["stop_reason"] == "cancelled"
    kernel.click(approve[0])
    kernel.drain(0.5)
    assert kernel.eval("ran") == []
    assert kernel.eval("nbagent.notebook.current_session().approver.pending()") == []
    # the bar folded away before the view became static
    bars = [
        c
        for c, s in list(kernel.widgets.items())[since:]
        if "nbagent-approval" in (s.get("_dom_classes") or ())
    ]
    assert len(bars) == 1
    layout = kernel.widgets[bars[0]]["layout"].removeprefix("IPY_MODEL_")
    assert kernel.widgets[layout].get("display") == "none"


def test_one_rule_for_every_run_that_starts_while_another_waits(kernel: Kernel) -> None:
    """A run asked for while another waits for a click is queued, whatever its policy."""
    turns = (
        '[Turn("First.", Call("delete_file", {"path": "a"})), "first done", '
        'Turn("Second.", Call("delete_file", {"path": "b"})), "second done"]'
    )
    since = setup_run(kernel, turns)
    kernel.execute("nbagent.notebook.current_session().stop()")
    # the first run waits in the background: it was started from inside a function
    kernel.execute("def ask(line):\n    get_ipython().run_line_magic('agent', line)\n")
    kernel.execute("ask('--new first question')")
    approve = kernel.wait_for(lambda: kernel.buttons("Approve", enabled=True, since=since))
    second_mark = kernel.mark()
    second = kernel.submit("%agent --approve auto -o res2 second question")
    kernel.wait_for(
        lambda: "queued" in " ".join(kernel.html_texts(second_mark)), what="the queued note"
    )
    kernel.drain(0.5)
    assert kernel.streams(second_mark) == []  # the second has not started
    kernel.click(approve[0])
    record = wait_ended(kernel, second)
    assert record["stop_reason"] == "finished"
    assert kernel.eval("ran") == ["a", "b"]
    texts = kernel.eval(
        "[type(m).__name__ + ':' + getattr(m, 'text', '') "
        "for m in nbagent.notebook.current_session().agent.messages]"
    )
    assert texts == [
        "UserMessage:first question",
        "AssistantMessage:First.",
        "ToolMessage:",
        "AssistantMessage:first done",
        "UserMessage:second question",
        "AssistantMessage:Second.",
        "ToolMessage:",
        "AssistantMessage:second done",
    ]


def test_a_policy_run_needs_no_click_and_blocks_the_cell(kernel: Kernel) -> None:
    for policy in ("auto", "deny"):
        since = setup_run(kernel, DELETE_THEN_DONE)
        cell = kernel.submit(f"%agent --new --approve {policy} -o res Delete a.txt\nres.text")
        kernel.finish(cell)
        assert kernel.eval("res.stop_reason") == "finished"
        assert kernel.eval("ran") == (["a.txt"] if policy == "auto" else [])
        assert kernel.buttons("Approve", since=since) == []
        words = "approved by policy" if policy == "auto" else "denied by policy"
        assert words in kernel.cell_text(cell, "text/html")
        assert "'Done.'" in kernel.cell_text(cell)  # the cell's last line saw the result


def test_prompts_that_end_with_a_question_mark_are_prompts(kernel: Kernel) -> None:
    setup_run(kernel, '["It is warm.", "Still warm.", "Warm again."]')
    line = kernel.submit('%agent --approve auto Please weather "Oslo", is it warm?')
    assert wait_ended(kernel, line)["prompt"] == 'Please weather "Oslo", is it warm?'
    assigned = kernel.submit("answer = %agent --approve auto and now?\nanswer.text")
    kernel.finish(assigned)
    assert kernel.eval("answer.text") == "Still warm."
    cell = kernel.submit("%%agent --approve auto\nIs it warm\non two lines?")
    assert wait_ended(kernel, cell)["prompt"] == "Is it warm\non two lines?"
    assert "not found" not in kernel.cell_text(line) + kernel.cell_text(cell)
    asked = kernel.submit("%agent?")
    kernel.finish(asked)
    pages = kernel.replies[asked]["content"]["payload"]
    help_text = pages[0]["data"]["text/plain"]
    assert "%agent [options] PROMPT" in help_text
    assert "::" not in help_text
