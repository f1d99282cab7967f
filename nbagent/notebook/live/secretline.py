"""A line of text that holds a secret, shown on the page without ever being widget state.

The line to paste into an MCP client holds ``%agent serve``'s bearer token. Put in a widget's
state (an ``HTML`` widget's ``value``), it lands in the notebook file whenever JupyterLab saves
widget state, and in the kernel's comm state for as long as the widget lives. A
:class:`SecretLine` syncs only a placeholder: its script asks for the text when a view is
shown, the kernel answers with a custom message, and the script puts it in the page as text
(never HTML). :meth:`forget` drops it: views asking later get nothing, and the widget can be
closed. Where no page runs the script (nbclient, a kernel client), the text is never sent.
"""

from __future__ import annotations

from typing import Any

import anywidget
import traitlets

from .stream import _static

__all__ = ["SecretLine"]

#: Characters of text a line sends (a connection line is a few hundred).
MAX_SECRET_LINE = 4096


class SecretLine(anywidget.AnyWidget):
    """Shows ``text`` in a ``<pre>``, sent to each view that asks, never kept as state."""

    _esm = _static("secretline.js")
    placeholder = traitlets.Unicode("(shown while this cell's output is open)").tag(sync=True)

    def __init__(self, text: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._text: str | None = text[:MAX_SECRET_LINE]
        self.on_msg(self._asked)

    def _asked(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict) or content.get("event") != "ready":
            return
        text = self._text  # one read: forget() may come from another thread
        if text is not None:
            self.send({"text": text})

    def forget(self) -> None:
        """The text is gone: no view gets it any more."""
        self._text = None
