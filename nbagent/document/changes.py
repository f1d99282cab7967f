"""Changes a document applies, each with what it expects to find, and what became of each.

Every change names its cell by id and says what it expects: an edit or a delete the source
it was made against (the person's edit made meanwhile wins: the change is refused, with the
source as it is now), a new cell where it goes (after one cell, before another, or at the
end). :func:`inverse` turns an applied change into the change that takes it back, expecting
what the first one left: undo keeps the same promise. The wire form (:meth:`wire`,
:func:`applied_from_wire`) is what the page reads and answers (``editing/page.js``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .cells import CELL_ID, CELL_TYPES, CellType

__all__ = [
    "Applied",
    "Change",
    "DeleteCell",
    "EditCell",
    "InsertCell",
    "MoveCell",
    "Problem",
    "SetOutputs",
    "StampCell",
    "applied_from_wire",
    "inverse",
]

#: Why a change was not applied: its cell is gone, it changed, its anchor is gone, or the
#: document refused it (``refused``, with a sentence).
Problem = Literal["missing", "changed", "anchor", "refused"]


@dataclass(frozen=True)
class InsertCell:
    """A new cell: after ``after`` (a cell id), else before ``before``, else at the end; each
    anchor that is gone falls back to the next. ``cell_id`` is the id it asks for (the
    document gives another when that one is taken)."""

    cell_id: str
    cell_type: CellType
    source: str
    after: str | None = None
    before: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    #: A cell put back by undo: its outputs and execution count as they were (nbformat).
    outputs: tuple[Mapping[str, Any], ...] = ()
    execution_count: int | None = None

    def wire(self) -> dict[str, Any]:
        cell: dict[str, Any] = {
            "id": self.cell_id,
            "cell_type": self.cell_type,
            "source": self.source,
            "metadata": dict(self.metadata),
        }
        if self.cell_type == "code":
            cell["outputs"] = [dict(o) for o in self.outputs]
            cell["execution_count"] = self.execution_count
        return {"op": "insert", "cell": cell, "after": self.after, "before": self.before}


@dataclass(frozen=True)
class EditCell:
    """A cell's source (and, with ``cell_type``, its type) replaced, if it is ``expected``."""

    cell_id: str
    expected: str
    source: str
    cell_type: CellType | None = None

    def wire(self) -> dict[str, Any]:
        return {
            "op": "edit",
            "id": self.cell_id,
            "expected": self.expected,
            "source": self.source,
            "cell_type": self.cell_type,
        }


@dataclass(frozen=True)
class DeleteCell:
    """A cell removed, if its source is ``expected`` (None: whatever it holds)."""

    cell_id: str
    expected: str | None

    def wire(self) -> dict[str, Any]:
        return {"op": "delete", "id": self.cell_id, "expected": self.expected}


@dataclass(frozen=True)
class MoveCell:
    """A cell moved after ``after``, else before ``before`` (the anchors as for an insert)."""

    cell_id: str
    after: str | None = None
    before: str | None = None

    def wire(self) -> dict[str, Any]:
        return {"op": "move", "id": self.cell_id, "after": self.after, "before": self.before}


@dataclass(frozen=True)
class SetOutputs:
    """A code cell's outputs and execution count replaced (a cell the agent ran); ``mark``: the
    call whose outputs the cell must still show (undo), None: whatever it shows; ``by``: the
    call whose outputs these are (each carries it in its metadata: ``{"nbagent": {"ran_by":
    call id}}``), so that undo can tell they are still there."""

    cell_id: str
    outputs: tuple[Mapping[str, Any], ...]
    execution_count: int | None = None
    mark: str | None = None
    by: str | None = None

    def wire(self) -> dict[str, Any]:
        return {
            "op": "outputs",
            "id": self.cell_id,
            "outputs": [dict(o) for o in self.outputs],
            "execution_count": self.execution_count,
            "mark": self.mark,
        }


@dataclass(frozen=True)
class StampCell:
    """A cell's metadata ``key`` set to ``value`` (None: removed), outside the undo history: the
    record of what the agent did, which the person's undo does not take back."""

    cell_id: str
    key: str
    value: Mapping[str, Any] | None

    def wire(self) -> dict[str, Any]:
        value = None if self.value is None else dict(self.value)
        return {"op": "stamp", "id": self.cell_id, "key": self.key, "value": value}


Change = InsertCell | EditCell | DeleteCell | MoveCell | SetOutputs | StampCell


@dataclass(frozen=True)
class Applied:
    """What became of one change. ``ok``: it was applied; ``cell_id`` the cell's id (a new
    cell's real id) and ``index`` its position after (1 is the first). Refused: ``problem``
    says why, ``source`` is the cell's source as it is now (``changed``), ``text`` a sentence
    (``refused``). ``removed``: what the change took away, for undo (a deleted cell as nbformat
    JSON, the outputs replaced); ``after`` / ``before``: the cell's neighbours before it was
    deleted or moved; ``old_type``: a cell's type before an edit changed it."""

    ok: bool
    cell_id: str | None = None
    index: int | None = None
    problem: Problem | None = None
    source: str | None = None
    text: str = ""
    removed: Any = None
    after: str | None = None
    before: str | None = None
    old_type: CellType | None = None
    old_count: int | None = None


def _id(value: Any) -> str | None:
    return value if isinstance(value, str) and CELL_ID.fullmatch(value) else None


def applied_from_wire(value: Any, max_source: int) -> Applied:
    """One result of an ``apply`` as the document answered it (untrusted)."""
    if not isinstance(value, Mapping):
        return Applied(False, problem="refused", text="the page's answer did not read")
    index = value.get("index")
    index = index if isinstance(index, int) and not isinstance(index, bool) else None
    old_type = value.get("old_type")
    count = value.get("old_count")
    common: dict[str, Any] = {
        "cell_id": _id(value.get("id")),
        "index": index,
        "after": _id(value.get("after")),
        "before": _id(value.get("before")),
        "old_type": old_type if old_type in CELL_TYPES else None,
        "old_count": count if isinstance(count, int) and not isinstance(count, bool) else None,
        "removed": value.get("removed"),
    }
    if value.get("ok") is True:
        return Applied(True, **common)
    found = value.get("problem")
    problem: Problem = found if found in ("missing", "changed", "anchor") else "refused"
    source = value.get("source")
    text = value.get("text")
    return Applied(
        False,
        problem=problem,
        source=source[:max_source] if isinstance(source, str) else None,
        text=text[:300] if isinstance(text, str) else "",
        **common,
    )


def inverse(change: Change, applied: Applied) -> Change | None:
    """The change that takes ``change`` back, expecting what it left (None: nothing to take
    back, or not enough was kept to do it)."""
    if not applied.ok:
        return None
    if isinstance(change, InsertCell):
        made = applied.cell_id or change.cell_id
        return DeleteCell(made, change.source)
    if isinstance(change, EditCell):
        kind = applied.old_type if change.cell_type is not None else None
        return EditCell(change.cell_id, change.source, change.expected, kind)
    if isinstance(change, DeleteCell):
        cell = applied.removed
        if not isinstance(cell, Mapping):
            return None
        kind = cell.get("cell_type")
        source = cell.get("source")
        if kind not in CELL_TYPES or not isinstance(source, str):
            return None
        outputs = cell.get("outputs")
        metadata = cell.get("metadata")
        count = cell.get("execution_count")
        return InsertCell(
            change.cell_id,
            kind,
            source,
            after=applied.after,
            before=applied.before,
            metadata=metadata if isinstance(metadata, Mapping) else {},
            outputs=tuple(o for o in outputs if isinstance(o, Mapping))
            if isinstance(outputs, list)
            else (),
            execution_count=count
            if isinstance(count, int) and not isinstance(count, bool)
            else None,
        )
    if isinstance(change, MoveCell):
        return MoveCell(change.cell_id, after=applied.after, before=applied.before)
    if isinstance(change, SetOutputs):
        old = applied.removed
        if not isinstance(old, list):
            return None
        return SetOutputs(
            change.cell_id,
            tuple(o for o in old if isinstance(o, Mapping)),
            applied.old_count,
            mark=change.by,
        )
    return None
