"""What the model and the person read once a proposal was decided: it landed, or it did not.

Landed: one sentence (which cell, where it is now, who accepted it and how), the diff of what
landed for the person, and for the model too when it is short; after the person edited the
proposal, the model reads the source that landed. Not applied (the cell changed, is gone, its
anchor is gone): one sentence, and, when the person's edit won, the cell's source as it is now
(the model read it) and the diff the proposal would make to it now.
"""

from __future__ import annotations

import re

from ..content import Shown, TextPart, ToolResult, error_result
from ._proposals import Plan
from .changes import Applied, Change, EditCell, InsertCell
from .diffs import cell_diff, diff_text
from .record import Accepted

__all__ = ["fenced", "landed", "not_applied"]

#: A diff this short (lines) is part of what the model reads of an applied proposal.
SHORT_DIFF = 40
_HOW: dict[str, str] = {
    "as proposed": "the person accepted it as proposed",
    "edited": "the person edited it, then accepted it",
    "by a rule": "a rule accepted it (%agent allow)",
    "by policy": "the run's approval policy accepted it",
    "without asking": "it needed no approval",
}


def fenced(text: str) -> str:
    """``text`` in a code fence longer than any run of backticks in it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


def landed(
    found: Plan, accepted: Accepted, where: str, source: str, applied: Applied
) -> ToolResult:
    """The result of a proposal that landed (``source``: the source it was accepted with)."""
    how = _HOW[accepted]
    if found.kind == "insert":
        assert isinstance(found.change, InsertCell)
        text = f"Inserted a new {found.change.cell_type} cell: it is {where}; {how}."
    elif found.kind == "move":
        text = f"Moved the cell (id {found.cell_id}): it is now cell {applied.index}; {how}."
    elif found.kind == "delete":
        text = f"Deleted cell {found.number} (id {found.cell_id}); {how}."
    else:
        text = f"Edited {where}; {how}."
    edited = accepted == "edited" and found.kind in ("edit", "insert")
    if edited:
        text += f" The cell's source is now:\n{fenced(source)}"
    pieces: list[Shown] = [Shown("text", text, "Done")]
    diff = found.diff
    if edited:
        before = found.seen.source if found.seen is not None and found.kind == "edit" else None
        diff = cell_diff(before, source, where=where, kind="")
    if diff is not None:
        pieces.append(diff.shown("What landed"))
        if not edited and diff.text.count("\n") <= SHORT_DIFF:
            text += f"\n{fenced(diff.text.rstrip())}"  # what landed, said to the model too
    return ToolResult((TextPart(text),), value=tuple(pieces))


def not_applied(found: Plan, change: Change, applied: Applied) -> tuple[ToolResult, str | None]:
    """The result of a proposal that did not land, and the cell's source as the model now
    read it in that result (None: it read none)."""
    cell_id = found.cell_id or ""
    if applied.problem == "missing":
        text = (
            f"Not applied: cell {cell_id} is not in the notebook any more (deleted since you "
            "read it); nothing was changed."
        )
        return error_result(text), None
    if applied.problem == "anchor":
        return error_result(
            "Not applied: the cell it was to go next to is not in the notebook any more; "
            "nothing was changed. Read the notebook again."
        ), None
    if applied.problem != "changed" or applied.source is None:
        said = applied.text or "the notebook refused it"
        return error_result(f"Not applied ({said}); nothing was changed."), None
    now = applied.source
    proposed = change.source if isinstance(change, EditCell) else None
    where = f"cell {found.number}" if found.number else f"cell {cell_id}"
    kind = found.cell.type if found.cell else ""
    if proposed is None:
        diff = cell_diff(now, None, where=where, kind=kind)
    else:
        diff = diff_text(now, proposed, old=f"{where} (as it is now)", new=f"{where} (proposed)")
    said = (
        f"{where} (id {cell_id}) changed after the agent read it (the person's edit wins; "
        "nothing was written)."
    )
    model = (
        f"Not applied: {said.replace('the agent', 'you', 1)} Its source now:\n"
        f"{fenced(now)}\nPropose again against this source if the change is still needed."
    )
    pieces = (
        Shown("text", said[0].upper() + said[1:], "Not applied"),
        diff.shown("What the proposal would do to the cell as it is now"),
    )
    return ToolResult((TextPart(model),), is_error=True, value=pieces), now
