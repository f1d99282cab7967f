"""Approve, Deny, Always allow and Stop, clicked in a real kernel exactly as a browser clicks."""

from __future__ import annotations

import textwrap

import pytest

from .kernel import Kernel


def setup_run(kernel: Kernel, turns: str, *, tools: str = "") -> int:
    """Define tools and a ScriptedModel in the kernel; returns the widget bookmark."""
    code = textwrap.dedent(
        """
        from nbagent.models import ScriptedModel, Call, Turn, Pause
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
    return kernel.mark()


def wait_footer(kernel: Kernel, since: int, word: str) -> str:
    return kernel.wait_for(lambda: word in kernel.footer(since) and kernel.footer(since), what=word)


DELETE_THEN_DONE = '[Turn("I will delete it.", Call("delete_file", {"path": "a.txt"})), "Done."]'


def test_approve_runs_the_call_once_and_the_model_reads_its_result(kernel: Kernel) -> None:
    since = setup_run(kernel, DELETE_THEN_DONE)
    kernel.execute("%agent --new -o res Delete a.txt")
    approve = kernel.wait_for(lambda: kernel.buttons("Approve", enabled=True, since=since))
    assert len(approve) == 1
    kernel.click(approve[0])
    kernel.click(approve[0])  # a double click: the second one must do nothing
    wait_footer(kernel, since, "finished")
    assert kernel.eval("ran") == ["a.txt"]
    assert kernel.eval("len(model.requests)") == 2
    assert kernel.eval("model.requests[1].messages[-1].results[0].text") == "deleted a.txt"
    assert kernel.eval("res.stop_reason") == "finished"
    assert kernel.eval("res.text") == "Done."
    # the view: streamed text, the card's decision, every button disabled, the result shown
    texts = [kernel.stream_text(c) for c in kernel.streams(since)]
    assert "I will delete it." in texts and "Done." in texts
    assert any("approved by you" in h and "done" in h for h in kernel.html_texts(since))
    for label in ("Approve", "Deny", "Always allow", "Stop"):
        assert kernel.buttons(label, since=since)
        assert kernel.buttons(label, enabled=True, since=since) == [], label
    assert "deleted a.txt" in kernel.all_output_text(since)
    # a click after the run ended changes nothing and raises nothing
    kernel.click(approve[0])
    kernel.drain(0.5)
    assert kernel.eval("ran") == ["a.txt"]
    assert not [m for m in kernel.iopub if m["msg_type"] == "error"]


def test_deny_reason_reaches_the_model_and_the_call_never_runs(kernel: Kernel) -> None:
    since = setup_run(kernel, DELETE_THEN_DONE)
    kernel.execute("%agent --new Delete a.txt")
    deny = kernel.wait_for(lambda: kernel.buttons("Deny", enabled=True, since=since))
    reason = kernel.wait_for(lambda: kernel.widget_ids("TextModel", since=since))
    assert len(reason) == 1
    kernel.type_into(reason[0], "keep that file, it is the only copy")
    kernel.click(deny[0])
    wait_footer(kernel, since, "finished")
    assert kernel.eval("ran") == []
    sent = kernel.eval("model.requests[1].messages[-1].results[0].text")
    assert "keep that file, it is the only copy" in sent
    assert kernel.eval("model.requests[1].messages[-1].results[0].is_error") is True
    assert any("denied by you: keep that file" in h for h in kernel.html_texts(since))
    assert kernel.buttons("Approve", enabled=True, since=since) == []


def test_always_allow_skips_the_question_for_later_calls(kernel: Kernel) -> None:
    turns = (
        '[Turn(Call("delete_file", {"path": "a"})), "one", '
        'Turn(Call("delete_file", {"path": "b"})), "two"]'
    )
    since = setup_run(kernel, turns)
    kernel.execute("%agent --new first")
    always = kernel.wait_for(lambda: kernel.buttons("Always allow", enabled=True, since=since))
    kernel.click(always[0])
    wait_footer(kernel, since, "finished")
    second = kernel.mark()
    kernel.execute("%agent second")
    wait_footer(kernel, second, "finished")
    assert kernel.eval("ran") == ["a", "b"]
    assert kernel.buttons("Approve", since=second) == []  # nobody was asked the second time
    assert any("always allowed" in h for h in kernel.html_texts(second))
    assert kernel.eval("sorted(nbagent.notebook.current_session().approver.always_allowed)") == [
        "delete_file"
    ]
    kernel.execute("nbagent.notebook.current_session().approver.always_allowed.clear()")


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
    kernel.execute("%agent --new -o res wait")
    kernel.wait_for(
        lambda: any("slow" in h and "running" in h for h in kernel.html_texts(since)),
        what="the tool running",
    )
    stop = kernel.buttons("Stop", enabled=True, since=since)
    assert len(stop) == 1
    kernel.click(stop[0])
    wait_footer(kernel, since, "cancelled")
    assert kernel.eval("res.stop_reason") == "cancelled"
    assert any("cancelled" in h for h in kernel.html_texts(since) if "slow" in h)
    messages = "nbagent.notebook.current_session().agent.messages"
    assert kernel.eval(f"type({messages}[-1]).__name__") == "ToolMessage"
    assert "cancelled" in kernel.eval(f"{messages}[-1].results[0].text")
    # the session is free again
    kernel.execute('model.add("after the stop")')
    after = kernel.mark()
    kernel.execute("%agent again")
    wait_footer(kernel, after, "finished")


def test_stop_while_waiting_for_approval_makes_later_clicks_noops(kernel: Kernel) -> None:
    since = setup_run(kernel, DELETE_THEN_DONE)
    kernel.execute("%agent --new Delete a.txt")
    approve = kernel.wait_for(lambda: kernel.buttons("Approve", enabled=True, since=since))
    kernel.click(kernel.buttons("Stop", since=since)[0])
    wait_footer(kernel, since, "cancelled")
    kernel.click(approve[0])
    kernel.drain(0.5)
    assert kernel.eval("ran") == []
    assert kernel.buttons("Approve", enabled=True, since=since) == []
    assert kernel.eval("nbagent.notebook.current_session().approver.pending()") == []


def test_a_second_run_waits_for_the_first_instead_of_interleaving(kernel: Kernel) -> None:
    turns = '[Turn("First.", Call("delete_file", {"path": "a"})), "first done", "second done"]'
    since = setup_run(kernel, turns)
    kernel.execute("%agent --new first question")
    approve = kernel.wait_for(lambda: kernel.buttons("Approve", enabled=True, since=since))
    second = kernel.mark()
    kernel.execute("%agent second question")
    kernel.wait_for(lambda: "queued" in " ".join(kernel.html_texts(second)), what="queued")
    assert kernel.eval("len(model.requests)") == 1  # the second has not started
    kernel.click(approve[0])
    wait_footer(kernel, second, "finished")
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
        "AssistantMessage:second done",
    ]


def test_the_saved_output_gets_a_transcript_with_the_decisions(kernel: Kernel) -> None:
    since = setup_run(kernel, DELETE_THEN_DONE)
    start = len(kernel.iopub)
    kernel.execute("%agent --new Delete a.txt")
    deny = kernel.wait_for(lambda: kernel.buttons("Deny", enabled=True, since=since))
    kernel.click(deny[0])
    wait_footer(kernel, since, "finished")
    kernel.drain(0.3)
    updates = [m for m in kernel.iopub[start:] if m["msg_type"] == "update_display_data"]
    assert len(updates) == 1
    content = updates[0]["content"]
    shown = [m for m in kernel.iopub[start:] if m["msg_type"] == "display_data"]
    assert content["transient"]["display_id"] == shown[0]["content"]["transient"]["display_id"]
    data = content["data"]
    assert "application/vnd.jupyter.widget-view+json" in data
    assert "**🔧 delete_file** — denied by you" in data["text/markdown"]
    assert "Done." in data["text/plain"]
    record = content["metadata"]["nbagent"]
    assert record["calls"][0]["approval"] == {
        "approved": False,
        "reason": None,
        "by": "person",
        "always": False,
    }
    assert record["stop_reason"] == "finished"


@pytest.mark.parametrize("policy", ["auto", "deny"])
def test_a_policy_run_needs_no_click_and_blocks_the_cell(kernel: Kernel, policy: str) -> None:
    since = setup_run(kernel, DELETE_THEN_DONE)
    kernel.execute(f"%agent --new --approve {policy} -o res Delete a.txt")
    # the run finished inside the cell: its result is there as soon as the cell is
    assert kernel.eval("res.stop_reason") == "finished"
    assert kernel.eval("ran") == (["a.txt"] if policy == "auto" else [])
    assert kernel.buttons("Approve", since=since) == []
    kernel.drain(0.3)
    words = "approved by policy" if policy == "auto" else "denied by policy"
    assert any(words in h for h in kernel.html_texts(since))


def test_a_kernel_interrupt_cancels_a_foreground_run(kernel: Kernel) -> None:
    tools = """
    import time
    from nbagent.tools import ToolContext

    @tool
    def crunch(context: ToolContext) -> str:
        \"\"\"A slow sync tool that checks for cancellation.\"\"\"
        for _ in range(600):
            if context.cancelled():
                return "stopped early"
            time.sleep(0.1)
        return "crunched"
    """
    since = setup_run(kernel, '[Turn(Call("crunch")), "never"]', tools=tools)
    msg_id = kernel.kc.execute("%agent --new --approve auto -o res crunch")
    kernel.wait_for(
        lambda: any("crunch" in h and "running" in h for h in kernel.html_texts(since)),
        what="the tool running",
    )
    kernel.km.interrupt_kernel()
    reply = kernel.kc.get_shell_msg(timeout=30)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kernel.kc.get_shell_msg(timeout=30)
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    wait_footer(kernel, since, "cancelled")
    messages = "nbagent.notebook.current_session().agent.messages"
    assert kernel.eval(f"type({messages}[-1]).__name__") == "ToolMessage"
    assert kernel.eval("nbagent.notebook.current_session().active") is None
