"""Records the page writes into a cell's own metadata for outputs that are not a run's view.

A run's view copies its provenance into its cell's metadata (:mod:`.presence`). Two kinds of
cell have no view: a ``%agent`` cell the course policy refused (one sentence, its record in the
output's metadata), and the cell ``%agent cells`` makes, which the front end inserts from the
kernel's ``set_next_input`` payload (source only: a payload cannot carry metadata). For them
the kernel makes a :class:`CellNote`, a widget that is never displayed: JupyterLab's and
Notebook 7's widget manager makes its model all the same, and its script
(``cellnote.js``, beside it) reaches the notebook model through the manager's document context:

* ``find="output"``: the cell whose output carries the refusal record whose run id is ``key``
  gets that record as its ``nbagent`` metadata, and loses it when that output goes (cleared,
  or the cell ran again), so a cell never claims a refusal it no longer shows;
* ``find="below"``: the cell directly below the one whose output carries the ``%agent cells``
  record with code digest ``key`` gets that record, once its source is that output's code.

The script copies the record the output holds (the kernel bounded it and hid secrets in it),
nothing else of the page, and says when it is done; the kernel then closes the widget. A
front end without a widget manager (nbclient, ``jupyter execute``) never answers: the newest
:data:`MAX_OPEN` notes stay open and older ones are closed, so none piles up.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from typing import Any, Literal

import anywidget
import traitlets

from ...redact import redact_secrets
from .stream import _static

__all__ = ["MAX_OPEN", "CellNote", "note_cell"]

#: Notes whose page has not answered yet, kept open at most (the oldest is closed first).
MAX_OPEN = 32

_lock = threading.Lock()
_open: deque[CellNote] = deque()


class CellNote(anywidget.AnyWidget):
    """A widget never displayed: its script writes one output's record into a cell's metadata."""

    _esm = _static("cellnote.js")
    #: ``output``: the cell whose output holds the refusal ``key``; ``below``: the cell below
    #: the one whose output holds the ``%agent cells`` record with code digest ``key``.
    find = traitlets.Unicode("output").tag(sync=True)
    key = traitlets.Unicode("").tag(sync=True)


def note_cell(find: Literal["output", "below"], key: str) -> CellNote | None:
    """Ask the page to copy the record found by ``find`` and ``key`` into its cell (see the
    module); None when no widget could be made (the output's record is still there)."""
    try:
        note = CellNote(find=find, key=key[:100])
    except Exception as exc:  # metadata must never cost the cell its output
        logging.getLogger("nbagent").warning("no cell metadata: %s", redact_secrets(str(exc)))
        return None
    note.on_msg(_answered)
    with _lock:
        _open.append(note)
        old = [_open.popleft() for _ in range(max(0, len(_open) - MAX_OPEN))]
    for stale in old:
        stale.close()
    return note


def _answered(widget: Any, content: Any, _buffers: Any) -> None:
    """The page wrote the record (or gave up): the note is no longer needed."""
    if not isinstance(content, dict) or content.get("event") != "done":
        return
    with _lock:
        try:
            _open.remove(widget)
        except ValueError:
            return
    widget.close()


def open_notes() -> int:
    """How many notes wait for their page (tests, and the bound above)."""
    with _lock:
        return len(_open)
