"""Every snippet the agent ran, what it changed, and undoing it: :class:`Journal`.

Each :class:`Snippet` keeps the code as it ran, which run and step asked for it, how it ended,
its :class:`~._namespace.NamespaceDiff`, and what undo needs: the objects its changed names were
bound to before, copies (within the budget) of the objects it changed in place, and the objects
and fingerprints it left behind, to tell whether the person changed the same names since.

Undo walks a run's snippets newest first and, name by name, puts back what the snippet found,
unless the name no longer holds what the snippet left (the person rebound it, or changed it in
place): that is a conflict, reported, and the person's newer value stays. What undo cannot
restore is said, never glossed over: files written, data sent, objects over the copy budget,
objects reached other than by name (an object in a list, an alias under another name).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._namespace import ABSENT, Before, NamespaceDiff, fingerprint, visible_names

__all__ = ["Journal", "Snippet", "UndoReport"]

#: What undo never restores, said with every undo.
CANNOT = (
    "Undo restores names in the namespace only: files the code wrote, data it sent, and "
    "changes to objects reached other than by name (an item of a list, another name for the "
    "same object) stay as they are."
)


@dataclass
class Snippet:
    """One snippet the agent ran (or tried to)."""

    number: int
    code: str
    run_id: str | None
    step: int | None
    call_id: str
    purpose: str = ""
    status: str = "running"  # done | error | interrupted | exited | refused | running
    diff: NamespaceDiff = field(default_factory=NamespaceDiff)
    undone: bool = False
    seconds: float = 0.0
    #: For undo: what each changed name was bound to (ABSENT: not bound).
    before: dict[str, Any] = field(default_factory=dict, repr=False)
    #: For undo: copies of objects the snippet changed in place (from before it ran).
    copies: dict[str, Any] = field(default_factory=dict, repr=False)
    copied_bytes: int = 0
    #: Names changed in place that have no copy, and why.
    not_copied: dict[str, str] = field(default_factory=dict)
    #: What each changed name held when the snippet ended, and its fingerprint then.
    after: dict[str, tuple[Any, str | None]] = field(default_factory=dict, repr=False)
    #: Fingerprints, before it ran, of the changed names its code names.
    before_prints: dict[str, str | None] = field(default_factory=dict, repr=False)

    @property
    def label(self) -> str:
        where = f"{self.run_id} · step {self.step}" if self.run_id else f"snippet {self.number}"
        return where

    def keep(
        self,
        before: Before,
        diff: NamespaceDiff,
        now: Mapping[str, Any],
        prints: Mapping[str, str | None],
    ) -> None:
        """Keep what undo needs of this snippet's changes, and let go of the rest."""
        self.diff = diff
        for change in diff.changes:
            name = change.name
            self.before[name] = before.objects.get(name, ABSENT)
            if name in before.prints:
                self.before_prints[name] = before.prints[name]
            held = now.get(name, ABSENT)
            print_now = (
                prints.get(name)
                if name in prints
                else (fingerprint(held) if held is not ABSENT and name in before.watched else None)
            )
            self.after[name] = (held, print_now)
            if name in before.copies and change.kind in ("changed", "rebound", "deleted"):
                self.copies[name] = before.copies[name]
            elif change.kind == "changed":
                self.not_copied[name] = before.not_copied.get(
                    name, "the code does not name it, so no copy was taken before it ran"
                )
        self.copied_bytes = sum(before.sizes.get(name, 0) for name in self.copies)

    def drop_copies(self, why: str) -> None:
        for name in self.copies:
            self.not_copied[name] = why
        self.copies.clear()
        self.copied_bytes = 0


@dataclass
class UndoReport:
    """What an undo did, and what it could not do."""

    restored: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    conflicts: dict[str, str] = field(default_factory=dict)
    unrestorable: dict[str, str] = field(default_factory=dict)
    snippets: list[str] = field(default_factory=list)
    note: str = CANNOT

    def __bool__(self) -> bool:
        return bool(self.snippets)

    def lines(self) -> list[str]:
        if not self.snippets:
            return [
                "Nothing to undo: no snippet of the agent's changed the namespace (or it was "
                "undone already)."
            ]
        lines = [f"Undid {', '.join(self.snippets)}."]
        if self.restored:
            lines.append(f"Restored: {', '.join(self.restored)}.")
        if self.removed:
            lines.append(f"Removed (the agent added them): {', '.join(self.removed)}.")
        for name, why in self.conflicts.items():
            lines.append(f"Left as it is: {name}: {why}.")
        for name, why in self.unrestorable.items():
            lines.append(f"Not restored: {name}: {why}.")
        lines.append(self.note)
        return lines

    def __str__(self) -> str:
        return "\n".join(self.lines())


class Journal:
    """The snippets of one toolkit, oldest first, bounded in number and in copy memory."""

    def __init__(self, *, max_snippets: int, copy_budget_total: int) -> None:
        self.snippets: list[Snippet] = []
        self.max_snippets = max_snippets
        self.copy_budget_total = copy_budget_total
        self._numbers = 0
        self._lock = threading.Lock()

    def new(
        self, code: str, run_id: str | None, step: int | None, call_id: str, purpose: str
    ) -> Snippet:
        with self._lock:
            self._numbers += 1
            snippet = Snippet(self._numbers, code, run_id, step, call_id, purpose)
            self.snippets.append(snippet)
            del self.snippets[: max(0, len(self.snippets) - self.max_snippets)]
            return snippet

    def settle(self) -> None:
        """Drop the oldest copies while all of them together exceed the total budget."""
        with self._lock:
            total = sum(s.copied_bytes for s in self.snippets)
            for snippet in self.snippets:
                if total <= self.copy_budget_total:
                    break
                if snippet.copies:
                    total -= snippet.copied_bytes
                    snippet.drop_copies(
                        "its copy was let go to keep every undo copy within "
                        f"{self.copy_budget_total:,} bytes (KernelLimits.undo_memory)"
                    )

    def of_runs(self, run_ids: Iterable[str] | None) -> list[Snippet]:
        """Snippets of these runs (all, when None), oldest first."""
        with self._lock:
            if run_ids is None:
                return list(self.snippets)
            wanted = set(run_ids)
            return [s for s in self.snippets if s.run_id in wanted]

    def last_run(self) -> str | None:
        """The newest run that has snippets not undone."""
        with self._lock:
            for snippet in reversed(self.snippets):
                if not snippet.undone and snippet.run_id is not None:
                    return snippet.run_id
        return None

    def undo(
        self, snippets: list[Snippet], namespace: dict[str, Any], hidden: Mapping[str, Any] | None
    ) -> UndoReport:
        """Undo ``snippets`` (newest first), never overwriting a value the person changed."""
        report = UndoReport()
        # an object put back in place of another stands for it in older snippets' checks
        stands_for: dict[int, Any] = {}
        touched: set[str] = set()
        with self._lock:
            for snippet in sorted(snippets, key=lambda s: s.number, reverse=True):
                if snippet.undone or not snippet.diff.changes:
                    continue
                for change in snippet.diff.changes:
                    self._undo_name(
                        snippet,
                        change.name,
                        change.kind,
                        namespace,
                        hidden,
                        report,
                        stands_for,
                        touched,
                    )
                snippet.undone = True
                report.snippets.append(snippet.label)
                snippet.copies.clear()
                snippet.before.clear()
                snippet.after.clear()
                snippet.copied_bytes = 0
        return report

    @staticmethod
    def _undo_name(
        snippet: Snippet,
        name: str,
        kind: str,
        namespace: dict[str, Any],
        hidden: Mapping[str, Any] | None,
        report: UndoReport,
        stands_for: dict[int, Any],
        touched: set[str],
    ) -> None:
        left, left_print = snippet.after.get(name, (ABSENT, None))
        current = visible_names(namespace, hidden).get(name, ABSENT)
        standing = stands_for.get(id(current), current) if current is not ABSENT else ABSENT
        if standing is not left:
            why = (
                "it was bound again after the agent's step"
                if current is not ABSENT
                else "it was deleted after the agent's step"
            )
            if left is ABSENT:
                why = "it was bound after the agent deleted it"
            report.conflicts.setdefault(name, why + " (kept your newer value)")
            return
        if left is not ABSENT and left_print is not None and name not in touched:
            now_print = fingerprint(current)
            if now_print is not None and now_print != left_print:
                report.conflicts.setdefault(
                    name, "it was changed in place after the agent's step (kept your newer value)"
                )
                return
        old = snippet.before.get(name, ABSENT)
        if kind == "changed":
            if name not in snippet.copies:
                report.unrestorable[name] = (
                    "changed in place, and no copy was kept: "
                    + snippet.not_copied.get(name, "it could not be copied")
                )
                return
            restored = snippet.copies[name]
            stands_for[id(restored)] = current  # older snippets left that object here
            namespace[name] = restored
            _note(report.restored, name)
        elif old is ABSENT:
            namespace.pop(name, None)
            _note(report.removed, name)
            if name in report.restored:  # put back by a later step's undo, then removed: net
                report.restored.remove(name)
        else:
            # the object it found; or its copy, if the snippet also changed it in place first
            restored = old
            if name in snippet.copies and snippet.before_prints.get(name) not in (
                None,
                fingerprint(old),
            ):
                restored = snippet.copies[name]
                stands_for[id(restored)] = old
            namespace[name] = restored
            _note(report.restored, name)
            if name in report.removed:
                report.removed.remove(name)
        touched.add(name)


def _note(names: list[str], name: str) -> None:
    if name not in names:
        names.append(name)
