"""A tool's preview in the terminal, in real subprocesses: shown as text before the approval
question (a table as table text, an image as a line), a failing one says so, and a slow one never
keeps a person at a terminal from answering."""

from __future__ import annotations

import tempfile
from pathlib import Path

from .process import TOOLS_MODULE, environment, run_cli
from .test_tty import Pty

QUESTION = "? Run drop_rows("


def test_the_preview_comes_before_the_question_as_text() -> None:
    status, out, _ = run_cli("--tools", TOOLS_MODULE, "drop users", stdin="y\n")
    assert status == 0
    preview = out.index("preview (what it would do; nothing has run yet):")
    assert preview < out.index(QUESTION) < out.index("dropped users")
    table = out[preview : out.index(QUESTION)]
    assert "| name   |" in table and "| ada    |" in table and "| bob    |" in table


def test_an_image_in_a_preview_is_one_line_and_a_failing_preview_says_why() -> None:
    status, out, _ = run_cli(
        "--tools", TOOLS_MODULE, "drop pictures", "drop broken", stdin="n\nn\n"
    )
    assert status == 0
    first, second = out.split('→ drop_rows(table="broken")')
    assert first.index("one picture would go") < first.index(QUESTION)
    assert "[image: image/png, 40x30" in first
    failed = "The preview of drop_rows failed: it raised LookupError: no such table: broken"
    assert failed in second and second.index(failed) < second.index(QUESTION)
    assert "✗ denied: no reason given" in second  # asked and answered as usual


def test_at_a_terminal_a_slow_preview_never_keeps_the_person_from_answering() -> None:
    with tempfile.TemporaryDirectory() as folder:
        hang = str(Path(folder) / "never")  # the preview waits for this file: it never comes
        term = Pty("--tools", TOOLS_MODULE, env=environment(TERM="xterm", NO_COLOR="1"))
        term.wait_for("you> ")
        term.type(f"drop {hang}\r")
        term.wait_for("press Enter to be asked without it")
        term.type("\r")  # do not wait: ask now
        term.wait_for("(not waiting for the preview)")
        term.wait_for(QUESTION)
        term.type("n\r")
        term.wait_for("denied: no reason given")
        term.wait_for("you> ", 2)
        term.type(f"drop {hang}2\r")  # an answer typed while the preview computes counts
        term.wait_for("press Enter to be asked without it", 2)
        term.type("y\r")
        term.wait_for("approved")
        term.wait_for("you> ", 3)
        term.type("drop users\r")  # a quick preview: shown, then the question
        term.wait_for(QUESTION, 2)
        term.type("y\r")
        term.wait_for("you> ", 4)
        term.type("\x04")
        assert term.finish() == 0
    text = term.text
    assert text.count(QUESTION) == 2  # the second call was answered before any question
    last = text[text.rindex("drop users") :]
    assert last.index("| ada    |") < last.index(QUESTION)
    assert "dropped users" in last
