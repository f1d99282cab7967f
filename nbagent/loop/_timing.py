"""Folding a run's events, as they are emitted, into its :class:`~nbagent.timeline.Timeline`.

The loop (and the notebook's transcript of a run) hands a :class:`TimelineBuilder` every event;
the hot ones — text and argument deltas — are skipped at the cost of one dictionary look-up.
It sits above :mod:`nbagent.events`, which names only the :class:`~nbagent.timeline.Timing` it
keeps.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..events import (
    ApprovalRequested,
    ApprovalResolved,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunStarted,
    StepFinished,
    StepRetried,
    StepStarted,
    ToolFinished,
    ToolStarted,
)
from ..timeline import Span, Timeline

__all__ = ["TimelineBuilder"]


@dataclass
class TimelineBuilder:
    """Folds a run's events into a :class:`~nbagent.timeline.Timeline` (see the module docs)."""

    clock: Callable[[], float] = time.monotonic
    started: float | None = None
    spans: list[Span] = field(default_factory=list)
    _open_step: tuple[int, float] | None = None
    _waits: dict[str, tuple[float, str]] = field(default_factory=dict)
    _work: dict[str, tuple[float, str]] = field(default_factory=dict)
    _lane_of: dict[str, int] = field(default_factory=dict)
    _busy: dict[int, str] = field(default_factory=dict)
    _lanes: int = 1
    _steps: int = 0
    _stop: str = ""
    _end: float | None = None
    #: Spans kept (the latest; None: all): a serving session's calls never end by themselves.
    keep: int | None = None

    def _now(self) -> float:
        now = self.clock()
        if self.started is None:
            self.started = now
        return now - self.started

    def _lane(self, call_id: str) -> int:
        lane = self._lane_of.get(call_id)
        if lane is None:
            busy = self._busy
            lane = 1 if not busy else next(n for n in range(1, len(busy) + 2) if n not in busy)
            self._busy[lane] = call_id
            self._lane_of[call_id] = lane
            self._lanes = max(self._lanes, lane + 1)
        return lane

    def add(self, event: Any) -> None:
        """Take one event (any event: those that draw nothing are skipped cheaply)."""
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event, self._now())
            keep = self.keep
            if keep is not None and len(self.spans) > 2 * keep:  # trimmed now and then
                del self.spans[:-keep]

    def _step_started(self, event: StepStarted, now: float) -> None:
        self._open_step = (event.step, now)
        self._steps = max(self._steps, event.step)

    def _step_finished(self, event: StepFinished, now: float) -> None:
        if self._open_step is not None:
            step, began = self._open_step
            self.spans.append(Span("model", f"step {step}", began, now, 0))
            self._open_step = None

    def _retried(self, event: StepRetried, now: float) -> None:
        self.spans.append(Span("retry", f"step {event.step} retried: {event.reason}", now, now, 0))

    def _asked(self, event: ApprovalRequested, now: float) -> None:
        call = event.request.call
        self._lane(call.id)
        self._waits[call.id] = (now, call.name)

    def _resolved(self, event: ApprovalResolved, now: float) -> None:
        found = self._waits.pop(event.call_id, None)
        if found is not None and not event.decision.by_policy:  # else nobody was waited for
            began, name = found
            lane = self._lane(event.call_id)
            verdict = "approved" if event.decision.approved else "denied"
            self.spans.append(Span("approval", f"{name}: waiting", began, now, lane, verdict))

    def _tool_started(self, event: ToolStarted, now: float) -> None:
        self._lane(event.call.id)
        self._work[event.call.id] = (now, event.call.name)

    def _tool_finished(self, event: ToolFinished, now: float) -> None:
        call_id = event.call.id
        lane = self._lane_of.pop(call_id, None)
        if lane is None:  # answered without waiting or running (invalid, refused): no bar
            return
        found = self._work.pop(call_id, None)
        status = _SHOWN_STATUS.get(event.status, event.status)
        if found is not None:
            self.spans.append(Span("tool", found[1], found[0], now, lane, status))
        self._busy.pop(lane, None)

    def _ended(self, event: Any, now: float) -> None:
        self._stop = event.result.stop_reason
        self._end = now
        self._close(now)

    def _close(self, now: float) -> None:
        if self._open_step is not None:
            step, began = self._open_step
            self.spans.append(Span("model", f"step {step}", began, now, 0, "cancelled"))
            self._open_step = None
        for call_id, (began, name) in list(self._work.items()):
            self.spans.append(Span("tool", name, began, now, self._lane(call_id), "cancelled"))
        self._work.clear()
        for call_id, (began, name) in list(self._waits.items()):
            lane = self._lane(call_id)
            self.spans.append(Span("approval", f"{name}: waiting", began, now, lane, "cancelled"))
        self._waits.clear()

    def build(self, stop_reason: str | None = None, *, calls: int | None = None) -> Timeline:
        """The timeline so far (a finished one after the run's last event); ``calls``: a
        serving session's, with that many served calls (no model, so no model lane)."""
        now = self._end if self._end is not None else self._now()
        spans = sorted(self.spans, key=lambda s: (s.start, s.lane))
        total = max([now, *(s.end for s in spans)]) if spans else now
        lanes = max(self._lanes, 1)
        if calls is not None:  # the tool lanes only, from the top
            spans = [replace(s, lane=max(0, s.lane - 1)) for s in spans]
            lanes = max(lanes - 1, 1)
        return Timeline(
            tuple(spans), total, stop_reason or self._stop, self._steps, lanes, calls=calls
        )


#: A finished call's status as its bar shows it.
_SHOWN_STATUS = {"done": "", "error": "failed", "timeout": "failed", "invalid": "failed"}

_HANDLERS: dict[type, Callable[[TimelineBuilder, Any, float], None]] = {
    RunStarted: lambda b, e, now: None,
    StepStarted: TimelineBuilder._step_started,
    StepFinished: TimelineBuilder._step_finished,
    StepRetried: TimelineBuilder._retried,
    ApprovalRequested: TimelineBuilder._asked,
    ApprovalResolved: TimelineBuilder._resolved,
    ToolStarted: TimelineBuilder._tool_started,
    ToolFinished: TimelineBuilder._tool_finished,
    RunFinished: TimelineBuilder._ended,
    RunFailed: TimelineBuilder._ended,
    RunCancelled: TimelineBuilder._ended,
}
