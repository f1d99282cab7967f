"""Loop overhead per tool round trip, offline: nbagent vs pydantic-ai vs the OpenAI Agents SDK.

An offline model calls one async no-op tool K times (one call per turn), then answers "done".
Each contender runs the same K+1 turns through its own agent loop; the per-step figure is the
wall time of the run divided by K (the agent and model are built outside the timed region).

* nbagent: ``ScriptedModel`` (turns streamed as events) + ``Agent.run``.
* pydantic-ai: ``pydantic_ai.models.function.FunctionModel`` + ``Agent.run``.
* OpenAI Agents SDK: a ``Model`` subclass whose ``get_response`` returns a function call, run by
  ``Runner.run`` with tracing disabled.

* floor: a hand-written validated loop (see :func:`floor_setup`), with the same scripted model,
  and once more fed whole turns.

nbagent's ratio is to the floor, the peers' to nbagent, each paired in the same round. Goals:
nbagent's per-step cost at K=1000 within 1.5x of K=10 and within 3x of the floor; at least 100x
below pydantic-ai's at K=1000; both peers at least 10x slower than nbagent at K=10.
"""

from __future__ import annotations

import asyncio
import cProfile
import gc
import io
import json
import pstats
import time
from collections.abc import Callable
from typing import Any

from _common import (
    Section,
    compare,
    describe_import_error,
    fmt,
    main,
    median_of,
    median_ratio,
    paired_ratio,
)

# One measurement repeats whole runs until this much time was measured (at least one run), so a
# fast contender's figure is not a single run of a few milliseconds.
MIN_MEASURE_SECONDS = 0.25


# --- nbagent --------------------------------------------------------------------------------


def nbagent_setup(k: int) -> Callable[[], float]:
    from nbagent import Agent, Tool
    from nbagent.models import Call, ScriptedModel, Turn

    async def noop(ctx: Any) -> str:
        return "ok"

    tool = Tool(
        name="noop",
        description="Do nothing.",
        input_schema={"type": "object", "properties": {}},
        execute=noop,
    )

    def build() -> Any:
        # a new argument each step: the same call k times is a loop the repeat guard stops
        model = ScriptedModel([*(Turn(Call("noop", {"i": i})) for i in range(k)), "done"])
        return Agent(model, [tool], max_steps=k + 1)

    async def once() -> float:
        agent = build()
        started = time.perf_counter()
        result = await agent.run("go")
        elapsed = time.perf_counter() - started
        if result.text != "done" or result.steps != k + 1:
            raise RuntimeError(f"nbagent run ended wrongly: {result.stop_reason}, {result.steps}")
        return elapsed

    return _measure(once, k)


# --- the floor: a hand-written validated loop -----------------------------------------------


def floor_setup(k: int, *, streamed: bool = True) -> Callable[[], float]:
    """The least a correct loop does per step, written out by hand: ask the model, take its calls,
    parse each call's arguments (``json.loads``) and validate them with the compiled JSON Schema
    validator nbagent uses (``compile_schema(...).validate``), await the tool, append the answer
    and the results to the history. No events, limits, repeat guard, approvals or timeline.

    ``streamed``: the same ``ScriptedModel`` as nbagent's, its turns read as the stream of events
    it sends (so the model's own cost is the same on both sides); else the calls come as whole
    answers from a plain coroutine, as the peers' function models give them.
    """
    from nbagent.content import TextPart
    from nbagent.errors import ArgumentsError
    from nbagent.generation import Request, TextDelta, ToolCallReceived
    from nbagent.messages import AssistantMessage, ToolMessage, ToolResultPart, UserMessage
    from nbagent.models import Call, ScriptedModel, Turn
    from nbagent.schema import compile_schema
    from nbagent.tools import ToolCall

    async def noop(arguments: dict[str, Any]) -> str:
        return "ok"

    tools = {"noop": (noop, compile_schema({"type": "object", "properties": {}}))}

    def streamed_model() -> Callable[[list[Any]], Any]:
        model = ScriptedModel([*(Turn(Call("noop", {"i": i})) for i in range(k)), "done"])

        async def answer(messages: list[Any]) -> tuple[list[Any], str]:
            calls: list[Any] = []
            text = ""
            async for event in model.stream(Request(messages)):
                if event.__class__ is ToolCallReceived:
                    calls.append(event.call)
                elif event.__class__ is TextDelta:
                    text += event.text
            return calls, text

        return answer

    def whole_model() -> Callable[[list[Any]], Any]:
        turns = [([ToolCall(f"c{i}", "noop", json.dumps({"i": i}))], "") for i in range(k)]
        turns.append(([], "done"))
        script = iter(turns)

        async def answer(messages: list[Any]) -> tuple[list[Any], str]:
            return next(script)

        return answer

    async def once() -> float:
        answer = streamed_model() if streamed else whole_model()
        messages: list[Any] = [UserMessage((TextPart("go"),))]
        started = time.perf_counter()
        text, steps = "", 0
        for _ in range(k + 1):
            steps += 1
            calls, text = await answer(messages)
            messages.append(AssistantMessage((*((TextPart(text),) if text else ()), *calls)))
            if not calls:
                break
            parts = []
            for call in calls:
                function, schema = tools[call.name]
                try:
                    arguments = json.loads(call.arguments)
                    schema.validate(arguments)
                except (ValueError, ArgumentsError) as exc:
                    parts.append(ToolResultPart(call.id, call.name, (TextPart(str(exc)),), True))
                    continue
                output = await function(arguments)
                parts.append(ToolResultPart(call.id, call.name, (TextPart(str(output)),), False))
            messages.append(ToolMessage(tuple(parts)))
        elapsed = time.perf_counter() - started
        if text != "done" or steps != k + 1:
            raise RuntimeError(f"the floor ended wrongly: {text!r} after {steps} steps")
        return elapsed

    return _measure(once, k)


# --- pydantic-ai ----------------------------------------------------------------------------


def pydantic_ai_setup(k: int) -> Callable[[], float]:
    try:
        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
        from pydantic_ai.models.function import FunctionModel
        from pydantic_ai.usage import UsageLimits
    except ImportError as exc:
        raise describe_import_error("pydantic-ai-slim", exc) from None

    def build() -> Any:
        turn = 0

        def decide(messages: Any, info: Any) -> Any:
            nonlocal turn
            turn += 1
            if turn <= k:
                return ModelResponse(parts=[ToolCallPart("noop", {}, tool_call_id=f"c{turn}")])
            return ModelResponse(parts=[TextPart("done")])

        agent = Agent(FunctionModel(decide))

        @agent.tool_plain
        async def noop() -> str:
            """Do nothing."""
            return "ok"

        return agent

    limits = UsageLimits(request_limit=None)

    async def once() -> float:
        agent = build()
        started = time.perf_counter()
        result = await agent.run("go", usage_limits=limits)
        elapsed = time.perf_counter() - started
        if result.output != "done":
            raise RuntimeError(f"pydantic-ai run ended wrongly: {result.output!r}")
        return elapsed

    return _measure(once, k)


# --- OpenAI Agents SDK ----------------------------------------------------------------------


def openai_agents_setup(k: int) -> Callable[[], float]:
    try:
        from agents import Agent, Runner, Usage, function_tool, set_tracing_disabled
        from agents.items import ModelResponse
        from agents.models.interface import Model
        from openai.types.responses import (
            ResponseFunctionToolCall,
            ResponseOutputMessage,
            ResponseOutputText,
        )
    except ImportError as exc:
        raise describe_import_error("openai-agents", exc) from None
    set_tracing_disabled(True)

    class ScriptedSDKModel(Model):
        """Returns a no-op function call for K turns, then a final message."""

        def __init__(self) -> None:
            self.turn = 0

        async def get_response(self, *args: Any, **kwargs: Any) -> Any:
            self.turn += 1
            n = self.turn
            if n <= k:
                output: list[Any] = [
                    ResponseFunctionToolCall(
                        type="function_call",
                        call_id=f"c{n}",
                        name="noop",
                        arguments="{}",
                        id=f"fc{n}",
                    )
                ]
            else:
                text = ResponseOutputText(type="output_text", text="done", annotations=[])
                output = [
                    ResponseOutputMessage(
                        id="m",
                        type="message",
                        role="assistant",
                        status="completed",
                        content=[text],
                    )
                ]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the benchmark uses Runner.run (not streamed)")

    @function_tool
    async def noop() -> str:
        """Do nothing."""
        return "ok"

    async def once() -> float:
        agent = Agent(name="bench", model=ScriptedSDKModel(), tools=[noop])
        started = time.perf_counter()
        result = await Runner.run(agent, "go", max_turns=k + 5)
        elapsed = time.perf_counter() - started
        if result.final_output != "done":
            raise RuntimeError(f"agents SDK run ended wrongly: {result.final_output!r}")
        return elapsed

    return _measure(once, k)


def _measure(once: Callable[[], Any], k: int) -> Callable[[], float]:
    def measure() -> float:
        gc.collect()  # nobody pays for the garbage the previous contender left

        async def many() -> float:
            total, runs = 0.0, 0
            while runs == 0 or total < MIN_MEASURE_SECONDS:
                total += await once()
                runs += 1
            return total / (runs * k)

        return asyncio.run(many())

    if k < 100:  # warm-up (imports, caches) once, at K=10: a peer's K=1000 run takes a minute
        measure()
    return measure


# --- profile ---------------------------------------------------------------------------------


def profile_nbagent(k: int, top: int = 8) -> list[str]:
    """cProfile one nbagent run of K steps; the functions with the most own time."""
    measure = nbagent_setup(k)
    profiler = cProfile.Profile()
    profiler.enable()
    measure()
    profiler.disable()
    stream = io.StringIO()
    stats = pstats.Stats(profiler, stream=stream)
    entries = sorted(stats.stats.items(), key=lambda item: item[1][2], reverse=True)  # type: ignore[attr-defined]
    total = sum(value[2] for _, value in entries) or 1.0
    lines = []
    for (file, line, name), (_, calls, own, _cumulative, _) in entries[:top]:
        where = file.split("site-packages/")[-1].split("/work/main/")[-1]
        lines.append(
            f"{name} ({where}:{line}): {own / total:.0%} own time, {calls / k:.1f} calls/step"
        )
    return lines


# --- the section ------------------------------------------------------------------------------


def build(quick: bool) -> Section:
    global MIN_MEASURE_SECONDS
    if quick:
        MIN_MEASURE_SECONDS = 0.1
    section = Section("loop", "1. Loop overhead per tool round trip (offline, no-op tool)")
    ks = (10, 100) if quick else (10, 100, 1000)
    for k in ks:
        rounds = {10: 3 if quick else 7, 100: 3 if quick else 5, 1000: 5}[k]
        slow_rounds = 3 if k == 1000 else rounds  # a peer's K=1000 run takes ~a minute
        compare(
            section,
            f"K={k}",
            {
                "floor": lambda k=k: floor_setup(k),
                "floor, whole turns": lambda k=k: floor_setup(k, streamed=False),
                "nbagent": lambda k=k: nbagent_setup(k),
                "pydantic-ai": lambda k=k: pydantic_ai_setup(k),
                "openai-agents": lambda k=k: openai_agents_setup(k),
            },
            rounds=rounds,
            reference="nbagent",
            references={"floor": "floor", "floor, whole turns": "floor", "nbagent": "floor"},
            rounds_for={"pydantic-ai": slow_rounds, "openai-agents": slow_rounds},
        )
    top = max(ks)
    # Growth with history, measured as paired ratios in the same rounds (the machine drifts).
    compare(
        section,
        "nbagent growth",
        {f"nbagent K={k}": lambda k=k: nbagent_setup(k) for k in ks},
        rounds=3 if quick else 9,
        reference="nbagent K=10",
    )
    for row in section.rows:
        if row.values:
            row.extra = "us per step"
    growth = median_ratio(section.row("nbagent growth", f"nbagent K={top}"))
    large = median_of(section.row("nbagent growth", f"nbagent K={top}"))
    small = median_of(section.row("nbagent growth", "nbagent K=10"))
    if growth is not None and large and small:
        met = growth <= 1.5
        section.goal(
            "nbagent per-step at K=1000 within 1.5x of K=10",
            met if top == 1000 else None,
            f"K={top}: paired ratio {growth:.2f}x ({fmt(large * 1e6)} us vs {fmt(small * 1e6)} us)"
            + ("" if top == 1000 else " (--quick skips K=1000)"),
        )
        if not met:
            section.notes.append(
                f"nbagent K={top} profile (own time): " + "; ".join(profile_nbagent(top))
            )
    else:
        section.goal("nbagent per-step at K=1000 within 1.5x of K=10", None, "nbagent failed")
    floor = median_ratio(section.row(f"K={top}", "nbagent"))
    section.goal(
        "nbagent within 3x of the hand-written floor at K=1000",
        None if floor is None or top != 1000 else floor <= 3,
        "not measured"
        if floor is None
        else f"nbagent is {floor:.2f}x the floor at K={top} (paired)"
        + ("" if top == 1000 else " (--quick skips K=1000)"),
    )
    for k in ks:
        whole = paired_ratio(
            section.row(f"K={k}", "nbagent"), section.row(f"K={k}", "floor, whole turns")
        )
        if whole is not None:
            section.notes.append(
                f"K={k}: nbagent is {whole:.2f}x the floor fed whole turns (no stream to read: "
                "what the peers' function models give them)"
            )
    peers = {
        name: median_ratio(section.row("K=10", name)) for name in ("pydantic-ai", "openai-agents")
    }
    measured = {name: ratio for name, ratio in peers.items() if ratio is not None}
    section.goal(
        "both peers at least 10x slower than nbagent at K=10",
        None if len(measured) < len(peers) else all(r >= 10 for r in measured.values()),
        ", ".join(f"{name} {ratio:.1f}x" for name, ratio in measured.items()) or "not measured",
    )
    ratio = median_ratio(section.row(f"K={top}", "pydantic-ai"))
    section.goal(
        "nbagent at least 100x below pydantic-ai at K=1000",
        None if ratio is None or top != 1000 else ratio >= 100,
        "pydantic-ai not measured"
        if ratio is None
        else f"pydantic-ai is {ratio:,.0f}x nbagent at K={top}"
        + ("" if top == 1000 else " (--quick skips K=1000)"),
    )
    for name in ("pydantic-ai", "openai-agents"):
        a, b = median_of(section.row("K=10", name)), median_of(section.row(f"K={top}", name))
        if a and b:
            section.notes.append(
                f"{name} per step grows {b / a:.1f}x from K=10 to K={top} "
                "(its per-step cost grows with the conversation's length: quadratic in total)"
            )
    return section


if __name__ == "__main__":
    main(build)
