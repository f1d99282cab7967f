"""One model turn of a run: send the request, stream the answer into events, keep the exchange.

The answer streams through :class:`~nbagent.generation.Answer`, which checks it; what the
person watches comes out of here as events (text and reasoning deltas, each call's start and
its arguments as they grow), and each tool's ``on_input_*`` display callbacks are called, never
breaking or holding the run. A reader that falls behind gets its pending deltas grown in place
rather than a new event per fragment (:mod:`nbagent.loop._eventqueue`). Each request and its answer,
retries included, is kept as an :class:`~nbagent.inspection.exchange.Exchange`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import _gates
from .._ground.textbuf import TextBuffer
from ..delegation import helper_call
from ..errors import RequestRefusedError
from ..events import (
    AssistantTextDelta,
    ReasoningTextDelta,
    StepRetried,
    ToolArgumentsDelta,
    ToolCallStarted,
)
from ..generation import (
    Answer,
    Generator,
    ReasoningDelta,
    Request,
    StreamRetry,
    TextDelta,
    ToolCallReceived,
    ToolInputDelta,
    ToolInputStart,
    Usage,
)
from ..inspection.exchange import Exchange
from ..tools import ToolInput
from ._spend import BudgetSpent, release, reserve, settle
from ._stepmode import pause_before_request

if TYPE_CHECKING:
    from ._loopstate import LoopState

__all__ = ["stream_turn"]

log = logging.getLogger("nbagent")


async def stream_turn(run: LoopState, step: int) -> Answer:
    """The model's answer at ``step`` to the history as it is (after step mode's pause, if on)."""
    agent = run.agent
    generator: Generator = agent.generator
    request = Request(
        messages=run._history.snapshot(agent.messages),
        model=getattr(generator, "model", ""),
        tools=run.definitions,
        instructions=(
            run.answer.instructions(agent.instructions) if run.answer else agent.instructions
        ),
        options=run.options,
        answer_format=run.answer.format if run.answer else None,
    )
    edits: list[str] = []
    if run._pauser is not None:
        request, generator, edits = await pause_before_request(run, step, request, generator)
        if generator is not agent.generator:  # another model, another price: reserved again
            refused = await reserve(run, generator)
            if refused is not None:
                raise BudgetSpent(Answer(run._taken), refused)
    asked = _admitted(run, step, request, generator)
    started = time.monotonic()
    retries = 0
    try:
        answer, retries = await _stream_answer(run, step, request, generator)
    except BaseException as exc:
        failed = run._answer or Answer(run._taken)
        settle(run, generator, failed.usage)  # sent: it counts, what it held is released
        _record(run, step, request, generator, failed, retries, started, edits, exc)
        if asked is not None:
            _gates.settle(asked, failed.usage, 1 + retries)
        raise
    settle(run, generator, answer.usage)
    _record(run, step, request, generator, answer, retries, started, edits, answer.error)
    if asked is not None:
        _gates.settle(asked, answer.usage, 1 + retries)
    return answer


def _admitted(
    run: LoopState, step: int, request: Request, generator: Generator
) -> _gates.RequestAsked | None:
    """Ask the gates installed on the request path (:mod:`nbagent._gates`) about the request
    as it will be sent; a refusal ends the run, and a request never sent is not counted (it
    is counted once sent, in :func:`_stream_answer`), nor holds what the budget reserved."""
    if not _gates.installed():
        return None
    asked = _gates.RequestAsked(
        run.id, step, request, generator, run.approver, run.tools, helper_call()
    )
    try:
        _gates.admit(asked)
    except RequestRefusedError:
        release(run)  # never sent: what the budget reserved for it is free again
        raise
    return asked


def _record(
    run: LoopState,
    step: int,
    request: Request,
    generator: Any,
    answer: Answer,
    retries: int,
    started: float,
    edits: list[str],
    error: BaseException | None,
) -> None:
    finish = answer.finish.reason if answer.finish is not None else None
    message = answer.message(with_calls=answer.ok)
    run.exchanges.append(
        Exchange(
            step,
            request,
            message,
            finish,
            answer.usage,
            answer.status if answer.status != "streaming" else "failed",
            str(getattr(generator, "model", "") or type(generator).__name__),
            retries,
            time.monotonic() - started,
            error,
            tuple(edits),
        )
    )


async def _stream_answer(
    run: LoopState, step: int, request: Request, generator: Generator
) -> tuple[Answer, int]:
    retries = 0
    answer = Answer(run._taken)
    run._answer = answer
    streams: dict[str, _CallStream] = {}
    keep = run._keep_events  # a reader will read the queue: it may merge fragments for it
    heard = run._heard  # a reader or an observer: the events are built at all
    told = bool(run._observers)  # observers get each fragment as an event of its own
    queue = run._queue
    pending = queue.items  # the queue's deque: its tail is checked once per fragment
    shown = run.limits.max_argument_bytes  # beyond it a call is refused: show no more
    # a native typed answer is refused beyond the same size: show no more of it either
    typed = run.answer
    cap = shown if typed is not None and typed.mode == "native" else None
    said = 0
    stream = generator.stream(request)
    run._requests += 1
    try:
        async for raw in stream:
            if raw.__class__ is StreamRetry:
                # announced before it is sent, and a retry is a request like any other: the
                # attempt that failed is settled, the retry reserved; closing the stream
                # here sends nothing more
                settle(run, generator, Usage())
                refused = await reserve(run, generator)
                if refused is not None:
                    raise BudgetSpent(answer, refused)
            event = answer.add(raw)
            if isinstance(event, ToolInputDelta):  # the most frequent event: kept lean
                call_id = event.call_id
                found = streams.get(call_id)
                if found is None:
                    found = streams[call_id] = _call_stream(run, "")
                buffer = found.buffer
                if buffer is not None and buffer.length < shown:
                    buffer.append(event.delta)
                    end = buffer.length
                    merged = found.merged
                    if merged is not None and pending and pending[-1] is merged:
                        merged.end = end  # the reader is behind: grow the pending delta
                        if told:
                            run._tell(
                                ToolArgumentsDelta(
                                    call_id, found.name, event.delta, source=(buffer, end)
                                )
                            )
                    elif heard:
                        run.emit(
                            ToolArgumentsDelta(
                                call_id, found.name, event.delta, source=(buffer, end)
                            )
                        )
                        found.merged = queue.merged_tail() if keep else None
                    if found.on_delta is not None:
                        info = ToolInput(
                            call_id, found.name, delta=event.delta, source=(buffer, end)
                        )
                        await input_callback(
                            found.on_delta,
                            info,
                            "on_input_delta",
                            run._silenced,
                            run.agent.hook_timeout,
                        )
            elif isinstance(event, TextDelta):
                if cap is not None:
                    said += len(event.text)
                    if said > cap:
                        continue
                if event.text and heard:
                    if not (keep and queue.extend_text(AssistantTextDelta, step, event.text)):
                        run.emit(AssistantTextDelta(step, event.text))
                    elif told:  # merged for the reader; the observers' own
                        run._tell(AssistantTextDelta(step, event.text))
            elif isinstance(event, ToolInputStart):
                streams[event.call_id] = _call_stream(run, event.name)
                tool = run.tools.get(event.name)
                if run._heard:  # the timeline does not read it: nobody else, no event
                    run.emit(
                        ToolCallStarted(
                            step,
                            event.call_id,
                            event.name,
                            tool.title if tool else None,
                            event.provider_executed,
                            dict(tool.code_arguments) if tool else {},
                        )
                    )
                if tool is not None and tool.on_input_start is not None:
                    info = ToolInput(event.call_id, event.name)
                    await input_callback(
                        tool.on_input_start,
                        info,
                        "on_input_start",
                        run._silenced,
                        run.agent.hook_timeout,
                    )
            elif isinstance(event, ToolCallReceived):
                call = event.call
                tool = run.tools.get(call.name)
                if tool is not None and tool.on_input_available is not None:
                    info = ToolInput(call.id, call.name, call.arguments)
                    await input_callback(
                        tool.on_input_available,
                        info,
                        "on_input_available",
                        run._silenced,
                        run.agent.hook_timeout,
                    )
            elif isinstance(event, ReasoningDelta) and event.text and heard:
                if not (keep and queue.extend_text(ReasoningTextDelta, step, event.text)):
                    run.emit(ReasoningTextDelta(step, event.text))
                elif told:
                    run._tell(ReasoningTextDelta(step, event.text))
            elif isinstance(event, StreamRetry):
                run._requests += 1
                retries += 1
                said = 0
                streams.clear()
                run.emit(StepRetried(step, event.reason, event.attempt, event.delay))
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
    answer.end()
    run._answer = None
    return answer, retries


def _call_stream(run: LoopState, name: str) -> _CallStream:
    """What the loop keeps of one call while its arguments stream: text only if someone
    will read it (a reader or an observer hears the run, or the tool has ``on_input_delta``)."""
    tool = run.tools.get(name)
    on_delta = tool.on_input_delta if tool is not None else None
    keep = run._heard or on_delta is not None
    return _CallStream(name, TextBuffer() if keep else None, on_delta)


class _CallStream:
    """One call's arguments as they stream: its text (if anyone reads it), its ``on_input_delta``
    callback, and the merged delta it may grow at the tail of the event queue."""

    __slots__ = ("buffer", "merged", "name", "on_delta")

    def __init__(
        self, name: str, buffer: TextBuffer | None, on_delta: Callable[[ToolInput], Any] | None
    ) -> None:
        self.name = name
        self.buffer = buffer
        self.on_delta = on_delta
        self.merged: Any = None


async def input_callback(
    callback: Callable[[ToolInput], Any],
    info: ToolInput,
    hook: str,
    silenced: set[tuple[str, str]],
    timeout: float | None,
) -> None:
    """Call one ``on_input_*`` display callback; it never breaks or holds the run.

    An awaitable it returns gets ``timeout`` seconds (``Agent.hook_timeout``). One that raises or
    overruns is logged once and not called again in this run: it would otherwise fail, or cost
    a whole timeout, on every fragment of every later call. (A sync callback runs on the loop,
    as fragments arrive, and must be quick: no thread can stop it.)
    """
    key = (info.name, hook)
    if key in silenced:
        return
    try:
        outcome = callback(info)
        if inspect.isawaitable(outcome):
            await asyncio.wait_for(outcome, timeout)
    except TimeoutError:
        silenced.add(key)
        log.warning(
            "%s callback of tool %r took longer than %s s; it was stopped and is not called "
            "again in this run",
            hook,
            info.name,
            timeout,
        )
    except Exception:  # a display callback must never break the run
        silenced.add(key)
        log.exception(
            "%s callback of tool %r failed; it is not called again in this run", hook, info.name
        )
