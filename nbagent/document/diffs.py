"""Per-cell diffs: what a proposal would do to one cell, as the person reviews it.

A diff is the unified diff (:mod:`difflib`) of the cell's source as the agent read it and as
it would be, shown as code (``language="diff"``): every character is text, so Markdown or HTML
in a proposed cell is read, never rendered. A new cell is all added lines, a deleted one all
removed lines, a move says from where to where. Each is bounded (:data:`MAX_DIFF_LINES`), the
rest counted.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from ..content import Shown
from ..redact import redact_secrets

__all__ = ["MAX_DIFF_LINES", "CellDiff", "cell_diff", "diff_text"]

#: Lines of one diff shown; the rest are counted in a last line.
MAX_DIFF_LINES = 400


@dataclass(frozen=True)
class CellDiff:
    """A diff and what it counts: lines ``added`` and ``removed``."""

    text: str
    added: int
    removed: int

    def summary(self) -> str:
        """ "3 lines added, 1 removed" (or "no change")."""
        if not self.added and not self.removed:
            return "no change to the source"
        parts = []
        if self.added:
            parts.append(f"{self.added} line{'s' if self.added != 1 else ''} added")
        if self.removed:
            parts.append(
                f"{self.removed} removed"
                if parts
                else f"{self.removed} line{'s' if self.removed != 1 else ''} removed"
            )
        return ", ".join(parts)

    def shown(self, label: str = "Diff") -> Shown:
        """The diff as a piece of a result (code, highlighted as a diff, escaped)."""
        return Shown("code", self.text, label, "diff")


def _lines(text: str) -> list[str]:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += "\n"
    return lines


def diff_text(before: str, after: str, *, old: str, new: str, context: int = 3) -> CellDiff:
    """The unified diff of ``before`` and ``after`` (headed ``--- old`` / ``+++ new``),
    bounded at :data:`MAX_DIFF_LINES` lines, secrets hidden."""
    lines = list(
        difflib.unified_diff(
            _lines(before), _lines(after), fromfile=old, tofile=new, n=context, lineterm="\n"
        )
    )
    added = sum(1 for line in lines[2:] if line.startswith("+"))
    removed = sum(1 for line in lines[2:] if line.startswith("-"))
    if not lines:
        lines = [f"--- {old}\n", f"+++ {new}\n", " (the source is the same)\n"]
    shown = lines[:MAX_DIFF_LINES]
    if len(lines) > MAX_DIFF_LINES:
        shown.append(f"… {len(lines) - MAX_DIFF_LINES:,} more lines of the diff not shown\n")
    return CellDiff(redact_secrets("".join(shown)), added, removed)


def cell_diff(before: str | None, after: str | None, *, where: str, kind: str) -> CellDiff:
    """The diff of one cell: ``before`` None for a new cell, ``after`` None for a deleted one;
    ``where`` names the cell ("cell 3"), ``kind`` its type."""
    if before is None:
        return diff_text(
            "", after or "", old="/dev/null", new=f"{where} (new {kind} cell)", context=0
        )
    if after is None:
        return diff_text(
            before, "", old=f"{where} ({kind})", new="(deleted from the notebook)", context=0
        )
    return diff_text(
        before, after, old=f"{where} (as the agent read it)", new=f"{where} (proposed)"
    )
