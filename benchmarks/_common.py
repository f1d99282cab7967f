"""Shared benchmark machinery: alternating rounds, robust statistics, tables, JSON hand-off.

Every benchmark module builds a :class:`Section` and either prints it (run alone) or hands it to
``run.py`` as JSON (``--json``). A contender is a zero-argument callable that performs one
measurement and returns *seconds per unit* (per step, per chunk, per call ...). Contenders are run
in a different order every round (this machine's speed drifts up to 2x), and each ratio is the
median of the per-round ratios against the reference contender measured in the same round.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

JSON_MARK = "@@BENCH-JSON@@"


class NotInstalled(Exception):
    """A contender cannot run here (a peer package is missing); the reason is printed."""


@dataclass
class Row:
    label: str  # e.g. "K=100"
    contender: str
    status: str = "ok"  # ok | not installed | crashed | n/a
    reason: str = ""
    unit: str = "us"
    scale: float = 1e6  # seconds -> shown unit
    values: list[float] = field(default_factory=list)  # seconds per unit, one per round
    ratios: list[float] = field(default_factory=list)  # vs the reference, one per round
    reference: str = ""
    extra: str = ""  # e.g. "52,000 chunks/s"

    @property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else float("nan")


@dataclass
class Goal:
    text: str
    met: bool | None  # None: could not be measured
    detail: str = ""


@dataclass
class Section:
    key: str
    title: str
    rows: list[Row] = field(default_factory=list)
    goals: list[Goal] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    crashes: list[str] = field(default_factory=list)

    def goal(self, text: str, met: bool | None, detail: str = "") -> None:
        self.goals.append(Goal(text, met, detail))

    def row(self, label: str, contender: str) -> Row | None:
        for row in self.rows:
            if row.label == label and row.contender == contender:
                return row
        return None

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Section:
        data = json.loads(text)
        section = cls(data["key"], data["title"], notes=data["notes"], crashes=data["crashes"])
        section.rows = [Row(**row) for row in data["rows"]]
        section.goals = [Goal(**goal) for goal in data["goals"]]
        return section


def compare(
    section: Section,
    label: str,
    contenders: dict[str, Callable[[], Callable[[], float]]],
    *,
    rounds: int,
    reference: str,
    unit: str = "us",
    scale: float = 1e6,
    rounds_for: dict[str, int] | None = None,
    references: dict[str, str] | None = None,
) -> dict[str, Row]:
    """Measure ``contenders`` side by side, alternating their order every round.

    Each value of ``contenders`` is a *setup* function returning the measurement callable (setup
    raises :class:`NotInstalled` when a peer is missing). ``rounds_for`` lets a slow contender run
    fewer rounds (it then joins only the first rounds). ``references`` gives a contender another
    reference than ``reference`` (nbagent against a floor, the peers against nbagent). A crash is
    recorded in the section (and makes ``run.py`` exit non-zero); the other contenders go on.
    """
    references = references or {}
    rows: dict[str, Row] = {}
    measures: dict[str, Callable[[], float]] = {}
    for name, setup in contenders.items():
        own = references.get(name, reference)
        row = Row(label, name, unit=unit, scale=scale, reference=own)
        rows[name] = row
        section.rows.append(row)
        try:
            measures[name] = setup()
        except NotInstalled as exc:
            row.status, row.reason = "not installed", str(exc)
        except Exception as exc:
            _crashed(section, row, exc)
    names = list(measures)
    for index in range(rounds):
        # Rotate, and reverse every other round, so nobody always runs first or last.
        order = names[index % len(names) :] + names[: index % len(names)] if names else []
        if index % 2:
            order.reverse()
        done: dict[str, float] = {}
        for name in order:
            if name not in measures:
                continue
            if rounds_for and index >= rounds_for.get(name, rounds):
                continue
            try:
                value = measures[name]()
            except Exception as exc:
                _crashed(section, rows[name], exc)
                del measures[name]
                continue
            rows[name].values.append(value)
            done[name] = value
        for name, value in done.items():
            base = done.get(rows[name].reference)
            if base:
                rows[name].ratios.append(value / base)
    return rows


def _crashed(section: Section, row: Row, exc: BaseException) -> None:
    row.status = "crashed"
    row.reason = f"{type(exc).__name__}: {exc}"
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    section.crashes.append(f"{section.key} / {row.label} / {row.contender}:\n{trace}")


def spread(values: list[float], scale: float = 1.0) -> str:
    """``median [min-max]`` (n < 5) or ``median [q1-q3]`` (n >= 5), scaled."""
    if not values:
        return "-"
    med = statistics.median(values) * scale
    if len(values) >= 5:
        q = statistics.quantiles(values, n=4, method="inclusive")
        lo, hi = q[0] * scale, q[2] * scale
    else:
        lo, hi = min(values) * scale, max(values) * scale
    return f"{_num(med)} [{_num(lo)}-{_num(hi)}]"


def _num(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 0.1:
        return f"{value:.2f}"
    return f"{value:.2g}"


def render(section: Section) -> str:
    """The section as Markdown: a table, the goals, the notes."""
    out = [f"### {section.title}", ""]
    if section.rows:
        out.append("| case | contender | per unit: median [spread] | ratio vs ref | n | note |")
        out.append("|---|---|---|---|---|---|")
        for row in section.rows:
            if row.status != "ok":
                note = f"**{row.status}**: {row.reason}"
                out.append(f"| {row.label} | {row.contender} | - | - | 0 | {note} |")
                continue
            value = f"{spread(row.values, row.scale)} {row.unit}"
            if row.contender == row.reference:
                ratio = "1 (ref)"
            elif row.ratios:
                ratio = f"{spread(row.ratios)}x vs {row.reference}"
            else:
                ratio = "-"
            out.append(
                f"| {row.label} | {row.contender} | {value} | {ratio} | {len(row.values)} "
                f"| {row.extra} |"
            )
        out.append("")
    if section.goals:
        for goal in section.goals:
            mark = {True: "MET", False: "MISSED", None: "NOT MEASURED"}[goal.met]
            out.append(f"- **{mark}** {goal.text}" + (f" - {goal.detail}" if goal.detail else ""))
        out.append("")
    for note in section.notes:
        out.append(f"- note: {note}")
    if section.notes:
        out.append("")
    for crash in section.crashes:
        out.append("```\nCRASH " + crash.rstrip() + "\n```")
    return "\n".join(out)


def main(build: Callable[[bool], Section]) -> None:
    """Entry point for a benchmark module run alone or by ``run.py``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="CI smoke: fewer, shorter rounds")
    parser.add_argument("--json", action="store_true", help="print the section as JSON (run.py)")
    args = parser.parse_args()
    section = build(args.quick)
    if args.json:
        sys.stdout.write("\n" + JSON_MARK + section.to_json() + "\n")
    else:
        print(render(section))
    sys.exit(1 if section.crashes else 0)


def median_ratio(row: Row | None) -> float | None:
    if row is None or not row.ratios:
        return None
    return statistics.median(row.ratios)


def paired_ratio(row: Row | None, reference: Row | None) -> float | None:
    """The median of ``row``'s per-round ratios to ``reference``, for two contenders that ran
    in every round of the same ``compare`` (their values pair up by round)."""
    if row is None or reference is None or not row.values:
        return None
    if len(row.values) != len(reference.values):
        return None
    return statistics.median(a / b for a, b in zip(row.values, reference.values, strict=True))


def median_of(row: Row | None) -> float | None:
    if row is None or not row.values:
        return None
    return statistics.median(row.values)


def describe_import_error(package: str, exc: BaseException) -> NotInstalled:
    return NotInstalled(
        f"{package} is not importable ({type(exc).__name__}: {exc}); "
        "install the bench extra: scripts/setup 'test,bench'"
    )


def fmt(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"
