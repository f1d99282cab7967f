"""RunView: one run as live widgets — text, tool cards, approvals, Stop, and a footer.

Text and argument deltas are buffered and sent together at a bounded rate (:attr:`interval`),
each stream sending only its new text, so the traffic to the browser stays linear in the text's
length however fast the model streams. Everything else (a new card, a decision, a result) is
sent when it happens, after the buffered text, so the order on screen is the order of events.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from ..._ground.formatting import error_text, traceback_text
from ...approvals.approval import Decision, InteractiveApprover
from ...events import (
    AgentEvent,
    ApprovalRequested,
    ApprovalResolved,
    AssistantTextDelta,
    HelperEvent,
    ReasoningTextDelta,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunStarted,
    StepFinished,
    StepPaused,
    StepResumed,
    StepRetried,
    StepStarted,
    ToolArgumentsChanged,
    ToolArgumentsDelta,
    ToolCallReady,
    ToolCallRepeated,
    ToolCallStarted,
    ToolFinished,
    ToolHookApplied,
    ToolPreviewed,
    ToolProgress,
    ToolStarted,
)
from ...inspection.stepping import Resume
from ...output import ANSWER_TOOL
from ...redact import redact_secrets
from ..shown.render import close_widgets
from ..shown.transcript import Transcript
from ..shown.wording import PAUSE_MARK, resumed_words
from .answerlive import LiveAnswer
from .card import Shared, ToolCard
from .fold import ProposalFold
from .nested import NestedRuns
from .presence import Presence
from .proposal import accept_all, show_accept_all
from .stream import PlainStream, TextStream

if TYPE_CHECKING:
    from .pause_bar import PauseBar

__all__ = ["RunView"]


def _running_loop() -> Any:
    import asyncio

    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


#: Seconds between two sends of buffered text (≤ 10 text updates a second per stream).
INTERVAL = 0.1
#: Below this many new characters a send waits (up to :data:`MAX_WAIT`) for more, so that the
#: fixed cost of a message stays small next to the text it carries.
MIN_CHARS = 48
MAX_WAIT = 0.3
#: A run waiting for a person stops once every view of it has been cleared from its cell (the
#: cell ran again) for this long: nobody can click its buttons any more.
UNSEEN_GRACE = 2.0


class RunView:
    """Widgets for one run. Feed it events with :meth:`handle`; call :meth:`tick` regularly."""

    def __init__(
        self,
        prompt: str = "",
        *,
        approver: InteractiveApprover | None = None,
        on_stop: Callable[[], Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
        interval: float = INTERVAL,
    ) -> None:
        self.transcript = Transcript(prompt=prompt, started=clock(), clock=clock)
        self.approver = approver
        self.on_stop = on_stop
        self.clock = clock
        self.interval = interval
        self.cards: dict[str, ToolCard] = {}
        self._streams: list[TextStream | LiveAnswer] = []
        self._text: TextStream | None = None
        self._text_kind = ""
        self._last_send = clock()
        self._last_second = -1
        self.finished = False
        self._stopping = False
        self.display_ids: list[str] = []
        self._notes: list[widgets.Widget] = []
        self._stream_steps: dict[int, int] = {}
        self._shown_first = False
        self._asking: set[str] = set()  # calls waiting for Approve / Deny, and pauses
        self.pauses: dict[str, PauseBar] = {}  # step mode: the pauses waiting, by id
        self._pause_widgets: list[widgets.Widget] = []
        self.presence = Presence(clock)
        #: A typed run's answer filling in (see .answerlive), and how the run answers.
        self.answer: LiveAnswer | None = None
        self._typed = ("", False)
        self._answer_key: tuple[int, str] = (0, "")
        #: Many proposals (the notebook tools): the oldest ended cards fold into a line.
        self.proposals = ProposalFold(self)
        #: Helper agents' runs, each in the card of the call that runs it (see .nested).
        self.nested = NestedRuns(
            lambda prompt: RunView(prompt, approver=approver, clock=clock, interval=interval),
            self.cards.get,
        )

        self.shared = shared = Shared()
        html = {"layout": shared.layout, "style": shared.html_style}
        self.header = widgets.HTML(self._header_html(), **html)
        self.body = widgets.VBox([], layout=shared.layout)
        self.stop = widgets.Button(description="Stop", icon="stop", tooltip="Cancel this run")
        self.stop.on_click(self._on_stop)
        self.footer = widgets.HTML(self._footer_html(), **html)
        self.footer.add_class("nbagent-note")
        self.errors: widgets.Output | None = None
        controls = widgets.HBox([self.stop, self.footer], layout=shared.layout)
        self.widget = widgets.VBox(
            [self.header, self.body, controls, self.presence], layout=shared.layout
        )
        self.widget.add_class("nbagent-run")

    # --- Stop ---------------------------------------------------------------------------------

    def _on_stop(self, _button: Any) -> None:
        if self.finished or self.on_stop is None or self._stopping:
            return
        self._stopping = True
        self.stop.disabled = True
        self.stop.description = "Stopping…"
        self.on_stop()

    # --- rendering helpers ------------------------------------------------------------------

    def _header_html(self) -> str:
        t = self.transcript
        model = f" · <code>{html.escape(t.model)}</code>" if t.model else ""
        prompt = html.escape(redact_secrets(t.prompt)).replace("\n", "<br>")
        return f'<div style="opacity:0.8"><b>You:</b> {prompt}{model}</div>'

    def _footer_html(self) -> str:
        return f'<span style="opacity:0.7">{html.escape(self.transcript.footer())}</span>'

    def set_status(self, words: str) -> None:
        """A note in the footer, e.g. "queued behind run-3"."""
        self.footer.value = f'<span style="opacity:0.7">{html.escape(words)}</span>'

    def _append_block(self, widget: widgets.Widget) -> None:
        self.body.children = (*self.body.children, widget)

    def _stream_for(self, kind: str, step: int) -> TextStream:
        key = f"{kind}:{step}"
        if self._text is None or self._text_kind != key:
            self._finish_text()
            if kind == "reasoning":
                self._text = PlainStream(format="reasoning", layout=self.shared.layout)
            else:
                self._text = TextStream(format="markdown", layout=self.shared.layout)
            self._text_kind = key
            self._stream_steps[id(self._text)] = step
            self._streams.append(self._text)
            self._append_block(self._text)
        return self._text

    def _finish_text(self) -> None:
        if self._text is not None:
            self._text.finish()
            self._text = None
            self._text_kind = ""

    # --- sending at a bounded rate -----------------------------------------------------------

    def _pending(self) -> int:
        return sum(s.pending_chars for s in self._streams)

    def flush(self) -> int:
        """Send every buffered delta now; returns how many messages went out."""
        sent = sum(1 for s in self._streams if s.pending_chars and s.flush())
        self._last_send = self.clock()
        return sent

    def _maybe_flush(self) -> None:
        waited = self.clock() - self._last_send
        if self._first_words():
            self.flush()  # a person waits for the first words: they go at once
            return
        if waited < self.interval:
            return
        pending = self._pending()
        if pending >= MIN_CHARS or (pending and waited >= MAX_WAIT):
            self.flush()

    def _first_words(self) -> bool:
        """Nothing of the answer has been shown yet and some has arrived."""
        if self._shown_first:
            return False
        if any(s.pending_chars for s in self._streams):
            self._shown_first = True
            return True
        return False

    def tick(self) -> None:
        """Call every :attr:`interval` seconds: sends stalled text, refreshes clocks each second."""
        self._maybe_flush()
        self.nested.tick()
        if self._asking and self.presence.unseen_for() >= UNSEEN_GRACE:
            self._asking.clear()
            self.presence.waiting = False
            self._on_stop(None)  # its buttons were cleared from the page: nobody can answer
        second = int(self.clock() * 2)  # clocks tick every half second
        if second != self._last_second and not self.finished:
            self._last_second = second
            now = time.monotonic()
            for card in self.cards.values():
                if card.record.open and card.record.started is not None:
                    card.refresh(now)
            self.footer.value = self._footer_html()

    # --- events -------------------------------------------------------------------------------

    def handle(self, event: AgentEvent) -> None:
        """Show one event (deltas are buffered; everything else is shown at once)."""
        self.transcript.handle(event)
        if isinstance(event, HelperEvent):
            self.nested.handle(event)
            return
        if isinstance(event, AssistantTextDelta):
            typed = self._typed[0] == "native"
            stream = self._live(event.step) if typed else self._stream_for("text", event.step)
            stream.append(event.text)
            self._maybe_flush()
            return
        if isinstance(event, ToolArgumentsDelta):
            card = self.cards.get(event.call_id)
            if card is not None:
                card.feed_arguments(event.delta)
                if self._typed[0] == "tool" and event.name == ANSWER_TOOL:
                    self._live(self.transcript.steps, event.call_id).append(event.delta)
                self._maybe_flush()
            return
        if isinstance(event, ReasoningTextDelta):
            self._stream_for("reasoning", event.step).append(event.text)
            self._maybe_flush()
            return
        self.flush()
        if isinstance(event, ToolCallStarted):
            self._finish_text()
            self._card(event.call_id)
        elif isinstance(event, ToolCallReady):
            self._finish_text()
            card = self._card(event.call.id)
            card.arguments_ready()
            card.refresh()
        elif isinstance(event, ApprovalRequested):
            self._asking.add(event.request.call.id)
            self.presence.waiting = True
            card = self._card(event.request.call.id)
            approver = self.approver
            if approver is not None:
                request = event.request

                def decide(decision: Decision) -> bool:
                    return approver.resolve(
                        request.call.id, decision, fingerprint=request.fingerprint
                    )

                card.ask(request, decide, accept_all(lambda: self.cards.values()))
                show_accept_all(self.cards.values())
            card.refresh()
        elif isinstance(event, ApprovalResolved):
            self._asking.discard(event.call_id)
            self.presence.waiting = bool(self._asking)
            card = self._card(event.call_id)
            card.close_approval(hide=True)
            card.refresh()
            show_accept_all(self.cards.values())
        elif isinstance(event, (ToolArgumentsChanged, ToolHookApplied)):
            card = self._card(event.call_id)
            card.show_notes()
            card.refresh()
        elif isinstance(event, ToolCallRepeated):
            self._fold(event)
        elif isinstance(event, ToolPreviewed):
            self._card(event.call_id).show_preview()
        elif isinstance(event, ToolStarted):
            self._card(event.call.id).refresh()
        elif isinstance(event, ToolProgress):
            card = self._card(event.call_id)
            card.show_progress(event.update)
        elif isinstance(event, ToolFinished):
            card = self._card(event.call.id)
            card.finished(card.record.result or event.result, event.traceback)
            card.refresh()
            abandoned = getattr(event, "abandoned", None)
            if abandoned is not None:
                self._watch_abandoned(event.call.id, abandoned)
            self.proposals.after()
        elif isinstance(event, StepPaused):
            self._paused(event)
        elif isinstance(event, StepResumed):
            bar = self.pauses.pop(event.pause_id, None)
            self._asking.discard(event.pause_id)
            self.presence.waiting = bool(self._asking)
            if bar is not None:
                bar.close(resumed_words(event, bar.pause))
        elif isinstance(event, StepRetried):
            self._drop_step(event.step)
        elif isinstance(event, RunStarted):
            self._typed = (event.answer_mode, event.answer_wrapped)
            self.header.value = self._header_html()
        elif isinstance(event, StepFinished):
            self._finish_text()
            self.footer.value = self._footer_html()
        elif isinstance(event, StepStarted):
            self.footer.value = self._footer_html()
        elif isinstance(event, (RunFinished, RunFailed, RunCancelled)):
            if isinstance(event, RunFailed):
                self.show_error(event.error)
            self._answered(event)
            self.close()

    def _live(self, step: int, call_id: str = "") -> LiveAnswer:
        """The typed answer's block: a new try (another step, another answer call) starts it
        again, at the end."""
        live = self.answer
        if live is None or live not in self._streams:
            live = self.answer = LiveAnswer(self._typed[1], layout=self.shared.layout)
            self._streams.append(live)
        elif self._answer_key == (step, call_id) and live in self.body.children:
            return live
        else:
            live.restart()
            self.body.children = tuple(w for w in self.body.children if w is not live)
        self._finish_text()
        self._stream_steps[id(live)] = step
        self._answer_key = (step, call_id)
        self._append_block(live)
        return live

    def _answered(self, event: RunFinished | RunFailed | RunCancelled) -> None:
        """The validated value replaces what streamed; without one, the card says so."""
        if not self._typed[0]:
            return
        result = getattr(event, "result", None)
        if result is not None and result.has_output:  # the value may be None itself
            from ..shown.values import answer_json

            self._live(-1).validated(answer_json(result.output))
        elif self.answer is not None:
            self.answer.unvalidated("The run ended before the answer was validated.")

    def _paused(self, event: StepPaused) -> None:
        """Step mode: a bar with Next, Run to end and Stop (and edits before a request); a
        repeat: Go on, Allow repeats, Stop."""
        from .pause_bar import PauseBar

        self._finish_text()
        approver = self.approver
        pause = event.pause

        def answer(resume: Resume) -> bool:
            return approver.resume(pause.id, resume) if approver is not None else False

        bar = PauseBar(pause, answer)
        self.pauses[pause.id] = bar
        self._pause_widgets += bar.all_widgets()
        self._asking.add(pause.id)
        self.presence.waiting = True
        self._append_block(bar.widget)

    def _fold(self, event: ToolCallRepeated) -> None:
        """A repeat leaves the page (its card is kept, to be closed with the rest) and the
        card of the call it repeats says how many times it came."""
        again, first = self.cards.get(event.call_id), self.cards.get(event.first_call_id)
        if again is None or first is None or again is first:
            return
        self.body.children = tuple(w for w in self.body.children if w is not again.widget)
        first.refresh()

    def _drop_step(self, step: int) -> None:
        """A retried step: remove what it streamed (the transcript already did) and say why."""
        self._finish_text()
        keep_calls = set(self.transcript.calls)
        gone = {cid: card for cid, card in self.cards.items() if cid not in keep_calls}
        gone_widgets = {id(card.widget) for card in gone.values()}
        stale = {id(s) for s in self._streams if self._stream_steps.get(id(s)) == step}
        self.body.children = tuple(
            w for w in self.body.children if id(w) not in gone_widgets and id(w) not in stale
        )
        for card in gone.values():
            stale.add(id(card.arguments))
        for cid in gone:
            del self.cards[cid]
        self._streams = [s for s in self._streams if id(s) not in stale]
        note_text = self.transcript.blocks[-1]
        note = widgets.HTML(
            f'<i style="opacity:0.7">{html.escape(getattr(note_text, "text", ""))}</i>',
            layout=self.shared.layout,
            style=self.shared.html_style,
        )
        self._notes.append(note)
        self._append_block(note)

    def _watch_abandoned(self, call_id: str, handle: Any) -> None:
        """A stopped call whose function could not be stopped: say when it really ends."""
        record = self.transcript.calls.get(call_id)
        if record is None:
            return
        stopped = self.clock()
        loop = _running_loop()

        def ended(*_args: Any) -> None:
            record.ended_late = max(0.0, self.clock() - stopped)
            if loop is not None and not loop.is_closed():
                loop.call_soon_threadsafe(self._redraw_late, call_id)

        try:
            handle.add_done_callback(ended)
        except Exception:  # a handle we do not understand: the card keeps "still running"
            return

    def _redraw_late(self, call_id: str) -> None:
        if not self.finished:
            card = self.cards.get(call_id)
            if card is not None:
                card.refresh()
            return
        from .outputs import refresh

        refresh(self)

    def _card(self, call_id: str) -> ToolCard:
        card = self.cards.get(call_id)
        if card is None:
            record = self.transcript.calls[call_id]
            card = ToolCard(record, self.shared)
            self.cards[call_id] = card
            self._streams.append(card.arguments)
            self._append_block(card.widget)
        return card

    # --- the end --------------------------------------------------------------------------------

    def dispose(self) -> None:
        """Close every widget of the view (the run's static outputs replaced it)."""
        made: list[widgets.Widget] = [
            self.widget,
            self.header,
            self.body,
            self.stop,
            self.footer,
            *self.widget.children,
            *self._streams,
            *self._notes,
        ]
        if self.errors is not None:
            made.append(self.errors)
        made += self._pause_widgets
        for card in self.cards.values():
            made += card.all_widgets()
        close_widgets(made)
        self.nested.dispose()
        for shared in (self.shared.layout, self.shared.html_style):
            shared.close()

    def show_error(self, error: BaseException, trace: str | None = None) -> None:
        """Show an exception (a failed run, or a crash of the task driving it); the run's
        saved output says it too (an error before the run began has no event of its own)."""
        if self.transcript.error is None:
            self.transcript.error = redact_secrets(error_text(error))
        if self.errors is None:
            self.errors = widgets.Output(layout=self.shared.layout)
            self.widget.children = (*self.widget.children, self.errors)
        text = redact_secrets(trace or traceback_text(error, only=True))
        self.errors.outputs = (
            *self.errors.outputs,
            {"output_type": "stream", "name": "stderr", "text": text},
        )

    def close(self, stop_reason: str | None = None) -> None:
        """The run is over: send what is left, disable every button, final footer."""
        if self.finished:
            return
        self.finished = True
        self.presence.waiting = False  # its view is about to be replaced: nothing to report
        if stop_reason is not None and not self.transcript.done:
            self.transcript.end(stop_reason)
        self.flush()
        for stream in self._streams:
            if stream.streaming:
                stream.finish()
        for card in self.cards.values():
            card.close_approval(hide=True)  # the card's header says what became of the call
            card.refresh()
        for bar in self.pauses.values():
            bar.close(f"{PAUSE_MARK} the run ended while it was paused")
        self.pauses.clear()
        self.nested.close()
        self.stop.disabled = True
        self.stop.layout.display = "none"
        self.footer.value = self._footer_html()
