"""Looking at one object of the person's without running any of its code.

Everything here reads what the interpreter itself keeps: ``type(x)`` (never ``x.__class__``,
which an object may fake, and never ``isinstance``, which asks it), a class's name and module as
``type`` stores them (a metaclass's own attributes are never asked), the length of a builtin
container through the builtin's own method (``list.__len__(x)``: a subclass's ``__len__`` never
runs), the shape of a NumPy array or pandas frame of exactly those types. Whatever needs more
runs through a :class:`~nbagent._ground.guard.Reader`. This is what the cheap signature of every
name before a snippet, the namespace diff's descriptions and ``list_variables`` are made of.
"""

from __future__ import annotations

import collections
import operator
import sys
import types
from typing import Any

from .._ground.guard import exact as _exact
from .._ground.guard import type_attribute

__all__ = [
    "ABSENT",
    "is_array",
    "is_class",
    "is_frame",
    "kind_name",
    "short_repr",
    "signature_text",
    "size_text",
    "type_name",
]

#: Marks a name that was not bound.
ABSENT: Any = type("Absent", (), {"__repr__": lambda self: "<absent>"})()


def type_name(value: Any) -> str:
    """``int``, ``pandas.DataFrame``, ``Sale`` (a class the notebook defined)."""
    return kind_name(type(value))


def kind_name(kind: type) -> str:
    """A class's name as :func:`type_name` gives it, read as ``type`` stores it (a metaclass's
    own ``__module__`` or ``__qualname__`` is never asked)."""
    module = type_attribute(kind, "__module__")
    qualname = type_attribute(kind, "__qualname__") or type_attribute(kind, "__name__")
    name = qualname if "<locals>" not in qualname else type_attribute(kind, "__name__")
    if module in ("builtins", "__main__") or module.startswith("_") or not module:
        return name or "object"
    return f"{module.split('.')[0]}.{name}"


def _library(module: str, name: str) -> Any:
    """``numpy.ndarray`` and the like, if that module is imported (never imports it)."""
    found = sys.modules.get(module)
    if type(found) is not types.ModuleType:
        return None
    return vars(found).get(name)


def is_frame(value: Any) -> bool:
    """A pandas DataFrame or Series, of exactly that type (a subclass is someone's code)."""
    kind = type(value)
    return kind is _library("pandas", "DataFrame") or kind is _library("pandas", "Series")


def is_array(value: Any) -> bool:
    """A NumPy array of exactly ``numpy.ndarray``."""
    return type(value) is _library("numpy", "ndarray")


def is_class(value: Any) -> bool:
    """A class (its metaclass is never asked: issubclass on ``type(value)`` reads the MRO)."""
    return issubclass(type(value), type)


#: Builtin containers read through the builtin's own methods (``list.__len__(x)``, not
#: ``len(x)``), so a subclass's ``__len__``, ``__iter__`` or ``__getitem__`` never runs.
_BASES = (list, tuple, dict, set, frozenset, str, bytes, bytearray)
#: Builtin types of their own (never subclassed) whose length is read directly.
_LEAVES = frozenset({range, collections.deque})
_BASE: dict[type, type | None] = {}
_SCALARS = frozenset({bool, int, float, complex})
CALLABLES = frozenset({types.FunctionType, types.BuiltinFunctionType, types.ModuleType})


def builtin_base(kind: type) -> type | None:
    """The builtin container ``kind`` is (or derives from), found in its MRO: issubclass
    against a builtin asks no metaclass."""
    cached = type(kind) is type  # hashing the class asks no metaclass of someone's
    if cached and kind in _BASE:
        return _BASE[kind]
    found = next((base for base in _BASES if issubclass(kind, base)), None)
    if cached:
        if len(_BASE) > 10_000:  # classes made in a loop: keep the table small
            _BASE.clear()
        _BASE[kind] = found
    return found


def _size(value: Any) -> Any:
    """The length (int) or shape (tuple) of a value nbagent can measure without running its
    code (builtin containers and their subclasses, NumPy arrays, pandas frames), else None."""
    kind = type(value)
    base = builtin_base(kind)
    try:
        if base is not None:
            return base.__len__(value)  # type: ignore[attr-defined]
        if _exact(value, _LEAVES):
            return len(value)
    except (OverflowError, TypeError):  # range(10**30)
        return None
    if is_array(value) or is_frame(value):
        try:
            shape = value.shape
        except Exception:
            return None
        return tuple(int(n) for n in shape) if type(shape) is tuple else None
    return None


def _size_words(kind: type, size: Any) -> str:
    if type(size) is tuple:
        return "×".join(str(n) for n in size)
    if type(size) is int:
        return f"{size} {'chars' if kind is str else 'items'}"
    return ""


def size_text(value: Any) -> str:
    """Shape or length of what nbagent knows how to measure cheaply ("" otherwise)."""
    return _size_words(type(value), _size(value))


def short_repr(value: Any, limit: int = 60) -> str:
    """A one-line description that never asks an object for its repr (which may be huge, slow
    or raise): exact builtin scalars as themselves, the rest by type and size."""
    if value is ABSENT:
        return ""
    kind = type(value)
    if value is None or _exact(value, _SCALARS):
        if kind is int and value.bit_length() > 128:  # a huge int's repr is slow, or refused
            text = f"int ({value.bit_length():,} bits)"
        else:
            text = repr(value)
    elif kind is str:
        text = repr(value[: limit + 2])
    elif _exact(value, CALLABLES) or is_class(value):
        text = f"{kind_name(kind)} {_own_name(value)}".rstrip()
    else:
        return signature_text((kind, _size(value)), limit)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _own_name(value: Any) -> str:
    """The name of a function, class or module, read where the interpreter keeps it."""
    if is_class(value):
        return type_attribute(value, "__qualname__")
    if type(value) is types.ModuleType:
        name = vars(value).get("__name__")
    else:  # a function's __qualname__ is the function object's own slot
        name = getattr(value, "__qualname__", "")
    return name if type(name) is str else ""


def signature_text(signature: Any, limit: int = 60) -> str:
    """What a :func:`quick_signature` says: ``list (3 items)``, ``pandas.DataFrame (4×2)``,
    ``Sale``: the before column of an in-place change (taken before the snippet ran)."""
    kind, size = signature if type(signature) is tuple else (signature, None)
    words = _size_words(kind, size)
    text = kind_name(kind) + (f" ({words})" if words else "")
    return text if len(text) <= limit else text[: limit - 1] + "…"


#: How :func:`quick_signature` measures a value of each type: the builtin's own ``__len__``,
#: a shape reader, or False (not at all); each type is looked at once.
_MEASURE: dict[type, Any] = {}


#: The shape of an exact ndarray or pandas frame: a tuple of ints, read by C code.
_shape = operator.attrgetter("shape")


def _measure(kind: type) -> Any:
    base = builtin_base(kind)
    if kind is collections.deque or (base is kind and base in (list, dict, set, bytearray)):
        return len  # the builtin itself: len() runs its own C slot
    if base in (list, dict, set, bytearray):
        return base.__len__  # a subclass: the builtin's slot
    if (
        kind is _library("numpy", "ndarray")
        or kind is _library("pandas", "DataFrame")
        or kind is _library("pandas", "Series")
    ):
        return _shape
    return False


def quick_signature(value: Any) -> Any:
    """A signature costing O(1) that runs none of the object's code: the type and, for mutable
    builtin containers (their subclasses too), arrays and frames, the length or shape (a type
    is looked at once: 1,000 names cost a few hundred microseconds)."""
    kind = type(value)
    if type(kind) is not type:  # a metaclass of someone's: its __hash__ is not asked
        return kind
    how = _MEASURE.get(kind)
    if how is None:
        if len(_MEASURE) > 10_000:  # classes made in a loop: keep the table small
            _MEASURE.clear()
        how = _MEASURE[kind] = _measure(kind)
    if how is False:
        return kind
    try:
        size = how(value)
    except Exception:
        return kind
    return kind if size is None else (kind, size)


def same_signature(a: Any, b: Any) -> bool:
    """Compare two signatures by identity of their types (a metaclass ``__eq__`` never runs)."""
    if type(a) is tuple and type(b) is tuple:
        return a[0] is b[0] and a[1] == b[1]  # lengths and shapes: ints
    return a is b


def token(value: Any) -> Any:
    """An element of a container, as a fingerprint sees it: small exact scalars by value (an
    equal number recomputed is no change), everything else by identity."""
    kind = type(value)
    if value is None or kind is bool or kind is int or kind is float:
        return (kind.__name__, value if kind is not int or value.bit_length() < 256 else id(value))
    if (kind is str or kind is bytes) and len(value) <= 256:
        return value
    return ("id", id(value))


_IMMUTABLE = frozenset(
    {
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
    }
)


def immutable(value: Any) -> bool:
    """Nothing in it can change in place (exact types only: a subclass may hold anything)."""
    return (
        value is None
        or _exact(value, _IMMUTABLE)
        or is_class(value)
        or (type(value) is tuple and len(value) <= 100 and all(immutable(v) for v in value))
    )
