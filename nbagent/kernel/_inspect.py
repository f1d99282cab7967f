"""Looking at the namespace without running anything: the list of variables, and one described.

Sizes come from the types nbagent knows (exact builtins, NumPy arrays, pandas frames) and are
read directly; everything that is an object's own code (a repr, a signature, a docstring, a
frame's cells) runs through a :class:`~nbagent._ground.guard.Reader`: bounded in time, stopped with
the call, what it raised said in the text. One hostile object is one line saying so, never a failed
tool. Large objects are summarised: a DataFrame's columns and dtypes and a few rows, an array's
shape, dtype and a few values, never the whole.
"""

from __future__ import annotations

import collections
import inspect
import types
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from .._ground.guard import Reader, Unreadable, exact
from ..content import Shown, Table, TextPart, ToolResult, error_result
from ._exact_base import byte_size
from ._namespace import READ_TIMEOUT, visible_names
from ._objects import (
    is_array,
    is_class,
    is_frame,
    kind_name,
    short_repr,
    size_text,
    type_name,
)
from ._present import bounded_repr, frame_table

__all__ = ["describe_variable", "list_variables"]

#: Variables listed at most; the rest are counted.
MAX_LISTED = 300
#: Columns and rows a description shows at most.
MAX_COLUMNS = 60
HEAD_ROWS = 5


T = TypeVar("T")
_SCALARS = frozenset({bool, int, float, complex})
_COLLECTIONS = frozenset({list, tuple, set, frozenset})
_MAPPINGS = frozenset({dict, collections.OrderedDict, collections.defaultdict, collections.Counter})


def list_variables(
    namespace: Mapping[str, Any], hidden: Mapping[str, Any] | None, reader: Reader | None = None
) -> ToolResult:
    with _reading(reader) as read:
        return _list(namespace, hidden, read)


def _list(
    namespace: Mapping[str, Any], hidden: Mapping[str, Any] | None, reader: Reader
) -> ToolResult:
    names = visible_names(namespace, hidden)
    rows = []
    for name in sorted(names)[:MAX_LISTED]:
        value = names[name]
        if type(value) is types.ModuleType:
            kind, summary = "module", _module_name(value)
        else:
            kind, summary = type_name(value), size_text(value) or _scalar(value, reader)
        rows.append((name, kind, summary))
    more = len(names) - len(rows)
    lines = [
        f"{name}: {kind}" + (f" ({summary})" if summary else "") for name, kind, summary in rows
    ]
    if more:
        lines.append(f"… and {more} more variables (listed: the first {MAX_LISTED} by name)")
    text = "\n".join(lines) if lines else "The namespace holds no variables yet."
    table = Table(("name", "type", "size or value"), tuple(rows))
    pieces = (Shown("table", table, "Variables"),) if rows else (Shown("text", text),)
    return ToolResult((TextPart(text),), value=pieces)


class _reading:
    """The reader given, or one of its own for the length of a look."""

    def __init__(self, reader: Reader | None) -> None:
        self._given = reader
        self._own: Reader | None = None

    def __enter__(self) -> Reader:
        if self._given is not None:
            return self._given
        self._own = Reader(READ_TIMEOUT, name="look")
        return self._own

    def __exit__(self, *exc: object) -> None:
        if self._own is not None:
            self._own.close()


def _module_name(module: types.ModuleType) -> str:
    name = vars(module).get("__name__")
    return name if type(name) is str else "?"


def _scalar(value: Any, reader: Reader) -> str:
    if value is None or exact(value, _SCALARS):
        text = short_repr(value)
        return text.removeprefix("int (").removesuffix(")") if text.startswith("int (") else text
    if type(value) is types.FunctionType or is_class(value):
        name = short_repr(value).partition(" ")[2]
        try:
            return reader.call("its signature", _signature, value)[:80]
        except Unreadable:
            return name
    return ""


def _signature(value: Any) -> str:
    """On a reader's worker: ``name(arguments)`` (a class's signature is its metaclass's, its
    ``__init__``'s or ``__signature__``: anyone's code)."""
    name = value.__name__ if type(value.__name__) is str else "?"
    try:
        return f"{name}{inspect.signature(value)}"
    except (TypeError, ValueError):
        return name


def describe_variable(
    namespace: Mapping[str, Any],
    hidden: Mapping[str, Any] | None,
    name: str,
    *,
    max_chars: int,
    reader: Reader | None = None,
) -> ToolResult:
    with _reading(reader) as read:
        return _describe(namespace, hidden, name, max_chars, read)


def _describe(
    namespace: Mapping[str, Any],
    hidden: Mapping[str, Any] | None,
    name: str,
    max_chars: int,
    reader: Reader,
) -> ToolResult:
    names = visible_names(namespace, hidden)
    if name not in names:
        close = sorted(n for n in names if n.lower().startswith(name[:1].lower()))[:10]
        hint = f"; names starting alike: {', '.join(close)}" if close else ""
        return error_result(f"no variable named {name!r} in the namespace{hint}")
    value = names[name]
    pieces: list[Shown] = []
    lines = [f"{name}: {type_name(value)}"]

    def read(what: str, fn: Callable[..., T], *args: Any) -> T | None:
        """One part of the description; what failed is said as a line, and the rest goes on."""
        try:
            return reader.call(what, fn, *args)
        except Unreadable as exc:
            lines.append(f"({exc})")
            return None

    kind = type(value)
    if is_frame(value):
        lines.extend(read("its columns", _frame_lines, value) or ())
        table = read("its first rows", _head_table, value)
        if table is not None:
            pieces.append(Shown("table", table, f"first {min(HEAD_ROWS, len(value))} rows"))
    elif is_array(value):
        _array(value, lines, max_chars, reader)
    elif kind is types.ModuleType:
        where = vars(value).get("__file__")
        shown = where if type(where) is str else "built in"
        lines.append(f"module {_module_name(value)} ({shown})")
    elif kind is types.FunctionType or kind is types.MethodType or is_class(value):
        lines.extend(read("its signature and docstring", _callable_lines, value) or ())
    elif exact(value, _MAPPINGS):
        keys = list(value)[:30]
        lines.append(f"{len(value)} items; keys: {bounded_repr(keys, 1_000, reader=reader)}")
        lines.append(f"value: {bounded_repr(value, max_chars, reader=reader)}")
    elif exact(value, _COLLECTIONS):
        kinds = sorted({kind_name(type(v)) for v in list(value)[:1_000]})
        lines.append(f"{len(value)} items of type {', '.join(kinds) or '-'}")
        lines.append(f"value: {bounded_repr(value, max_chars, reader=reader)}")
    else:
        lines.append(f"value: {bounded_repr(value, max_chars, reader=reader)}")
    text = "\n".join(lines)
    # no label: the text's first line already names the variable (a label printed it twice)
    if not pieces:
        pieces.append(Shown("text", text))
    else:
        pieces.insert(0, Shown("text", "\n".join(lines[:3])))
    return ToolResult((TextPart(text),), value=tuple(pieces))


def _head_table(frame: Any) -> Table:
    return frame_table(frame, max_rows=HEAD_ROWS, max_cols=MAX_COLUMNS)


def _callable_lines(value: Any) -> list[str]:
    lines = []
    try:
        lines.append(f"signature: {value.__name__}{inspect.signature(value)}")
    except (TypeError, ValueError):
        pass
    doc = inspect.getdoc(value)
    if type(doc) is str and doc:
        lines.append(doc[:1_000])
    return lines


def _frame_lines(frame: Any) -> list[str]:
    """On a reader's worker: a frame's shape, columns and dtypes, memory, first rows as text."""
    lines = [f"shape: {' × '.join(str(n) for n in frame.shape)}"]
    if hasattr(frame, "columns"):
        columns = list(zip(frame.columns, frame.dtypes, strict=False))
        shown = ", ".join(f"{c} ({t})" for c, t in columns[:MAX_COLUMNS])
        more = f", … {len(columns) - MAX_COLUMNS} more" if len(columns) > MAX_COLUMNS else ""
        lines.append(f"columns: {shown}{more}")
    else:
        lines.append(f"dtype: {frame.dtype}; name: {frame.name!r}")
    try:
        usage = frame.memory_usage(index=True, deep=False)
        total = int(usage.sum() if hasattr(usage, "sum") else usage)
        lines.append(
            f"memory: about {byte_size(total)} (the objects in object columns not counted)"
        )
    except Exception:
        pass
    head = frame.head(HEAD_ROWS)
    if hasattr(head, "iloc") and hasattr(head, "columns") and head.shape[1] > MAX_COLUMNS:
        head = head.iloc[:, :MAX_COLUMNS]
    try:
        lines.append(f"first {len(head)} rows:\n{head.to_string(max_colwidth=40)}")
    except Exception:
        pass
    return lines


def _array(array: Any, lines: list[str], max_chars: int, reader: Reader) -> None:
    lines.append(f"shape: {array.shape}; dtype: {array.dtype}; {array.nbytes:,} bytes")
    try:
        flat = array.reshape(-1)[:10] if array.flags.c_contiguous else array.flat[:10]
        first = list(flat.tolist())  # numbers as Python's; objects as they are, read bounded
        lines.append(f"first values: {bounded_repr(first, max_chars, reader=reader)}")
        if array.size and array.size <= 10_000_000 and array.dtype.kind in "iuf":
            lines.append(f"min {array.min()!r}, max {array.max()!r}, mean {array.mean()!r}")
    except Exception:
        pass
