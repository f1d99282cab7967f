"""What a live output is saved as: plain outputs in the file, while the page keeps the widgets.

JupyterLab saves a widget output as a reference to a model that only the running kernel holds
(it does not save widget state by default): reopened without that kernel, the output reads
"Error displaying widget: model not found", even beside a text copy. A run becomes plain output
when its cell ends, but a ``%agent serve`` cell lives across saves, page reloads and kernel
restarts. A :class:`SavedForm` in such a live view holds its saved form (sanitized HTML,
Markdown, text and the record, kept current by the kernel, bounded), and its script
(``savedform.js``, beside it) writes that form into the notebook file in place of the live output
on every save, puts the live view back after a page reload, and turns the output into the
final form when the kernel says it ended, even in a page that never got the kernel's display
update (one reloaded since). Nothing is sent when nothing changed.

Where no page runs the script (nbclient, VS Code, a collaborative session saved by the
server), the output is saved as the front end saves widgets, as before.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

import anywidget
import ipywidgets as widgets
import traitlets

from .stream import _static

__all__ = ["MAX_SAVED", "SavedForm"]

#: Characters of JSON the saved form may take; a larger one is replaced by ``short``.
MAX_SAVED = 2 * 1024 * 1024


class SavedForm(anywidget.AnyWidget):
    """The saved form of the live output showing the widget ``view_id`` (see the module)."""

    _esm = _static("savedform.js")
    #: Finds the saved form in a page reloaded from the file (its metadata carries the key).
    key = traitlets.Unicode().tag(sync=True)
    view_id = traitlets.Unicode("").tag(sync=True)
    #: ``{"data": mimebundle, "metadata": {...}}``: one nbformat display output.
    saved = traitlets.Dict().tag(sync=True)
    ended = traitlets.Bool(False).tag(sync=True)
    #: Whether a reloaded page puts the live view back (a line that holds a secret: never).
    restore = traitlets.Bool(True).tag(sync=True)

    def __init__(self, *, restore: bool = True) -> None:
        super().__init__(
            key=secrets.token_hex(8), restore=restore, layout=widgets.Layout(display="none")
        )
        self._sent = ""

    @property
    def size(self) -> int:
        """Characters of JSON the saved form took when last sent."""
        return len(self._sent)

    def marked(self, metadata: dict[str, Any]) -> dict[str, Any]:
        """``metadata`` with this form's key under ``nbagent.saved_live`` (a form saved while
        the output lived; a final form carries no key)."""
        mine = dict(metadata.get("nbagent") or {})
        mine["saved_live"] = self.key
        return {**metadata, "nbagent": mine}

    def keep(
        self, data: dict[str, Any], metadata: dict[str, Any], short: dict[str, Any] | None = None
    ) -> bool:
        """Save the output as ``data`` / ``metadata`` from now on (``short``: the data to use
        instead when they would take more than :data:`MAX_SAVED`); False if nothing changed."""
        saved = {"data": data, "metadata": metadata}
        text = json.dumps(saved, sort_keys=True)
        if len(text) > MAX_SAVED:  # many images: the short form, still a readable record
            plain = str(data.get("text/plain", ""))[:10_000]
            saved = {"data": short or {"text/plain": plain}, "metadata": metadata}
            text = json.dumps(saved, sort_keys=True)
        if text == self._sent:
            return False
        self._sent = text
        self.saved = saved
        return True

    def end(self, data: dict[str, Any], metadata: dict[str, Any]) -> None:
        """The output ended as ``data`` / ``metadata``: a page that still shows it (or its
        saved form) shows this instead."""
        self.keep(data, metadata)
        self.ended = True
