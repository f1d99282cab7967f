"""How far a batch got: a snapshot value, and the terminal's progress line.

The batch hands a :class:`BatchProgress` to its progress reporter at a bounded rate (at most
every ``interval`` seconds, and once more at the end): front ends never see one message per
run. A reporter is any callable taking a snapshot (``final`` is True on the last one); one that
also has ``bind(batch)`` is given the batch first (a view's Stop button calls ``batch.cancel()``,
its final summary lists the failed rows). The
terminal reporter rewrites one line on a terminal and prints a plain line every few seconds
elsewhere (a log file must not fill with carriage returns).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

__all__ = ["BatchProgress", "ProgressLine", "Reporter", "default_reporter", "set_default_reporter"]


@dataclass(frozen=True)
class BatchProgress:
    """A batch at one moment. ``done`` counts rows done in this batch, ``resumed`` rows taken
    over done from an earlier table or checkpoint; ``rate`` is runs finished per second and
    ``eta`` the seconds left at that rate (None until it can be told)."""

    total: int
    done: int = 0
    failed: int = 0
    running: int = 0
    resumed: int = 0
    cancelled: int = 0
    not_run: int = 0
    tokens: int = 0
    elapsed: float = 0.0
    stopping: bool = False
    final: bool = False
    rate_limited: int = 0
    engine: str = "local"

    @property
    def finished(self) -> int:
        """Rows with an outcome (done, failed or resumed)."""
        return self.done + self.failed + self.resumed

    @property
    def pending(self) -> int:
        return max(0, self.total - self.finished - self.running - self.cancelled - self.not_run)

    @property
    def rate(self) -> float:
        ran = self.done + self.failed
        return ran / self.elapsed if self.elapsed > 0 and ran else 0.0

    @property
    def eta(self) -> float | None:
        left = self.pending + self.running
        if self.final or not left:
            return 0.0 if not left else None
        rate = self.rate
        return left / rate if rate > 0 else None

    def summary(self) -> str:
        """One line: counts, tokens, rate and ETA (or how it ended)."""
        parts = [f"{self.finished:,}/{self.total:,}"]
        parts.append(f"done {self.done + self.resumed:,}")
        if self.resumed:
            parts[-1] += f" ({self.resumed:,} resumed)"
        parts.append(f"failed {self.failed:,}")
        if not self.final:
            parts.append(f"running {self.running:,}")
        if self.cancelled or self.not_run:
            parts.append(f"stopped {self.cancelled + self.not_run:,}")
        parts.append(f"{self.tokens:,} tokens")
        if self.rate:
            parts.append(f"{self.rate:.1f} runs/s")
        if self.final:
            parts.append(f"took {_duration(self.elapsed)}")
        elif self.stopping:
            parts.append("stopping…")
        else:
            eta = self.eta
            if eta:
                parts.append(f"ETA {_duration(eta)}")
        if self.rate_limited:
            parts.append(f"rate-limited {self.rate_limited}x")
        return " · ".join(parts)


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds + 0.5), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


Reporter = Callable[[BatchProgress], Any]


class ProgressLine:
    """Shows a batch's progress on a stream (stderr): one rewritten line on a terminal, a
    plain line every ``every`` seconds otherwise, and the final line either way."""

    def __init__(self, stream: IO[str] | None = None, *, every: float = 10.0) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.every = every
        # never printed yet: time.monotonic() counts from boot, so 0.0 would hold back the
        # first line of a log for as long as the machine has been up less than ``every``
        self._last = -math.inf
        self._width = 0

    def _tty(self) -> bool:
        isatty = getattr(self.stream, "isatty", None)
        try:
            return bool(isatty and isatty())
        except ValueError:  # a closed stream
            return False

    def __call__(self, progress: BatchProgress) -> None:
        text = "nbagent map: " + progress.summary()
        try:
            if self._tty():
                pad = " " * max(0, self._width - len(text))
                self._width = len(text)
                self.stream.write("\r" + text + pad + ("\n" if progress.final else ""))
            else:
                now = time.monotonic()
                if not progress.final and now - self._last < self.every:
                    return
                self._last = now
                self.stream.write(text + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # the stream went away: progress is not worth a failure
            pass


_default: Callable[[], Reporter | None] | None = None


def set_default_reporter(factory: Callable[[], Reporter | None] | None) -> None:
    """Let a front end (the notebook) supply the reporter for ``progress="auto"``."""
    global _default
    _default = factory


def default_reporter() -> Reporter | None:
    """``progress="auto"``: the front end's view if one registered and applies, else a
    progress line on a terminal's stderr, else nothing."""
    if _default is not None:
        chosen = _default()
        if chosen is not None:
            return chosen
    stream = sys.stderr
    try:
        tty = stream is not None and stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return ProgressLine(stream) if tty else None
