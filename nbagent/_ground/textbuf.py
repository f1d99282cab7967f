"""Text assembled from many small fragments in linear time and memory.

Streamed arguments and text arrive in fragments of a few bytes. Joining them one by one
(``text = text + delta``) copies the whole text for every fragment; keeping each fragment as its
own ``str`` costs ~60 bytes of object overhead per fragment. :class:`TextBuffer` keeps a short
list of recent fragments and folds them into chunks of a few kilobytes, and builds a slice only
when someone asks for it.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import FrozenInstanceError
from typing import Any

__all__ = ["StreamedArguments", "TextBuffer", "parse_partial_json"]

_FOLD_AFTER = 64  # pending fragments folded into one chunk
_CHUNK = 4096  # a chunk shorter than this absorbs the next fold


class TextBuffer:
    """Append-only text; :meth:`slice` and :meth:`prefix` build parts of it on demand."""

    __slots__ = ("_cached", "_cached_n", "_chunks", "_ends", "_pending", "length")

    def __init__(self) -> None:
        self._chunks: list[str] = []
        self._ends: list[int] = []  # cumulative length after each chunk
        self._pending: list[str] = []
        self._cached = ""
        self._cached_n = 0
        self.length = 0

    def append(self, fragment: str) -> None:
        pending = self._pending
        pending.append(fragment)
        self.length += len(fragment)
        if len(pending) >= _FOLD_AFTER:
            self._fold()

    def _fold(self) -> None:
        if not self._pending:
            return
        joined = "".join(self._pending)
        self._pending.clear()
        if self._chunks and len(self._chunks[-1]) < _CHUNK:
            self._chunks[-1] += joined
            self._ends[-1] += len(joined)
        else:
            self._chunks.append(joined)
            self._ends.append((self._ends[-1] if self._ends else 0) + len(joined))

    def slice(self, start: int, end: int) -> str:
        """Characters ``start`` to ``end`` (clamped to what was appended)."""
        end = min(end, self.length)
        if start >= end:
            return ""
        self._fold()
        ends = self._ends
        first = bisect.bisect_right(ends, start)
        last = bisect.bisect_left(ends, end)
        base = ends[first - 1] if first else 0
        if first == last:
            return self._chunks[first][start - base : end - base]
        return "".join(self._chunks[first : last + 1])[start - base : end - base]

    def prefix(self, n: int) -> str:
        """The first ``n`` characters (the last prefix asked for is cached)."""
        n = min(n, self.length)
        if n != self._cached_n:
            self._cached, self._cached_n = self.slice(0, n), n
        return self._cached

    def text(self) -> str:
        """Everything appended so far."""
        return self.prefix(self.length)


_UNSET: Any = object()


class StreamedArguments:
    """Base of the values that show a call's arguments while they stream (events, callbacks).

    ``text`` (the arguments so far) and ``partial`` (its best parse, for display) are computed on
    first read from a shared :class:`TextBuffer` and cached, so a reader that only uses the
    newest fragment pays nothing for them. Instances are immutable.
    """

    __slots__ = ("_end", "_partial", "_source", "_text")
    _end: int
    _partial: Any
    _source: TextBuffer | None
    _text: str | None

    def _init_arguments(
        self, text: str | None, source: tuple[TextBuffer, int] | None, partial: Any = _UNSET
    ) -> None:
        buffer, end = source if source is not None else (None, 0)
        object.__setattr__(self, "_source", buffer)
        object.__setattr__(self, "_end", end)
        object.__setattr__(self, "_text", text)
        object.__setattr__(self, "_partial", partial)

    @property
    def text(self) -> str:
        """The arguments received so far (JSON text, possibly incomplete)."""
        text: str | None = self._text
        if text is None:
            text = self._source.prefix(self._end) if self._source is not None else ""
            object.__setattr__(self, "_text", text)
        return text

    @property
    def partial(self) -> Any:
        """The best parse of :attr:`text` (a dict that fills in as fragments arrive); None
        before anything usable arrived. For display only: never validated."""
        value = self._partial
        if value is _UNSET:
            value = parse_partial_json(self.text)
            object.__setattr__(self, "_partial", value)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")


def parse_partial_json(text: str) -> Any:
    """Best-effort parse of a JSON prefix (``'{"city": "Par'`` → ``{"city": "Par"}``).

    Returns ``None`` when nothing usable has arrived yet, or when the text is not usable (nested
    too deeply, not JSON). For display only: never validated, never raises.
    """
    if not text:
        return None
    try:
        import jiter

        return jiter.from_json(text.encode(), partial_mode="trailing-strings")
    except (ValueError, ImportError):
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            return None
