"""Calling a method of an object in the person's namespace from nbagent's own code, bounded.

Every object in the namespace is the person's code: its ``__repr__``, ``__len__``, properties,
``__deepcopy__`` or ``__getattr__`` may raise anything, hang, or spin. The kernel toolkit reads
exact builtin types directly (a ``list``'s length, a ``str``) and calls anything else through a
:class:`Reader`; so do the front ends, through :class:`nbagent._ground.formatting.Formatter`,
wherever they show one of the person's objects. A :class:`Reader`

* runs the call on a worker thread of its own, so the caller waits at most ``timeout`` seconds;
* turns whatever it raised (or that it did not finish) into :class:`Unreadable`, whose text is
  built without calling the object again (an exception's own ``__str__`` is user code too);
* stays interruptible: :meth:`Reader.interrupt`, a kernel interrupt of the waiting thread, the
  caller's ``cancelled()`` and the timeout each raise ``KeyboardInterrupt`` in the call, which a
  loop in Python sees at once; a call that blocks in C (``time.sleep``) ends when it returns.

A call still running after it was stopped is left behind on its daemon thread; while
:data:`MAX_STUCK` of them are, further calls are refused at once rather than adding threads.
"""

from __future__ import annotations

import contextvars
import ctypes
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from ..redact import redact_secrets

__all__ = [
    "MAX_STUCK",
    "Reader",
    "Unreadable",
    "async_raise",
    "let_land",
    "defines",
    "derives",
    "exact",
    "exception_text",
    "is_worker",
    "type_attribute",
    "reading",
]

T = TypeVar("T")

#: Worker threads left behind by calls that did not end when stopped, at most; then calls are
#: refused until some of them end.
MAX_STUCK = 8
#: Seconds an idle worker waits for the next call before it ends (a Reader never closed).
IDLE = 2.0

_stuck: set[threading.Thread] = set()
#: Every worker thread (a snippet's report of the threads it started leaves them out).
_workers: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
_stuck_lock = threading.Lock()
#: Set on a worker thread while it runs a call: the shell's traceback printer stays quiet there.
_reading: contextvars.ContextVar[_Job | None] = contextvars.ContextVar(
    "nbagent_kernel_reading", default=None
)


def reading() -> _Job | None:
    """The call this thread runs for a :class:`Reader` (None elsewhere)."""
    return _reading.get()


class Unreadable(Exception):
    """An object's method raised, did not finish, or was stopped; ``str()`` says which."""


def async_raise(ident: int, exception: type[BaseException]) -> None:
    """Raise ``exception`` in the thread ``ident`` at its next bytecode.

    There is no "take it back": ``PyThreadState_SetAsyncExc(id, NULL)`` leaves, on CPython 3.10
    and 3.11, the interpreter's "async exception pending" flag set for good, and every later
    ``sys.settrace`` or ``sys.setprofile`` (pdb, %debug, %prun, coverage) then hangs. A thread
    that may have been sent one too late calls :func:`let_land` where it can catch it."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(exception))


def let_land() -> None:
    """Give an exception :func:`async_raise` sent this thread a place to land: each turn of a
    loop checks for one. Call it inside a ``try`` that catches it."""
    for _ in range(8):
        pass


def exact(value: Any, kinds: frozenset[type]) -> bool:
    """``type(value)`` is one of ``kinds``, asked without running anyone's code: ``isinstance``
    would ask the object's ``__class__``, and ``kind in kinds`` a metaclass's ``__hash__`` and
    ``__eq__`` (so a class whose metaclass is not ``type`` is never looked up)."""
    kind = type(value)
    return type(kind) is type and kind in kinds


_PLAIN = frozenset({str, int, float})


def derives(kind: type, *bases: type) -> bool:
    """Whether ``kind`` is or derives from one of ``bases``, read from its MRO by identity:
    ``issubclass`` against an ABC (a ``Sequence`` subclass …) hashes ``kind``, which runs its
    metaclass's ``__hash__``."""
    try:
        mro = type.__dict__["__mro__"].__get__(kind, type)
    except Exception:
        return False
    return any(klass is base for klass in mro for base in bases)


def type_attribute(kind: type, name: str) -> str:
    """``kind.__name__`` / ``__module__`` / ``__qualname__`` as ``type`` itself stores them:
    a metaclass's own descriptors (user code) are never consulted."""
    try:
        value = type.__dict__[name].__get__(kind, type)
    except Exception:
        return ""
    return value if type(value) is str else ""


def defines(kind: type, name: str, stop: type | None = None) -> bool:
    """Whether a class of ``kind``'s MRO (before ``stop``) defines ``name`` itself, read from
    the classes' own dictionaries: no descriptor, ``__getattr__`` or metaclass code runs."""
    try:
        mro = type.__dict__["__mro__"].__get__(kind, type)
        for klass in mro:
            if klass is stop:
                return False
            if name in type.__dict__["__dict__"].__get__(klass, type):
                return True
    except Exception:
        return stop is not None  # cannot tell: assume the worst for the caller
    return False


def exception_text(exc: BaseException) -> str:
    """``ValueError: the message``, without calling the exception's own methods: its message is
    read from ``args`` when its class keeps ``BaseException.__str__``."""
    kind = type(exc)
    name = type_attribute(kind, "__qualname__") or "an exception"
    message = ""
    if not defines(kind, "__str__", BaseException):
        args = exc.args
        if type(args) is tuple and len(args) == 1 and type(args[0]) is str:
            message = args[0]
        elif type(args) is tuple and args and all(exact(a, _PLAIN) for a in args):
            message = ", ".join(a if type(a) is str else repr(a) for a in args)
    message = " ".join(message.split())
    if len(message) > 300:
        message = message[:299] + "…"
    return redact_secrets(f"{name}: {message}" if message else name)


class _Job:
    """One call handed to a worker."""

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.fn = fn
        self.args = args
        self.ended = threading.Event()
        self.ok = False
        self.value: Any = None
        self.error: BaseException | None = None
        self.stopped = ""  # why nbagent stopped it, if it did
        self.shown: BaseException | None = None  # what the shell's formatter caught, if anything


class _Worker:
    """A daemon thread that runs jobs one at a time; spent once a job of it was stopped."""

    def __init__(self, name: str) -> None:
        self.jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.current: _Job | None = None
        self.closing = False  # it ends: no job may be handed to it any more
        self.raised = False  # a stop was sent to its thread (it may land late: let_land)
        self.thread = threading.Thread(
            target=contextvars.copy_context().run, args=(self._main,), name=name, daemon=True
        )
        _workers.add(self.thread)
        self.thread.start()

    def submit(self, job: _Job) -> bool:
        """Hand ``job`` over; False when this worker is ending (idle too long)."""
        with self.lock:
            if self.closing:
                return False
            self.jobs.put(job)
            return True

    def _main(self) -> None:
        while True:
            try:
                job = self.jobs.get(timeout=IDLE)
            except queue.Empty:
                with self.lock:  # a job handed over just now is run, not left in the queue
                    if self.jobs.empty():
                        self.closing = True
                        return
                continue
            if job is None:
                return
            self._run(job)
            if job.stopped:
                return  # a stopped job spends its worker: the next call gets a fresh one

    def _run(self, job: _Job) -> None:
        token = _reading.set(job)
        try:
            try:
                with self.lock:
                    self.current = job
                value = job.fn(*job.args)
                job.value, job.ok = value, True
            finally:
                self._leave()
        except BaseException as exc:  # anything at all: the caller reads it as text
            job.error = exc
        finally:
            _reading.reset(token)
            job.ended.set()

    def _leave(self) -> None:
        """Stop taking interrupts, and let one that came too late for the call land here, where
        it is caught and the function tried again."""
        while True:
            try:
                with self.lock:
                    self.current = None
                    raised = self.raised
                if raised:
                    let_land()
                return
            except KeyboardInterrupt:
                pass

    def stop(self, job: _Job, why: str) -> bool:
        """Raise KeyboardInterrupt in ``job`` if it still runs (True then)."""
        with self.lock:
            if self.current is not job or job.ended.is_set():
                return False
            job.stopped = why
            ident = self.thread.ident
            if ident is not None:
                async_raise(ident, KeyboardInterrupt)
                self.raised = True
            return True


class Reader:
    """Calls the person's code bounded in time, interruptible, exceptions as text (module docs).

    ``timeout``: seconds one call may take; ``cancelled``: polled while waiting (a sync tool's
    ``context.cancelled``), True stops the call and every later one. Use it as a context
    manager (or call :meth:`close`) to end its worker at once; an idle worker ends by itself.
    """

    def __init__(
        self, timeout: float, *, cancelled: Callable[[], bool] | None = None, name: str = ""
    ) -> None:
        self.timeout = timeout
        self._cancelled = cancelled
        self._name = f"nbagent-read{'-' + name if name else ''}"[:64]
        self._worker: _Worker | None = None
        self._job: _Job | None = None
        self._lock = threading.Lock()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            worker, self._worker = self._worker, None
        if worker is not None:
            worker.jobs.put(None)

    def interrupt(self) -> bool:
        """Stop the call running now (True if there was one); later calls run as usual."""
        with self._lock:
            worker, job = self._worker, self._job
        if worker is None or job is None or not worker.stop(job, "it was stopped"):
            return False
        job.ended.set()  # the waiting caller reads "stopped" now, not when the call returns
        return True

    def call(self, what: str, fn: Callable[..., T], *args: Any, timeout: float | None = None) -> T:
        """``fn(*args)``, or :class:`Unreadable` saying ``what`` failed and why (``what`` names
        the object's part read, e.g. "its __repr__")."""
        limit = self.timeout if timeout is None else timeout
        if self._cancelled is not None and self._cancelled():
            raise Unreadable(f"{what} was not read: the call was cancelled")
        stuck = _still_stuck()
        if stuck >= MAX_STUCK:
            raise Unreadable(
                f"{what} was not read: {stuck} earlier reads of objects in this kernel are "
                "still running (blocked in C), and nbagent starts no more"
            )
        job = _Job(fn, args)
        with self._lock:
            worker = self._worker
            if worker is None or not worker.submit(job):
                worker = self._worker = _Worker(self._name)
                worker.submit(job)
            self._job = job
        try:
            self._wait(job, limit)
        except BaseException:  # a kernel interrupt of the waiting thread: the call stops too
            self._abandon(worker, job, "it was interrupted")
            raise
        finally:
            with self._lock:
                self._job = None
        if not job.ok and job.error is None and not job.stopped:
            self._abandon(worker, job, f"it did not finish within {limit:g} s")
        if job.stopped:
            self._abandon(worker, job, job.stopped)
            raise Unreadable(f"{what} did not answer: {job.stopped}")
        if job.error is not None:
            raise Unreadable(f"{what} raised {exception_text(job.error)}")
        if job.shown is not None:  # the shell's formatter caught it and showed nothing
            raise Unreadable(f"{what} raised {exception_text(job.shown)}")
        value: T = job.value
        return value

    def _wait(self, job: _Job, limit: float) -> None:
        if self._cancelled is None:
            job.ended.wait(limit)
            return
        import time

        deadline = time.monotonic() + limit
        while not job.ended.wait(min(0.05, max(0.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                return
            if self._cancelled():
                job.stopped = job.stopped or "the call was cancelled"
                return

    def _abandon(self, worker: _Worker, job: _Job, why: str) -> None:
        """Stop ``job`` if it still runs; its worker is then spent (the next call starts one)."""
        if job.ended.is_set() and (job.ok or job.error is not None) and not job.stopped:
            return
        job.stopped = job.stopped or why
        worker.stop(job, job.stopped)
        with self._lock:
            if self._worker is worker:
                self._worker = None
        with _stuck_lock:
            _stuck.add(worker.thread)


def is_worker(thread: threading.Thread) -> bool:
    """Whether ``thread`` is one of a :class:`Reader`'s (nbagent's, not a snippet's)."""
    return thread in _workers


def _still_stuck() -> int:
    with _stuck_lock:
        for thread in [t for t in _stuck if not t.is_alive()]:
            _stuck.discard(thread)
        return len(_stuck)
