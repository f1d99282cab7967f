"""Ctrl-C during run_sync inside a running loop cancels the run and leaves a valid history."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

SCRIPT = r"""
import asyncio, sys
from nbagent import Agent, Tool
from nbagent.models import Call, Pause, ScriptedModel, Turn

async def slow(ctx):
    await asyncio.sleep(30)

agent = Agent(ScriptedModel([Turn(Call("slow", {}))]), [Tool(name="slow", execute=slow)])

async def cell():  # like a notebook cell: a loop is already running in this thread
    try:
        agent.run_sync("go")
    except KeyboardInterrupt:
        calls = [c.id for m in agent.messages for c in getattr(m, "tool_calls", ())]
        results = [r.call_id for m in agent.messages for r in getattr(m, "results", ())]
        print("interrupted", calls == results, agent._running, flush=True)
        print(agent.messages, file=sys.stderr)

print("ready", flush=True)
loop = asyncio.new_event_loop()  # not asyncio.run: it would turn SIGINT into a task cancel
loop.run_until_complete(cell())
"""


def test_interrupt_cancels_cleanly() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(1.5)
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert time.monotonic() - started < 10, err
    assert out.strip() == "interrupted True False", err[-3000:]


def test_a_loop_broken_out_of_still_winds_its_task_down() -> None:
    """A callback raising KeyboardInterrupt breaks the worker's loop; the task still gets to
    clean up (an agent run would otherwise stay "running" for ever)."""
    import asyncio

    import pytest

    from nbagent._ground.threads import run_on_worker_loop

    ended: list[str] = []

    async def work() -> None:
        def boom() -> None:
            raise KeyboardInterrupt

        asyncio.get_running_loop().call_soon(boom)
        try:
            await asyncio.sleep(30)
        finally:
            ended.append("cleaned up")

    with pytest.raises(KeyboardInterrupt):
        run_on_worker_loop(work)
    assert ended == ["cleaned up"]
