"""Whether a run's view is still on the page: the browser says when it is cleared from its cell.

A run waiting for Approve / Deny holds its cell, and so the kernel. If the person runs the cell
again (or presses Run All again), JupyterLab clears the cell's output at once and queues the
new execution behind the waiting one: the buttons are gone, nothing can answer them, and the
kernel waits forever. :class:`Presence` is an empty widget in the run's view; its script reports
each view shown and each view cleared while its cell stays on the page, and :class:`RunView`
stops a waiting run whose every view has been cleared for a moment (a re-render replaces a view
within that moment). Nothing is reported by a kernel client without views (nbclient, tests), nor
when a notebook is closed: then nothing changes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import anywidget
import ipywidgets as widgets

from .stream import _static

__all__ = ["Presence"]


class Presence(anywidget.AnyWidget):
    """An invisible widget counting the browser views of a run that are on the page."""

    _esm = _static("presence.js")

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(layout=widgets.Layout(display="none"))
        self._clock = clock
        self._lock = threading.Lock()
        self._live: set[str] = set()
        self._cleared_at: float | None = None
        self.on_msg(self._on_frontend_message)

    def unseen_for(self) -> float:
        """Seconds since the last view on the page was cleared (0 while one is shown, or if
        none was ever shown)."""
        with self._lock:
            if self._live or self._cleared_at is None:
                return 0.0
            return self._clock() - self._cleared_at

    def _on_frontend_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        view = str(content.get("view", ""))[:32]
        with self._lock:
            if content.get("event") == "shown":
                self._live.add(view)
                self._cleared_at = None
            elif content.get("event") == "cleared" and view in self._live:
                self._live.discard(view)
                if not self._live:
                    self._cleared_at = self._clock()
