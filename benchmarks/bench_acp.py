"""An external agent's turn through nbagent's ACP client vs the SDK's client alone.

The agent is tests/acp/scripted_agent.py (the SDK's agent side, a real process on stdio); its
``flood`` turn streams 500 message chunks. Two ways to read the same turn, each in a fresh
process started outside the timed region:

* **SDK alone** (the reference): ``acp.spawn_agent_process`` with a client that only counts the
  updates; timed from ``session/prompt`` sent to its answer.
* **nbagent**: :class:`nbagent.acp.ExternalAgentSession` (bounded wire, the updates turned into
  nbagent's events, handed across loops) with a reader that takes every event, as a front end
  does; timed from ``start()`` to the run's end (the agent already started by a first turn).

Reported: per update (microseconds), and nbagent's time from an update's arrival on its wire
to its event in the reader (the median over the turn's chunks).

Goal: nbagent's turn within 1.5x of the SDK alone.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import NotInstalled, Section, compare, describe_import_error, main, median_ratio

ROOT = Path(__file__).resolve().parents[1]
AGENT = ROOT / "tests" / "acp" / "scripted_agent.py"
CHUNKS = 500
LATENCIES: list[float] = []


def _needs_acp() -> None:
    try:
        import acp  # noqa: F401
    except ImportError as exc:
        raise describe_import_error("agent-client-protocol", exc) from None


def _sdk_alone() -> Callable[[], float]:
    _needs_acp()

    def measure() -> float:
        import acp
        from acp.schema import ClientCapabilities

        class Counting:
            updates = 0

            async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
                Counting.updates += 1

            async def request_permission(self, **_: Any) -> Any:
                raise RuntimeError("not asked in this benchmark")

        async def once() -> float:
            client = Counting()
            async with acp.spawn_agent_process(client, sys.executable, str(AGENT)) as (conn, _):
                await conn.initialize(
                    protocol_version=acp.PROTOCOL_VERSION, client_capabilities=ClientCapabilities()
                )
                session = await conn.new_session(cwd=str(ROOT), mcp_servers=[])
                started = time.perf_counter()
                await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("flood")])
                elapsed = time.perf_counter() - started
            if Counting.updates != CHUNKS:
                raise RuntimeError(f"the SDK's client got {Counting.updates} of {CHUNKS} updates")
            return elapsed / CHUNKS

        return asyncio.run(once())

    return measure


def _nbagent() -> Callable[[], float]:
    _needs_acp()

    def measure() -> float:
        from nbagent.acp import ExternalAgent, ExternalAgentSession
        from nbagent.events import AssistantTextDelta

        agent = ExternalAgent("scripted", sys.executable, (str(AGENT),))

        async def once(session: ExternalAgentSession) -> float:
            await _turn(session, "chat")  # the process starts and answers: not timed
            started = time.perf_counter()
            text = await _turn(session, "flood", AssistantTextDelta)
            elapsed = time.perf_counter() - started
            if text.split() != [str(i) for i in range(CHUNKS)]:
                raise RuntimeError("nbagent's reader did not get every chunk")
            return elapsed / CHUNKS

        with ExternalAgentSession(agent, cwd=str(ROOT)) as session:
            return asyncio.run(once(session))

    return measure


async def _turn(session: Any, prompt: str, kind: Any = None) -> str:
    from nbagent.approvals.approval import DenyAll

    run = session.start(prompt, approver=DenyAll())
    wire = session._wire
    seen: list[float] = []
    original = wire._on_update if wire is not None else None
    if wire is not None and kind is not None:  # when each update reached the wire

        def stamped(update: Any) -> None:
            seen.append(time.perf_counter())
            assert original is not None
            original(update)

        wire._on_update = stamped
    pieces: list[str] = []
    arrived: list[float] = []
    async for event in run.events():
        if kind is not None and isinstance(event, kind):
            pieces.append(event.text)
            arrived.append(time.perf_counter())
    if wire is not None and original is not None:
        wire._on_update = original
    result = await run.result()
    if result.stop_reason != "finished":
        raise RuntimeError(f"the turn ended {result.stop_reason}: {result.error}")
    if seen and arrived and len(arrived) == len(seen):  # merged deltas: no pairing then
        LATENCIES.extend(b - a for a, b in zip(seen, arrived, strict=True))
    return "".join(pieces)


def build(quick: bool) -> Section:
    section = Section("acp", "An external agent's turn (ACP): nbagent's client vs the SDK's alone")
    label = f"{CHUNKS} message chunks"
    try:
        _needs_acp()
    except NotInstalled as exc:
        section.notes.append(str(exc))
    rows = compare(
        section,
        label,
        {"SDK alone": _sdk_alone, "nbagent": _nbagent},
        rounds=3 if quick else 7,
        reference="SDK alone",
        unit="us",
        scale=1e6,
    )
    if LATENCIES and rows["nbagent"].status == "ok":
        rows["nbagent"].extra = (
            f"update on the wire to its event read: median "
            f"{statistics.median(LATENCIES) * 1e6:.0f} us"
        )
    ratio = median_ratio(section.row(label, "nbagent"))
    section.goal(
        "nbagent's turn within 1.5x of the SDK's client alone",
        None if ratio is None else ratio <= 1.5,
        "not measured" if ratio is None else f"paired ratio {ratio:.2f}x",
    )
    section.notes.append(
        "Each round starts the agent afresh (outside the timed region); a turn is timed from "
        "the prompt sent to its end. nbagent's reader takes every event, as a front end does; "
        "the latency is paired only when no deltas were merged for a slow reader."
    )
    return section


if __name__ == "__main__":
    main(build)
