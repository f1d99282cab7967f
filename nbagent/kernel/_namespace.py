"""What a snippet changed in a namespace, and what it takes to change it back.

Before a snippet runs, :class:`Before` keeps a *reference* to every visible name's object (a dict
copy: no object is copied), a cheap signature of each (its type, and the length or shape of the
containers and arrays nbagent knows), and, for the names the snippet's code mentions, a bounded
content fingerprint and, within a size budget, a copy for undo. After it ran, :meth:`Before.diff`
compares: names added, rebound (another object) and deleted, and objects changed in place, as far
as a fingerprint can tell.

A fingerprint never reads a large object whole: arrays and tables are sampled (a few thousand
values at fixed positions), containers are read up to a bound. So a change that touches none of
the sampled values goes unnoticed, and a 2 GB DataFrame the snippet does not name costs a lookup
of its shape. Names starting with ``_`` and the shell's own names (``In``, ``Out``, ``exit`` …) are
not part of the namespace a person sees, and are left out.

Every object is the person's code. The signature of every name runs none of it
(:mod:`._objects`); exact builtin containers and NumPy arrays are fingerprinted directly; a
frame's fingerprint, another object's attributes and every copy run through a
:class:`~nbagent._ground.guard.Reader`: bounded in time, interruptible, what they raised said as
text (a fingerprint that cannot be taken is "cannot tell", a copy not taken is said by undo).
"""

from __future__ import annotations

import copy
import hashlib
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._ground.guard import Reader, Unreadable
from .._ground.guard import exact as _exact
from ._exact import Budget, Print, exact_print, needs_print, unchanged
from ._exact_base import byte_size
from ._objects import (
    ABSENT,
    CALLABLES,
    builtin_base,
    immutable,
    is_array,
    is_class,
    is_frame,
    quick_signature,
    same_signature,
    short_repr,
    signature_text,
    token,
    type_name,
)

__all__ = [
    "ABSENT",
    "READ_TIMEOUT",
    "Before",
    "Change",
    "NamespaceDiff",
    "short_repr",
    "type_name",
    "visible",
    "visible_names",
]

#: The shell's own names, never part of what a person's code defines.
SHELL_NAMES = frozenset({"In", "Out", "get_ipython", "exit", "quit"})
#: Values sampled from a large array or table for its fingerprint.
SAMPLE = 2048
#: Containers up to this size are fingerprinted whole; larger ones are sampled.
WHOLE = 10_000
#: Items a size estimate walks before it calls a container too large to copy.
WALK = 200_000
#: Seconds one read of an object may take where no toolkit says (``KernelLimits.read_timeout``).
READ_TIMEOUT = 2.0
#: Seconds one copy for undo may take where no toolkit says (``KernelLimits.copy_timeout``).
COPY_TIMEOUT = 30.0


def visible_names(namespace: Mapping[str, Any], hidden: Mapping[str, Any] | None) -> dict[str, Any]:
    """The names a person's code defined: no ``_`` names, none the shell put there itself."""
    hidden = hidden or {}
    # the test of visible(), inline: a call per name would cost every snippet ~0.1 ms per 1,000
    return {
        name: value
        for name, value in list(namespace.items())
        if type(name) is str
        and name[:1] != "_"
        and name not in SHELL_NAMES
        and hidden.get(name, _MISSING) is not value
    }


def visible(name: Any, value: Any, hidden: Mapping[str, Any] | None) -> bool:
    """Whether ``name``, bound to ``value``, is one of :func:`visible_names` (O(1): undo asks
    name by name; keep the two tests the same)."""
    return (
        type(name) is str
        and name[:1] != "_"
        and name not in SHELL_NAMES
        and (hidden is None or hidden.get(name, _MISSING) is not value)
    )


_MISSING = object()


def _positions(length: int) -> list[int]:
    if length <= SAMPLE:
        return list(range(length))
    step = (length - 1) / (SAMPLE - 1)
    return sorted({round(i * step) for i in range(SAMPLE)})


def fingerprint(value: Any, reader: Reader | None = None) -> str | None:
    """A bounded fingerprint of an object's content (None: nbagent cannot tell, by design).

    Exact builtin containers and NumPy arrays are read directly; a frame, or another object's
    attributes, through ``reader`` (bounded: see :mod:`nbagent._ground.guard`; a reader of its own
    with the default timeout when None), so an object whose code raises or hangs is "cannot tell".
    """
    digest = hashlib.blake2b(digest_size=16)
    base = builtin_base(type(value))
    try:
        if is_array(value):
            digest.update(repr((value.shape, str(value.dtype))).encode())
            if value.nbytes <= 1 << 20:
                digest.update(value.tobytes())
            elif value.size:
                digest.update(value.flat[_positions(value.size)].tobytes())
        elif base is list or base is tuple:  # through the builtin's methods: no override runs
            length = base.__len__(value)
            item = base.__getitem__
            picks = range(length) if length <= WHOLE else _positions(length)
            digest.update(repr((length, [token(item(value, i)) for i in picks])).encode())
        elif base is dict:
            if dict.__len__(value) > WHOLE:
                digest.update(repr(("dict", dict.__len__(value))).encode())
            else:
                items = [(token(k), token(v)) for k, v in dict.items(value)]
                digest.update(repr(items).encode())
        elif base is set or base is frozenset:
            # frozenset(a set) reuses the hashes the set stored: no element's __hash__ runs
            length = base.__len__(value)
            digest.update(repr((length, hash(frozenset(value)) if length <= WHOLE else 0)).encode())
        elif type(value) is bytearray:
            data = (
                bytes(value)
                if len(value) <= 1 << 20
                else bytes(value[:: max(1, len(value) // SAMPLE)])
            )
            digest.update(data)
        elif _exact(value, CALLABLES) or is_class(value):
            return None
        elif is_frame(value):
            _bounded(reader, "its content", _frame_fingerprint, value, digest)
        else:
            attributes = _bounded(reader, "its attributes", _attribute_tokens, value)
            if attributes is None:
                return None
            digest.update(attributes.encode())
    except Exception:  # an object that cannot be read this way: nbagent cannot tell
        return None
    return digest.hexdigest()


def _attribute_tokens(value: Any) -> str | None:
    """An object's attributes as fingerprint tokens (on a reader's worker: ``__dict__`` may
    be anyone's property)."""
    attributes = getattr(value, "__dict__", None)
    if type(attributes) is not dict or len(attributes) > 100:
        return None
    return repr(sorted((k if type(k) is str else "?", token(v)) for k, v in attributes.items()))


def _bounded(reader: Reader | None, what: str, fn: Any, *args: Any) -> Any:
    """``fn(*args)`` through ``reader`` (or one of its own); raises Unreadable."""
    if reader is not None:
        return reader.call(what, fn, *args)
    with Reader(READ_TIMEOUT, name="fingerprint") as own:
        return own.call(what, fn, *args)


def _frame_fingerprint(frame: Any, digest: Any) -> None:
    import pandas as pd

    digest.update(repr((type(frame).__name__, frame.shape)).encode())
    if hasattr(frame, "columns"):
        digest.update(
            repr(
                [(str(c), str(t)) for c, t in zip(frame.columns, frame.dtypes, strict=False)][:500]
            ).encode()
        )
    else:
        digest.update(repr((str(frame.name), str(frame.dtype))).encode())
    sample = frame.iloc[_positions(len(frame))]
    if hasattr(sample, "columns") and sample.shape[1] > 200:
        sample = sample.iloc[:, _positions(sample.shape[1])[:200]]
    try:
        digest.update(pd.util.hash_pandas_object(sample, index=True).to_numpy().tobytes())
    except TypeError:  # unhashable cells (lists …): their text, as far as it goes
        digest.update(sample.to_string(max_rows=SAMPLE, max_colwidth=50).encode())


@dataclass(frozen=True)
class Change:
    """One name the snippet changed: ``kind`` is "added", "rebound", "deleted" or "changed"
    (the same object, changed in place)."""

    name: str
    kind: str
    before: str = ""  # what it was (type and size, or the value of a scalar)
    after: str = ""

    def line(self) -> str:
        if self.kind == "added":
            return f"+{self.name} = {self.after}"
        if self.kind == "deleted":
            return f"-{self.name} (was {self.before})"
        if self.kind == "rebound":
            return f"{self.name}: {self.before} → {self.after}"
        return f"{self.name} changed in place ({self.after})"


@dataclass(frozen=True)
class NamespaceDiff:
    """What one snippet changed in the namespace."""

    changes: tuple[Change, ...] = ()
    restored: tuple[str, ...] = ()  # protected names the snippet removed or rebound, put back
    uncertain: tuple[str, ...] = ()  # names it mentioned whose content cannot be compared

    def __bool__(self) -> bool:
        return bool(self.changes or self.restored)

    def names(self, *kinds: str) -> list[str]:
        return [c.name for c in self.changes if not kinds or c.kind in kinds]

    def line(self) -> str:
        """The diff in one line, as the model reads it."""
        if not self.changes and not self.restored:
            return "Namespace: no names added, rebound, deleted or changed."
        parts = [c.line() for c in self.changes]
        text = "Namespace: " + "; ".join(parts) if parts else "Namespace: no other change"
        if self.restored:
            text += (
                f". Restored {', '.join(self.restored)}: code the agent runs may not remove or "
                "rebind nbagent, its tools or the shell's own names"
            )
        return text + "."

    def rows(self) -> tuple[tuple[str, ...], ...]:
        kinds = {
            "added": "added",
            "rebound": "rebound",
            "deleted": "deleted",
            "changed": "changed in place",
        }
        rows = [(c.name, kinds[c.kind], c.before, c.after) for c in self.changes]
        rows += [(name, "restored", "", "put back: protected") for name in self.restored]
        return tuple(rows)


@dataclass
class Before:
    """The namespace just before a snippet, and what undo needs of it."""

    objects: dict[str, Any]
    quick: dict[str, tuple[Any, ...]]
    watched: frozenset[str]
    prints: dict[str, str | None] = field(default_factory=dict)
    #: Exact fingerprints of watched names (or why there is none), for the in-place check.
    exact: dict[str, Print | str] = field(default_factory=dict)
    copies: dict[str, Any] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    not_copied: dict[str, str] = field(default_factory=dict)
    copied_bytes: int = 0

    @classmethod
    def take(
        cls,
        namespace: Mapping[str, Any],
        hidden: Mapping[str, Any] | None,
        watched: Iterable[str],
        copy_budget: int,
        reader: Reader | None = None,
        copy_timeout: float | None = None,
    ) -> Before:
        """Signatures of every name (run no object's code), and for ``watched`` names a
        fingerprint and a copy, each through ``reader`` where it is the object's code that
        runs (a copy within ``copy_timeout`` seconds)."""
        objects = visible_names(namespace, hidden)
        quick = {name: quick_signature(value) for name, value in objects.items()}
        names = frozenset(n for n in watched if n in objects)
        before = cls(objects, quick, names)
        memo: dict[int, Any] = {}
        read = reader if reader is not None else Reader(READ_TIMEOUT, name="before")
        budget = Budget(copy_budget)
        try:
            for name in sorted(names):
                value = objects[name]
                before.prints[name] = fingerprint(value, read)
                if needs_print(value):  # read whole, running none of its code
                    before.exact[name] = exact_print(value, budget)
                if not before._copy(name, value, copy_budget, memo, read, copy_timeout):
                    # a copy stopped half way may have left half-made objects in its memo,
                    # and its thread, still running, may write more: the next start afresh
                    memo = {}
        finally:
            if reader is None:  # its own: its worker ends now
                read.close()
        return before

    def _copy(
        self,
        name: str,
        value: Any,
        budget: int,
        memo: dict[int, Any],
        reader: Reader,
        timeout: float | None,
    ) -> bool:
        """Copy ``value`` for undo within the budget; False when a copy failed part way."""
        if immutable(value):
            return True  # nothing in place to undo
        room = budget - self.copied_bytes
        try:
            size, duplicate = reader.call(
                "its copy", _sized_copy, value, room, memo, timeout=timeout or COPY_TIMEOUT
            )
        except Unreadable as exc:
            self.not_copied[name] = str(exc)
            return False
        except Exception as exc:
            self.not_copied[name] = f"it cannot be copied ({type(exc).__name__})"
            return False
        if duplicate is _TOO_LARGE or size is None:
            self.not_copied[name] = (
                f"larger than the copy budget ({byte_size(budget)})"
                if size is None or size > budget
                else f"the copy budget ({byte_size(budget)}) was used by other names"
            )
            return True
        self.copies[name] = duplicate
        self.sizes[name] = size
        self.copied_bytes += size
        return True

    def diff(
        self,
        namespace: Mapping[str, Any],
        hidden: Mapping[str, Any] | None,
        reader: Reader | None = None,
    ) -> tuple[NamespaceDiff, dict[str, Any], dict[str, str | None]]:
        """What changed; with the objects now bound and the fingerprints of watched names. A
        watched object read whole before the snippet is compared exactly (one item changed in a
        large array counts); one that could not be, by its sampled fingerprint. The before column
        of an in-place change is what the signature said before the snippet ran (its length or
        shape then), not the object as it is now."""
        after = visible_names(namespace, hidden)
        changes: list[Change] = []
        uncertain: list[str] = []
        prints: dict[str, str | None] = {}
        for name, value in after.items():
            old = self.objects.get(name, ABSENT)
            if old is ABSENT:
                changes.append(Change(name, "added", after=short_repr(value)))
            elif value is not old:
                changes.append(Change(name, "rebound", short_repr(old), short_repr(value)))
            elif name in self.watched:
                now = prints[name] = fingerprint(value, reader)
                was = self.prints.get(name)
                exact = self.exact.get(name)
                if isinstance(exact, Print):  # read whole before: the answer is exact
                    if not unchanged(value, exact):
                        changes.append(self._changed(name, value))
                elif was is None or now is None:
                    if not immutable(value):
                        uncertain.append(name)
                elif now != was:
                    changes.append(self._changed(name, value))
            else:
                signature = quick_signature(value)  # the same type: the same object, fast
                if signature is not self.quick.get(name) and not same_signature(
                    signature, self.quick.get(name)
                ):
                    changes.append(self._changed(name, value))
        for name, old in self.objects.items():
            if name not in after:
                changes.append(Change(name, "deleted", before=short_repr(old)))
        changes.sort(key=lambda c: ("added", "rebound", "changed", "deleted").index(c.kind))
        return NamespaceDiff(tuple(changes), (), tuple(uncertain)), after, prints

    def _changed(self, name: str, value: Any) -> Change:
        return Change(name, "changed", signature_text(self.quick.get(name)), short_repr(value))


#: Marks a copy not taken: the object is over the room left in the copy budget.
_TOO_LARGE: Any = object()


def _sized_copy(value: Any, room: int, memo: dict[int, Any]) -> tuple[int | None, Any]:
    """The size of ``value`` and a copy of it, or ``_TOO_LARGE`` when it does not fit in
    ``room`` bytes (on a reader's worker: ``__deepcopy__`` and ``__sizeof__`` are anyone's)."""
    size = estimate_size(value, room)
    if size is None or size > room:
        return size, _TOO_LARGE
    if is_frame(value):
        return size, value.copy(deep=True)
    if is_array(value):
        return size, value.copy()
    return size, copy.deepcopy(value, memo)


_FLAT = frozenset({str, bytes, bytearray, int, float, bool, complex})


def estimate_size(value: Any, limit: int) -> int | None:
    """Bytes a copy of ``value`` would take, as far as a bounded look can tell (None: more than
    the walk may look at, or more than ``limit``). It runs objects' ``__sizeof__`` and
    ``__dict__``: call it through a :class:`~nbagent._ground.guard.Reader`."""
    try:
        if is_frame(value):
            usage = value.memory_usage(index=True, deep=False)
            total = int(usage.sum() if hasattr(usage, "sum") else usage)
            return total + _object_cells(value)
        if is_array(value):
            return int(value.nbytes)
    except Exception:
        return None
    seen: set[int] = set()
    stack = [value]
    total = 0
    steps = 0
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        steps += 1
        if steps > WALK:
            return None
        try:
            total += sys.getsizeof(item)
        except Exception:
            total += 64
        if total > limit:
            return total
        base = builtin_base(type(item))
        if base is dict:
            stack.extend(dict.keys(item))
            stack.extend(dict.values(item))
        elif base in (list, tuple, set, frozenset):
            stack.extend(base.__iter__(item))
        elif is_frame(item) or is_array(item):
            size = estimate_size(item, limit)
            if size is None:
                return None
            total += size
        elif item is not None and not _exact(item, _FLAT):
            attributes = getattr(item, "__dict__", None)
            if type(attributes) is dict:
                stack.append(attributes)
    return total


def _object_cells(frame: Any) -> int:
    """Bytes held by the Python objects in a frame's object columns, from a sample."""
    columns = [frame] if not hasattr(frame, "columns") else [frame[c] for c in frame.columns[:200]]
    total = 0
    for column in columns:
        if str(getattr(column, "dtype", "")) != "object" or not len(column):
            continue
        picks = _positions(len(column))[:200]
        sample = [sys.getsizeof(column.iat[i]) for i in picks]
        total += int(sum(sample) / len(sample) * len(column))
    return total
