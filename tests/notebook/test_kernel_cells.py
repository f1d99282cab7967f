"""``%agent`` cells behave like cells: in order under Run All, and stopped by Kernel > Interrupt.

Cells are sent the way a frontend's Run All sends them: all at once, each queued in the kernel
behind the one before. Interrupts are the kernel manager's real SIGINT.
"""

from __future__ import annotations

import re
import textwrap
import time
from pathlib import Path

import pytest

from .conftest import kernel_env, start_kernel
from .kernel import Kernel
from .test_kernel_approval import WIDGET_MIME, in_cell, run_record, setup_run

SLOW_TOOLS = """
import asyncio, time
from nbagent.tools import ToolContext

@tool
async def slow(seconds: float) -> str:
    \"\"\"Wait a while.\"\"\"
    await asyncio.sleep(seconds)
    return "slept"

@tool
def crunch(context: ToolContext) -> str:
    \"\"\"A slow sync tool that checks for cancellation.\"\"\"
    for _ in range(600):
        if context.cancelled():
            return "stopped early"
        time.sleep(0.1)
    return "crunched"
"""


def test_run_all_goes_cell_by_cell_and_o_is_set_before_the_next_cell(kernel: Kernel) -> None:
    since = setup_run(
        kernel,
        '[Turn("Deleting.", Call("delete_file", {"path": "a"})), "Deleted a.", "Second."]',
    )
    policy = "" if in_cell(kernel) else "--approve auto "
    cells = [
        f"%agent --new {policy}-o first Delete a",
        "print('first:', first.stop_reason, first.text)",
        "second = %agent --approve auto and then?",
        "print('second:', second.text)",
    ]
    ids = [kernel.submit(code) for code in cells]  # like Run All: queued in the kernel
    if in_cell(kernel):
        approve = kernel.wait_for(lambda: kernel.buttons("Approve", enabled=True, since=since))
        assert kernel.running(ids[0])
        kernel.click(approve[0])
    for cell in ids:
        kernel.finish(cell)
    assert "first: finished Deleted a." in kernel.cell_text(ids[1])
    assert "second: Second." in kernel.cell_text(ids[3])
    assert kernel.eval("ran") == ["a"]


def test_a_background_result_used_too_early_says_so(kernel: Kernel) -> None:
    if in_cell(kernel):
        pytest.skip("ipykernel ≥ 7.4 awaits the run in its cell: there is no early use")
    since = setup_run(kernel, '[Turn(Call("delete_file", {"path": "a"})), "Done."]')
    first = kernel.submit("%agent --new -o early Delete a")
    use = kernel.submit("early.text")
    kernel.finish(first)
    kernel.finish(use, allow_errors=True)
    reply = kernel.replies[use]["content"]
    assert reply["ename"] == "RunNotFinishedError"
    assert "'Delete a'" in reply["evalue"] and "still running" in reply["evalue"]
    assert "in the background" in kernel.cell_text(first)
    approve = kernel.wait_for(lambda: kernel.buttons("Approve", enabled=True, since=since))
    kernel.click(approve[0])
    kernel.wait_for(lambda: run_record(kernel, first), what="the run's end")
    assert kernel.eval("early.text") == "Done."  # rebound to the RunResult at the end


def _interrupt(kernel: Kernel, cell: str) -> float:
    time.sleep(0.2)
    started = time.monotonic()
    kernel.km.interrupt_kernel()
    kernel.finish(cell, allow_errors=True, timeout=30)
    return time.monotonic() - started


def _after_interrupt(kernel: Kernel, cell: str, tail: str) -> None:
    reply = kernel.replies[cell]["content"]
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt"
    assert "NOT REACHED" not in kernel.cell_text(cell)
    # the person sees one line saying what stopped, not a page of nbagent's awaiting frames
    # (the rewritten `await __import__(...)` line, runner.py): the view above shows the run
    shown = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(reply["traceback"]))
    assert shown.startswith("KeyboardInterrupt: ") and "stopped by a kernel interrupt" in shown
    assert "\n" not in shown and ".py" not in shown and "__import__" not in shown, shown
    record = kernel.wait_for(lambda: run_record(kernel, cell), what="the static output")
    assert record["stop_reason"] == "cancelled"
    # the run's own output says why too (the error above may never be sent: a shutdown)
    assert "the run was stopped by a kernel interrupt" in kernel.cell_text(cell, "text/html")
    messages = "nbagent.notebook.current_session().agent.messages"
    assert kernel.eval(f"type({messages}[-1]).__name__") == tail
    assert kernel.eval("nbagent.notebook.current_session().active") is None
    assert kernel.eval("nbagent.notebook.current_session().approver.pending()") == []
    # the kernel is ready, and the next run works on a valid history
    kernel.execute('model.add("next answer")')
    after = kernel.submit("%agent --approve auto -o nxt hello\nprint(nxt.text)")
    kernel.finish(after)
    assert "next answer" in kernel.cell_text(after)


@pytest.mark.parametrize("where", ["streaming", "async tool", "sync tool"])
def test_an_interrupt_stops_the_run_and_the_kernel_is_ready(kernel: Kernel, where: str) -> None:
    turns = {
        "streaming": '[Turn(Text("word " * 400, chunks=400))]',
        "async tool": '[Turn("Waiting.", Call("slow", {"seconds": 60}))]',
        "sync tool": '[Turn("Crunching.", Call("crunch"))]',
    }[where]
    since = setup_run(kernel, turns, tools=SLOW_TOOLS)
    kernel.execute("model.chunk_delay = 0.02")
    cell = kernel.submit("%agent --new --approve auto -o res go\nprint('NOT REACHED')")
    if where == "streaming":
        kernel.wait_for(lambda: kernel.streams(since), what="text streaming")
    else:
        kernel.wait_for(
            lambda: any("running" in h for h in kernel.html_texts(since)), what="the tool"
        )
    waited = _interrupt(kernel, cell)
    assert waited < 10, f"the interrupted cell took {waited:.1f} s to end"
    _after_interrupt(kernel, cell, "AssistantMessage" if where == "streaming" else "ToolMessage")
    assert kernel.eval("res.stop_reason") == "cancelled"


def test_an_interrupt_while_waiting_for_approval_answers_the_call(kernel: Kernel) -> None:
    since = setup_run(kernel, '[Turn("I will delete it.", Call("delete_file", {"path": "a"}))]')
    cell = kernel.submit("%agent --new go\nprint('NOT REACHED')")
    approve = kernel.wait_for(lambda: kernel.buttons("Approve", enabled=True, since=since))
    if in_cell(kernel):
        _interrupt(kernel, cell)
        _after_interrupt(kernel, cell, "ToolMessage")
    else:  # the run is in the background: the interrupt reaches it all the same
        kernel.finish(cell)
        time.sleep(0.2)
        kernel.km.interrupt_kernel()
        record = kernel.wait_for(lambda: run_record(kernel, cell), what="the static output")
        assert record["stop_reason"] == "cancelled"
        tail = "nbagent.notebook.current_session().agent.messages[-1]"
        assert "cancelled" in kernel.eval(f"{tail}.results[0].text")
    kernel.click(approve[0])  # too late: nothing runs
    kernel.drain(0.5)
    assert kernel.eval("ran") == []


def test_tools_that_print_and_a_cell_with_code_around_the_magic(kernel: Kernel) -> None:
    tools = textwrap.dedent(
        """
        @tool
        def shout(word: str) -> str:
            \"\"\"Print and return a word.\"\"\"
            print("tool says", word)
            return word.upper()
        """
    )
    setup_run(kernel, '[Turn(Call("shout", {"word": "hi"})), "Shouted."]', tools=tools)
    cell = kernel.submit("before = 1\n%agent --approve auto -o r shout\nprint('after', r.text)")
    kernel.finish(cell)
    text = kernel.cell_text(cell)
    assert "tool says hi" in text and "after Shouted." in text
    assert text.index("tool says hi") < text.index("after Shouted.")


def test_a_kernel_shut_down_mid_run_leaves_a_finished_output(
    kernel_python: str, tmp_path: Path
) -> None:
    """Shutting the kernel down while a run waits (Kernel > Shut Down in JupyterLab): the run's
    output becomes the finished static one, so a notebook saved afterwards has no live widget."""
    k = start_kernel(kernel_python, tmp_path, kernel_env())
    try:
        k.execute("%load_ext nbagent\nimport nbagent\nfrom nbagent import tool")
        since = setup_run(k, '[Turn("I will delete it.", Call("delete_file", {"path": "a"}))]')
        cell = k.submit("%agent Delete a")
        k.wait_for(lambda: k.buttons("Approve", enabled=True, since=since))
        k.km.shutdown_wait_time = 60.0  # a loaded machine: let it finish rather than be killed
        k.km.shutdown_kernel(now=False)
        outputs = k.wait_static(cell)
        assert not [o for o in outputs if WIDGET_MIME in o.get("data", {})]
        html = k.cell_text(cell, "text/html")
        assert "I will delete it." in html and "cancelled" in html
        if in_cell(k):  # (a background run on ipykernel 6 may be cancelled by the loop first)
            # jupyter_client interrupts a kernel before asking it to shut down: when that
            # interrupt ends the run first, its output says so instead; either way it says why
            assert (
                "the kernel shut down before the run ended" in html
                or "the run was stopped by a kernel interrupt" in html
            ), html
    finally:
        k.kc.stop_channels()
        if k.km.is_alive():
            k.km.shutdown_kernel(now=True)


def test_a_function_that_cannot_be_stopped_is_shown_as_running_then_ended(kernel: Kernel) -> None:
    tools = """
    import time

    @tool
    def stubborn(seconds: float) -> str:
        \"\"\"A sync tool that never checks for cancellation.\"\"\"
        time.sleep(seconds)
        return "done late"
    """
    since = setup_run(kernel, '[Turn("Working.", Call("stubborn", {"seconds": 2.5}))]', tools=tools)
    cell = kernel.submit("%agent --new --approve auto go")
    # the tool's own card says it runs (the run's status line says "running" from the start,
    # and a stop before the tool starts leaves no function behind)
    kernel.wait_for(
        lambda: any("stubborn" in h and "running ·" in h for h in kernel.html_texts(since)),
        what="the tool running",
    )
    if in_cell(kernel):
        kernel.click(kernel.buttons("Stop", since=since)[0])
    else:  # ipykernel 6 takes no click while a cell waits: Kernel > Interrupt stops it
        kernel.km.interrupt_kernel()
    kernel.finish(cell, allow_errors=True)
    assert "its function is still running" in kernel.cell_text(cell, "text/html")
    # the card says it: the loop's log notice is not repeated as stderr beside the card
    streams = [o["text"] for o in kernel.cell_outputs(cell) if o["output_type"] == "stream"]
    assert not any("abandoned" in text for text in streams), streams
    kernel.wait_for(
        lambda: "its function ended" in kernel.cell_text(cell, "text/html"),
        timeout=15,
        what="the card saying the function ended",
    )
    # nor later, when the function ends
    streams = [o["text"] for o in kernel.cell_outputs(cell) if o["output_type"] == "stream"]
    assert not any("abandoned" in text for text in streams), streams


def test_config_says_the_same_before_and_after_a_run(kernel: Kernel) -> None:
    kernel.execute("nbagent.notebook.current_session().set_model('offline')")
    before = str(kernel.execute("%agent config"))
    cell = kernel.submit("%agent --new --approve auto hello")
    kernel.finish(cell)
    after = str(kernel.execute("%agent config"))

    def rows(text: str) -> list[str]:
        return [w for w in ("offline", "OfflineModel", "object") if w in text]

    assert rows(before) == rows(after) == ["offline"]
