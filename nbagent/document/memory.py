"""A notebook held in memory: :class:`NotebookDocument`, a :class:`~.protocol.Document`.

For a notebook that is not open in a page: one read from a file on purpose (a student's
notebook a teacher reviews, a lesson run headless), one built in a script, a test. It applies
changes exactly as the page does (``editing/page.js`` in :mod:`nbagent.notebook.editing`
mirrors :func:`apply_to_cells`): each change checks what it expects, and one that does not
hold is refused, naming why. Nothing is ever written to a file unless :meth:`save` is called.
"""

from __future__ import annotations

import copy
import json
import os
import uuid
from collections.abc import Mapping, MutableSequence, Sequence
from typing import Any

from .._ground.files import open_regular
from .cells import CELL_ID, CELL_TYPES, Snapshot, snapshot_from_wire, snapshot_of, source_text
from .changes import (
    Applied,
    Change,
    DeleteCell,
    EditCell,
    InsertCell,
    MoveCell,
    SetOutputs,
    StampCell,
)
from .limits import NotebookLimits

__all__ = ["MAX_FILE_BYTES", "NotebookDocument", "apply_to_cells"]

#: The largest notebook file :meth:`NotebookDocument.from_file` reads.
MAX_FILE_BYTES = 64 * 1024 * 1024
#: A deleted cell (or replaced outputs) larger than this as JSON is not kept for undo.
MAX_REMOVED_CHARS = 2_000_000


class NotebookDocument:
    """An nbformat 4 notebook in memory, changed only through :meth:`apply` (see the module).

    ``notebook``: the notebook as a dict (nbformat JSON); cells without an id get one (as
    nbformat 4.5 does). ``name``: how the person knows it (a path). ``active``: the id of the
    cell the person is in, if any.
    """

    def __init__(
        self, notebook: Mapping[str, Any], *, name: str = "notebook", active: str | None = None
    ) -> None:
        data = copy.deepcopy(dict(notebook))
        cells = data.get("cells")
        if not isinstance(cells, list):
            raise ValueError("a notebook holds a list of cells ('cells')")
        taken: set[str] = set()
        for cell in cells:
            if not isinstance(cell, dict) or cell.get("cell_type") not in CELL_TYPES:
                raise ValueError("every cell is a dict with cell_type code, markdown or raw")
            cell["source"] = source_text(cell.get("source"))
            found = cell.get("id")
            if not isinstance(found, str) or not CELL_ID.fullmatch(found) or found in taken:
                cell["id"] = _new_id(taken)
            taken.add(cell["id"])
        if data.get("nbformat") == 4 and int(data.get("nbformat_minor") or 0) < 5:
            data["nbformat_minor"] = 5  # cell ids are nbformat 4.5
        self._data = data
        self.name = name
        self.active = active
        self.path: str | None = None

    def __repr__(self) -> str:
        return f"<NotebookDocument {self.name}: {len(self.cells)} cells>"

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> NotebookDocument:
        """The notebook in ``path``, read into memory (at most :data:`MAX_FILE_BYTES`); the file
        is not written unless :meth:`save` is called."""
        handle = open_regular(path)
        with os.fdopen(handle, "rb") as file:
            raw = file.read(MAX_FILE_BYTES + 1)
        if len(raw) > MAX_FILE_BYTES:
            raise ValueError(f"{os.fspath(path)} is larger than {MAX_FILE_BYTES:,} bytes")
        document = cls(json.loads(raw.decode("utf-8")), name=os.fspath(path))
        document.path = os.fspath(path)
        return document

    @property
    def cells(self) -> list[dict[str, Any]]:
        """The cells (nbformat JSON): look, never change them here (use :meth:`apply`)."""
        cells: list[dict[str, Any]] = self._data["cells"]
        return cells

    def to_notebook(self) -> dict[str, Any]:
        """A copy of the notebook as nbformat JSON."""
        return copy.deepcopy(self._data)

    def save(self, path: str | os.PathLike[str] | None = None) -> str:
        """Write the notebook to ``path`` (default: the file it was read from); returns where."""
        target = os.fspath(path) if path is not None else self.path
        if target is None:
            raise ValueError("this notebook was not read from a file: say where to save it")
        with open(target, "w", encoding="utf-8") as file:
            json.dump(self._data, file, indent=1, ensure_ascii=False)
            file.write("\n")
        return target

    # --- the Document protocol ---------------------------------------------------------------

    async def read(self, ids: Sequence[str] | None, limits: NotebookLimits) -> Snapshot:
        wire = snapshot_of(
            self.cells,
            limits,
            ids,
            max_source=limits.max_cell_chars,
            name=self.name,
            active=self.active,
        )
        return snapshot_from_wire(wire, limits, max_source=limits.max_cell_chars)

    async def apply(
        self, changes: Sequence[Change], limits: NotebookLimits, *, together: bool = False
    ) -> list[Applied]:
        return apply_to_cells(self.cells, changes, limits)


def _new_id(taken: set[str] | Sequence[Mapping[str, Any]]) -> str:
    held = taken if isinstance(taken, set) else {c.get("id") for c in taken}
    while True:
        made = uuid.uuid4().hex[:8]
        if made not in held:
            return made


def _at(cells: Sequence[Mapping[str, Any]], cell_id: str) -> int | None:
    return next((i for i, c in enumerate(cells) if c.get("id") == cell_id), None)


def _neighbours(cells: Sequence[Mapping[str, Any]], index: int) -> tuple[str | None, str | None]:
    before = cells[index - 1].get("id") if index > 0 else None
    after = cells[index + 1].get("id") if index + 1 < len(cells) else None
    return before, after


def _place(cells: Sequence[Mapping[str, Any]], after: str | None, before: str | None) -> int | None:
    """Where a cell goes: after ``after``, else before ``before``, else (neither named) at the
    end; None when every anchor named is gone."""
    if after is not None:
        found = _at(cells, after)
        if found is not None:
            return found + 1
    if before is not None:
        found = _at(cells, before)
        if found is not None:
            return found
    if after is None and before is None:
        return len(cells)
    return None


def _kept(value: Any) -> Any:
    """A copy of what a change removed, if it is small enough to keep for undo."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        return None
    return json.loads(text) if len(text) <= MAX_REMOVED_CHARS else None


def _marked(outputs: Any, mark: str) -> bool:
    if not isinstance(outputs, list) or not outputs:
        return False
    for output in outputs:
        meta = output.get("metadata") if isinstance(output, Mapping) else None
        mine = meta.get("nbagent") if isinstance(meta, Mapping) else None
        if not isinstance(mine, Mapping) or mine.get("ran_by") != mark:
            return False
    return True


def apply_to_cells(
    cells: MutableSequence[dict[str, Any]], changes: Sequence[Change], limits: NotebookLimits
) -> list[Applied]:
    """Apply ``changes`` to nbformat ``cells`` in order, each only if what it expects holds."""
    return [_apply_one(cells, change, limits) for change in changes]


def _apply_one(
    cells: MutableSequence[dict[str, Any]], change: Change, limits: NotebookLimits
) -> Applied:
    if isinstance(change, InsertCell):
        at = _place(cells, change.after, change.before)
        if at is None:
            return Applied(False, problem="anchor")
        wanted = change.cell_id
        cell_id = wanted if CELL_ID.fullmatch(wanted) and _at(cells, wanted) is None else None
        cell: dict[str, Any] = {
            "id": cell_id or _new_id(cells),
            "cell_type": change.cell_type,
            "metadata": copy.deepcopy(dict(change.metadata)),
            "source": change.source,
        }
        if change.cell_type == "code":
            cell["execution_count"] = change.execution_count
            cell["outputs"] = copy.deepcopy([dict(o) for o in change.outputs])
        cells.insert(at, cell)
        return Applied(True, cell["id"], at + 1)
    found = _at(cells, change.cell_id)
    if found is None:
        return Applied(False, change.cell_id, problem="missing")
    cell = cells[found]
    source = source_text(cell.get("source"))
    if isinstance(change, EditCell):
        if source != change.expected:
            return Applied(
                False, change.cell_id, found + 1, "changed", source[: limits.max_cell_chars]
            )
        old_type = cell.get("cell_type")
        cell["source"] = change.source
        if change.cell_type is not None and change.cell_type != old_type:
            cell["cell_type"] = change.cell_type
            cell.pop("outputs", None)
            cell.pop("execution_count", None)
            cell.pop("attachments", None)
            if change.cell_type == "code":
                cell["outputs"], cell["execution_count"] = [], None
        return Applied(
            True, change.cell_id, found + 1, old_type=old_type if old_type in CELL_TYPES else None
        )
    if isinstance(change, DeleteCell):
        if change.expected is not None and source != change.expected:
            return Applied(
                False, change.cell_id, found + 1, "changed", source[: limits.max_cell_chars]
            )
        after, before = _neighbours(cells, found)
        removed = _kept(cell)
        del cells[found]
        return Applied(True, change.cell_id, found + 1, removed=removed, after=after, before=before)
    if isinstance(change, MoveCell):
        after, before = _neighbours(cells, found)
        if change.cell_id in (change.after, change.before):
            return Applied(
                False,
                change.cell_id,
                found + 1,
                "refused",
                text="a cell cannot move next to itself",
            )
        moving = cells.pop(found)
        at = _place(cells, change.after, change.before)
        if at is None:
            cells.insert(found, moving)
            return Applied(False, change.cell_id, found + 1, "anchor")
        cells.insert(at, moving)
        return Applied(True, change.cell_id, at + 1, after=after, before=before)
    if isinstance(change, SetOutputs):
        if cell.get("cell_type") != "code":
            return Applied(
                False, change.cell_id, found + 1, "refused", text="it is not a code cell"
            )
        old = cell.get("outputs")
        if change.mark is not None and not _marked(old, change.mark):
            return Applied(False, change.cell_id, found + 1, "changed")
        count = cell.get("execution_count")
        cell["outputs"] = copy.deepcopy([dict(o) for o in change.outputs])
        cell["execution_count"] = change.execution_count
        return Applied(
            True,
            change.cell_id,
            found + 1,
            removed=_kept(old if isinstance(old, list) else []),
            old_count=count if isinstance(count, int) and not isinstance(count, bool) else None,
        )
    if isinstance(change, StampCell):
        metadata = cell.setdefault("metadata", {})
        if change.value is None:
            metadata.pop(change.key, None)
        else:
            metadata[change.key] = copy.deepcopy(dict(change.value))
        return Applied(True, change.cell_id, found + 1)
    return Applied(False, problem="refused", text="an unknown change")
