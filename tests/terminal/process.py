"""``python -m nbagent`` in a real subprocess, read while it writes, for the terminal tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOLS_FILE = str(Path(__file__).with_name("scripted_tools.py"))
TOOLS_MODULE = "tests.terminal.scripted_tools"
#: Guards against a hang (a failure), never a speed check.
PATIENCE = 60.0


def wait_until(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` until it holds; a hang fails the test."""
    deadline = time.monotonic() + PATIENCE
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)


def environment(**extra: str) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "NBAGENT_MODEL": "offline"}
    env.update(extra)
    return env


class Terminal:
    """One session: write lines to its stdin, wait for text on its stdout, send Ctrl-C."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nbagent", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            env=env or environment(),
        )
        self._out = bytearray()
        self._err = bytearray()
        self._changed = threading.Condition()
        self._ended = 0  # the streams read to their end (2: nothing more can come)
        self._threads = [
            threading.Thread(target=self._pump, args=(self.proc.stdout, self._out), daemon=True),
            threading.Thread(target=self._pump, args=(self.proc.stderr, self._err), daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _pump(self, stream: object, into: bytearray) -> None:
        while True:
            chunk = os.read(stream.fileno(), 65536)  # type: ignore[attr-defined]
            with self._changed:
                into += chunk
                self._ended += not chunk
                self._changed.notify_all()
            if not chunk:
                return

    @property
    def out(self) -> str:
        with self._changed:
            return self._out.decode()

    @property
    def err(self) -> str:
        with self._changed:
            return self._err.decode()

    def wait_for(self, text: str, count: int = 1) -> str:
        """Wait until ``text`` was written ``count`` times; the output so far.

        A process that ended gives up the wait only once both its streams were read to their
        end: its last line and its exit come together, and the exit (seen as the end of
        stderr) may be read before that line (a CI run met "bye (interrupted)" missing from
        the output of a process that had written it)."""
        with self._changed:
            found = self._changed.wait_for(
                lambda: self._out.decode().count(text) >= count or self._ended == 2,
                timeout=PATIENCE,
            )
            out = self._out.decode()
        if not found or out.count(text) < count:
            raise AssertionError(f"never saw {text!r} (x{count}) in:\n{out}\nstderr:\n{self.err}")
        return out

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def interrupt(self) -> None:
        self.proc.send_signal(signal.SIGINT)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def finish(self) -> int:
        """Close stdin, wait for the exit (a hang fails the test), return the status."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            status = self.proc.wait(timeout=PATIENCE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(
                f"nbagent did not exit; it wrote:\n{self.out}\n{self.err}"
            ) from None
        for thread in self._threads:
            thread.join(timeout=PATIENCE)
        return status


def run_cli(*args: str, stdin: str = "", env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run to the end with ``stdin``; (status, stdout, stderr)."""
    done = subprocess.run(
        [sys.executable, "-m", "nbagent", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        cwd=ROOT,
        env=env or environment(),
    )
    return done.returncode, done.stdout, done.stderr
