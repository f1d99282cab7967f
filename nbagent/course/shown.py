"""What a run's outputs show, kept as digests, so the class report can tell an edited answer.

A saved notebook is the student's file: the answer in a cell can be edited in any of the forms
the cell shows it in (plain text, HTML, Markdown) and in the run's own record, with the
provenance left alone. So every output a run writes is marked as the run's
(``metadata["nbagent"]["part_of"]`` is its id; the output that carries the run's record
carries the record instead), and the provenance keeps ``shown``: the ``sha256:`` of each text
form over those outputs, and of the text the run's record keeps. The report recomputes them
from the notebook (:func:`RunOutputs`) and flags a form that differs.

The outputs are taken as a set, wherever they are: a run's outputs may be written into more
than one cell (a headless ``%agent serve`` shows its start in its own cell and its end in the
one that stopped it), and moving cells or outputs about changes nothing a run said. Run ids
are unique in a notebook, so no two runs' outputs mix. A record written before ``shown``
existed is not checked this way; nor is one whose digests a student recomputed (the
recording check still compares the answer with the recording).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from .provenance import KEY, from_metadata, sha256_digest

__all__ = [
    "FORMS",
    "PART",
    "RunOutputs",
    "marked",
    "part_of",
    "shown_digests",
    "with_shown",
]

#: The text forms a cell shows an answer in, each digested on its own.
FORMS = ("text/plain", "text/html", "text/markdown")
#: The run record's own text (the start of the answer it keeps), digested too.
TEXT = "text"
#: Where an output of a run says whose it is.
PART = "part_of"


def marked(metadata: Mapping[str, Any] | None, run_id: str) -> dict[str, Any]:
    """An output's ``metadata`` with the mark that it is part of the run ``run_id`` (an
    output that carries an nbagent record already says whose it is)."""
    out = dict(metadata or {})
    if KEY not in out:
        out[KEY] = {PART: run_id}
    return out


def part_of(metadata: object) -> str | None:
    """The run an output is part of, by its mark (None: no mark)."""
    if not isinstance(metadata, Mapping):
        return None
    value = metadata.get(KEY)
    found = value.get(PART) if isinstance(value, Mapping) else None
    return found if isinstance(found, str) else None


def _text(value: object) -> str | None:
    """A form's value as nbformat keeps it: a string, or a list of lines (joined)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "".join(value)
    return None


def shown_digests(datas: Iterable[Mapping[str, Any]], text: str | None) -> dict[str, str]:
    """The digest of each form over the outputs' ``data`` in order (a form no output has is
    left out), and of the record's ``text``."""
    pieces: dict[str, list[str]] = {form: [] for form in FORMS}
    for data in datas:
        for form in FORMS:
            value = _text(data.get(form)) if isinstance(data, Mapping) else None
            if value is not None:
                pieces[form].append(value)
    digests = {  # in any order: see the module
        form: sha256_digest(json.dumps(sorted(found), ensure_ascii=False))
        for form, found in pieces.items()
        if found
    }
    if text is not None:
        digests[TEXT] = sha256_digest(text)
    return digests


def with_shown(provenance: Mapping[str, Any], digests: Mapping[str, str]) -> dict[str, Any]:
    """A provenance record (as written into metadata) with its ``shown`` digests, read back
    strictly as every record is (one that would not read back is kept as it was, and said
    so: the record must never cost a run its outputs)."""
    out = {**provenance, "shown": dict(digests)}
    try:
        from_metadata(out)
    except ValueError as exc:
        import logging

        logging.getLogger("nbagent").warning("the record keeps no 'shown': %s", exc)
        return dict(provenance)
    return out


class RunOutputs:
    """The outputs of each run in one notebook, by run id (:meth:`add` each output, in order):
    what :meth:`shown` digests, and whether the output carrying a run's record is there."""

    def __init__(self) -> None:
        self._datas: dict[str, list[Mapping[str, Any]]] = {}
        self._carriers: dict[str, Mapping[str, Any]] = {}

    def add(self, output: object) -> None:
        if not isinstance(output, Mapping):
            return
        meta = output.get("metadata")
        value = meta.get(KEY) if isinstance(meta, Mapping) else None
        if not isinstance(value, Mapping):
            return
        carried = value.get("provenance")
        run_id = part_of(meta)
        if isinstance(carried, Mapping) and isinstance(carried.get("run_id"), str):
            run_id = carried["run_id"]
            self._carriers[run_id] = value
        if run_id is None:
            return
        data = output.get("data")
        self._datas.setdefault(run_id, []).append(data if isinstance(data, Mapping) else {})

    def carried(self, run_id: str) -> bool:
        """Whether the output that carries the run's record is in the notebook."""
        return run_id in self._carriers

    def shown(self, run_id: str) -> dict[str, str]:
        """What the notebook shows of the run now, as :func:`shown_digests` gives it."""
        record = self._carriers.get(run_id)
        text = record.get(TEXT) if isinstance(record, Mapping) else None
        return shown_digests(self._datas.get(run_id, ()), text if isinstance(text, str) else None)
