"""What a run looks like in the terminal, read from real ``python -m nbagent`` processes."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from .process import TOOLS_FILE, TOOLS_MODULE, Terminal, run_cli, wait_until

QUESTION = "  ? Run remove("


def _line_with(out: str, text: str) -> str:
    lines = [line for line in out.splitlines() if text in line]
    assert len(lines) == 1, (text, out)
    return lines[0]


def test_question_follows_the_call_on_its_own_line_and_nothing_interrupts_it() -> None:
    status, out, err = run_cli("--tools", TOOLS_MODULE, "approve", stdin="y\n")
    assert status == 0, err
    lines = out.splitlines()
    # the streamed text is finished before the call, the call before the question
    assert lines[0] == "I will remove the file"
    assert lines[1] == '→ remove(path="a.txt")'
    assert lines[2].startswith('  ? Run remove(path="a.txt")? ')
    # the answer (echoed, as stdin is not a terminal) follows the question directly: nothing
    # was written while it waited
    assert lines[2].endswith("or type why not: y")
    assert lines[3] == "  ✓ approved"
    assert lines[4] == "  ← removed a.txt"
    assert lines[5] == "after tools: removed a.txt"
    assert re.fullmatch(r"\[done · 2 steps · 30 tokens \(20 in, 10 out\) · \d+\.\d s\]", lines[6])


def test_two_questions_in_one_batch_are_asked_one_after_the_other() -> None:
    status, out, err = run_cli("--tools", TOOLS_MODULE, "approve two", stdin="y\nnot this one\n")
    assert status == 0, err
    lines = out.splitlines()
    call_a, call_b = lines.index('→ remove(path="a.txt")'), lines.index('→ remove(path="b.txt")')
    asks = [index for index, line in enumerate(lines) if line.startswith("  ? Run ")]
    assert len(asks) == 2, out
    first, second = asks
    # each question names its call in full, comes after that call's line, in the batch's
    # order, and gets its own answer on its line: nothing is written while one waits
    assert call_a < first and call_b < second and first < second
    assert lines[first].startswith('  ? Run remove(path="a.txt")? ')
    assert lines[first].endswith("or type why not: y")
    assert lines[second].startswith('  ? Run remove(path="b.txt")? ')
    assert lines[second].endswith("or type why not: not this one")
    # and they come one right after the other, not spread among other lines
    assert second == first + 1 or (second == first + 2 and lines[first + 1] == lines[call_b])
    # lines about one call of several say which call they are about
    assert '  ✓ remove(path="a.txt"): approved' in lines
    assert '  ✗ remove(path="b.txt"): denied: not this one' in lines
    assert '  ← remove(path="a.txt"): removed a.txt' in lines
    assert "after tools: removed a.txt; The person denied this call to remove: not this one" in out


def test_what_a_tool_prints_during_a_question_waits_until_the_answer() -> None:
    with tempfile.TemporaryDirectory() as folder:
        printed, asked = Path(folder, "printed"), Path(folder, "asked")
        term = Terminal("--tools", TOOLS_MODULE, "-q", f"approve and chat {folder}")
        term.wait_for(QUESTION)
        asked.write_text("the question is on screen")  # the sibling tool prints only now
        wait_until(printed.exists, "the sibling tool to print while the question waits")
        before = term.out
        term.send("y")  # read after the print was handed over: a print let through lands first
        status = term.finish()
    out = term.out
    assert status == 0, term.err
    assert "chatty says" not in before  # held, not printed into the question
    question = _line_with(out, QUESTION)
    assert question.endswith(": y")
    assert out.index("chatty says") > out.index(question)
    assert out.index("chatty says") > out.index("→ chatty(")  # after the call it belongs to
    assert _line_with(out, "chatty says") == "chatty says hi"  # a whole line of its own


def test_a_denial_shows_its_reason_and_the_model_reads_it() -> None:
    status, out, _ = run_cli("--tools", TOOLS_MODULE, "approve", stdin="keep it, it is mine\n")
    assert status == 0
    assert "  ✗ denied: keep it, it is mine" in out.splitlines()
    assert "The person denied this call to remove: keep it, it is mine" in out
    assert "removed a.txt" not in out


def test_end_of_input_at_the_question_denies_and_says_so() -> None:
    status, out, _ = run_cli("--tools", TOOLS_MODULE, "approve", stdin="")
    assert status == 0
    assert "  (no answer: the input ended)" in out
    assert "  ✗ denied: no answer: the input ended" in out


def test_policies_answer_without_asking() -> None:
    status, out, _ = run_cli("--tools", TOOLS_MODULE, "--approve", "auto", "approve")
    assert status == 0 and "? Run" not in out
    assert "  ✓ approved (approved by policy: auto)" in out and "removed a.txt" in out
    status, out, _ = run_cli("--tools", TOOLS_MODULE, "--approve", "deny", "approve")
    assert status == 0 and "? Run" not in out and "removed a.txt" not in out
    assert "  ✗ denied: denied by policy: no one can approve calls in this run" in out


def test_always_allows_the_tool_for_the_rest_of_the_session() -> None:
    term = Terminal("--tools", TOOLS_MODULE, "-q")
    term.send("approve")
    term.wait_for(QUESTION)
    term.send("a")
    term.wait_for("[done", 1)
    term.send("approve")
    term.wait_for("[done", 2)
    assert term.finish() == 0
    assert term.out.count(QUESTION) == 1
    assert "  ✓ approved (and from now on, without asking)" in term.out
    assert "  ✓ approved (always allowed this session)" in term.out


def test_long_arguments_are_shown_in_full_before_the_question() -> None:
    status, out, _ = run_cli("--tools", TOOLS_MODULE, "long", stdin="n\n")
    assert status == 0
    call = _line_with(out, "→ remove(")
    assert "more characters not shown" in call and "END" not in call
    assert "  arguments in full:" in out
    assert '      "path": "' + "x" * 500 + 'END"' in out
    question = _line_with(out, QUESTION[:9])
    assert "remove with the arguments above" in question


def test_a_retried_step_says_what_was_abandoned() -> None:
    status, out, _ = run_cli("--tools", TOOLS_MODULE, "retry")
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == "Half an ans"
    assert lines[1] == (
        "↻ the model's answer broke (connection reset by peer); discarded the partial answer "
        "above and unfinished calls (remove), which did not run; asking again (retry 1)"
    )
    assert lines[2] == "A whole answer."
    assert "never.txt" not in out and "? Run" not in out


def test_reasoning_is_marked_and_kept_apart_from_the_answer() -> None:
    status, out, _ = run_cli("--tools", TOOLS_MODULE, "reason")
    assert status == 0
    assert out.splitlines()[:3] == [
        "thinking: First I think.",
        "thinking: Then I think more.",
        "The answer is 4.",
    ]


def test_a_failing_tool_shows_its_error_and_the_run_goes_on() -> None:
    status, out, _ = run_cli("--tools", TOOLS_MODULE, "broken")
    assert status == 0
    assert "  ✗ broken failed: RuntimeError: broken on x" in out.splitlines()
    assert "Traceback" not in out
    status, out, _ = run_cli("--tools", TOOLS_MODULE, "--debug", "broken")
    assert "Traceback" in out and "RuntimeError: broken on x" in out


def test_a_failed_run_is_one_line_and_status_1() -> None:
    status, _, err = run_cli("--tools", TOOLS_MODULE, "fail")
    assert status == 1
    lines = [line for line in err.splitlines() if line]
    assert len(lines) == 1, err
    assert lines[0].startswith(
        "error: the run failed: ConnectionError: the server hung up with a second line [failed"
    )
    assert "Traceback" not in err


def test_model_and_tool_text_cannot_drive_the_terminal() -> None:
    status, out, _ = run_cli("--tools", TOOLS_FILE, "inject")
    assert status == 0
    assert "\x1b" not in out and "\r" not in out and "\x07" not in out
    assert r"red \x1b[31mtext\x1b[0mOVERWRITE \x1b]52;c;cHduZWQ=\x07 done" in out


def test_steps_are_pluralized_in_the_summary() -> None:
    status, out, _ = run_cli("--tools", TOOLS_MODULE, "hello")
    assert status == 0
    assert re.search(r"\[done · 1 step · 15 tokens \(10 in, 5 out\) · \d+\.\d s\]", out), out


def test_a_repeating_model_is_one_line_per_repeat_and_the_prompt_asks_to_go_on() -> None:
    # y: go on at the first question; then the default (an empty line) stops the run
    status, out, err = run_cli("--tools", TOOLS_MODULE, "loop", stdin="y\n\n")
    assert status == 0, err
    assert out.count("nothing has changed") == 1  # the result once, then one line per repeat
    assert "the same call, 3 times: the same result each time" in out
    assert "the same call, 6 times: the same result each time" in out
    questions = [line for line in out.splitlines() if "? The model asks for look()" in line]
    assert len(questions) == 2 and "a 4th time (the last 3 got nowhere)" in questions[0]
    assert "stopped: the model was repeating itself" in out
    assert "stopped: the model made the same call again and again" in out


def test_with_approve_auto_a_repeating_model_is_stopped_without_a_question() -> None:
    status, out, err = run_cli("--tools", TOOLS_MODULE, "--approve", "auto", "loop", stdin="")
    assert status == 0, err
    assert "? The model asks" not in out
    assert "nobody could be asked whether to go on" in out
    assert "stopped: the model made the same call again and again" in out
