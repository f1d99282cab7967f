"""TextView: a run as ordinary cell outputs, for headless execution and frontends without widgets.

Each finished piece — the prompt, a paragraph of the answer, a tool call with its decision and
result, the footer — becomes one display output (Markdown made safe, plus plain text), so
nbclient saves it in the notebook. The last output carries the run's record as metadata.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..events import (
    AgentEvent,
    AssistantTextDelta,
    ReasoningTextDelta,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunStarted,
    StepFinished,
    ToolCallReady,
    ToolCallStarted,
    ToolFinished,
)
from .render import code_span, fenced, pretty_arguments, result_outputs, safe_markdown, shorten
from .transcript import CallRecord, Transcript

__all__ = ["Display", "TextView", "ipython_display"]

#: Shows one output: ``(data, metadata)``.
Display = Callable[[dict[str, Any], dict[str, Any]], None]


def ipython_display(data: dict[str, Any], metadata: dict[str, Any]) -> None:
    """Display a raw mime bundle in the current cell."""
    from IPython.display import display

    display(data, raw=True, metadata=metadata)  # type: ignore[no-untyped-call]


class TextView:
    """Shows a run piece by piece as outputs; no widgets, nothing to click."""

    def __init__(self, prompt: str = "", *, display: Display = ipython_display) -> None:
        self.transcript = Transcript(prompt=prompt)
        self.display = display
        self._text: list[str] = []
        self.finished = False

    def _show_markdown(
        self, markdown: str, plain: str, metadata: dict[str, Any] | None = None
    ) -> None:
        self.display({"text/markdown": markdown, "text/plain": plain}, metadata or {})

    def _flush_text(self) -> None:
        text = "".join(self._text).strip()
        self._text.clear()
        if text:
            self._show_markdown(safe_markdown(text), text)

    def handle(self, event: AgentEvent) -> None:
        self.transcript.handle(event)
        if isinstance(event, AssistantTextDelta):
            self._text.append(event.text)
        elif isinstance(event, ReasoningTextDelta):
            pass  # reasoning is for the live view; the saved notebook keeps the answer
        elif isinstance(event, RunStarted):
            model = f" · model {code_span(event.model)}" if event.model else ""
            self._show_markdown(
                f"**You:** {safe_markdown(event.prompt)}{model}",
                f"You: {event.prompt}" + (f"  [model {event.model}]" if event.model else ""),
            )
        elif isinstance(event, (ToolCallStarted, ToolCallReady, StepFinished)):
            self._flush_text()
        elif isinstance(event, ToolFinished):
            self._flush_text()
            self._show_call(self.transcript.calls[event.call.id])
            for output in result_outputs(event.result):
                self._show_output(output)
            if event.traceback:
                self.display({"text/plain": event.traceback}, {})
        elif isinstance(event, (RunFinished, RunFailed, RunCancelled)):
            self.close()

    def _show_call(self, record: CallRecord) -> None:
        line = self.transcript.call_line(record)
        args = pretty_arguments(record.input, record.arguments)
        self._show_markdown(
            f"**🔧 {safe_markdown(record.name)}** — {safe_markdown(line)}\n\n"
            f"{fenced(shorten(args, 4000), 'json')}",
            f"[tool] {record.name} {shorten(record.arguments, 4000)}\n  {line}",
        )

    def _show_output(self, output: dict[str, Any]) -> None:
        if output.get("output_type") == "stream":
            self.display({"text/plain": output.get("text", "")}, {})
        else:
            self.display(dict(output.get("data", {})), dict(output.get("metadata", {})))

    def tick(self) -> None:
        """Nothing streams live in a text view."""

    def show_error(self, error: BaseException, trace: str | None = None) -> None:
        text = trace or f"{type(error).__name__}: {error}"
        self.display({"text/plain": text}, {})

    def close(self, stop_reason: str | None = None) -> None:
        if self.finished:
            return
        self.finished = True
        if stop_reason is not None and not self.transcript.done:
            self.transcript.end(stop_reason)
        self._flush_text()
        t = self.transcript
        if t.ended is None:
            t.ended = time.monotonic()
        extra = f"\n\n**Error:** {safe_markdown(t.error)}" if t.error else ""
        self._show_markdown(
            f"*{safe_markdown(t.footer())}*{extra}",
            t.footer() + (f"\nError: {t.error}" if t.error else ""),
            {"nbagent": t.to_metadata()},
        )
