"""Many runs against a zero-latency loopback server: runs per second, and Dask's scaling.

1,000 agent runs of 2 steps each (the model calls the async no-op tool ``lookup``, then
answers), ``CONCURRENCY`` at a time, against ``_sse_server.py agent``: a loopback
OpenAI-compatible server in its own process whose answers cost ~nothing, so what is measured is
each contender's own overhead.

* nbagent: ``Agent.map`` over the 1,000 prompts (streamed Chat Completions, the real loop,
  rows collected into a DataFrame).
* raw httpx2 (the floor): per run, two streamed requests with the same bodies' shape, each
  response's ``data:`` lines parsed with ``json.loads``, the tool called in between; no loop, no
  validation, no table.
* pydantic-ai (``OpenAIChatModel``) and the OpenAI Agents SDK (``OpenAIChatCompletionsModel``,
  tracing off): ``agent.run`` / ``Runner.run`` per prompt under an ``asyncio.Semaphore``. Their
  ``run`` sends non-streaming requests (the server answers them with whole JSON): less parsing
  than the others do, so if anything the setup favours the peers.

Then the same batch on a Dask ``LocalCluster`` of 1 and of 2 worker processes (the model string
resolved on each worker from its environment; one Dask task per run, at most the cluster's
threads in flight): runs per second and the 2-worker speed-up.

Goals: nbagent at least 50 % of the floor's runs/s, and ahead of both peers.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import Row, Section, compare, describe_import_error, main, median_of

HERE = Path(__file__).resolve().parent
RUNS = 1000
CONCURRENCY = 16
KEY = "sk-bench-0000000000000000000000"
PROMPT = "Look up today's prices."
WARM_UP = 32


class Loopback:
    """The agent-mode server in its own process."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(HERE / "_sse_server.py"), "agent"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("PORT "):
            self.close()
            raise RuntimeError(f"the loopback server did not start: {line!r}")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}/v1"

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _measure(runs: int, go: Callable[[int], Any]) -> Callable[[], float]:
    """Warm up with a small batch (imports, first connections), then time whole batches."""
    go(WARM_UP)
    return lambda: _timed(runs, lambda: go(runs))


def _timed(runs: int, go: Callable[[], Any]) -> float:
    """Seconds per run of one whole batch."""
    gc.collect()
    started = time.perf_counter()
    go()
    return (time.perf_counter() - started) / runs


# --- nbagent --------------------------------------------------------------------------------


def nbagent_setup(url: str, runs: int) -> Callable[[], float]:
    from nbagent import Agent, tool
    from nbagent.providers.openai import OpenAIChat

    @tool
    async def lookup(query: str) -> str:
        """Look something up."""
        return "ok"

    def go(count: int) -> None:
        agent = Agent(OpenAIChat("bench-model", api_key=KEY, base_url=url), [lookup])
        out = agent.map_sync([PROMPT] * count, concurrency=CONCURRENCY, progress=None)
        bad = out[out["status"] != "done"]
        if len(bad) or (out["steps"] != 2).any():
            raise RuntimeError(f"nbagent: {len(bad)} rows not done: {bad['error'].head(3)}")

    return _measure(runs, go)


# --- the floor: raw httpx2 ------------------------------------------------------------------


def raw_setup(url: str, runs: int) -> Callable[[], float]:
    import httpx2

    tools = [
        {
            "type": "function",
            "function": {
                "name": "lookup",
                "description": "Look something up.",
                "parameters": {
                    "type": "object",
                    "properties": {"query": {"type": "string"}},
                    "required": ["query"],
                },
            },
        }
    ]

    async def lookup(query: str) -> str:
        return "ok"

    async def stream(client: Any, messages: list[Any]) -> tuple[str, str, str]:
        body = {"model": "bench-model", "messages": messages, "tools": tools, "stream": True}
        text, call_id, arguments = "", "", ""
        async with client.stream("POST", url + "/chat/completions", json=body) as response:
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                for choice in chunk["choices"]:
                    delta = choice["delta"]
                    text += delta.get("content") or ""
                    for call in delta.get("tool_calls") or ():
                        call_id = call.get("id") or call_id
                        arguments += call["function"].get("arguments") or ""
        return text, call_id, arguments

    async def one(client: Any, gate: asyncio.Semaphore) -> str:
        async with gate:
            messages: list[Any] = [{"role": "user", "content": PROMPT}]
            _, call_id, arguments = await stream(client, messages)
            await lookup(**json.loads(arguments))
            call = {"id": call_id, "type": "function"}
            call["function"] = {"name": "lookup", "arguments": arguments}  # type: ignore[assignment]
            messages += [
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": call_id, "content": "ok"},
            ]
            text, _, _ = await stream(client, messages)
            return text

    async def batch(count: int) -> None:
        gate = asyncio.Semaphore(CONCURRENCY)
        headers = {"authorization": f"Bearer {KEY}"}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as client:
            texts = await asyncio.gather(*(one(client, gate) for _ in range(count)))
        if set(texts) != {"All looked up: done."}:
            raise RuntimeError(f"raw: unexpected answers {set(texts)}")

    return _measure(runs, lambda count: asyncio.run(batch(count)))


# --- peers ----------------------------------------------------------------------------------


def pydantic_ai_setup(url: str, runs: int) -> Callable[[], float]:
    try:
        from pydantic_ai import Agent
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider
    except ImportError as exc:
        raise describe_import_error("pydantic-ai-slim[openai]", exc) from None

    async def batch(count: int) -> None:
        model = OpenAIChatModel("bench-model", provider=OpenAIProvider(base_url=url, api_key=KEY))
        agent = Agent(model)

        @agent.tool_plain
        async def lookup(query: str) -> str:
            """Look something up."""
            return "ok"

        gate = asyncio.Semaphore(CONCURRENCY)

        async def one() -> str:
            async with gate:
                result = await agent.run(PROMPT)
                return str(result.output)

        texts = await asyncio.gather(*(one() for _ in range(count)))
        if set(texts) != {"All looked up: done."}:
            raise RuntimeError(f"pydantic-ai: unexpected answers {set(texts)}")

    return _measure(runs, lambda count: asyncio.run(batch(count)))


def openai_agents_setup(url: str, runs: int) -> Callable[[], float]:
    try:
        from agents import (
            Agent,
            OpenAIChatCompletionsModel,
            Runner,
            function_tool,
            set_tracing_disabled,
        )
        from openai import AsyncOpenAI
    except ImportError as exc:
        raise describe_import_error("openai-agents", exc) from None
    set_tracing_disabled(True)

    @function_tool
    async def lookup(query: str) -> str:
        """Look something up."""
        return "ok"

    async def batch(count: int) -> None:
        client = AsyncOpenAI(base_url=url, api_key=KEY)
        model = OpenAIChatCompletionsModel(model="bench-model", openai_client=client)
        agent = Agent(name="bench", model=model, tools=[lookup])
        gate = asyncio.Semaphore(CONCURRENCY)

        async def one() -> str:
            async with gate:
                result = await Runner.run(agent, PROMPT)
                return str(result.final_output)

        try:
            texts = await asyncio.gather(*(one() for _ in range(count)))
        finally:
            await client.close()
        if set(texts) != {"All looked up: done."}:
            raise RuntimeError(f"openai-agents: unexpected answers {set(texts)}")

    return _measure(runs, lambda count: asyncio.run(batch(count)))


# --- Dask -----------------------------------------------------------------------------------


def dask_runs_per_second(url: str, workers: int, runs: int) -> float:
    from distributed import Client, LocalCluster

    from nbagent import Agent, tool

    @tool
    async def lookup(query: str) -> str:
        """Look something up."""
        return "ok"

    env = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": url}
    with (
        LocalCluster(
            n_workers=workers,
            threads_per_worker=CONCURRENCY,
            processes=True,
            dashboard_address=":0",
            env=env,
        ) as cluster,
        Client(cluster) as client,
    ):
        agent = Agent("offline", [lookup])
        prompts = [PROMPT] * runs
        model = "openai-compatible:bench-model"
        agent.map_sync(prompts[:50], engine=client, model=model, progress=None)  # warm up
        gc.collect()
        started = time.perf_counter()
        out = agent.map_sync(prompts, engine=client, model=model, progress=None)
        elapsed = time.perf_counter() - started
    if (out["status"] != "done").any():
        raise RuntimeError(f"dask: rows not done: {out['error'].dropna().head(3).tolist()}")
    return runs / elapsed


def build(quick: bool) -> Section:
    runs = 200 if quick else RUNS
    rounds = 1 if quick else 3
    section = Section(
        "batch", f"11. Many runs: {runs} runs x 2 steps, {CONCURRENCY} at a time (loopback)"
    )
    server = Loopback()
    try:
        label = f"{runs} runs"
        rows = compare(
            section,
            label,
            {
                "raw httpx2 (floor)": lambda: raw_setup(server.url, runs),
                "nbagent Agent.map": lambda: nbagent_setup(server.url, runs),
                "pydantic-ai": lambda: pydantic_ai_setup(server.url, runs),
                "OpenAI Agents SDK": lambda: openai_agents_setup(server.url, runs),
            },
            rounds=rounds,
            reference="raw httpx2 (floor)",
            unit="ms",
            scale=1e3,
        )
        rates = {name: (1 / v if (v := median_of(row)) else None) for name, row in rows.items()}
        for name, row in rows.items():
            if rates[name]:
                row.extra = f"{rates[name]:,.0f} runs/s"
        ours, floor = rates["nbagent Agent.map"], rates["raw httpx2 (floor)"]
        if ours and floor:
            section.goal(
                "nbagent runs at least 50 % of the raw httpx2 floor's runs/s",
                ours >= 0.5 * floor,
                f"{ours:,.0f} vs {floor:,.0f} runs/s ({100 * ours / floor:.0f} %)",
            )
        else:
            section.goal("nbagent runs at least 50 % of the raw httpx2 floor's runs/s", None)
        for peer in ("pydantic-ai", "OpenAI Agents SDK"):
            theirs = rates[peer]
            section.goal(
                f"nbagent ahead of {peer}",
                bool(ours and theirs and ours > theirs) if theirs else None,
                f"{ours or 0:,.0f} vs {theirs:,.0f} runs/s" if theirs else "peer not measured",
            )
        try:
            scaling = {w: dask_runs_per_second(server.url, w, runs) for w in (1, 2)}
        except ImportError as exc:
            section.notes.append(f"Dask not measured: {exc} (install nbagent[dask])")
        except Exception as exc:
            section.crashes.append(f"batch / dask: {type(exc).__name__}: {exc}")
        else:
            for workers, rate in scaling.items():
                row = Row(
                    f"{runs} runs on Dask", f"{workers} worker process(es)", unit="ms", scale=1e3
                )
                row.values.append(1 / rate)
                row.extra = f"{rate:,.0f} runs/s"
                section.rows.append(row)
            section.notes.append(
                f"Dask LocalCluster, {CONCURRENCY} threads per worker, one task per run: 2 "
                f"workers ran {scaling[2] / scaling[1]:.2f}x the runs/s of 1 (this machine has "
                f"{os.cpu_count()} cores, shared with the server process and the client)"
            )
    finally:
        server.close()
    return section


if __name__ == "__main__":
    main(build)
