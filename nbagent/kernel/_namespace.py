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
"""

from __future__ import annotations

import copy
import hashlib
import sys
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ABSENT",
    "Before",
    "Change",
    "NamespaceDiff",
    "short_repr",
    "type_name",
    "visible",
    "visible_names",
]

#: Marks a name that was not bound.
ABSENT: Any = type("Absent", (), {"__repr__": lambda self: "<absent>"})()

#: The shell's own names, never part of what a person's code defines.
SHELL_NAMES = frozenset({"In", "Out", "get_ipython", "exit", "quit"})
#: Values sampled from a large array or table for its fingerprint.
SAMPLE = 2048
#: Containers up to this size are fingerprinted whole; larger ones are sampled.
WHOLE = 10_000
#: Items a size estimate walks before it calls a container too large to copy.
WALK = 200_000


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


def type_name(value: Any) -> str:
    """``int``, ``pandas.DataFrame``, ``Sale`` (a class the notebook defined)."""
    kind = type(value)
    module = getattr(kind, "__module__", "") or ""
    name = kind.__qualname__ if "<locals>" not in kind.__qualname__ else kind.__name__
    if module in ("builtins", "__main__") or module.startswith("_"):
        return name
    return f"{module.split('.')[0]}.{name}"


def _module(value: Any) -> str:
    return getattr(type(value), "__module__", "") or ""


def is_frame(value: Any) -> bool:
    return _module(value).startswith("pandas") and type(value).__name__ in ("DataFrame", "Series")


def is_array(value: Any) -> bool:
    return _module(value) == "numpy" and type(value).__name__ == "ndarray"


def size_text(value: Any) -> str:
    """Shape or length of what nbagent knows how to measure cheaply ("" otherwise)."""
    try:
        if is_frame(value) or is_array(value):
            return "×".join(str(n) for n in value.shape)
        if isinstance(value, (list, tuple, dict, set, frozenset, str, bytes, bytearray)):
            return f"{len(value)} {'chars' if isinstance(value, str) else 'items'}"
    except Exception:
        return ""
    return ""


def short_repr(value: Any, limit: int = 60) -> str:
    """A one-line description that never asks an unknown object for its repr (which may be huge
    or slow): scalars as themselves, the rest by type and size."""
    if value is ABSENT:
        return ""
    if value is None or isinstance(value, (bool, int, float, complex)):
        text = repr(value)
    elif isinstance(value, str):
        text = repr(value[: limit + 2])
    elif isinstance(value, (types.FunctionType, type, types.ModuleType)):
        name = getattr(value, "__qualname__", getattr(value, "__name__", ""))
        text = f"{type(value).__name__} {name}"
    else:
        size = size_text(value)
        text = f"{type_name(value)}" + (f" ({size})" if size else "")
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


#: How :func:`_quick` measures a value of each type: 0 not at all, 1 its length, 2 its shape.
_MEASURE: dict[type, int] = {}


def _measure(kind: type) -> int:
    module = getattr(kind, "__module__", "") or ""
    if (module == "numpy" and kind.__name__ == "ndarray") or (
        module.startswith("pandas") and kind.__name__ in ("DataFrame", "Series")
    ):
        return 2
    return 1 if issubclass(kind, (list, dict, set, bytearray)) else 0


def _quick(value: Any) -> Any:
    """A signature costing O(1): the type and, for known containers, length or shape (a type is
    looked at once: 1,000 names cost a few hundred microseconds)."""
    kind = type(value)
    how = _MEASURE.get(kind)
    if how is None:
        how = _MEASURE[kind] = _measure(kind)
    if not how:
        return kind
    try:
        return (kind, value.shape) if how == 2 else (kind, len(value))
    except Exception:
        return kind


def _token(value: Any) -> Any:
    """An element of a container, as a fingerprint sees it: small scalars by value (an equal
    number recomputed is no change), everything else by identity."""
    if value is None or isinstance(value, (bool, int, float)):
        return (type(value).__name__, value)
    if isinstance(value, (str, bytes)) and len(value) <= 256:
        return value
    return ("id", id(value))


def _positions(length: int) -> list[int]:
    if length <= SAMPLE:
        return list(range(length))
    step = (length - 1) / (SAMPLE - 1)
    return sorted({round(i * step) for i in range(SAMPLE)})


def fingerprint(value: Any) -> str | None:
    """A bounded fingerprint of an object's content (None: nbagent cannot tell, by design)."""
    digest = hashlib.blake2b(digest_size=16)
    try:
        if is_frame(value):
            _frame_fingerprint(value, digest)
        elif is_array(value):
            digest.update(repr((value.shape, str(value.dtype))).encode())
            if value.nbytes <= 1 << 20:
                digest.update(value.tobytes())
            elif value.size:
                digest.update(value.flat[_positions(value.size)].tobytes())
        elif isinstance(value, (list, tuple)):
            picks = range(len(value)) if len(value) <= WHOLE else _positions(len(value))
            digest.update(repr((len(value), [_token(value[i]) for i in picks])).encode())
        elif isinstance(value, dict):
            if len(value) > WHOLE:
                digest.update(repr(("dict", len(value))).encode())
            else:
                digest.update(repr([(_token(k), _token(v)) for k, v in value.items()]).encode())
        elif isinstance(value, (set, frozenset)):
            digest.update(
                repr((len(value), hash(frozenset(value)) if len(value) <= WHOLE else 0)).encode()
            )
        elif isinstance(value, bytearray):
            data = (
                bytes(value)
                if len(value) <= 1 << 20
                else bytes(value[:: max(1, len(value) // SAMPLE)])
            )
            digest.update(data)
        elif isinstance(value, (types.ModuleType, types.FunctionType, type)):
            return None
        else:
            attributes = getattr(value, "__dict__", None)
            if not isinstance(attributes, dict) or len(attributes) > 100:
                return None
            digest.update(repr(sorted((str(k), _token(v)) for k, v in attributes.items())).encode())
    except Exception:  # an object that cannot be read this way: nbagent cannot tell
        return None
    return digest.hexdigest()


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
    ) -> Before:
        objects = visible_names(namespace, hidden)
        quick = {name: _quick(value) for name, value in objects.items()}
        names = frozenset(n for n in watched if n in objects)
        before = cls(objects, quick, names)
        memo: dict[int, Any] = {}
        for name in sorted(names):
            value = objects[name]
            before.prints[name] = fingerprint(value)
            before._copy(name, value, copy_budget, memo)
        return before

    def _copy(self, name: str, value: Any, budget: int, memo: dict[int, Any]) -> None:
        if _immutable(value):
            return  # nothing in place to undo
        room = budget - self.copied_bytes
        size = estimate_size(value, room)
        if size is None or size > room:
            self.not_copied[name] = (
                f"larger than the copy budget ({byte_size(budget)})"
                if size is None or size > budget
                else f"the copy budget ({byte_size(budget)}) was used by other names"
            )
            return
        try:
            if is_frame(value):
                duplicate = value.copy(deep=True)
            elif is_array(value):
                duplicate = value.copy()
            else:
                duplicate = copy.deepcopy(value, memo)
        except Exception as exc:
            self.not_copied[name] = f"it cannot be copied ({type(exc).__name__})"
            return
        self.copies[name] = duplicate
        self.sizes[name] = size
        self.copied_bytes += size

    def diff(
        self, namespace: Mapping[str, Any], hidden: Mapping[str, Any] | None
    ) -> tuple[NamespaceDiff, dict[str, Any], dict[str, str | None]]:
        """What changed; with the objects now bound and the fingerprints of watched names."""
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
                now = prints[name] = fingerprint(value)
                was = self.prints.get(name)
                if was is None or now is None:
                    if not _immutable(value):
                        uncertain.append(name)
                elif now != was:
                    changes.append(Change(name, "changed", short_repr(value), short_repr(value)))
            elif _quick(value) != self.quick.get(name):
                changes.append(Change(name, "changed", short_repr(value), short_repr(value)))
        for name, old in self.objects.items():
            if name not in after:
                changes.append(Change(name, "deleted", before=short_repr(old)))
        changes.sort(key=lambda c: ("added", "rebound", "changed", "deleted").index(c.kind))
        return NamespaceDiff(tuple(changes), (), tuple(uncertain)), after, prints


def _immutable(value: Any) -> bool:
    return (
        value is None
        or isinstance(
            value,
            (
                bool,
                int,
                float,
                complex,
                str,
                bytes,
                frozenset,
                range,
                types.ModuleType,
                types.FunctionType,
                types.BuiltinFunctionType,
                type,
            ),
        )
        or (
            isinstance(value, tuple)
            and all(_immutable(v) for v in value[:100])
            and len(value) <= 100
        )
    )


def estimate_size(value: Any, limit: int) -> int | None:
    """Bytes a copy of ``value`` would take, as far as a bounded look can tell (None: more than
    the walk may look at, or more than ``limit``)."""
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
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(item)
        elif is_frame(item) or is_array(item):
            size = estimate_size(item, limit)
            if size is None:
                return None
            total += size
        elif not isinstance(item, (str, bytes, bytearray, int, float, bool, complex, type(None))):
            attributes = getattr(item, "__dict__", None)
            if isinstance(attributes, dict):
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


def byte_size(size: float) -> str:
    """``512 bytes``, ``3.2 KB``, ``1.5 GB``."""
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:,.0f} {unit}" if unit == "bytes" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{size:,.0f} bytes"
