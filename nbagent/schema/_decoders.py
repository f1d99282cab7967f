"""Decoders: functions that turn a validated JSON value into a Python value, or say where not.

Built once per type by :mod:`nbagent.schema._hints`; a decoder raises :class:`_Mismatch`, whose path
is assembled innermost-first only on failure, so decoding a value that fits costs no string work.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

_Decoder = Callable[[Any], Any]


# --------------------------------------------------------------------------- mismatches


class _Mismatch(Exception):
    """A JSON value does not fit the target type; parents add their key to ``path`` on the way up.

    Paths are built only on failure, so decoding a value that fits costs no string work.
    """

    def __init__(self, message: str, expected: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.expected = expected  # set when the failure is "wrong kind of value" at this level
        self.path: list[str] = []  # innermost key first


def _expect(expected: str, value: Any) -> _Mismatch:
    return _Mismatch(f"expected {expected}, got {_describe(value)}", expected)


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return f"number {value!r}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"string {json.dumps(shown)}"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "an array"
    return type(value).__name__


def _pointer(path: Sequence[str]) -> str:
    """JSON pointer (RFC 6901) for a path given innermost key first."""
    return "".join("/" + key.replace("~", "~0").replace("/", "~1") for key in reversed(path))


# --------------------------------------------------------------------------- leaf decoders


def _decode_str(value: Any) -> Any:
    if isinstance(value, str):
        return value
    raise _expect("a string", value)


def _decode_int(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    # JSON Schema counts 3.0 as an integer, so a validated argument may arrive as a float.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise _expect("an integer", value)


def _decode_float(value: Any) -> Any:
    if isinstance(value, float):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            raise _expect("a number that fits a float", value) from None
    raise _expect("a number", value)


def _decode_bool(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    raise _expect("a boolean", value)


def _decode_none(value: Any) -> Any:
    if value is None:
        return None
    raise _expect("null", value)


def _copy_json(value: Any) -> Any:
    """Copy the containers of a JSON value, so a tool that mutates its argument cannot alter
    the conversation history the value came from."""
    if isinstance(value, dict):
        return {key: _copy_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy_json(item) for item in value]
    return value


def _string_decoder(label: str, parse: Callable[[str], Any]) -> _Decoder:
    def decode(value: Any) -> Any:
        if isinstance(value, str):
            try:
                return parse(value)
            except ValueError:
                pass
        raise _expect(label, value)

    return decode


# --------------------------------------------------------------------------- composite decoders


def _lookup_key(value: Any) -> tuple[bool, Any]:
    # True == 1 in Python but not in JSON: keep booleans apart from numbers.
    return (isinstance(value, bool), value)


def _lookup_decoder(json_values: list[Any], results: Sequence[Any]) -> _Decoder:
    table = {_lookup_key(v): r for v, r in zip(json_values, results, strict=True)}
    label = "one of " + ", ".join(json.dumps(v) for v in json_values)

    def decode(value: Any) -> Any:
        try:
            return table[_lookup_key(value)]
        except (KeyError, TypeError):
            raise _expect(label, value) from None

    return decode


def _optional_decoder(inner: _Decoder) -> _Decoder:
    def decode(value: Any) -> Any:
        if value is None:
            return None
        try:
            return inner(value)
        except _Mismatch as mismatch:
            if mismatch.path or mismatch.expected is None:
                raise
            raise _expect(f"{mismatch.expected} or null", value) from None

    return decode


def _union_decoder(arms: list[_Decoder]) -> _Decoder:
    def decode(value: Any) -> Any:
        failures: list[_Mismatch] = []
        for arm in arms:
            try:
                return arm(value)
            except _Mismatch as mismatch:
                failures.append(mismatch)
        # The arm that got furthest into the value explains the problem best.
        deepest = max(failures, key=lambda m: len(m.path))
        if deepest.path or any(m.expected is None for m in failures):
            raise deepest
        raise _expect(" or ".join(str(m.expected) for m in failures), value)

    return decode


def _array_decoder(item: _Decoder, build: Callable[[list[Any]], Any] | None) -> _Decoder:
    def decode(value: Any) -> Any:
        if not isinstance(value, (list, tuple)):
            raise _expect("an array", value)
        out = []
        for index, element in enumerate(value):
            try:
                out.append(item(element))
            except _Mismatch as mismatch:
                mismatch.path.append(str(index))
                raise
        if build is None:
            return out
        try:
            return build(out)
        except TypeError:
            raise _expect("an array of hashable items", value) from None

    return decode


def _fixed_tuple_decoder(items: tuple[_Decoder, ...]) -> _Decoder:
    size = len(items)

    def decode(value: Any) -> Any:
        if not isinstance(value, (list, tuple)) or len(value) != size:
            raise _expect(f"an array of {size} items", value)
        out = []
        for index, (item, element) in enumerate(zip(items, value, strict=True)):
            try:
                out.append(item(element))
            except _Mismatch as mismatch:
                mismatch.path.append(str(index))
                raise
        return tuple(out)

    return decode


def _mapping_decoder(item: _Decoder) -> _Decoder:
    def decode(value: Any) -> Any:
        if not isinstance(value, Mapping):
            raise _expect("an object", value)
        out = {}
        for key, element in value.items():
            if not isinstance(key, str):
                raise _Mismatch(f"object keys must be strings, got {key!r}")
            try:
                out[key] = item(element)
            except _Mismatch as mismatch:
                mismatch.path.append(key)
                raise
        return out

    return decode


def _object_decoder(
    label: str,
    fields: dict[str, _Decoder],
    required: frozenset[str],
    build: Callable[..., Any] | None,
) -> _Decoder:
    def decode(value: Any) -> Any:
        if not isinstance(value, Mapping):
            raise _expect(f"an object ({label})", value)
        out: dict[str, Any] = {}
        for key, element in value.items():
            item = fields.get(key)
            if item is None:
                raise _Mismatch(f"unexpected property {key!r}: {label} has no such field")
            try:
                out[key] = item(element)
            except _Mismatch as mismatch:
                mismatch.path.append(key)
                raise
        if len(out) < len(required) or not required.issubset(out):
            missing = sorted(required.difference(out))
            raise _Mismatch(f"missing required property {missing[0]!r} of {label}")
        if build is None:
            return out
        try:
            return build(**out)
        except ValueError as exc:  # a __post_init__ that checks its values
            raise _Mismatch(f"{label} rejected the values: {exc}") from None

    return decode
