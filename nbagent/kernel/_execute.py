"""Running one snippet of Python in a namespace, as a cell would, on a thread of its own.

:func:`compile_snippet` turns the code into what runs: IPython's own transforms first (magics,
``!shell`` lines, as in a cell), then the body and, when the code ends with an expression, that
expression on its own so its value can be shown (``Out``). A syntax error is reported and
nothing runs.

:class:`SnippetThread` runs it on a daemon thread, so the kernel's event loop stays free (the
live view streams, Stop and Approve work, and a kernel interrupt reaches the run). Stopping it
raises ``KeyboardInterrupt`` inside the snippet's thread (``PyThreadState_SetAsyncExc``), which
Python code sees at its next bytecode: a loop in Python stops at once; a call that blocks in C
(``time.sleep(3600)``, a socket read, one long pandas operation) stops only when it returns.
Until then the call is reported as still running, and the kernel stays usable.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import linecache
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from types import CodeType
from typing import Any

from .._ground.guard import async_raise, is_worker, let_land
from ..redact import redact_secrets
from ._capture import Capture, ExitRefused, InputRefused

__all__ = ["CompiledSnippet", "SnippetThread", "compile_snippet"]


@dataclass(frozen=True)
class CompiledSnippet:
    """A snippet ready to run: its body, its last expression (if any), the names it mentions."""

    source: str
    filename: str
    body: CodeType
    last: CodeType | None
    names: frozenset[str]
    is_async: bool


def compile_snippet(code: str, filename: str, shell: Any = None) -> CompiledSnippet:
    """Compile ``code``; raises SyntaxError (with the line) when it is not valid Python."""
    source = code
    if shell is not None and hasattr(shell, "transform_cell"):
        try:
            source = shell.transform_cell(code)
        except SyntaxError:
            raise
        except Exception:  # a transform that fails: the code as written, which then reports
            source = code
    tree = ast.parse(source, filename, "exec")
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    last: CodeType | None = None
    final = tree.body[-1] if tree.body else None
    if isinstance(final, ast.Expr) and not _quiet(source):
        tree.body.pop()
        expression = ast.Expression(final.value)
        last = compile(expression, filename, "eval", flags=flags, dont_inherit=True)
    body = compile(tree, filename, "exec", flags=flags, dont_inherit=True)
    names = frozenset(
        node.id for node in ast.walk(ast.parse(source, filename)) if isinstance(node, ast.Name)
    )
    # the traceback of an error, and of functions the snippet defined, shows its lines
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    is_async = bool(body.co_flags & inspect.CO_COROUTINE) or bool(
        last is not None and last.co_flags & inspect.CO_COROUTINE
    )
    return CompiledSnippet(source, filename, body, last, names, is_async)


def _quiet(source: str) -> bool:
    """The code ends with ``;``: as in a cell, its last value is not shown."""
    import io
    import tokenize

    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return False
    ignored = (
        tokenize.NEWLINE,
        tokenize.NL,
        tokenize.COMMENT,
        tokenize.ENDMARKER,
        tokenize.DEDENT,
        tokenize.INDENT,
    )
    meaningful = [t for t in tokens if t.type not in ignored]
    return bool(meaningful) and meaningful[-1].string == ";"


def syntax_error_text(error: SyntaxError) -> str:
    """A syntax error as Python prints it (the line, a caret), without nbagent's frames."""
    return "".join(traceback.format_exception_only(type(error), error)).rstrip()


@dataclass
class Ending:
    """How the snippet's code ended."""

    value: Any = None
    has_value: bool = False
    error: str | None = None  # the traceback, from the snippet's own frames on
    error_name: str | None = None
    interrupted: bool = False
    exited: str | None = None  # SystemExit's code, as text
    seconds: float = 0.0
    threads: list[str] = field(default_factory=list)  # threads it started that still run


class SnippetThread:
    """One snippet on its own daemon thread: ``before`` (snapshot), the code, ``after``.

    ``before`` and ``after`` run on the same thread, so copying what undo needs and comparing
    afterwards never hold the kernel's loop. Only the code itself can be interrupted: an
    interrupt that arrives after it ended is dropped, not raised in nbagent's bookkeeping.
    """

    def __init__(
        self,
        snippet: CompiledSnippet,
        namespace: dict[str, Any],
        capture: Capture,
        *,
        before: Callable[[], None],
        after: Callable[[Ending], None],
        name: str,
    ) -> None:
        self.snippet = snippet
        self.namespace = namespace
        self.capture = capture
        self._before = before
        self._after = after
        self.ending = Ending()
        self.done = threading.Event()
        self._lock = threading.Lock()
        self._in_code = False
        self._stop_asked = False
        self._raised = False
        self._name = name[:64]
        self._thread: threading.Thread | None = None
        self._on_done: Callable[[], None] | None = None

    def start(self, on_done: Callable[[], None]) -> None:
        """Start the thread (in a copy of the caller's context: ipykernel 7 finds a cell's
        parent message there); ``on_done`` is called on that thread when everything ended."""
        import contextvars

        self._on_done = on_done
        self._thread = threading.Thread(
            target=contextvars.copy_context().run, args=(self._main,), name=self._name, daemon=True
        )
        self._thread.start()

    @property
    def ident(self) -> int | None:
        return self._thread.ident if self._thread is not None else None

    def interrupt(self) -> bool:
        """Raise KeyboardInterrupt in the snippet's code; False if its code is not running."""
        with self._lock:
            self._stop_asked = True
            ident = self.ident
            if not self._in_code or ident is None:
                return False
            async_raise(ident, KeyboardInterrupt)
            self._raised = True
            return True

    def _main(self) -> None:
        ending = self.ending
        try:
            self._before()
            if not self._stop_asked:
                self._run_code(ending)
        except BaseException as exc:  # nbagent's own bookkeeping failed: say so, never hang
            ending.error = f"nbagent could not run the snippet: {type(exc).__name__}: {exc}"
            ending.error_name = type(exc).__name__
        finally:
            try:
                self._after(ending)
            finally:
                self.done.set()
                if self._on_done is not None:
                    self._on_done()

    def _run_code(self, ending: Ending) -> None:
        threads_before = set(threading.enumerate())
        token = self.capture.activate()
        started = time.perf_counter()
        try:
            try:
                with self._lock:
                    self._in_code = True
                self._execute(ending)
            finally:
                self._leave_code()
        except KeyboardInterrupt:
            ending.interrupted = True
        except SystemExit as exc:
            ending.exited = repr(exc.code) if exc.code is not None else "None"
        except BaseException as exc:
            ending.error = self._traceback(exc)
            ending.error_name = type(exc).__name__
        finally:
            ending.seconds = time.perf_counter() - started
            self.capture.deactivate(token)
        ending.threads = sorted(
            t.name
            for t in set(threading.enumerate()) - threads_before
            if t.is_alive() and not is_worker(t)  # nbagent's own reads (list_variables …)
        )

    def _leave_code(self) -> None:
        """Stop accepting interrupts, and let one that arrived too late for the code land here,
        where it is caught (and the function tried again); never cleared (:func:`async_raise`
        says why)."""
        while True:
            try:
                with self._lock:
                    self._in_code = False
                    raised = self._raised
                if raised:
                    let_land()
                return
            except KeyboardInterrupt:
                self.ending.interrupted = True

    def _execute(self, ending: Ending) -> None:
        snippet = self.snippet
        if snippet.is_async:
            asyncio.run(self._execute_async(ending))
            return
        exec(snippet.body, self.namespace)
        if snippet.last is not None:
            ending.value = eval(snippet.last, self.namespace)
            ending.has_value = True

    async def _execute_async(self, ending: Ending) -> None:
        snippet = self.snippet
        outcome = eval(snippet.body, self.namespace)
        if inspect.isawaitable(outcome):
            await outcome
        if snippet.last is not None:
            value = eval(snippet.last, self.namespace)
            if inspect.isawaitable(value):
                value = await value
            ending.value = value
            ending.has_value = True

    def _traceback(self, exc: BaseException) -> str:
        """The traceback from the snippet's own first frame on (nbagent's frames left out)."""
        if isinstance(exc, (InputRefused, ExitRefused)):
            return f"{type(exc).__name__}: {exc}"
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != self.snippet.filename:
            tb = tb.tb_next
        text = "".join(traceback.format_exception(type(exc), exc, tb or exc.__traceback__))
        return redact_secrets(text.rstrip())

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()
