"""What the exact fingerprints of :mod:`._exact` and :mod:`._exact_data` share, at the bottom of
both: a type's own slots read through ``type``'s descriptors (a metaclass's code never runs), the
refusal to vouch for an object, and what a reader of values offers the NumPy and pandas part."""

from __future__ import annotations

import collections
import types
from typing import Any, Protocol

_HEAPTYPE = 1 << 9
# read a type's own attributes with type's descriptors: a metaclass's __getattribute__ never runs
_T_MRO = type.__dict__["__mro__"]
_T_DICT = type.__dict__["__dict__"]
_T_FLAGS = type.__dict__["__flags__"]
_T_BASICSIZE = type.__dict__["__basicsize__"]
_T_ITEMSIZE = type.__dict__["__itemsize__"]
_T_DICTOFFSET = type.__dict__["__dictoffset__"]
_T_WEAKOFFSET = type.__dict__["__weakrefoffset__"]
_T_NAME = type.__dict__["__name__"]
_T_MODULE = type.__dict__["__module__"]
_METHOD_FUNC = types.MethodType.__dict__["__func__"]
_METHOD_SELF = types.MethodType.__dict__["__self__"]
_DEQUE_MAXLEN = collections.deque.__dict__["maxlen"]
_DEFAULT_FACTORY = collections.defaultdict.__dict__["default_factory"]


class _CannotTell(Exception):
    """The object holds something nbagent cannot read without running its code."""


def _describe(kind: type) -> str:
    """``Sale``, ``matplotlib.Figure``, ``itertools.count``: a type's name, as a person knows it."""
    module = _T_MODULE.__get__(kind)
    name = str(_T_NAME.__get__(kind))
    if type(module) is not str or module in ("builtins", "__main__") or not module:
        return name
    return f"{module.split('.')[0]}.{name}"


def byte_size(size: float) -> str:
    """``512 bytes``, ``3.2 KB``, ``1.5 GB``."""
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:,.0f} {unit}" if unit == "bytes" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{size:,.0f} bytes"


class Reading(Protocol):
    """What :mod:`._exact_data` asks of the reader that walks an object (``_exact._Reader``)."""

    hash: Any

    def spend(self, amount: int) -> None: ...

    def put(self, tag: bytes, data: bytes) -> None: ...

    def atom(self, value: Any) -> None: ...

    def sequence(self, tag: bytes, items: Any, length: int) -> None: ...

    def read(self, value: Any) -> None: ...
