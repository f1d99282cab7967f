"""One row per input, and the results table they make (a pandas DataFrame).

A row is a plain, picklable value: it travels back from a Dask worker, goes into the checkpoint
file as one JSON line, and becomes one line of the table. The table keeps the inputs' order and
index; its columns are :data:`COLUMNS` (``output`` only when a structured output was asked for).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from ..redact import redact_secrets
from ._inputs import Item, label_key, prompt_digest

if TYPE_CHECKING:
    from ..events import RunResult

__all__ = ["COLUMNS", "BatchRow", "RowStatus", "done_rows_of_table", "make_table", "not_run"]

#: "done": the run finished (and gave a valid output, when one was asked for); "failed": it
#: failed, timed out, or could not start (the error says why); "cancelled": stopped while it
#: ran; "not run": never started (the batch was stopped first).
RowStatus = Literal["done", "failed", "cancelled", "not run"]

COLUMNS = (
    "prompt",
    "status",
    "text",
    "output",
    "steps",
    "tokens",
    "seconds",
    "stop_reason",
    "error",
    "attempts",
    "result",
)


@dataclass(frozen=True)
class BatchRow:
    """The outcome of one input. ``output`` is the decoded structured value (None without one),
    ``output_json`` its JSON form; ``result`` the run's RunResult (what ``-o`` gives for one run);
    ``resumed`` marks a row taken over from an earlier table or checkpoint, not run again."""

    position: int
    key: str
    prompt: str
    status: RowStatus
    text: str = ""
    output: Any = None
    output_json: Any = None
    steps: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    stop_reason: str | None = None
    error: str | None = None
    attempts: int = 0
    result: RunResult | None = None
    resumed: bool = False
    #: The row has a typed answer (``output=``), which may be None itself: "no answer" is
    #: False here, never ``output is None``.
    has_output: bool = False
    #: What the row spent from its share of the map's budget on a Dask worker (requests,
    #: tokens, dollars), its retries and helpers included; None where no share was given.
    spent: tuple[int, int, float] | None = None

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def digest(self) -> str:
        return prompt_digest(self.prompt)

    def at(self, item: Item) -> BatchRow:
        """This row placed at ``item``'s position (a resumed row may have moved)."""
        return replace(self, position=item.position, key=item.key)


def describe_error(error: BaseException | None) -> str | None:
    """An error as one line a person can read, with anything credential-shaped hidden."""
    if error is None:
        return None
    text = str(error) or type(error).__name__
    name = type(error).__name__
    if not text.startswith(name):
        text = f"{name}: {text}"
    return redact_secrets(text)


def not_run(item: Item, why: str | None = None, *, status: RowStatus | None = None) -> BatchRow:
    """The row of an input that never ran: "failed" with ``why`` (it could not), or "not run"
    (the batch stopped first; or ``status="not run"`` with ``why``: the map's budget was
    spent, and a later batch may run it)."""
    if status is None:
        status = "failed" if why else "not run"
    return BatchRow(item.position, item.key, item.prompt, status, error=why)


def done_rows_of_table(table: Any) -> list[BatchRow]:
    """The finished rows of an earlier results table, to resume from."""
    needed = {"prompt", "status"}
    columns = set(getattr(table, "columns", ()))
    if not needed <= columns:
        raise TypeError(
            "resume= takes a results table returned by Agent.map (with 'prompt' and 'status' "
            f"columns), not a {type(table).__name__} with columns {sorted(map(str, columns))}"
        )
    rows: list[BatchRow] = []
    records = table.to_dict("records")
    for position, (label, record) in enumerate(zip(table.index, records, strict=True)):
        if record.get("status") != "done":
            continue
        result = record.get("result")
        output = record.get("output")
        from ..output._spec import to_json

        usage = getattr(result, "usage", None)
        rows.append(
            BatchRow(
                position,
                label_key(label),
                str(record["prompt"]),
                "done",
                text=str(record.get("text") or ""),
                output=output,
                output_json=to_json(output),
                has_output=bool(getattr(result, "has_output", False)) or output is not None,
                steps=int(record.get("steps") or 0),
                input_tokens=getattr(usage, "input_tokens", 0),
                output_tokens=getattr(usage, "output_tokens", 0),
                seconds=float(record.get("seconds") or 0.0),
                stop_reason=record.get("stop_reason"),
                attempts=int(record.get("attempts") or 0),
                result=result,
                resumed=True,
            )
        )
    return rows


def make_table(rows: Sequence[BatchRow], index: Any, *, with_output: bool) -> Any:
    """The results table: one line per row, in input order, with the inputs' index."""
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is there wherever tables are
        raise ImportError(
            "Agent.map returns a pandas DataFrame: install pandas (pip install pandas)"
        ) from None
    columns = [c for c in COLUMNS if with_output or c != "output"]
    data: dict[str, list[Any]] = {c: [] for c in columns}
    for row in rows:
        values = {
            "prompt": row.prompt,
            "status": row.status,
            "text": row.text,
            "output": row.output,
            "steps": row.steps,
            "tokens": row.tokens,
            "seconds": round(row.seconds, 3),
            "stop_reason": row.stop_reason,
            "error": row.error,
            "attempts": row.attempts,
            "result": row.result,
        }
        for column in columns:
            data[column].append(values[column])
    frame = pd.DataFrame(data, columns=columns, index=index if index is not None else None)
    for column in ("prompt", "status", "text", "output", "stop_reason", "error", "result"):
        if column in frame:  # keep them as Python objects (None stays None, not NaN)
            frame[column] = pd.Series(data[column], index=frame.index, dtype=object)
    return frame


def ordered(rows: Iterable[BatchRow], count: int) -> list[BatchRow]:
    """Rows by position (each position exactly once)."""
    slots: list[BatchRow | None] = [None] * count
    for row in rows:
        slots[row.position] = row
    missing = [i for i, r in enumerate(slots) if r is None]
    if missing:  # pragma: no cover - a bug: every input gets a row
        raise AssertionError(f"no row for inputs {missing[:5]}")
    return [r for r in slots if r is not None]
