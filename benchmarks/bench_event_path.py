"""Streamed tool arguments through the event path vs ``Agent.run`` (nbagent only).

An offline model streams one tool call whose arguments are 1 MB of JSON in 8-byte fragments
(125,000 argument deltas), then answers "done". Two ways to run the same turns:

* ``Agent.run``: nobody reads events (the reference);
* ``agent.start()`` + ``async for event in run.events()``: what the notebook does; the reader
  appends each ``ToolArgumentsDelta.delta`` (it never reads ``.text``).

Whole-run wall time (median over alternating rounds) and, in a separate run of each (tracemalloc
slows everything), the peak of traced memory during the run.

Goals: the event path within 1.5x of ``Agent.run``; its peak memory under 10x the argument size.
Before the fix: 400 KB of arguments took 13 s and 8.5 GB through the event path (quadratic: every
delta rebuilt the whole text and carried it through an unbounded queue).
"""

from __future__ import annotations

import asyncio
import gc
import json
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from _common import Section, compare, fmt, main, median_ratio

SIZE = 1_000_000  # bytes of arguments
FRAGMENT = 8


def _arguments(size: int) -> str:
    text = json.dumps({"data": "x" * (size - 12)})
    assert len(text) == size
    return text


def _agent(text: str) -> Any:
    from nbagent import Agent, Tool
    from nbagent.models import Call, ScriptedModel, Turn

    async def sink(ctx: Any) -> str:
        return f"got {len(ctx.input['data'])} bytes"

    tool = Tool(name="sink", input_schema={"type": "object"}, execute=sink)
    model = ScriptedModel([Turn(Call("sink", text, chunks=len(text) // FRAGMENT)), "done"])
    return Agent(model, [tool])


async def _run(agent: Any) -> int:
    result = await agent.run("go")
    if result.text != "done":
        raise RuntimeError(f"run ended wrongly: {result.stop_reason} {result.error}")
    return 0


async def _events(agent: Any) -> int:
    from nbagent.events import ToolArgumentsDelta

    run = agent.start("go")
    pieces = []
    async for event in run.events():
        if isinstance(event, ToolArgumentsDelta):
            pieces.append(event.delta)
    result = await run.result()
    if result.text != "done":
        raise RuntimeError(f"run ended wrongly: {result.stop_reason} {result.error}")
    return sum(map(len, pieces))


WAYS: dict[str, Callable[[Any], Any]] = {"Agent.run": _run, "start() + events()": _events}


def _timed(way: str, text: str) -> Callable[[], float]:
    def measure() -> float:
        gc.collect()
        agent = _agent(text)  # built outside the timed region

        async def once() -> float:
            started = time.perf_counter()
            received = await WAYS[way](agent)
            elapsed = time.perf_counter() - started
            if way != "Agent.run" and received != len(text):
                raise RuntimeError(f"the reader got {received:,} of {len(text):,} bytes")
            return elapsed

        return asyncio.run(once())

    return measure


def _peak(way: str, text: str) -> int:
    gc.collect()
    agent = _agent(text)

    async def once() -> int:
        tracemalloc.start()
        try:
            await WAYS[way](agent)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    return asyncio.run(once())


def build(quick: bool) -> Section:
    section = Section("event_path", "7. Streamed arguments: event path vs Agent.run (1 MB)")
    text = _arguments(SIZE)
    label = f"{SIZE // 1000:,} KB in {FRAGMENT}-byte fragments"
    rows = compare(
        section,
        label,
        {way: lambda way=way: _timed(way, text) for way in WAYS},
        rounds=3 if quick else 7,
        reference="Agent.run",
        unit="ms",
        scale=1e3,
    )
    peaks: dict[str, int] = {}
    for way, row in rows.items():
        if row.status != "ok":
            continue
        peaks[way] = _peak(way, text)
        row.extra = f"whole run; peak traced memory {peaks[way] / 1e6:.1f} MB"
    ratio = median_ratio(section.row(label, "start() + events()"))
    section.goal(
        "event path within 1.5x of Agent.run",
        None if ratio is None else ratio <= 1.5,
        "not measured" if ratio is None else f"paired ratio {ratio:.2f}x",
    )
    peak = peaks.get("start() + events()")
    section.goal(
        "event path peak memory under 10x the argument size",
        None if peak is None else peak < 10 * SIZE,
        "not measured" if peak is None else f"{peak / SIZE:.1f}x ({fmt(peak / 1e6)} MB)",
    )
    section.notes.append(
        f"{SIZE // FRAGMENT:,} argument deltas; the reader keeps every delta (like a front end "
        "rebuilding the arguments) and never reads .text/.partial; peak memory is traced "
        "allocations during one run (tracemalloc), measured apart from the timings"
    )
    return section


if __name__ == "__main__":
    main(build)
