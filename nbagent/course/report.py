"""The class report: one row per submitted notebook, with the flags a teacher acts on.

:func:`read_class` reads every notebook under the folders given (see :mod:`._submissions` for
who is the student and what is read) and returns :class:`NotebookRow` values;
:func:`class_report` returns the same as a ``pandas.DataFrame``; :func:`write_csv` and
:func:`write_html` write them as a CSV file and as a static HTML table (every value escaped, no
script). ``python -m nbagent report FOLDER…`` does all three.

The flags (:data:`FLAGS`): runs in a notebook the course policy marks AI off, runs under another
policy than the course's, outputs that do not match their run's recording, run records removed
or tampered with, and notebooks that could not be read. A flag is a question for the teacher,
not a verdict: a policy edited on purpose by the teacher mid-course shows as another digest too.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable, Sequence
from dataclasses import astuple
from pathlib import Path
from typing import TYPE_CHECKING

from ._rows import COLUMNS, FLAGS, NotebookRow
from ._scan import NotebookScan, scan_notebook
from ._submissions import Found, find_notebooks, read_notebook
from .policy import CoursePolicy, CoursePolicyError, find_policy, load_policy

if TYPE_CHECKING:
    import pandas

__all__ = [
    "FLAGS",
    "NotebookRow",
    "class_report",
    "read_class",
    "write_csv",
    "write_html",
]


def _ai_off(course: CoursePolicy | None, notebook: str) -> str | None:
    """The teacher's message when the course policy marks ``notebook`` (its path below the
    student's folder, as the policy's globs are written) AI off; else None."""
    if course is None:
        return None
    rules = course.for_notebook(notebook)
    return None if rules.ai else rules.message or "AI is off for this notebook"


def _row_of(found: Found, course: CoursePolicy | None) -> NotebookRow:
    def failed(why: str) -> NotebookRow:
        return NotebookRow(
            found.student, found.notebook, flags="unreadable", error=why[:500], path=str(found.path)
        )

    try:
        notebook = read_notebook(found)
    except ValueError as exc:
        return failed(str(exc))
    folder = Path(os.path.realpath(found.path)).parent
    try:
        scan = scan_notebook(notebook, found.root, folder)
    except RecursionError:  # cannot happen within MAX_DEPTH, but a row is never a crash
        return failed("nested too deeply to read")
    del notebook
    return _summarise(scan, found, course)


def _summarise(scan: NotebookScan, found: Found, course: CoursePolicy | None) -> NotebookRow:
    runs = scan.runs
    modes = {"live": 0, "replayed": 0, "offline": 0, "served": 0}
    refused = 0
    models: dict[str, None] = {}
    digests: dict[str, None] = {}
    cost = 0.0
    unpriced = 0
    ai_off_message = _ai_off(course, found.notebook)
    others: dict[str, list[str]] = {}  # another policy's digest -> the runs made under it
    counted = 0  # runs: a map's record stands for its rows
    for run in runs:
        many = run.rows if run.rows is not None else 1
        counted += many if run.refused is None or run.requests else 1
        if run.refused is not None and not run.requests:  # refused before it asked a model
            refused += 1
        else:
            modes[run.mode] += many
            if run.model:
                models[run.model] = None
            if run.cost_usd is None:
                unpriced += 1 if run.requests or run.mode == "live" else 0
            else:
                cost += run.cost_usd
        digests[run.policy_digest or "none"] = None
        if course is not None and run.policy_digest != course.digest:
            others.setdefault(run.policy_digest or "none", []).append(run.run_id)
        if (run.refused is None or run.requests) and (ai_off_message is not None or run.ai_off):
            where = "the course policy" if ai_off_message is not None else "its own record"
            scan.add("ai_off", f"{run.run_id} asked a model in a notebook {where} marks AI off")
    for digest, ids in others.items():
        assert course is not None
        shown = ", ".join(ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
        scan.add(
            "other_policy",
            f"{shown} ran under policy {_short(digest)}, not the course's {_short(course.digest)}",
        )
    kinds = dict.fromkeys(p.kind for p in scan.problems)
    problems = _problems_text(scan)
    return NotebookRow(
        found.student,
        found.notebook,
        runs=counted,
        live=modes["live"],
        replayed=modes["replayed"],
        offline=modes["offline"],
        refused=refused,
        agent_cells=scan.agent_cells,
        agent_cells_edited=scan.agent_cells_edited,
        notebook_inserted=scan.notebook_inserted,
        notebook_edited=scan.notebook_edited,
        notebook_changed=scan.notebook_changed,
        models="; ".join(sorted(models)),
        input_tokens=sum(r.input_tokens for r in runs),
        output_tokens=sum(r.output_tokens for r in runs),
        cost_usd=round(cost, 6),
        unpriced_runs=unpriced,
        policy_digests="; ".join(_short(d) for d in digests),
        flags=";".join(k for k in FLAGS if k in kinds),
        problems=problems,
        path=str(found.path),
    )


def _problems_text(scan: NotebookScan, limit: int = 2_000) -> str:
    """The problems in one text of at most ``limit`` characters, saying how many are left out."""
    shown: list[str] = []
    used = 0
    for problem in scan.problems:
        text = problem.text[:500]
        if used + len(text) + 2 > limit - 40:
            break
        shown.append(text)
        used += len(text) + 2
    text = "; ".join(shown)
    if scan.problems_total > len(shown):
        text += f"; and {scan.problems_total - len(shown):,} more"
    return text


def _short(digest: str | None) -> str:
    if not digest or digest == "none":
        return "none"
    return digest[: len("sha256:") + 12]


def read_class(
    paths: Iterable[str | os.PathLike[str]],
    *,
    policy: str | os.PathLike[str] | CoursePolicy | None = None,
) -> list[NotebookRow]:
    """One :class:`NotebookRow` per notebook under ``paths`` (folders or notebook files),
    compared with the course ``policy`` (a file, or None: no policy comparison). Never raises
    for a submission: a file that cannot be read is a row with its error."""
    course = load_policy(Path(policy)) if isinstance(policy, (str, os.PathLike)) else policy
    return [_row_of(found, course) for found in find_notebooks(paths)]


def class_report(
    paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str],
    *,
    policy: str | os.PathLike[str] | CoursePolicy | None = None,
) -> pandas.DataFrame:
    """The class report as a DataFrame: one row per notebook, the columns of
    :class:`NotebookRow` (pandas is imported here, not with nbagent)."""
    import pandas

    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    rows = read_class(paths, policy=policy)
    return pandas.DataFrame([astuple(r) for r in rows], columns=list(COLUMNS))


#: What makes a spreadsheet cell a formula (or DDE) when it starts one: the ASCII signs and
#: their full-width forms, which some spreadsheets read the same.
_FORMULA = frozenset("=+-@\uff1d\uff0b\uff0d\uff20")
#: Control characters shown as escapes: a line break in a value is where a reader that splits
#: lines (or a spreadsheet importing without quotes) would start a new cell.
_ESCAPES = {"\r": "\\r", "\n": "\\n", "\t": "\\t"}


def _visible(text: str) -> str:
    """``text`` on one line: each control character (C0, DEL, C1, the Unicode line and
    paragraph separators) as an escape (``\\r``, ``\\n``, ``\\x0b``, ``\\u2028``)."""
    out = []
    for char in text:
        code = ord(char)
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif code < 32 or 127 <= code < 160 or code in (0x2028, 0x2029):
            out.append(f"\\x{code:02x}" if code < 256 else f"\\u{code:04x}")
        else:
            out.append(char)
    return "".join(out)


def csv_cell(value: object) -> str:
    """One value as a spreadsheet may safely open it: on one line (control characters
    escaped, so no value can begin a line of the file), and a value a spreadsheet would take as
    a formula (its first character, after any blanks, is ``=``, ``+``, ``-``, ``@`` or a
    full-width one) shown as text by a leading ``'``."""
    text = _visible("" if value is None else str(value))
    if text.lstrip(" \u00a0\u3000")[:1] in _FORMULA:
        text = "'" + text
    return text


def _cells(row: NotebookRow) -> list[str]:
    return [csv_cell(value) for value in astuple(row)]


def to_csv(rows: Sequence[NotebookRow]) -> str:
    """The rows as CSV text: every value quoted and on one line, a value a spreadsheet would
    take as a formula starting with ``'`` (see :func:`csv_cell`)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_ALL)
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow(_cells(row))
    return out.getvalue()


def write_csv(rows: Sequence[NotebookRow], path: str | os.PathLike[str]) -> Path:
    """Write the rows as CSV (UTF-8) to ``path``."""
    target = Path(path)
    target.write_text(to_csv(rows), encoding="utf-8")
    return target


def write_html(
    rows: Sequence[NotebookRow], path: str | os.PathLike[str], *, title: str = "Class report"
) -> Path:
    """Write the rows as one static HTML page (every value escaped; no script)."""
    from ._report_html import page

    target = Path(path)
    target.write_text(page(rows, title=title), encoding="utf-8")
    return target


def summary_lines(rows: Sequence[NotebookRow]) -> list[str]:
    """A few lines for a terminal: how many notebooks, runs and flags."""
    flagged = [r for r in rows if r.flags]
    lines = [f"{len(rows)} notebook(s), {sum(r.runs for r in rows)} run(s), {len(flagged)} flagged"]
    for row in flagged[:50]:
        lines.append(f"  {row.student}/{row.notebook}: {row.flags.replace(';', ', ')}")
    if len(flagged) > 50:
        lines.append(f"  … and {len(flagged) - 50} more (see the CSV)")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m nbagent report FOLDER…``: write the class report; 0, or 2 for bad usage."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m nbagent report",
        description="One row per submitted notebook under FOLDER (submissions/<student>/"
        "<notebook>.ipynb): runs, models, tokens, cost, policy, and flags to look at.",
    )
    parser.add_argument("folders", nargs="+", metavar="FOLDER")
    parser.add_argument(
        "--policy",
        help="the course's policy file, to compare runs with (default: the first "
        "nbagent-course.toml from the first FOLDER upward, or NBAGENT_COURSE_POLICY)",
    )
    parser.add_argument("--no-policy", action="store_true", help="compare with no policy")
    parser.add_argument("--csv", default="class-report.csv", help="(default: %(default)s)")
    parser.add_argument("--html", default="class-report.html", help="(default: %(default)s)")
    args = parser.parse_args(argv)
    found = None if args.no_policy else args.policy or find_policy(Path(args.folders[0]))
    course = None
    if found is not None:
        try:
            course = load_policy(Path(found))
        except CoursePolicyError as exc:
            parser.error(f"cannot read the policy: {exc}")
        print(f"course policy: {found} ({course.digest[:19]}…)")
    else:
        print("course policy: none (runs are not compared with a policy)")
    rows = read_class(args.folders, policy=course)
    for line in summary_lines(rows):
        print(line)
    print(f"wrote {write_csv(rows, args.csv)} and {write_html(rows, args.html)}")
    return 0
