"""One proposal, from its arguments to what the person reviews and what lands.

:func:`plan` checks a proposal against the notebook as it is now and against what the model
was shown of it, and returns a :class:`Plan` (the change to apply, what it expects, how to say
it) or raises :class:`Refusal` with one sentence: a cell that does not exist or was deleted
since it was read, a cell the model never read (or read only in part, or that holds a hidden
key), the cell the run itself is in, an anchor that is gone. :func:`preview` is what the card
shows while the person decides; :func:`said` what the model reads once it was applied.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..content import Shown, ToolResult
from ..redact import redact_secrets
from .cells import CELL_ID, Cell, CellType, Snapshot
from .changes import Change, DeleteCell, EditCell, InsertCell, MoveCell
from .diffs import CellDiff, cell_diff
from .reading import Seen, describe_cell

__all__ = ["Plan", "Refusal", "new_cell_id", "plan", "preview"]

Kind = Literal["insert", "edit", "delete", "move", "run"]


class Refusal(Exception):
    """A proposal that cannot be made: ``str()`` is the one sentence the model reads."""


@dataclass(frozen=True)
class Plan:
    """A checked proposal: ``change`` (None for a run), the cell as it is now (``cell``, None
    for a new one), its number, what the model was shown of it (``seen``) and the words."""

    kind: Kind
    change: Change | None
    cell: Cell | None
    number: int | None
    seen: Seen | None
    title: str
    diff: CellDiff | None = None
    #: The person (or a collaborator) changed the cell after the model read it.
    stale: bool = False

    @property
    def cell_id(self) -> str | None:
        return self.cell.id if self.cell is not None else None


def new_cell_id(call_id: str, cell_type: str) -> str:
    """The id a new cell asks for: made from the call, so that a replayed run asks the same."""
    return hashlib.sha256(f"{call_id}\0{cell_type}".encode()).hexdigest()[:8]


def _where(snapshot: Snapshot, cell: Cell) -> str:
    return describe_cell(cell, snapshot.position(cell.id))


def _needs_id(value: Any, what: str) -> str:
    if not isinstance(value, str) or not CELL_ID.fullmatch(value):
        raise Refusal(
            f"{what} must be a cell's id as read_notebook lists it (letters, digits, - and _)."
        )
    return value


def _cell(snapshot: Snapshot, cell_id: str, seen: Seen | None) -> Cell:
    found = snapshot.find(cell_id)
    if found is not None:
        return found
    if seen is not None:
        raise Refusal(
            f"Cell {cell_id} is not in the notebook any more (it was deleted or replaced since "
            "you read it): nothing was changed. Read the notebook again."
        )
    raise Refusal(
        f"There is no cell {cell_id} in this notebook: nothing was changed (read_notebook lists "
        "the cells and their ids)."
    )


def _own(cell_id: str, protected: str | None) -> None:
    if protected is not None and cell_id == protected:
        raise Refusal(
            f"Cell {cell_id} is the cell this run is in (the %agent cell): the agent does not "
            "change, move or delete it."
        )


def _anchors(
    arguments: Mapping[str, Any], snapshot: Snapshot, *, moving: str | None = None
) -> tuple[str | None, str | None, str]:
    after, before = arguments.get("after_cell_id"), arguments.get("before_cell_id")
    if after and before:
        raise Refusal("Give after_cell_id or before_cell_id, not both: nothing was changed.")
    if moving is not None and not after and not before:
        raise Refusal("Say where the cell goes: after_cell_id or before_cell_id.")
    anchor = after or before
    if not anchor:
        return None, None, "at the end of the notebook"
    anchor = _needs_id(anchor, "after_cell_id" if after else "before_cell_id")
    if anchor == moving:
        raise Refusal("A cell cannot move next to itself: nothing was changed.")
    found = snapshot.find(anchor)
    if found is None:
        raise Refusal(
            f"There is no cell {anchor} to put it {'after' if after else 'before'}: nothing was "
            "changed (read_notebook lists the cells and their ids)."
        )
    where = f"{'after' if after else 'before'} {_where(snapshot, found)}"
    return (anchor, None, where) if after else (None, anchor, where)


def plan(
    kind: Kind,
    arguments: Mapping[str, Any],
    snapshot: Snapshot,
    seen: Mapping[str, Seen],
    *,
    call_id: str,
    protected: str | None,
) -> Plan:
    """Check one proposal (see the module); raises :class:`Refusal`."""
    if kind == "insert":
        after, before, where = _anchors(arguments, snapshot)
        cell_type: CellType = arguments.get("cell_type") or "code"
        source = str(arguments.get("source") or "")
        number = None
        diff = cell_diff(None, source, where="new cell", kind=cell_type)
        made = InsertCell(new_cell_id(call_id, cell_type), cell_type, source, after, before)
        return Plan("insert", made, None, number, None, f"New {cell_type} cell {where}", diff)
    cell_id = _needs_id(arguments.get("cell_id"), "cell_id")
    model_saw = seen.get(cell_id)
    cell = _cell(snapshot, cell_id, model_saw)
    here = _where(snapshot, cell)
    number = snapshot.position(cell_id)
    if kind != "run":
        _own(cell_id, protected)
    if model_saw is None:
        raise Refusal(
            f"You have not read {here}: read it first (read_notebook or read_cell); nbagent "
            "applies a proposal only against a version of the cell you have seen."
        )
    stale = model_saw.source != cell.source or not cell.complete
    change: Change
    if kind == "edit":
        if model_saw.secret:
            raise Refusal(
                f"{here[0].upper()}{here[1:]} holds a key or token nbagent hid from you: the agent "
                "does not rewrite it (ask the person to edit it)."
            )
        if not model_saw.whole:
            raise Refusal(f"You saw only part of {here}: read_cell {cell_id} first, then propose.")
        source = str(arguments.get("source") or "")
        new_type = arguments.get("cell_type") or None
        if new_type == cell.type:
            new_type = None
        if source == model_saw.source and new_type is None:
            raise Refusal(
                f"The proposed source is the source of {here} already: nothing to change."
            )
        diff = cell_diff(model_saw.source, source, where=f"cell {number}", kind=cell.type)
        change = EditCell(cell_id, model_saw.source, source, new_type)
        title = f"Edit {here}" + (f", making it a {new_type} cell" if new_type else "")
        return Plan("edit", change, cell, number, model_saw, title, diff, stale)
    if not cell.complete:
        raise Refusal(
            f"{here[0].upper()}{here[1:]} is longer than nbagent reads ({cell.length:,} "
            "characters): the agent does not delete or run it."
        )
    if kind == "delete":
        diff = cell_diff(cell.source, None, where=f"cell {number}", kind=cell.type)
        change = DeleteCell(cell_id, model_saw.source)
        return Plan("delete", change, cell, number, model_saw, f"Delete {here}", diff, stale)
    if kind == "move":
        after, before, where = _anchors(arguments, snapshot, moving=cell_id)
        change = MoveCell(cell_id, after, before)
        return Plan("move", change, cell, number, model_saw, f"Move {here} {where}", None, stale)
    if cell.type != "code":
        raise Refusal(f"{here[0].upper()}{here[1:]} is not a code cell: there is nothing to run.")
    _own(cell_id, protected)
    return Plan("run", None, cell, number, model_saw, f"Run {here}", None, stale)


_STALE = (
    "You (or a collaborator) changed this cell after the agent read it: your change wins. "
    "Accept will not overwrite it; it will say so, and the agent can read it again."
)


def preview(found: Plan) -> ToolResult:
    """What the card shows while the person decides (nothing has changed yet)."""
    pieces: list[Shown] = []
    summary = found.title
    if found.diff is not None and found.kind == "edit":
        summary += f": {found.diff.summary()}"
    pieces.append(Shown("text", redact_secrets(summary), "Proposal"))
    if found.diff is not None:
        pieces.append(found.diff.shown("Diff" if found.kind == "edit" else "Cell"))
    if found.kind == "move" and found.cell is not None:
        pieces.append(
            Shown("code", redact_secrets(found.cell.source[:2_000]), "The cell", _lang(found.cell))
        )
    if found.kind == "run" and found.cell is not None:
        pieces.append(
            Shown("code", redact_secrets(found.cell.source), "Runs in your kernel", "python")
        )
        if found.stale:
            pieces.append(
                Shown(
                    "text",
                    "The cell changed after the agent read it: this is the code that runs.",
                    "Note",
                )
            )
    elif found.stale:
        pieces.append(Shown("text", _STALE, "Note"))
    text = "\n".join(str(p.value) for p in pieces)
    from ..content import TextPart

    return ToolResult((TextPart(text),), value=tuple(pieces))


def _lang(cell: Cell) -> str:
    return "python" if cell.type == "code" else ""
