"""The person's objects formatted for a front end (nbagent._ground.formatting): whatever their code
does (raise, spin, recurse, answer with megabytes, lie about what it returns), the text comes
back bounded, or as a stand-in naming the type and saying why in one sentence."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from nbagent._ground.formatting import Formatter, error_text, formatted, stand_in, traceback_text

#: Short, so a test about code that never returns stays quick.
QUICK = 0.3


class Boom:
    def __str__(self) -> str:
        raise ValueError("boom")


class Spin:
    def __str__(self) -> str:
        while True:
            pass


class Deep:
    def __str__(self) -> str:
        return str(self)


class Huge:
    def __str__(self) -> str:
        return "x" * 5_000_000


class NotText:
    def __str__(self) -> Any:
        return 42


class SpinningError(Exception):
    def __str__(self) -> str:
        while True:
            pass


def test_what_an_objects_code_does_becomes_a_stand_in_saying_why() -> None:
    with Formatter(QUICK, 1_000) as formatter:
        assert (
            formatter.text(Boom())
            == "<tests.test_formatting.Boom: its __str__ raised ValueError: boom>"
        )
        spun = formatter.text(Spin())
        assert spun == (
            "<tests.test_formatting.Spin: its __str__ did not answer: it did not finish "
            f"within {QUICK:g} s>"
        )
        assert "its __str__ raised RecursionError: maximum recursion depth exceeded" in (
            formatter.text(Deep())
        )
        assert "its __str__ raised TypeError" in formatter.text(NotText())
        huge = formatter.text(Huge())
        assert huge.startswith("x" * 1_000) and huge.endswith(
            "[4,999,000 more characters not shown]"
        )
        assert len(huge) < 1_100
        assert formatter.text(1.5) == "1.5" and formatter.text("plain") == "plain"
        assert formatter.text(Boom(), how="repr").startswith("<tests.test_formatting.Boom object")


def test_a_stand_in_never_asks_the_object_or_its_metaclass() -> None:
    class Meta(type):
        def __getattribute__(cls, name: str) -> Any:
            raise RuntimeError("asked")

    class Odd(metaclass=Meta):
        pass

    said = stand_in(Odd(), "why")
    assert said.startswith("<tests.test_formatting.test_a_stand_in_never_asks_the_object_or_its")
    assert said.endswith(".<locals>.Odd: why>")


def test_errors_and_tracebacks_are_bounded_too() -> None:
    assert error_text(ValueError("plain")) == "ValueError: plain"
    assert error_text(KeyError()) == "KeyError"
    spinning = error_text(SpinningError())
    assert spinning.startswith(
        "SpinningError: <tests.test_formatting.SpinningError: its __str__ did not answer"
    )
    assert error_text(ValueError(Boom())) == (
        "ValueError: <ValueError: its __str__ raised ValueError: boom>"
    )  # BaseException.__str__ asks its argument
    try:
        try:
            raise SpinningError()
        except SpinningError as inner:
            raise RuntimeError("outer") from inner
    except RuntimeError as outer:
        trace = traceback_text(outer)
    assert trace.startswith("RuntimeError\n(its traceback could not be shown: it did not answer")
    with pytest.raises(ValueError) as caught:
        raise ValueError("a traceback")
    assert traceback_text(caught.value).startswith("Traceback (most recent call last):")
    assert traceback_text(caught.value, only=True) == "ValueError: a traceback\n"


def test_a_read_that_ran_over_leaves_the_next_one_working() -> None:
    with Formatter(QUICK) as formatter:
        assert "did not answer" in formatter.text(Spin())
        assert formatter.text(Boom()).endswith("raised ValueError: boom>")
    assert formatted(Spin(), timeout=QUICK).endswith(f"within {QUICK:g} s>")
    assert sys.getrecursionlimit() > 100  # the recursion above was the worker's own


def test_a_tool_raising_an_exception_that_never_says_what_it_is_ends_its_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The loop builds the call's error result (and its traceback) on the event loop: the
    exception's own ``__str__`` is read bounded there, so the run goes on."""
    import nbagent._ground.formatting
    from nbagent import Agent, AutoApprove, tool
    from nbagent.events import ToolFinished
    from nbagent.models import Call, ScriptedModel, Turn

    monkeypatch.setattr(nbagent._ground.formatting, "FORMAT_TIMEOUT", QUICK)

    @tool
    def fails() -> str:
        """Fails."""
        raise SpinningError()

    agent = Agent(
        ScriptedModel([Turn(Call("fails", {})), "went on"]), [fails], approver=AutoApprove()
    )
    finished: list[Any] = []
    agent.observe(lambda _run, e: finished.append(e) if isinstance(e, ToolFinished) else None)
    result = agent.run_sync("go")
    assert result.text == "went on"
    (event,) = finished
    assert event.result.text == (
        "fails failed: SpinningError: <tests.test_formatting.SpinningError: its __str__ did not "
        f"answer: it did not finish within {QUICK:g} s>"
    )
    assert "(its traceback could not be shown" in (event.traceback or "")


def test_run_sync_says_why_a_run_failed_whatever_the_cause_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import nbagent._ground.formatting
    from nbagent import Agent
    from nbagent.errors import RunFailedError
    from nbagent.models import FunctionModel

    monkeypatch.setattr(nbagent._ground.formatting, "FORMAT_TIMEOUT", QUICK)

    def decide(_request: Any) -> Any:
        raise SpinningError()

    with pytest.raises(RunFailedError) as caught:
        Agent(FunctionModel(decide), []).run_sync("go")
    assert str(caught.value).startswith(
        "the run failed after 1 step(s): SpinningError: <tests.test_formatting.SpinningError: "
    )
