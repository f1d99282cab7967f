"""Ctrl-C (a real SIGINT to a real ``python -m nbagent``) wherever the person is."""

from __future__ import annotations

import tempfile
from pathlib import Path

from .process import TOOLS_MODULE, Terminal, environment, wait_until

QUESTION = "  ? Run remove("
CANCELLED = "✗ cancelled · 1 step"
PROMPT = "you> "
#: The loop's own text for a call it answered as cancelled; the terminal says it in one line.
PER_CALL = "before this call finished"


def _chat(**env: str) -> Terminal:
    term = Terminal("--tools", TOOLS_MODULE, "-q", env=environment(**env))
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
    assert "(every pending call was answered as cancelled: remove)" in line
    assert line.endswith("; back to the prompt (Ctrl-C again or Ctrl-D quits)")
    assert PER_CALL not in out  # one line says it all
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
    line = _cancelled_line(term.out)
    assert "(every pending call was answered as cancelled: slow_async)" in line
    assert "still running" not in line  # it honoured the cancel
    assert PER_CALL not in term.out
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
    line = _cancelled_line(term.out)
    assert "(every pending call was answered as cancelled: slow_sync; slow_sync is still " in line
    assert "its result will be ignored)" in line
    assert PER_CALL not in term.out
    assert "has now ended" not in term.out
    assert "(not waiting for slow_sync: the run gave up on it, and it is still running)" in (
        term.err.splitlines()
    )


def test_an_abandoned_sync_tool_is_reported_when_it_really_ends() -> None:
    with tempfile.TemporaryDirectory() as folder:
        release = Path(folder, "release")
        term = _chat()
        term.send(f"stuck {release}")
        term.wait_for("stuck: started")
        term.interrupt()
        term.wait_for(CANCELLED)
        term.wait_for(PROMPT, 2)
        assert "stuck is still running" in _cancelled_line(term.out)
        assert "has now ended" not in term.out  # it has not: it waits for the file
        release.write_text("go")
        # at the prompt: the note comes at once, above the prompt, which is asked again
        term.wait_for(PROMPT, 3)
        term.send("check")
        term.wait_for("history ok")
        status = term.finish()
    out = term.out
    assert status == 0, term.err
    note = f'  (stuck(release="{release}"), abandoned when its run was cancelled, has now ended; '
    assert note + "its result was ignored)" in out.splitlines()
    assert f"you> \n{note}" in out and "its result was ignored)\nyou> check\n" in out
    assert "released" not in out  # its result was ignored indeed
    assert "not waiting" not in term.err  # it had ended: nothing to leave behind at exit


def test_a_question_is_withdrawn_when_its_call_is_settled_without_an_answer() -> None:
    with tempfile.TemporaryDirectory() as folder:
        asked = Path(folder, "asked")
        term = _chat()
        term.send(f"approve and halt {asked}")
        term.wait_for(QUESTION)
        asked.write_text("the question is on screen")  # the sibling now stops the whole run
        term.wait_for("every pending call was answered as cancelled")
        term.wait_for(PROMPT, 2)  # back at the prompt without anyone answering
        term.send("check")
        term.wait_for("history ok")
        status = term.finish()
    assert status == 1  # a run failed
    lines = term.out.splitlines()
    question = next(index for index, line in enumerate(lines) if line.startswith(QUESTION))
    assert lines[question].endswith("or type why not: ")
    assert lines[question + 1] == (
        "  (no answer needed any more: this call was settled without it)"
    )
    assert "  ✗ every pending call was answered as cancelled: remove" in lines
    assert "removed a.txt" not in term.out
    assert "RunAbortedError: tool 'halt' raised SystemExit: 3" in term.err


def test_a_second_ctrl_c_quits_even_while_the_run_winds_down() -> None:
    with tempfile.TemporaryDirectory() as folder:
        marker = Path(folder, "cancel-received")
        # a long grace, so that the second Ctrl-C lands while the run winds down however busy
        # the machine is (with the loop's one second, a loaded machine could end it first)
        term = _chat(NBAGENT_TEST_CANCEL_GRACE="60")
        term.send(f"stubborn {marker}")
        term.wait_for("→ stubborn(")
        term.interrupt()
        # the tool got the cancel and holds on: the loop gives it its grace period
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
