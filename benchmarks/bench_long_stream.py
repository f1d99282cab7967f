"""A long streamed answer: cost per piece must not grow with the answer's length (nbagent only).

A model streams N pieces of reasoning, then N pieces of text (4 characters each), through what a
notebook run does with them: a recording generator (record / replay), the agent loop (the
``Answer`` that becomes the history), ``start()`` + ``events()``, and the notebook's
``Transcript`` (what the live view and the saved output are built from).

Each of those once grew a string by ``+=`` on an attribute or dict entry, which copies the whole
text for every piece: 300,000 pieces took minutes. A second case times the live view's text
widget alone, which redacted its whole text on every send (6 s for 1 MB). Measured: seconds per
piece at N = 75,000 and N = 300,000, paired per round. Goal: per-piece cost at 4x the length
within 1.5x (linear), for each.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from _common import Section, compare, main, median_ratio

PIECE = "abcd"
SHORT, LONG = 75_000, 300_000


class _LongModel:
    """A Generator streaming ``n`` reasoning pieces, then ``n`` text pieces, then a finish."""

    model = "long-stream"

    def __init__(self, n: int) -> None:
        self.n = n

    async def stream(self, request: Any) -> AsyncIterator[Any]:
        from nbagent.generation import Finish, ReasoningDelta, TextDelta, Usage

        for _ in range(self.n):
            yield ReasoningDelta(PIECE)
        yield ReasoningDelta(signature="sig")
        for _ in range(self.n):
            yield TextDelta(PIECE)
        yield Finish("stop", Usage(input_tokens=1, output_tokens=2 * self.n))


def _timed(n: int) -> Callable[[], float]:
    def measure() -> float:
        from nbagent import Agent
        from nbagent.notebook.shown.transcript import Transcript
        from nbagent.recording import record

        gc.collect()
        recorder = record(_LongModel(n))
        agent = Agent(recorder)
        transcript = Transcript(prompt="go")

        async def once() -> float:
            started = time.perf_counter()
            run = agent.start("go")
            async for event in run.events():
                transcript.handle(event)
            result = await run.result()
            texts = transcript.text_blocks()
            elapsed = time.perf_counter() - started
            if len(result.text) != n * len(PIECE) or len(texts[-1].text) != n * len(PIECE):
                raise RuntimeError(f"the run lost text: {result.stop_reason} {result.error}")
            saved = [e for e in recorder.recording.steps[0].events if e["type"] == "reasoning"]
            if len(saved[0]["text"]) != n * len(PIECE):
                raise RuntimeError("the recording lost reasoning")
            return elapsed / (2 * n)

        return asyncio.run(once())

    return measure


def _live(n: int) -> Callable[[], float]:
    """The live view's text widget: ``n`` pieces appended, a send every 25 (no frontend)."""

    def measure() -> float:
        from nbagent.notebook.live.stream import TextStream

        gc.collect()
        stream = TextStream()
        words = "the model wrote, word by word: {json} and more "
        started = time.perf_counter()
        for index in range(n):
            stream.append(words[(index * 4) % 44 : (index * 4) % 44 + 4])
            if index % 25 == 24:
                stream.flush()
        stream.finish()
        elapsed = time.perf_counter() - started
        if len(stream.shown) != n * 4:
            raise RuntimeError("the stream lost text")
        return elapsed / n

    return measure


def build(quick: bool) -> Section:
    section = Section("long_stream", "13. A long streamed answer: cost per piece (nbagent only)")
    label = "reasoning + text pieces"
    names = {f"N={SHORT:,}": SHORT, f"N={LONG:,}": LONG}
    compare(
        section,
        label,
        {name: lambda n=n: _timed(n) for name, n in names.items()},
        rounds=3 if quick else 5,
        reference=f"N={SHORT:,}",
        unit="us",
        scale=1e6,
    )
    live = "live view text stream (a send every 25 pieces)"
    compare(
        section,
        live,
        {name: lambda n=n: _live(n) for name, n in names.items()},
        rounds=3 if quick else 5,
        reference=f"N={SHORT:,}",
        unit="us",
        scale=1e6,
    )
    for case, what in ((label, "the run"), (live, "the live view's text")):
        ratio = median_ratio(section.row(case, f"N={LONG:,}"))
        section.goal(
            f"{what}: per-piece cost at 4x the length within 1.5x (linear)",
            None if ratio is None else ratio <= 1.5,
            "not measured" if ratio is None else f"paired ratio {ratio:.2f}x",
        )
    section.notes.append(
        "per piece of the whole run: recording generator, loop and history, events(), and the "
        "notebook Transcript; 4 characters a piece"
    )
    return section


if __name__ == "__main__":
    main(build)
