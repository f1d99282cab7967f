"""A run's place in its cell: live widgets while it runs, ordinary outputs once it ended.

The live view is one display output holding the widgets (and a text note for viewers without
widgets). When the run ends, that output is replaced by the run's static form
(:mod:`.static`): sanitized HTML, Markdown, plain text and real images, which need no kernel and
no saved widget state. Then the widgets are closed: a saved notebook never holds a reference to
a widget model, so it never reopens as "model not found".

A cell that awaits its run can add outputs, so images become real image outputs after the HTML
part they belong to. A background run can only update the output it started with (anything else
it displays could land in another cell), so there the images are embedded in that one output.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Protocol

from ..saved.static import run_outputs
from ..shown.render import md_text

if TYPE_CHECKING:
    from ...events import AgentEvent

__all__ = ["View", "flush_iopub", "note", "refresh", "run_ended", "show_live"]

_WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
_lock = threading.Lock()


class View(Protocol):
    """What the runner needs of a view (widgets or text)."""

    finished: bool

    def handle(self, event: AgentEvent) -> None: ...
    def tick(self) -> None: ...
    def show_error(self, error: BaseException, trace: str | None = None) -> None: ...
    def close(self, stop_reason: str | None = None) -> None: ...


def _display(data: dict[str, Any], metadata: dict[str, Any], display_id: str | None) -> None:
    from IPython.display import display

    kwargs: dict[str, Any] = {"raw": True, "metadata": metadata}
    if display_id is not None:
        kwargs["display_id"] = display_id
    display(data, **kwargs)  # type: ignore[no-untyped-call]


def _update(data: dict[str, Any], metadata: dict[str, Any], display_id: str) -> None:
    from IPython.display import update_display

    update_display(data, raw=True, metadata=metadata, display_id=display_id)  # type: ignore[no-untyped-call]


def note(text: str) -> None:
    """A one-line note in the cell (Markdown and plain text)."""
    _display({"text/markdown": f"*{md_text(text)}*", "text/plain": text}, {}, None)


def show_live(view: View, display_id: str) -> None:
    """Display the run's widgets, with a text note for viewers without widgets."""
    widget = getattr(view, "widget", None)
    transcript = getattr(view, "transcript", None)
    prompt = transcript.prompt if transcript is not None else ""
    # what a notebook saved mid-run shows where the widget cannot: true after a kernel died too
    words = (
        "(a live nbagent run: it needs Jupyter widgets, and becomes text when it ends; if its "
        "kernel stopped before that, the run ended with it and none of its calls waits)"
    )
    data: dict[str, Any] = {
        "text/plain": f"nbagent run: {prompt}\n{words}",
        "text/markdown": f"*{words}*",
    }
    if widget is not None:
        data[_WIDGET_MIME] = {"version_major": 2, "version_minor": 0, "model_id": widget.model_id}
        presence = getattr(view, "presence", None)
        if presence is not None:  # finds the cell by it (the record goes to its metadata)
            presence.view_id = widget.model_id
    view.display_ids = [display_id]  # type: ignore[attr-defined]
    _display(data, {}, display_id)


def _record(view: View, transcript: Any) -> dict[str, Any]:
    """The run's record for its output's metadata, with its course provenance (set on the
    view as ``provenance`` when the run ended) under ``"provenance"``."""
    record = transcript.to_metadata()
    provenance = getattr(view, "provenance", None)
    if provenance is not None:
        record["provenance"] = provenance
    return dict(record)


def final_outputs(
    view: View, transcript: Any, bundles: list[tuple[dict[str, Any], dict[str, Any]]]
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """A finished run's outputs as they are written: the first carries the run's record,
    each other one the mark that it is the run's, and the provenance keeps the digest of what
    they all show (:mod:`nbagent.course.shown`: the class report checks a cell by it)."""
    from ...course.shown import marked, shown_digests, with_shown

    record = _record(view, transcript)
    run_id = transcript.run_id
    out = [
        (data, marked(meta, run_id) if index and run_id else dict(meta))
        for index, (data, meta) in enumerate(bundles)
    ]
    provenance = record.get("provenance")
    if provenance is not None:
        digests = shown_digests([data for data, _ in out], record.get("text"))
        record["provenance"] = with_shown(provenance, digests)
    out[0] = (out[0][0], {**out[0][1], "nbagent": record})
    return out


def run_ended(view: View, *, static_segments: bool) -> None:
    """Replace a live view by the run's static outputs and close its widgets.

    ``static_segments``: the cell is still running, so images may become outputs of their own
    (else they are embedded in the one output the run started with).
    """
    ids: list[str] = list(getattr(view, "display_ids", ()) or ())
    transcript = getattr(view, "transcript", None)
    if not ids or transcript is None:
        return
    bundles = final_outputs(
        view, transcript, run_outputs(transcript, inline_images=not static_segments)
    )
    with _lock:
        first = ids[0]
        data, metadata = bundles[0]
        _update(data, metadata, first)
        new_ids = [first]
        for index, (data, metadata) in enumerate(bundles[1:], start=1):
            display_id = f"{first}-{index}"
            _display(data, metadata, display_id)
            new_ids.append(display_id)
        view.display_ids = new_ids  # type: ignore[attr-defined]
    ended_as = getattr(view, "ended_as", None)
    if callable(ended_as):  # a live view a reloaded page may still show (see .savedform)
        ended_as(*bundles[0])
    dispose = getattr(view, "dispose", None)
    if callable(dispose):
        dispose()


def refresh(view: View) -> None:
    """Redraw a finished run's static outputs in place (e.g. an abandoned tool ended late)."""
    ids: list[str] = list(getattr(view, "display_ids", ()) or ())
    transcript = getattr(view, "transcript", None)
    if not ids or transcript is None:
        return
    bundles = final_outputs(view, transcript, run_outputs(transcript, inline_images=len(ids) == 1))
    if len(bundles) != len(ids):
        return  # the layout changed: leave the outputs as they are rather than mix them up
    with _lock:
        for (data, metadata), display_id in zip(bundles, ids, strict=True):
            _update(data, metadata, display_id)


def flush_iopub(shell: Any, timeout: float = 2.0) -> None:
    """Wait (bounded) until the kernel's IOPub thread has sent what was published so far: the
    finished outputs of a shutdown were only queued, and a kernel that exits next may drop them."""
    thread = getattr(
        getattr(getattr(shell, "kernel", None), "iopub_thread", None), "schedule", None
    )
    if thread is None:
        return
    sent = threading.Event()
    try:
        thread(sent.set)
    except Exception:  # the thread is closing: nothing more can be sent
        return
    sent.wait(timeout)
