"""Run a coroutine to the end on a worker thread's own event loop, from blocking code.

Used where the caller's thread already runs a loop (a Jupyter kernel) and must block: the worker
starts inside a copy of the caller's context (ipykernel 7 keeps the cell's parent message in a
context variable, so output lands in the right cell). An interrupt (Ctrl-C, kernel interrupt)
cancels the work and is re-raised once it wound down or ``cancel_wait`` passed.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["run_on_worker_loop"]

T = TypeVar("T")
#: Seconds a task may take to end after the loop was broken out of.
WIND_DOWN = 3.0


def run_on_worker_loop(
    make: Callable[[], Coroutine[Any, Any, T]],
    *,
    on_interrupt: Callable[[], None] | None = None,
    cancel_wait: float | None = None,
) -> T:
    """Run ``make()`` on a new loop on a worker thread and return its result (or raise its error).

    On KeyboardInterrupt: call ``on_interrupt`` (default: cancel the task), wait up to
    ``cancel_wait`` seconds (None: until it ends), then re-raise. The loop is closed without
    waiting for worker threads, so a sync tool that ignores cancellation cannot hold the caller.
    """
    box: dict[str, Any] = {}
    started = threading.Event()
    finished = threading.Event()

    def worker() -> None:
        loop = asyncio.new_event_loop()
        task: asyncio.Task[T] | None = None
        try:
            task = loop.create_task(make())
            box["loop"], box["task"] = loop, task
            started.set()
            box["result"] = loop.run_until_complete(task)
        except BaseException as exc:
            box["error"] = exc
            if task is not None and not task.done():
                # Something broke out of the loop (a callback raised KeyboardInterrupt or
                # SystemExit): wind the task down so that it can end cleanly (an agent run
                # then leaves its agent idle), without waiting forever.
                task.cancel()
                try:
                    loop.run_until_complete(asyncio.wait({task}, timeout=WIND_DOWN))
                except BaseException:
                    pass
        finally:
            started.set()
            loop.close()
            finished.set()

    thread = threading.Thread(
        target=contextvars.copy_context().run, args=(worker,), name="nbagent-run", daemon=True
    )
    thread.start()
    # Wait on an Event, not Thread.join: on CPython 3.11 a KeyboardInterrupt landing inside join()
    # can mark a running thread as stopped (bpo-45274), so a later join would return at once.
    try:
        while not finished.wait(0.1):
            pass
    except KeyboardInterrupt:
        started.wait()
        if on_interrupt is not None:
            on_interrupt()
        else:
            loop, task = box.get("loop"), box.get("task")
            if loop is not None and task is not None:
                try:
                    loop.call_soon_threadsafe(task.cancel)
                except RuntimeError:  # the loop already closed: nothing left to cancel
                    pass
        finished.wait(cancel_wait)
        raise
    if "error" in box:
        raise box["error"]
    result: T = box["result"]
    return result
