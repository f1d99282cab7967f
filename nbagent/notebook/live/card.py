"""ToolCard: one tool call in the run view — name, live arguments, approval, progress, result.

Parts appear only when needed (an approval bar, a progress bar, a traceback), so a plain call
costs a handful of widgets. Every piece of model or tool text is escaped before it reaches an
HTML widget, or shown through :class:`TextStream` / text outputs.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets
from ipywidgets.widgets.widget_string import HTMLStyle

from ...approvals._edits import canonical
from ...approvals.approval import ApprovalRequest, Decision
from ...content import ToolResult, shown_pieces
from ...redact import redact_secrets
from ..saved.static import after_notes, change_notes, preview_label
from ..shown.codefeed import CodeFeed
from ..shown.records import CallRecord
from ..shown.render import STATUS_COLORS, no_math_outputs, pretty_arguments, result_outputs, shorten
from ..shown.wording import call_line
from .approval_bar import ApprovalBar
from .stream import PlainStream

__all__ = ["Shared", "ToolCard"]


class Shared:
    """One Layout and one HTML style for every widget of a view that needs no layout of its own:
    each would otherwise be a widget of its own, sent to the browser when the view opens."""

    def __init__(self) -> None:
        self.layout = widgets.Layout()
        self.html_style = HTMLStyle()


#: Arguments longer than this are not re-sent indented once complete.
PRETTY_LIMIT = 2_000
#: The arguments named in the label of an edit's preview, at most this long.
EDIT_LABEL = 200


class ToolCard:
    """The widgets of one call; the run view feeds it the call's events."""

    def __init__(self, record: CallRecord, shared: Shared | None = None) -> None:
        self.record = record
        self.shared = shared or Shared()
        self.header = widgets.HTML(layout=self.shared.layout, style=self.shared.html_style)
        self.arguments = PlainStream(
            format="code", language=_language(record), layout=self.shared.layout
        )
        code = next(iter(record.code_arguments), None)
        #: Decodes a code argument as it streams (None: the arguments are shown as JSON).
        self.code_feed: CodeFeed | None = CodeFeed(code) if code is not None else None
        self.details: widgets.HTML | None = None
        self.approval: ApprovalBar | None = None
        self.progress: widgets.FloatProgress | None = None
        self.progress_text: widgets.Label | None = None
        self.result: widgets.Output | None = None
        self.result_label: widgets.HTML | None = None
        self.traceback: widgets.Accordion | None = None
        self.notes: widgets.HTML | None = None
        self.preview_label: widgets.HTML | None = None
        self.preview: widgets.Output | None = None
        self.model_read: widgets.Accordion | None = None
        self.widget = widgets.VBox(
            [self.header, self.arguments],
            layout=widgets.Layout(
                border="1px solid var(--jp-border-color2, #ddd)",
                padding="2px 8px 6px 8px",
                margin="4px 0",
            ),
        )
        self.widget.add_class("nbagent-card")
        self._header_text = ""
        self._edit_asked: tuple[int, Any] | None = None  # the newest edit preview asked for
        self.refresh()

    def _add(self, child: widgets.Widget) -> None:
        self.widget.children = (*self.widget.children, child)

    def refresh(self, now: float | None = None) -> bool:
        """Redraw the header (decision, status, elapsed); True if it changed."""
        record = self.record
        waiting = record.open and record.approval_asked and record.decision is None
        color = STATUS_COLORS.get("waiting" if waiting else record.status, "#555")
        title = (
            f' <span style="opacity:0.7">{html.escape(record.title)}</span>' if record.title else ""
        )
        text = (
            f"<b>⚙ {html.escape(record.name)}</b>{title} · "
            f'<span style="color:{color}">{html.escape(call_line(record, now))}</span>'
        )
        if text == self._header_text:
            return False
        self._header_text = text
        self.header.value = text
        return True

    def feed_arguments(self, delta: str) -> None:
        """A fragment of the call's arguments: shown as it came, or, for a tool that takes code,
        as the code it adds (the JSON as it came, should the arguments not read as expected)."""
        feed = self.code_feed
        if feed is None:
            self.arguments.append(delta)
            return
        decoded = feed.feed(delta)
        if feed.failed:
            self.code_feed = None
            self.arguments.language = ""
            self.arguments.replace(self.record.arguments)
            return
        self.arguments.append(decoded)

    def arguments_ready(self) -> None:
        """The call is complete: show its arguments as indented JSON (or its code).

        Long arguments that already arrived whole are left as streamed: resending them only to
        indent them would double their traffic.
        """
        raw = self.record.arguments
        code = self.record.code() if self.code_feed is not None else None
        if code is not None:
            _name, _language, text, rest = code
            if self.arguments.text != text:
                self.arguments.replace(text)
            if rest:
                self._show_details(rest)
            self.arguments.finish()
            return
        if self.arguments.language:  # it did not come as the tool's code after all
            self.arguments.language = ""
            self.arguments.replace(raw)
        if self.record.input == {}:
            self.arguments.replace("")  # no arguments: nothing to show
        elif len(raw) <= PRETTY_LIMIT or self.arguments.text != raw:
            self.arguments.replace(pretty_arguments(self.record.input, raw))
        self.arguments.finish()

    def _show_details(self, rest: dict[str, Any]) -> None:
        """The arguments of a code call besides its code, one line each (``purpose: …``)."""
        lines = []
        for key, value in rest.items():
            text = value if isinstance(value, str) else pretty_arguments(value, "")
            lines.append(f"<b>{html.escape(str(key))}:</b> {html.escape(redact_secrets(text))}")
        self.details = widgets.HTML(
            f'<div style="font-size:0.9em">{"<br>".join(lines)}</div>',
            layout=self.shared.layout,
            style=self.shared.html_style,
        )
        children = list(self.widget.children)
        children.insert(children.index(self.arguments), self.details)
        self.widget.children = tuple(children)

    def ask(
        self,
        request: ApprovalRequest,
        decide: Callable[[Decision], bool],
        accept_all: Callable[[], int] | None = None,
    ) -> ApprovalBar:
        """Show Approve / Deny / Always allow / Edit for this call (and where its preview goes);
        a notebook proposal's bar reads Accept / Reject, with ``accept_all`` (.editing.card)."""
        from .proposal import words_for

        if request.preview:
            self.show_preview()
        words = words_for(self.record.name, self.record.title or "")
        self.approval = ApprovalBar(
            request,
            decide,
            on_edit=self.show_preview if request.preview else None,
            on_preview_edit=self._preview_edit_asked if request.preview else None,
            words=words,
            accept_all=accept_all if words is not None else None,
        )
        self._add(self.approval.widget)
        return self.approval

    def _preview_edit_asked(self, revision: int, arguments: Any) -> None:
        """The person asked to preview their edit: show "computing…" for exactly those."""
        if self._edit_asked is None or revision > self._edit_asked[0]:
            self._edit_asked = (revision, arguments)
        self.show_preview()

    def show_preview(self) -> None:
        """The preview shown: of the person's edit while editing, once they asked for it (the
        newest they asked for, labelled with its arguments), else of the model's arguments;
        "computing…" until it arrives, then rendered like a result."""
        if self.preview_label is None:
            self.preview_label = widgets.HTML(
                layout=self.shared.layout, style=self.shared.html_style
            )
            self.preview = widgets.Output(layout=self.shared.layout)
            self._add(self.preview_label)
            self._add(self.preview)
        assert self.preview is not None
        record = self.record
        editing = self.approval is not None and self.approval.editing()
        if editing and self._edit_asked is not None and record.open:
            text = self._show_edit_preview(*self._edit_asked)
        elif record.preview is None:
            text = "Preview: computing what this call would do… (you can decide meanwhile)"
        else:
            text = preview_label(record)
            if record.open and record.preview_status == "done":
                text = "Preview: what this call would do (nothing has run yet)"
                if editing:
                    text = (
                        "Preview: what the model's arguments would do, not your edit "
                        "(Preview edit shows yours)"
                    )
            self.preview.outputs = no_math_outputs(result_outputs(record.preview))
        self.preview_label.value = (
            f'<span style="font-size:0.85em;opacity:0.7">{html.escape(text)}</span>'
        )

    def _show_edit_preview(self, revision: int, arguments: Any) -> str:
        """Show the preview of edit ``revision`` (or "computing…"); its label."""
        assert self.preview is not None
        shown = shorten(redact_secrets(canonical(arguments)), EDIT_LABEL)
        found = self.record.edit_preview
        if found is None or found.revision != revision:  # not there yet (or an older edit's)
            self.preview.outputs = ()
            return f"Preview of your edit {shown}: computing… (you can decide meanwhile)"
        self.preview.outputs = no_math_outputs(result_outputs(found.result))
        how = {
            "error": "it failed",
            "timeout": "it did not finish in time",
        }.get(found.status, "what the call would do with it (nothing has run yet)")
        return f"Preview of your edit {shown}: {how}"

    def show_notes(self) -> None:
        """What changed the call before it ran (hooks, an edit) and what after-tool hooks did
        to its result, one line each."""
        before = [redact_secrets(line) for line in change_notes(self.record)]
        after = [redact_secrets(line) for line in after_notes(self.record)]
        if not before and not after:
            return
        if self.notes is None:
            self.notes = widgets.HTML(layout=self.shared.layout, style=self.shared.html_style)
            children = list(self.widget.children)
            children.insert(children.index(self.arguments) + 1, self.notes)
            self.widget.children = tuple(children)
        sections = []
        for title, lines in (("Before it ran:", before), ("After it ran:", after)):
            if lines:
                items = "".join(f"<li><code>{html.escape(line)}</code></li>" for line in lines)
                sections.append(
                    f'<span style="opacity:0.7">{title}</span>'
                    f'<ul style="margin:0 0 2px 0">{items}</ul>'
                )
        self.notes.value = f'<div style="font-size:0.85em">{"".join(sections)}</div>'

    def close_approval(self, *, hide: bool = False) -> None:
        if self.approval is not None:
            self.approval.close(hide=hide)

    def all_widgets(self) -> list[widgets.Widget]:
        """Every widget this card made (to close them all when the run becomes static)."""
        made: list[widgets.Widget] = [self.widget, self.header, self.arguments]
        parts = (
            self.details,
            self.progress,
            self.progress_text,
            self.result,
            self.result_label,
            self.notes,
            self.preview_label,
            self.preview,
        )
        for part in parts:
            if part is not None:
                made.append(part)
        if self.model_read is not None:
            made += [self.model_read, *self.model_read.children]
        if self.approval is not None:
            made += self.approval.all_widgets()
        if self.traceback is not None:
            made += [self.traceback, *self.traceback.children]
        return made

    def show_progress(self, update: ToolResult) -> None:
        """A provisional update: a fraction fills the bar; anything else replaces the preview."""
        value: Any = update.value
        # exact types: isinstance() would ask a person's object for its __class__
        if type(value) is float and 0.0 <= value <= 1.0:
            if self.progress is None:
                self.progress = widgets.FloatProgress(min=0.0, max=1.0)
                self._add(self.progress)
            self.progress.value = value
            return
        if type(value) is str or (value is None and not update.images):
            if self.progress_text is None:
                self.progress_text = widgets.Label()
                self._add(self.progress_text)
            self.progress_text.value = redact_secrets(update.text)[:300]
            return
        self.show_result(update)

    def show_result(self, result: ToolResult, *, final: bool = False) -> None:
        """Render a result (or a provisional one) for a person inside the card, labelled."""
        if self.result is None:
            self.result_label = widgets.HTML(
                layout=self.shared.layout, style=self.shared.html_style
            )
            self.result = widgets.Output(layout=self.shared.layout)
            self._add(self.result_label)
            self._add(self.result)
        assert self.result_label is not None
        label = ("Error" if result.is_error else "Result") if final else "Progress"
        if final and shown_pieces(result.value) is not None:
            label = ""  # its pieces carry their own labels (Out, Namespace …)
        self.result_label.value = (
            f'<span style="font-size:0.85em;opacity:0.7">{label}</span>' if label else ""
        )
        self.result.outputs = no_math_outputs(result_outputs(result))

    def finished(self, result: ToolResult, traceback: str | None) -> None:
        """The final result: render it, drop the progress parts, fold away any traceback."""
        if self.progress is not None and self.record.status == "done":
            self.progress.value = 1.0
        self.close_approval(hide=True)
        if self.progress_text is not None:
            self.progress_text.layout.display = "none"
        if self.preview_label is not None and self.record.preview is not None:
            # no longer "nothing has run yet": it says it was shown before the call ran
            said = html.escape(preview_label(self.record))
            self.preview_label.value = f'<span style="font-size:0.85em;opacity:0.7">{said}</span>'
        self.show_result(result, final=True)
        model_result = self.record.model_result
        if model_result is not None:
            out = widgets.Output()
            text = redact_secrets(model_result.text)
            out.outputs = ({"output_type": "stream", "name": "stdout", "text": text},)
            self.model_read = widgets.Accordion(children=[out], selected_index=None)
            self.model_read.set_title(0, "What the model read instead")
            self._add(self.model_read)
        if traceback:
            out = widgets.Output()
            text = redact_secrets(traceback)
            out.outputs = ({"output_type": "stream", "name": "stderr", "text": text},)
            self.traceback = widgets.Accordion(children=[out], selected_index=None)
            self.traceback.set_title(0, "Traceback")
            self._add(self.traceback)


def _language(record: CallRecord) -> str:
    """The language of the call's first code argument ("" for a tool that takes no code)."""
    return next(iter(record.code_arguments.values()), "")
