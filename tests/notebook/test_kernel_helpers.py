"""Agents as tools in a real kernel: the helper's run nested in the calling card, its call
approved there, and Stop on the caller's card (or a kernel interrupt) stopping both with every
call answered."""

from __future__ import annotations

import textwrap

import pytest

from .kernel import Kernel
from .test_kernel_approval import in_cell, run_record, wait_ended
from .test_kernel_cells import _interrupt

SETUP = """
import asyncio
import nbagent.notebook
from nbagent import Agent
from nbagent.messages import ToolMessage
from nbagent.models import Call, FunctionModel, Turn
from nbagent.tools import tool as make_tool

ran = []
hold = asyncio.Event()

@make_tool(needs_approval=True)
async def delete(path: str) -> str:
    \"\"\"Delete a file.\"\"\"
    if path == "slow.txt":
        await hold.wait()
    ran.append(path)
    return f"deleted {path}"

def answered(request):
    return [r.text for m in request.messages if isinstance(m, ToolMessage) for r in m.results]

def helper_decide(request):
    asked = [m.text for m in request.messages if type(m).__name__ == "UserMessage"][0]
    results = answered(request)
    return Turn(Call("delete", {"path": asked})) if not results else results[-1]

def caller_decide(request):
    prompt = [m.text for m in request.messages if type(m).__name__ == "UserMessage"][-1]
    results = answered(request)
    return Turn(Call("cleaner", {"prompt": prompt})) if not results else "caller: " + results[-1]

helper = Agent(FunctionModel(helper_decide), [delete], name="cleaner", description="Cleans.")
session = nbagent.notebook.current_session()
session.set_model(FunctionModel(caller_decide))
session.register(helper.as_tool())
"""


@pytest.fixture(scope="module")
def ready(kernel: Kernel) -> Kernel:
    kernel.execute(textwrap.dedent(SETUP))
    return kernel


def test_the_helpers_call_is_approved_in_the_nested_card(ready: Kernel) -> None:
    kernel = ready
    if not in_cell(kernel):
        pytest.skip("this kernel cannot take clicks while a cell runs (ipykernel < 7.4)")
    since = kernel.mark()
    cell = kernel.submit("%agent --new --approve ask -o res a.txt")
    approve = kernel.wait_for(lambda: kernel.buttons("Approve", enabled=True, since=since))
    assert len(approve) == 1  # the helper's call: the caller's own needs no approval
    texts = " ".join(kernel.html_texts(since))
    assert "cleaner: its own run" in kernel.all_output_text(since) or "cleaner" in texts
    kernel.click(approve[0])
    record = wait_ended(kernel, cell)
    assert record["stop_reason"] == "finished"
    assert kernel.eval("ran") == ["a.txt"]
    assert kernel.eval("res.text") == "caller: deleted a.txt"
    live = list(kernel.widgets)[since:]
    left = [kernel.widgets[c].get("_model_name") for c in live if c not in kernel.closed]
    assert live and not left, f"every widget, nested too, closed: {left}"


def test_stop_on_the_callers_card_stops_the_helper(ready: Kernel) -> None:
    kernel = ready
    if not in_cell(kernel):
        pytest.skip("this kernel cannot take clicks while a cell runs (ipykernel < 7.4)")
    since = kernel.mark()
    cell = kernel.submit("%agent --new --approve ask -o stopped slow.txt")
    approve = kernel.wait_for(lambda: kernel.buttons("Approve", enabled=True, since=since))
    kernel.click(approve[0])
    kernel.wait_for(  # the helper's call approved and running (it waits on `hold`)
        lambda: any("approved by you" in t and "running" in t for t in kernel.html_texts(since)),
        what="the helper's call running",
    )
    stops = kernel.buttons("Stop", enabled=True, since=since)
    assert stops
    for stop in stops:  # the caller's Stop (the nested card's own is hidden and does nothing)
        kernel.click(stop)
    record = wait_ended(kernel, cell)
    assert record["stop_reason"] == "cancelled"
    assert "slow.txt" not in kernel.eval("ran")
    history = kernel.eval(
        "[type(m).__name__ for m in nbagent.notebook.current_session().agent.messages]"
    )
    assert history[-1] == "ToolMessage"  # every call answered


def test_a_kernel_interrupt_stops_the_caller_and_the_helper(ready: Kernel) -> None:
    kernel = ready
    if not in_cell(kernel):
        pytest.skip("this kernel cannot take clicks while a cell runs (ipykernel < 7.4)")
    since = kernel.mark()
    cell = kernel.submit("%agent --new --approve ask -o interrupted slow.txt")
    approve = kernel.wait_for(lambda: kernel.buttons("Approve", enabled=True, since=since))
    kernel.click(approve[0])
    kernel.wait_for(
        lambda: any("approved by you" in t and "running" in t for t in kernel.html_texts(since)),
        what="the helper's call running",
    )
    waited = _interrupt(kernel, cell)
    assert waited < 10, f"the interrupted cell took {waited:.1f} s to end"
    assert kernel.replies[cell]["content"]["ename"] == "KeyboardInterrupt"
    record = kernel.wait_for(lambda: run_record(kernel, cell), what="the static output")
    assert record["stop_reason"] == "cancelled"
    assert "slow.txt" not in kernel.eval("ran")
    history = kernel.eval(
        "[type(m).__name__ for m in nbagent.notebook.current_session().agent.messages]"
    )
    assert history[-1] == "ToolMessage"  # every call answered


def test_the_saved_output_keeps_the_helpers_run_inside_the_call(ready: Kernel) -> None:
    """Once the run ends, its static output (what the notebook saves) still shows the helper's
    own run under the call: its call and result, folded in the HTML, indented in the text."""
    import nbformat

    kernel = ready
    cell = kernel.submit("%agent --new --approve auto -o saved b.txt")
    record = wait_ended(kernel, cell)
    assert record["stop_reason"] == "finished"
    outputs = [o for o in kernel.cell_outputs(cell) if o.get("data")]
    html = "".join(str(o["data"].get("text/html", "")) for o in outputs)
    plain = "\n".join(str(o["data"].get("text/plain", "")) for o in outputs)
    assert "application/vnd.jupyter.widget-view+json" not in str(outputs)  # static now
    assert '<details open class="nbagent-nested">' in html and "cleaner: its own run" in html
    inside = html[html.index("cleaner: its own run") :]
    assert "⚙ delete" in inside and "deleted b.txt" in inside  # the helper's call, its result
    assert "cleaner: its own requests (2 requests)" in html  # under the call in the request view
    assert "  ┆ cleaner: its own run" in plain and "    [tool] delete" in plain
    cells = [
        nbformat.v4.new_code_cell(
            "%agent --new --approve auto -o saved b.txt",
            outputs=[
                nbformat.v4.new_output(o["output_type"], data=o["data"], metadata=o["metadata"])
                for o in outputs
            ],
        )
    ]
    nbformat.validate(nbformat.v4.new_notebook(cells=cells))
