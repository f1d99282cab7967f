"""The one primitive the kernel toolkit and the front ends call the person's code through:
nbagent._ground.guard.

A call is bounded in time, stopped (KeyboardInterrupt in its thread) at the bound, at
interrupt(), when the caller is cancelled or itself interrupted, and whatever it raised comes
back as text built without the exception's own code.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from nbagent._ground import guard as _guard
from nbagent._ground.guard import Reader, Unreadable


class Spin:
    """Loops in Python until interrupted; says when it started and that it was interrupted."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.interrupted = threading.Event()

    def __call__(self) -> None:
        self.started.set()
        try:
            while True:
                pass
        except KeyboardInterrupt:
            self.interrupted.set()
            raise


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """An event calls blocked in C wait on; set when the test ends, and their threads joined."""
    event = threading.Event()
    yield event
    event.set()
    for thread in list(_guard._stuck):
        thread.join(10)


def test_a_value_comes_back_and_an_exception_becomes_text() -> None:
    class Nasty(Exception):
        def __str__(self) -> str:
            raise AssertionError("the exception's own __str__ must not run")

    def fails() -> None:
        raise Nasty("secret-looking sk-proj-Zq81mN4vT0xR7pL2wK9s")

    with Reader(5) as reader:
        assert reader.call("its value", lambda a, b: a + b, 2, 3) == 5
        with pytest.raises(Unreadable) as plain:
            reader.call("its repr", lambda: int("x"))
        with pytest.raises(Unreadable) as nasty:
            reader.call("its repr", fails)
    assert str(plain.value).startswith("its repr raised ValueError: invalid literal")
    assert str(nasty.value).endswith(
        "its repr raised test_a_value_comes_back_and_an_exception_becomes_text.<locals>.Nasty"
    )


def test_a_call_over_its_time_is_stopped_and_the_next_call_runs() -> None:
    spin = Spin()
    with Reader(0.2) as reader:
        with pytest.raises(Unreadable, match=r"did not answer: it did not finish within 0\.2 s"):
            reader.call("its repr", spin)
        assert spin.interrupted.wait(10)
        assert reader.call("its length", len, [1, 2]) == 2  # a fresh worker


def test_interrupt_stops_the_call_running_now() -> None:
    spin = Spin()
    with Reader(600) as reader:
        threading.Thread(
            target=lambda: (spin.started.wait(10), reader.interrupt()), daemon=True
        ).start()
        with pytest.raises(Unreadable, match="did not answer: it was stopped"):
            reader.call("its repr", spin)
    assert spin.interrupted.wait(10)


def test_a_cancelled_caller_stops_the_call() -> None:
    spin = Spin()
    with Reader(600, cancelled=spin.started.is_set) as reader:
        with pytest.raises(Unreadable, match="the call was cancelled"):
            reader.call("its repr", spin)
        assert spin.interrupted.wait(10)
        with pytest.raises(Unreadable, match="was not read: the call was cancelled"):
            reader.call("its length", len, [1])


def test_an_interrupted_caller_interrupts_the_call_too() -> None:
    """A kernel interrupt (SIGINT) of the thread that waits, the kernel's main thread, reaches
    the call it waits for."""
    spin = Spin()

    def interrupt_when_spinning() -> None:
        if spin.started.wait(10):
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    threading.Thread(target=interrupt_when_spinning, daemon=True).start()
    with Reader(600) as reader, pytest.raises(KeyboardInterrupt):
        reader.call("its repr", spin)
    assert spin.interrupted.wait(10)


def test_calls_blocked_in_c_are_counted_and_no_more_are_started(
    release: threading.Event,
) -> None:
    """A call that blocks in C cannot be interrupted: its thread is left behind; with
    MAX_STUCK of them, further calls are refused at once, until they end."""
    started: list[Any] = []

    def blocks() -> None:
        started.append(1)
        release.wait(60)

    with Reader(0.05) as reader:
        for _ in range(_guard.MAX_STUCK):
            with pytest.raises(Unreadable, match="did not finish"):
                reader.call("its repr", blocks)
        with pytest.raises(Unreadable, match="still running"):
            reader.call("its repr", blocks)
    assert len(started) == _guard.MAX_STUCK
    release.set()
    for thread in list(_guard._stuck):
        thread.join(10)
    with Reader(5) as reader:
        assert reader.call("its length", len, "abc") == 3


def test_a_reader_whose_worker_ended_idle_starts_another(monkeypatch: pytest.MonkeyPatch) -> None:
    """A snippet's reader waits idle while the snippet runs: its worker ends meanwhile, and the
    next call (after the snippet) gets a new one instead of a queue nobody reads."""
    monkeypatch.setattr(_guard, "IDLE", 0.05)
    with Reader(5) as reader:
        assert reader.call("its length", len, [1]) == 1
        first = reader._worker
        assert first is not None
        first.thread.join(10)
        assert not first.thread.is_alive() and first.closing
        assert reader.call("its length", len, [1, 2]) == 2
        assert reader._worker is not first
