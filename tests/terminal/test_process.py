"""The terminal tests' own reader (tests/terminal/process.py): what it waits for."""

from __future__ import annotations

import threading
from typing import Any

from .process import PATIENCE, TOOLS_MODULE, Terminal


class _Gated(threading.Condition):
    """Opens ``gate`` the first time someone waits on it (the reader is then waiting)."""

    def __init__(self, gate: threading.Event) -> None:
        super().__init__()
        self.gate = gate

    def wait(self, timeout: float | None = None) -> bool:
        self.gate.set()
        return super().wait(timeout)


class _HeldTerminal(Terminal):
    """Its stdout is read only once a wait for text has begun."""

    def __init__(self, *args: str) -> None:
        self.gate = threading.Event()
        super().__init__(*args)
        self._changed = _Gated(self.gate)

    def _pump(self, stream: Any, into: bytearray) -> None:
        if into is self._out:
            self.gate.wait(PATIENCE)
        super()._pump(stream, into)


def test_a_process_that_ended_is_read_to_its_end_before_its_text_is_missed() -> None:
    """The CI flake "the second Ctrl-C never printed bye (interrupted)": the process had
    written it and exited, and the wait gave up on seeing the exit (the end of stderr) before
    the last of stdout was read. Here stdout is read only once the wait began, after the exit."""
    term = _HeldTerminal("--tools", TOOLS_MODULE, "check")
    assert term.proc.wait(PATIENCE) == 0
    term.wait_for("history ok")
    assert term.finish() == 0
