"""Every snippet the agent ran, what it changed, and undoing it: :class:`Journal`.

Each :class:`Snippet` keeps the code as it ran, which run and step asked for it, how it ended,
its :class:`~._namespace.NamespaceDiff`, and what undo needs: the objects its changed names were
bound to before, copies (within the budget) of the objects it changed in place, and the objects
it left behind with an exact fingerprint of each (:mod:`._exact`), taken when it ended.

Undo walks a run's snippets newest first and, name by name, puts back what the snippet found,
unless the name no longer holds exactly what the snippet left: the person rebound it, or changed
it in place (the fingerprint differs), and the person's newer value stays. An object whose
fingerprint nbagent could not take (too large for the budget, or of a type it cannot read
without running its code) is one undo cannot vouch for: it is left as it is, and said. What
undo cannot restore is said too, never glossed over: files written, data sent, objects over the
copy budget, objects reached other than by name (an object in a list, an alias under another
name). Its cost is linear in the names the snippets changed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._exact import Budget, Print, exact_print, needs_print, unchanged
from ._namespace import ABSENT, Before, Change, NamespaceDiff, visible

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
    #: What each changed name held when the snippet ended (ABSENT: not bound).
    after: dict[str, Any] = field(default_factory=dict, repr=False)
    #: The exact fingerprint of what each changed name held when the snippet ended, or why
    #: nbagent cannot take one; no entry: its identity says everything (a number, a function).
    prints: dict[str, Print | str] = field(default_factory=dict, repr=False)

    @property
    def label(self) -> str:
        where = f"{self.run_id} · step {self.step}" if self.run_id else f"snippet {self.number}"
        return where

    def keep(
        self, before: Before, diff: NamespaceDiff, now: Mapping[str, Any], *, budget: Budget
    ) -> None:
        """Keep what undo needs of this snippet's changes, and let go of the rest; the
        fingerprints of what it left spend ``budget``."""
        self.diff = diff
        for change in diff.changes:
            name = change.name
            self.before[name] = before.objects.get(name, ABSENT)
            held = now.get(name, ABSENT)
            self.after[name] = held
            if name in before.copies and change.kind in ("changed", "rebound", "deleted"):
                self.copies[name] = before.copies[name]
            elif change.kind == "changed":
                self.not_copied[name] = before.not_copied.get(
                    name, "the code does not name it, so no copy was taken before it ran"
                )
                continue  # undo cannot restore it anyway: no fingerprint to take
            if held is not ABSENT and needs_print(held):
                self.prints[name] = exact_print(held, budget)
        self.copied_bytes = sum(before.sizes.get(name, 0) for name in self.copies)

    def unsure(self) -> dict[str, str]:
        """Names undo cannot vouch for (it will leave them as they are), and why."""
        return {name: why for name, why in self.prints.items() if isinstance(why, str)}

    def drop_copies(self, why: str) -> None:
        for name in self.copies:
            self.not_copied[name] = why
        self.copies.clear()
        self.copied_bytes = 0


@dataclass
class UndoReport:
    """What an undo did, name by name, and what it could not do.

    ``restored``: names put back; ``removed``: names the snippets added, taken away;
    ``conflicts``: names left as they are because they changed since the agent's step (rebound,
    deleted or changed in place: your newer value stays); ``unsure``: names left as they are
    because nbagent cannot tell whether they changed since; ``unrestorable``: in-place changes
    undo had no copy to restore from. Each with why.
    """

    restored: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    conflicts: dict[str, str] = field(default_factory=dict)
    unsure: dict[str, str] = field(default_factory=dict)
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
        for name, why in self.unsure.items():
            lines.append(f"Left as it is: {name}: {why}.")
        for name, why in self.unrestorable.items():
            lines.append(f"Not restored: {name}: {why}.")
        lines.append(self.note)
        return lines

    def __str__(self) -> str:
        return "\n".join(self.lines())


@dataclass
class _Undoing:
    """One undo under way: what it did so far, name by name (dicts: each step costs O(1))."""

    report: UndoReport
    print_budget: int
    restored: dict[str, str] = field(default_factory=dict)  # name -> the snippet it came from
    removed: dict[str, None] = field(default_factory=dict)
    # an object put back in place of another stands for it in older snippets' checks:
    # id -> (the object put back, the object it stands for)
    stands_for: dict[int, tuple[Any, Any]] = field(default_factory=dict)

    def leave(self, name: str, why: str, where: dict[str, str]) -> None:
        """Leave ``name`` as it is (and for the older snippets too: they came before)."""
        came = self.restored.pop(name, None)
        if came is not None:
            why += f"; it is as it was before {came}"
        where[name] = why

    def settled(self, name: str) -> bool:
        report = self.report
        return name in report.conflicts or name in report.unsure or name in report.unrestorable


class Journal:
    """The snippets of one toolkit, oldest first, bounded in number and in copy memory."""

    def __init__(
        self, *, max_snippets: int, copy_budget_total: int, print_budget: int = 256 << 20
    ) -> None:
        self.snippets: list[Snippet] = []
        self.max_snippets = max_snippets
        self.copy_budget_total = copy_budget_total
        #: what undo may read to compare an object with its copy (KernelLimits.copy_budget)
        self.print_budget = print_budget
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
        undoing = _Undoing(UndoReport(), self.print_budget)
        with self._lock:
            for snippet in sorted(snippets, key=lambda s: s.number, reverse=True):
                if snippet.undone or not snippet.diff.changes:
                    continue
                for change in snippet.diff.changes:
                    if not undoing.settled(change.name):
                        _undo_name(snippet, change, namespace, hidden, undoing)
                snippet.undone = True
                undoing.report.snippets.append(snippet.label)
                snippet.copies.clear()
                snippet.before.clear()
                snippet.after.clear()
                snippet.prints.clear()
                snippet.copied_bytes = 0
        report = undoing.report
        report.restored = list(undoing.restored)
        report.removed = list(undoing.removed)
        return report


def _undo_name(
    snippet: Snippet,
    change: Change,
    namespace: dict[str, Any],
    hidden: Mapping[str, Any] | None,
    undoing: _Undoing,
) -> None:
    """Put back what ``snippet`` found under one name, if the name holds exactly what the
    snippet left there; else leave it, and say why."""
    name = change.name
    report = undoing.report
    left = snippet.after.get(name, ABSENT)
    current = namespace.get(name, ABSENT)
    if current is not ABSENT and not visible(name, current, hidden):
        current = ABSENT
    stand = undoing.stands_for.get(id(current))
    standing = stand[1] if stand is not None and stand[0] is current else current
    if standing is not left:
        why = (
            "it was bound after the agent deleted it"
            if left is ABSENT
            else "it was bound again after the agent's step"
            if current is not ABSENT
            else "it was deleted after the agent's step"
        )
        undoing.leave(name, why + " (kept your newer value)", report.conflicts)
        return
    if change.kind == "changed" and name not in snippet.copies:
        undoing.leave(
            name,
            "changed in place, and no copy was kept: "
            + snippet.not_copied.get(name, "it could not be copied"),
            report.unrestorable,
        )
        return
    earlier = snippet.prints.get(name)
    if left is not ABSENT and earlier is not None:
        if isinstance(earlier, str):
            undoing.leave(
                name,
                f"nbagent cannot tell whether it changed after the agent's step: {earlier}",
                report.unsure,
            )
            return
        if not unchanged(current, earlier):
            undoing.leave(
                name,
                "it was changed in place after the agent's step (kept your newer value)",
                report.conflicts,
            )
            return
    old = snippet.before.get(name, ABSENT)
    if change.kind == "changed":
        restored = snippet.copies[name]
        undoing.stands_for[id(restored)] = (restored, standing)  # older snippets left that
        namespace[name] = restored
        undoing.restored[name] = snippet.label
        undoing.removed.pop(name, None)
    elif old is ABSENT:
        namespace.pop(name, None)
        undoing.removed[name] = None
        undoing.restored.pop(name, None)  # put back by a later step's undo, then removed: net
    else:
        # the object it found; or its copy, if the object changed since (the snippet changed
        # it in place before it rebound or deleted the name)
        restored = old
        copied = snippet.copies.get(name, ABSENT)
        if copied is not ABSENT:
            found = exact_print(copied, Budget(undoing.print_budget))
            if isinstance(found, str) or not unchanged(old, found):
                restored = copied
                undoing.stands_for[id(copied)] = (copied, old)
        namespace[name] = restored
        undoing.restored[name] = snippet.label
        undoing.removed.pop(name, None)
