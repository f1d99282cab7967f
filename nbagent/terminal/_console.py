"""The terminal's output: one writer that keeps lines whole, questions undisturbed, bytes safe.

Everything reaches the screen through :class:`Console`: the model's streamed text, the front
end's own lines, and (through :class:`HeldStream`) whatever tools print. It finishes an open line
before starting a block, holds outside output while a question waits for its answer (and passes
it on whole lines, so that a question never splits a tool's line), and cleans text from models
and tools so that no escape sequence can move the cursor, rewrite a line or disguise a call's
arguments.
"""

from __future__ import annotations

import codecs
import os
import re
import threading
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    import asyncio

__all__ = [
    "Console",
    "HeldStream",
    "clean",
    "clean_outside",
    "clean_strict",
    "clip",
    "one_line",
    "wants_color",
]

_STYLES = {
    "bold": "1",
    "dim": "2",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "blue": "34",
    "magenta": "35",
    "cyan": "36",
}
_SYMBOLS = {
    "call": "→",
    "result": "←",
    "ok": "✓",
    "fail": "✗",
    "retry": "↻",
    "more": "…",
    "nest": "│",
}
_ASCII = {
    "call": "->",
    "result": "<-",
    "ok": "+",
    "fail": "x",
    "retry": "~",
    "more": "...",
    "nest": "|",
}

# C0 controls except tab and newline, DEL, C1 controls, and the bidirectional overrides that can
# make text read differently from what it is ("Trojan Source").
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\r":
        return ""  # only ever useful to overwrite what was printed; "\r\n" becomes "\n"
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(text: str) -> str:
    """``text`` with terminal controls made visible (``\\x1b``) and carriage returns dropped."""
    return _UNSAFE.sub(_escape, text)


#: A color or text style (SGR): it cannot move the cursor or touch another line.
_SGR = re.compile("\x1b\\[[0-9;:]*m")


def _escape_keeping_cr(match: re.Match[str]) -> str:
    return "\r" if match.group() == "\r" else _escape(match)


def clean_outside(text: str, *, colors: bool = False) -> str:
    """Text a tool printed, made as safe as :func:`clean`: a tool may print what the model
    sent it. Kept: carriage returns (a progress line redrawing itself; the console starts
    outside output on a line of its own, so they reach no line of ours) and, with ``colors``,
    color and style codes; every other escape sequence is made visible."""
    if not colors:
        return _UNSAFE.sub(_escape_keeping_cr, text)
    pieces, last = [], 0
    for match in _SGR.finditer(text):
        pieces.append(_UNSAFE.sub(_escape_keeping_cr, text[last : match.start()]))
        pieces.append(match.group())
        last = match.end()
    pieces.append(_UNSAFE.sub(_escape_keeping_cr, text[last:]))
    return "".join(pieces)


def clean_strict(text: str) -> str:
    """Like :func:`clean`, and every invisible format character shown too (for calls and
    approval questions, where a zero-width character could hide part of an argument)."""
    cleaned = clean(text)
    if cleaned.isascii():
        return cleaned
    return "".join(f"\\u{ord(c):04x}" if unicodedata.category(c) == "Cf" else c for c in cleaned)


def clip(text: str, max_chars: int, max_lines: int | None = None) -> str:
    """``text`` cut to ``max_chars`` characters and ``max_lines`` lines, saying what was cut."""
    notes = []
    if max_lines is not None:
        lines = text.split("\n")
        if len(lines) > max_lines:
            text = "\n".join(lines[:max_lines])
            notes.append(f"{len(lines) - max_lines} more lines")
    if len(text) > max_chars:
        notes.append(f"{len(text) - max_chars} more characters")
        text = text[:max_chars]
    if notes:
        text += f" … ({', '.join(notes)} not shown)"
    return text


def one_line(text: str, max_chars: int) -> str:
    """``text`` on one line (newlines become spaces), cut to ``max_chars``."""
    return clip(" ".join(text.split()), max_chars)


def wants_color(out: Any, environ: Any = None) -> bool:
    """Color only on a terminal, and never when ``NO_COLOR`` is set (https://no-color.org)."""
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR", ""):
        return False
    isatty = getattr(out, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


def _can_encode(out: Any, sample: str) -> bool:
    encoding = getattr(out, "encoding", None) or "utf-8"
    try:
        codecs.lookup(encoding)
        sample.encode(encoding)
    except (LookupError, UnicodeError):
        return False
    return True


class Console:
    """Writes the transcript to ``out`` (and errors to ``err``), one whole line at a time.

    ``max_held_chars`` bounds the outside output (tools' prints) held back at a time, and an
    unfinished line of it; what a waiting question makes it drop is counted, and the count
    is shown. A write that fails (the reader of a pipe left, the disk is full, the stream was
    closed) never raises: it is kept as ``lost`` (with ``lost_stream``), later output is
    dropped, and whoever runs the session decides how to stop.
    """

    def __init__(
        self,
        out: TextIO,
        err: TextIO | None = None,
        *,
        color: bool = False,
        max_held_chars: int = 100_000,
    ) -> None:
        self.out = out
        self.err = err if err is not None else out
        self.color = color
        self.symbols = _SYMBOLS if _can_encode(out, "".join(_SYMBOLS.values())) else _ASCII
        self.max_held_chars = max_held_chars
        self.at_line_start = True
        self.asking = False
        self._redraw: str | None = None  # a question that outside output may interrupt
        self._stream: str | None = None
        self._held: list[tuple[TextIO, str, bool]] = []  # (stream, text, is one of our lines)
        self._tails: dict[int, tuple[TextIO, str]] = {}  # a stream's unfinished line, by id
        self._held_chars = 0
        self._dropped = 0
        self._lock = threading.RLock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._external_open = False  # the last write was a tool's, and its line is open
        self.lost: OSError | ValueError | None = None
        self.lost_stream: TextIO | None = None
        #: Written before each of our lines and the model's (a helper agent's run, indented
        #: under the call that runs it: see :meth:`indented`); "" at the top level.
        self.prefix = ""
        self._stream_prefix = ""

    # --- pieces ------------------------------------------------------------------------------

    def style(self, text: str, *styles: str) -> str:
        """``text`` in the given styles when color is on."""
        if not self.color or not styles or not text:
            return text
        codes = ";".join(_STYLES[s] for s in styles)
        return f"\x1b[{codes}m{text}\x1b[0m"

    def symbol(self, name: str) -> str:
        return self.symbols[name]

    @contextmanager
    def indented(self, prefix: str) -> Iterator[None]:
        """Our lines, the model's text and questions start with ``prefix`` meanwhile."""
        with self._lock:
            before, self.prefix = self.prefix, prefix
        try:
            yield
        finally:
            with self._lock:
                self.prefix = before

    def _indent(self, text: str, prefix: str | None = None) -> str:
        """``text`` with ``prefix`` (the console's) at the start of each line it begins."""
        prefix = self.prefix if prefix is None else prefix
        if not prefix:
            return text
        out = []
        for index, piece in enumerate(text.split("\n")):
            if index:
                out.append("\n")
            if piece and (index or self.at_line_start):
                out.append(prefix)
            out.append(piece)
        return "".join(out)

    def _write(self, stream: TextIO, text: str) -> None:
        if not text:
            return
        if self.lost is None:
            try:
                try:
                    stream.write(text)
                except UnicodeEncodeError:  # not a lost stream: text its encoding lacks
                    encoding = getattr(stream, "encoding", None) or "ascii"
                    stream.write(text.encode(encoding, "replace").decode(encoding))
            except (OSError, ValueError) as exc:
                self._lose(stream, exc)
            self.flush(stream)
        self.at_line_start = text.endswith("\n")
        self._external_open = False

    def flush(self, stream: TextIO) -> None:
        """Flush ``stream``; a failure is kept as ``lost`` instead of raised."""
        if self.lost is not None:
            return
        try:
            stream.flush()
        except (OSError, ValueError) as exc:
            self._lose(stream, exc)

    def _lose(self, stream: TextIO, exc: OSError | ValueError) -> None:
        self.lost, self.lost_stream = exc, stream

    # --- the model's streamed text -----------------------------------------------------------

    def stream(self, kind: str, text: str) -> None:
        """Write a piece of streamed model output (``kind`` "text" or "reasoning"), cleaned."""
        text = clean(text)
        if not text:
            return
        with self._lock:
            if self._stream != kind or self._stream_prefix != self.prefix:
                self._end_line()
                self._stream, self._stream_prefix = kind, self.prefix
            if kind == "reasoning":
                self._write_reasoning(text)
            else:
                self._write(self.out, self._indent(text))

    def _write_reasoning(self, text: str) -> None:
        if self.color:
            pieces = text.split("\n")
            styled = "\n".join(self.style(p, "dim") for p in pieces)
            self._write(self.out, self._indent(styled))
            return
        self._write(self.out, self._indent(text, self.prefix + "thinking: "))

    # --- the front end's own lines -----------------------------------------------------------

    def end_line(self) -> None:
        """Finish an open line so that the next output starts on its own."""
        with self._lock:
            self._end_line()

    def _end_line(self) -> None:
        if not self.at_line_start:
            self._write(self.out, "\n")
        self._stream = None

    def line(self, text: str = "", *styles: str, error: bool = False) -> None:
        """Write one line of our own (already cleaned) after finishing any open line."""
        with self._lock:
            self._end_line()
            stream = self.err if error else self.out
            if error and self.err is not self.out:
                self.flush(self.out)
            if self.prefix:
                lines = text.split("\n")
                shown = "\n".join(self.prefix + self.style(one, *styles) for one in lines)
            else:
                shown = self.style(text, *styles)
            self._write(stream, shown + "\n")
            self.at_line_start = True

    # --- questions ---------------------------------------------------------------------------

    def ask(self, question: str, *, interruptible: bool = False) -> None:
        """Write a question (no newline) and hold outside output until :meth:`answered`.

        ``interruptible`` (the ``you>`` prompt): outside output is shown at once instead, above
        the question, which is then asked again; nothing the person typed is lost.
        """
        with self._lock:
            self._end_line()
            question = self.prefix + question
            self._write(self.out, question)
            self.asking = True
            self._redraw = question if interruptible else None
        if interruptible and self._held:
            self._schedule_release()

    def answered(self, echo: str | None = None) -> None:
        """The question got its answer. ``echo``: the answer to write back (stdin is not a
        terminal, or nothing ended the line); None when the terminal already echoed it."""
        with self._lock:
            if echo is None:
                self.at_line_start = True
            else:
                self._write(self.out, echo + "\n")
            self._stream = None
            self.asking = False
            self._redraw = None
        self._schedule_release()

    # --- output from elsewhere (tools' prints, log messages) --------------------------------

    def attach(self, loop: asyncio.AbstractEventLoop | None) -> None:
        """Hold outside output for ``loop`` (None: write it at once) and release what is held."""
        self._loop = loop
        if loop is None:
            self.release(unfinished=True)

    def external(self, stream: TextIO, text: str) -> None:
        """Output that did not come from this front end, e.g. a tool's ``print``.

        With a loop attached it is held and released once the loop is idle: by then every
        event emitted before the print (the call it belongs to) has been rendered, and no
        question is waiting. It is released in whole lines, as a line-buffered terminal would
        show it: an unfinished line waits for its end, a flush or the end of the run, so that
        none of our lines (a question) lands inside it. The hold is bounded by
        ``max_held_chars``; the excess is counted.
        """
        with self._lock:
            if self._loop is None:
                self._external(stream, text)
                return
            _, tail = self._tails.pop(id(stream), (stream, ""))
            text = tail + text
            cut = text.rfind("\n") + 1
            if len(text) - cut > self.max_held_chars:
                cut = len(text)  # a line with no end in sight: pass it on unfinished
            if cut < len(text):
                self._tails[id(stream)] = (stream, text[cut:])
            self._hold(stream, text[:cut], False)
        self._schedule_release()

    def flush_external(self, stream: TextIO) -> None:
        """The outside writer flushed ``stream``: pass on its unfinished line too."""
        with self._lock:
            found = self._tails.pop(id(stream), None)
            if found is None:
                return
            self._hold(stream, found[1], False)
        self._schedule_release()

    def note(self, text: str, *styles: str) -> None:
        """One line of our own from any thread (e.g. a tool's end, seen on its thread): shown
        like outside output, never inside a question or a half-written line."""
        with self._lock:
            if self._loop is None:
                self.line(text, *styles)
                return
            self._hold(self.out, self.style(text, *styles) + "\n", True)
        self._schedule_release()

    def _hold(self, stream: TextIO, text: str, ours: bool) -> None:
        room = self.max_held_chars - self._held_chars
        if room < len(text):
            self._dropped += len(text) - max(room, 0)
            text = text[: max(room, 0)]
        if text:
            self._held.append((stream, text, ours))
            self._held_chars += len(text)

    def _schedule_release(self) -> None:
        loop = self._loop
        if loop is None:
            return
        try:
            loop.call_soon_threadsafe(self.release)
        except RuntimeError:  # the loop is closed: nothing will render events any more
            self.release()

    def release(self, *, unfinished: bool = False) -> None:
        """Write held outside output now, unless a question is waiting; ``unfinished``: also
        the lines not ended yet (the run is over, or the session ends)."""
        with self._lock:
            if unfinished:
                tails, self._tails = self._tails, {}
                for stream, tail in tails.values():
                    self._hold(stream, tail, False)
            if self.asking and self._redraw is None:
                return
            if not self._held and not self._dropped:
                return
            question = self._redraw if self.asking else None
            held, self._held, self._held_chars = self._held, [], 0
            dropped, self._dropped = self._dropped, 0
            if question is not None:
                self._end_line()  # leave the prompt's line; it is asked again below
            for stream, text, ours in held:
                if ours:
                    self._end_line()
                    self._write(stream, text)
                else:
                    self._external(stream, text)
            if dropped:
                self.line(f"({dropped} characters of tool output were dropped)", "dim")
            if question is not None:
                self._end_line()
                self._write(self.out, question)

    def _external(self, stream: TextIO, text: str) -> None:
        text = clean_outside(text, colors=self.color)
        if text:
            if not self._external_open:  # continue the tool's own line, never ours
                self._end_line()
            if self.color and "\x1b[" in text:
                # a style left on (concealed text, say) must not reach our lines: reset it
                body, end = (text[:-1], "\n") if text.endswith("\n") else (text, "")
                text = body + "\x1b[0m" + end
            self._write(stream, text)
            self._external_open = not self.at_line_start


class HeldStream:
    """Stands in for ``sys.stdout`` / ``sys.stderr`` during a session, writing through the
    console so that a tool's ``print`` never lands inside a question or a half-written line."""

    def __init__(self, console: Console, real: TextIO) -> None:
        self._console = console
        self._real = real

    def write(self, text: str) -> int:
        self._console.external(self._real, text)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._console.flush_external(self._real)
        self._console.flush(self._real)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)
