"""In a real terminal (a pseudo-terminal): colors, typed answers, the Ctrl-C and Ctrl-D keys."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import termios
import threading

from .process import PATIENCE, ROOT, TOOLS_MODULE, environment


def _take_terminal() -> None:  # in the child, after setsid: make the pty its terminal
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Pty:
    """``python -m nbagent`` attached to a pseudo-terminal, as if a person sat at it."""

    def __init__(self, *args: str, env: dict[str, str]) -> None:
        self.master, slave = os.openpty()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nbagent", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=ROOT,
            env=env,
            start_new_session=True,
            preexec_fn=_take_terminal,
        )
        os.close(slave)
        self.data = bytearray()
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # EIO: the other side closed
                chunk = b""
            with self._changed:
                self.data += chunk
                self._changed.notify_all()
            if not chunk:
                return

    @property
    def text(self) -> str:
        with self._changed:
            return self.data.decode(errors="replace")

    def wait_for(self, text: str, count: int = 1) -> None:
        with self._changed:
            ok = self._changed.wait_for(
                lambda: self.data.decode(errors="replace").count(text) >= count, PATIENCE
            )
        assert ok, f"never saw {text!r} in:\n{self.text}"

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def finish(self) -> int:
        status = self.proc.wait(timeout=PATIENCE)
        self._thread.join(PATIENCE)
        os.close(self.master)
        return status


def test_a_person_at_a_terminal_answers_and_presses_ctrl_c_then_ctrl_d() -> None:
    term = Pty("--tools", TOOLS_MODULE, env=environment(TERM="xterm"))
    term.wait_for("you> ")
    term.type("approve\r")
    term.wait_for("or type why not: ")
    term.type("y\r")
    term.wait_for("removed a.txt", 2)
    term.wait_for("you> ", 2)
    term.type("slow_async\r")
    term.wait_for("started")
    term.type("\x03")  # the Ctrl-C key: the terminal sends SIGINT
    term.wait_for("back to the prompt")
    term.wait_for("you> ", 3)
    term.type("\x04")  # Ctrl-D on an empty line: end of input
    assert term.finish() == 0
    text = term.text
    assert "\x1b[" in text  # colors on a terminal
    assert '\x1b[36m→ remove(path="a.txt")\x1b[0m' in text
    assert "bye" in text
    # the typed answer is echoed by the terminal once, not written back a second time
    assert text.count("why not: \x1b[0my\r\n") == 1


def test_no_color_is_respected_on_a_terminal() -> None:
    term = Pty("--tools", TOOLS_MODULE, "hello", env=environment(TERM="xterm", NO_COLOR="1"))
    assert term.finish() == 0
    assert "echo: hello" in term.text and "\x1b[" not in term.text


def test_a_line_ended_by_ctrl_d_instead_of_enter_is_run_on_a_line_of_its_own() -> None:
    term = Pty("--tools", TOOLS_MODULE, env=environment(TERM="xterm", NO_COLOR="1"))
    term.wait_for("you> ")
    term.type("hello there\x04")  # the terminal passes the line on without a newline
    term.type("\x04")  # and then the end of input
    assert term.finish() == 0
    assert "you> hello there\r\necho: hello there\r\n" in term.text
