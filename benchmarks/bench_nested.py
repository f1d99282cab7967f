"""The per-step cost of a nested run (an agent as a tool, ``agent.as_tool``) against a flat one.

Offline, no model latency: a caller runs K steps, each one call and then the answer.

* flat: each call is an async no-op tool;
* nested: each call runs a helper agent (``helper.as_tool``), which answers in one turn; the
  per-step figure then includes a whole helper run (its fork, its run task, its one step, and
  its events forwarded into the caller's as ``HelperEvent``).

The figure is the caller's wall time divided by K. Goal: a nested step costs at most 4x a flat
one (a helper run is a run of its own: that much, and no more, is what it should cost).
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable
from typing import Any

from _common import Goal, Section, compare, fmt, main, median_of, median_ratio

MIN_MEASURE_SECONDS = 0.25


def _caller(k: int, tool: Any) -> Any:
    from nbagent import Agent
    from nbagent.models import Call, ScriptedModel, Turn

    name = tool.name
    turns = [*(Turn(Call(name, {"prompt": f"step {i}"})) for i in range(k)), "done"]
    return Agent(ScriptedModel(turns), [tool], max_steps=k + 1)


def flat_setup(k: int) -> Callable[[], float]:
    from nbagent import Tool

    async def noop(ctx: Any) -> str:
        return "ok"

    tool = Tool(
        name="worker",
        description="Do nothing.",
        input_schema={"type": "object", "properties": {"prompt": {"type": "string"}}},
        execute=noop,
    )
    return _measure(lambda: _caller(k, tool), k)


def nested_setup(k: int) -> Callable[[], float]:
    from nbagent import Agent
    from nbagent.models import FunctionModel

    helper = Agent(FunctionModel(lambda request: "ok"))
    tool = helper.as_tool(name="worker", description="A helper that answers at once.")
    return _measure(lambda: _caller(k, tool), k)


def _measure(build: Callable[[], Any], k: int) -> Callable[[], float]:
    async def once() -> float:
        agent = build()
        started = time.perf_counter()
        result = await agent.run("go")
        elapsed = time.perf_counter() - started
        if result.text != "done" or result.steps != k + 1:
            raise RuntimeError(f"the run ended wrongly: {result.stop_reason}, {result.steps}")
        return elapsed

    def measure() -> float:
        gc.collect()

        async def many() -> float:
            total, runs = 0.0, 0
            while runs == 0 or total < MIN_MEASURE_SECONDS:
                total += await once()
                runs += 1
            return total / (runs * k)

        return asyncio.run(many())

    measure()  # warm-up: imports, schema caches
    return measure


def build(quick: bool) -> Section:
    global MIN_MEASURE_SECONDS
    if quick:
        MIN_MEASURE_SECONDS = 0.1
    section = Section("nested", "Nested runs: a step that runs a helper agent vs a flat step")
    ks = (10, 100) if quick else (10, 100, 300)
    worst = None
    for k in ks:
        rows = compare(
            section,
            f"K={k}",
            {"flat": lambda k=k: flat_setup(k), "nested": lambda k=k: nested_setup(k)},
            rounds=3 if quick else 7,
            reference="flat",
        )
        ratio = median_ratio(rows.get("nested"))
        if ratio is not None:
            worst = ratio if worst is None else max(worst, ratio)
        nested = median_of(rows.get("nested"))
        if nested is not None:
            section.notes.append(f"K={k}: a nested step costs {fmt(nested * 1e6)} us")
    section.goals.append(
        Goal(
            "a nested step costs at most 4x a flat one",
            None if worst is None else worst <= 4.0,
            f"worst median ratio {fmt(worst, 2)}x",
        )
    )
    return section


if __name__ == "__main__":
    main(build)
