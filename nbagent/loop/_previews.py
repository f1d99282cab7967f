"""The previews of one call waiting for approval: the model's arguments first, then any edit a
person asks to see, each reported as a :class:`~nbagent.events.ToolPreviewed`.

Each preview is bounded like the first one (``Agent.preview_timeout``, ``Limits`` on its size)
and fails into an event that says why. An edit is previewed only once it passes the same checks
as an approval with it (schema, size, depth): nothing runs for arguments that would be refused.
Edits are numbered (``revision`` 1, 2, …; 0 is the model's arguments): asking for a newer one
cancels the older one, and an older one that finishes late is dropped, so a stale preview never
replaces a newer one. Everything stops once the call is answered.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal

from .._history import result_for_model
from ..content import ToolResult, error_result, to_tool_result, validate_result
from ..events import AgentEvent, ToolPreviewed
from ..limits import Limits
from ._execution import copy_json
from ._usercode import UserCodeFailed, call_user

__all__ = ["Previews"]


class Previews:
    """Runs a tool's preview for one call while it waits; the request hands it to front ends.

    Made on the run's loop. :meth:`ask` may be called from any thread (a widget's click);
    :meth:`wait` is awaited on the run's loop; :meth:`wait_blocking` waits from another thread
    (a sync :class:`~nbagent.approvals.approval.CallbackApprover`).
    """

    def __init__(
        self,
        preview: Callable[[Mapping[str, Any]], Any],
        call_id: str,
        name: str,
        arguments: Any,
        *,
        emit: Callable[[AgentEvent], None],
        limits: Limits,
        timeout: float | None,
        checker: Callable[[Any], Any] | None = None,
    ) -> None:
        self._preview = preview
        self.call_id = call_id
        self.name = name
        self._arguments = copy_json(arguments)
        self._emit = emit
        self._limits = limits
        #: Seconds one preview may take (None: no limit).
        self.timeout = timeout
        self._checker = checker
        self._loop = asyncio.get_running_loop()
        self._lock = threading.Lock()
        self._asked = 0  # the newest revision asked for
        self._closed = False
        self._tasks: dict[int, asyncio.Future[None]] = {}
        self._shown: dict[int, ToolPreviewed] = {}
        self._waiters: dict[int, list[asyncio.Future[ToolPreviewed | None]]] = {}

    # --- the loop's side ------------------------------------------------------------------

    def start(self) -> None:
        """Preview the arguments the call was proposed with (revision 0); on the loop."""
        if not self._closed and 0 not in self._tasks:
            self._tasks[0] = asyncio.ensure_future(self._show(0, self._arguments))

    def close(self) -> None:
        """The call was answered: cancel what still runs and release every waiter."""
        with self._lock:
            self._closed = True
        for task in self._tasks.values():
            if not task.done():
                task.cancel()
        for waiting in self._waiters.values():
            for future in waiting:
                if not future.done():
                    future.set_result(None)
        self._waiters.clear()

    @property
    def closed(self) -> bool:
        """Whether the call was answered (no preview runs any more)."""
        return self._closed

    # --- a front end's side ---------------------------------------------------------------

    def ask(self, arguments: Any) -> int | None:
        """Preview edited ``arguments``; the revision its ToolPreviewed will carry, or None when
        the call is no longer waiting. Thread-safe.

        Raises :class:`~nbagent.errors.ArgumentsError` (nothing runs) for arguments an approval
        would refuse. A newer request cancels an older one still running.
        """
        checked = self._checker(arguments) if self._checker is not None else copy_json(arguments)
        with self._lock:
            if self._closed:
                return None
            self._asked += 1
            revision = self._asked
        try:
            self._loop.call_soon_threadsafe(self._launch, revision, checked)
        except RuntimeError:  # the loop is closed: the run is over
            return None
        return revision

    async def wait(self, revision: int = 0) -> ToolPreviewed | None:
        """The preview of ``revision`` once it is there (done, failed or timed out); None if
        the call was answered first or a newer edit replaced it. On the run's loop."""
        if revision in self._shown:
            return self._shown[revision]
        if self._closed or revision > self._asked or (revision < self._asked and revision != 0):
            return None
        future: asyncio.Future[ToolPreviewed | None] = self._loop.create_future()
        self._waiters.setdefault(revision, []).append(future)
        return await future

    def wait_blocking(
        self, revision: int = 0, timeout: float | None = None
    ) -> ToolPreviewed | None:
        """:meth:`wait` from another thread (never the loop's), for at most ``timeout`` s."""
        from concurrent.futures import TimeoutError as WaitTimeout

        pending = asyncio.run_coroutine_threadsafe(self.wait(revision), self._loop)
        try:
            return pending.result(timeout)
        except WaitTimeout:
            pending.cancel()
            return None

    # --- running one preview --------------------------------------------------------------

    def _launch(self, revision: int, arguments: Any) -> None:
        if self._closed or revision != self._asked:
            return  # answered meanwhile, or already replaced by a newer edit
        for older, task in self._tasks.items():
            if older != 0 and not task.done():
                task.cancel()
        for older in [r for r in self._waiters if r not in (0, revision)]:
            for future in self._waiters.pop(older):
                if not future.done():
                    future.set_result(None)
        for older in [r for r, task in self._tasks.items() if r != 0 and task.done()]:
            del self._tasks[older]  # keep only what may still run
        self._tasks[revision] = asyncio.ensure_future(self._show(revision, arguments))

    async def _show(self, revision: int, arguments: Any) -> None:
        limits = self._limits

        def converted(value: Any) -> ToolResult:
            return result_for_model(validate_result(to_tool_result(value)), limits)

        started = time.monotonic()
        status: Literal["done", "error", "timeout"] = "done"
        try:
            result = await call_user(
                self._preview, copy_json(arguments), timeout=self.timeout, after=converted
            )
        except UserCodeFailed as exc:
            text = f"The preview of {self.name} failed: {exc}. The call has not run."
            result = error_result(text)
            status = "timeout" if exc.timed_out else "error"
        if self._closed or (revision != 0 and revision != self._asked):
            return  # answered, or replaced by a newer edit: never shown over it
        event = ToolPreviewed(
            self.call_id,
            result,
            status,
            time.monotonic() - started,
            arguments=copy_json(arguments),
            revision=revision,
        )
        self._shown[revision] = event
        self._emit(event)
        for future in self._waiters.pop(revision, []):
            if not future.done():
                future.set_result(event)
