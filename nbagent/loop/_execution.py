"""Running one tool function: on a thread or as a task, with a timeout, cancellation, and the
truth about functions that will not stop.

Rules kept here:

* Nothing a tool raises reaches the event loop as it is. asyncio re-raises ``KeyboardInterrupt``
  and ``SystemExit`` out of the loop (in Jupyter that kills the kernel), and a tool's own
  ``CancelledError`` would look like a cancellation of the run: both arrive wrapped in
  :class:`ToolRaised` instead.
* Sync tools run on daemon threads, one per call: a function that never returns cannot keep
  the interpreter from exiting (a ``ThreadPoolExecutor`` is joined at exit).
* A tool asked to stop (timeout, cancelled run) gets :data:`CANCEL_GRACE` seconds; if it is
  still running then, it is *abandoned*: its call is answered saying so, its result will be
  ignored, and :class:`~nbagent.events.AbandonedCall` tells front ends when it really ends.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from .._ground.formatting import error_text, traceback_text
from ..content import ToolResult, error_result, stable_text
from ..events import AbandonedCall, CallStatus, abandonment_is_shown
from ..redact import redact_secrets
from ..tools import Tool, ToolCall, ToolContext

__all__ = [
    "CANCEL_GRACE",
    "Outcome",
    "ToolRaised",
    "contained",
    "copy_json",
    "execute_tool",
    "on_thread",
]

log = logging.getLogger("nbagent")
T = TypeVar("T")

#: How long a cancelled or timed-out tool may take to finish before it is abandoned (seconds).
CANCEL_GRACE = 1.0
#: Progress updates from a sync tool waiting for the loop at once; older ones are dropped.
PROGRESS_BACKLOG = 100


class ToolRaised(Exception):
    """Wraps a ``BaseException`` that is not an ``Exception`` (``KeyboardInterrupt``,
    ``SystemExit`` …) or a ``CancelledError`` nobody asked for, raised by user code."""

    def __init__(self, raised: BaseException) -> None:
        super().__init__(f"{type(raised).__name__}: {raised}")
        self.raised = raised


async def contained(awaitable: Awaitable[T], *, cancel_requested: Callable[[], bool]) -> T:
    """Await user code inside a task without letting asyncio see its BaseExceptions.

    A ``CancelledError`` passes through when ``cancel_requested()`` says we asked for it, or when
    this task itself was cancelled from outside (``asyncio.run`` ending cancels every task):
    only one raised by user code on its own is wrapped.
    """
    try:
        return await awaitable
    except asyncio.CancelledError as exc:
        if cancel_requested() or _cancelled_from_outside():
            raise
        raise ToolRaised(exc) from None
    except (Exception, GeneratorExit):  # GeneratorExit: an abandoned coroutine being closed
        raise
    except BaseException as exc:
        raise ToolRaised(exc) from None


def _cancelled_from_outside() -> bool:
    """True when someone called ``cancel()`` on the running task (Python 3.11+ can tell; before
    that, every unrequested ``CancelledError`` counts as the user code's own)."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    return bool(cancelling is not None and cancelling())


#: Values copy_json hands back as they are without a look inside (immutable, and no container).
_LEAVES = frozenset({str, int, float, bool, type(None)})


def copy_json(value: Any) -> Any:
    """A deep copy of a parsed JSON value (objects and arrays are new; the rest is immutable)."""
    if isinstance(value, dict):
        return {k: v if type(v) in _LEAVES else copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [v if type(v) in _LEAVES else copy_json(v) for v in value]
    return value


@dataclass(frozen=True)
class Outcome:
    """How one execution ended. ``raised`` is set when the tool raised a BaseException that
    must stop the run; ``abandoned`` when its function was still running when answered;
    ``original`` is the tool's own result when the model reads another ``result``."""

    result: ToolResult
    status: CallStatus
    trace: str | None = None
    abandoned: AbandonedCall | None = None
    raised: BaseException | None = None
    original: ToolResult | None = None


class _Progress:
    """Hands a running tool's progress updates to the loop, bounded when they come from a thread."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, deliver: Callable[[ToolResult, float], None]
    ) -> None:
        self._loop = loop
        self._loop_thread = threading.get_ident()
        self._deliver = deliver
        self._started = time.monotonic()
        self._lock = threading.Lock()
        self._pending: deque[tuple[ToolResult, float]] = deque(maxlen=PROGRESS_BACKLOG)
        self._scheduled = False
        self.closed = False

    def __call__(self, update: ToolResult) -> None:
        elapsed = time.monotonic() - self._started
        if threading.get_ident() == self._loop_thread:
            if not self.closed:
                self._deliver(update, elapsed)
            return
        with self._lock:
            self._pending.append((update, elapsed))
            if self._scheduled:
                return
            self._scheduled = True
        try:
            self._loop.call_soon_threadsafe(self._flush)
        except RuntimeError:  # the loop is closed: the run is over
            pass

    def _flush(self) -> None:
        with self._lock:
            items = list(self._pending)
            self._pending.clear()
            self._scheduled = False
        for update, elapsed in items:
            if not self.closed:
                self._deliver(update, elapsed)


_SCALARS = (str, int, float, bool, type(None))


def _plain(value: Any, room: int = 256) -> bool:
    """Whether turning ``value`` into a result runs no user code: a builtin scalar (exact
    type, so no subclass's ``__str__``), or a small list, tuple or dict of such values."""
    kind = type(value)
    if kind in _SCALARS:
        return True
    if kind in (list, tuple):
        items: Any = value
    elif kind is dict:
        if any(type(key) is not str for key in value):
            return False
        items = value.values()
    else:
        return False
    if len(value) > room:
        return False
    return all(_plain(item, room // 4) for item in items)


#: What settles a call's ending when its timeout passes first.
_TIMED_OUT = object()
#: ... and when the tool's task ended cancelled (asked by us, or by ``asyncio.run`` ending).
_CANCELLED = object()


def _settle(ending: asyncio.Future[Any], value: Any) -> None:
    if not ending.done():
        ending.set_result(value)


def _start(
    execute: Callable[[ToolContext], Any],
    context: ToolContext,
    handle: AbandonedCall,
    convert: Callable[[Any], Outcome],
    is_async: bool,
    plain: bool = False,
) -> tuple[asyncio.Future[Any], asyncio.Future[Any], asyncio.Task[None] | None]:
    """Start the function: ``(ending, ended, task)``.

    ``ending`` settles once with how the call ended: ``convert(value)``, the exception it raised
    (BaseExceptions wrapped in :class:`ToolRaised`) or ``_CANCELLED``; the loop awaits it (and
    may settle it first with ``_TIMED_OUT``), so cancelling the loop's wait never touches the
    function. ``ended`` is done when the function really ended (what a stop waits for); ``task``
    runs an async function (None: a thread runs a sync one).

    The conversion runs user code too (``__str__``, ``to_markdown``, ``to_model_output``,
    ``savefig``, image decoding), so it runs off the loop and inside the call's timeout: on the
    tool's own thread, or on a thread of its own after an async tool returned. ``plain``: the
    tool has no ``to_model_output``, so a plain value (:func:`_plain`) is converted on the loop.
    """
    loop = asyncio.get_running_loop()
    ending: asyncio.Future[Any] = loop.create_future()
    if is_async:

        async def whole() -> None:
            # what contained() does, inlined: the call's ending is settled from inside its task,
            # which wakes the loop one turn sooner than waiting for the task itself
            try:
                value = await execute(context)
                if plain and _plain(value):  # no user code to run: a thread would only cost time
                    outcome: Any = convert(value)
                else:
                    outcome = await on_thread(convert, value, context.call.name)
            except asyncio.CancelledError as exc:
                if context.cancelled() or _cancelled_from_outside():
                    _settle(ending, _CANCELLED)
                    raise
                outcome = ToolRaised(exc)  # the tool's own, nobody asked: not a cancellation
            except GeneratorExit as exc:  # an abandoned coroutine being closed
                _settle(ending, exc)
                raise
            except Exception as exc:
                outcome = exc
            except BaseException as exc:  # KeyboardInterrupt, SystemExit …: never as they are
                outcome = ToolRaised(exc)
            _settle(ending, outcome)

        task = loop.create_task(whole())
        task.add_done_callback(_ended(handle))
        return ending, task, task
    ended: asyncio.Future[None] = loop.create_future()

    def settle(payload: Any) -> None:
        _settle(ending, payload)
        if not ended.done():
            ended.set_result(None)

    def target() -> None:
        try:
            outcome: Any = convert(run(execute, context))
        except Exception as exc:
            outcome = exc
        except BaseException as exc:  # KeyboardInterrupt, SystemExit …: never as they are
            outcome = ToolRaised(exc)
        try:
            loop.call_soon_threadsafe(settle, outcome)
        except RuntimeError:  # the loop is closed: nobody waits for this result any more
            pass
        handle._finish()

    run = contextvars.copy_context().run
    name = f"nbagent-tool-{context.call.name}"[:64]
    threading.Thread(target=target, name=name, daemon=True).start()
    return ending, ended, None


def on_thread(convert: Callable[[Any], T], value: Any, name: str) -> asyncio.Future[T]:
    """``convert(value)`` on a daemon thread of its own (user code, e.g. turning a returned
    value into text, must not hold the loop); its BaseExceptions arrive wrapped."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(ok: bool, payload: Any) -> None:
        if not future.done():
            if ok:
                future.set_result(payload)
            else:
                future.set_exception(payload)

    def target() -> None:
        try:
            outcome: tuple[bool, Any] = (True, convert(value))
        except Exception as exc:
            outcome = (False, exc)
        except BaseException as exc:
            outcome = (False, ToolRaised(exc))
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:  # the loop is closed: nobody waits for this result any more
            pass

    run = contextvars.copy_context().run
    threading.Thread(
        target=run, args=(target,), name=f"nbagent-result-{name}"[:64], daemon=True
    ).start()
    return future


def _ended(handle: AbandonedCall) -> Callable[[asyncio.Future[Any]], None]:
    def done(task: asyncio.Future[Any]) -> None:
        if not task.cancelled():
            task.exception()  # retrieved: an abandoned task's error is not logged as lost
        handle._finish()

    return done


async def _stop(
    ended: asyncio.Future[Any], context: ToolContext, task: asyncio.Task[None] | None
) -> bool:
    """Ask the function to stop and wait the grace period; True if it ended."""
    context._request_cancel()
    if task is not None:
        task.cancel()
    try:
        await asyncio.wait({ended}, timeout=CANCEL_GRACE)
    finally:
        context._finish()
        done = ended.done()
        if not done and task is None:
            ended.cancel()  # the thread goes on; its late result is dropped, never logged
    return done


def _abandon(call: ToolCall, handle: AbandonedCall, why: str) -> AbandonedCall:
    log.log(
        logging.INFO if abandonment_is_shown() else logging.WARNING,
        "tool %r (call %s) is still running %.1f s after %s; it is abandoned and its result "
        "will be ignored",
        call.name,
        call.id,
        CANCEL_GRACE,
        why,
    )
    return handle


async def execute_tool(
    found: Tool,
    call: ToolCall,
    input_value: Any,
    timeout: float | None,
    on_progress: Callable[[ToolResult, float], None],
    on_abandoned: Callable[[AbandonedCall], None],
    *,
    run_id: str | None = None,
    step: int | None = None,
) -> Outcome:
    """Run ``found`` for ``call`` to its end, its timeout, or the run's cancellation.

    On cancellation the function is stopped (or abandoned, reported through ``on_abandoned``)
    and ``CancelledError`` propagates.
    """
    execute = found.execute
    assert execute is not None
    loop = asyncio.get_running_loop()
    progress = _Progress(loop, on_progress)
    context = ToolContext(call, input_value, found, progress, run_id=run_id, step=step)
    handle = AbandonedCall(call.id, call.name)
    ending, ended, task = _start(
        execute,
        context,
        handle,
        lambda value: _converted(found, call, value),
        inspect.iscoroutinefunction(execute),
        plain=found.to_model_output is None,
    )
    timer = loop.call_later(timeout, _settle, ending, _TIMED_OUT) if timeout is not None else None
    try:
        value = await ending
    except asyncio.CancelledError:
        progress.closed = True
        if not await _stop(ended, context, task):
            on_abandoned(_abandon(call, handle, "the run was cancelled"))
        raise
    finally:
        if timer is not None:
            timer.cancel()
    progress.closed = True
    if value is _TIMED_OUT:
        assert timeout is not None
        if await _stop(ended, context, task):
            text = f"{call.name} did not finish within {timeout:g} s and was stopped."
            return Outcome(error_result(text), "timeout")
        text = (
            f"{call.name} did not finish within {timeout:g} s. It was asked to stop, but its "
            "function is still running; its result will be ignored."
        )
        return Outcome(error_result(text), "timeout", None, _abandon(call, handle, "its timeout"))
    context._finish()
    if value is _CANCELLED:  # only we cancel tasks, and only after asking: treat as stopped
        return Outcome(error_result(f"{call.name} was cancelled."), "cancelled")
    if isinstance(value, Outcome):
        return value
    if isinstance(value, ToolRaised):
        raised = value.raised
        if isinstance(raised, asyncio.CancelledError):
            text = (
                f"{call.name} failed: it raised CancelledError by itself (the run was not "
                "cancelled)."
            )
            return Outcome(error_result(text), "error", _trace(raised))
        text = f"{call.name} raised {stable_text(error_text(raised))}, which stops the whole run."
        return Outcome(error_result(text), "error", _trace(raised), raised=raised)
    error: BaseException = value
    # on the loop: the exception's own __str__ is the tool author's code, read bounded
    message = f"{call.name} failed: {stable_text(error_text(error))}"
    return Outcome(error_result(message, value=error), "error", _trace(error))


def _converted(found: Tool, call: ToolCall, value: Any) -> Outcome:
    from ..content import checked_result, to_tool_result, validate_result

    try:
        if found.to_model_output is not None:
            converted = to_tool_result(found.to_model_output(value))
            result = ToolResult(converted.content, converted.is_error, converted.terminate, value)
            result = validate_result(result)
        else:
            result = checked_result(value)
    except Exception as exc:
        said = stable_text(error_text(exc, name=False))
        message = f"{call.name} returned an unusable result: {said}"
        return Outcome(error_result(message), "error", _trace(exc))
    return Outcome(result, "error" if result.is_error else "done")


def _trace(exc: BaseException) -> str:
    """The traceback a person may open: its locals and messages often quote a key or a header
    by accident, so credential-shaped text is hidden before it goes anywhere."""
    return redact_secrets(traceback_text(exc))
