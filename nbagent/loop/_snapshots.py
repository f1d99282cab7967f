"""The history as each request of a run sends it, without copying the history for every request.

Every request carries the conversation as it stood (``Request.messages``), and a run keeps every
request (``RunResult.exchanges``, which forks and inspection read). A tuple per request cost a
copy of the whole history per step, time and memory quadratic in the run's length (a run of
1,000 steps kept a million references), and the garbage collector walked each copy again.

Here a run keeps one append-only log of the history, and a request holds a
:class:`HistorySnapshot`: that log and a length, a read-only sequence that behaves as the tuple
it replaces (equal to it, same hash, indexing and slicing). Before each request the log catches
up with ``agent.messages``: what the loop appended since the last request is appended to the
log; anything else (the last message replaced by a step-mode edit, the list shortened or
replaced) starts a new log, so no snapshot ever changes. A change in the middle of the list
while the run is going, by code outside the loop, is the one thing it does not look for: the
loop never makes one, and looking would mean reading the whole history again.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any, overload

from ..messages import Message

__all__ = ["HistoryLog", "HistorySnapshot"]


class HistorySnapshot(Sequence[Message]):
    """The first ``n`` messages of an append-only log: the history as one request sent it.

    It compares, hashes and prints as ``tuple(snapshot)`` would; slicing gives a tuple.
    """

    __slots__ = ("_log", "_n")

    def __init__(self, log: list[Message], n: int) -> None:
        self._log = log
        self._n = n

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Message, ...]: ...

    def __getitem__(self, index: int | slice) -> Message | tuple[Message, ...]:
        if isinstance(index, slice):
            return tuple(self._log[: self._n][index])
        n = self._n
        position = index.__index__()
        if position < 0:
            position += n
        if not 0 <= position < n:
            raise IndexError("history index out of range")
        return self._log[position]

    def __iter__(self) -> Iterator[Message]:
        return itertools.islice(self._log, self._n)  # the log may grow past n meanwhile

    def __reversed__(self) -> Iterator[Message]:
        return reversed(self._log[: self._n])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, HistorySnapshot):
            if other._log is self._log and other._n == self._n:
                return True
            return self._n == other._n and tuple(self) == tuple(other)
        if isinstance(other, tuple):
            return len(other) == self._n and tuple(self) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __add__(self, other: Any) -> tuple[Message, ...]:
        if isinstance(other, (tuple, HistorySnapshot)):
            return (*self, *other)
        return NotImplemented

    def __radd__(self, other: Any) -> tuple[Message, ...]:
        if isinstance(other, tuple):
            return (*other, *self)
        return NotImplemented

    def __repr__(self) -> str:
        return repr(tuple(self))


class HistoryLog:
    """One run's log of its history; :meth:`snapshot` costs what was added since the last one."""

    __slots__ = ("_log", "_source")

    def __init__(self) -> None:
        self._log: list[Message] = []
        self._source: list[Message] | None = None

    def snapshot(self, messages: list[Message]) -> HistorySnapshot:
        """``messages`` as they are now, as a snapshot that never changes."""
        log = self._log
        n = len(log)
        if (
            messages is self._source
            and len(messages) >= n
            and (n == 0 or messages[n - 1] is log[n - 1])
        ):
            if len(messages) > n:
                log.extend(messages[n:])  # what the loop appended since the last request
        else:  # a new list, or one changed other than at its end: a new log
            log = self._log = list(messages)
            self._source = messages
        return HistorySnapshot(log, len(log))
