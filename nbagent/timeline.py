"""A run over time: each step's streaming, each call's work and its wait for a person, as a picture.

The loop feeds a builder (:class:`nbagent.loop._timing.TimelineBuilder`) every event it emits;
``RunResult.timeline()`` returns the finished :class:`Timeline`, whose :meth:`Timeline.svg` is
a static SVG: it survives saving, renders on GitHub and in ``nbconvert`` output, and stays
readable for a 50-step run (labels are drawn only where they fit; every bar has a tooltip with
its duration).

Lanes: the model's turns on the first; each tool call on the first tool lane free when it begins,
so calls that ran at the same time are side by side. A call's wait for a person (approval) is
drawn on its lane before its work; a retried answer is a mark on the model's lane.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from typing import Any, Literal, Protocol

__all__ = ["Span", "SpanKind", "Timeline", "Timing"]

SpanKind = Literal["model", "tool", "approval", "retry"]


@dataclass(frozen=True)
class Span:
    """One bar: what happened, from ``start`` to ``end`` seconds after the run began."""

    kind: SpanKind
    label: str
    start: float
    end: float
    lane: int
    status: str = ""

    @property
    def duration(self) -> float:
        return max(0.0, self.end - self.start)


_COLORS = {
    "model": "#1565c0",
    "tool": "#2e7d32",
    "tool-failed": "#c62828",
    "tool-denied": "#ad1457",
    "tool-cancelled": "#757575",
    "approval": "#ef6c00",
    "retry": "#c62828",
}


def _seconds(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.1f} s"


def _tick(total: float) -> float:
    """A round tick interval giving 4 to 10 ticks over ``total`` seconds."""
    for step in (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800):
        if total / step <= 10:
            return step
    return 3600.0


@dataclass(frozen=True)
class Timeline:
    """The spans of one run, its length and how it ended."""

    spans: tuple[Span, ...]
    total: float
    stop_reason: str = ""
    steps: int = 0
    lanes: int = 1
    #: what the run cost, as words (``$0.0012``, ``price unknown``); empty when not priced
    cost: str = ""
    #: a ``%agent serve`` session's: how many calls it was asked (it has no model and no
    #: steps, so its lanes are calls only); None for a run
    calls: int | None = None

    def _lane_name(self, lane: int) -> str:
        if self.calls is not None:
            return f"calls {lane + 1}" if self.lanes > 1 else "calls"
        return "model" if lane == 0 else f"tools {lane}" if self.lanes > 2 else "tools"

    def _count(self) -> str:
        if self.calls is not None:
            return f"{self.calls:,} served call{'s' if self.calls != 1 else ''}"
        return f"{self.steps} step{'s' if self.steps != 1 else ''}"

    def svg(self, width: int = 720) -> str:
        """The picture as a standalone SVG (escaped: tool names are text, never markup)."""
        left, right, row, top = 92, 16, 22, 10
        height = top + row * self.lanes + 46
        scale = (width - left - right) / max(self.total, 1e-6)
        out = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
            f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        ]
        for lane in range(self.lanes):
            y = top + lane * row
            name = self._lane_name(lane)
            out.append(f'<text x="4" y="{y + 15}" fill="#444">{name}</text>')
            out.append(
                f'<line x1="{left}" y1="{y + row - 1}" x2="{width - right}" y2="{y + row - 1}" '
                'stroke="#eeeeee"/>'
            )
        step = _tick(self.total)
        axis = top + row * self.lanes + 4
        mark = 0.0
        while mark <= self.total + 1e-9:
            x = left + mark * scale
            out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{axis}" stroke="#dddddd"/>')
            out.append(
                f'<text x="{x:.1f}" y="{axis + 12}" fill="#666" text-anchor="middle">'
                f"{_seconds(mark) if mark else '0'}</text>"
            )
            mark += step
        for span in self.spans:
            x = left + span.start * scale
            w = max(1.5, span.duration * scale)
            y = top + span.lane * row + 3
            color = _COLORS.get(f"{span.kind}-{span.status}", _COLORS.get(span.kind, "#555"))
            tip = html.escape(
                f"{span.label}: {_seconds(span.duration)}"
                + (f" ({span.status})" if span.status else "")
            )
            if span.kind == "retry":
                out.append(
                    f'<rect x="{x - 1:.1f}" y="{y - 2}" width="3" height="{row - 2}" '
                    f'fill="{color}"><title>{tip}</title></rect>'
                )
                continue
            opacity = "0.55" if span.kind == "approval" else "0.85"
            out.append(
                f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row - 7}" rx="2" '
                f'fill="{color}" fill-opacity="{opacity}"><title>{tip}</title></rect>'
            )
            text = span.label if span.kind != "approval" else "waiting"
            if w > 7 * len(text) + 6:
                out.append(
                    f'<text x="{x + 3:.1f}" y="{y + 11}" fill="#ffffff">{html.escape(text)}</text>'
                )
        legend = (
            f"{self._count()} · {_seconds(self.total)}"
            + (f" · {self.stop_reason}" if self.stop_reason else "")
            + (f" · {self.cost}" if self.cost else "")
        )
        out.append(f'<text x="{left}" y="{height - 6}" fill="#444">{html.escape(legend)}</text>')
        keys = [("model", "model"), ("tool", "tool")]
        if self.calls is not None:  # no model: one key, the calls
            keys = [("tool", "call")]
        if any(s.kind == "approval" for s in self.spans):  # only where someone was waited for
            keys.append(("approval", "waiting for you"))
        x = width - right - 250
        for kind, words in keys:
            out.append(
                f'<rect x="{x}" y="{height - 15}" width="10" height="10" fill="{_COLORS[kind]}"/>'
                f'<text x="{x + 13}" y="{height - 6}" fill="#444">{words}</text>'
            )
            x += 14 + 7 * len(words) + 10
        out.append("</svg>")
        return "".join(out)

    def html(self) -> str:
        """The picture as an ``<img>`` that shrinks to fit a narrow output: JupyterLab shows an
        ``image/svg+xml`` output as an image it never scales down, so a 720 px timeline ran
        past the edge of a narrow notebook. Escaped: the SVG is base64 data, the alt text words."""
        data = base64.b64encode(self.svg().encode()).decode("ascii")
        return (
            f'<img src="data:image/svg+xml;base64,{data}" alt="{html.escape(self.summary())}" '
            'style="max-width:100%;height:auto;display:block;margin:4px 0">'
        )

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        # text/html first for every front end that shows HTML; the SVG for those that do not
        return {"text/html": self.html(), "image/svg+xml": self.svg(), "text/plain": self.summary()}

    def summary(self) -> str:
        """The timeline in one line of words."""
        tools = [s for s in self.spans if s.kind == "tool"]
        waits = sum(s.duration for s in self.spans if s.kind == "approval")
        if self.calls is not None:  # a serving session: its calls, no steps
            parts = [self._count(), _seconds(self.total)]
        else:
            calls = f"{len(tools)} tool call" + ("" if len(tools) == 1 else "s")
            parts = [self._count(), calls, _seconds(self.total)]
        if waits:
            parts.append(f"{_seconds(waits)} waiting for a person")
        if self.cost:
            parts.append(self.cost)
        return "timeline: " + ", ".join(parts)


class Timing(Protocol):
    """What a run's result keeps to draw its timeline later (the loop's
    :class:`~nbagent.loop._timing.TimelineBuilder`)."""

    def build(self, stop_reason: str | None = None) -> Timeline:
        """The timeline so far (a finished one after the run's last event)."""
