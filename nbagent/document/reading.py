"""What the model reads of a notebook: an overview of the cells, or one cell whole, bounded.

Every source and output passes :func:`~nbagent.redact.redact_secrets` before the model sees
it; a cell whose source held something hidden is marked, and the agent may not rewrite it (its
proposal could only write the mask back over the person's key). What the model was shown of
each cell is returned as a :class:`Seen`: a proposal is made against that and nothing else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..redact import redact_secrets
from .cells import Cell, Output, Snapshot
from .limits import NotebookLimits

__all__ = ["Seen", "cell_header", "describe_cell", "overview", "whole_cell"]

#: Characters of ``max_read_chars`` kept (at most) for the one-line entries that list the
#: cells past the sources' share, and for the notes that close the overview.
LISTING_CHARS = 12_000
_NOTES = 400


@dataclass(frozen=True)
class Seen:
    """One cell as the model was shown it: ``source`` (the whole source, as the notebook held
    it), whether the model saw all of it (``whole``), and whether something in it was hidden
    from the model (``secret``)."""

    source: str
    whole: bool
    secret: bool
    type: str


def _fence(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`{3,}", text)), default=2)
    return "`" * (longest + 1)


def _language(cell: Cell) -> str:
    return "python" if cell.type == "code" else "markdown" if cell.type == "markdown" else ""


def cell_header(cell: Cell, number: int | None) -> str:
    """``[cell 3] id=1a2b3c4d · code · In [4]``."""
    where = f"cell {number}" if number is not None else "cell"
    count = f" · In [{cell.execution_count}]" if cell.execution_count is not None else ""
    return f"[{where}] id={cell.id} · {cell.type}{count}"


def describe_cell(cell: Cell, number: int | None) -> str:
    """``cell 3 (id 1a2b3c4d, code)``, for sentences."""
    where = f"cell {number}" if number is not None else "the cell"
    return f"{where} (id {cell.id}, {cell.type})"


def _output_lines(outputs: tuple[Output, ...], total: int, budget: int) -> list[str]:
    lines: list[str] = []
    used = 0
    for output in outputs:
        text = redact_secrets(output.text).strip("\n")
        if output.kind == "stream":
            head = f"{output.name}:"
        elif output.kind == "error":
            named = output.name and not text.lstrip().startswith(output.name)
            head = f"error {output.name}:" if named else "error:"
        else:
            kinds = f" [also {', '.join(output.mimes[:4])}]" if output.mimes else ""
            head = ("result" if output.kind == "result" else "display") + kinds + ":"
        room = budget - used
        if room <= 40:
            lines.append(f"  (… {len(outputs) - len(lines)} more outputs not shown)")
            break
        if output.kind == "error" and len(text) > room:
            text = "…" + text[-room:]  # the end of a traceback is where the error is
        elif len(text) > room:
            text = text[:room] + f"… ({len(text) - room:,} more characters)"
        body = text.replace("\n", "\n    ")
        lines.append(f"  {head} {body}" if "\n" not in text else f"  {head}\n    {body}")
        used += len(text) + len(head) + 4
    if total > len(outputs):
        lines.append(f"  ({total - len(outputs)} more outputs not read)")
    return lines


def _block(
    cell: Cell,
    number: int | None,
    limit: int,
    output_chars: int,
    cut_note: str,
    running: bool = False,
) -> tuple[str, Seen]:
    shown = redact_secrets(cell.source)
    secret = shown != cell.source
    whole = cell.complete and len(shown) <= limit
    if len(shown) > limit:
        shown = shown[:limit]
    fence = _fence(shown)
    parts = [cell_header(cell, number)]
    if cell.source:
        body = shown[:-1] if shown.endswith("\n") else shown  # the fence ends the line
        parts.append(f"{fence}{_language(cell)}\n{body}\n{fence}")
    else:
        parts.append("(empty)")
    if not whole:
        parts.append(f"(cut: {len(shown):,} of {cell.length:,} characters shown; {cut_note})")
    if secret:
        parts.append(
            "(nbagent hid a key or token in this cell as ***: you may not edit it; ask the "
            "person to)"
        )
    if running:
        parts.append("  (this run's own cell: its outputs are this run)")
    else:
        parts += _output_lines(cell.outputs, cell.outputs_total, output_chars)
    return "\n".join(parts), Seen(cell.source, whole, secret, cell.type)


def _context(snapshot: Snapshot) -> list[str]:
    lines = []
    active = snapshot.find(snapshot.active) if snapshot.active else None
    if active is not None:
        lines.append(
            f"The person is in {describe_cell(active, snapshot.position(active.id))}: "
            '"this cell" is that one, "the cell above" the one before it.'
        )
    failed = snapshot.last_error()
    if failed is not None and failed.error is not None:
        error = redact_secrets(failed.error.text).strip().splitlines()
        said = error[-1][:300] if error else failed.error.name
        lines.append(
            f"The newest error is in {describe_cell(failed, snapshot.position(failed.id))}: {said}"
        )
    return lines


def overview(
    snapshot: Snapshot, limits: NotebookLimits, start: int = 1
) -> tuple[str, dict[str, Seen]]:
    """What ``read_notebook`` sends, at most ``limits.max_read_chars`` characters: the context
    (the active cell, the newest error), then the cells from number ``start`` on, each with its
    source and outputs while the sources' share lasts, then one line per cell in the rest; and
    what was seen of each."""
    name = f' "{snapshot.name}"' if snapshot.name else ""
    total = snapshot.total
    head = [f"Notebook{name}: {total} cell{'s' if total != 1 else ''}."]
    if len(snapshot.cells) < total:
        head.append(f"Only the first {len(snapshot.cells):,} were read (the most nbagent reads).")
    head += _context(snapshot)
    head.append("Name cells by their id (numbers only say where a cell is now).")
    seen: dict[str, Seen] = {}
    blocks: list[str] = []
    used = sum(len(line) + 1 for line in head) + 2
    cap = limits.max_read_chars
    # the cells past the sources' share are listed in what is left, one line each
    sources_cap = cap - min(LISTING_CHARS, cap // 4) - _NOTES
    chosen = [c for c in snapshot.cells if (snapshot.position(c.id) or 0) >= start]
    rest: list[Cell] = []
    for cell in chosen:
        number = snapshot.position(cell.id)
        if rest:
            rest.append(cell)
            continue
        text, saw = _block(
            cell,
            number,
            limits.max_overview_chars,
            limits.max_output_chars,
            "read_cell gives all of it",
            running=cell.id == snapshot.active,
        )
        if used + len(text) > sources_cap and blocks:
            rest.append(cell)
            continue
        blocks.append(text)
        seen[cell.id] = saw
        used += len(text) + 2
    if rest:
        lines = [f"The other {len(rest)} cells, by id (read_cell shows one whole):"]
        for cell in rest:
            number = snapshot.position(cell.id)
            lines_in = cell.source.count("\n") + 1 if cell.source else 0
            line = f"{cell_header(cell, number)} · {lines_in} lines"
            if cell.error is not None:
                line += " · has an error"
            if used + len(lines[0]) + len(line) + 1 > cap - _NOTES:
                lines.append(
                    f"(cells {number} to {total} are not listed: read_notebook with "
                    f"start={number} lists them)"
                )
                break
            lines.append(line)
            used += len(line) + 1
        blocks.append("\n".join(lines))
    if start > 1:
        head.append(f"From cell {start} on:")
    if snapshot.dropped:
        blocks.append(
            f"({snapshot.dropped} cells of the notebook could not be read and are left out)"
        )
    return "\n".join(head) + "\n\n" + "\n\n".join(blocks), seen


def whole_cell(snapshot: Snapshot, cell: Cell, limits: NotebookLimits) -> tuple[str, Seen]:
    """What ``read_cell`` sends: one cell, its source up to ``limits.max_cell_chars`` (a longer
    one cannot be edited), its outputs."""
    number = snapshot.position(cell.id)
    text, saw = _block(
        cell,
        number,
        limits.max_cell_chars,
        limits.max_output_chars * 2,
        "a cell this long cannot be edited by the agent",
        running=cell.id == snapshot.active,
    )
    return text, saw
