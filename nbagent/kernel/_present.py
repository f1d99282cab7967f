"""A snippet's outcome in the two forms it is read in: text and images for the model, pieces
(text, tables, code, the namespace diff) for the person.

Tables reach the model as text (``DataFrame.to_string`` as pandas bounds it) and the person as
nbagent's own escaped HTML table; images (figures, displayed images) reach both as images. HTML a
snippet displays is never rendered: the person sees its source as code, the model reads it as
text. Every text is bounded; a marker says how much was left out.
"""

from __future__ import annotations

import base64
import io
import reprlib
import sys
from dataclasses import dataclass, field
from typing import Any, cast

from .._ground.guard import Reader, Unreadable, defines, exact, reading
from ..content import ImagePart, Shown, Table, TextPart, ToolResult, image_part, stable_text
from ..errors import ImageError
from ..redact import redact_secrets
from ._capture import Capture
from ._execute import Ending
from ._namespace import READ_TIMEOUT, NamespaceDiff
from ._objects import is_frame, short_repr, size_text, type_name

__all__ = ["Outcome", "bounded_repr", "take_figures"]


def bounded_repr(value: Any, limit: int, shell: Any = None, reader: Reader | None = None) -> str:
    """The text form of a value, never much longer than ``limit`` even for a huge object, and
    never raising: its ``__repr__`` (or the shell's formatter, as a cell shows it) runs through
    ``reader`` (a reader of its own when None), so what it raised, or that it did not finish,
    becomes the text.

    Builtin containers and strings go through :mod:`reprlib` (bounded by construction: a
    10 GB string is never copied into a repr); other objects through the shell's formatter,
    cut at ``limit``.
    """
    kind = type(value)
    if kind is str or kind is bytes or kind is bytearray:
        text = _shortener(limit).repr(value)  # no user code: the interpreter's own repr
    else:
        try:
            if reader is not None:
                text = reader.call("its repr", _text_form, value, limit, shell)
            else:
                with Reader(READ_TIMEOUT, name="repr") as own:
                    text = own.call("its repr", _text_form, value, limit, shell)
        except Unreadable as exc:
            text = f"<{type_name(value)}: {exc}>"
    text = stable_text(text)
    if len(text) > limit:
        text = f"{text[:limit]}… [{len(text) - limit:,} more characters not shown]"
    return text


def _shortener(limit: int) -> reprlib.Repr:
    shortener = reprlib.Repr()
    shortener.maxlevel = 4
    shortener.maxstring = shortener.maxother = max(40, limit // 4)
    shortener.maxlist = shortener.maxtuple = shortener.maxset = shortener.maxfrozenset = 50
    shortener.maxdict = 30
    shortener.maxlong = 200
    return shortener


_CONTAINERS = frozenset({list, tuple, dict, set, frozenset})


def _text_form(value: Any, limit: int, shell: Any) -> str:
    """On a reader's worker: the value's text as a cell would show it. An exception its
    repr raises propagates (the shell's formatter would print its traceback into the cell:
    on a reader's worker, :func:`~._capture.routed` keeps it for the reader instead)."""
    if exact(value, _CONTAINERS):
        text: str = _shortener(limit).repr(value)
        return text
    formatter = getattr(shell, "display_formatter", None)
    if formatter is not None:
        data, _ = formatter.format(value, include=("text/plain",))
        job = reading()
        if job is not None and job.shown is not None:
            raise job.shown
        found = data.get("text/plain", "") if type(data) is dict else ""
        if type(found) is str and found:
            return found
    text = repr(value)
    return text if type(text) is str else ""


def frame_table(frame: Any, *, max_rows: int = 50, max_cols: int = 30) -> Table:
    """A DataFrame's (or Series') first rows as nbagent's own :class:`Table` of texts, made on
    a reader's worker: every cell's ``str`` is the cell's own code, and the front end then shows
    the table without ever touching the frame (which may change, or hold a hostile cell)."""
    if not hasattr(frame, "columns"):
        frame = frame.to_frame()
    columns = [_cell(c) for c in list(frame.columns)[:max_cols]]
    index = _cell(frame.index.name) if frame.index.name is not None else ""
    rows = [
        (_cell(row[0]), *(_cell(v, number=True) for v in row[1 : max_cols + 1]))
        for row in frame.head(max_rows).itertuples(index=True, name=None)
    ]
    return Table((index, *columns), cast("tuple[tuple[str, ...], ...]", tuple(rows)))


def _cell(value: Any, *, number: bool = False) -> Any:
    kind = type(value)
    if number and (kind is int or kind is float):
        return value  # kept a number: the table aligns numbers right
    text = value if kind is str else str(value)
    text = text if type(text) is str else ""
    return text if len(text) <= 200 else text[:199] + "…"


def take_figures(open_before: set[int], limit: int) -> tuple[list[ImagePart], int]:
    """Pyplot figures the snippet made (or changed) and did not show, as PNG images; each is
    closed, so Jupyter's inline backend does not draw it again under the next cell.

    The PNG carries no "Software" line (the matplotlib version), and the text the model reads
    names no pixel size (a tight bounding box follows font metrics): a replay elsewhere then
    departs only where the picture itself differs."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return [], 0
    from matplotlib._pylab_helpers import Gcf

    images: list[ImagePart] = []
    dropped = 0
    for manager in list(Gcf.get_all_fig_managers()):
        figure = manager.canvas.figure
        if manager.num in open_before and not getattr(figure, "stale", False):
            continue
        try:
            if len(images) < limit:
                buffer = io.BytesIO()
                figure.savefig(
                    buffer, format="png", bbox_inches="tight", metadata={"Software": None}
                )
                images.append(image_part(buffer.getvalue()))
            else:
                dropped += 1
        except (ImageError, Exception):  # a figure that does not draw: it is left out, counted
            dropped += 1
        finally:
            pyplot.close(figure)
    return images, dropped


def open_figures() -> set[int]:
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return set()
    try:
        return set(pyplot.get_fignums())
    except Exception:
        return set()


@dataclass
class Outcome:
    """Everything one snippet produced, gathered on its thread once it ended."""

    model: list[str] = field(default_factory=list)
    images: list[ImagePart] = field(default_factory=list)
    pieces: list[Shown] = field(default_factory=list)
    dropped_images: int = 0

    def add_text(self, model: str, piece: Shown | None = None) -> None:
        if model:
            self.model.append(model)
        if piece is not None:
            self.pieces.append(piece)

    def add_image(self, image: ImagePart, limit: int) -> bool:
        if len(self.images) >= limit:
            self.dropped_images += 1
            return False
        self.images.append(image)
        return True


def gather(
    capture: Capture,
    ending: Ending,
    figures: list[ImagePart],
    dropped_figures: int,
    *,
    max_images: int,
    max_repr: int,
    shell: Any,
    reader: Reader | None = None,
) -> Outcome:
    """Turn what was captured, in the order it came, into the model's and the person's forms
    (the objects' own code, a repr or a figure's savefig, through ``reader``)."""
    out = Outcome()
    display_number = 0
    for item in capture.items:
        if item.kind in ("stdout", "stderr"):
            text = redact_secrets(item.text)
            said = text[:-1] if text.endswith("\n") else text  # the model's lines are joined
            out.add_text(
                said if item.kind == "stdout" else f"[stderr]\n{said}",
                Shown(item.kind, text),  # type: ignore[arg-type]
            )
            continue
        display_number += 1
        _display(
            out,
            item.data,
            item.obj,
            display_number,
            max_images=max_images,
            max_repr=max_repr,
            reader=reader,
        )
    if capture.dropped_chars:
        out.add_text(
            f"[… {capture.dropped_chars:,} more characters of output were not kept: at most "
            f"{capture.max_chars:,} are (KernelLimits.max_output_chars)]",
            Shown("text", f"… {capture.dropped_chars:,} more characters of output not kept"),
        )
    if capture.dropped_displays:
        out.add_text(
            f"[… {capture.dropped_displays:,} more displays were not kept: at most "
            f"{capture.max_displays} are (KernelLimits.max_displays)]",
            Shown("text", f"… {capture.dropped_displays:,} more displays not kept"),
        )
    for number, figure in enumerate(figures, 1):
        if out.add_image(figure, max_images):
            out.add_text(f"[figure {number}: attached as an image]")
    dropped = dropped_figures + out.dropped_images
    if dropped:
        out.add_text(
            f"[… {dropped} more figures or images were not kept: at most {max_images} are "
            "(KernelLimits.max_images)]",
            Shown("text", f"… {dropped} more figures or images not kept"),
        )
    if ending.has_value and ending.value is not None:
        _value(
            out, ending.value, max_images=max_images, max_repr=max_repr, shell=shell, reader=reader
        )
    return out


def _display(
    out: Outcome,
    data: dict[str, Any],
    obj: Any,
    number: int,
    *,
    max_images: int,
    max_repr: int,
    reader: Reader | None,
) -> None:
    label = f"display {number}"
    for mime in ("image/png", "image/jpeg"):
        encoded = data.get(mime)
        if isinstance(encoded, (str, bytes)):
            try:
                raw = base64.b64decode(encoded) if isinstance(encoded, str) else encoded
                image = image_part(raw)
            except (ImageError, ValueError):
                break
            if out.add_image(image, max_images):
                out.add_text(f"[{label}: an image, attached]")
            return
    plain = _cut(_text(data.get("text/plain")), max_repr)
    if obj is not None and is_frame(obj):
        out.add_text(f"[{label}: {short_repr(obj)}]\n{plain}", _table(obj, label, plain, reader))
        return
    markdown = data.get("text/markdown")
    if type(markdown) is str:
        text = _cut(markdown, max_repr)
        out.add_text(f"[{label}]\n{text}", Shown("markdown", text, label))
        return
    html = data.get("text/html")
    if type(html) is str and (not plain or plain.startswith("<IPython.core.display")):
        source = _cut(html, max_repr)
        out.add_text(
            f"[{label}: HTML, as its source]\n{source}",
            Shown("code", source, f"{label}: HTML, shown as its source", "html"),
        )
        return
    out.add_text(f"[{label}]\n{plain}", Shown("text", plain, label))


def _value(
    out: Outcome, value: Any, *, max_images: int, max_repr: int, shell: Any, reader: Reader | None
) -> None:
    if defines(type(value), "savefig"):  # a figure (looked up on its class: no __getattr__)
        try:
            image = _call(reader, "its savefig", _figure_png, value)
            if out.add_image(image, max_images):
                out.add_text("Out: [a figure, attached as an image]")
            return
        except Unreadable:
            pass
    text = redact_secrets(bounded_repr(value, max_repr, shell, reader))
    if is_frame(value):
        out.add_text(f"Out: {short_repr(value)}\n{text}", _table(value, "Out", text, reader))
        return
    out.add_text(f"Out: {text}", Shown("text", text, "Out"))


def _figure_png(figure: Any) -> ImagePart:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", bbox_inches="tight", metadata={"Software": None})
    image = image_part(buffer.getvalue())
    from ..content import _close_pyplot_figure

    _close_pyplot_figure(figure)
    return image


def _table(frame: Any, label: str, text: str, reader: Reader | None) -> Shown:
    """A frame as the card's table, made now (its cells read bounded); its text if it cannot."""
    try:
        table = _call(reader, "its cells", frame_table, frame)
    except Unreadable as exc:
        return Shown("text", f"{text}\n({short_repr(frame)}: {exc})", label)
    rows, _, columns = size_text(frame).partition("×")  # "1000×3", without the frame's code
    total_rows, total_columns = int(rows or 0), int(columns or 1)
    shown_columns = len(table.columns) - 1  # the first is the index
    parts = []
    if len(table.rows) < total_rows:
        parts.append(f"the first {len(table.rows)} of {total_rows:,} rows")
    if shown_columns < total_columns:
        parts.append(f"{shown_columns} of {total_columns:,} columns")
    return Shown("table", table, f"{label}: {', '.join(parts)}" if parts else label)


def _call(reader: Reader | None, what: str, fn: Any, *args: Any) -> Any:
    if reader is not None:
        return reader.call(what, fn, *args)
    with Reader(READ_TIMEOUT, name="present") as own:
        return own.call(what, fn, *args)


def _text(found: Any) -> str:
    """A formatter's text (a str, as IPython checks; anything else is not asked for its str)."""
    return found if type(found) is str else ""


def _cut(text: str, limit: int) -> str:
    text = redact_secrets(text)
    return (
        text if len(text) <= limit else f"{text[:limit]}… [{len(text) - limit:,} more characters]"
    )


def result(
    outcome: Outcome,
    ending: Ending,
    diff: NamespaceDiff,
    *,
    status: str,
    notes: list[str],
    process: list[str] | None = None,
    loaded: list[str] | None = None,
) -> ToolResult:
    """The snippet's ToolResult: what the model reads (text, then images), what the person sees.
    ``process``: what it changed in the process besides the namespace (:mod:`._process`);
    ``loaded``: more of it, for the person only (it depends on the kernel's history)."""
    model = list(outcome.model)
    pieces = list(outcome.pieces)
    if ending.error:
        model.append(ending.error)
        pieces.append(Shown("error", ending.error, "Error"))
    if ending.interrupted:
        model.append("The snippet was interrupted (KeyboardInterrupt) before it finished.")
        pieces.append(Shown("error", "KeyboardInterrupt: the snippet was interrupted", "Stopped"))
    if ending.exited is not None:
        text = (
            f"The snippet called sys.exit({ending.exited}): nothing exited, the kernel goes on; "
            "what ran before it stays."
        )
        model.append(text)
        pieces.append(Shown("text", text, "sys.exit"))
    if not model:
        model.append("(no output)")
    model.append(diff.line())
    if diff:
        rows = diff.rows()
        pieces.append(Shown("table", Table(("name", "change", "before", "now"), rows), "Namespace"))
    else:
        pieces.append(
            Shown("text", "No names were added, rebound, deleted or changed.", "Namespace")
        )
    if process:
        model.append(f"Process: {'; '.join(process)}. Undo does not change these back.")
    if process or loaded:
        said = "; ".join([*(process or ()), *(loaded or ())])
        pieces.append(Shown("text", f"{said}. Undo does not change these back.", "Process"))
    for note in notes:
        model.append(note)
        pieces.append(Shown("text", note, "Note"))
    content: tuple[TextPart | ImagePart, ...] = (TextPart("\n".join(model)), *outcome.images)
    return ToolResult(content, is_error=status != "done", value=tuple(pieces))
