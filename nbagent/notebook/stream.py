"""TextStream: a widget that receives only the new text, so traffic stays linear in its length.

Setting an ordinary widget's ``.value`` resends the whole text on every update. Here the kernel
sends ``[offset, delta]`` custom messages; the browser side (``static/stream.js``) appends them to
its own copy and renders Markdown safely (DOM nodes, never HTML strings). The full text is part
of the widget state only when a frontend asks for the state (a page reload), or when the text is
replaced as a whole with :meth:`TextStream.replace`.

What leaves the kernel is the text with credential-shaped parts replaced
(:func:`nbagent.redact.redact_secrets`), like every other output: a model may echo a key, or pass
one as an argument. A key streams in pieces, so each send redacts the whole text, and a last
word that more characters could still turn into a key (``sk-proj-Zq8``) waits for the next send;
should redaction still change text the browser already has, the whole text is sent again instead
of a delta.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import anywidget
import traitlets

from ..redact import redact_secrets

__all__ = ["PlainStream", "TextFormat", "TextStream", "sendable", "utf16_len"]

_STATIC = Path(__file__).parent / "static"


def _static(name: str) -> str:
    """A static file without comment lines and indentation: it travels with every widget."""
    lines = (line.strip() for line in (_STATIC / name).read_text(encoding="utf-8").splitlines())
    return "\n".join(line for line in lines if line and not line.startswith(("//", "/*", "*")))


TextFormat = Literal["markdown", "code", "plain", "reasoning"]

#: Key-like characters, then an end, appended to a last word to see whether it could become a
#: key: every length up to 16 (some keys have an exact length), then longer ones.
_PROBES = tuple(("A1" * 32)[:n] + " " for n in (*range(1, 17), 24, 32, 40, 64))
#: A last word longer than this is sent even if it could become a key (it is not a word).
HOLD_MAX = 512


def sendable(text: str) -> int:
    """How much of a growing text may be shown now: all of it but a last word that could still
    become a key as more characters arrive (it is held until the next space or the end)."""
    end = start = len(text)
    floor = max(0, end - HOLD_MAX - 1)
    while start > floor and not text[start - 1].isspace():  # from the end: linear in the word
        start -= 1
    if start == end or end - start > HOLD_MAX:
        return end
    context = text[max(0, start - 64) :]  # a header name before it counts ("Bearer …")
    shown = redact_secrets(context)
    if any(redact_secrets(context + probe) != shown + probe for probe in _PROBES):
        return start
    return end


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
        self._raw: list[str] = [text] if text else []  # everything appended, as it came
        self._shown = redact_secrets(text)  # what the browser has
        self._sent_units = utf16_len(self._shown)
        self._pending_chars = 0
        super().__init__(format=format, **kwargs)
        self.on_msg(self._on_frontend_message)

    @property
    def text(self) -> str:
        """Everything appended so far, sent or not (as it came: not redacted)."""
        with self._lock:
            return "".join(self._raw)

    @property
    def shown(self) -> str:
        """What the browser has been sent: the text so far with secrets replaced."""
        with self._lock:
            return self._shown

    @property
    def pending_chars(self) -> int:
        """Characters appended but not yet sent."""
        return self._pending_chars

    def append(self, text: str) -> None:
        """Add text; nothing is sent until :meth:`flush`."""
        if text:
            with self._lock:
                self._raw.append(text)
                self._pending_chars += len(text)

    def flush(self, *, everything: bool = False) -> bool:
        """Send the buffered text as one delta; True if something was sent.

        A last word that could still become a key waits, unless ``everything``.
        """
        with self._lock:
            if not self._pending_chars:
                return False
            raw = "".join(self._raw)
            self._raw = [raw]
            end = len(raw) if everything else sendable(raw)
            self._pending_chars = len(raw) - end
            shown = redact_secrets(raw[:end])
            if not shown.startswith(self._shown):  # a secret completed across two sends
                self._shown = shown
                self._sent_units = utf16_len(shown)
                self.send_state("value")
                return True
            chunk = shown[len(self._shown) :]
            offset = self._sent_units
            self._shown = shown
            self._sent_units += utf16_len(chunk)
            if chunk:
                self.send([offset, chunk])
        return bool(chunk)

    def replace(self, text: str) -> None:
        """Show ``text`` instead of everything so far (sent once, whole)."""
        with self._lock:
            self._raw = [text]
            self._pending_chars = 0
            self._shown = redact_secrets(text)
            self._sent_units = utf16_len(self._shown)
            self.send_state("value")

    def finish(self) -> None:
        """Send what is left and drop the streaming caret."""
        self.flush(everything=True)
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
                state["value"] = self._shown
        return state

    def _on_frontend_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("event") == "resync":
            self.send_state("value")


class PlainStream(TextStream):
    """A TextStream shown as preformatted text (arguments, reasoning): a much smaller script."""

    _esm = _static("plain.js")

    def __init__(self, text: str = "", *, format: TextFormat = "code", **kwargs: Any) -> None:
        super().__init__(text, format=format, **kwargs)
