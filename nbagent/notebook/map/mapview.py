"""The progress of ``agent.map`` / ``%agent map`` in a cell: live while it runs, plain output after.

While the batch runs: a bar, the counts (done / failed / running), tokens, rate and ETA, and a
Stop button, redrawn only when the batch reports (at most every ``interval``, 0.25 s by default:
one small HTML update, never one message per run). When it ends, the live output is replaced by
the same summary as sanitized HTML, Markdown and plain text, with the first failed rows and why,
and the widgets are closed: a saved notebook shows the final progress and holds no widget.
Without widgets (nbclient, CI) only that final summary is shown.
"""

from __future__ import annotations

import html
import threading
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...batch import BatchProgress
from ...redact import redact_secrets
from ..shown.render import STATUS_COLORS, close_widgets, md_text, no_math, shorten

if TYPE_CHECKING:
    from ...batch import Batch

__all__ = ["MapView", "progress_bundle"]

#: Failed rows listed under a finished batch (the table has them all).
SHOWN_FAILURES = 5
_WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def _bar(progress: BatchProgress) -> str:
    total = max(progress.total, 1)
    parts = [
        (progress.done + progress.resumed, STATUS_COLORS["done"]),
        (progress.failed, STATUS_COLORS["error"]),
        (progress.running, STATUS_COLORS["running"]),
        (progress.cancelled + progress.not_run, STATUS_COLORS["cancelled"]),
    ]
    cells = "".join(
        f'<div style="width:{100 * count / total:.2f}%;background:{color};height:100%"></div>'
        for count, color in parts
        if count
    )
    return (
        '<div style="display:flex;width:100%;max-width:40em;height:0.6em;background:#e0e0e0;'
        f'border-radius:0.3em;overflow:hidden;margin:0.3em 0">{cells}</div>'
    )


def _state(progress: BatchProgress) -> str:
    if not progress.final:
        return "stopping…" if progress.stopping else "running"
    if progress.cancelled or progress.not_run:
        return "stopped"
    return "finished"


def progress_bundle(
    progress: BatchProgress, title: str, failures: list[tuple[str, str]] | None = None
) -> dict[str, str]:
    """The batch's progress as text/html, text/markdown and text/plain (everything escaped)."""
    failures = failures or []
    state = _state(progress)
    summary = progress.summary()
    head = f"nbagent map ({state}): {title}"
    lines = [head, summary]
    rows = []
    md_rows = []
    for label, error in failures[:SHOWN_FAILURES]:
        error = shorten(redact_secrets(error), 300)
        lines.append(f"  failed {label}: {error}")
        rows.append(f"<li><code>{html.escape(label)}</code>: {html.escape(error)}</li>")
        md_rows.append(f"- `{label.replace('`', '')}`: {_md_escape(error)}")
    more = len(failures) - SHOWN_FAILURES
    if more > 0:
        lines.append(f"  … and {more} more failed row(s): see the table's error column")
        rows.append(f"<li>… and {more} more: see the table's <code>error</code> column</li>")
        md_rows.append(f"- … and {more} more: see the table's `error` column")
    failed_html = f'<ul style="margin:0.2em 0;opacity:0.85">{"".join(rows)}</ul>' if rows else ""
    color = STATUS_COLORS["running"] if not progress.final else STATUS_COLORS["done"]
    if progress.final and (progress.failed or progress.cancelled or progress.not_run):
        color = STATUS_COLORS["cancelled"] if state == "stopped" else STATUS_COLORS["error"]
    body = (
        '<div class="nbagent-map" style="font-size:0.95em">'
        f'<div><b>nbagent map</b> · <span style="color:{color}">{html.escape(state)}</span>'
        f" · {html.escape(title)}</div>"
        f"{_bar(progress)}"
        f'<div style="opacity:0.85">{html.escape(summary)}</div>'
        f"{failed_html}</div>"
    )
    markdown = "\n".join(
        [f"**nbagent map** ({state}): {_md_escape(title)}", "", _md_escape(summary)]
        + (["", *md_rows] if md_rows else [])
    )
    return no_math({"text/html": body, "text/markdown": markdown, "text/plain": "\n".join(lines)})


def _md_escape(text: str) -> str:
    return md_text(text.replace("\n", " "))


def _failures(batch: Batch | None) -> list[tuple[str, str]]:
    if batch is None:
        return []
    found = []
    for item, row in zip(batch.items, batch.rows, strict=True):
        if row is not None and row.status == "failed":
            found.append((str(item.label), row.error or "failed"))
    return found


class MapView:
    """A batch's progress in the current cell; give it to the batch as its reporter.

    ``widgets``: show a live view (else only the final summary); ``stoppable``: with a Stop
    button (a kernel that cannot deliver clicks to a waiting cell gets a note saying to use
    Kernel > Interrupt instead). The batch binds itself with :meth:`bind` (Stop cancels it; the
    final summary lists its failed rows)."""

    def __init__(self, title: str = "", *, widgets: bool = True, stoppable: bool = True) -> None:
        self.title = " ".join(redact_secrets(title).split())  # the template: a key stays out
        self.batch: Batch | None = None
        self.display_id = f"nbagent-map-{uuid.uuid4().hex}"
        self.finished = False
        #: Gives the batch's provenance record when it ended (``%agent map`` sets it), for
        #: the final output's metadata: the record is made before that output is written.
        self.record: Callable[[BatchProgress], dict[str, Any] | None] | None = None
        self._lock = threading.Lock()
        self._shown = False
        self._html: Any = None
        self._stop: Any = None
        self._box: Any = None
        if widgets:
            import ipywidgets

            self._html = ipywidgets.HTML(
                self._live_html(BatchProgress(total=0)),
                layout=ipywidgets.Layout(width="100%"),
            )
            if stoppable:
                self._stop = ipywidgets.Button(
                    description="Stop", icon="stop", tooltip="Cancel the runs not finished yet"
                )
                self._stop.on_click(self._on_stop)
            else:
                self._stop = ipywidgets.HTML(
                    '<span style="opacity:0.7">Kernel &gt; Interrupt stops the batch (finished '
                    "rows are kept)</span>"
                )
            self._box = ipywidgets.VBox([self._html, self._stop])
            self._box.add_class("nbagent-map")

    def bind(self, batch: Batch) -> None:
        self.batch = batch

    def _live_html(self, progress: BatchProgress) -> str:
        return progress_bundle(progress, self.title)["text/html"]

    def _on_stop(self, _button: Any) -> None:
        if self.batch is None or self.finished or not hasattr(self._stop, "on_click"):
            return
        self._stop.disabled = True
        self._stop.description = "Stopping…"
        self.batch.cancel()

    def discard(self) -> None:
        """Close the widgets of a view that will never be shown (the batch could not start)."""
        self.finished = True
        self._close()

    def _close(self) -> None:
        """Close every widget of the view, with its layout and style (each is a comm)."""
        close_widgets(w for w in (self._box, self._html, self._stop) if w is not None)

    def show(self) -> None:
        """Display the live view (widgets) in the current cell."""
        if self._box is None or self._shown:
            return
        from IPython.display import display

        data = {
            "text/plain": f"nbagent map: {self.title}\n(live progress: it needs Jupyter widgets)",
            _WIDGET_MIME: {"version_major": 2, "version_minor": 0, "model_id": self._box.model_id},
        }
        display(data, raw=True, display_id=self.display_id)  # type: ignore[no-untyped-call]
        self._shown = True

    def __call__(self, progress: BatchProgress) -> None:
        if progress.final:
            self.finish(progress)
            return
        if self._html is not None:
            if not self._shown:
                self.show()
            self._html.value = self._live_html(progress)

    def finish(self, progress: BatchProgress) -> None:
        """Replace the live view by the final summary, as plain outputs; close the widgets."""
        with self._lock:
            if self.finished:
                return
            self.finished = True
        from IPython.display import display, update_display

        bundle = progress_bundle(progress, self.title, _failures(self.batch))
        record: dict[str, Any] = {"map": {"total": progress.total, "done": progress.done}}
        if self.record is not None:
            try:
                provenance = self.record(progress)
            except Exception as exc:  # the record must never cost the batch its output
                import logging

                logging.getLogger("nbagent").warning(
                    "no provenance record for the map: %s", redact_secrets(str(exc))
                )
                provenance = None
            if provenance is not None:  # with the digest of what the output shows
                from ...course.shown import shown_digests, with_shown

                record["provenance"] = with_shown(provenance, shown_digests([bundle], None))
        metadata = {"nbagent": record}
        if self._shown:
            update_display(bundle, raw=True, metadata=metadata, display_id=self.display_id)  # type: ignore[no-untyped-call]
        else:
            display(bundle, raw=True, metadata=metadata, display_id=self.display_id)  # type: ignore[no-untyped-call]
        self._close()
