"""The serving cell's card (``%agent serve``): what is served, where, to whom, and its calls.

A :class:`ServingView` is a run's view (:class:`.view.RunView`: the same cards, approvals and
Stop) with a header and a footer of its own, since a serving session has no prompt and no model:
the header says what is served and at which URL (never the token) and which clients use it (the
names they gave in ``initialize``); the footer counts the served calls and how they went. Under
the cards, the request view lists each call as the client asked it and what went back
(:mod:`.servedrequests`, whose :class:`~.servedrequests.ServingForms` gives the same header,
footer and request view to the cell's finished output), so a saved notebook reads the same.

A serving outlives saves and page reloads: its :class:`~.savedform.SavedForm` holds the form
the notebook is saved as meanwhile (the same static output, saying it was saved while it
served, with the record so far), and at the end the final output, which a page reloaded since
then shows too. The saved form follows the events, sent at most at :data:`RATE` characters a
second (a small one at once, a long session's 300 KB about every two seconds), so that a save
holds what the page shows, or in a busy session what it showed a moment before.
"""

from __future__ import annotations

import html
import logging
import time
from typing import Any

from ...events import AgentEvent, ApprovalResolved, ToolCallReady, ToolFinished
from ..live.savedform import SavedForm
from ..live.view import RunView
from ..saved.static import run_outputs
from ..shown.render import close_widgets
from .servedrequests import KEEP_FOLDED, LIVE, TITLE, ServingForms, number, request_html

__all__ = ["RATE", "ServingView"]

#: Characters a second of saved form at most (see the module).
RATE = 128 * 1024
#: Seconds after which the saved form is made again even if no call came (its times).
_SAVED_AT_LEAST = 60.0

log = logging.getLogger("nbagent")


class ServingView(RunView):
    """The serving cell's live card (see the module docs)."""

    def __init__(self, forms: ServingForms, **options: Any) -> None:
        self.forms = forms  # before RunView's: its header reads it
        super().__init__("tool calls from an MCP client", **options)
        self.transcript.serving = forms
        if self.transcript.timing is not None:  # its timeline: the latest calls' bars
            self.transcript.timing.keep = KEEP_FOLDED
        self.footer.value = self._footer_html()
        self._items: dict[str, Any] = {}
        self._dropped = 0
        import ipywidgets as widgets

        self._earlier = widgets.HTML("", layout=self.shared.layout)
        self.requests_box = widgets.VBox([self._earlier], layout=self.shared.layout)
        self.requests = widgets.Accordion(
            children=[self.requests_box], titles=(self._title(),), selected_index=None
        )
        self.requests.add_class("nbagent-served-requests")
        children = list(self.widget.children)
        children.insert(2, self.requests)
        self.widget.children = tuple(children)
        #: The line that stands for the folded calls, first in the body once there are some.
        self._folded = widgets.HTML("", layout=self.shared.layout)
        self._under: dict[str, list[Any]] = {}  # widgets shown under a call's card (Undo)
        #: What a notebook saved while it serves holds in place of this view (see the module).
        self.saved_form = SavedForm()
        self.saved_form.view_id = self.widget.model_id
        self.widget.children = (*self.widget.children, self.saved_form)
        self._saved_changed = True
        self._saved_at = float("-inf")

    def _header_html(self) -> str:
        self._header_text = self.forms.header()
        return self.forms.head_forms()[0]

    def _title(self) -> str:
        count = len(self._items) + self._dropped
        return f"{TITLE} ({count:,} call{'s' if count != 1 else ''})"

    def handle(self, event: AgentEvent) -> None:
        super().handle(event)
        self._saved_changed = True
        if isinstance(event, ToolCallReady):
            self._add(event.call.id)
        elif isinstance(event, ApprovalResolved):
            self._redraw(event.call_id)
        elif isinstance(event, ToolFinished):
            self._redraw(event.call.id)
        self.keep_saved()

    def _add(self, call_id: str) -> None:
        import ipywidgets as widgets

        if call_id in self._items:
            return
        item = widgets.HTML("", layout=self.shared.layout)
        self._items[call_id] = item
        while len(self._items) > LIVE:  # bounded: the oldest leave the live view
            oldest = next(iter(self._items))
            close_widgets([self._items.pop(oldest)], spare=self._spare())
            self._dropped += 1
        if self._dropped:
            self._earlier.value = (
                f'<div style="font-size:0.85em;opacity:0.7">the {self._dropped:,} earlier '
                "calls: in <code>%agent report</code> (and in this cell once it stops)</div>"
            )
        self.requests_box.children = (self._earlier, *self._items.values())
        self.requests.titles = (self._title(),)
        self._redraw(call_id)

    def add_under(self, call_id: str, block: Any, made: list[Any]) -> None:
        """Show ``block`` under the card of ``call_id``; ``made`` (its widgets) close when that
        card is folded or the view ends."""
        self._append_block(block)
        self._under.setdefault(call_id, []).extend(made)

    def fold(self) -> None:
        """Keep the cards of the latest calls (:attr:`.ServingForms.keep`, and every call
        still waiting): older ones leave the cell, their widgets closed, and one line at the
        top of the body counts them by outcome."""
        gone = self.forms.fold(self.transcript)
        if not gone:
            return
        closing: list[Any] = []
        leaving: set[int] = set()
        for call_id in gone:
            card = self.cards.pop(call_id, None)
            if card is not None:
                closing += card.all_widgets()
                leaving.add(id(card.widget))
                self._streams = [s for s in self._streams if s is not card.arguments]
            under = self._under.pop(call_id, [])
            closing += under
            leaving.update(id(w) for w in under)
        self._notes = [w for w in self._notes if id(w) not in leaving]
        kept = [w for w in self.body.children if id(w) not in leaving and w is not self._folded]
        forms = self.forms.folded_forms()
        if forms is not None:
            self._folded.value = forms[0]
        self.body.children = (self._folded, *kept)
        close_widgets(closing, spare=self._spare())

    def _spare(self) -> tuple[Any, ...]:
        """The layout and style the view's other widgets still share (closed at its end)."""
        return (self.shared.layout, self.shared.html_style)

    def _redraw(self, call_id: str) -> None:
        item = self._items.get(call_id)
        record = self.forms.record(call_id)
        if item is None or record is None:
            return
        card = self.forms.cards(self.transcript).get(call_id)
        item.value = request_html(number(record, len(self._items)), record, card)

    def refresh_header(self) -> None:
        """Redraw the header if what it says changed (a client named itself, a tool came)."""
        if self.forms.header() != self._header_text:
            self.header.value = self._header_html()
            self._saved_changed = True

    def tick(self) -> None:
        if not self.finished:  # before the clocks: a save holds what the page shows
            self.refresh_header()
            self.keep_saved()
        super().tick()

    def keep_saved(self, *, now: bool = False) -> None:
        """Bring the form a notebook saved now would hold up to date (``now``: whatever the
        time since the last; else when something changed, at most at :data:`RATE`)."""
        since = self.clock() - self._saved_at
        wait = self.saved_form.size / RATE
        due = (self._saved_changed and since >= wait) or since >= _SAVED_AT_LEAST
        if self.finished or self.forms.served is None or not (now or due):
            return
        self._saved_at = self.clock()
        self._saved_changed = False
        try:
            self.saved_form.keep(*self._saved_now())
        except Exception:  # the saved form must never cost a call its card
            log.exception("nbagent serve: the form a save would hold could not be made")

    def _saved_now(self) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """The card as a notebook saved now holds it: data, metadata (the record so far,
        marked as saved while it served) and a short form for when the data is too large."""
        from ..policy.servedrecord import served_record

        record = {**self.transcript.to_metadata()}
        record["provenance"] = served_record(self.forms.served).to_metadata()
        metadata = self.saved_form.marked({"nbagent": record})
        with self.forms.saving(time.time()):
            data, _ = run_outputs(self.transcript, inline_images=True)[0]
            head, markdown, plain = self.forms.head_forms()
            footer = self.forms.footer(self.transcript)
        said = html.escape(f"{footer} (each call is in the record)")
        short = {
            "text/html": f"<div>{head}<div>{said}</div></div>",
            "text/markdown": f"{markdown}\n\n*{footer}*",
            "text/plain": f"{plain}\n{footer}",
        }
        return data, metadata, short

    def ended_as(self, data: dict[str, Any], metadata: dict[str, Any]) -> None:
        """The cell's output became ``data`` / ``metadata``: a page that still shows the live
        view (one reloaded since serving began) shows that too."""
        self.saved_form.end(data, metadata)

    def close(self, stop_reason: str | None = None) -> None:
        super().close(stop_reason)
        self.header.value = self._header_html()

    def dispose(self) -> None:
        under = [w for made in self._under.values() for w in made]
        items = list(self._items.values())
        own = [self.requests, self.requests_box, self._earlier, self._folded, self.saved_form]
        close_widgets([*own, *under, *items])
        super().dispose()
