"""Find and read submitted notebooks as untrusted files: bounded before parsing, never run.

A submission is whatever a student handed in, so every file here may be hostile: a 1 GB file,
JSON nested a million levels deep, a symlink out of the folder, a FIFO that never ends, a
notebook whose outputs hold script. :func:`find_notebooks` walks the folders without following
links out of them and :func:`read_notebook` reads one file with its size checked before a byte
is parsed and its nesting checked before the parser sees it; each problem becomes the
:class:`Found`'s ``error`` (one sentence), never an exception, so one bad file is one row.

**Who handed it in.** The student is the first folder below the folder given
(``submissions/<student>/…/<notebook>.ipynb``); a notebook lying directly in the folder given
belongs to that folder's own name (``report submissions/alice`` reads Alice's notebooks). The
notebook is its path below the student's folder (``exams/final.ipynb``), which is also what a
course policy's globs are matched against.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ..schema._strict_json import StrictJSONError, _depth_exceeds, strict_loads

__all__ = [
    "MAX_DEPTH",
    "MAX_NOTEBOOKS",
    "MAX_NOTEBOOK_BYTES",
    "MAX_RECORDING_BYTES",
    "Found",
    "file_digest",
    "find_notebooks",
    "read_bounded",
    "read_notebook",
]

#: A notebook larger than this is a row saying so, never parsed (a lesson with figures is a
#: few MB; JSON parsing takes ~10x the file's size in memory).
MAX_NOTEBOOK_BYTES = 32 * 2**20
#: A recording larger than this is not read to check a run's answer (its digest is still taken,
#: reading in chunks).
MAX_RECORDING_BYTES = 32 * 2**20
#: Arrays and objects nested deeper than this: a row saying so (a notebook nests ~8 levels;
#: widget state and JSON outputs a few more).
MAX_DEPTH = 100
#: Notebooks read per report at most (the rest: one row saying how many were left out).
MAX_NOTEBOOKS = 20_000
#: Folders never descended into: Jupyter's checkpoints, recordings, hidden folders.
_SKIPPED = frozenset({".ipynb_checkpoints", "nbagent-recordings", "__pycache__"})


@dataclass(frozen=True)
class Found:
    """One notebook file found under a folder given: who handed it in, which notebook, and
    where it is (``root``: the student's folder, which recordings must stay inside)."""

    student: str
    notebook: str
    path: Path
    root: Path
    error: str | None = None


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return True


def _found(top: Path, real_top: Path, path: Path) -> Found:
    relative = path.relative_to(top)
    parts = relative.parts
    if len(parts) > 1:
        student, notebook, root = parts[0], "/".join(parts[1:]), real_top / parts[0]
    else:
        student, notebook, root = top.name or str(top), parts[0], real_top
    error = None
    if path.is_symlink():
        target = Path(os.path.realpath(path))
        if not _inside(target, real_top):
            error = "a symlink to a file outside the folder: not read"
    return Found(student, notebook, path, root, error)


def find_notebooks(paths: Iterable[str | os.PathLike[str]]) -> Iterator[Found]:
    """Every ``.ipynb`` under the folders given (and each notebook file given itself), sorted,
    without following links to folders; at most :data:`MAX_NOTEBOOKS`, then one :class:`Found`
    with an error saying how many were left out."""
    count = 0
    for given in paths:
        top = Path(given)
        if top.is_file() or (top.suffix == ".ipynb" and not top.is_dir()):
            parent = top.parent
            yield Found(
                parent.resolve().name or str(parent),
                top.name,
                top,
                parent.resolve(),
                None if top.exists() else "no such file",
            )
            count += 1
            continue
        if not top.is_dir():
            yield Found("", str(top), top, top, "no such folder")
            continue
        real_top = Path(os.path.realpath(top))
        left_out = 0
        for folder, dirs, files in os.walk(top, followlinks=False, onerror=None):
            dirs[:] = sorted(d for d in dirs if d not in _SKIPPED and not d.startswith("."))
            for name in [d for d in dirs if (Path(folder) / d).is_symlink()]:
                dirs.remove(name)  # os.walk would not go in either: say so, in a row
                if count < MAX_NOTEBOOKS:
                    count += 1
                    linked = _found(top, real_top, Path(folder) / name)
                    yield Found(linked.student, linked.notebook + "/", linked.path, linked.root,
                                "a link to a folder: not followed")  # fmt: skip
            for name in sorted(files):
                if not name.endswith(".ipynb") or name.startswith("."):
                    continue
                if count >= MAX_NOTEBOOKS:
                    left_out += 1
                    continue
                count += 1
                yield _found(top, real_top, Path(folder) / name)
        if left_out:
            yield Found(
                "",
                str(top),
                top,
                real_top,
                f"{left_out:,} more notebooks left out: a report reads at most {MAX_NOTEBOOKS:,}",
            )


@contextlib.contextmanager
def _open_regular(path: Path, limit: int) -> Iterator[tuple[BinaryIO, int]]:
    """The open file and its size, when ``path`` is a regular file of at most ``limit`` bytes
    (ValueError saying why not; OSError when it cannot be opened). Opened without blocking (a
    FIFO would hang) and without following a final symlink the caller has not resolved."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
    handle = os.open(path, flags)
    with os.fdopen(handle, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("not a regular file: not read")
        if info.st_size > limit:
            raise ValueError(
                f"{_size(info.st_size)}, more than the limit of {_size(limit)}: not read"
            )
        yield file, info.st_size


def read_bounded(path: Path, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; OSError (or ValueError saying
    why) otherwise (see :func:`_open_regular`)."""
    with _open_regular(path, limit) as (file, size):
        data = file.read(size + 1)  # one byte more shows that it grew meanwhile
    if len(data) > limit:
        raise ValueError(f"larger than the limit of {_size(limit)}: not read")
    return data


def file_digest(path: Path, limit: int = 4 * 2**30) -> str:
    """``sha256:`` and the hex digest of a regular file's bytes, read in chunks (bounded
    memory whatever its size); OSError/ValueError as :func:`read_bounded`."""
    hasher = hashlib.sha256()
    with _open_regular(path, limit) as (file, _):
        while chunk := file.read(2**20):
            hasher.update(chunk)
    return "sha256:" + hasher.hexdigest()


def _size(count: int) -> str:
    if count >= 2**20:
        return f"{count / 2**20:,.1f} MiB"
    return f"{count:,} bytes"


def parse_bounded(data: bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """Strict JSON from bytes (UTF-8), nesting checked before parsing; ValueError saying why."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (byte {exc.start:,})") from None
    if _depth_exceeds(text, max_depth):
        raise ValueError(f"arrays or objects nested deeper than {max_depth} levels: not read")
    try:
        return strict_loads(text)
    except RecursionError:
        raise ValueError("arrays or objects nested too deeply: not read") from None
    except StrictJSONError as exc:
        raise ValueError(f"not strict JSON: {exc}") from None
    except ValueError as exc:
        raise ValueError(f"not valid JSON: {str(exc)[:200]}") from None


def read_notebook(found: Found, *, max_bytes: int = MAX_NOTEBOOK_BYTES) -> dict[str, Any]:
    """The notebook's JSON (a dict with a list of cells, nbformat 4), or ValueError saying in
    one sentence why it is not read."""
    if found.error is not None:
        raise ValueError(found.error)
    path = Path(os.path.realpath(found.path)) if found.path.is_symlink() else found.path
    try:
        data = read_bounded(path, max_bytes)
    except OSError as exc:
        raise ValueError(f"cannot be read: {exc.strerror or exc}") from None
    value = parse_bounded(data)
    del data
    if not isinstance(value, dict):
        raise ValueError("not a notebook: its JSON is not an object")
    major = value.get("nbformat")
    if isinstance(major, bool) or not isinstance(major, int) or major != 4:
        shown = repr(major)[:20]
        raise ValueError(f"not a version 4 notebook (nbformat {shown})")
    if not isinstance(value.get("cells"), list):
        raise ValueError("not a notebook: it has no list of cells")
    return value
