"""An incremental Server-Sent Events decoder that works on raw bytes.

Bytes may arrive split anywhere (inside a line, a CRLF pair or a multi-byte UTF-8 character):
lines are assembled as bytes and an event's data is handed on as bytes, to be parsed as JSON by
:func:`loads`, which checks UTF-8 strictly (invalid UTF-8 raises :class:`UnicodeDecodeError`,
never a silent replacement character). Lines may end in
CR, LF or CRLF; comment lines (``: keep-alive``) are skipped; several ``data:`` lines of one event
are joined with ``\\n``; ``id`` and ``retry`` are ignored (nbagent never reconnects a stream).

httpx2 ships an ``EventSource`` too, but it decodes text with replacement characters and builds an
object per event; this one returns plain ``(event, data)`` byte tuples and does the minimum per
chunk.
"""

from __future__ import annotations

import json
from typing import Any

import jiter

__all__ = ["SSEDecoder", "loads"]


def loads(data: bytes) -> Any:
    """Parse one event's JSON data; invalid UTF-8 raises :class:`UnicodeDecodeError`.

    jiter is the fast path (it rejects invalid UTF-8 itself); the standard library parser is
    the fallback that tells bad UTF-8 from bad JSON and accepts what jiter is stricter about
    (lone surrogate escapes).
    """
    try:
        return jiter.from_json(data)
    except ValueError:
        return json.loads(data.decode())  # strict UTF-8; raises the precise error


class SSEDecoder:
    """Feed bytes, get complete ``(event, data)`` pairs; ``event`` is ``b""`` when not named."""

    __slots__ = ("_cr", "_data", "_event", "_pending")

    def __init__(self) -> None:
        self._pending: list[bytes] = []  # an unterminated line, in pieces
        self._cr = False  # the last chunk ended in CR: a leading LF in the next one is its pair
        self._event = b""
        self._data: list[bytes] | None = None

    def feed(self, chunk: bytes) -> list[tuple[bytes, bytes]]:
        """Decode one chunk; returns the events it completed (often none or one)."""
        if self._cr:
            self._cr = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        end = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
        if end < 0:
            if chunk:
                self._pending.append(chunk)
            return []
        if self._pending:
            self._pending.append(chunk[: end + 1])
            head = b"".join(self._pending)
            self._pending.clear()
        else:
            head = chunk[: end + 1]
        if end + 1 < len(chunk):
            self._pending.append(chunk[end + 1 :])
        elif head[-1:] == b"\r":
            self._cr = True
        return self._lines(head.splitlines())

    def flush(self) -> list[tuple[bytes, bytes]]:
        """The stream ended: complete a final line and event that lacked their terminators."""
        lines = [b"".join(self._pending)] if self._pending else []
        self._pending.clear()
        lines.append(b"")
        return self._lines(lines)

    def _lines(self, lines: list[bytes]) -> list[tuple[bytes, bytes]]:
        events: list[tuple[bytes, bytes]] = []
        for line in lines:
            if not line:
                if self._data is not None:
                    data = self._data
                    events.append((self._event, data[0] if len(data) == 1 else b"\n".join(data)))
                self._data = None
                self._event = b""
            elif line.startswith(b"data:"):
                value = line[6:] if line[5:6] == b" " else line[5:]
                if self._data is None:
                    self._data = [value]
                else:
                    self._data.append(value)
            elif line[0] == 58:  # b":" — a comment or keep-alive
                continue
            elif line.startswith(b"event:"):
                self._event = line[7:] if line[6:7] == b" " else line[6:]
            elif line == b"data":  # a field name alone means an empty value
                if self._data is None:
                    self._data = [b""]
                else:
                    self._data.append(b"")
        return events
