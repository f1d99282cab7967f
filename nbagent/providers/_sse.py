"""An incremental Server-Sent Events decoder that works on raw bytes, with a size limit.

Bytes may arrive split anywhere (inside a line, a CRLF pair or a multi-byte UTF-8 character):
lines are assembled as bytes and an event's data is handed on as bytes, to be parsed as JSON by
:func:`loads`. A byte order mark that opens the stream is skipped, as the spec says. Lines
may end in CR, LF or CRLF; comment lines (``: keep-alive``) are skipped; several ``data:``
lines of one event are joined with ``\\n``; ``id`` and ``retry`` are ignored (nbagent never
reconnects a stream).

Limit: a line, and the data of one event, may hold at most ``max_event_bytes`` (default
:data:`DEFAULT_MAX_EVENT_BYTES`, 8 MiB). Beyond it :class:`EventTooLarge` is raised as soon as
the limit is crossed, so a line that never ends costs about the limit in memory, not the
stream's length.

Invalid UTF-8: :func:`loads` replaces each invalid byte with U+FFFD and says the event was
*lossy*, so a parser can keep text (with the replacement character) and refuse to pass on tool
arguments whose bytes were damaged.

httpx2 ships an ``EventSource`` too, but it decodes text with replacement characters silently,
holds lines without limit and builds an object per event; this one returns plain
``(event, data)`` byte tuples and does the minimum per chunk.
"""

from __future__ import annotations

import json
from typing import Any

import jiter

__all__ = [
    "DEFAULT_MAX_EVENT_BYTES",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "EventTooLarge",
    "SSEDecoder",
    "loads",
]

#: The default cap on one SSE line and on one event's data, in bytes.
DEFAULT_MAX_EVENT_BYTES = 8 * 1024 * 1024
#: One answer's whole body, at most: a 128k-token answer is about 40 MB of events.
DEFAULT_MAX_RESPONSE_BYTES = 128 * 1024 * 1024

_BOM = b"\xef\xbb\xbf"  # UTF-8 byte order mark


class EventTooLarge(ValueError):
    """A line or an event's data grew past the decoder's ``max_event_bytes``."""

    def __init__(self, limit: int, what: str) -> None:
        self.limit = limit
        super().__init__(f"{what} longer than {limit:,} bytes (max_event_bytes)")


def loads(data: bytes) -> tuple[Any, bool]:
    """Parse one event's JSON data: ``(value, lossy)``.

    ``lossy`` is True when the bytes were not valid UTF-8 and each invalid byte became U+FFFD.
    jiter is the fast path (it rejects invalid UTF-8 itself); the standard library parser is
    the fallback that tells bad UTF-8 from bad JSON and accepts what jiter is stricter about
    (lone surrogate escapes). Raises ValueError for data that is not JSON (also for JSON nested
    too deep to parse).
    """
    try:
        return jiter.from_json(data), False
    except ValueError:
        pass
    lossy = False
    try:
        text = data.decode()
    except UnicodeDecodeError:
        text = data.decode("utf-8", "replace")
        lossy = True
    try:
        return json.loads(text), lossy
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


class SSEDecoder:
    """Feed bytes, get complete ``(event, data)`` pairs; ``event`` is ``b""`` when not named.

    Raises :class:`EventTooLarge` when a line or an event's data passes ``max_event_bytes``.
    """

    __slots__ = (
        "_cr",
        "_data",
        "_data_size",
        "_event",
        "_head",
        "_limit",
        "_pending",
        "_pending_size",
    )

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._limit = max_event_bytes
        self._pending: list[bytes] = []  # an unterminated line, in pieces
        self._pending_size = 0
        self._cr = False  # the last chunk ended in CR: a leading LF in the next one is its pair
        self._event = b""
        self._data: list[bytes] | None = None
        self._data_size = 0
        self._head: bytes | None = b""  # the stream's first bytes, until a BOM is ruled out

    def _hold(self, piece: bytes) -> None:
        self._pending.append(piece)
        self._pending_size += len(piece)
        if self._pending_size > self._limit:
            self._pending.clear()
            raise EventTooLarge(self._limit, "a line")

    def feed(self, chunk: bytes) -> list[tuple[bytes, bytes]]:
        """Decode one chunk; returns the events it completed (often none or one)."""
        if self._head is not None:
            # The spec drops one U+FEFF that opens the stream (it may arrive split).
            chunk = self._head + chunk
            if len(chunk) < len(_BOM) and _BOM.startswith(chunk):
                self._head = chunk
                return []
            self._head = None
            if chunk.startswith(_BOM):
                chunk = chunk[len(_BOM) :]
        if not chunk:
            return []  # nothing to decode, and a pending CR still awaits its LF
        if self._cr:
            self._cr = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        end = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
        if end < 0:
            if chunk:
                self._hold(chunk)
            return []
        if self._pending:
            self._pending.append(chunk[: end + 1])
            head = b"".join(self._pending)
            self._pending.clear()
            self._pending_size = 0
        else:
            head = chunk[: end + 1]
        if end + 1 < len(chunk):
            self._hold(chunk[end + 1 :])
        elif head[-1:] == b"\r":
            self._cr = True
        return self._lines(head.splitlines())

    def flush(self) -> list[tuple[bytes, bytes]]:
        """The stream ended: complete a final line and event that lacked their terminators."""
        lines = [b"".join(self._pending)] if self._pending else []
        self._pending.clear()
        self._pending_size = 0
        lines.append(b"")
        return self._lines(lines)

    def _add_data(self, value: bytes) -> None:
        self._data_size += len(value) + 1
        if self._data_size > self._limit + 1:
            self._data = None
            raise EventTooLarge(self._limit, "an event with data")
        if self._data is None:
            self._data = [value]
        else:
            self._data.append(value)

    def _lines(self, lines: list[bytes]) -> list[tuple[bytes, bytes]]:
        events: list[tuple[bytes, bytes]] = []
        limit = self._limit
        for line in lines:
            if not line:
                if self._data is not None:
                    data = self._data
                    events.append((self._event, data[0] if len(data) == 1 else b"\n".join(data)))
                self._data = None
                self._data_size = 0
                self._event = b""
            elif len(line) > limit:
                raise EventTooLarge(limit, "a line")
            elif line.startswith(b"data:"):
                self._add_data(line[6:] if line[5:6] == b" " else line[5:])
            elif line[0] == 58:  # b":" — a comment or keep-alive
                continue
            elif line.startswith(b"event:"):
                self._event = line[7:] if line[6:7] == b" " else line[6:]
            elif line == b"data":  # a field name alone means an empty value
                self._add_data(b"")
        return events
