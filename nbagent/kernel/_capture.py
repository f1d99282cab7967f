"""Where a snippet's output goes while it runs: its stdout, stderr, displays and ``input()``.

A snippet runs on a thread of its own (so the kernel's loop stays free for clicks and for the
live view). While it runs, ``sys.stdout``, ``sys.stderr``, the shell's display publisher and
formatter, and ``builtins.input`` are routers: what the snippet's thread writes or displays is
kept in its :class:`Capture`, bounded; what any other thread does (the kernel, nbagent's own
widgets, a thread the snippet started) goes where it always goes. The shell's ``showtraceback``
stays quiet on a thread where nbagent reads an object (:mod:`nbagent._ground.guard`): a repr that
raises is said in the snippet's result, not as a traceback in the cell. The thread is recognised
by a context variable set inside it, so nothing depends on thread names.
"""

from __future__ import annotations

import builtins
import contextlib
import contextvars
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .._ground.guard import reading

__all__ = ["Capture", "Captured", "current", "routed"]

_active: contextvars.ContextVar[Capture | None] = contextvars.ContextVar(
    "nbagent_kernel_capture", default=None
)


def current() -> Capture | None:
    """The capture of the snippet running on this thread (None elsewhere)."""
    return _active.get()


@dataclass
class Captured:
    """One piece of output, in the order it came: a stream's text, or a display."""

    kind: str  # "stdout" | "stderr" | "display"
    text: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    obj: Any = None  # what was displayed (a DataFrame, a figure …), when it is known


class Capture:
    """What one snippet printed and displayed, within its limits.

    Text beyond ``max_chars`` (all streams together) and displays beyond ``max_displays`` are
    counted, not kept: a snippet that prints 100 MB holds ``max_chars`` of it in memory.
    """

    def __init__(self, *, max_chars: int, max_displays: int) -> None:
        self.items: list[Captured] = []
        self.max_chars = max_chars
        self.max_displays = max_displays
        self.chars = 0
        self.dropped_chars = 0
        self.displays = 0
        self.dropped_displays = 0
        self.cleared = 0
        self.pending: Any = None  # the object the formatter saw last (displayed next)
        self._lock = threading.Lock()

    def activate(self) -> contextvars.Token[Capture | None]:
        return _active.set(self)

    @staticmethod
    def deactivate(token: contextvars.Token[Capture | None]) -> None:
        _active.reset(token)

    def write(self, kind: str, text: str) -> None:
        if not text:
            return
        with self._lock:
            room = self.max_chars - self.chars
            if room <= 0:
                self.dropped_chars += len(text)
                return
            if len(text) > room:
                self.dropped_chars += len(text) - room
                text = text[:room]
            self.chars += len(text)
            last = self.items[-1] if self.items else None
            if last is not None and last.kind == kind:
                last.text += text
            else:
                self.items.append(Captured(kind, text))

    def display(self, data: dict[str, Any], obj: Any) -> None:
        with self._lock:
            if self.displays >= self.max_displays:
                self.dropped_displays += 1
                return
            self.displays += 1
            self.items.append(Captured("display", data=dict(data), obj=obj))

    def clear(self) -> None:
        """``clear_output()`` from the snippet: what it displayed so far goes, as in a cell."""
        with self._lock:
            self.items = [i for i in self.items if i.kind != "display"]
            self.cleared += 1


class _Stream:
    """Stands in for ``sys.stdout`` / ``sys.stderr``: a snippet's writes to its capture."""

    def __init__(self, inner: Any, kind: str) -> None:
        self._inner = inner
        self._kind = kind

    def write(self, text: Any) -> int:
        capture = _active.get()
        if capture is None:
            return int(self._inner.write(text) or 0)
        text = text if isinstance(text, str) else str(text)
        capture.write(self._kind, text)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if _active.get() is None:
            self._inner.flush()

    def isatty(self) -> bool:
        return False if _active.get() is not None else bool(self._inner.isatty())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _routed_publish(inner: Any) -> Any:
    """The shell's display publisher's ``publish``: a snippet's displays to its capture."""

    def publish(data: Any, metadata: Any = None, *args: Any, **kwargs: Any) -> Any:
        capture = _active.get()
        if capture is None:
            return inner(data, metadata, *args, **kwargs)
        obj, capture.pending = capture.pending, None
        if isinstance(data, dict):
            capture.display(data, obj)
        return None

    return publish


def _routed_clear(inner: Any) -> Any:
    """``clear_output()`` from a snippet clears what it displayed, as in a cell."""

    def clear_output(*args: Any, **kwargs: Any) -> Any:
        capture = _active.get()
        if capture is None:
            return inner(*args, **kwargs)
        capture.clear()
        return None

    return clear_output


def _routed_format(inner: Any) -> Any:
    """The display formatter's ``format``, only to see *what* a snippet displays (a DataFrame
    is then shown as nbagent's own escaped table, not as HTML the snippet produced)."""

    def format(obj: Any, *args: Any, **kwargs: Any) -> Any:
        result = inner(obj, *args, **kwargs)
        capture = _active.get()
        if capture is not None:
            capture.pending = obj
        return result

    return format


def _traceback_router(inner: Any) -> Any:
    """The shell's ``showtraceback``: IPython's formatters call it when an object's repr
    raises. On a :class:`~nbagent._ground.guard.Reader`'s worker (nbagent reading an object) the
    exception is kept for the reader, which says it in the result, instead of a traceback
    published into the cell."""

    def showtraceback(exc_tuple: Any = None, *args: Any, **kwargs: Any) -> Any:
        job = reading()
        if job is None:
            return inner(exc_tuple, *args, **kwargs)
        raised = exc_tuple[1] if type(exc_tuple) is tuple and len(exc_tuple) == 3 else None
        job.shown = raised if isinstance(raised, BaseException) else sys.exc_info()[1]
        return None

    return showtraceback


class InputRefused(RuntimeError):
    """``input()`` in code the agent runs: nobody is there to answer it."""


def _input_router(inner: Any) -> Any:
    def routed_input(prompt: Any = "") -> str:
        if _active.get() is not None:
            raise InputRefused(
                "input() is not available to code the agent runs: nobody can answer it "
                "there. Ask the person in your reply instead, or use a value they gave."
            )
        return str(inner(prompt))

    routed_input.__wrapped__ = inner  # type: ignore[attr-defined]
    return routed_input


class ExitRefused(RuntimeError):
    """``exit()`` / ``quit()`` in code the agent runs: the kernel would shut down."""


def _exit_router(inner: Any) -> Any:
    def ask_exit(*args: Any, **kwargs: Any) -> Any:
        if _active.get() is not None:
            raise ExitRefused(
                "exit() and quit() are not available to code the agent runs: the kernel "
                "(and the person's work in it) stays"
            )
        return inner(*args, **kwargs)

    return ask_exit


_install_lock = threading.Lock()


@contextlib.contextmanager
def routed(shell: Any) -> Iterator[None]:
    """Install the routers for as long as a snippet runs, then put back what was there.

    Only snippet threads are captured (see the module docs). The shell's publisher and
    formatter keep their identity (other code holds them, registers formatters on them): only
    their methods are shadowed, on the instance. A router some other code replaced meanwhile is
    left as that code left it.
    """
    with _install_lock:
        saved: list[tuple[Any, str, Any, Any, bool]] = []

        def swap(owner: Any, name: str, make: Any, *, shadow: bool = False) -> None:
            inner = getattr(owner, name, None)
            if owner is None or inner is None:
                return
            router = make(inner)
            own = shadow and name not in vars(owner)  # a method of the class, not the instance
            setattr(owner, name, router)
            saved.append((owner, name, inner, router, own))

        swap(sys, "stdout", lambda inner: _Stream(inner, "stdout"))
        swap(sys, "stderr", lambda inner: _Stream(inner, "stderr"))
        swap(builtins, "input", _input_router)
        if shell is not None:
            publisher = getattr(shell, "display_pub", None)
            swap(publisher, "publish", _routed_publish, shadow=True)
            swap(publisher, "clear_output", _routed_clear, shadow=True)
            swap(getattr(shell, "display_formatter", None), "format", _routed_format, shadow=True)
            swap(shell, "ask_exit", _exit_router, shadow=True)
            swap(shell, "showtraceback", _traceback_router, shadow=True)
    try:
        yield
    finally:
        with _install_lock:
            for owner, name, inner, router, own in reversed(saved):
                if getattr(owner, name, None) is not router:
                    continue
                if own:
                    delattr(owner, name)  # the class's own method shows again
                else:
                    setattr(owner, name, inner)
