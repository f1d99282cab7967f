"""The checkpoint file: finished rows as JSON lines, written as each run ends.

One line per finished row (done or failed), appended and flushed at once, so a kernel that
crashes loses only the runs that were in flight; re-running with the same path skips the rows
that are done (same index label, same prompt) and runs the rest. A later line for the same row
replaces an earlier one (a retried failure that now succeeded). The file starts with a header
line naming the format. A line cut short by a crash is skipped on reading, and the count of
skipped lines is reported, never silently dropped.

JSON lines rather than Parquet: appending one row is one ``write`` + ``flush`` with nothing to
rewrite, the file is readable with ``head``, and no extra dependency is needed. Errors in it are
redacted; it never holds a key (keys are not part of any row).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ..errors import BatchInputError
from ._rows import BatchRow

__all__ = ["CheckpointWriter", "LoadedCheckpoint", "load_checkpoint"]

FORMAT = "nbagent-batch"
VERSION = 1
#: Longest line read back (a row with its whole conversation); longer lines count as damaged.
MAX_LINE_BYTES = 64 * 1024 * 1024


def row_to_json(row: BatchRow) -> dict[str, Any]:
    from ..messages import messages_to_json

    result = row.result
    return {
        "key": row.key,
        "position": row.position,
        "prompt": row.prompt,
        "status": row.status,
        "text": row.text,
        "output": row.output_json,
        "steps": row.steps,
        "input_tokens": row.input_tokens,
        "output_tokens": row.output_tokens,
        "seconds": round(row.seconds, 6),
        "stop_reason": row.stop_reason,
        "error": row.error,
        "attempts": row.attempts,
        "messages": messages_to_json(result.messages) if result is not None else None,
    }


def row_from_json(data: dict[str, Any], decode: Any = None) -> BatchRow:
    from ..events import RunResult
    from ..generation import Usage
    from ..messages import messages_from_json

    usage = Usage(int(data.get("input_tokens") or 0), int(data.get("output_tokens") or 0))
    messages = data.get("messages")
    result = None
    if messages is not None and data.get("stop_reason"):
        result = RunResult(
            str(data.get("text") or ""),
            tuple(messages_from_json(messages)),
            int(data.get("steps") or 0),
            usage,
            data["stop_reason"],
        )
    output_json = data.get("output")
    output = decode(output_json) if decode is not None and output_json is not None else output_json
    return BatchRow(
        int(data.get("position") or 0),
        str(data["key"]),
        str(data["prompt"]),
        data["status"],
        text=str(data.get("text") or ""),
        output=output,
        output_json=output_json,
        steps=int(data.get("steps") or 0),
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        seconds=float(data.get("seconds") or 0.0),
        stop_reason=data.get("stop_reason"),
        error=data.get("error"),
        attempts=int(data.get("attempts") or 0),
        result=result,
        resumed=True,
    )


@dataclass
class LoadedCheckpoint:
    """What a checkpoint file holds: its rows by (key, prompt digest), and lines it skipped."""

    rows: dict[tuple[str, str], BatchRow] = field(default_factory=dict)
    damaged: int = 0


def load_checkpoint(path: str | os.PathLike[str], decode: Any = None) -> LoadedCheckpoint:
    """Read a checkpoint file; a missing file is an empty checkpoint."""
    loaded = LoadedCheckpoint()
    target = Path(path)
    if not target.exists():
        return loaded
    with target.open("rb") as handle:
        first = True
        while True:
            raw = handle.readline(MAX_LINE_BYTES + 1)
            if not raw:
                break
            if len(raw) > MAX_LINE_BYTES:
                loaded.damaged += 1
                while raw and not raw.endswith(b"\n"):  # skip the rest of the long line
                    raw = handle.readline(MAX_LINE_BYTES)
                continue
            if not raw.strip():
                continue
            try:
                data = json.loads(raw)
            except (ValueError, RecursionError):  # RecursionError: nested past all reason
                loaded.damaged += 1
                continue
            if first:
                first = False
                if isinstance(data, dict) and data.get("format") == FORMAT:
                    version = data.get("version", 0)
                    if isinstance(version, bool) or not isinstance(version, int):
                        raise BatchInputError(f"{target} has no valid format version")
                    if version > VERSION:
                        raise BatchInputError(
                            f"{target} was written by a newer nbagent (format version "
                            f"{data.get('version')}); upgrade nbagent to resume from it"
                        )
                    continue
                raise BatchInputError(
                    f"{target} is not an nbagent batch checkpoint (its first line is no "
                    "nbagent-batch header): choose another path"
                )
            if not isinstance(data, dict) or data.get("status") not in ("done", "failed"):
                loaded.damaged += 1  # only finished rows are ever written
                continue
            try:
                row = row_from_json(data, decode)
            except Exception:  # a hand edit, or an output the decoder now refuses: run it again
                loaded.damaged += 1
                continue
            loaded.rows[(row.key, row.digest)] = row
    return loaded


class CheckpointWriter:
    """Appends finished rows to the checkpoint file, one flushed JSON line each."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fresh = not self.path.exists() or self.path.stat().st_size == 0
        needs_newline = False
        if not fresh:
            with self.path.open("rb") as handle:
                handle.seek(-1, os.SEEK_END)
                needs_newline = handle.read(1) != b"\n"  # a line cut short by a crash
        self._file: IO[str] | None = self.path.open("a", encoding="utf-8")
        if needs_newline:
            self._file.write("\n")
        if fresh:
            self._write({"format": FORMAT, "version": VERSION})

    def _write(self, data: dict[str, Any]) -> None:
        assert self._file is not None
        self._file.write(json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n")
        self._file.flush()

    def write(self, row: BatchRow) -> None:
        if self._file is not None and row.status in ("done", "failed"):
            self._write(row_to_json(row))

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.flush()
                os.fsync(self._file.fileno())
            except OSError:  # pragma: no cover - a full disk: the lines written stay written
                pass
            self._file.close()
            self._file = None
