"""TextStream: a widget that receives only the new text, so traffic stays linear in its length.

Setting an ordinary widget's ``.value`` resends the whole text on every update. Here the kernel
sends ``[offset, delta]`` custom messages; the browser side (``static/stream.js``) appends them to
its own copy and renders Markdown safely (DOM nodes, never HTML strings). The full text is part
of the widget state only when a frontend asks for the state (a page reload), or when the text is
replaced as a whole with :meth:`TextStream.replace`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import anywidget
import traitlets

__all__ = ["PlainStream", "TextFormat", "TextStream", "utf16_len"]

_STATIC = Path(__file__).parent / "static"


def _static(name: str) -> str:
    """A static file without comment lines and indentation: it travels with every widget."""
    lines = (line.strip() for line in (_STATIC / name).read_text(encoding="utf-8").splitlines())
    return "\n".join(line for line in lines if line and not line.startswith(("//", "/*", "*")))


TextFormat = Literal["markdown", "code", "plain", "reasoning"]


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units: what a browser's ``string.length`` counts."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


class TextStream(anywidget.AnyWidget):
    """Text shown as it grows: :meth:`append` buffers, :meth:`flush` sends what is new.

    Rendered as Markdown (built as DOM nodes, never parsed as HTML).
    """

    _esm = _static("stream.js")
    _css = _static("stream.css")

    format = traitlets.Unicode("markdown").tag(sync=True)
    streaming = traitlets.Bool(True).tag(sync=True)

    def __init__(self, text: str = "", *, format: TextFormat = "markdown", **kwargs: Any) -> None:
        self._lock = threading.RLock()
        self._sent: list[str] = [text] if text else []
        self._sent_units = utf16_len(text)
        self._pending: list[str] = []
        self._pending_chars = 0
        super().__init__(format=format, **kwargs)
        self.on_msg(self._on_frontend_message)

    @property
    def text(self) -> str:
        """Everything appended so far, sent or not."""
        with self._lock:
            return "".join(self._sent) + "".join(self._pending)

    @property
    def pending_chars(self) -> int:
        """Characters appended but not yet sent."""
        return self._pending_chars

    def append(self, text: str) -> None:
        """Add text; nothing is sent until :meth:`flush`."""
        if text:
            with self._lock:
                self._pending.append(text)
                self._pending_chars += len(text)

    def flush(self) -> bool:
        """Send the buffered text as one delta; True if something was sent."""
        with self._lock:
            if not self._pending:
                return False
            chunk = "".join(self._pending)
            self._pending.clear()
            self._pending_chars = 0
            offset = self._sent_units
            self._sent.append(chunk)
            self._sent_units += utf16_len(chunk)
            self.send([offset, chunk])
        return True

    def replace(self, text: str) -> None:
        """Show ``text`` instead of everything so far (sent once, whole)."""
        with self._lock:
            self._pending.clear()
            self._pending_chars = 0
            self._sent = [text]
            self._sent_units = utf16_len(text)
            self.send_state("value")

    def finish(self) -> None:
        """Send what is left and drop the streaming caret."""
        self.flush()
        self.streaming = False

    # The full text travels only when a frontend asks for the state (comm open, page reload,
    # a resync request); ipywidgets reads it through get_state.
    def get_state(
        self, key: str | Iterable[str] | None = None, drop_defaults: bool = False
    ) -> dict[str, Any]:
        if isinstance(key, str):
            keys: list[str] | None = [key]
        else:
            keys = None if key is None else list(key)
        wants_value = keys is None or "value" in keys
        others = None if keys is None else [k for k in keys if k != "value"]
        state: dict[str, Any] = (
            super().get_state(key=others, drop_defaults=drop_defaults) if others != [] else {}
        )
        if wants_value:
            with self._lock:
                state["value"] = "".join(self._sent)
        return state

    def _on_frontend_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("event") == "resync":
            self.send_state("value")


class PlainStream(TextStream):
    """A TextStream shown as preformatted text (arguments, reasoning): a much smaller script."""

    _esm = _static("plain.js")

    def __init__(self, text: str = "", *, format: TextFormat = "code", **kwargs: Any) -> None:
        super().__init__(text, format=format, **kwargs)
