"""What one submitted notebook says about its AI use: its runs, and what does not add up.

:func:`scan_notebook` walks a notebook's JSON (already read within bounds by
:mod:`._submissions`) and returns a :class:`NotebookScan`: every run record it carries, read
with the strict :func:`~.provenance.from_metadata`, the follow-ups (``%agent cells`` /
``%agent undo``), and the problems a teacher acts on: an ``%agent`` cell whose outputs show a
run but carry no record (metadata removed), a record that is not one nbagent writes (tampered),
and, when the run's recording is in the submission, a recording or an answer that is not the
one recorded. Nothing in the notebook is run or rendered; every count is bounded.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..document.record import KEY as EDIT_KEY
from ..document.record import EditRecordError, read_edit_record, source_digest
from ..errors import RecordingError
from ._submissions import MAX_RECORDING_BYTES, file_digest, read_bounded
from .provenance import (
    FollowUp,
    Provenance,
    ProvenanceError,
    follow_up_from_metadata,
    from_metadata,
    is_follow_up,
    sha256_digest,
)
from .shown import RunOutputs

__all__ = ["SUBCOMMANDS", "NotebookScan", "Problem", "is_run_line", "scan_notebook"]

#: The words that make an ``%agent`` line a subcommand, not a prompt (tests check that this is
#: the notebook grammar's list: the course package may not import the notebook front end).
SUBCOMMANDS = frozenset(
    {
        "help", "tools", "history", "config", "recording", "usage", "stop", "rules", "allow",
        "deny", "approval-timeout", "mcp", "undo", "cells", "fork", "compare", "map", "report",
        "policy", "serve", "acp",
    }
)  # fmt: skip
_VALUED = frozenset({"-m", "--model", "-o", "--output", "--approve", "--max-steps", "--tools"})
_VALUED |= {"--pace", "--budget", "--acp"}
_MAGIC = re.compile(r"^\s*(?:[A-Za-z_]\w*\s*=\s*)?%agent(?:\s+(.*))?$")
#: Cells looked at per notebook, outputs per cell, records per notebook.
MAX_CELLS = 10_000
MAX_OUTPUTS = 200
MAX_RUNS = 2_000
#: Problems kept per notebook (the rest are counted).
MAX_PROBLEMS = 50


@dataclass(frozen=True)
class Problem:
    """Something a teacher acts on: ``kind`` (a flag's name) and one sentence saying where."""

    kind: str
    text: str


@dataclass
class NotebookScan:
    """The runs one notebook records, the follow-ups, and its problems."""

    runs: list[Provenance] = field(default_factory=list)
    follow_ups: list[FollowUp] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    problems_total: int = 0
    #: ``%agent`` cells that show no run (not executed, or only an error): not a problem.
    unrun_cells: int = 0
    #: Cells ``%agent cells`` made (their own metadata says so), and how many of them were
    #: edited since (their source is no longer the code the agent gave).
    agent_cells: int = 0
    agent_cells_edited: int = 0
    #: Each run read, with its cell's number: checked against what the notebook shows.
    checks: list[tuple[Provenance, int]] = field(default_factory=list, repr=False)
    #: Cells whose own record (``nbagent_edit``) says the agent proposed them and the person
    #: (or a rule) accepted it: new cells, cells edited, and of those, changed since (their
    #: source no longer has the digest the agent left).
    notebook_inserted: int = 0
    notebook_edited: int = 0
    notebook_changed: int = 0
    #: Each recording read once per notebook: its digest (or why not), its final answer.
    recordings: dict[Path, str | Exception] = field(default_factory=dict, repr=False)
    answers: dict[Path, str | Exception] = field(default_factory=dict, repr=False)

    def add(self, kind: str, text: str) -> None:
        self.problems_total += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(Problem(kind, text))

    def fate(self, run_id: str) -> str | None:
        """``cells`` or ``undone`` when a later command did that with the run's code."""
        found = None
        for follow in self.follow_ups:
            if run_id in follow.runs:
                found = follow.action
        return found


def _words(text: str) -> list[str]:
    return text.split()


def is_run_line(rest: str) -> bool:
    """Whether what follows ``%agent`` on a line asks a model (a prompt), as the magic reads
    it: options first, then a subcommand's name (not a run) or a prompt (a run)."""
    words = _words(rest)
    index = 0
    while index < len(words):
        word = words[index]
        if word == "--":
            return index + 1 < len(words)
        if not word.startswith("-"):
            return word not in SUBCOMMANDS
        index += 2 if word in _VALUED and "=" not in word else 1
    return False


def _source(cell: Mapping[str, Any]) -> str:
    source = cell.get("source")
    if isinstance(source, str):
        return source[:100_000]
    if isinstance(source, list):
        return "".join(s for s in source[:10_000] if isinstance(s, str))[:100_000]
    return ""


def _is_run_cell(source: str) -> bool:
    lines = source.lstrip("\n").splitlines()
    if not lines:
        return False
    first = lines[0].strip()
    if first.startswith("%%agent"):
        rest = first[len("%%agent") :]
        body = "\n".join(lines[1:]).strip()
        if rest and not rest[0].isspace():
            return False
        words = _words(rest)
        if words and not words[0].startswith("-") and words[0] in SUBCOMMANDS:
            return False
        return bool(body) or is_run_line(rest)
    for line in lines[:1_000]:
        match = _MAGIC.match(line)
        if match and is_run_line(match.group(1) or ""):
            return True
    return False


def _looks_like_a_record(value: object) -> bool:
    """A value under ``"nbagent"`` meant as a run record (not a progress note nbagent also
    writes, such as a map's ``{"map": …}``)."""
    return isinstance(value, Mapping) and (
        "policy_digest" in value or "mode" in value or "output_digest" in value
    )


def _records(cell: Mapping[str, Any]) -> tuple[list[object], bool]:
    """The values under ``"nbagent"`` in a cell's metadata and its outputs' (where
    :func:`~.provenance.read_output` looks: a run's output holds its provenance inside the run
    view's own record, under ``"provenance"``), and whether the
    outputs show something (a display, a result) beside streams and errors."""
    found: list[object] = []
    shown = False
    metadata = cell.get("metadata")
    if isinstance(metadata, Mapping) and "nbagent" in metadata:
        found.append(metadata["nbagent"])
    outputs = cell.get("outputs")
    if isinstance(outputs, list):
        for output in outputs[:MAX_OUTPUTS]:
            if not isinstance(output, Mapping):
                continue
            if output.get("output_type") in ("display_data", "execute_result"):
                shown = True
            meta = output.get("metadata")
            if isinstance(meta, Mapping) and "nbagent" in meta:
                found.append(meta["nbagent"])
    return found, shown


def scan_notebook(notebook: Mapping[str, Any], root: Path, folder: Path) -> NotebookScan:
    """The runs and problems of one notebook; ``folder`` is the notebook's own folder (run
    recordings are relative to it) and ``root`` the student's folder, which a recording must
    stay inside (a path out of it is a problem, never read)."""
    scan = NotebookScan()
    cells = notebook.get("cells")
    cells = cells if isinstance(cells, list) else []
    if len(cells) > MAX_CELLS:
        scan.add("too_large", f"{len(cells):,} cells: only the first {MAX_CELLS:,} are read")
    written = RunOutputs()
    for number, cell in enumerate(cells[:MAX_CELLS], start=1):
        if not isinstance(cell, Mapping):
            continue
        outputs = cell.get("outputs")
        for output in outputs[:MAX_OUTPUTS] if isinstance(outputs, list) else ():
            written.add(output)
        runs_here = _read_cell(scan, cell, number)
        _count_agent_cell(scan, cell)
        _count_edited_cell(scan, cell, number)
        if not runs_here and cell.get("cell_type") == "code" and _is_run_cell(_source(cell)):
            _, shown = _records(cell)
            if shown:
                scan.add(
                    "metadata_removed",
                    f"cell {number} is an %agent run whose output carries no nbagent record",
                )
            else:
                scan.unrun_cells += 1
    for run, number in scan.checks:
        _check_shown(scan, written, run, number)
    scan.checks.clear()
    for run in scan.runs:
        _check_recording(scan, run, root, folder)
    return scan


def _read_cell(scan: NotebookScan, cell: Mapping[str, Any], number: int) -> int:
    found, _ = _records(cell)
    seen: set[str] = set()
    for value in found:
        if isinstance(value, Mapping) and "provenance" in value:
            value = value["provenance"]  # a run's output: its record holds the provenance
        if is_follow_up(value):
            try:
                follow = follow_up_from_metadata(value)
            except ProvenanceError as exc:
                scan.add("metadata_tampered", f"cell {number}: {exc}")
                continue
            if follow not in scan.follow_ups[-MAX_OUTPUTS:]:  # the command's and its cell's
                scan.follow_ups.append(follow)
            continue
        if not _looks_like_a_record(value):
            if isinstance(value, Mapping) and "run_id" in value and "usage" in value:
                # the run view's own record, written by an nbagent before provenance: the cell
                # did run, but there is nothing to check it by (a note, not a flag)
                scan.add("no_provenance", f"cell {number}: a run record without provenance")
                seen.add(f"old {len(seen)}")
            continue
        try:
            run = from_metadata(value)
        except ProvenanceError as exc:
            scan.add("metadata_tampered", f"cell {number}: {exc}")
            seen.add(f"bad {len(seen)}")  # a damaged record: the cell did run
            continue
        if run.run_id in seen:
            continue  # the same run in the cell's metadata and its output's
        seen.add(run.run_id)
        if len(scan.runs) >= MAX_RUNS:
            scan.add("too_large", f"more than {MAX_RUNS:,} run records: the rest are not read")
            break
        scan.runs.append(run)
        scan.checks.append((run, number))
    return len(seen)


def _check_shown(scan: NotebookScan, shown: RunOutputs, run: Provenance, number: int) -> None:
    """The notebook still shows what the run showed: each form its record digested (plain
    text, HTML, Markdown, the run record's own text) is the same over the run's outputs now."""
    if run.shown is None:
        return  # written before nbagent kept it
    if not shown.carried(run.run_id):
        scan.add(
            "output_mismatch",
            f"cell {number}: {run.run_id}'s record is in the cell, but not the output it wrote",
        )
        return
    now = shown.shown(run.run_id)
    changed = [form for form, digest in run.shown.items() if now.get(form) != digest]
    changed += [form for form in now if form not in run.shown]
    if changed:
        forms = ", ".join("the run's own record" if f == "text" else f for f in changed)
        scan.add(
            "output_mismatch",
            f"cell {number}: what {run.run_id} shows ({forms}) is not what the run showed",
        )


def _count_agent_cell(scan: NotebookScan, cell: Mapping[str, Any]) -> None:
    """A cell ``%agent cells`` made says so in its own metadata (the record of the command, a
    ``cells`` follow-up); its source then is, or is no longer, the code of that record."""
    metadata = cell.get("metadata")
    value = metadata.get("nbagent") if isinstance(metadata, Mapping) else None
    if cell.get("cell_type") != "code" or not is_follow_up(value):
        return
    try:
        follow = follow_up_from_metadata(value)
    except ProvenanceError:
        return  # flagged as tampered by _read_cell
    if follow.action != "cells":
        return
    scan.agent_cells += 1
    if sha256_digest(_source(cell).rstrip() + "\n") != follow.code_digest:
        scan.agent_cells_edited += 1


def _count_edited_cell(scan: NotebookScan, cell: Mapping[str, Any], number: int) -> None:
    """A cell the notebook tools inserted or edited says so in its own record (see
    :mod:`nbagent.document.record`); a record that does not read is flagged as tampered."""
    metadata = cell.get("metadata")
    value = metadata.get(EDIT_KEY) if isinstance(metadata, Mapping) else None
    if value is None:
        return
    try:
        entries = read_edit_record(value)
    except EditRecordError as exc:
        scan.add("metadata_tampered", f"cell {number}: {exc}")
        return
    changes = [e for e in entries if e.action in ("inserted", "edited")]
    if not changes:
        return
    if any(e.action == "inserted" for e in changes):
        scan.notebook_inserted += 1
    else:
        scan.notebook_edited += 1
    if source_digest(_source(cell)) != changes[-1].source_digest:
        scan.notebook_changed += 1


def _recorded_answer(path: Path) -> str:
    """The final answer text of a recording: the text of its last step that has any."""
    from ..recording import Recording

    data = read_bounded(path, MAX_RECORDING_BYTES)
    recording = Recording.from_json(data.decode("utf-8"), source=path.name)
    for step in reversed(recording.steps):
        texts = [e.get("text", "") for e in step.events if e.get("type") == "text"]
        if texts:
            return "".join(t for t in texts if isinstance(t, str))
    return ""


def _check_recording(scan: NotebookScan, run: Provenance, root: Path, folder: Path) -> None:
    if run.recording is None:
        return
    label = f"{run.run_id} ({run.recording})"
    relative = Path(run.recording)
    if relative.is_absolute() or ".." in relative.parts:
        scan.add("output_mismatch", f"{label}: the recording path leaves the submission")
        return
    path = folder / relative
    real = Path(os.path.realpath(path))
    try:
        real.relative_to(os.path.realpath(root))
    except ValueError:
        scan.add("output_mismatch", f"{label}: the recording is a link out of the submission")
        return
    if not real.exists():  # not handed in: nothing to check against (a note, not a flag)
        scan.add("unchecked", f"{label}: the recording is not in the submission, so not checked")
        return
    known = scan.recordings.get(real)  # several runs may name one recording: read it once
    if known is None:
        try:
            known = file_digest(real)
        except (OSError, ValueError) as exc:
            known = exc
        scan.recordings[real] = known
    if isinstance(known, Exception):
        scan.add("output_mismatch", f"{label}: the recording cannot be read ({known})")
        return
    if run.recording_digest is not None and known != run.recording_digest:
        scan.add("output_mismatch", f"{label}: the recording changed since the run")
        return
    if run.output_digest is None:
        return
    answer = scan.answers.get(real)
    if answer is None:
        try:
            answer = _recorded_answer(real)
        except (OSError, ValueError, UnicodeDecodeError, RecordingError) as exc:
            answer = exc
        scan.answers[real] = answer
    if isinstance(answer, Exception):
        why = str(answer)[:200]
        scan.add("output_mismatch", f"{label}: the recording is not readable ({why})")
        return
    if sha256_digest(answer) != run.output_digest:
        scan.add("output_mismatch", f"{label}: the answer in the cell is not the recorded one")
