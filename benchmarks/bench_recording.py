"""Record and replay: how big a recording is, and what replaying costs per step (nbagent only).

1. **Size.** A 20,000-token run (ordinary prose streamed token by token, then a second answer
   after one tool call whose arguments stream in fragments) is recorded; the file's bytes are
   set against the bytes of what the model produced (its text and its arguments). Goal: at most
   1.5x. A second row records a run of many short steps (a tool called 200 times), where the
   per-step fingerprint weighs more.
2. **Replay overhead.** The same K-step run (one no-op tool call per step, K = 100) driven by a
   ScriptedModel, and by a replay of its recording (``pace="instant"``): per-step wall time,
   paired in alternating rounds. Goal: replay within 1.2x of the scripted model. Both stream the
   same events; replay also fingerprints each request and checks it against the recording.
"""

from __future__ import annotations

import asyncio
import gc
import json
import random
import time
from collections.abc import Callable
from typing import Any

from _common import Section, compare, main, median_ratio

TOKENS = 20_000
STEPS = 100
_PROSE = (
    "the model writes a long answer about rivers and mountains with numbers like 42 and 3.5 and "
    'some punctuation, quotes "like this" and a line break now and then'
)
_WORDS = _PROSE.split(" ")


def _prose(tokens: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [rng.choice(_WORDS) + ("\n\n" if rng.random() < 0.05 else " ") for _ in range(tokens)]


def _size_row(
    section: Section, label: str, turns: list[Any], tools: list[Any], content: int
) -> float:
    from nbagent import Agent, AutoApprove
    from nbagent.models import ScriptedModel
    from nbagent.recording import record

    recorder = record(ScriptedModel(turns))
    agent = Agent(recorder, tools, approver=AutoApprove(), max_steps=len(turns) + 1)

    async def go() -> None:
        run = agent.start("write")
        run.discard_events()
        result = await run.result()
        if result.stop_reason != "finished":
            raise RuntimeError(f"the run ended {result.stop_reason}: {result.error}")

    asyncio.run(go())
    size = len(recorder.recording.to_json().encode())
    ratio = size / content
    from _common import Row

    row = Row(label, "recording", unit="x", scale=1.0)
    row.values = [ratio]
    row.extra = f"{size:,} bytes for {content:,} bytes of text and arguments"
    section.rows.append(row)
    return ratio


def _tools(count: list[int]) -> list[Any]:
    from nbagent import tool

    @tool
    def note(text: str) -> str:
        """Keep a note."""
        count.append(1)
        return "noted"

    return [note]


def _size(section: Section, tokens: int) -> float:
    from nbagent.models import Call, Text, Turn

    pieces = _prose(tokens)
    text = "".join(pieces)
    arguments = json.dumps({"text": "".join(_prose(tokens // 10, seed=3))})
    turns = [
        Turn(Text(text, chunks=len(pieces)), Call("note", arguments, chunks=len(arguments) // 8)),
        Turn(Text("Noted. " * 50, chunks=100)),
    ]
    content = len(text.encode()) + len(arguments.encode()) + len(("Noted. " * 50).encode())
    ratio = _size_row(section, f"{tokens:,}-token run", turns, _tools([]), content)
    steps = [
        Turn(Text(f"Step {i}: noting.", chunks=3), Call("note", {"text": f"n{i}"}))
        for i in range(200)
    ]
    many = [*steps, Turn(Text("Done.", chunks=1))]
    produced = (
        sum(len(f"Step {i}: noting.") + len(json.dumps({"text": f"n{i}"})) for i in range(200)) + 5
    )
    _size_row(section, "200 short steps", many, _tools([]), produced)
    return ratio


def _replay_setup(kind: str) -> Callable[[], Callable[[], float]]:
    def setup() -> Callable[[], float]:
        from nbagent import Agent, AutoApprove
        from nbagent.models import Call, ScriptedModel, Text, Turn
        from nbagent.recording import Recording, record, replay

        turns = [  # a new note each step: the same one again is a loop the repeat guard stops
            Turn(Text("Calling.", chunks=2), Call("note", {"text": f"x{i}"})) for i in range(STEPS)
        ]
        turns.append(Turn(Text("Done.", chunks=1)))
        recorder = record(ScriptedModel(turns))
        Agent(recorder, _tools([]), approver=AutoApprove(), max_steps=STEPS + 1).run_sync("go")
        recording = Recording.from_json(recorder.recording.to_json())

        def measure() -> float:
            gc.collect()
            model = ScriptedModel(turns) if kind == "scripted" else replay(recording)
            agent = Agent(model, _tools([]), approver=AutoApprove(), max_steps=STEPS + 1)

            async def once() -> float:
                started = time.perf_counter()
                run = agent.start("go")
                run.discard_events()
                result = await run.result()
                if result.stop_reason != "finished":
                    raise RuntimeError(f"{kind}: {result.stop_reason}: {result.error}")
                return (time.perf_counter() - started) / (STEPS + 1)

            return asyncio.run(once())

        return measure

    return setup


def build(quick: bool) -> Section:
    section = Section("recording", "10. Record and replay: file size and replay cost")
    ratio = _size(section, 2_000 if quick else TOKENS)
    section.goal(
        f"a {TOKENS:,}-token run's recording at most 1.5x its text and arguments",
        None if quick else ratio <= 1.5,
        f"{ratio:.2f}x" + (" (--quick: 2,000 tokens)" if quick else ""),
    )
    label = f"K={STEPS} steps, one call each"
    compare(
        section,
        label,
        {"scripted model": _replay_setup("scripted"), "replay": _replay_setup("replay")},
        rounds=3 if quick else 9,
        reference="scripted model",
        unit="us",
        scale=1e6,
    )
    paired = median_ratio(section.row(label, "replay"))
    section.goal(
        "replay per step within 1.2x of the scripted model",
        None if paired is None else paired <= 1.2,
        "not measured" if paired is None else f"paired ratio {paired:.2f}x",
    )
    section.notes.append(
        "size: the whole file as written (JSON, one event per line) over the UTF-8 bytes the "
        "model produced; replay: pace 'instant', whole runs, per step"
    )
    return section


if __name__ == "__main__":
    main(build)
