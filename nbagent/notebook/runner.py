"""How a run runs: as a background task on the kernel's loop, or in the foreground on a thread.

Background (someone can click): the magic creates a task on the kernel's own event loop and
returns at once, so button clicks — shell messages — reach the run while it waits. A blocking
cell would deadlock instead (the click waits behind the cell). Exceptions of the task are shown
in the view by a done-callback; a kernel interrupt cannot reach the task, the Stop button can.

Foreground (nobody needs to click): the run happens on a worker thread with its own loop, started
inside a copy of the cell's context (ipykernel 7 keeps the cell's parent message in a context
variable), and the cell waits for it, so nbclient saves every output with the cell. A kernel
interrupt cancels the run cleanly.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import traceback
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from .._threads import run_on_worker_loop
from ..approval import Approver
from ..events import AgentEvent, RunResult

if TYPE_CHECKING:
    from ..agent import Agent, Run

__all__ = ["Job", "View", "drive", "kernel_loop"]

_numbers = itertools.count(1)
#: How often a running view is woken: flushes stalled text, ticks clocks, lets Stop land promptly.
TICK = 0.1
#: After a kernel interrupt, how long the cell waits for the cancelled run to wind down.
CANCEL_WAIT = 10.0


class View(Protocol):
    """What the runner needs of a view (widgets or text)."""

    finished: bool

    def handle(self, event: AgentEvent) -> None: ...
    def tick(self) -> None: ...
    def show_error(self, error: BaseException, trace: str | None = None) -> None: ...
    def close(self, stop_reason: str | None = None) -> None: ...


async def _ticker(view: View, interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        view.tick()


async def drive(run: Run, view: View, *, interval: float = TICK) -> RunResult:
    """Show every event of ``run`` in ``view`` and return its result."""
    ticker = asyncio.ensure_future(_ticker(view, interval))
    try:
        async for event in run.events():
            view.handle(event)
        return await run.result()
    except asyncio.CancelledError:
        run.cancel()
        raise
    finally:
        ticker.cancel()


def kernel_loop() -> asyncio.AbstractEventLoop:
    """The event loop the kernel runs cells on."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.get_event_loop_policy().get_event_loop()


class Job:
    """One ``%agent`` request: what to run, where it shows, what happens when it ends."""

    def __init__(
        self,
        agent: Callable[[], Agent],
        prompt: str,
        view: View,
        *,
        approver: Approver,
        foreground: bool,
        max_steps: int | None = None,
        tools: Sequence[str] | None = None,
        reset: bool = False,
        prepare: Callable[[], None] | None = None,
        on_end: Callable[[Job], None] | None = None,
    ) -> None:
        self.number = next(_numbers)
        self._agent = agent
        self.prompt = prompt
        self.view = view
        self.approver = approver
        self.foreground = foreground
        self.max_steps = max_steps
        self.tools = list(tools) if tools is not None else None
        self.reset = reset
        self.prepare = prepare
        self.on_end = on_end
        self.run: Run | None = None
        self.task: asyncio.Task[RunResult] | None = None
        self.result: RunResult | None = None
        self.error: BaseException | None = None
        self.cancelled = False
        self.state = "queued"
        self._lock = threading.Lock()

    @property
    def label(self) -> str:
        return self.run.id if self.run is not None else f"request {self.number}"

    @property
    def done(self) -> bool:
        return self.state in ("finished", "failed", "cancelled")

    # --- running ------------------------------------------------------------------------------

    async def main(self) -> RunResult:
        """Start the run on the running loop and show it to the end."""
        with self._lock:
            if self.cancelled:
                raise asyncio.CancelledError
            self.state = "running"
        if self.prepare is not None:
            self.prepare()
        agent = self._agent()
        if self.reset:
            agent.reset()
        run = agent.start(
            self.prompt, approver=self.approver, max_steps=self.max_steps, tools=self.tools
        )
        with self._lock:
            self.run = run
            if self.cancelled:
                run.cancel()
        return await drive(run, self.view)

    def cancel(self) -> None:
        """Stop the run (from any thread); a queued request never starts."""
        with self._lock:
            self.cancelled = True
            run = self.run
        if run is not None:
            run.cancel()
        elif self.state == "queued":
            self._finish(None, None, cancelled=True)

    def start_background(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Run as a task on the kernel's loop; returns at once."""
        loop = loop or kernel_loop()
        self.task = loop.create_task(self.main(), name=f"nbagent-{self.number}")
        self.task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[RunResult]) -> None:
        if task.cancelled():
            self._finish(None, None, cancelled=True)
            return
        error = task.exception()
        self._finish(task.result() if error is None else None, error)

    def run_foreground(self) -> RunResult | None:
        """Run on a worker thread and wait; Ctrl-C / kernel interrupt cancels the run."""
        try:
            result = run_on_worker_loop(
                self.main, on_interrupt=self.cancel, cancel_wait=CANCEL_WAIT
            )
        except KeyboardInterrupt:
            self._finish(None, None, cancelled=True)
            raise
        except asyncio.CancelledError:
            self._finish(None, None, cancelled=True)
        except BaseException as exc:  # shown in the view, never lost
            self._finish(None, exc)
        else:
            self._finish(result, None)
        return self.result

    def _finish(
        self, result: RunResult | None, error: BaseException | None, *, cancelled: bool = False
    ) -> None:
        with self._lock:
            if self.done:
                return
            self.result = result
            self.error = error
            if result is not None:
                self.state = "cancelled" if result.stop_reason == "cancelled" else "finished"
            else:
                self.state = "cancelled" if cancelled else "failed"
        view = self.view
        try:
            if error is not None:
                trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
                view.show_error(error, trace)
            if not view.finished:
                stop = result.stop_reason if result is not None else self.state
                view.close(stop)
        finally:
            if self.on_end is not None:
                self.on_end(self)
