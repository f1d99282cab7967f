"""Calling a small piece of user code (a hook, a preview) from the loop, bounded in time.

A sync function runs on a daemon thread of its own (a slow one must not block the loop, nor keep
the interpreter from exiting); an async one runs as a task. Whatever it does — raise anything,
hang, swallow cancellation — the caller gets either its value or a :class:`UserCodeFailed` that
says why in words, and a cancelled run still cancels. A function still running at its timeout
is left behind: its late result is dropped.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import threading
from collections.abc import Callable
from typing import Any

from ._execution import ToolRaised, contained, on_thread

__all__ = ["UserCodeFailed", "call_user", "describe"]


class UserCodeFailed(Exception):
    """User code raised or did not answer in time; ``str()`` says which, for people."""

    def __init__(
        self, why: str, raised: BaseException | None = None, *, timed_out: bool = False
    ) -> None:
        super().__init__(why)
        self.raised = raised
        self.timed_out = timed_out


def describe(fn: Any) -> str:
    """A short name for a function, as people see it in cards and logs."""
    name = getattr(fn, "__name__", None) or getattr(fn, "__qualname__", None)
    if not isinstance(name, str) or not name:
        name = type(fn).__name__
    return name if len(name) <= 64 else name[:61] + "..."


def _raised(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


async def call_user(
    fn: Callable[..., Any],
    *args: Any,
    timeout: float | None,
    after: Callable[[Any], Any] | None = None,
) -> Any:
    """``fn(*args)`` (awaited if it returns an awaitable), then ``after(value)`` on the same
    thread, or on a thread of its own after an async ``fn`` (for slow conversions, e.g.
    rendering a figure; never on the loop). Raises :class:`UserCodeFailed`."""
    loop = asyncio.get_running_loop()
    stopping = False

    def cancel_requested() -> bool:
        return stopping

    if inspect.iscoroutinefunction(fn):

        async def run_async() -> Any:
            value = await fn(*args)
            return await on_thread(after, value, describe(fn)) if after is not None else value

        work: asyncio.Future[Any] = asyncio.ensure_future(
            contained(run_async(), cancel_requested=cancel_requested)
        )
    else:
        work = loop.create_future()

        def settle(ok: bool, payload: Any) -> None:
            if not work.done():
                if ok:
                    work.set_result(payload)
                else:
                    work.set_exception(payload)

        def target() -> None:
            try:
                value = fn(*args)
                if inspect.isawaitable(value):
                    raise TypeError("it returned an awaitable: define it with async def")
                outcome: tuple[bool, Any] = (True, after(value) if after is not None else value)
            except Exception as exc:
                outcome = (False, exc)
            except BaseException as exc:  # KeyboardInterrupt, SystemExit: never as they are
                outcome = (False, ToolRaised(exc))
            try:
                loop.call_soon_threadsafe(settle, *outcome)
            except RuntimeError:  # the loop is closed: nobody waits any more
                pass

        run = contextvars.copy_context().run
        name = f"nbagent-{describe(fn)}"[:64]
        threading.Thread(target=run, args=(target,), name=name, daemon=True).start()
    try:
        done, _ = await asyncio.wait({work}, timeout=timeout)
    except asyncio.CancelledError:
        stopping = True
        work.cancel()
        raise
    if not done:
        stopping = True
        work.cancel()
        assert timeout is not None
        raise UserCodeFailed(f"it did not finish within {timeout:g} s", timed_out=True)
    if work.cancelled():
        raise UserCodeFailed("it was cancelled")
    error = work.exception()
    if error is None:
        return work.result()
    if isinstance(error, ToolRaised):
        raise UserCodeFailed(f"it raised {_raised(error.raised)}", error.raised)
    raise UserCodeFailed(f"it raised {_raised(error)}", error)
