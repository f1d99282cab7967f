"""What the terminal shows of the person's objects is bounded: an exception whose ``__str__``
never returns ends the run with one line naming it and saying why, and the process exits."""

from __future__ import annotations

from .process import run_cli

MODULE = "tests.terminal.hostile_tools"


def test_a_run_failing_with_an_exception_that_never_says_what_it_is_ends() -> None:
    status, _, err = run_cli("--tools", MODULE, "go")
    assert status == 1, err
    assert (
        "error: the run failed: Unspeakable: <tests.terminal.hostile_tools.Unspeakable: its "
        "__str__ did not answer: it did not finish within 0.5 s>" in err
    ), err
    status, _, err = run_cli("--tools", MODULE, "--debug", "go")
    assert status == 1
    assert "(its traceback could not be shown: it did not answer: it did not finish" in err, err
