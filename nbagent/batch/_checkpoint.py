"""The checkpoint file: finished rows as JSON lines, written as each run ends.

One line per finished row (done or failed), appended and flushed at once, so a kernel that
crashes loses only the runs that were in flight; re-running with the same path skips the rows
that are done (same index label, same prompt, same configuration) and runs the rest. A later
line for the same row replaces an earlier one (a retried failure that now succeeded). The file
starts with a header line naming the format. A line cut short by a crash is skipped on reading,
and the count of skipped lines is reported, never silently dropped.

Every row names the configuration it was answered under (:mod:`._fingerprint`: the model,
instructions, tools, options, output, approver), and each batch that writes to the file first
adds one line describing its configuration, so a batch with other instructions neither reuses
those rows nor loses them: they run again, the file keeps both, and the reason can be told
("the instructions differ"). Files of format version 1 recorded no configuration; their rows
are read as "legacy" (see :class:`LoadedCheckpoint`).

The path must name a regular file (or nothing yet): a FIFO or a device is refused at once,
never opened in a way that waits. A row the file cannot hold (a value JSON cannot carry) is
not written, and the batch makes it a failed row; a lone surrogate is written escaped
(``\\ud800``), which reads back as it was.

JSON lines rather than Parquet: appending one row is one ``write`` + ``flush`` with nothing to
rewrite, the file is readable with ``head``, and no extra dependency is needed. Errors in it are
redacted; it never holds a key (keys are not part of any row).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from .._ground.files import open_regular
from ..errors import BatchInputError
from ._rows import BatchRow

if TYPE_CHECKING:
    from ._fingerprint import Fingerprint

__all__ = ["CheckpointWriter", "LoadedCheckpoint", "load_checkpoint"]

FORMAT = "nbagent-batch"
#: 2: rows name their configuration (``config``), described by ``configuration`` lines.
VERSION = 2
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
        **({"has_output": True} if row.has_output else {}),  # a null answer is still one
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
    # a typed answer may be null: the flag says there is one (files before it: not null)
    answered = bool(data.get("has_output", output_json is not None))
    output = decode(output_json) if decode is not None and answered else output_json
    if result is not None and answered:
        from dataclasses import replace

        result = replace(result, output=output, has_output=True)
    return BatchRow(
        int(data.get("position") or 0),
        str(data["key"]),
        str(data["prompt"]),
        data["status"],
        text=str(data.get("text") or ""),
        output=output,
        output_json=output_json,
        has_output=answered,
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
    """What a checkpoint file holds, for one configuration.

    ``rows``: the rows by (key, prompt digest), answered under the configuration asked for
    (every row when none was asked for), plus rows of a version-1 file, which recorded no
    configuration (``legacy`` holds their keys). ``elsewhere``: the configuration id of done rows
    answered under another one; ``configurations``: each configuration the file describes, by
    id. ``damaged``: lines skipped (cut short by a crash, edited, unreadable).
    """

    rows: dict[tuple[str, str], BatchRow] = field(default_factory=dict)
    damaged: int = 0
    legacy: set[tuple[str, str]] = field(default_factory=set)
    elsewhere: dict[tuple[str, str], str] = field(default_factory=dict)
    configurations: dict[str, dict[str, Any]] = field(default_factory=dict)


def _refused(target: Path, exc: OSError) -> BatchInputError:
    reason = exc.strerror or str(exc)
    return BatchInputError(
        f"the checkpoint {target} cannot be used: {reason}; a checkpoint is a regular file "
        "(or a path where one can be created)"
    )


def load_checkpoint(
    path: str | os.PathLike[str], decode: Any = None, *, config: str | None = None
) -> LoadedCheckpoint:
    """Read a checkpoint file; a missing file is an empty checkpoint.

    ``config``: a configuration id (a batch's fingerprint): only rows answered under it count
    as ``rows``; the done rows of other configurations are listed in ``elsewhere``. Without it
    every row is read, the last line for each row winning. A path that is not a regular file
    (a FIFO, a device, a folder) raises :class:`~nbagent.errors.BatchInputError` at once.
    """
    loaded = LoadedCheckpoint()
    target = Path(path)
    try:
        handle = open_regular(target)
    except FileNotFoundError:
        return loaded
    except OSError as exc:
        raise _refused(target, exc) from None
    matching: dict[tuple[str, str], BatchRow] = {}
    legacy: dict[tuple[str, str], BatchRow] = {}
    with os.fdopen(handle, "rb") as file:
        first = True
        while True:
            raw = file.readline(MAX_LINE_BYTES + 1)
            if not raw:
                break
            if len(raw) > MAX_LINE_BYTES:
                loaded.damaged += 1
                while raw and not raw.endswith(b"\n"):  # skip the rest of the long line
                    raw = file.readline(MAX_LINE_BYTES)
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
                _check_header(data, target)
                continue
            if isinstance(data, dict) and "configuration" in data:
                described = data["configuration"]
                if isinstance(described, dict) and isinstance(described.get("id"), str):
                    loaded.configurations[described["id"]] = described
                else:
                    loaded.damaged += 1
                continue
            if not isinstance(data, dict) or data.get("status") not in ("done", "failed"):
                loaded.damaged += 1  # only finished rows are ever written
                continue
            tag = data.get("config")
            if tag is not None and not isinstance(tag, str):
                loaded.damaged += 1
                continue
            try:
                row = row_from_json(data, decode)
            except Exception:  # a hand edit, or an output the decoder now refuses: run it again
                loaded.damaged += 1
                continue
            key = (row.key, row.digest)
            if tag is None:
                legacy[key] = row
            elif config is None or tag == config:
                matching[key] = row
            elif row.status == "done":
                loaded.elsewhere[key] = tag
    loaded.rows = {**legacy, **matching}  # legacy lines come before any tagged one
    loaded.legacy = {key for key in legacy if key not in matching}
    for key in loaded.rows:
        loaded.elsewhere.pop(key, None)
    return loaded


def _check_header(data: Any, target: Path) -> None:
    if isinstance(data, dict) and data.get("format") == FORMAT:
        version = data.get("version", 0)
        if isinstance(version, bool) or not isinstance(version, int):
            raise BatchInputError(f"{target} has no valid format version")
        if version > VERSION:
            raise BatchInputError(
                f"{target} was written by a newer nbagent (format version "
                f"{data.get('version')}); upgrade nbagent to resume from it"
            )
        return
    raise BatchInputError(
        f"{target} is not an nbagent batch checkpoint (its first line is no "
        "nbagent-batch header): choose another path"
    )


def _line(data: dict[str, Any]) -> bytes:
    """One JSON line. Text JSON can carry but UTF-8 cannot (a lone surrogate) is escaped, so
    it reads back exactly; a value JSON cannot carry raises (TypeError, ValueError …)."""
    try:
        return (json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    except UnicodeEncodeError:
        return (json.dumps(data, ensure_ascii=True, separators=(",", ":")) + "\n").encode()


class CheckpointWriter:
    """Appends finished rows to the checkpoint file, one flushed JSON line each.

    Opening refuses (:class:`~nbagent.errors.BatchInputError`) a path that is not a regular
    file. :meth:`write` raises ``OSError`` when the file cannot be written, and
    :class:`UnwritableRowError` for a row JSON cannot carry (nothing of it is written)."""

    def __init__(self, path: str | os.PathLike[str], config: Fingerprint | None = None) -> None:
        self.path = Path(path)
        self.config = config
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle = open_regular(self.path, append=True)
        except OSError as exc:
            raise _refused(self.path, exc) from None
        self._file: IO[bytes] | None = os.fdopen(handle, "ab")
        try:
            size = os.fstat(handle).st_size
            needs_newline = False
            if size:
                with self.path.open("rb") as reading:
                    reading.seek(-1, os.SEEK_END)
                    needs_newline = reading.read(1) != b"\n"  # a line cut short by a crash
            if needs_newline:
                self._file.write(b"\n")
            if not size:
                self._put(_line({"format": FORMAT, "version": VERSION}))
        except BaseException:
            self._file.close()
            raise
        self._described = False

    def _put(self, line: bytes) -> None:
        assert self._file is not None
        self._file.write(line)
        self._file.flush()

    def write(self, row: BatchRow) -> None:
        if self._file is None or row.status not in ("done", "failed"):
            return
        data = row_to_json(row)
        if self.config is not None:
            data = {"config": self.config.id, **data}
        try:
            line = _line(data)
        except Exception as exc:  # RecursionError, TypeError, ValueError …: this row only
            raise UnwritableRowError(f"{type(exc).__name__}: {exc}") from None
        if not self._described and self.config is not None:
            # before the first row, once: what this batch's rows were answered under
            self._put(_line({"configuration": self.config.to_json()}))
            self._described = True
        self._put(line)

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.flush()
                os.fsync(self._file.fileno())
            except OSError:  # pragma: no cover - a full disk: the lines written stay written
                pass
            self._file.close()
            self._file = None


class UnwritableRowError(ValueError):
    """A row the checkpoint cannot hold (a value JSON cannot carry)."""
