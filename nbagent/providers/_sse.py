"""An incremental Server-Sent Events decoder that works on raw bytes.

Bytes may arrive split anywhere (inside a line, a CRLF pair or a multi-byte UTF-8 character):
lines are assembled as bytes first and decoded only when complete, strictly as UTF-8. Invalid
UTF-8 is never replaced silently: decoding stops there, the events before it are returned, and
:attr:`SSEDecoder.error` holds the :class:`UnicodeDecodeError`. Lines may end in
CR, LF or CRLF; comment lines (``: keep-alive``) are skipped; several ``data:`` lines of one event
are joined with ``\\n``; ``id`` and ``retry`` are ignored (nbagent never reconnects a stream).

httpx2 ships an ``EventSource`` too, but it decodes text with replacement characters and builds an
object per event; this one returns plain ``(event, data)`` tuples and does the minimum per chunk.
"""

from __future__ import annotations

__all__ = ["SSEDecoder"]


class SSEDecoder:
    """Feed bytes, get complete ``(event, data)`` pairs. ``event`` is ``""`` when not named."""

    __slots__ = ("_cr", "_data", "_event", "_pending", "error")

    def __init__(self) -> None:
        self.error: UnicodeDecodeError | None = None  # set once invalid UTF-8 was met
        self._pending: list[bytes] = []  # an unterminated line, in pieces
        self._cr = False  # the last chunk ended in CR: a leading LF in the next one is its pair
        self._event = b""
        self._data: list[bytes] | None = None

    def feed(self, chunk: bytes) -> list[tuple[str, str]]:
        """Decode one chunk; returns the events it completed (often none or one)."""
        if self.error is not None:
            return []
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

    def flush(self) -> list[tuple[str, str]]:
        """The stream ended: complete a final line and event that lacked their terminators."""
        if self.error is not None:
            return []
        lines = [b"".join(self._pending)] if self._pending else []
        self._pending.clear()
        lines.append(b"")
        return self._lines(lines)

    def _lines(self, lines: list[bytes]) -> list[tuple[str, str]]:
        events: list[tuple[str, str]] = []
        for line in lines:
            if not line:
                if self._data is not None:
                    try:
                        events.append((self._event.decode(), b"\n".join(self._data).decode()))
                    except UnicodeDecodeError as exc:
                        self.error = exc
                        return events
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
