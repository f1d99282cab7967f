"""One notebook's AI use, as a static summary: what ``%agent report`` shows, and what
:func:`notebook_report` reads back from a saved notebook's file.

:func:`runs_bundle` turns run records (:class:`~.provenance.Provenance`) and what later
commands did with their code (:class:`~.provenance.FollowUp`) into a plain mimebundle: escaped
HTML tables and a plain-text twin, no widget and no script, so the summary reads the same in
a saved notebook reopened anywhere. Every string in it came from a prompt, a model or a tool,
so every one is escaped and credential-shaped text is shown as ``***``.
"""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..redact import redact_secrets
from .provenance import FollowUp, Provenance

__all__ = [
    "NotebookReport",
    "fate_of",
    "made_cells",
    "notebook_report",
    "runs_bundle",
    "runs_text",
]

_MODE_WORDS = {
    "live": "live",
    "replayed": "replayed",
    "offline": "offline stand-in",
    "served": "served over MCP (%agent serve)",
}
_KEPT_WORDS = {
    "kept": "kept in the kernel",
    "cells": "kept as cells (%agent cells)",
    "undone": "undone (%agent undo)",
}
#: Characters of a snippet's code shown in the summary (the record keeps 2,000).
_CODE = 600


def fate_of(run: Provenance, follow_ups: Sequence[FollowUp]) -> str | None:
    """``cells`` or ``undone``: the last thing a later command did with this run's code."""
    found = None
    for follow in follow_ups:
        if run.run_id in follow.runs:
            found = follow.action
    return found


def _esc(text: object) -> str:
    return html.escape(redact_secrets(str(text)))


def _sentence_html(sentence: str) -> str:
    """A refusal's sentence: the rule it names as code, the rest escaped text."""
    from .refusal import sentence_parts

    return "".join(
        f"<code>{_esc(text)}</code>" if code else _esc(text)
        for text, code in sentence_parts(sentence)
    )


def _cut(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _mode(run: Provenance) -> str:
    if run.refused is not None and not run.requests:
        return "refused" + (" (AI off)" if run.ai_off else "")
    shown = _MODE_WORDS.get(run.mode, run.mode)
    if run.rows is not None:
        shown += f", a map of {run.rows} run(s)"
    return shown + (", then refused" if run.refused is not None else "")


def _cost(run: Provenance) -> str:
    if run.refused is not None or (run.mode != "live" and not run.cost_usd):
        return "none"
    return "price unknown" if run.cost_usd is None else f"${run.cost_usd:.4f}"


def _policy(run: Provenance) -> str:
    if run.policy_digest is None:
        return "none"
    where = f" ({run.policy_source})" if run.policy_source else ""
    return f"{run.policy_digest[:19]}…{where}"


def _calls(run: Provenance) -> list[str]:
    lines = []
    for c in run.calls:
        line = f"{c.tool}: {c.decision}, {c.status}"
        if c.arguments is not None:
            line += f"\n    asked {_cut(c.arguments, 200)}\n    got {_cut(c.result or '', 200)}"
        lines.append(line)
    more = (run.calls_total or 0) - len(run.calls)
    if more > 0:
        lines.append(f"… and {more} more")
    return lines


def _kept(run: Provenance, fate: str | None, kept: str) -> str:
    """A snippet undone on its own stays undone; else what a later command did with the run's
    code (made into cells, undone), else what the run's record says."""
    chosen = kept if kept == "undone" else fate or kept
    return _KEPT_WORDS.get(chosen, chosen)


def _many(run: Provenance) -> int:
    """How many runs a record stands for: a map's, its rows."""
    return run.rows if run.rows is not None else 1


def _totals(runs: Sequence[Provenance]) -> tuple[str, str]:
    asked = [r for r in runs if r.refused is None or r.requests]  # a model was asked
    live = sum(_many(r) for r in asked if r.mode == "live")
    replayed = sum(_many(r) for r in asked if r.mode == "replayed")
    offline = sum(_many(r) for r in asked if r.mode == "offline")
    served = sum(1 for r in asked if r.mode == "served")
    refused = len(runs) - len(asked)
    total = sum(_many(r) for r in asked) + refused
    tokens_in = sum(r.input_tokens for r in runs)
    tokens_out = sum(r.output_tokens for r in runs)
    priced = [r.cost_usd for r in asked if r.cost_usd is not None]
    unknown = sum(1 for r in asked if r.cost_usd is None and r.mode == "live")
    if live:
        cost = f"${sum(priced):.4f}" + (f" (+{unknown} of unknown price)" if unknown else "")
    else:
        cost = "no cost (no live run)"
    models = sorted({r.model for r in asked if r.model})
    head = (
        f"{total} run(s): {live} live, {replayed} replayed, {offline} offline, "
        f"{refused} refused"
        + (f", {served} served (%agent serve)" if served else "")
        + f" · {tokens_in:,} in / {tokens_out:,} out tokens · {cost}"
    )
    return head, ", ".join(models) or "none"


_NONE_YET = "No %agent run in this notebook's session yet."


def runs_text(
    runs: Sequence[Provenance], follow_ups: Sequence[FollowUp] = (), *, empty: str = _NONE_YET
) -> str:
    """The plain-text summary (the bundle's ``text/plain``); ``empty``: what it says of none."""
    if not runs:
        return empty
    head, models = _totals(runs)
    lines = ["AI use in this notebook", head, f"models: {models}", ""]
    for run in runs:
        fate = fate_of(run, follow_ups)
        lines.append(f"{run.run_id} · {_mode(run)} · {run.model or 'no model'}")
        lines.append(f"  prompt: {_cut(run.prompt, 200)}")
        if run.refused:
            lines.append(f"  refused: {run.refused}")
        lines.append(
            f"  {run.input_tokens:,} in / {run.output_tokens:,} out tokens · "
            f"{run.requests} request(s) · cost {_cost(run)} · {run.seconds:.1f} s · "
            f"{run.stop_reason} · policy {_policy(run)}"
        )
        for call in _calls(run):
            lines.append(f"  call {call}")
        for snippet in run.snippets:
            first = snippet.code.strip().splitlines()[0] if snippet.code.strip() else ""
            lines.append(f"  code ({_kept(run, fate, snippet.kept)}): {_cut(first, 100)}")
    made = made_cells(follow_ups)
    if made:
        lines += ["", f"{len(made)} cell(s) made by %agent cells:", *(f"  {m}" for m in made)]
    return redact_secrets("\n".join(lines))


def made_cells(follow_ups: Sequence[FollowUp]) -> list[str]:
    """One line for each cell ``%agent cells`` made: its runs' steps, and whether each step's
    code is in the cell or left out (undone, failed …)."""
    lines = []
    for follow in follow_ups:
        if follow.action != "cells":
            continue
        steps = [
            f"{s.run_id or 'snippet'} step {s.step if s.step is not None else '?'} "
            + ("kept" if s.kept else f"left out ({s.left_out or 'not run'})")
            for s in follow.steps[:20]
        ]
        more = len(follow.steps) - len(steps)
        text = ", ".join(steps) + (f" and {more} more" if more > 0 else "")
        runs = ", ".join(follow.runs[:10]) or "this kernel's snippets"
        lines.append(f"from {runs}" + (f": {text}" if text else ""))
    return lines


def _row(cells: Sequence[str], tag: str = "td") -> str:
    return "<tr>" + "".join(f"<{tag}>{c}</{tag}>" for c in cells) + "</tr>"


def runs_bundle(
    runs: Sequence[Provenance], follow_ups: Sequence[FollowUp] = (), *, empty: str = _NONE_YET
) -> dict[str, Any]:
    """``text/html`` (escaped tables) and ``text/plain`` of the runs, for a static output."""
    plain = runs_text(runs, follow_ups, empty=empty)
    if not runs:
        return {"text/plain": plain, "text/html": f"<p><em>{_esc(plain)}</em></p>"}
    head, models = _totals(runs)
    out = [
        "<div class='nbagent-report'>",
        "<h4>AI use in this notebook</h4>",
        f"<p>{_esc(head)}<br>models: {_esc(models)}</p>",
        "<table>",
        _row(
            [
                "run",
                "prompt",
                "model",
                "how",
                "tokens in / out",
                "requests",
                "cost",
                "time",
                "ended",
                "policy",
            ],
            "th",
        ),
    ]
    details: list[str] = []
    for run in runs:
        out.append(
            _row(
                [
                    _esc(run.run_id),
                    _esc(_cut(run.prompt, 200)),
                    _esc(run.model or "no model"),
                    _esc(_mode(run)),
                    f"{run.input_tokens:,} / {run.output_tokens:,}",
                    str(run.requests),
                    _esc(_cost(run)),
                    f"{run.seconds:.1f} s",
                    _esc(run.stop_reason),
                    _esc(_policy(run)),
                ]
            )
        )
        details += _details(run, fate_of(run, follow_ups))
    out.append("</table>")
    out += details
    made = made_cells(follow_ups)
    if made:
        out.append(f"<p>{len(made)} cell(s) made by %agent cells:</p><ul>")
        out += [f"<li>{_esc(m)}</li>" for m in made]
        out.append("</ul>")
    out.append("</div>")
    return {"text/html": "\n".join(out), "text/plain": plain}


def _details(run: Provenance, fate: str | None) -> list[str]:
    if not (run.calls or run.snippets or run.refused):
        return []
    out = [f"<p><b>{_esc(run.run_id)}</b></p>"]
    if run.refused:
        out.append(f"<p>refused: {_sentence_html(run.refused)}</p>")
    if run.calls:
        asked = any(c.arguments is not None for c in run.calls)
        heads = ["tool", "decided", "ended"] + (["asked", "got"] if asked else [])
        out.append("<table>" + _row(heads, "th"))
        for call in run.calls:
            cells = [_esc(call.tool), _esc(call.decision), _esc(call.status)]
            if asked:
                cells += [
                    f"<code>{_esc(call.arguments or '')}</code>",
                    _esc(call.result or ""),
                ]
            out.append(_row(cells))
        more = (run.calls_total or 0) - len(run.calls)
        if more > 0:
            out.append(_row([f"… and {more} more"] + [""] * (len(heads) - 1)))
        out.append("</table>")
    for snippet in run.snippets:
        code = snippet.code if len(snippet.code) <= _CODE else snippet.code[:_CODE] + "\n…"
        out.append(
            f"<p>code the agent ran, {_esc(_kept(run, fate, snippet.kept))}:</p>"
            f"<pre>{_esc(code)}</pre>"
        )
    return out


_NONE_SAVED = "No %agent run is recorded in this notebook."


@dataclass(frozen=True)
class NotebookReport:
    """One saved notebook's AI use, read from its file (:func:`notebook_report`): displayed in
    a notebook it is the same static summary as ``%agent report``; ``str()`` gives the text.
    ``problems`` are what the class report would flag in it; ``error`` why it was not read."""

    path: Path
    runs: tuple[Provenance, ...] = ()
    follow_ups: tuple[FollowUp, ...] = ()
    problems: tuple[str, ...] = ()
    error: str | None = None
    #: cells ``%agent cells`` made that the notebook holds, and how many were edited since
    agent_cells: int = 0
    agent_cells_edited: int = 0
    #: cells the agent's accepted proposals made and edited, and of those, changed since
    notebook_inserted: int = 0
    notebook_edited: int = 0
    notebook_changed: int = 0

    def _notes(self) -> list[str]:
        if self.error is not None:
            return [f"{self.path.name} was not read: {self.error}"]
        notes = []
        if self.agent_cells:
            edited = f", {self.agent_cells_edited} edited since" if self.agent_cells_edited else ""
            notes.append(f"the notebook holds {self.agent_cells} cell(s) the agent made{edited}")
        if self.notebook_inserted or self.notebook_edited:
            since = f", {self.notebook_changed} changed since" if self.notebook_changed else ""
            notes.append(
                f"the agent's accepted proposals made {self.notebook_inserted} cell(s) and "
                f"edited {self.notebook_edited}{since}"
            )
        return notes + [f"to look at: {p}" for p in self.problems]

    def __str__(self) -> str:
        if self.error is not None:
            return "\n".join(self._notes())
        return "\n".join([runs_text(self.runs, self.follow_ups, empty=_NONE_SAVED), *self._notes()])

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """The notebook's rich display (IPython's hook): escaped HTML and its plain twin."""
        if self.error is not None:
            text = str(self)
            return {"text/plain": text, "text/html": f"<p>{_esc(text)}</p>"}
        bundle = runs_bundle(self.runs, self.follow_ups, empty=_NONE_SAVED)
        notes = self._notes()
        if notes:
            items = "".join(f"<li>{_esc(n)}</li>" for n in notes)
            bundle["text/html"] += f"<ul>{items}</ul>"
            bundle["text/plain"] = str(self)
        return bundle


def notebook_report(path: str | os.PathLike[str]) -> NotebookReport:
    """Read one saved notebook's runs from its file, as untrusted as any submission (see
    :mod:`nbagent.course.report`): never run, bounded, each problem said."""
    from ._scan import scan_notebook
    from ._submissions import Found, read_notebook

    target = Path(path)
    folder = Path(os.path.realpath(target)).parent
    try:
        notebook = read_notebook(Found(folder.name, target.name, target, folder))
    except ValueError as exc:
        return NotebookReport(target, error=str(exc))
    scan = scan_notebook(notebook, folder, folder)
    return NotebookReport(
        target,
        tuple(scan.runs),
        tuple(scan.follow_ups),
        tuple(p.text for p in scan.problems),
        agent_cells=scan.agent_cells,
        agent_cells_edited=scan.agent_cells_edited,
        notebook_inserted=scan.notebook_inserted,
        notebook_edited=scan.notebook_edited,
        notebook_changed=scan.notebook_changed,
    )
