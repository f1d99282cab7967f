"""TextView: a run as ordinary cell outputs, for headless execution and frontends without widgets.

Each finished piece — the prompt, a step's text, a tool call with its decision and result, the
footer — becomes display outputs as soon as it is complete (sanitized HTML with Markdown and
plain-text twins, images as image outputs: see :mod:`.static`), so nbclient saves it in the
notebook and it reads the same as a finished run in JupyterLab. The last output carries the run's
record as metadata.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...events import (
    AgentEvent,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunStarted,
    StepFinished,
    ToolCallRepeated,
    ToolFinished,
)
from ...redact import redact_secrets
from ..shown.records import Block, CallRecord
from ..shown.render import no_math
from ..shown.transcript import Transcript
from .static import block_outputs, head_outputs, tail_outputs

__all__ = ["Display", "TextView", "ipython_display"]

#: Shows one output: ``(data, metadata)``.
Display = Callable[[dict[str, Any], dict[str, Any]], None]
#: Shows one output under a display id, or (``update``) replaces what was shown under it:
#: ``(display_id, data, metadata, update)``.
Replace = Callable[[str, dict[str, Any], dict[str, Any], bool], None]


def ipython_display(data: dict[str, Any], metadata: dict[str, Any]) -> None:
    """Display a raw mime bundle in the current cell."""
    from IPython.display import display

    display(data, raw=True, metadata=metadata)  # type: ignore[no-untyped-call]


def ipython_replace(
    display_id: str, data: dict[str, Any], metadata: dict[str, Any], update: bool
) -> None:
    """Display a raw mime bundle under ``display_id``, or replace the one shown under it (a
    saved notebook keeps the newest: nbclient applies the update to the output)."""
    from IPython.display import display, update_display

    if update:
        update_display(data, raw=True, metadata=metadata, display_id=display_id)  # type: ignore[no-untyped-call]
    else:
        display(data, raw=True, metadata=metadata, display_id=display_id)  # type: ignore[no-untyped-call]


class TextView:
    """Shows a run piece by piece as outputs; no widgets, nothing to click."""

    def __init__(
        self,
        prompt: str = "",
        *,
        display: Display = ipython_display,
        replace: Replace | None = None,
    ) -> None:
        self.transcript = Transcript(prompt=prompt)
        self.display = display
        #: Shows a call's card so that its repeats can update it (the count); by default with
        #: IPython's display ids when ``display`` is IPython's, else cards are shown once.
        self.replace = replace or (ipython_replace if display is ipython_display else None)
        self._card_ids: dict[str, str] = {}
        #: Every output shown so far, in order (a card's by its display id, as updated): what
        #: the provenance's ``shown`` digests (:mod:`nbagent.course.shown`).
        self._written: list[dict[str, Any]] = []
        self._at: dict[str, int] = {}
        self.finished = False
        self._shown: set[int] = set()
        self._steps_done: set[int] = set()
        self._head_shown = False
        #: The run's course provenance (set by its end, before :meth:`close` writes the last
        #: output, whose metadata carries it under ``"provenance"``).
        self.provenance: dict[str, Any] | None = None

    def _ready(self, block: Block) -> bool:
        """A block is shown once nothing about it can change: its step's answer is complete
        (a retried step is dropped before that) and, for a call, the call has ended."""
        if block.step not in self._steps_done:
            return False
        return not (isinstance(block, CallRecord) and block.open)

    def _show_ready(self, everything: bool = False) -> None:
        for block in self.transcript.blocks:
            if id(block) in self._shown:
                continue
            if not everything and not self._ready(block):
                break  # keep the order of the run
            self._shown.add(id(block))
            outputs = block_outputs(block, self.transcript)
            if isinstance(block, CallRecord) and self.replace is not None and outputs:
                shown_as = f"nbagent-{self.transcript.run_id}-{block.call_id}-{id(self)}"
                self._card_ids[block.call_id] = shown_as
                self._put(*outputs[0], shown_as)
                outputs = outputs[1:]
            for data, metadata in outputs:
                self._put(data, metadata)

    def _put(
        self, data: dict[str, Any], metadata: dict[str, Any], shown_as: str | None = None
    ) -> None:
        """Show one output of the run, marked as the run's; ``shown_as``: under that display
        id (shown again under it, it replaces the one shown)."""
        from ...course.shown import marked

        run_id = self.transcript.run_id
        meta = marked(metadata, run_id) if run_id else metadata
        if shown_as is None:
            self._written.append(data)
            self.display(data, meta)
            return
        assert self.replace is not None
        update = shown_as in self._at
        if update:
            self._written[self._at[shown_as]] = data
        else:
            self._at[shown_as] = len(self._written)
            self._written.append(data)
        self.replace(shown_as, data, meta, update)

    def handle(self, event: AgentEvent) -> None:
        self.transcript.handle(event)
        if isinstance(event, RunStarted):
            self._show_head()
        elif isinstance(event, StepFinished):
            self._steps_done.add(event.step)
            self._show_ready()
        elif isinstance(event, ToolFinished):
            self._show_ready()
        elif isinstance(event, ToolCallRepeated):
            self._recount(event.first_call_id)
        elif isinstance(event, (RunFinished, RunFailed, RunCancelled)):
            # everything but the footer: whoever drives the run closes the view when it is
            # done with it (the footer may still learn where the run was recorded)
            self._show_head()
            self._show_ready(everything=True)

    def _recount(self, call_id: str) -> None:
        """A repeat was folded into a call already shown: show that card with its count."""
        shown_as = self._card_ids.get(call_id)
        record = self.transcript.calls.get(call_id)
        if shown_as is None or record is None or self.replace is None:
            return
        outputs = block_outputs(record, self.transcript)
        if outputs:
            self._put(*outputs[0], shown_as)

    def _show_head(self) -> None:
        if not self._head_shown:
            self._head_shown = True
            for data, metadata in head_outputs(self.transcript):
                self._put(data, metadata)

    def fold(self) -> None:
        """A serving session's view keeps its latest calls, as the live one does
        (:meth:`~.servedrequests.ServingForms.fold`): its kernel-side transcript stays bounded
        however long it serves, and the finished output shows the kept cards after one line
        that counts the folded ones."""
        forms = getattr(self.transcript, "serving", None)
        if forms is None:
            return
        for call_id in forms.fold(self.transcript):
            self._card_ids.pop(call_id, None)

    def tick(self) -> None:
        """Nothing streams live in a text view."""

    def show_error(self, error: BaseException, trace: str | None = None) -> None:
        text = redact_secrets(trace or f"{type(error).__name__}: {error}")
        self._put({"text/plain": text}, {})

    def close(self, stop_reason: str | None = None) -> None:
        if self.finished:
            return
        self.finished = True
        if stop_reason is not None and not self.transcript.done:
            self.transcript.end(stop_reason)
        self._show_head()
        forms = self.transcript.serving.folded_forms() if self.transcript.serving else None
        if forms is not None:  # a long serving's earlier calls, counted in one line
            html, markdown, plain = forms
            bundle = {"text/html": html, "text/markdown": markdown, "text/plain": plain}
            self._put(no_math(bundle), {})
        self._show_ready(everything=True)
        tail = tail_outputs(self.transcript)
        record = self.transcript.to_metadata()
        if self.provenance is not None:  # with the digest of all the run shows, the tail too
            from ...course.shown import shown_digests, with_shown

            shown = shown_digests([*self._written, *(d for d, _ in tail)], record.get("text"))
            record["provenance"] = with_shown(self.provenance, shown)
        *before, (last, meta) = tail
        for data, metadata in before:
            self._put(data, metadata)
        self.display(last, {**meta, "nbagent": record})
