"""``%agent --acp NAME`` in a real kernel, against a real ACP agent (tests/acp/scripted_agent.py,
written with the SDK's agent side): the agent's permission request is the approval bar,
clicked as a browser clicks; the conversation goes on in the next cell; the course policy's
AI off starts no agent."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from .kernel import Kernel
from .test_kernel_approval import in_cell, wait_ended

pytest.importorskip("acp", reason="the acp extra (agent-client-protocol) is not installed")

SCRIPT = Path(__file__).resolve().parents[1] / "acp" / "scripted_agent.py"


def streamed(kernel: Kernel, since: int, text: str) -> bool:
    """Some text stream of the views after ``since`` shows ``text``."""
    return any(text in kernel.stream_text(c) for c in kernel.streams(since))


def register(kernel: Kernel) -> int:
    kernel.execute(f"%agent acp add scripted -- {sys.executable} {SCRIPT}")
    in_cell(kernel)
    return kernel.mark()


def test_a_permission_granted_by_a_click_and_the_conversation_goes_on(kernel: Kernel) -> None:
    since = register(kernel)
    cell = kernel.submit("%agent --acp scripted -o res tool\nprint('next line:', res.text)")
    approve = kernel.wait_for(lambda: kernel.buttons("Approve", enabled=True, since=since))
    assert len(approve) == 1
    if in_cell(kernel):
        assert kernel.running(cell)  # the cell waits for the agent's turn
    kernel.click(approve[0])
    record = wait_ended(kernel, cell)
    assert record["stop_reason"] == "finished"
    assert record["model"] == "acp:scripted"
    call = record["calls"][0]
    assert (call["name"], call["status"], call["approval"]["by"]) == ("execute", "done", "person")
    assert call["proposed_arguments"] == {"command": "ls"}
    assert record["provenance"]["calls"] == [
        {"tool": "execute", "decision": "approved", "status": "done"}
    ]
    assert kernel.eval("res.text") == "ran (yes)"
    if in_cell(kernel):
        assert "next line: ran (yes)" in kernel.cell_text(cell)
    else:  # ipykernel 6.29: the run went on in the background, and the cell said so
        assert kernel.replies[cell]["content"]["ename"] == "RunNotFinishedError"
    # the next cell goes on with the same ACP session; --new starts another
    cell = kernel.submit("%agent --acp scripted -o again remember")
    wait_ended(kernel, cell)
    assert kernel.eval("again.text") == "you said: tool"
    cell = kernel.submit("%agent --acp scripted --new -o fresh remember")
    wait_ended(kernel, cell)
    assert kernel.eval("fresh.text") == "you said: "


def test_deny_by_a_click_answers_the_agent_s_reject(kernel: Kernel) -> None:
    since = register(kernel)
    cell = kernel.submit("%agent --acp scripted -o res tool")
    deny = kernel.wait_for(lambda: kernel.buttons("Deny", enabled=True, since=since))
    kernel.click(deny[0])
    wait_ended(kernel, cell)
    assert kernel.eval("res.text") == "denied (no)"


def test_stop_cancels_the_turn_and_interrupt_too_and_the_agent_answers_after(
    kernel: Kernel,
) -> None:
    since = register(kernel)
    cell = kernel.submit("%agent --acp scripted -o res wait")
    stop = kernel.wait_for(lambda: kernel.buttons("Stop", enabled=True, since=since))
    kernel.wait_for(lambda: streamed(kernel, since, "waiting"), what="the agent's text")
    kernel.click(stop[0])
    record = wait_ended(kernel, cell)
    assert record["stop_reason"] == "cancelled"
    if not in_cell(kernel):
        return  # a background run: only Stop reaches it
    since = kernel.mark()
    cell = kernel.submit("%agent --acp scripted wait\nprint('NOT REACHED')")
    kernel.wait_for(lambda: streamed(kernel, since, "waiting"), what="the agent's text")
    assert kernel.running(cell)
    kernel.km.interrupt_kernel()
    kernel.finish(cell, allow_errors=True, timeout=30)
    reply = kernel.replies[cell]["content"]
    assert reply["ename"] == "KeyboardInterrupt" and "NOT REACHED" not in kernel.cell_text(cell)
    cell = kernel.submit("%agent --acp scripted -o after remember")
    wait_ended(kernel, cell)
    assert kernel.eval("after.text") == "you said: wait"  # the same conversation goes on


def test_options_of_nbagent_s_own_loop_and_unknown_agents_are_refused(kernel: Kernel) -> None:
    register(kernel)
    cell = kernel.submit("%agent --acp scripted --kernel chat")
    kernel.finish(cell, allow_errors=True)
    assert "--kernel do not apply to it" in kernel.cell_text(cell)
    cell = kernel.submit("%agent --acp nobody chat")
    kernel.finish(cell, allow_errors=True)
    assert "no external agent is called 'nobody'" in kernel.cell_text(cell)
    cell = kernel.submit("%agent acp")
    kernel.finish(cell)
    listed = kernel.cell_text(cell)
    assert "scripted" in listed and "(yours" in listed
    assert "claude     claude-code-acp  (not installed: npm install -g @zed-" in listed
    cell = kernel.submit("%agent acp add missing -- no-such-acp-agent\n%agent --acp missing hi")
    kernel.finish(cell, allow_errors=True)
    assert "missing is not installed here (no-such-acp-agent is not on PATH)" in (
        kernel.cell_text(cell)
    )


def test_ai_off_starts_no_agent(kernel: Kernel, tmp_path: Path) -> None:
    register(kernel)
    kernel.execute("%agent acp stop")  # the conversations of the tests before end here
    policy = tmp_path / "course.toml"
    policy.write_text('ai = false\nmessage = "No AI in this exam."\n')
    kernel.execute(f"import os\nos.environ['NBAGENT_COURSE_POLICY'] = {str(policy)!r}")
    try:
        cell = kernel.submit("%agent --acp scripted chat")
        kernel.finish(cell, allow_errors=True)
        assert "AI is off here: No AI in this exam" in kernel.cell_text(cell)
        running = kernel.eval(
            "{n: s.alive for n, s in nbagent.notebook.external.agents.agents_of("
            "nbagent.notebook.current_session()).running().items()}"
        )
        assert not any(running.values()), running
    finally:
        kernel.execute("del os.environ['NBAGENT_COURSE_POLICY']")
