"""TextStream: a widget that receives only the new text, so traffic stays linear in its length.

Setting an ordinary widget's ``.value`` resends the whole text on every update. Here the kernel
sends ``[offset, delta]`` custom messages; the browser side (``stream.js``, beside it) appends them
to its own copy and renders Markdown safely (DOM nodes, never HTML strings). The full text is part
of the widget state only when a frontend asks for the state (a page reload), or when the text is
replaced as a whole with :meth:`TextStream.replace`.

What leaves the kernel is the text with credential-shaped parts replaced
(:func:`nbagent.redact.redact_secrets`), like every other output: a model may echo a key, or pass
one as an argument. A key streams in pieces, so each send redacts the text as it now is, and a last
word that more characters could still turn into a key (``sk-proj-Zq8``) waits for the next send;
should redaction still change text the browser already has, the whole text is sent again instead
of a delta. Each send re-reads only the new text and a window before it (:class:`GrowingRedaction`):
redacting the whole text every time cost the square of its length (6 s for 1 MB).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import anywidget
import traitlets

from ...redact import redact_secrets

__all__ = ["GrowingRedaction", "PlainStream", "TextFormat", "TextStream", "sendable", "utf16_len"]

_STATIC = Path(__file__).parent  # the scripts and styles sit beside the modules that send them


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


#: Characters no credential shape continues through (whitespace aside): a match crosses one only
#: through a header's name and separator or a URL's user and password, a few hundred characters.
_BREAKS = frozenset("\"',;}]<>")
#: Text re-read before the checkpoint: longer than any match that can cross a break.
_WINDOW = 1024
#: With no break in this many characters the checkpoint moves anyway (no key is that long).
_FORCE = 16384


class GrowingRedaction:
    """A text that only grows, and what of it may be shown: the text so far, redacted.

    :meth:`advance` moves what is shown up to what may be shown now (all of it, or all but a last
    word that could still become a key, see :func:`sendable`) and says what is new. It costs the
    new text and a bounded window, never the whole text: a checkpoint marks where earlier text is
    settled, each advance redacts from a window before the checkpoint to the end and checks that
    the window reads as before; when a match crossed the checkpoint (``Authorization: Bearer``
    whose token just arrived) the whole text is redacted again, and the caller is told to send it
    whole. Then the checkpoint moves to the last break before the end, and settled text older
    than the window is set aside, joined only when the whole text is asked for.
    """

    __slots__ = (
        "_base",
        "_checkpoint",
        "_head",
        "_new",
        "_open",
        "_pending",
        "_shown_head",
        "_tail",
    )

    def __init__(self, text: str = "") -> None:
        self._start(text, len(text))

    def _start(self, text: str, end: int) -> str:
        self._head: list[str] = []  # raw text before _base, settled
        self._base = 0  # where _open starts in the whole text
        self._open = text  # raw text from _base, joined
        self._new: list[str] = []  # raw pieces appended since the last advance
        self._pending = len(text) - end
        self._checkpoint = 0  # settled up to here (in the whole text); never before _base
        self._shown_head: list[str] = []  # shown for the text before the checkpoint
        self._tail = redact_secrets(text[:end])  # shown for the text from the checkpoint on
        return self._tail

    def append(self, piece: str) -> None:
        self._new.append(piece)
        self._pending += len(piece)

    @property
    def pending(self) -> int:
        """Characters appended but not shown yet."""
        return self._pending

    @property
    def text(self) -> str:
        """Everything appended (as it came: not redacted)."""
        return "".join((*self._head, self._open, *self._new))

    @property
    def shown(self) -> str:
        """What has been shown: the text up to the pending part, redacted."""
        return "".join((*self._shown_head, self._tail))

    def replace(self, text: str) -> str:
        """Start over with ``text``, all of it shown; returns what to show."""
        return self._start(text, len(text))

    def advance(self, *, everything: bool = False) -> tuple[str, bool]:
        """Show what may be shown now: ``(new text, False)`` to append to what was shown, or
        ``(the whole shown text, True)`` when text already shown reads differently now."""
        if self._new:
            self._open += "".join(self._new)
            self._new = []
        text, base = self._open, self._base
        end = len(text) if everything else sendable(text)
        self._pending = len(text) - end
        checkpoint = self._checkpoint - base
        start = max(0, checkpoint - _WINDOW)
        before = redact_secrets(text[start:checkpoint])
        after = redact_secrets(text[start:end])
        if end < checkpoint or not after.startswith(before):  # a match crossed the checkpoint
            whole = self.text
            return self._start(whole, len(whole) - self._pending), True
        tail = after[len(before) :]
        shown = self._tail
        self._tail = tail
        if not tail.startswith(shown):
            return self.shown, True
        delta = tail[len(shown) :]
        cut = end
        floor = max(checkpoint, end - _FORCE)
        while cut > floor and not (text[cut - 1].isspace() or text[cut - 1] in _BREAKS):
            cut -= 1
        if cut == floor and end - checkpoint >= _FORCE:
            cut = end - _WINDOW
        if cut > checkpoint:
            middle = redact_secrets(text[start:cut])
            if after.startswith(middle):
                settled = len(middle) - len(before)
                self._shown_head.append(tail[:settled])
                self._tail = tail[settled:]
                self._checkpoint = base + cut
                keep_from = cut - _WINDOW
                if keep_from > _FORCE:  # set old settled text aside, now and then
                    self._head.append(text[:keep_from])
                    self._open = text[keep_from:]
                    self._base = base + keep_from
        return delta, False


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
        self._text = GrowingRedaction(text)  # everything appended, and what the browser has
        self._sent_units = utf16_len(self._text.shown)
        super().__init__(format=format, **kwargs)
        self.on_msg(self._on_frontend_message)

    @property
    def text(self) -> str:
        """Everything appended so far, sent or not (as it came: not redacted)."""
        with self._lock:
            return self._text.text

    @property
    def shown(self) -> str:
        """What the browser has been sent: the text so far with secrets replaced."""
        with self._lock:
            return self._text.shown

    @property
    def pending_chars(self) -> int:
        """Characters appended but not yet sent."""
        return self._text.pending

    def append(self, text: str) -> None:
        """Add text; nothing is sent until :meth:`flush`."""
        if text:
            with self._lock:
                self._text.append(text)

    def flush(self, *, everything: bool = False) -> bool:
        """Send the buffered text as one delta; True if something was sent.

        A last word that could still become a key waits, unless ``everything``.
        """
        with self._lock:
            if not self._text.pending:
                return False
            chunk, whole = self._text.advance(everything=everything)
            if whole:  # a secret completed across two sends: text already shown changed
                self._sent_units = utf16_len(chunk)
                self.send_state("value")
                return True
            offset = self._sent_units
            self._sent_units += utf16_len(chunk)
            if chunk:
                self.send([offset, chunk])
        return bool(chunk)

    def replace(self, text: str) -> None:
        """Show ``text`` instead of everything so far (sent once, whole)."""
        with self._lock:
            self._sent_units = utf16_len(self._text.replace(text))
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
                state["value"] = self._text.shown
        return state

    def _on_frontend_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("event") == "resync":
            self.send_state("value")


class PlainStream(TextStream):
    """A TextStream shown as preformatted text (arguments, reasoning): a much smaller script.

    ``language`` ("python") highlights it as code of that language, in the browser, with DOM
    nodes only (a code argument as it streams, see :class:`~.codefeed.CodeFeed`).
    """

    _esm = _static("plain.js")
    language = traitlets.Unicode("").tag(sync=True)

    def __init__(self, text: str = "", *, format: TextFormat = "code", **kwargs: Any) -> None:
        super().__init__(text, format=format, **kwargs)
