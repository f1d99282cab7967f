"""What a person sees of a tool's value, read once, through the guard, into plain data.

A result's ``value`` is what the tool returned: the person's object (a DataFrame, something
with ``_repr_markdown_``, a tuple of :class:`~nbagent.content.Shown` pieces holding anything).
Everything the card shows of it (a table's columns, index and cells, a Markdown source, a
piece's text, its label) is read here, on a :class:`~nbagent._ground.formatting.Formatter` (bounded
in time and size), into :class:`Piece`s of plain strings and numbers. The card, the saved output
and a re-render then build their HTML from those pieces alone, never touching the object again
(it may change, or hang the second time). What could not be read becomes a piece with a
``problem``: a stand-in naming the object's type and saying why, in one sentence.

The pieces of a result are kept while the result lives (keyed by its identity), so the live
card and the saved output read a hostile value once, not once each.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Any

from ..._ground.formatting import Formatter, Unreadable, cut, stand_in
from ..._ground.guard import exact
from ...content import Shown, Table, ToolResult

__all__ = ["SHOWING", "Piece", "TableForm", "answer_json", "pieces_of", "table_form"]

#: What a stand-in says ran, when a value is read for the card ("… raised ValueError: x").
SHOWING = "its own code, run to show it,"
#: Characters of one table cell, column or index label.
CELL_CHARS = 200
#: Characters of a Markdown source or a piece's text read from an object.
TEXT_CHARS = 100_000

_PLAIN: frozenset[type] = frozenset({str, int, float, bool, type(None)})
_NUMBERS = frozenset({int, float})
_KINDS = frozenset({"stdout", "stderr", "text", "markdown", "table", "code", "error"})


@dataclass(frozen=True)
class TableForm:
    """A table as plain data: ``index`` is the index's name and ``labels`` each row's label
    (None: no index column); ``cells`` hold texts, or ints and floats (aligned right)."""

    columns: tuple[str, ...]
    cells: tuple[tuple[str | int | float, ...], ...]
    labels: tuple[str, ...] | None = None
    index: str = ""
    total_rows: int = 0
    total_cols: int = 0
    frame: bool = False  # a DataFrame's (else a Table's)


@dataclass(frozen=True)
class Piece:
    """One thing to show, as plain data. ``kind`` is a :class:`Shown` kind, or ``"value"``: a
    value shown as its Markdown (``text``) when it has one, else by the result's own text.
    ``problem`` (a stand-in saying why) replaces what could not be read."""

    kind: str
    text: str = ""
    label: str = ""
    language: str = ""
    table: TableForm | None = None
    problem: str = ""


_kept: dict[int, tuple[Piece, ...] | None] = {}
_kept_lock = threading.Lock()


def pieces_of(result: ToolResult) -> tuple[Piece, ...] | None:
    """The pieces to show for ``result.value`` in order (None: show the result's text, as
    for a plain string), read once per result."""
    key = id(result)
    with _kept_lock:
        if key in _kept:
            return _kept[key]
    found = _read(result.value)
    with _kept_lock:
        if key not in _kept:
            try:
                weakref.finalize(result, _forget, key)
            except TypeError:  # cannot be watched: not kept
                return found
            _kept[key] = found
        return _kept[key]


def _forget(key: int) -> None:
    with _kept_lock:
        _kept.pop(key, None)


def _read(value: Any) -> tuple[Piece, ...] | None:
    if exact(value, _PLAIN):
        return None  # no code of the person's: the result's text says it
    if type(value) is tuple and value and all(type(v) is Shown for v in value):
        with Formatter(name="shown") as formatter:
            return tuple(_shown(formatter, piece) for piece in value)
    with Formatter(name="value") as formatter:
        try:
            piece = formatter.read(SHOWING, _value_piece, value)
        except Unreadable as exc:
            return (Piece("value", problem=stand_in(value, str(exc))),)
    return None if piece is None else (piece,)


def _value_piece(value: Any) -> Piece | None:
    """On the worker: a tool's value as a table, or its Markdown (None: neither)."""
    table = _frame(value)
    if table is not None:
        return Piece("value", table=table)
    markdown = getattr(value, "_repr_markdown_", None)
    if not callable(markdown) or isinstance(value, type):
        return None
    body = markdown()
    source = body[0] if type(body) is tuple and body else body
    if type(source) is not str:
        return None
    return Piece("value", text=cut(source, TEXT_CHARS))


def _shown(formatter: Formatter, piece: Shown) -> Piece:
    """One :class:`Shown` piece, each of its fields read as plain text."""
    kind = piece.kind if type(piece.kind) is str and piece.kind in _KINDS else "text"
    label = formatter.text(piece.label, limit=CELL_CHARS) if piece.label else ""
    language = formatter.text(piece.language, limit=40) if piece.language else ""
    value = piece.value
    if kind == "table":
        try:
            table = formatter.read("its table", table_form, value)
        except Unreadable as exc:
            return Piece("text", label=label, problem=stand_in(value, str(exc)))
        if table is not None:
            return Piece("table", label=label, table=table)
    try:
        text = formatter.read_text(value, limit=TEXT_CHARS)
    except Unreadable as exc:
        return Piece(kind, label=label, problem=stand_in(value, str(exc)))
    return Piece(kind, text, label, language)


def answer_json(output: Any) -> Any:
    """A typed run's answer as plain JSON data, read through the guard: its type is the
    person's (a serializer, a property, an ``__str__`` of a field's value may run). A stand-in
    string when it cannot be read."""
    if exact(output, _PLAIN):
        return output
    with Formatter(name="answer") as formatter:
        try:
            return formatter.read("its JSON form", _plain_json, output)
        except Unreadable as exc:
            return stand_in(output, str(exc))


def _plain_json(output: Any) -> Any:
    """On the worker: ``output`` as JSON data of builtin types only (what a field holds that
    JSON cannot is its text, cut)."""
    import json

    from ...output import to_json

    text = json.dumps(to_json(output), ensure_ascii=False, default=lambda v: _cell(v))
    return json.loads(text)


def table_form(value: Any, max_rows: int = 50, max_cols: int = 30) -> TableForm | None:
    """On the worker: a :class:`Table`, or a DataFrame (pandas or polars, or a Series), as
    plain data; None when ``value`` is neither."""
    if type(value) is Table:
        return _table(value, max_rows)
    return _frame(value, max_rows, max_cols)


def _table(table: Table, max_rows: int) -> TableForm:
    columns = tuple(_cell(c) for c in table.columns)
    rows = table.rows[:max_rows]
    cells = tuple(tuple(_cell(v, number=True) for v in row) for row in rows)
    return TableForm(columns, cells, total_rows=len(table.rows), total_cols=len(columns))


def _frame(value: Any, max_rows: int = 50, max_cols: int = 30) -> TableForm | None:
    if isinstance(value, type):
        return None
    if hasattr(value, "to_frame") and not hasattr(value, "columns"):
        value = value.to_frame()  # a pandas Series
    if not hasattr(value, "columns") or not (
        hasattr(value, "itertuples") or hasattr(value, "iter_rows")
    ):
        return None
    columns = tuple(_cell(c) for c in list(value.columns)[:max_cols])
    total_rows, total_cols = _count(len(value)), _count(len(value.columns))
    head = value.head(max_rows)
    if hasattr(head, "itertuples"):
        index = getattr(head.index, "name", "")
        rows = [
            (_cell(row[0]), tuple(_cell(v) for v in row[1 : max_cols + 1]))
            for row in head.itertuples(index=True, name=None)
        ]
        labels: tuple[str, ...] | None = tuple(label for label, _ in rows)
        shown_index = any(labels or ())
        return TableForm(
            columns,
            tuple(cells for _, cells in rows),
            labels if shown_index else None,
            _cell(index) if shown_index and index is not None else "",
            total_rows,
            total_cols,
            frame=True,
        )
    cells = tuple(tuple(_cell(v) for v in row[:max_cols]) for row in head.iter_rows())
    return TableForm(columns, cells, total_rows=total_rows, total_cols=total_cols, frame=True)


def _count(value: Any) -> int:
    if type(value) is not int:
        raise TypeError("a length that is not an int")
    return value


def _cell(value: Any, *, number: bool = False) -> Any:
    """On the worker: a cell's text (its ``str``, cut), or the number itself."""
    kind = type(value)
    if number and kind in _NUMBERS:
        return value
    text = value if kind is str else str(value)
    if type(text) is not str:
        raise TypeError("a cell whose __str__ is not a str")
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"
