"""Looking at the namespace without running anything: the list of variables, and one described.

Nothing here calls an unknown object's methods: sizes come from the types nbagent knows
(builtins, NumPy arrays, pandas frames), a repr only from builtins (bounded), a signature from
functions and classes. Large objects are summarised: a DataFrame's columns and dtypes and a few
rows, an array's shape, dtype and a few values, never the whole.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Mapping
from typing import Any

from ..content import Shown, Table, TextPart, ToolResult, error_result
from ._namespace import (
    byte_size,
    is_array,
    is_frame,
    short_repr,
    size_text,
    type_name,
    visible_names,
)
from ._present import bounded_repr

__all__ = ["describe_variable", "list_variables"]

#: Variables listed at most; the rest are counted.
MAX_LISTED = 300
#: Columns and rows a description shows at most.
MAX_COLUMNS = 60
HEAD_ROWS = 5


def list_variables(namespace: Mapping[str, Any], hidden: Mapping[str, Any] | None) -> ToolResult:
    names = visible_names(namespace, hidden)
    rows = []
    for name in sorted(names)[:MAX_LISTED]:
        value = names[name]
        if isinstance(value, types.ModuleType):
            kind, summary = "module", value.__name__
        else:
            kind, summary = type_name(value), size_text(value) or _scalar(value)
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


def _scalar(value: Any) -> str:
    if value is None or isinstance(value, (bool, int, float, complex)):
        return short_repr(value)
    if isinstance(value, (types.FunctionType, type)):
        try:
            return f"{value.__name__}{inspect.signature(value)}"[:80]
        except (TypeError, ValueError):
            return value.__name__
    return ""


def describe_variable(
    namespace: Mapping[str, Any], hidden: Mapping[str, Any] | None, name: str, *, max_chars: int
) -> ToolResult:
    names = visible_names(namespace, hidden)
    if name not in names:
        close = sorted(n for n in names if n.lower().startswith(name[:1].lower()))[:10]
        hint = f"; names starting alike: {', '.join(close)}" if close else ""
        return error_result(f"no variable named {name!r} in the namespace{hint}")
    value = names[name]
    pieces: list[Shown] = []
    lines = [f"{name}: {type_name(value)}"]
    if is_frame(value):
        _frame(value, lines, pieces)
    elif is_array(value):
        _array(value, lines, max_chars)
    elif isinstance(value, types.ModuleType):
        lines.append(f"module {value.__name__} ({getattr(value, '__file__', None) or 'built in'})")
    elif isinstance(value, (types.FunctionType, types.MethodType, type)):
        try:
            lines.append(f"signature: {value.__name__}{inspect.signature(value)}")
        except (TypeError, ValueError):
            pass
        doc = inspect.getdoc(value)
        if doc:
            lines.append(doc[:1_000])
    elif isinstance(value, dict):
        keys = list(value)[:30]
        lines.append(f"{len(value)} items; keys: {bounded_repr(keys, 1_000)}")
        lines.append(f"value: {bounded_repr(value, max_chars)}")
    elif isinstance(value, (list, tuple, set, frozenset)):
        kinds = sorted({type_name(v) for v in list(value)[:1_000]})
        lines.append(f"{len(value)} items of type {', '.join(kinds) or '-'}")
        lines.append(f"value: {bounded_repr(value, max_chars)}")
    else:
        lines.append(f"value: {bounded_repr(value, max_chars)}")
    text = "\n".join(lines)
    # no label: the text's first line already names the variable (a label printed it twice)
    if not pieces:
        pieces.append(Shown("text", text))
    else:
        pieces.insert(0, Shown("text", "\n".join(lines[:3])))
    return ToolResult((TextPart(text),), value=tuple(pieces))


def _frame(frame: Any, lines: list[str], pieces: list[Shown]) -> None:
    lines.append(f"shape: {' × '.join(str(n) for n in frame.shape)}")
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
    pieces.append(Shown("table", head, f"first {len(head)} rows"))


def _array(array: Any, lines: list[str], max_chars: int) -> None:
    lines.append(f"shape: {array.shape}; dtype: {array.dtype}; {array.nbytes:,} bytes")
    try:
        flat = array.reshape(-1)[:10] if array.flags.c_contiguous else array.flat[:10]
        lines.append(f"first values: {bounded_repr(list(flat.tolist()), max_chars)}")
        if array.size and array.size <= 10_000_000 and array.dtype.kind in "iuf":
            lines.append(f"min {array.min()!r}, max {array.max()!r}, mean {array.mean()!r}")
    except Exception:
        pass
