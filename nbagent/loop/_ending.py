"""The end of a run: its stop reason and result, and the synthetic results that keep history valid.

Whatever point a run ends at (finished, failed, cancelled, stopped by a callback), its history
must be one every provider accepts: each call answered exactly once, no half-streamed answer
with calls that will never run. :func:`repair` makes it so (a cancelled call reads why it was
not finished), and the ``end_*`` functions set the run's :class:`~nbagent.events.RunResult`,
emit the last event and leave the agent idle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._history import clean_text
from ..content import TextPart, error_result
from ..errors import RunAbortedError
from ..events import RunCancelled, RunFailed, RunFinished, RunResult, StopReason, ToolFinished
from ..generation import Answer
from ..messages import AssistantMessage, ToolMessage, ToolResultPart
from ..redact import redact_secrets

if TYPE_CHECKING:
    from ._loopstate import LoopState

__all__ = [
    "aborted",
    "end_cancelled",
    "end_failed",
    "end_finished",
    "keep_answer_text",
    "repair",
    "run_result",
]


def end_finished(run: LoopState, stop: StopReason) -> RunResult:
    """The run ended on its own (``stop`` says why): RunFinished."""
    result = run.final = run_result(run, stop)
    run.emit(RunFinished(result))
    close(run)
    return result


def end_failed(run: LoopState, error: BaseException) -> RunResult:
    """The run failed with ``error``: RunFailed."""
    result = run.final = run_result(run, "failed", error)
    run.emit(RunFailed(error, result))
    close(run)
    return result


def end_cancelled(run: LoopState) -> RunResult:
    """The run was cancelled (its history already repaired): RunCancelled."""
    result = run.final = run_result(run, "cancelled")
    run.emit(RunCancelled(result))
    close(run)
    return result


def close(run: LoopState) -> None:
    """The agent is idle again, and the reader of the run's events reaches their end."""
    run.agent._running = False
    run._queue.put(None)


def run_result(run: LoopState, stop: StopReason, error: BaseException | None = None) -> RunResult:
    """What the run added to the history, its last text, steps, usage, and why it stopped."""
    new = tuple(run.agent.messages[run._start_index :])
    text = ""
    for message in reversed(new):
        if isinstance(message, AssistantMessage) and message.text:
            text = message.text
            break
    return RunResult(
        text,
        new,
        run._steps,
        run._usage,
        stop,
        error,
        run._timeline,
        tuple(run.exchanges),
        run.id,
        run.agent,
        output=run.answer.value if run.answer is not None else None,
        has_output=run.answer is not None and run.answer.found,
        stop_detail=run._stop_detail if stop == "budget" else "",
    )


def keep_answer_text(run: LoopState, answer: Answer) -> None:
    """Keep what the person already saw of a broken answer, without its (unrunnable) calls."""
    partial = answer.message(with_calls=False)
    texts = tuple(
        TextPart(clean_text(p.text)) for p in partial.content if isinstance(p, TextPart) and p.text
    )
    if texts:
        run.agent.messages.append(AssistantMessage(texts))


def repair(run: LoopState, why: str) -> None:
    """Leave a history every provider accepts: each call answered exactly once."""
    if run._answer is not None and run._answer.status == "streaming":
        run._answer.abort()
        keep_answer_text(run, run._answer)
    if run._open_calls:
        parts = []
        for call in run._open_calls:
            part = run._finished.get(call.id)
            if part is None:
                abandoned = run._abandoned.get(call.id)
                text = f"{why} before this call finished"
                if abandoned is not None:
                    text += "; its function is still running and its result will be ignored"
                result = error_result(text + ".")
                part = ToolResultPart(call.id, call.name, result.content, True)
                run.emit(ToolFinished(call, result, "cancelled", 0.0, None, abandoned))
            parts.append(part)
        run.agent.messages.append(ToolMessage(tuple(parts)))
        run._open_calls = ()
    run._answer = None


def aborted(tool: str | None, raised: BaseException) -> RunAbortedError:
    """What stops a run when a tool (``tool``) or a callback (None) raised ``raised``, a
    ``KeyboardInterrupt``, ``SystemExit`` … that must not leave the run as it is."""
    what = f"{type(raised).__name__}" + (f": {redact_secrets(str(raised))}" if str(raised) else "")
    who = f"tool {tool!r}" if tool is not None else "a callback"
    error = RunAbortedError(f"{who} raised {what}", tool=tool, raised=raised)
    error.__cause__ = raised
    return error
