"""Exact fingerprints, for undo: has an object changed at all since the agent's step ended?

The namespace diff samples (:func:`~._namespace.fingerprint`): enough to say what a snippet
changed, never enough to promise that undo does not overwrite a value the person changed since.
:func:`exact_print` reads an object whole, into a SHA-1 digest, and :func:`unchanged` reads it
again later and compares. They never run code of the person's objects: no ``__eq__``,
``__hash__``, ``__repr__``, ``__reduce__``, ``__len__`` or property. They read

* the exact builtin types (numbers, strings, bytes, lists, tuples, dicts, sets, deques ...);
* NumPy arrays (dtype, shape and buffer; object arrays element by element) and NumPy scalars;
* pandas DataFrames, Series and Indexes, column by column with pandas' own code;
* objects of classes defined in Python (dataclasses, namedtuples, enums, plain classes), through
  the interpreter's own ``__dict__`` and slot descriptors, when the class adds no state in C;
* functions, classes, modules and immutable values of the standard library by identity (each
  is kept alive with the fingerprint, so its id cannot be reused).

Anything else (an object of a C extension type, an ndarray subclass, a weakref to read through)
makes the whole object one nbagent *cannot tell* about, and the reason says which type. Reading
is bounded: every buffer byte and every 256 bytes per object visited one by one spend a budget
(``KernelLimits.copy_budget`` per snippet); an object over it is one undo cannot vouch for.
"""

from __future__ import annotations

import collections
import datetime
import decimal
import fractions
import hashlib
import io
import pathlib
import pickle
import re
import struct
import types
import uuid
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ._exact_base import (
    _DEFAULT_FACTORY,
    _DEQUE_MAXLEN,
    _HEAPTYPE,
    _METHOD_FUNC,
    _METHOD_SELF,
    _T_BASICSIZE,
    _T_DICT,
    _T_DICTOFFSET,
    _T_FLAGS,
    _T_ITEMSIZE,
    _T_MODULE,
    _T_MRO,
    _T_NAME,
    _T_WEAKOFFSET,
    _CannotTell,
    _describe,
    byte_size,
)
from ._exact_data import read_numpy, read_pandas

__all__ = ["Budget", "Print", "exact_print", "needs_print", "unchanged"]

#: What visiting one object one by one costs the budget, in bytes.
NODE = 256

#: Exact types read by value; a container of only these is read in one piece.
_FLAT = frozenset({int, float, complex, str, bytes, bool, type(None)})

#: Immutable values told apart by identity (exact types).
_ATOMS = frozenset(
    {
        type(Ellipsis),
        type(NotImplemented),
        range,
        slice,
        types.FunctionType,
        types.BuiltinFunctionType,
        types.BuiltinMethodType,
        types.MethodDescriptorType,
        types.WrapperDescriptorType,
        types.MethodWrapperType,
        types.ClassMethodDescriptorType,
        types.GetSetDescriptorType,
        types.MemberDescriptorType,
        types.CodeType,
        types.ModuleType,
        property,
        staticmethod,
        classmethod,
        weakref.ref,
        datetime.date,
        datetime.datetime,
        datetime.time,
        datetime.timedelta,
        datetime.timezone,
        decimal.Decimal,
        fractions.Fraction,
        uuid.UUID,
        re.Pattern,
        pathlib.PurePosixPath,
        pathlib.PureWindowsPath,
        pathlib.PosixPath,
        pathlib.WindowsPath,
    }
)
#: pandas' immutable scalars, told apart by identity (type names in pandas' own modules).
_PANDAS_ATOMS = frozenset({"Timestamp", "Timedelta", "NaTType", "NAType", "Period", "Interval"})

#: Builtin bases whose content a Python subclass keeps where nbagent can read it.
_BASES = (
    object,
    list,
    tuple,
    dict,
    collections.OrderedDict,
    collections.defaultdict,
    set,
    frozenset,
    collections.deque,
    int,
    float,
    str,
    bytes,
    bytearray,
    weakref.ref,
)


@dataclass(frozen=True)
class Print:
    """An object's content as a digest, and what reading it cost (a later read that costs more
    read something else)."""

    digest: bytes
    cost: int
    #: objects told apart by identity, kept alive so that their ids are not reused
    held: tuple[Any, ...] = field(default=(), repr=False)


class Budget:
    """Bytes the fingerprints of one snippet may still read."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.left = limit


class _TooLarge(Exception):
    """Reading the object would spend more than the budget."""


def needs_print(value: Any) -> bool:
    """False for values whose identity says everything (numbers, strings, functions ...)."""
    kind = type(value)
    if type(kind) is not type:  # ``kind in _FLAT`` would run its metaclass's __hash__ and __eq__
        return True
    return not (kind in _FLAT or kind in _ATOMS or _T_FLAGS.__get__(kind) & (1 << 31))


def exact_print(value: Any, budget: Budget) -> Print | str:
    """The exact fingerprint of ``value``, spending ``budget``; or why nbagent cannot tell."""
    reader = _Reader(budget.left)
    try:
        reader.read(value)
    except _TooLarge:
        if budget.left < budget.limit:
            return (
                "the fingerprints of the other names used the budget undo reads for its checks "
                f"({byte_size(budget.limit)}, KernelLimits.copy_budget)"
            )
        return (
            f"larger than the budget undo reads for its checks ({byte_size(budget.limit)}, "
            "KernelLimits.copy_budget)"
        )
    except _CannotTell as exc:
        outer = f"an object of type {_describe(type(value))}"
        inner = str(exc)
        if inner == outer:
            return f"nbagent cannot read {outer} without running its code"
        if any(type(value) is k for k in _READERS):  # a list …: what it holds cannot be read
            return f"it holds {inner}, which nbagent cannot read without running its code"
        return f"nbagent cannot read {outer} without running its code (it holds {inner})"
    except RecursionError:
        return "nested too deeply to read"
    except Exception as exc:  # changed while it was read (another thread), or an odd object
        return f"it could not be read ({type(exc).__name__})"
    budget.left -= reader.cost
    return Print(reader.digest(), reader.cost, tuple(reader.held))


def unchanged(value: Any, earlier: Print) -> bool:
    """Whether ``value`` holds exactly what it held when ``earlier`` was taken. Reading the same
    content costs the same, so a read that would cost more, or meets something it cannot read,
    means the content changed."""
    reader = _Reader(earlier.cost)
    try:
        reader.read(value)
    except Exception:  # _TooLarge, _CannotTell, RecursionError, changed while read
        return False
    return reader.cost == earlier.cost and reader.digest() == earlier.digest


class _Reader:
    """One walk over an object graph, feeding a digest; shared objects are read once."""

    def __init__(self, limit: int, parent: _Reader | None = None) -> None:
        self.hash = hashlib.sha1(usedforsecurity=False)
        self.limit = limit
        self.cost = 0
        # id -> (order seen, the object: kept so that a temporary's id is not reused meanwhile)
        self.memo: dict[int, tuple[int, Any]] = {}
        # shared with child readers (one per element of a set)
        self.held: list[Any] = parent.held if parent is not None else []
        self.active: set[int] = parent.active if parent is not None else set()
        self.parent = parent

    def digest(self) -> bytes:
        return self.hash.digest()

    def spend(self, amount: int) -> None:
        self.cost += amount
        total = self.cost
        reader = self.parent
        while reader is not None:  # a child's cost counts for every reader above it
            total += reader.cost
            reader = reader.parent
        if total > self.limit:
            raise _TooLarge

    def put(self, tag: bytes, data: bytes = b"") -> None:
        self.hash.update(tag + struct.pack("<q", len(data)))
        self.hash.update(data)

    def atom(self, value: Any) -> None:
        self.spend(64)  # it is held with the fingerprint: the budget bounds those references
        self.held.append(value)
        self.put(b"A", struct.pack("<q", id(value)))

    def read(self, value: Any) -> None:
        kind = type(value)
        meta = type(kind)
        if meta is not type and not _plain_metaclass(meta):
            # looking a class up in a set or dict would call its metaclass's __hash__, __eq__
            raise _CannotTell(f"an object of type {_describe(kind)}")
        if kind in _FLAT:
            tag, data = _scalar(value)
            self.spend(16 + len(data))
            self.put(tag, data)
            return
        if kind in _ATOMS:
            self.atom(value)
            return
        if _T_FLAGS.__get__(kind) & (1 << 31):  # a class (its metaclass is a type subclass)
            self.atom(value)
            return
        key = id(value)
        seen = self.memo.get(key)
        if seen is not None:  # shared, or a cycle: the same structure reads the same
            self.spend(16)
            self.put(b"@", struct.pack("<q", seen[0]))
            return
        self.memo[key] = (len(self.memo), value)
        self.spend(NODE)
        reader = _READERS.get(kind)
        if reader is not None:
            reader(self, value)
            return
        module = _T_MODULE.__get__(kind)
        module = module if type(module) is str else ""
        if module == "numpy" or module.startswith("numpy."):
            read_numpy(self, value, kind)
        elif module.startswith("pandas"):
            if _T_NAME.__get__(kind) in _PANDAS_ATOMS:
                self.atom(value)
            else:
                read_pandas(self, value, kind)
        else:
            self.instance(value, kind)

    # --- containers ---------------------------------------------------------------------------

    def items(self, tag: bytes, values: Iterable[Any], count: int) -> None:
        self.put(tag, struct.pack("<q", count))
        for item in values:
            self.read(item)

    def sequence(self, tag: bytes, value: Any, count: int) -> None:
        """A list or tuple: in one piece when it holds only numbers and strings."""
        if count >= 8 and set(map(type, value)) <= _FLAT:
            data = _flat_bytes(value)
            self.spend(len(data))
            self.put(tag + b"F", data)
        else:
            self.items(tag, value, count)

    def mapping(self, tag: bytes, pairs: Any, count: int) -> None:
        self.put(tag, struct.pack("<q", count))
        for key, item in pairs:
            self.read(key)
            self.read(item)

    def unordered(self, tag: bytes, whole: Any, value: Iterable[Any], count: int) -> None:
        """A set (``whole``; ``value``, its elements): each element read on its own, the
        digests sorted (two equal sets iterate in different orders)."""
        key = id(whole)
        if key in self.active:  # a cycle back to an enclosing set
            self.put(b"^")
            return
        self.active.add(key)
        try:
            digests = []
            for item in value:
                child = _Reader(self.limit, self)
                child.read(item)
                self.cost += child.cost
                digests.append(child.digest())
            digests.sort()
            self.put(tag, struct.pack("<q", count) + b"".join(digests))
        finally:
            self.active.discard(key)

    # --- objects of classes defined in Python ------------------------------------------------

    def instance(self, value: Any, kind: type) -> None:
        layout = _layout(kind)
        if isinstance(layout, str):
            raise _CannotTell(layout)
        base, has_dict, slots = layout
        self.atom(kind)
        if base is not object:
            self.put(b"B")
            _BASE_READERS[base](self, value)
        if has_dict is not None:
            attributes = has_dict.__get__(value, kind)
            if type(attributes) is not dict:
                raise _CannotTell(f"an object of type {_describe(kind)} with odd attributes")
            self.put(b"D")
            self.read(attributes)
        for slot in slots:
            try:
                self.read(slot.__get__(value, kind))
            except AttributeError:  # a slot not set
                self.put(b"-")


def _scalar(value: Any) -> tuple[bytes, bytes]:
    kind = type(value)
    if kind is str:
        return b"s", value.encode("utf-8", "surrogatepass")
    if kind is bytes:
        return b"b", value
    if kind is bool or value is None:
        return b"o", repr(value).encode()
    if kind is int:
        return b"i", value.to_bytes((value.bit_length() + 8) // 8 or 1, "little", signed=True)
    if kind is float:
        return b"f", struct.pack("<d", value)
    return b"c", struct.pack("<dd", value.real, value.imag)


def _flat_bytes(value: Any) -> bytes:
    """A list, tuple or dict of exact numbers and strings in one piece: the C pickler reads
    these types itself (no method of an object runs), without its memo (an equal string that
    is another object reads the same)."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=4)
    pickler.fast = True
    pickler.dump(value)
    return buffer.getvalue()


def _read_list(reader: _Reader, value: Any) -> None:
    reader.sequence(b"L", value, len(value))


def _read_tuple(reader: _Reader, value: Any) -> None:
    reader.sequence(b"T", value, len(value))


def _read_dict(reader: _Reader, value: Any, tag: bytes = b"M") -> None:
    if (
        len(value) >= 8
        and set(map(type, value)) <= _FLAT
        and set(map(type, value.values())) <= _FLAT
    ):
        data = _flat_bytes(value)
        reader.spend(len(data))
        reader.put(tag + b"F", data)
    else:
        reader.mapping(tag, list(value.items()), len(value))


def _read_ordered(reader: _Reader, value: Any) -> None:
    pairs = list(collections.OrderedDict.items(value))  # its own order, not dict's
    reader.mapping(b"O", pairs, len(pairs))


def _read_defaultdict(reader: _Reader, value: Any) -> None:
    reader.read(_DEFAULT_FACTORY.__get__(value))
    pairs = list(dict.items(value))
    reader.mapping(b"d", pairs, len(pairs))


def _read_set(reader: _Reader, value: Any) -> None:
    reader.unordered(b"S", value, list(set.__iter__(value)), set.__len__(value))


def _read_frozenset(reader: _Reader, value: Any) -> None:
    reader.unordered(b"Z", value, list(frozenset.__iter__(value)), frozenset.__len__(value))


def _read_deque(reader: _Reader, value: Any) -> None:
    reader.read(_DEQUE_MAXLEN.__get__(value))
    items = list(collections.deque.__iter__(value))
    reader.sequence(b"Q", items, len(items))


def _read_bytearray(reader: _Reader, value: Any) -> None:
    data = bytearray.__getitem__(value, slice(None))
    reader.spend(len(data))
    reader.put(b"y", bytes(data))


_READERS: dict[type, Any] = {
    list: _read_list,
    tuple: _read_tuple,
    dict: _read_dict,
    collections.OrderedDict: _read_ordered,
    collections.defaultdict: _read_defaultdict,
    collections.Counter: lambda reader, value: _read_dict(reader, dict(dict.items(value)), b"C"),
    set: _read_set,
    frozenset: _read_frozenset,
    collections.deque: _read_deque,
    bytearray: _read_bytearray,
    types.MethodType: lambda reader, value: (
        reader.read(_METHOD_FUNC.__get__(value)),
        reader.read(_METHOD_SELF.__get__(value)),
    ),
}

#: The builtin part of an object of a Python subclass, read with the builtin type's own code.
_BASE_READERS: dict[type, Any] = {
    list: lambda r, v: r.sequence(b"L", list(list.__iter__(v)), list.__len__(v)),
    tuple: lambda r, v: r.sequence(b"T", list(tuple.__iter__(v)), tuple.__len__(v)),
    dict: lambda r, v: r.mapping(b"M", list(dict.items(v)), dict.__len__(v)),
    collections.OrderedDict: _read_ordered,
    collections.defaultdict: _read_defaultdict,
    set: _read_set,
    frozenset: _read_frozenset,
    collections.deque: _read_deque,
    int: lambda r, v: r.put(b"i", int.__repr__(v).encode()),
    float: lambda r, v: r.put(b"f", float.__repr__(v).encode()),
    str: lambda r, v: (
        r.spend(str.__len__(v)),
        r.put(b"s", str.__str__(v).encode("utf-8", "surrogatepass")),
    ),
    bytes: lambda r, v: (r.spend(bytes.__len__(v)), r.put(b"b", bytes.__getitem__(v, slice(None)))),
    bytearray: _read_bytearray,
    weakref.ref: lambda r, v: r.atom(v),  # its referent and callback never change
}

#: Layouts found, by type id: (the type, weakly; the layout, or why it cannot be read).
_LAYOUTS: dict[int, tuple[weakref.ref[type], Any]] = {}


def _layout(kind: type) -> tuple[type, Any, tuple[Any, ...]] | str:
    """How to read an object of a Python class: its builtin base, its ``__dict__`` descriptor
    (None: no ``__dict__``) and its slot descriptors; or why it cannot be read (the class, or
    a class it derives from, keeps state in C that only its own code can read)."""
    known = _LAYOUTS.get(id(kind))
    if known is not None and known[0]() is kind:
        return known[1]  # type: ignore[no-any-return]
    found = _find_layout(kind)
    if len(_LAYOUTS) > 10_000:
        _LAYOUTS.clear()
    try:
        _LAYOUTS[id(kind)] = (weakref.ref(kind), found)
    except TypeError:
        pass
    return found


def _find_layout(kind: type) -> tuple[type, Any, tuple[Any, ...]] | str:
    name = _describe(kind)
    mro = _T_MRO.__get__(kind)
    # by identity: comparing classes could call a metaclass's __eq__
    at = next((i for i, k in enumerate(mro) if any(k is b for b in _BASES)), len(mro) - 1)
    base, between = mro[at], mro[:at]
    if any(not _T_FLAGS.__get__(k) & _HEAPTYPE for k in between):
        return f"an object of type {name}"  # derives from a type written in C
    slots: list[Any] = []
    dict_descriptor = None
    for index, klass in enumerate(mro):
        attributes = _T_DICT.__get__(klass)
        if index < at:
            slots.extend(
                v
                for v in attributes.values()
                if type(v) is types.MemberDescriptorType and v.__objclass__ is klass
            )
        if dict_descriptor is None and "__dict__" in attributes:
            dict_descriptor = attributes["__dict__"]
    has_dict = _T_DICTOFFSET.__get__(kind) != 0
    if has_dict and type(dict_descriptor) is not types.GetSetDescriptorType:
        return f"an object of type {name}"
    if not _plain_layout(kind, base, len(slots), has_dict):
        return f"an object of type {name}"
    return base, dict_descriptor if has_dict else None, tuple(slots)


def _plain_layout(kind: type, base: type, slots: int, has_dict: bool) -> bool:
    """Whether ``kind``'s instances are laid out as a class statement over ``base`` with
    ``slots`` slots would lay them out: no state added in C that nbagent could not see."""
    has_weak = _T_WEAKOFFSET.__get__(kind) != 0
    want = (
        _T_BASICSIZE.__get__(kind),
        _T_ITEMSIZE.__get__(kind),
        has_dict,
        has_weak,
    )
    names = tuple(f"s{i}" for i in range(slots))
    extra_dict = ("__dict__",) if has_dict and not _T_DICTOFFSET.__get__(base) else ()
    extra_weak = ("__weakref__",) if has_weak and not _T_WEAKOFFSET.__get__(base) else ()
    candidates: list[dict[str, Any]] = [{"__slots__": names + extra_dict + extra_weak}]
    if not slots:
        candidates.append({})
    for namespace in candidates:
        try:
            probe = type("probe", (base,), namespace)
        except TypeError:
            continue
        got = (
            _T_BASICSIZE.__get__(probe),
            _T_ITEMSIZE.__get__(probe),
            _T_DICTOFFSET.__get__(probe) != 0,
            _T_WEAKOFFSET.__get__(probe) != 0,
        )
        if got == want:
            return True
    return False


#: Metaclasses seen, by id: (the metaclass, weakly; whether it leaves hashing and equality
#: to type's own code).
_METAS: dict[int, tuple[weakref.ref[type], bool]] = {}


def _plain_metaclass(meta: type) -> bool:
    """Whether classes of ``meta`` hash and compare as type does (EnumType, ABCMeta: yes)."""
    known = _METAS.get(id(meta))
    if known is not None and known[0]() is meta:
        return known[1]
    plain = False
    mro = _T_MRO.__get__(meta)
    for klass in mro:
        if klass is type:
            plain = True
            break
        attributes = _T_DICT.__get__(klass)
        if "__hash__" in attributes or "__eq__" in attributes or "__ne__" in attributes:
            break
    if len(_METAS) > 1_000:
        _METAS.clear()
    _METAS[id(meta)] = (weakref.ref(meta), plain)
    return plain
