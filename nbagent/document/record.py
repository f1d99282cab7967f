"""The record a cell keeps of what the agent did to it, in its own metadata (``nbagent_edit``).

An accepted edit, a new cell and a cell the agent ran each add one entry: which run and call,
which tool, how it was accepted (as proposed, after the person edited it, by a rule, by the
run's policy, or without asking), and the digest of the source it left. A saved notebook keeps
it; the class report (:mod:`nbagent.course`) counts the cells the agent made or changed, and
those the person changed since (their source no longer has that digest). It lives under a key
of its own, beside a run's own record (``nbagent``), which it never touches. The newest
:data:`MAX_ENTRIES` entries are kept.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .cells import RECORD_KEY

__all__ = [
    "KEY",
    "MAX_ENTRIES",
    "Accepted",
    "EditEntry",
    "EditRecordError",
    "add_entry",
    "read_edit_record",
    "source_digest",
]

#: The cell metadata key of the record.
KEY = RECORD_KEY
VERSION = 1
MAX_ENTRIES = 10
Accepted = Literal["as proposed", "edited", "by a rule", "by policy", "without asking"]
ACCEPTED: tuple[Accepted, ...] = (
    "as proposed",
    "edited",
    "by a rule",
    "by policy",
    "without asking",
)
Action = Literal["inserted", "edited", "moved", "ran"]
ACTIONS: tuple[Action, ...] = ("inserted", "edited", "moved", "ran")
_ENTRY_KEYS = {"action", "run_id", "call_id", "tool", "accepted", "source_digest"}


class EditRecordError(ValueError):
    """A record under ``nbagent_edit`` that is not one nbagent writes (says where)."""


def source_digest(source: str) -> str:
    """``sha256:`` and the hex digest of a cell's source (UTF-8)."""
    return "sha256:" + hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class EditEntry:
    """One thing the agent did to a cell (see the module)."""

    action: Action
    run_id: str | None
    call_id: str
    tool: str
    accepted: Accepted
    source_digest: str

    def to_metadata(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "run_id": self.run_id,
            "call_id": self.call_id,
            "tool": self.tool,
            "accepted": self.accepted,
            "source_digest": self.source_digest,
        }


def add_entry(existing: Any, entry: EditEntry) -> dict[str, Any]:
    """The record with ``entry`` added to what the cell held (a record that does not read is
    replaced), the newest :data:`MAX_ENTRIES` kept."""
    try:
        entries = [e.to_metadata() for e in read_edit_record(existing)] if existing else []
    except EditRecordError:
        entries = []
    entries.append(entry.to_metadata())
    return {"version": VERSION, "edits": entries[-MAX_ENTRIES:]}


def _text(value: Any, where: str, limit: int = 200, *, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value or len(value) > limit:
        raise EditRecordError(f"{KEY}: {where}: not a short text")
    return value


def read_edit_record(value: Any) -> list[EditEntry]:
    """The entries of a cell's ``nbagent_edit`` record, read strictly (untrusted metadata)."""
    if not isinstance(value, Mapping) or set(value) != {"version", "edits"}:
        raise EditRecordError(f"{KEY}: not a record nbagent writes")
    if value["version"] != VERSION or isinstance(value["version"], bool):
        raise EditRecordError(f"{KEY}: unknown version (this reader knows {VERSION})")
    edits = value["edits"]
    if not isinstance(edits, list) or len(edits) > MAX_ENTRIES:
        raise EditRecordError(f"{KEY}: edits: not a list of at most {MAX_ENTRIES}")
    found = []
    for n, item in enumerate(edits):
        where = f"edits[{n}]"
        if not isinstance(item, Mapping) or set(item) != _ENTRY_KEYS:
            raise EditRecordError(f"{KEY}: {where}: not an entry nbagent writes")
        if item["action"] not in ACTIONS or item["accepted"] not in ACCEPTED:
            raise EditRecordError(f"{KEY}: {where}: unknown action or acceptance")
        digest = _text(item["source_digest"], f"{where}.source_digest", 80)
        if not digest.startswith("sha256:"):
            raise EditRecordError(f"{KEY}: {where}.source_digest: not a sha256 digest")
        found.append(
            EditEntry(
                item["action"],
                _text(item["run_id"], f"{where}.run_id", optional=True),
                _text(item["call_id"], f"{where}.call_id"),
                _text(item["tool"], f"{where}.tool", 64),
                item["accepted"],
                digest,
            )
        )
    return found
