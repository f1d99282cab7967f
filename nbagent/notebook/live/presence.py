"""Whether a run's view is still on the page: the browser says when it is cleared from its cell.

A run waiting for Approve / Deny holds its cell, and so the kernel. If the person runs the cell
again (or presses Run All again), JupyterLab clears the cell's output at once and queues the
new execution behind the waiting one: the buttons are gone, nothing can answer them, and the
kernel waits forever. :class:`Presence` is an empty widget in the run's view; its script says
when the run's last view on the page is cleared while its cell stays there (and when a view is
shown again after that), and :class:`RunView` stops a waiting run that stays cleared for a
moment. Nothing is sent otherwise: not by a kernel client without views (nbclient, tests), not
when a notebook is closed, and not while a run is shown normally.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

import anywidget
import ipywidgets as widgets
import traitlets

from .stream import _static

__all__ = ["Presence"]


class Presence(anywidget.AnyWidget):
    """An invisible widget that hears when a run's views are cleared from their cell."""

    _esm = _static("presence.js")
    key = traitlets.Unicode().tag(sync=True)  # the run on the page, across its views
    #: The run waits for a person: only then does a cleared view matter (and get reported).
    waiting = traitlets.Bool(False).tag(sync=True)
    #: The model id of the run's view as its cell shows it: the script finds the cell by it,
    #: to copy the run's provenance into the cell's metadata when the run ends.
    view_id = traitlets.Unicode("").tag(sync=True)

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(key=secrets.token_hex(8), layout=widgets.Layout(display="none"))
        self._clock = clock
        self._lock = threading.Lock()
        self._cleared_at: float | None = None
        self.on_msg(self._on_frontend_message)

    def unseen_for(self) -> float:
        """Seconds since the run's last view was cleared from its cell (0 while one is
        shown, and when none was ever cleared)."""
        with self._lock:
            return 0.0 if self._cleared_at is None else self._clock() - self._cleared_at

    def _on_frontend_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        with self._lock:
            if content.get("event") == "shown":
                self._cleared_at = None
            elif content.get("event") == "cleared" and self._cleared_at is None:
                self._cleared_at = self._clock()
