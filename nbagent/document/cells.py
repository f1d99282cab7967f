"""A notebook's cells as the tools read them: ids, types, sources, bounded outputs, the context.

A :class:`Snapshot` is made from a document's answer to a read (:func:`snapshot_from_wire`),
which is untrusted: every field is checked and bounded, a cell that does not read is left
out and counted. The same wire form is what :func:`wire_cell` makes of an nbformat cell, so an
in-memory notebook and the page answer alike. Nothing here hides secrets or cuts text for the
model: that is :mod:`.reading`'s, which writes what the model is sent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ._errors import NotebookUnavailableError
from .limits import NotebookLimits

__all__ = [
    "CELL_ID",
    "Cell",
    "CellType",
    "Output",
    "Snapshot",
    "snapshot_from_wire",
    "snapshot_of",
    "source_text",
    "wire_cell",
    "wire_output",
]

CellType = Literal["code", "markdown", "raw"]
CELL_TYPES: tuple[CellType, ...] = ("code", "markdown", "raw")
#: An nbformat 4.5 cell id: 1 to 64 letters, digits, ``-`` and ``_``.
CELL_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: Lines of a traceback kept (its end, where the error is).
TRACEBACK_LINES = 12
#: The cell metadata key of the agent's record (:mod:`.record`), and its largest size read.
RECORD_KEY = "nbagent_edit"
MAX_RECORD_CHARS = 64 * 1024


@dataclass(frozen=True)
class Output:
    """One output of a code cell, bounded: ``kind`` is ``stream``, ``result`` (an
    ``execute_result``), ``display`` or ``error``; ``text`` its text (a stream's, the plain
    text of a result, or an error's name, value and the end of its traceback); ``mimes`` the
    other forms it has (``image/png`` …), named, never sent."""

    kind: Literal["stream", "result", "display", "error"]
    text: str
    name: str = ""
    mimes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Cell:
    """One cell as read: ``source`` may be cut (``length`` is the whole source's)."""

    id: str
    type: CellType
    source: str
    length: int
    execution_count: int | None = None
    outputs: tuple[Output, ...] = ()
    outputs_total: int = 0
    #: The cell's record of what the agent did to it (metadata ``nbagent_edit``), unread.
    record: Any = None

    @property
    def complete(self) -> bool:
        """Whether ``source`` is the whole source."""
        return len(self.source) >= self.length

    @property
    def error(self) -> Output | None:
        """The cell's error output, if it has one."""
        return next((o for o in self.outputs if o.kind == "error"), None)


@dataclass(frozen=True)
class Snapshot:
    """Cells of a notebook as read at one moment, in the notebook's order.

    ``total``: cells the notebook has (it may hold more than were read); ``index``: each read
    cell's position (1 for the first cell); ``active``: the cell the person is in (the one that
    asked, when nothing better is known), None when unknown; ``missing``: ids asked for that
    the notebook does not hold; ``dropped``: cells of the answer that did not read.
    """

    cells: tuple[Cell, ...]
    total: int
    name: str = ""
    active: str | None = None
    index: Mapping[str, int] | None = None
    missing: tuple[str, ...] = ()
    dropped: int = 0

    def find(self, cell_id: str) -> Cell | None:
        return next((c for c in self.cells if c.id == cell_id), None)

    def position(self, cell_id: str) -> int | None:
        """The cell's number in the notebook (1 is the first), None if it is not read."""
        if self.index is not None and cell_id in self.index:
            return self.index[cell_id]
        for number, cell in enumerate(self.cells, start=1):
            if cell.id == cell_id:
                return number
        return None

    def last_error(self) -> Cell | None:
        """The cell whose error is the newest: the highest execution count among cells with an
        error, else the last such cell in the notebook."""
        failed = [c for c in self.cells if c.error is not None]
        if not failed:
            return None
        counted = [c for c in failed if c.execution_count is not None]
        if counted:
            return max(counted, key=lambda c: c.execution_count or 0)
        return failed[-1]


def source_text(value: Any) -> str:
    """An nbformat source (a string, or a list of lines) as one string ("" if neither)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(v for v in value if isinstance(v, str))
    return ""


# --- the wire form (what a page sends, what an in-memory notebook makes) -----------------------


def wire_output(output: Mapping[str, Any], limits: NotebookLimits) -> dict[str, Any]:
    """One nbformat output as a read's answer carries it: its text bounded, its other forms
    named only (the page does the same in ``editing/page.js``)."""
    kind = output.get("output_type")
    cap = limits.max_output_chars
    if kind == "stream":
        return {
            "output_type": "stream",
            "name": str(output.get("name") or "stdout")[:20],
            "text": source_text(output.get("text"))[: cap * 4],
        }
    if kind == "error":
        trace = output.get("traceback")
        lines = [t for t in trace if isinstance(t, str)] if isinstance(trace, list) else []
        return {
            "output_type": "error",
            "ename": str(output.get("ename") or "")[:200],
            "evalue": str(output.get("evalue") or "")[: cap * 2],
            "traceback": [line[:cap] for line in lines[-TRACEBACK_LINES * 2 :]],
        }
    data = output.get("data")
    data = data if isinstance(data, Mapping) else {}
    return {
        "output_type": kind if kind in ("execute_result", "display_data") else "display_data",
        "text": source_text(data.get("text/plain"))[: cap * 4],
        "mimes": [str(m)[:100] for m in list(data)[:20] if m != "text/plain"],
    }


def wire_cell(cell: Mapping[str, Any], limits: NotebookLimits, max_source: int) -> dict[str, Any]:
    """One nbformat cell as a read's answer carries it (source cut at ``max_source``)."""
    source = source_text(cell.get("source"))
    outputs = cell.get("outputs")
    outputs = outputs if isinstance(outputs, list) else []
    count = cell.get("execution_count")
    metadata = cell.get("metadata")
    record = metadata.get(RECORD_KEY) if isinstance(metadata, Mapping) else None
    return {
        "record": record if _small(record) else None,
        "id": cell.get("id"),
        "type": cell.get("cell_type"),
        "source": source[:max_source],
        "length": len(source),
        "execution_count": count
        if isinstance(count, int) and not isinstance(count, bool)
        else None,
        "outputs": [
            wire_output(o, limits) for o in outputs[: limits.max_outputs] if isinstance(o, Mapping)
        ],
        "outputs_total": len(outputs),
    }


def _small(value: Any) -> bool:
    """A record small enough to carry (what the page sends too: at most 64 KiB of JSON)."""
    if value is None:
        return False
    try:
        return len(json.dumps(value)) <= MAX_RECORD_CHARS
    except (TypeError, ValueError):
        return False


def _output(value: Any, limits: NotebookLimits) -> Output | None:
    if not isinstance(value, Mapping):
        return None
    kind = value.get("output_type")
    cap = limits.max_output_chars * 4
    if kind == "stream":
        name = value.get("name")
        return Output(
            "stream", _text(value.get("text"), cap), name if name == "stderr" else "stdout"
        )
    if kind == "error":
        ename = _text(value.get("ename"), 200)
        evalue = _text(value.get("evalue"), cap)
        trace = value.get("traceback")
        lines = (
            [_ANSI.sub("", t) for t in trace if isinstance(t, str)]
            if isinstance(trace, list)
            else []
        )
        tail = "\n".join(lines)[-cap:] if lines else ""
        return Output("error", tail or f"{ename}: {evalue}", ename, ())
    if kind not in ("execute_result", "display_data"):
        return None
    mimes = value.get("mimes")
    named = tuple(str(m)[:100] for m in mimes[:20]) if isinstance(mimes, list) else ()
    return Output(
        "result" if kind == "execute_result" else "display",
        _text(value.get("text"), cap),
        "",
        named,
    )


def _text(value: Any, cap: int) -> str:
    return _ANSI.sub("", source_text(value)[:cap])


def _cell(value: Any, limits: NotebookLimits, max_source: int) -> Cell | None:
    if not isinstance(value, Mapping):
        return None
    cell_id, kind = value.get("id"), value.get("type")
    if not isinstance(cell_id, str) or not CELL_ID.fullmatch(cell_id) or kind not in CELL_TYPES:
        return None
    source = value.get("source")
    length = value.get("length")
    if not isinstance(source, str):
        return None
    if isinstance(length, bool) or not isinstance(length, int) or length < len(source):
        length = len(source)
    count = value.get("execution_count")
    if isinstance(count, bool) or not isinstance(count, int):
        count = None
    raw = value.get("outputs")
    raw = raw if isinstance(raw, list) else []
    outputs = tuple(o for o in (_output(v, limits) for v in raw[: limits.max_outputs]) if o)
    total = value.get("outputs_total")
    if isinstance(total, bool) or not isinstance(total, int) or total < len(raw):
        total = len(raw)
    record = value.get("record")
    record = record if isinstance(record, Mapping) and _small(record) else None
    return Cell(cell_id, kind, source[:max_source], length, count, outputs, total, record)


def snapshot_from_wire(
    data: Any, limits: NotebookLimits, *, max_source: int, name: str = ""
) -> Snapshot:
    """A read's answer (untrusted) as a :class:`Snapshot`; raises
    :class:`~.protocol.NotebookUnavailableError` when it is not one at all."""
    if not isinstance(data, Mapping) or not isinstance(data.get("cells"), list):
        raise NotebookUnavailableError(
            "The notebook's page answered with something that is not a list of cells: nothing "
            "was read or changed."
        )
    cells: list[Cell] = []
    index: dict[str, int] = {}
    dropped = 0
    raw_index = data.get("index")
    for position, value in enumerate(data["cells"][: limits.max_cells], start=1):
        cell = _cell(value, limits, max_source)
        if cell is None or cell.id in index:
            dropped += 1
            continue
        cells.append(cell)
        at = (
            raw_index[position - 1]
            if isinstance(raw_index, list) and len(raw_index) >= position
            else None
        )
        index[cell.id] = (
            at if isinstance(at, int) and not isinstance(at, bool) and at >= 1 else position
        )
    total = data.get("total")
    if isinstance(total, bool) or not isinstance(total, int) or total < len(cells):
        total = len(cells) + dropped
    active = data.get("active")
    missing = data.get("missing")
    path = data.get("path")
    return Snapshot(
        tuple(cells),
        total,
        name=path[:500] if isinstance(path, str) and path else name,
        active=active if isinstance(active, str) and CELL_ID.fullmatch(active) else None,
        index=index,
        missing=tuple(m for m in missing[:100] if isinstance(m, str))
        if isinstance(missing, list)
        else (),
        dropped=dropped,
    )


def snapshot_of(
    cells: Sequence[Mapping[str, Any]],
    limits: NotebookLimits,
    ids: Sequence[str] | None,
    *,
    max_source: int,
    name: str = "",
    active: str | None = None,
    budget: int | None = None,
) -> dict[str, Any]:
    """The wire answer to a read of nbformat ``cells`` (what the page sends for the same):
    each source cut at ``max_source``, and all of them at ``budget`` characters together."""
    wanted = None if ids is None else set(ids)
    chosen: list[dict[str, Any]] = []
    index: list[int] = []
    room = budget if budget is not None else max_source * max(1, len(cells))
    for position, cell in enumerate(cells, start=1):
        if wanted is not None and cell.get("id") not in wanted:
            continue
        if len(chosen) >= limits.max_cells:
            break
        made = wire_cell(cell, limits, max(0, min(max_source, room)))
        room -= len(made["source"])
        chosen.append(made)
        index.append(position)
    held = {c.get("id") for c in cells}
    return {
        "path": name,
        "total": len(cells),
        "active": active,
        "cells": chosen,
        "index": index,
        "missing": [i for i in ids if i not in held] if ids is not None else [],
    }
