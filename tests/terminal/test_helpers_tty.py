"""A helper agent's run (``agent.as_tool``) in a real terminal (a pseudo-terminal): its text,
its own calls and their results, and its end are printed under the call that runs it, each
line indented with a rule at its left; its approval is asked there, and answered by the person
at the terminal; the caller's own lines are not indented."""

from __future__ import annotations

from .process import environment
from .test_tty import Pty

TOOLS = "tests.terminal.helper_tools:cleaner"
NEST = "  │ "


def asked(prompt: str) -> Pty:
    """A session at a terminal, given ``prompt``, once the helper's question is on screen."""
    term = Pty("--tools", TOOLS, env=environment(TERM="xterm", NO_COLOR="1"))
    term.wait_for("you> ")
    term.type(prompt + "\r")
    term.wait_for("or type why not: ")
    return term


def ended(term: Pty, last: str) -> list[str]:
    """The session's lines, once ``last`` is on screen and Ctrl-D ended it (cleanly)."""
    term.wait_for(last)
    term.wait_for("you> ", 2)
    term.type("\x04")
    assert term.finish() == 0
    return term.text.split("\r\n")


def test_the_helpers_run_and_its_question_are_indented_under_its_call() -> None:
    term = asked("remove a.txt")
    question = term.text.rsplit("\r\n", 1)[-1]
    assert question.startswith(NEST + '  ? Run remove(path="a.txt")?'), question
    term.type("y\r")
    lines = ended(term, "caller says: helper says: removed a.txt")
    start = lines.index('→ cleaner(prompt="remove a.txt")')  # the caller's call: not indented
    end = lines.index('  ← cleaner(prompt="remove a.txt"): helper says: removed a.txt')
    inner = lines[start + 1 : end]
    assert inner[0] == NEST + "cleaner, its own run: remove a.txt"
    assert NEST + "helper will remove it" in inner
    assert NEST + '→ remove(path="a.txt")' in inner
    assert NEST + "  ← removed a.txt" in inner
    assert NEST + "helper says: removed a.txt" in inner
    assert inner[-1].startswith(NEST + "[done · 2 steps")
    assert all(line.startswith(NEST) for line in inner), inner
    assert "caller says: helper says: removed a.txt" in lines  # the caller's answer, unindented


def test_a_denied_helper_call_is_the_helpers_to_answer() -> None:
    term = asked("remove b.txt")
    term.type("keep it\r")
    lines = ended(term, "caller says:")
    assert NEST + "  ✗ denied: keep it" in lines  # said under the helper's call
    assert NEST + "helper says: The person denied this call to remove: keep it" in lines
    assert "caller says: helper says: The person denied this call to remove: keep it" in lines
