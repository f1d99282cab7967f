"""Ctrl-C (a real SIGINT to a real ``python -m nbagent``) wherever the person is."""

from __future__ import annotations

import tempfile
from pathlib import Path

from .process import TOOLS_MODULE, Terminal, wait_until

QUESTION = "  ? Run remove("
CANCELLED = "✗ cancelled · 1 step"
PROMPT = "you> "


def _chat() -> Terminal:
    term = Terminal("--tools", TOOLS_MODULE, "-q")
    term.wait_for(PROMPT)
    return term


def _cancelled_line(out: str) -> str:
    lines = [line for line in out.splitlines() if line.startswith(CANCELLED)]
    assert len(lines) == 1, out
    return lines[0]


def test_ctrl_c_at_the_question_cancels_and_returns_to_the_prompt() -> None:
    term = _chat()
    term.send("approve")
    term.wait_for(QUESTION)
    term.interrupt()  # no Enter: the question must not hold the interrupt
    term.wait_for(CANCELLED)
    term.wait_for(PROMPT, 2)
    term.send("check")  # the next request's history answers every call
    term.wait_for("history ok")
    status = term.finish()
    out = term.out
    assert status == 0, term.err
    line = _cancelled_line(out)
    assert "(every pending call was answered as cancelled)" in line
    assert line.endswith("; back to the prompt (Ctrl-C again or Ctrl-D quits)")
    assert "removed a.txt" not in out
    assert out.rstrip().endswith("bye")
    # the question's line ends where the interrupt landed, then the report starts a new line
    question = next(line for line in out.splitlines() if line.startswith(QUESTION))
    assert question.endswith("or type why not: ")


def test_ctrl_c_at_the_question_with_prompts_on_the_command_line_exits_130() -> None:
    term = Terminal("--tools", TOOLS_MODULE, "approve", "check")
    term.wait_for(QUESTION)
    term.interrupt()
    term.wait_for(CANCELLED)
    status = term.finish()
    assert status == 130, term.err
    line = _cancelled_line(term.out)
    assert "back to the prompt" not in line
    assert "history" not in term.out  # the second prompt did not run
    assert term.err == ""


def test_ctrl_c_while_the_model_streams() -> None:
    term = _chat()
    term.send("stream forever")
    term.wait_for("w3 ")
    term.interrupt()
    term.wait_for(CANCELLED)
    term.wait_for(PROMPT, 2)
    term.send("check")
    term.wait_for("history ok")
    term.wait_for(PROMPT, 3)
    term.interrupt()  # at the prompt: quit
    term.wait_for("bye (interrupted)")
    status = term.finish()
    assert status == 130
    out = term.out
    assert "w599" not in out
    # the streamed text's line is finished before the report
    assert any(line.startswith("w0 w1 w2 w3 ") for line in out.splitlines())
    assert out.rstrip().endswith("bye (interrupted)")


def test_ctrl_c_while_an_async_tool_runs() -> None:
    term = _chat()
    term.send("slow_async")
    term.wait_for("slow_async: started")
    term.interrupt()
    term.wait_for(CANCELLED)
    term.send("check")
    term.wait_for("history ok")
    assert term.finish() == 0
    assert "slept" not in term.out
    assert "(every pending call was answered as cancelled)" in _cancelled_line(term.out)
    assert term.err == ""


def test_ctrl_c_while_a_sync_tool_ignores_cancellation() -> None:
    term = _chat()
    term.send("slow_sync")
    term.wait_for("slow_sync: started")
    term.interrupt()
    term.wait_for(CANCELLED)
    term.send("check")
    term.wait_for("history ok")
    # the thread sleeps on for minutes: quitting must not wait for it, and says so
    assert term.finish() == 0
    assert "slept" not in term.out
    assert "not waiting for slow_sync" in term.err


def test_a_second_ctrl_c_quits_even_while_the_run_winds_down() -> None:
    with tempfile.TemporaryDirectory() as folder:
        marker = Path(folder, "cancel-received")
        term = _chat()
        term.send(f"stubborn {marker}")
        term.wait_for("→ stubborn(")
        term.interrupt()
        # the tool got the cancel and holds on: the loop gives it a grace period (a second)
        wait_until(marker.exists, "the tool to receive the cancel")
        term.interrupt()
        term.wait_for("bye (interrupted)")
        status = term.finish()
    assert status == 130
    assert CANCELLED not in term.out  # quit without waiting for the run to wind down
    assert term.out.rstrip().endswith("bye (interrupted)")


def test_ctrl_c_and_ctrl_d_at_the_prompt() -> None:
    term = _chat()
    term.interrupt()
    term.wait_for("bye (interrupted)")
    assert term.finish() == 130
    assert term.out == "you> \nbye (interrupted)\n"
    term = _chat()
    assert term.finish() == 0
    assert term.out == "you> \nbye\n"
