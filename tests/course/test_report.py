"""The class report over generated submissions: each kind of flag where it belongs and nowhere
else, one row per notebook, as a DataFrame, CSV and static HTML, and the command line."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from nbagent.course import FLAGS, class_report, read_class, write_csv, write_html
from nbagent.course._samples import FLAGGED, write_samples
from nbagent.course._scan import SUBCOMMANDS, is_run_line
from nbagent.course.policy import CoursePolicy, load_policy
from nbagent.course.provenance import sha256_digest

POLICY = b"""version = 1
models = ["openai:*", "anthropic:*"]

[[notebooks]]
match = ["exams/*.ipynb"]
ai = false
message = "This is an exam: no AI."
"""
_COURSE: list[CoursePolicy] = []


def course() -> CoursePolicy:
    return _COURSE[0]


@pytest.fixture(scope="module")
def submissions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("class")
    (root / "nbagent-course.toml").write_bytes(POLICY)
    _COURSE[:] = [load_policy(root / "nbagent-course.toml")]
    folder = root / "submissions"
    write_samples(folder, 10, policy=POLICY)
    return folder


def test_each_flag_shows_on_its_notebook_and_nowhere_else(submissions: Path) -> None:
    samples = write_samples(submissions, 10, policy=POLICY)  # the same files again
    rows = read_class([submissions], policy=course())
    by_path = {Path(r.path).resolve(): r for r in rows}
    assert len(rows) == len(samples) == len(by_path)
    for sample in samples:
        row = by_path[sample.path.resolve()]
        assert row.student == sample.student
        assert row.flag_list == ([sample.flag] if sample.flag else []), (row, sample)
        assert set(row.flag_list) <= set(FLAGS)
    assert {s.flag for s in samples if s.flag} == set(FLAGGED.values())


def test_rows_count_runs_modes_tokens_and_cost(submissions: Path) -> None:
    rows = {(r.student, r.notebook): r for r in read_class([submissions], policy=course())}
    exam = rows[("student-001", "exams/final.ipynb")]
    assert (exam.runs, exam.refused, exam.live, exam.models) == (1, 1, 0, "")
    homework = rows[("student-001", "homework-1.ipynb")]
    nb = json.loads(Path(homework.path).read_text())
    records = [
        o["metadata"]["nbagent"]["provenance"] for c in nb["cells"] for o in c.get("outputs", [])
    ]
    assert homework.runs == len(records) >= 2
    assert homework.live == sum(r["mode"] == "live" for r in records)
    assert homework.replayed == sum(r["mode"] == "replayed" for r in records)
    assert homework.input_tokens == sum(r["tokens"]["input"] for r in records)
    assert homework.cost_usd == pytest.approx(sum(r["cost_usd"] for r in records))
    assert homework.models == "; ".join(sorted({r["model"] for r in records}))
    assert homework.policy_digests == sha256_digest(POLICY)[:19]


def test_without_a_course_policy_nothing_is_compared(submissions: Path) -> None:
    flags = {f for r in read_class([submissions]) for f in r.flag_list}
    assert "other_policy" not in flags and "ai_off" not in flags
    assert "output_mismatch" in flags  # what the files alone show is still shown


def test_the_same_report_as_a_dataframe(submissions: Path) -> None:
    frame = class_report(submissions, policy=course())
    rows = read_class([submissions], policy=course())
    assert list(frame["student"]) == [r.student for r in rows]
    assert list(frame.columns[:3]) == ["student", "notebook", "runs"]
    assert int(frame["runs"].sum()) == sum(r.runs for r in rows)
    flagged = frame[frame["flags"] != ""]
    assert set(flagged["student"]) == set(FLAGGED)


def test_generated_samples_are_valid_notebooks(tmp_path: Path) -> None:
    for sample in write_samples(tmp_path, 8, policy=POLICY):
        if sample.flag == "unreadable":
            continue
        nbformat.validate(nbformat.read(str(sample.path), as_version=4))


def test_csv_and_html_hold_every_row_and_the_html_is_static(
    submissions: Path, tmp_path: Path
) -> None:
    rows = read_class([submissions], policy=course())
    with write_csv(rows, tmp_path / "r.csv").open(encoding="utf-8") as file:
        read = list(csv.DictReader(file))
    assert [(r["student"], r["notebook"], r["flags"]) for r in read] == [
        (r.student, r.notebook, r.flags) for r in rows
    ]
    page = write_html(rows, tmp_path / "r.html").read_text(encoding="utf-8")
    assert page.count("<tr") == len(rows) + 1
    assert "<script" not in page and "default-src 'none'" in page


def test_command_line_writes_both_files(submissions: Path, tmp_path: Path) -> None:
    done = subprocess.run(  # the policy is found from the folder upward
        [sys.executable, "-m", "nbagent", "report", str(submissions),
         "--csv", str(tmp_path / "c.csv"), "--html", str(tmp_path / "c.html")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"course policy: {submissions.parent / 'nbagent-course.toml'}" in done.stdout
    assert "student-exam-run/exams/final.ipynb: ai_off" in done.stdout
    assert "flagged" in done.stdout and "student-own-policy/homework-1.ipynb: other_policy" in (
        done.stdout
    )
    assert (tmp_path / "c.csv").read_text().count("\n") == len(read_class([submissions])) + 1
    assert (tmp_path / "c.html").exists()


def test_a_missing_policy_file_is_a_usage_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "nbagent", "report", str(tmp_path), "--policy", "nope.toml"],
        capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2 and "cannot read the policy" in done.stderr
    assert "nope.toml" in done.stderr


def test_subcommand_words_are_the_magic_grammar_s() -> None:
    from nbagent.notebook.command.grammar import GRAMMARS

    assert set(GRAMMARS) <= SUBCOMMANDS
    assert SUBCOMMANDS - set(GRAMMARS) <= {"policy"}


@pytest.mark.parametrize(
    ("rest", "run"),
    [
        ("what is 2 + 2?", True),
        ("-m openai:gpt-4.1 --kernel tidy the data", True),
        ("-- report on the weather", True),
        ("report", False),
        ("tools", False),
        ("-m offline", False),
        ("--new", False),
        ("--budget 500 --approve auto go", True),
        ("--acp claude what is here?", True),
        ("--acp claude --new", False),
        ("acp add mine -- my-agent", False),
        ("", False),
    ],
)
def test_which_agent_lines_are_runs(rest: str, run: bool) -> None:
    assert is_run_line(rest) is run


def test_the_course_room_imports_no_front_end_and_no_pandas() -> None:
    code = (
        "import sys, nbagent.course; "
        "print(sorted(m for m in ('pandas', 'IPython', 'ipywidgets', 'httpx') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout


def test_one_notebook_s_report_read_from_its_file(submissions: Path) -> None:
    from nbagent.course import notebook_report

    edited = notebook_report(submissions / "student-edited-answer" / "homework-1.ipynb")
    text = str(edited)
    assert text.startswith("AI use in this notebook\n4 run(s): 2 live, 2 replayed")
    assert re.search(
        r"to look at: run-[a-z]{5}-1 \(nbagent-recordings/run-1-[0-9a-f]{16}\.json\): the answer "
        "in the cell",
        text,
    ), text
    bundle = edited._repr_mimebundle_()
    assert bundle["text/plain"] == text and "<table>" in bundle["text/html"]
    broken = notebook_report(submissions / "student-broken-file" / "homework-1.ipynb")
    assert str(broken).startswith("homework-1.ipynb was not read: not valid JSON")
    assert broken.runs == () and "<table>" not in broken._repr_mimebundle_()["text/html"]


def test_a_notebook_report_escapes_what_the_file_holds(tmp_path: Path) -> None:
    from nbagent.course import Provenance, notebook_report

    record = Provenance("run-1", "<script>alert(1)</script>", "openai:<b>x</b>", "openai", "live")
    output = {"output_type": "display_data", "data": {"text/plain": "x"},
              "metadata": {"nbagent": {"provenance": record.to_metadata()}}}  # fmt: skip
    cell = {"cell_type": "code", "id": "a", "metadata": {}, "execution_count": 1,
            "source": "%agent hi", "outputs": [output]}  # fmt: skip
    path = tmp_path / "n.ipynb"
    path.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4,
                                "nbformat_minor": 5}))  # fmt: skip
    shown = notebook_report(path)._repr_mimebundle_()["text/html"]
    assert "<script" not in shown and "<b>" not in shown
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in shown and "openai:&lt;b&gt;x" in shown


def test_a_served_session_is_read_by_the_class_report_as_a_run_of_mode_served(
    tmp_path: Path,
) -> None:
    """``%agent serve`` records what an external agent asked and got (mode ``served``): the
    class report counts it, asks it for no recording and no price, and shows its calls."""
    from nbagent.course import CallRecord, Provenance, notebook_report

    record = Provenance(
        "serve-1", "tool calls from an MCP client", None, None, "served",
        calls=(CallRecord("delete_file", "denied", "denied", '{"path": "<i>a</i>"}', "no"),),
    )  # fmt: skip
    output = {"output_type": "display_data", "data": {"text/plain": "x"},
              "metadata": {"nbagent": {"provenance": record.to_metadata()}}}  # fmt: skip
    cell = {"cell_type": "code", "id": "a", "metadata": {}, "execution_count": 1,
            "source": "%agent serve", "outputs": [output]}  # fmt: skip
    folder = tmp_path / "student-009"
    folder.mkdir()
    path = folder / "n.ipynb"
    path.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4,
                                "nbformat_minor": 5}))  # fmt: skip
    (row,) = read_class([tmp_path])
    assert row.error == "" and row.problems == "" and row.flags == ""
    assert (row.runs, row.live, row.replayed, row.offline, row.refused) == (1, 0, 0, 0, 0)
    assert row.cost_usd == 0 and row.unpriced_runs == 0
    shown = notebook_report(path)._repr_mimebundle_()["text/html"]
    assert "served over MCP" in shown and "delete_file" in shown
    assert "<i>" not in shown and "&lt;i&gt;a&lt;/i&gt;" in shown
