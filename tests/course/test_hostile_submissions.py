"""Submissions are untrusted files: each hostile one is a row with its error (or a flag), never
a crash, never code run, never HTML rendered live, and reading one is bounded in memory."""

from __future__ import annotations

import json
import os
import re
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from nbagent.course import read_class, write_csv, write_html
from nbagent.course._samples import write_samples
from nbagent.course._submissions import MAX_NOTEBOOK_BYTES
from nbagent.course.provenance import Provenance, sha256_digest


def _notebook(*cells: dict[str, Any]) -> dict[str, Any]:
    return {"cells": list(cells), "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def _run_cell(record: Any, source: str = "%agent hello", **output: Any) -> dict[str, Any]:
    out = {"output_type": "display_data", "data": {"text/plain": "hi"}, "metadata": {}}
    if record is not None:
        out["metadata"] = {"nbagent": record}
    out.update(output)
    return {"cell_type": "code", "id": "a", "metadata": {}, "execution_count": 1,
            "source": source, "outputs": [out]}  # fmt: skip


def _record(**changes: Any) -> dict[str, Any]:
    values: dict[str, Any] = {"run_id": "run-1", "prompt": "hello", "model": "openai:gpt-4.1",
                              "provider": "openai", "mode": "live", "input_tokens": 10,
                              "output_tokens": 5, "requests": 1, "cost_usd": 0.001}  # fmt: skip
    values.update(changes)
    return Provenance(**values).to_metadata()


def _write(folder: Path, student: str, name: str, content: Any) -> Path:
    path = folder / student / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content if isinstance(content, str) else json.dumps(content), "utf-8")
    return path


def _row(folder: Path, student: str) -> Any:
    (row,) = [r for r in read_class([folder]) if r.student == student]
    return row


def _row_and_peak(folder: Path, student: str) -> tuple[Any, int]:
    """The student's row, and the most memory Python held while the report read it."""
    tracemalloc.start()
    try:
        row = _row(folder, student)
        return row, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"[" * 200_000 + b"]" * 200_000, "nested deeper than 100 levels"),
        (b'{"cells": [' + b"{" * 5000, "nested deeper than 100 levels"),
        (b"not json at all", "not valid JSON"),
        (b"\xff\xfe{}", "not UTF-8 text"),
        (b'{"cells": [], "nbformat": 4, "nbformat": 3}', "appears twice"),
        (b'{"cells": [], "nbformat": NaN}', "not strict JSON"),
        (b'["a list"]', "its JSON is not an object"),
        (b'{"cells": [], "nbformat": 3}', "not a version 4 notebook"),
        (b'{"cells": {}, "nbformat": 4}', "no list of cells"),
        (b"", "not valid JSON"),
    ],
)
def test_a_malformed_notebook_is_a_row_with_its_error(
    tmp_path: Path, content: bytes, says: str
) -> None:
    _write(tmp_path, "mallory", "hw.ipynb", content)
    row = _row(tmp_path, "mallory")
    assert row.flags == "unreadable" and says in row.error, row
    assert row.runs == 0


def test_a_huge_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "mallory" / "huge.ipynb"
    path.parent.mkdir()
    with path.open("wb") as file:  # 1 GiB, sparse: no disk used, but every byte would be read
        file.truncate(2**30)
    row, peak = _row_and_peak(tmp_path, "mallory")
    assert "1,024.0 MiB, more than the limit" in row.error and row.flags == "unreadable"
    assert peak < 2 * 2**20, f"{peak:,} bytes held to refuse it"


def test_memory_per_file_is_bounded_by_the_size_limit(tmp_path: Path) -> None:
    blob = "x" * (MAX_NOTEBOOK_BYTES - 1000)  # just under the limit: it is read and parsed
    _write(tmp_path, "big", "hw.ipynb", _notebook(
        {"cell_type": "markdown", "id": "m", "metadata": {}, "source": blob}))  # fmt: skip
    row, peak = _row_and_peak(tmp_path, "big")
    assert row.error == "" and row.runs == 0
    assert peak < 6 * MAX_NOTEBOOK_BYTES, f"{peak:,} bytes for a {MAX_NOTEBOOK_BYTES:,}-byte file"


def test_a_symlink_out_of_the_folder_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    secret = _write(outside, "teacher", "answers.ipynb", _notebook(_run_cell(_record())))
    folder = tmp_path / "submissions"
    (folder / "mallory").mkdir(parents=True)
    (folder / "mallory" / "hw.ipynb").symlink_to(secret)
    (folder / "mallory" / "more").symlink_to(outside / "teacher", target_is_directory=True)
    rows = {r.notebook: r for r in read_class([folder]) if r.student == "mallory"}
    assert set(rows) == {"hw.ipynb", "more/"}  # the linked folder is not walked into
    assert "symlink to a file outside the folder" in rows["hw.ipynb"].error
    assert rows["more/"].error == "a link to a folder: not followed"
    assert all(r.runs == 0 and r.flags == "unreadable" for r in rows.values())


def test_a_symlink_inside_the_folder_is_read(tmp_path: Path) -> None:
    real = _write(tmp_path, "alice", "hw.ipynb", _notebook(_run_cell(_record())))
    (tmp_path / "alice" / "copy.ipynb").symlink_to(real)
    assert [r.runs for r in read_class([tmp_path])] == [1, 1]


def test_a_fifo_does_not_hang_the_report(tmp_path: Path) -> None:
    (tmp_path / "mallory").mkdir()
    os.mkfifo(tmp_path / "mallory" / "pipe.ipynb")
    row = _row(tmp_path, "mallory")
    assert "not a regular file" in row.error


def test_script_in_outputs_and_prompts_is_only_ever_text(tmp_path: Path) -> None:
    evil = "<script>alert('x')</script><img src=x onerror=alert(1)>"
    cell = _run_cell(
        _record(prompt=evil, model=f"openai:{evil}"[:200], run_id="run-<b>1</b>"),
        data={"text/html": evil, "application/javascript": "alert(1)", "text/plain": evil},
    )
    _write(tmp_path, "<i>script<script>", "=cmd|' calc'!A0.ipynb", _notebook(cell))
    rows = read_class([tmp_path])
    page = write_html(rows, tmp_path / "r.html").read_text()
    assert "<script" not in page and "<img" not in page and "&lt;script&gt;" in page
    text = write_csv(rows, tmp_path / "r.csv").read_text()
    assert ",\"'=cmd|" in text  # a spreadsheet shows the value instead of running it
    assert rows[0].models.startswith("openai:<script>")  # kept as text, for the teacher to see


#: What a formula can hide behind in a name a submission chooses (a folder or file name: no
#: "/"): a line break (the next line of the file would start with it), a tab, blanks,
#: full-width signs, DDE.
HOSTILE = [
    "\r=1+1", "\r@SUM(A1:A9)", "\n+HYPERLINK(\"http:x\")", "\t-2+3", "=cmd|' -c calc'!A0",
    "ok\r\n=2*3", " =1+1", "\u00a0@A1", "\uff1d1+1", "a\x0b=1", "b\u2028=1", "-5",
    "@\r\n@", '"=1+1"', "x\r\r\r=1",
]  # fmt: skip


def _formula_at_start(text: str) -> bool:
    return text.lstrip(" \u00a0\u3000")[:1] in set("=+-@\uff1d\uff0b\uff0d\uff20")


def test_no_name_a_submission_chooses_starts_a_formula_in_the_csv(tmp_path: Path) -> None:
    import csv

    for n, evil in enumerate(HOSTILE):
        record = _record(prompt=f"ask {evil}", model=f"openai:{evil}", run_id=f"run-{n}{evil}"[:60])
        _write(tmp_path, f"s{n}{evil}", f"{evil}.ipynb", _notebook(_run_cell(record)))
    rows = read_class([tmp_path])
    assert {r.student for r in rows} == {f"s{n}{evil}" for n, evil in enumerate(HOSTILE)}
    assert {r.notebook for r in rows} == {f"{evil}.ipynb" for evil in HOSTILE}
    raw = write_csv(rows, tmp_path / "report.csv").read_bytes().decode("utf-8")
    lines = raw.split("\n")
    assert lines[-1] == "" and len(lines) == len(rows) + 2  # a header, a line per row: no break
    for line in lines[:-1]:
        assert "\r" not in line and not _formula_at_start(line)
        assert not _formula_at_start(line.lstrip('"'))
    with (tmp_path / "report.csv").open(newline="", encoding="utf-8") as handle:
        parsed = list(csv.reader(handle))
    assert len(parsed) == len(rows) + 1
    for fields in parsed:
        for field in fields:
            for piece in re.split(r"[\r\n\x0b\x0c\u2028\u2029\t]", field):
                assert not _formula_at_start(piece), (field, piece)
    notebooks = {dict(zip(parsed[0], fields, strict=True))["notebook"] for fields in parsed[1:]}
    assert "\\r=1+1.ipynb" in notebooks  # the line break shown, not kept
    assert "'=cmd|' -c calc'!A0.ipynb" in notebooks and "' =1+1.ipynb" in notebooks
    assert "'-5.ipynb" in notebooks and "'\uff1d1+1.ipynb" in notebooks


@pytest.mark.parametrize(
    ("record", "says"),
    [
        ({**_record(), "prompt": "x" * 10_000_000}, "prompt: is 10000000 characters"),
        ({**_record(), "calls": [{"tool": "t", "decision": "auto", "status": "done"}] * 100_000},
         "calls: holds 100000 items"),
        ({**_record(), "version": True}, "unknown version True"),
        ({**_record(), "cost_usd": -1}, "cost_usd: must be a finite number"),
        ({**_record(), "extra": {"deep": [[[[1]]]]}}, "unknown key(s) 'extra'"),
        ({**_record(), "policy_digest": "sha256:zz"}, "policy_digest: must be 'sha256:'"),
        ({"mode": "live"}, "missing key(s)"),
    ],
)  # fmt: skip
def test_absurd_metadata_is_flagged_as_tampered(tmp_path: Path, record: Any, says: str) -> None:
    _write(tmp_path, "mallory", "hw.ipynb", _notebook(_run_cell(record)))
    row = _row(tmp_path, "mallory")
    assert row.flag_list == ["metadata_tampered"] and says in row.problems, row
    assert len(row.problems) <= 2000


def test_a_run_cell_without_its_record_is_flagged_and_an_unrun_one_is_not(tmp_path: Path) -> None:
    unrun = _run_cell(None)
    unrun["outputs"] = []
    subcommand = _run_cell(None, source="%agent tools")
    _write(tmp_path, "a", "hw.ipynb", _notebook(unrun, subcommand))
    _write(tmp_path, "b", "hw.ipynb", _notebook(_run_cell(None, source="x = %agent -m m hi")))
    _write(tmp_path, "c", "hw.ipynb", _notebook(_run_cell(None, source="%%agent\nsum it")))
    rows = {r.student: r for r in read_class([tmp_path])}
    assert rows["a"].flags == ""
    assert rows["b"].flags == rows["c"].flags == "metadata_removed"


def test_a_recording_path_out_of_the_submission_is_never_read(tmp_path: Path) -> None:
    outside = _write(tmp_path, "teacher", "rec.json", "{}")
    for student, where in (("m1", "../../teacher/rec.json"), ("m2", str(outside))):
        _write(tmp_path / "s", student, "hw.ipynb", _notebook(_run_cell(_record(
            recording=where, recording_digest=sha256_digest(b"{}")))))  # fmt: skip
    (tmp_path / "s" / "m3" / "nbagent-recordings").mkdir(parents=True)
    (tmp_path / "s" / "m3" / "nbagent-recordings" / "r.json").symlink_to(outside)
    linked = _record(recording="nbagent-recordings/r.json", recording_digest=sha256_digest(b"{}"))
    _write(tmp_path / "s", "m3", "hw.ipynb", _notebook(_run_cell(linked)))
    rows = {r.student: r for r in read_class([tmp_path / "s"])}
    assert "leaves the submission" in rows["m1"].problems
    assert "leaves the submission" in rows["m2"].problems
    assert "a link out of the submission" in rows["m3"].problems
    assert all(r.flags == "output_mismatch" for r in rows.values())


def test_a_changed_recording_is_flagged(tmp_path: Path) -> None:
    samples = write_samples(tmp_path, 7)
    alice = next(s for s in samples if s.student == "student-001" and s.flag is None)
    recordings = sorted((alice.path.parent / "nbagent-recordings").iterdir())
    recordings[0].write_text(recordings[0].read_text().replace("stop", "STOP"))
    rows = [r for r in read_class([tmp_path]) if r.student == "student-001"]
    assert any("the recording changed since the run" in r.problems for r in rows)


def test_many_problems_make_a_bounded_row_that_counts_the_rest(tmp_path: Path) -> None:
    cells = [_run_cell(None) for _ in range(500)]
    _write(tmp_path, "m", "hw.ipynb", _notebook(*cells))
    (row,) = read_class([tmp_path])
    shown = row.problems.count("is an %agent run")
    assert row.flags == "metadata_removed" and row.problems.endswith(f"; and {500 - shown} more")
    assert len(row.problems) <= 2000 and shown > 10


def test_a_recording_not_handed_in_is_said_but_not_flagged(tmp_path: Path) -> None:
    record = _record(recording="nbagent-recordings/gone.json", recording_digest=sha256_digest(b"x"))
    _write(tmp_path, "ada", "hw.ipynb", _notebook(_run_cell(record)))
    (row,) = read_class([tmp_path])
    assert row.flags == "" and row.runs == 1
    assert "the recording is not in the submission, so not checked" in row.problems


def test_every_run_naming_an_unreadable_recording_is_said(tmp_path: Path) -> None:
    folder = tmp_path / "ada"
    (folder / "nbagent-recordings").mkdir(parents=True)
    (folder / "nbagent-recordings" / "r.json").write_text("not a recording")
    digest = sha256_digest(b"not a recording")
    cells = [
        _run_cell(_record(run_id=f"run-{n}", recording="nbagent-recordings/r.json",
                          recording_digest=digest, output_digest=sha256_digest("hi")))
        for n in range(1, 4)
    ]  # fmt: skip
    _write(tmp_path, "ada", "hw.ipynb", _notebook(*cells))
    (row,) = read_class([tmp_path])
    assert row.flags == "output_mismatch"
    assert row.problems.count("the recording is not readable") == 3  # said for each run
