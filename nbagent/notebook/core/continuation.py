"""Going on with a conversation after a kernel restart, from the saved notebook.

A restart empties the kernel, not the notebook: each run's output carries its record
(:class:`~nbagent.course.provenance.Provenance`: its id, its model, its recording and that
recording's digest), and each recorded run's file keeps the conversation it ended with
(:attr:`nbagent.recording.Recording.history`). ``%agent --continue`` (the latest run's
conversation) and ``%agent --continue RUN`` (a particular run's) read them back:

1. the saved notebook, found as the course policy finds it (:mod:`.notebookfile`), read as
   untrusted as a submission (bounded, strict records);
2. the run's record: one run of that id, a record nbagent wrote, a recording it names inside
   the notebook's recordings folder (a path out of the notebook's folder is refused);
3. the recording, bounded in bytes, whose digest must be the one the record holds;
4. its conversation, checked message by message against the hashes of what the model was
   sent (:func:`nbagent.recording.conversation_of`), bounded in messages;
5. the session's model, which must be the run's.

Any step that fails refuses in one sentence naming what is missing, and the session's
conversation is left as it was: never a silent fresh start, never a history nbagent cannot
vouch for. What the checks vouch for is that record, recording and conversation agree with
each other and with what the model was sent; a person who rewrites all three consistently
continues the conversation they wrote (the notebook is theirs).

What cannot come back: the kernel's namespace (variables, the kernel toolkit's journal, so
its undo of earlier runs), servings and MCP connections of the session before.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from ...course import ProvenanceError, read_output
from ...course._submissions import Found, read_notebook
from ...course.provenance import Provenance
from ...errors import RecordingError
from ...limits import ConversationLimits
from ...recording import Conversation, Recording, conversation_of
from .notebookfile import locate

__all__ = ["Continued", "Rebuilt", "SavedRun", "first_note", "rebuild", "saved_runs"]


@dataclass(frozen=True)
class SavedRun:
    """A run's record as the saved notebook holds it (``cell``: its cell's number, from 1),
    or why the record there could not be read (``problem``)."""

    cell: int
    record: Provenance | None
    problem: str | None = None


@dataclass(frozen=True)
class Continued:
    """What ``continue_from`` rebuilt: whose conversation, how long, and the calls that were
    waiting for approval when the kernel stopped (offered again, never run by themselves)."""

    run_id: str
    messages: int
    notebook: str
    pending: tuple[str, ...] = ()

    def __str__(self) -> str:
        said = (
            f"continuing {self.run_id}'s conversation from the saved notebook {self.notebook} "
            f"({self.messages} message{'s' if self.messages != 1 else ''})"
        )
        if self.pending:
            names = ", ".join(self.pending)
            return f"{said}: its call to {names} was waiting for approval; it is asked again"
        return f"{said}: the next %agent goes on from there"


@dataclass(frozen=True)
class Rebuilt:
    """A conversation rebuilt and checked, with the recording it came from."""

    continued: Continued
    conversation: Conversation
    recording: Recording


def saved_runs(path: Path) -> list[SavedRun]:
    """Every run record the saved notebook at ``path`` holds, in cell order; ValueError (one
    sentence) when the file is not a readable notebook."""
    notebook = read_notebook(Found(path.parent.name, path.name, path, path.parent))
    out: list[SavedRun] = []
    for number, cell in enumerate(notebook["cells"], start=1):
        outputs = cell.get("outputs") if isinstance(cell, dict) else None
        for output in outputs if isinstance(outputs, list) else ():
            metadata = output.get("metadata") if isinstance(output, dict) else None
            try:
                found = read_output(metadata)
            except ProvenanceError as exc:
                out.append(SavedRun(number, None, str(exc)))
                continue
            if isinstance(found, Provenance) and found.rows is None:  # not a map's record
                out.append(SavedRun(number, found))
    return out


def _continuable(record: Provenance) -> bool:
    """A run whose conversation may be rebuilt: one that ran, and was recorded (live with a
    model string, replayed, or any model with --record)."""
    return record.refused is None and record.recording is not None


def _latest(runs: list[SavedRun]) -> SavedRun | None:
    """The run that ended last among those that can be continued (by when it started, then
    by its place in the notebook)."""
    kept = [r for r in runs if r.record is not None and _continuable(r.record)]
    if not kept:
        return None
    return max(kept, key=lambda r: (r.record.at or "" if r.record else "", r.cell))


def _choose(runs: list[SavedRun], run_id: str | None, name: str) -> Provenance:
    """The record to continue from: the latest, or ``run_id``'s (ValueError saying why not)."""
    if run_id is None:
        bad = next((r for r in runs if r.problem is not None), None)
        if bad is not None:
            raise ValueError(
                f"the saved notebook {name} holds a record nbagent cannot read (cell "
                f"{bad.cell}: {bad.problem}), so which conversation is the latest cannot be "
                "vouched for: name the run, %agent --continue RUN"
            )
        found = _latest(runs)
        if found is None or found.record is None:
            raise ValueError(
                f"the saved notebook {name} holds no recorded run to continue from (a run is "
                "recorded when it talks to a model set by a model string, or with --record)"
            )
        return found.record
    mine = [r for r in runs if r.record is not None and r.record.run_id == run_id]
    if not mine:
        unreadable = [r.cell for r in runs if r.problem is not None]
        unread = f" (the records of cells {', '.join(map(str, unreadable[:5]))} cannot be read)"
        known = ", ".join(dict.fromkeys(r.record.run_id for r in runs if r.record)) or "none"
        raise ValueError(
            f"the saved notebook {name} holds no run {run_id}; its runs are: {known[:300]}"
            + (unread if unreadable else "")
        )
    if len({(r.record.at, r.record.prompt, r.record.recording) for r in mine if r.record}) > 1:
        cells = ", ".join(str(r.cell) for r in mine[:5])
        raise ValueError(
            f"{run_id} is claimed by different records in cells {cells} of {name} (cells "
            "copied from another notebook?), so its conversation cannot be told apart"
        )
    record = mine[-1].record
    assert record is not None
    if not _continuable(record):
        why = "was refused" if record.refused else "was not recorded (runs are recorded when "
        why += "" if record.refused else "a model string is set, or with --record)"
        raise ValueError(f"{run_id} {why}: there is no conversation of it to continue")
    return record


def _recording_file(record: Provenance, folder: Path) -> Path:
    """The recording the record names, in the recordings folder (ValueError when it names none,
    or a place out of the notebook's folder)."""
    if record.recording is None:
        raise ValueError(f"{record.run_id} left no recording, so its conversation is not kept")
    named = PurePath(record.recording.replace("\\", "/"))
    if named.is_absolute() or ".." in named.parts or not named.name.endswith(".json"):
        raise ValueError(
            f"the record of {record.run_id} points outside the notebook's folder "
            f"({record.recording[:120]!r}): not read"
        )
    return folder / named.name


def _read(path: Path, shown: str, limit: int) -> bytes:
    """The recording's bytes: a regular file no larger than ``limit`` (ValueError else)."""
    try:
        handle = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise ValueError(
            f"the recording {shown} is missing ({exc.strerror or exc}): copy the notebook's "
            "recordings folder with it"
        ) from None
    with os.fdopen(handle, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"the recording {shown} is not a regular file: not read")
        data = file.read(min(info.st_size, limit) + 1)
    if len(data) > limit:
        raise ValueError(
            f"the recording {shown} is larger than {limit // 2**20} MiB "
            "(ConversationLimits.max_bytes): not read"
        )
    return data


def rebuild(
    shell: Any,
    recordings: Path,
    model: str | None,
    run_id: str | None = None,
    limits: ConversationLimits | None = None,
) -> Rebuilt:
    """Rebuild ``run_id``'s conversation (None: the latest) from the saved notebook (see the
    module); ``recordings``: the recordings folder, ``model``: the session's model as
    ``provider:name`` (None: none set). ValueError in one sentence when it cannot be."""
    bounds = limits or ConversationLimits()
    where = locate(shell)
    if where.notebook is None:
        raise ValueError(
            f"this kernel does not know its notebook's file ({where.how}), so there is no saved "
            "conversation to continue"
        )
    name = where.notebook.name
    try:
        runs = saved_runs(where.notebook)
    except ValueError as exc:
        raise ValueError(f"the saved notebook {name} could not be read: {exc}") from None
    record = _choose(runs, run_id, name)
    path = _recording_file(record, recordings)
    data = _read(path, path.name, bounds.max_bytes)
    if record.recording_digest is None:
        raise ValueError(f"the record of {record.run_id} holds no digest of its recording")
    if "sha256:" + hashlib.sha256(data).hexdigest() != record.recording_digest:
        raise ValueError(
            f"the recording {path.name} is not the one {record.run_id}'s record holds (its "
            "digest differs: changed since the run), so its conversation is not continued"
        )
    try:
        recording = Recording.from_json(data.decode("utf-8"), source=path.name)
        conversation = conversation_of(recording, max_messages=bounds.max_messages)
    except (RecordingError, UnicodeDecodeError) as exc:
        raise ValueError(str(exc)) from None
    if record.mode == "live" and record.model != model:
        now = f"this session's model is {model}" if model else "this session has no model set"
        raise ValueError(
            f"{record.run_id} talked to {record.model}, and {now}: set it back (%agent -m "
            f"{record.model}) to continue its conversation"
        )
    pending = tuple(call.name for call in conversation.pending)
    continued = Continued(record.run_id, len(conversation.asked), name, pending)
    return Rebuilt(continued, conversation, recording)


def first_note(session: Any) -> str | None:
    """Once per kernel session, before its first run: one line saying that the saved notebook
    holds an earlier conversation and how to continue it (None: nothing to say: a run came
    before, the notebook is unknown or unreadable, or it holds no recorded run)."""
    agent = session._agent  # not made here: a model that does not load is the run's to say
    if session.noted_earlier or session.jobs or (agent is not None and agent.messages):
        return None
    session.noted_earlier = True
    where = locate(session.shell)
    if where.notebook is None:
        return None
    try:
        found = _latest(saved_runs(where.notebook))
    except ValueError:
        return None
    if found is None or found.record is None:
        return None
    return (
        f"The saved notebook {where.notebook.name} holds an earlier conversation (its latest "
        f"run: {found.record.run_id}): %agent --continue goes on from it, %agent --continue "
        "RUN from a run of your choice; this run starts a new conversation."
    )
