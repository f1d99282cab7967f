"""Compile Python types into strict JSON Schemas and decoders of JSON values back into them.

Each supported type (scalars, containers, unions, Literal, Enum, dataclasses, TypedDicts,
recursive types) becomes a schema node and a decoder; :mod:`nbagent.schema._signature` uses them for
a function's parameters. ``decode_arguments_as(value, T)`` decodes a JSON value into a
dataclass, TypedDict, Enum or plain type. Decoding never coerces (``"123"`` is not an
``int``); a mismatch is an :class:`~nbagent.errors.ArgumentsError` whose violations name the
JSON pointer.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import enum
import functools
import inspect
import math
import sys
import typing
import uuid
from collections.abc import (
    Callable,
    Mapping,
    MutableMapping,
    MutableSequence,
    MutableSet,
    Sequence,
)
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import PurePath
from types import NoneType, UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from ..errors import ArgumentsError, ToolDefinitionError
from ._decoders import (
    _array_decoder,
    _copy_json,
    _decode_bool,
    _decode_float,
    _decode_int,
    _decode_none,
    _decode_str,
    _Decoder,
    _fixed_tuple_decoder,
    _lookup_decoder,
    _mapping_decoder,
    _Mismatch,
    _object_decoder,
    _optional_decoder,
    _pointer,
    _string_decoder,
    _union_decoder,
)
from ._docstrings import _parse_docstring
from ._pydantic import is_pydantic_model, pydantic_schema

__all__ = ["decode_arguments_as"]

_MISSING: Any = object()


# --------------------------------------------------------------------------- compiling types


@dataclass
class _Node:
    """What one type compiles to: its schema, its decoder, and whether decoded values hash."""

    schema: dict[str, Any]
    decode: _Decoder
    hashable: bool = True


@dataclass
class _Named:
    """A dataclass, TypedDict or Enum: compiled once, referenced through ``$defs``."""

    name: str
    refs: list[dict[str, Any]] = field(default_factory=list)
    schema: dict[str, Any] = field(default_factory=dict)
    decode: _Decoder | None = None
    hashable: bool = True
    building: bool = True
    recursive: bool = False


_SCALARS: dict[Any, tuple[str, _Decoder]] = {
    str: ("string", _decode_str),
    int: ("integer", _decode_int),
    float: ("number", _decode_float),
    bool: ("boolean", _decode_bool),
}
_ARRAYS = (list, Sequence, MutableSequence)
_SETS = (set, frozenset, AbstractSet, MutableSet)
_MAPPINGS = (dict, Mapping, MutableMapping)
_STRINGS: tuple[tuple[type, str, str], ...] = (
    # datetime before date: it is a subclass.
    (datetime.datetime, "date-time", "a date-time string (ISO 8601)"),
    (datetime.date, "date", "a date string (YYYY-MM-DD)"),
    (datetime.time, "time", "a time string (HH:MM[:SS])"),
    (uuid.UUID, "uuid", "a UUID string"),
)
_SUPPORTED = (
    "str, int, float, bool, None, Any, Literal, Enum, list/Sequence, tuple, set, "
    "dict[str, T], Optional/Union, dataclass, TypedDict, pydantic model, date/datetime/time, "
    "UUID, Path"
)


def _type_name(tp: Any) -> str:
    if isinstance(tp, type) and not get_args(tp):
        if tp.__module__ == "builtins":
            return tp.__qualname__
        return f"{tp.__module__}.{tp.__qualname__}"
    return repr(tp).replace("typing.", "")


def _class_doc(cls: type) -> str:
    doc = cls.__dict__.get("__doc__")
    if not isinstance(doc, str):
        return ""
    if dataclasses.is_dataclass(cls) and doc.startswith(cls.__name__ + "("):
        return ""  # the signature dataclasses writes when a class has no docstring
    return doc


def _td_qualifiers() -> dict[Any, bool | None]:
    """TypedDict key qualifiers (from typing and typing_extensions if loaded): required or not."""
    meaning = {"Required": True, "NotRequired": False, "ReadOnly": None}
    modules = [typing, sys.modules.get("typing_extensions")]
    return {
        getattr(module, name): required
        for module in modules
        if module is not None
        for name, required in meaning.items()
        if hasattr(module, name)
    }


def _is_typeddict(tp: Any) -> bool:
    return (
        isinstance(tp, type)
        and issubclass(tp, dict)
        and hasattr(tp, "__required_keys__")
        and hasattr(tp, "__total__")
    )


class _Compiler:
    """Compiles type hints to schemas and decoders; collects named types for ``$defs``."""

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self._named: dict[Any, _Named] = {}
        self._names: set[str] = set()
        self._extra: dict[str, Any] = {}  # the $defs of pydantic models, renamed where taken

    # errors ---------------------------------------------------------------

    def fail(self, where: str, tp: Any, why: str = "") -> ToolDefinitionError:
        reason = f" ({why})" if why else ""
        return ToolDefinitionError(
            f"{self.owner}: {where} has type {_type_name(tp)}, which cannot be expressed as "
            f"JSON Schema{reason}. Use a supported type ({_SUPPORTED}) or pass schema= to @tool"
        )

    # dispatch -------------------------------------------------------------

    def compile(self, tp: Any, where: str) -> _Node:
        origin = get_origin(tp)
        if origin is Annotated:
            return self._annotated(tp, where)
        if tp is Any or tp is object:
            return _Node({}, _copy_json)
        if tp is None or tp is NoneType:
            return _Node({"type": "null"}, _decode_none)
        if isinstance(tp, typing.NewType):
            return self.compile(tp.__supertype__, where)
        if isinstance(tp, type) and tp in _SCALARS:
            json_type, decode = _SCALARS[tp]
            return _Node({"type": json_type}, decode)
        if origin is Literal:
            return self._literal(tp, where)
        if origin is Union or origin is UnionType:
            return self._union(tp, where)
        base = origin if origin is not None else tp
        if base is tuple:
            return self._tuple(tp, where)
        if base in _ARRAYS:
            return self._array(tp, where)
        if base in _SETS:
            return self._set(tp, where)
        if base in _MAPPINGS:
            return self._mapping(tp, where)
        if isinstance(tp, type):
            if issubclass(tp, enum.Enum):
                return self._named_node(tp, lambda: self._enum(tp, where))
            if dataclasses.is_dataclass(tp):
                return self._named_node(tp, lambda: self._dataclass(tp, where))
            if _is_typeddict(tp):
                return self._named_node(tp, lambda: self._typeddict(tp, where))
            if is_pydantic_model(tp):
                return self._named_node(tp, lambda: self._pydantic(tp, where))
            for cls, fmt, label in _STRINGS:
                if issubclass(tp, cls):
                    parse = getattr(tp, "fromisoformat", tp)
                    return _Node({"type": "string", "format": fmt}, _string_decoder(label, parse))
            if issubclass(tp, PurePath):
                return _Node({"type": "string"}, _string_decoder("a path string", tp))
            if issubclass(tp, (bytes, bytearray)):
                raise self.fail(where, tp, "JSON has no bytes; take a str such as base64")
        if origin is not None and dataclasses.is_dataclass(origin):
            raise self.fail(where, tp, "generic dataclasses are not supported")
        if isinstance(tp, typing.TypeVar):
            raise self.fail(where, tp, "a type variable has no schema")
        if origin is not None and origin is Callable:
            raise self.fail(where, tp, "a function cannot be passed as JSON")
        raise self.fail(where, tp)

    # wrappers and unions ----------------------------------------------------

    def _annotated(self, tp: Any, where: str) -> _Node:
        inner, *metadata = get_args(tp)
        node = self.compile(inner, where)
        for item in metadata:
            if isinstance(item, str):
                node.schema["description"] = item
            elif isinstance(item, Mapping):
                node.schema.update(copy.deepcopy(dict(item)))
            # Any other metadata belongs to some other library: leave it alone.
        return node

    def _literal(self, tp: Any, where: str) -> _Node:
        values = get_args(tp)
        json_values = [v.value if isinstance(v, enum.Enum) else v for v in values]
        if not all(_is_json_scalar(v) for v in json_values):
            raise self.fail(where, tp, "Literal values must be str, int, float, bool or None")
        return _Node(_enum_schema(json_values), _lookup_decoder(json_values, values))

    def _union(self, tp: Any, where: str) -> _Node:
        arms = get_args(tp)
        nodes = [self.compile(arm, where) for arm in arms]
        schemas = [node.schema for node in nodes]
        if all(len(s) == 1 and isinstance(s.get("type"), str) for s in schemas):
            types = list(dict.fromkeys(s["type"] for s in schemas))
            schema: dict[str, Any] = {"type": types}
        else:
            schema = {"anyOf": schemas}
        hashable = all(node.hashable for node in nodes)
        others = [node.decode for arm, node in zip(arms, nodes, strict=True) if arm is not NoneType]
        if len(arms) == 2 and len(others) == 1:
            return _Node(schema, _optional_decoder(others[0]), hashable)
        return _Node(schema, _union_decoder([node.decode for node in nodes]), hashable)

    # containers -------------------------------------------------------------

    def _item(self, args: tuple[Any, ...], index: int, where: str) -> _Node:
        if len(args) <= index:
            return _Node({}, _copy_json)
        return self.compile(args[index], f"{where} (item)")

    def _array(self, tp: Any, where: str) -> _Node:
        item = self._item(get_args(tp), 0, where)
        schema: dict[str, Any] = {"type": "array"}
        if item.schema:
            schema["items"] = item.schema
        return _Node(schema, _array_decoder(item.decode, None), hashable=False)

    def _tuple(self, tp: Any, where: str) -> _Node:
        args = get_args(tp)
        if tp is tuple or tp is typing.Tuple or (len(args) == 2 and args[1] is Ellipsis):  # noqa: UP006
            item = self._item(args, 0, where)
            schema: dict[str, Any] = {"type": "array"}
            if item.schema:
                schema["items"] = item.schema
            return _Node(schema, _array_decoder(item.decode, tuple), item.hashable)
        nodes = [self.compile(arg, f"{where} (item {i})") for i, arg in enumerate(args)]
        schema = {"type": "array", "prefixItems": [n.schema for n in nodes], "items": False}
        schema["minItems"] = schema["maxItems"] = len(nodes)
        if not nodes:
            del schema["prefixItems"]
        decoders = tuple(n.decode for n in nodes)
        return _Node(schema, _fixed_tuple_decoder(decoders), all(n.hashable for n in nodes))

    def _set(self, tp: Any, where: str) -> _Node:
        item = self._item(get_args(tp), 0, where)
        if not item.hashable:
            raise self.fail(where, tp, "set items must be hashable once decoded")
        schema: dict[str, Any] = {"type": "array", "uniqueItems": True}
        if item.schema:
            schema["items"] = item.schema
        frozen = (get_origin(tp) or tp) is frozenset
        build = frozenset if frozen else set
        return _Node(schema, _array_decoder(item.decode, build), hashable=frozen)

    def _mapping(self, tp: Any, where: str) -> _Node:
        args = get_args(tp)
        if args and args[0] is not str and args[0] is not Any:
            raise self.fail(where, tp, "JSON object keys are strings: use dict[str, ...]")
        value = self._item(args, 1, where)
        schema: dict[str, Any] = {"type": "object"}
        if value.schema:
            schema["additionalProperties"] = value.schema
        return _Node(schema, _mapping_decoder(value.decode), hashable=False)

    # named types ------------------------------------------------------------

    def _named_node(self, tp: type, build: Callable[[], _Node]) -> _Node:
        entry = self._named.get(tp)
        if entry is None:
            entry = self._named[tp] = _Named(self._free_name(tp.__name__))
            node = build()
            entry.schema, entry.decode, entry.hashable = node.schema, node.decode, node.hashable
            entry.building = False
        elif entry.building:
            entry.recursive = True
        ref = {"$ref": f"#/$defs/{entry.name}"}
        entry.refs.append(ref)
        return _Node(ref, entry.decode or _late_decoder(entry), entry.hashable)

    def _free_name(self, wanted: str) -> str:
        name, n = wanted, 1
        while name in self._names:
            n += 1
            name = f"{wanted}_{n}"
        self._names.add(name)
        return name

    def definitions(self) -> dict[str, Any]:
        """Inline named types used once and not recursive; return the rest as ``$defs``.

        Models read an inline schema more easily; ``$defs`` is kept for reuse and recursion.
        """
        defs: dict[str, Any] = dict(self._extra)
        for entry in self._named.values():
            if entry.recursive or len(entry.refs) != 1:
                defs[entry.name] = entry.schema
                continue
            ref = entry.refs[0]
            siblings = {k: v for k, v in ref.items() if k != "$ref"}
            ref.clear()
            ref.update(entry.schema)
            ref.update(siblings)  # an Annotated description at the use site wins
        return defs

    def _enum(self, tp: type[enum.Enum], where: str) -> _Node:
        members = list(tp)
        values = [m.value for m in members]
        if not members or not all(_is_json_scalar(v) for v in values):
            raise self.fail(where, tp, "Enum values must be str, int, float, bool or None")
        schema = _enum_schema(values)
        description = _class_doc(tp)
        if description:
            schema["description"] = inspect.cleandoc(description)
        return _Node(schema, _lookup_decoder(values, members))

    def _dataclass(self, tp: type, where: str) -> _Node:
        hints = self._class_hints(tp, where)
        description, field_docs = _parse_docstring(_class_doc(tp))
        properties: dict[str, Any] = {}
        required: list[str] = []
        decoders: dict[str, _Decoder] = {}
        for hint in hints.values():
            if isinstance(hint, dataclasses.InitVar):
                raise self.fail(where, tp, "InitVar fields are not supported")
        for item in dataclasses.fields(tp):
            if not item.init:
                continue
            node = self.compile(hints[item.name], f"{where}, field {tp.__name__}.{item.name}")
            _describe_property(node.schema, field_docs.get(item.name))
            if item.default is not dataclasses.MISSING:
                _add_default(node.schema, item.default)
            elif item.default_factory is dataclasses.MISSING:
                required.append(item.name)
            properties[item.name] = node.schema
            decoders[item.name] = node.decode
        schema = _object_schema(properties, required, description)
        decode = _object_decoder(tp.__name__, decoders, frozenset(required), tp)
        return _Node(schema, decode, hashable=tp.__hash__ is not None)

    def _typeddict(self, tp: type, where: str) -> _Node:
        hints = self._class_hints(tp, where)
        description, field_docs = _parse_docstring(_class_doc(tp))
        required_keys: set[str] = set(getattr(tp, "__required_keys__", ()))
        qualifiers = _td_qualifiers()
        properties: dict[str, Any] = {}
        decoders: dict[str, _Decoder] = {}
        for key, hint in hints.items():
            hint, is_required = _strip_qualifiers(hint, qualifiers)
            if is_required is True:
                required_keys.add(key)
            elif is_required is False:
                required_keys.discard(key)
            node = self.compile(hint, f"{where}, key {tp.__name__}[{key!r}]")
            _describe_property(node.schema, field_docs.get(key))
            properties[key] = node.schema
            decoders[key] = node.decode
        required = [key for key in properties if key in required_keys]
        schema = _object_schema(properties, required, description)
        decode = _object_decoder(tp.__name__, decoders, frozenset(required), None)
        return _Node(schema, decode, hashable=False)

    def _pydantic(self, tp: type, where: str) -> _Node:
        try:
            schema, defs, decode = pydantic_schema(tp, self._free_name)
        except ValueError as exc:
            raise self.fail(where, tp, str(exc)) from None
        self._extra.update(defs)
        return _Node(schema, decode, hashable=tp.__hash__ is not None)

    def _class_hints(self, tp: type, where: str) -> dict[str, Any]:
        try:
            return typing.get_type_hints(tp, include_extras=True)
        except Exception as exc:
            raise ToolDefinitionError(
                f"{self.owner}: {where}: the type hints of {tp.__qualname__} could not be "
                f"resolved ({exc}); define the names they use at module level"
            ) from None


def _strip_qualifiers(hint: Any, qualifiers: dict[Any, bool | None]) -> tuple[Any, bool | None]:
    """Remove Required / NotRequired / ReadOnly (also under Annotated); say which was seen."""
    origin = get_origin(hint)
    if origin is Annotated:
        inner, *metadata = get_args(hint)
        inner, required = _strip_qualifiers(inner, qualifiers)
        rebuilt = (inner, *metadata)
        return Annotated[rebuilt], required
    if origin in qualifiers:
        stripped, required = _strip_qualifiers(get_args(hint)[0], qualifiers)
        return stripped, qualifiers[origin] if required is None else required
    return hint, None


def _is_json_scalar(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or isinstance(value, (str, int, bool))


_JSON_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"))


def _json_type_of(value: Any) -> str:
    if value is None:
        return "null"
    return next(name for cls, name in _JSON_TYPES if isinstance(value, cls))


def _enum_schema(values: list[Any]) -> dict[str, Any]:
    types = list(dict.fromkeys(_json_type_of(v) for v in values))
    schema: dict[str, Any] = {"type": types[0] if len(types) == 1 else types}
    schema["enum"] = list(values)
    return schema


def _object_schema(
    properties: dict[str, Any], required: list[str], description: str
) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object"}
    if description:
        schema["description"] = description
    schema["properties"] = properties
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def _describe_property(schema: dict[str, Any], text: str | None) -> None:
    if text and "description" not in schema:
        schema["description"] = text


def _add_default(schema: dict[str, Any], default: Any) -> None:
    value = _json_value(default)
    if value is not _MISSING:
        schema["default"] = value


def _json_value(value: Any) -> Any:
    """``value`` as JSON for a ``default`` annotation, or ``_MISSING`` if it has no JSON form."""
    if isinstance(value, enum.Enum):
        value = value.value
    if _is_json_scalar(value):
        return value
    if isinstance(value, (list, tuple)):
        items = [_json_value(item) for item in value]
        return _MISSING if any(item is _MISSING for item in items) else items
    if isinstance(value, Mapping):
        if not all(isinstance(key, str) for key in value):
            return _MISSING
        entries = {key: _json_value(item) for key, item in value.items()}
        return _MISSING if any(item is _MISSING for item in entries.values()) else entries
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (PurePath, uuid.UUID)):
        return str(value)
    return _MISSING


def _late_decoder(entry: _Named) -> _Decoder:
    """Decoder of a recursive type, looked up when called because it is still being built."""

    def decode(value: Any) -> Any:
        assert entry.decode is not None
        return entry.decode(value)

    return decode


# --------------------------------------------------------------------------- decode_arguments_as


@functools.lru_cache(maxsize=256)
def _cached_decoder(target: Any, spelling: str) -> _Decoder:
    # ``spelling`` is part of the key because typing finds Union[int, float] equal to
    # Union[float, int], while the first arm that decodes depends on the order.
    return _compile_decoder(target)


def _compile_decoder(target: Any) -> _Decoder:
    return (
        _Compiler(f"decode_arguments_as({_type_name(target)})").compile(target, "the target").decode
    )


def decode_arguments_as(arguments: Any, target: Any) -> Any:
    """Decode a validated JSON value into ``target`` without coercion; never mutates the input.

    ``target`` may be a dataclass (built recursively), a TypedDict (a new dict), an Enum (by
    value), ``str``/``int``/``float``/``bool``, ``list[T]``, ``tuple[...]``, ``set[T]``,
    ``dict[str, T]``, ``Optional``/``Union`` (first arm that decodes), ``Literal`` or ``Any``.
    Raises :class:`ArgumentsError` with the JSON pointer of the first mismatch, or
    :class:`ToolDefinitionError` if ``target`` is not a supported type.
    """
    try:
        decode = _cached_decoder(target, repr(target))
    except TypeError:  # an unhashable target, e.g. Annotated[..., {"minimum": 0}]
        decode = _compile_decoder(target)
    try:
        return decode(arguments)
    except _Mismatch as mismatch:
        raise ArgumentsError(
            f"arguments do not fit {_type_name(target)}",
            [(_pointer(mismatch.path), mismatch.message)],
        ) from None
