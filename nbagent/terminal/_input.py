"""Lines from standard input, read on the event loop so that Ctrl-C can always interrupt a wait.

A blocking ``readline`` on a worker thread cannot be cancelled: the person must press Enter
before an interrupt is noticed, and the interpreter waits for that thread on exit. Here the loop
watches the file descriptor (``add_reader``) only while someone waits for a line, and a wait
ends at once when :meth:`LineReader.interrupt` is called. Where a descriptor cannot be watched
(Windows, a regular file) a daemon thread reads it instead; the wait stays interruptible.
"""

from __future__ import annotations

import asyncio
import codecs
import collections
import os
import threading

__all__ = ["InputInterrupted", "LineReader", "LineTooLong"]


class InputInterrupted(Exception):
    """The wait for a line was interrupted (Ctrl-C)."""


class LineTooLong(Exception):
    """A line was longer than the limit; it was read and thrown away."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"that line was longer than {limit} characters and was ignored")
        self.limit = limit


_TOO_LONG = object()


class LineReader:
    """Reads whole lines from ``fd``; ``max_chars`` bounds one line (and the buffer)."""

    def __init__(self, fd: int, *, max_chars: int = 100_000, encoding: str = "utf-8") -> None:
        self.fd = fd
        self.max_chars = max_chars
        self.encoding = codecs.lookup(encoding).name
        self._max_bytes = max_chars * 4 + 4  # UTF-8 needs at most 4 bytes a character
        self._buffer = bytearray()
        self._discarding = False
        self._lines: collections.deque[str | object] = collections.deque()
        self._eof = False
        self._waiter: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watching = False
        self._thread: threading.Thread | None = None
        self._wanted = threading.Event()  # the thread reads one chunk each time this is set
        self._tail = False  # the last line queued is the input's end, with no newline
        #: The line just read ended with the input, not a newline (Ctrl-D typed twice after
        #: it): a terminal leaves the cursor after it, so whoever writes next ends that line.
        self.unterminated = False

    # --- reading -----------------------------------------------------------------------------

    async def read_line(self) -> str | None:
        """The next line without its newline, or None at end of input.

        Raises :class:`InputInterrupted` when :meth:`interrupt` is called during the wait and
        :class:`LineTooLong` for a line over the limit.
        """
        while not self._lines and not self._eof:
            loop = asyncio.get_running_loop()
            self._loop = loop
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiter = waiter
            self._watch(loop)
            try:
                await waiter
            finally:
                self._waiter = None
                self._unwatch(loop)
        if self._lines:
            line = self._lines.popleft()
            self.unterminated = self._tail and not self._lines
            if line is _TOO_LONG:
                raise LineTooLong(self.max_chars)
            assert isinstance(line, str)
            return line
        return None

    def interrupt(self) -> bool:
        """End the current wait with :class:`InputInterrupted`; False if nobody was waiting."""
        waiter = self._waiter
        if waiter is None or waiter.done():
            return False
        waiter.set_exception(InputInterrupted())
        return True

    @property
    def waiting(self) -> bool:
        return self._waiter is not None and not self._waiter.done()

    # --- the descriptor ----------------------------------------------------------------------

    def _watch(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._thread is not None:
            self._wanted.set()
            return
        try:
            loop.add_reader(self.fd, self._readable)
            self._watching = True
        except (NotImplementedError, PermissionError, ValueError, OSError):
            self._start_thread(loop)

    def _unwatch(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._watching:
            self._watching = False
            try:
                loop.remove_reader(self.fd)
            except (ValueError, OSError):
                pass

    def _readable(self) -> None:
        try:
            chunk = os.read(self.fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        self._take(chunk)

    def _start_thread(self, loop: asyncio.AbstractEventLoop) -> None:
        def pump() -> None:
            while True:
                self._wanted.wait()
                self._wanted.clear()
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:
                    chunk = b""
                try:
                    loop.call_soon_threadsafe(self._take, chunk)
                except RuntimeError:  # the loop closed: nobody reads any more
                    return
                if not chunk:
                    return

        self._thread = threading.Thread(target=pump, name="nbagent-stdin", daemon=True)
        self._wanted.set()
        self._thread.start()

    def _take(self, chunk: bytes) -> None:
        """Split a chunk into lines; wake the waiter when a line (or the end) arrived."""
        if not chunk:
            self._eof = True
            if self._buffer and not self._discarding:
                self._lines.append(self._decode(bytes(self._buffer)))
                self._tail = True
            self._buffer.clear()
        else:
            self._buffer += chunk
            while True:
                end = self._buffer.find(b"\n")
                if end < 0:
                    break
                raw = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                if self._discarding:
                    self._discarding = False
                    continue
                self._append(raw)
            if len(self._buffer) > self._max_bytes and not self._discarding:
                self._buffer.clear()
                self._discarding = True
                self._lines.append(_TOO_LONG)
            elif self._discarding:
                self._buffer.clear()
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        if self._lines or self._eof:
            waiter.set_result(None)
        elif self._thread is not None:
            self._wanted.set()  # no whole line yet: read on

    def _append(self, raw: bytes) -> None:
        line = self._decode(raw)
        self._lines.append(_TOO_LONG if len(line) > self.max_chars else line)

    def _decode(self, raw: bytes) -> str:
        return raw.decode(self.encoding, errors="replace").rstrip("\r")
