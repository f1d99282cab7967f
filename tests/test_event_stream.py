"""Streams through the loop are linear and bounded: a reader pays for what it reads, and a
reader that falls behind costs memory in proportion to the text, not to the fragments."""

from __future__ import annotations

import asyncio
import json
import tracemalloc
from typing import Any

from nbagent import Agent, Limits, Tool, ToolContext
from nbagent.events import (
    AssistantTextDelta,
    ReasoningTextDelta,
    ToolArgumentsDelta,
    ToolProgress,
)
from nbagent.models import Call, Reasoning, ScriptedModel, Text, Turn

SIZE = 80_000  # bytes of arguments
FRAGMENT = 8


def arguments(size: int) -> str:
    return json.dumps({"data": "x" * (size - 12)})


def sink() -> Tool:
    async def run(ctx: ToolContext) -> str:
        return f"got {len(ctx.input['data'])}"

    return Tool(name="sink", input_schema={"type": "object"}, execute=run)


async def test_event_path_memory_is_linear_in_the_arguments() -> None:
    text = arguments(SIZE)
    model = ScriptedModel([Turn(Call("sink", text, chunks=len(text) // FRAGMENT)), "done"])
    agent = Agent(model, [sink()])
    tracemalloc.start()
    try:
        run = agent.start("go")
        received = []
        async for event in run.events():  # like a front end that appends the deltas
            if isinstance(event, ToolArgumentsDelta):
                received.append(event.delta)
        result = await run.result()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.text == "done"
    assert "".join(received) == text  # nothing lost, in order
    assert peak < 10 * SIZE, f"peak {peak:,} bytes for {SIZE:,} bytes of arguments"


async def test_text_and_partial_are_lazy_and_right() -> None:
    text = arguments(2000)
    model = ScriptedModel([Turn(Call("sink", text, chunks=50)), "done"])
    run = Agent(model, [sink()]).start("go")
    deltas = [e async for e in run.events() if isinstance(e, ToolArgumentsDelta)]
    await run.result()
    assert all(d._text is None for d in deltas)  # nothing built for a reader of .delta only
    so_far = ""
    for delta in deltas:
        so_far += delta.delta
        assert delta.text == so_far
    assert deltas[-1].partial == json.loads(text)
    assert deltas[3].partial == {"data": deltas[3].text[10:]}  # a prefix parses for display


async def test_a_reader_that_falls_behind_gets_merged_deltas() -> None:
    text = arguments(4000)
    words = "word " * 800
    model = ScriptedModel(
        [Turn(Reasoning("hmm"), Text(words, chunks=800), Call("sink", text, chunks=500)), "done"]
    )
    agent = Agent(model, [sink()], limits=Limits(event_backlog=10))
    run = agent.start("go")
    await asyncio.sleep(0)  # let the whole first turn stream before reading anything
    events = [e async for e in run.events()]
    arguments_deltas = [e for e in events if isinstance(e, ToolArgumentsDelta)]
    text_deltas = [e for e in events if isinstance(e, AssistantTextDelta) and e.step == 1]
    assert len(arguments_deltas) < 500 and len(text_deltas) < 800  # merged …
    assert "".join(d.delta for d in arguments_deltas) == text  # … and nothing lost
    assert "".join(d.text for d in text_deltas) == words
    assert arguments_deltas[-1].text == text and arguments_deltas[-1].partial == json.loads(text)
    assert [e.text for e in events if isinstance(e, ReasoningTextDelta)] == ["hmm"]


async def test_progress_from_a_thread_ends_with_the_latest_update() -> None:
    def busy(ctx: ToolContext) -> str:
        for i in range(20_000):
            ctx.update(f"step {i}")
        return "done"

    model = ScriptedModel([Turn(Call("busy", {})), "ok"])
    agent = Agent(model, [Tool(name="busy", input_schema={"type": "object"}, execute=busy)])
    events = [e async for e in agent.stream("go")]
    progress = [e.update.text for e in events if isinstance(e, ToolProgress)]
    assert progress[-1] == "step 19999"
    numbers = [int(p.split()[1]) for p in progress]
    assert numbers == sorted(numbers)  # in order, possibly thinned, never reordered


async def test_events_after_the_end_return_at_once() -> None:
    run = Agent(ScriptedModel(["hi"])).start("go")
    first = [e async for e in run.events()]
    second: list[Any] = [e async for e in run.events()]
    assert type(first[-1]).__name__ == "RunFinished" and second == []


async def test_partial_of_hostile_arguments_is_none_not_an_exception() -> None:
    deep = "[" * 100_000
    model = ScriptedModel([Turn(Call("sink", deep, chunks=4)), "done"])
    run = Agent(model, [sink()]).start("go")
    deltas = [e async for e in run.events() if isinstance(e, ToolArgumentsDelta)]
    assert (await run.result()).text == "done"
    assert deltas[-1].text == deep and deltas[-1].partial is None


async def test_deltas_stop_once_a_call_passes_the_argument_limit() -> None:
    text = arguments(5000)
    model = ScriptedModel([Turn(Call("sink", text, chunks=100)), "done"])
    agent = Agent(model, [sink()], limits=Limits(max_argument_bytes=1000))
    events = [e async for e in agent.stream("go")]
    deltas = [e for e in events if isinstance(e, ToolArgumentsDelta)]
    shown = "".join(d.delta for d in deltas)
    assert 1000 <= len(shown) <= 1050 and text.startswith(shown)
    assert deltas[-1].text == shown
    [finished] = [e for e in events if type(e).__name__ == "ToolFinished"]
    assert finished.status == "invalid" and "more than the limit of 1,000" in finished.result.text
