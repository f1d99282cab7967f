"""The accepted edits of each run, and undoing them: all of a run's at once, as one step.

Each applied change is kept with the change that takes it back (:func:`~.changes.inverse`),
which expects what the edit left: a cell the person changed since is kept as it is, and said
so, never overwritten (the promise the kernel toolkit's undo keeps for variables). What is kept
is bounded (``NotebookLimits.undo_chars``, ``max_runs``): the oldest runs' edits go first, and
an undo of them says they can no longer be taken back.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .changes import (
    Applied,
    Change,
    DeleteCell,
    EditCell,
    InsertCell,
    MoveCell,
    SetOutputs,
    inverse,
)
from .limits import NotebookLimits

__all__ = [
    "EditJournal",
    "Edited",
    "NotebookUndoReport",
    "describe_change",
    "inverse",
    "undo_said",
]


@dataclass
class Edited:
    """One accepted change: its run, call and step, what it did (``said``), and how to take
    it back (``undo``: None when it cannot be)."""

    run_id: str | None
    call_id: str
    step: int | None
    change: Change
    applied: Applied
    undo: Change | None
    said: str
    #: The document it was applied to (undo takes it back there).
    document: Any = None
    undone: bool = False

    @property
    def size(self) -> int:
        """Characters kept for it (what bounds the journal)."""
        try:
            removed = len(json.dumps(self.applied.removed)) if self.applied.removed else 0
        except (TypeError, ValueError):
            removed = 0
        source = getattr(self.change, "source", "") or ""
        expected = getattr(self.change, "expected", "") or ""
        return removed + len(source) + len(expected) + 200


@dataclass
class NotebookUndoReport:
    """What an undo of notebook edits did: ``undone`` and ``kept`` (a conflict: the person's
    change since wins), one line each, and edits ``lost`` (no longer kept)."""

    undone: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    lost: int = 0
    problem: str | None = None

    def __bool__(self) -> bool:
        return bool(self.undone or self.kept or self.lost or self.problem)

    def lines(self) -> list[str]:
        out = []
        if self.problem:
            out.append(self.problem)
        if self.undone:
            out.append("Notebook edits taken back (one step of the notebook's undo history):")
            out += [f"  {line}" for line in self.undone]
        if self.kept:
            out.append("Kept as they are (changed since the agent's edit: your change wins):")
            out += [f"  {line}" for line in self.kept]
        if self.lost:
            out.append(
                f"{self.lost} older edit(s) can no longer be taken back (nbagent keeps the "
                "newest runs' edits)."
            )
        return out


class EditJournal:
    """The accepted edits of the newest runs, oldest first (see the module)."""

    def __init__(self, limits: NotebookLimits) -> None:
        self.limits = limits
        self._runs: OrderedDict[str | None, list[Edited]] = OrderedDict()
        self._lost: dict[str | None, int] = {}

    def add(self, edited: Edited) -> None:
        runs = self._runs
        runs.setdefault(edited.run_id, []).append(edited)
        runs.move_to_end(edited.run_id)
        while len(runs) > self.limits.max_runs or (
            len(runs) > 1 and self.size() > self.limits.undo_chars
        ):
            run_id, gone = runs.popitem(last=False)
            self._lost[run_id] = self._lost.get(run_id, 0) + len(gone)
            while len(self._lost) > self.limits.max_runs * 2:
                self._lost.pop(next(iter(self._lost)))

    def size(self) -> int:
        return sum(e.size for edits in self._runs.values() for e in edits)

    def of_runs(self, runs: Sequence[str] | None = None) -> list[Edited]:
        """The edits of ``runs`` (None: every run), oldest first."""
        chosen = self._runs if runs is None else {r: self._runs.get(r, []) for r in runs}
        return [e for edits in chosen.values() for e in edits]

    def last_run(self) -> str | None:
        """The newest run with an edit not undone yet."""
        for run_id in reversed(self._runs):
            if any(not e.undone for e in self._runs[run_id]):
                return run_id
        return None

    def lost(self, runs: Sequence[str]) -> int:
        return sum(self._lost.get(r, 0) for r in runs)

    def plan(self, edits: Sequence[Edited]) -> list[tuple[Edited, Change]]:
        """The changes that take ``edits`` back, newest first (those not undone yet)."""
        return [(e, e.undo) for e in reversed(edits) if not e.undone and e.undo is not None]


def undo_said(edited: Edited, applied: Applied) -> str:
    """One line for the report: what was taken back, or why it was kept."""
    change = edited.undo
    what = edited.said
    if applied.ok:
        return f"{what}: taken back"
    if applied.problem == "missing":
        return f"{what}: the cell is no longer in the notebook"
    if applied.problem == "changed":
        return f"{what}: the cell changed since"
    if applied.problem == "anchor":
        return f"{what}: the cells it stood between are gone"
    if isinstance(change, SetOutputs):
        return f"{what}: its outputs changed since"
    return f"{what}: {applied.text or 'refused'}"


def describe_change(change: Change, where: str) -> str:
    """A short description of an applied change, for undo reports."""
    if isinstance(change, InsertCell):
        return f"the new {change.cell_type} cell, {where}"
    if isinstance(change, EditCell):
        return f"edit of {where}"
    if isinstance(change, DeleteCell):
        return f"deletion of {where}"
    if isinstance(change, MoveCell):
        return f"move of {where}"
    if isinstance(change, SetOutputs):
        return f"outputs the agent's run wrote into {where}"
    return where
