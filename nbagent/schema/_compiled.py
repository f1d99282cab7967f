"""A schema compiled once and validating every call: :func:`normalize_schema`,
:func:`compile_schema` (cached by the schema's canonical JSON) and :class:`CompiledSchema`,
whose violations are reported sorted, each with its JSON pointer (see :mod:`nbagent.schema`)."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NoReturn

from nbagent.errors import ArgumentsError, SchemaError
from nbagent.schema._policy import Path, checked, json_pointer, shorten
from nbagent.schema._schema_validator import _load_jsonschema, _new_registry, _validator_class

__all__ = ["CompiledSchema", "compile_schema", "compile_uncached", "normalize_schema"]


def normalize_schema(schema: Mapping[str, Any] | bool | None) -> dict[str, Any]:
    """Return a deep, JSON-only copy of ``schema`` with an explicit object type.

    ``None``, ``{}`` and ``True`` become ``{"type": "object", "properties": {}}``; a schema with
    ``properties`` but no ``type`` gets ``"type": "object"``; everything else is kept. Tuples become
    lists. The input is never mutated. ``False`` (accepts nothing) and non-JSON values raise
    :class:`SchemaError`, since no tool input could satisfy or describe them.
    """
    if schema is None or schema is True:
        return {"type": "object", "properties": {}}
    if schema is False:
        raise SchemaError(
            "the schema `false` accepts no input at all; a tool needs an object schema"
        )
    if not isinstance(schema, Mapping):
        raise SchemaError(f"a schema must be a JSON object, not {type(schema).__name__}")
    copied = _json_copy(schema, ())
    assert isinstance(copied, dict)
    if not copied:
        return {"type": "object", "properties": {}}
    if "properties" in copied and "type" not in copied:
        return {"type": "object", **copied}
    return copied


class CompiledSchema:
    """A schema that passed the strict policy, with its validator built once for reuse.

    ``schema`` is the normalized dict: treat it as read-only (the validator shares it).
    """

    __slots__ = ("_is_valid", "_iter_errors", "schema")

    schema: dict[str, Any]
    _is_valid: Callable[[object], bool]
    _iter_errors: Callable[[object], Iterable[Any]]

    def __init__(self, schema: dict[str, Any], validator: Any) -> None:
        object.__setattr__(self, "schema", schema)
        object.__setattr__(self, "_is_valid", validator.is_valid)
        object.__setattr__(self, "_iter_errors", validator.iter_errors)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"CompiledSchema is read-only (cannot set {name!r})")

    def __repr__(self) -> str:
        text = repr(self.schema)
        return f"CompiledSchema({text if len(text) <= 80 else text[:77] + '...'})"

    def is_valid(self, instance: object) -> bool:
        """Whether ``instance`` satisfies the schema (fast path: stops at the first violation)."""
        try:
            return self._is_valid(instance)
        except RecursionError:
            return False

    def validate(self, instance: object) -> None:
        """Raise :class:`ArgumentsError` listing every violation (JSON pointer, message), sorted."""
        try:
            errors = list(self._iter_errors(instance))
        except RecursionError:
            raise ArgumentsError(
                "the arguments nest too deeply to validate",
                [("", "nesting exceeds the validator's recursion limit")],
            ) from None
        if not errors:
            return
        violations = sorted({_violation(error) for error in errors}, key=_violation_key)
        count = len(violations)
        noun = "violation" if count == 1 else "violations"
        raise ArgumentsError(
            f"arguments do not match the input schema ({count} {noun})", violations
        )


#: Compiled schemas by canonical JSON: re-registering a tool (a notebook cell run again) or
#: building another Agent with the same tools costs a dict lookup, not a compile (~5 ms).
_CACHE: OrderedDict[tuple[str, bool], CompiledSchema] = OrderedDict()
_CACHE_SIZE = 512


def compile_schema(
    schema: Mapping[str, Any] | bool | None, *, require_object: bool = True
) -> CompiledSchema:
    """Check ``schema`` against the strict policy and build its reusable validator.

    Results are cached by the schema's canonical JSON (a CompiledSchema is read-only).
    """
    try:
        key = (json.dumps(schema, sort_keys=True, separators=(",", ":")), require_object)
    except (TypeError, ValueError, RecursionError):
        return compile_uncached(schema, require_object)  # not JSON: this says where, precisely
    cached = _CACHE.get(key)
    if cached is not None:
        _CACHE.move_to_end(key)
        return cached
    compiled = compile_uncached(schema, require_object)
    _CACHE[key] = compiled
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return compiled


def compile_uncached(
    schema: Mapping[str, Any] | bool | None, require_object: bool
) -> CompiledSchema:
    """Compile without the cache; see :func:`compile_schema`.

    With ``require_object`` (the default, for tool inputs) the schema is normalized
    (:func:`normalize_schema`) and must have ``"type": "object"``. With ``require_object=False``
    any Draft 2020-12 schema is compiled exactly as written (boolean schemas as their object
    equivalents ``{}`` and ``{"not": {}}``; ``None`` as ``{}``); the policy is the same.
    Raises :class:`SchemaError` naming the JSON pointer of the first problem.
    """
    if require_object:
        normalized = normalize_schema(schema)
        if normalized.get("type") != "object":
            raise SchemaError(
                'a tool input schema must have "type": "object" '
                "(tool arguments are always a JSON object)",
                "/type" if "type" in normalized else "",
            )
    elif schema is None or schema is True:
        normalized = {}
    elif schema is False:
        normalized = {"not": {}}
    elif isinstance(schema, Mapping):
        copied = _json_copy(schema, ())
        assert isinstance(copied, dict)
        normalized = copied
    else:
        raise SchemaError(f"a schema must be a JSON object or boolean, not {type(schema).__name__}")

    _load_jsonschema()
    working = checked(normalized)
    validator = _validator_class()(working, registry=_new_registry())
    return CompiledSchema(normalized, validator)


# --- copying and reporting ----------------------------------------------------------------------


def _json_copy(value: object, path: Path) -> object:
    """Deep-copy ``value`` as plain JSON data (dict/list/str/int/float/bool/None)."""
    if value is None or isinstance(value, (str, int, float)):
        return value
    if isinstance(value, Mapping):
        copied: dict[str, object] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise SchemaError(
                    f"schema object keys must be strings, not {key!r}", json_pointer(path)
                )
            copied[key] = _json_copy(item, (*path, key))
        return copied
    if isinstance(value, (list, tuple)):
        return [_json_copy(item, (*path, index)) for index, item in enumerate(value)]
    raise SchemaError(
        f"a schema may hold only JSON values, not {type(value).__name__}", json_pointer(path)
    )


def _violation(error: Any) -> tuple[str, str]:
    """(JSON pointer of the instance location, readable message) for one validation error."""
    from jsonschema.exceptions import best_match

    message = shorten(error.message)
    if error.context:
        closest = best_match(error.context)
        where = json_pointer(closest.absolute_path) or "(root)"
        message = f"{message}; closest: {shorten(closest.message)} at {where}"
    return json_pointer(error.absolute_path), message


def _violation_key(violation: tuple[str, str]) -> tuple[list[tuple[int, int, str]], str]:
    """Sort by pointer (array indexes numerically), then message."""
    pointer, message = violation
    parts = [
        (0, int(part), "") if part.isascii() and part.isdigit() else (1, 0, part)
        for part in pointer.split("/")[1:]
    ]
    return parts, message
