"""The ids of runs and serving sessions: ``run-k7q2x-3``, unique in a notebook's record.

A notebook outlives its kernels: after a restart the counter starts again, and a plain
``run-3`` would name two different runs of one saved notebook (its provenance records, the
class report, ``%agent cells``' follow-ups would mix them up). So each id carries a random
prefix drawn once per process (a kernel session), then the run's number in that session:
short enough to type, unique in the record. Within its session a run is also found by its
short form (``run-3`` is this session's ``run-<prefix>-3``): :func:`expand`. A forked child
process draws a prefix of its own.
"""

from __future__ import annotations

import itertools
import os
import re
import secrets
import threading
from collections.abc import Iterator

__all__ = ["ID_PATTERN", "expand", "new_id", "prefix"]

#: Letters and digits a person reads without doubt (no i, l, o, 0, 1).
_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"
_LENGTH = 5  # 31**5: about 29 million prefixes
#: A run's or a serving session's id, long (``run-k7q2x-3``) or short (``run-3``).
ID_PATTERN = re.compile(rf"(run|serve)-(?:([a-z][a-z0-9]{{{_LENGTH - 1}}})-)?(\d{{1,9}})")

_lock = threading.Lock()
_prefix = ""
_counters: dict[str, Iterator[int]] = {}


def _draw() -> None:
    global _prefix
    first = secrets.choice(_ALPHABET[:23])  # a letter: the id never reads as a number
    _prefix = first + "".join(secrets.choice(_ALPHABET) for _ in range(_LENGTH - 1))
    _counters.clear()


_draw()
if hasattr(os, "register_at_fork"):  # a forked worker must not repeat its parent's ids
    os.register_at_fork(after_in_child=_draw)


def prefix() -> str:
    """This process's prefix."""
    return _prefix


def new_id(kind: str = "run") -> str:
    """The next id of ``kind`` (``run`` or ``serve``) in this process."""
    with _lock:
        counter = _counters.setdefault(kind, itertools.count(1))
        return f"{kind}-{_prefix}-{next(counter)}"


def expand(text: str) -> str:
    """``run-3`` as this session's full id (``run-<prefix>-3``); any other text unchanged (a
    full id, an id of an earlier session, something that is no id)."""
    match = ID_PATTERN.fullmatch(text)
    if match is None or match.group(2) is not None:
        return text
    return f"{match.group(1)}-{_prefix}-{int(match.group(3))}"
