"""The agent's process and the loop it is spoken to on: started, and always ended.

Each agent process runs in a process group of its own (an ``npx`` wrapper's children too) on
a thread whose event loop is the agent's, apart from the kernel's: a conversation goes on from
cell to cell whichever loop each cell runs on, and a blocked cell never stalls the agent's
pipes. It is killed, group and all, when its owner closes it, when the owner is collected, and
when the interpreter exits; an owner killed outright leaves it its stdin closed, on which an
ACP agent ends.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import signal
import threading
import weakref
from collections.abc import Coroutine, Mapping
from concurrent.futures import Future
from typing import Any, TypeVar

__all__ = ["AgentLoop", "kill_group", "spawn"]

_T = TypeVar("_T")
_LIVE: weakref.WeakSet[asyncio.subprocess.Process] = weakref.WeakSet()
_LIVE_LOCK = threading.Lock()


def kill_group(process: asyncio.subprocess.Process) -> None:
    """Kill ``process`` and every process of its group, now (idempotent)."""
    if process.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        if hasattr(os, "killpg"):
            os.killpg(process.pid, signal.SIGKILL)
        else:  # pragma: no cover - Windows
            process.kill()


@atexit.register
def _kill_all() -> None:
    with _LIVE_LOCK:
        live = list(_LIVE)
    for process in live:
        kill_group(process)


async def spawn(
    path: str,
    args: tuple[str, ...],
    env: Mapping[str, str],
    cwd: str | None,
    limit: int,
) -> asyncio.subprocess.Process:
    """Start the agent with pipes on its stdio (``limit``: the stdout reader's line limit)."""
    process = await asyncio.create_subprocess_exec(
        path,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **env},
        cwd=cwd,
        limit=limit,
        start_new_session=True,
    )
    with _LIVE_LOCK:
        _LIVE.add(process)
    return process


class AgentLoop:
    """A daemon thread running an event loop, for one agent's process and connection."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                ready = threading.Event()
                loop = asyncio.new_event_loop()

                def main() -> None:
                    asyncio.set_event_loop(loop)
                    ready.set()
                    try:
                        loop.run_forever()
                    finally:
                        loop.close()

                self._thread = threading.Thread(
                    target=main, name=f"nbagent-acp-{self._name}", daemon=True
                )
                self._thread.start()
                ready.wait()
                self._loop = loop
            return self._loop

    def submit(self, coroutine: Coroutine[Any, Any, _T]) -> Future[_T]:
        """Run ``coroutine`` on the agent's loop; its future, for any thread."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def stop(self) -> None:
        """Stop the loop (after what is scheduled on it now) and let its thread end."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(loop.stop)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
