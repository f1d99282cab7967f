"""Strict JSON Schema for tool inputs: normalize, compile once, validate every call.

This package is the schema room, and this module its face: compiling and validating schemas
(here, with the validator in ``_schema_validator``), strict JSON (``_strict_json``), Python types
as schemas and decoders (``_hints``, ``_decoders``), functions as tools' schemas
(``_signature``, ``_docstrings``) and the schemas no value satisfies (``_satisfiable``). It may
import the ground only (:mod:`nbagent.errors`); everything that knows tools imports it.

A tool's input schema is compiled once (at ``Agent(...)`` construction or tool registration) and the
compiled form validates each call's arguments before the tool runs (DESIGN.md, "Contract from the
seeds", rules 2 and 3).

Policy applied by :func:`compile_schema`:

* JSON Schema **Draft 2020-12 only**. ``$schema`` may appear only at the root and must name 2020-12
  (``SCHEMA_DIALECT``, with or without a trailing ``#``). Without ``$id`` there are no embedded
  resources, and the specification forbids ``$schema`` in any other subschema.
* Rejected, with a :class:`~nbagent.errors.SchemaError` naming the JSON pointer: ``$id``,
  ``$recursiveRef``, ``$recursiveAnchor``, and every ``$ref``/``$dynamicRef`` that is not
  same-document (it must start with ``#``). Only schema positions are inspected: a *property named*
  ``$id`` or an ``$id`` inside ``enum``/``const``/``default``/``examples`` is data, not a keyword.
  Locations that a ``$ref`` points at count as schema positions too.
* References must resolve, point at a schema, and not form a ``$ref`` cycle that never consumes
  input (such a schema would recurse forever on every call).
* The schema must pass the Draft 2020-12 metaschema.
* **Nothing is ever fetched**: the validator's ``referencing.Registry`` has a ``retrieve`` that
  raises, so even a bug in the checks above cannot reach the network.

Validation is structural only: ``format`` and ``contentEncoding``/``contentMediaType``/
``contentSchema`` are annotations that never fail; no defaults are applied; nothing is coerced
(``"123"`` is not an integer, ``True`` is not an integer, ``1.0`` is); the instance is never
mutated.

Regex dialect: ``pattern`` and ``patternProperties`` (and the pattern matching that
``additionalProperties``/``unevaluatedProperties`` depend on) use **ECMA-262**, as JSON Schema
specifies, through the ``regress`` package, not Python's :mod:`re`. So ``^[a-z]+$`` does not match
``"abc\\n"``, ``\\d`` is ASCII only and ``\\p{Letter}`` works. A pattern is compiled with the
Unicode (``u``) flag, as the specification recommends; a pattern that is only valid in ECMA's
legacy (Annex B) syntax, such as ``\\-`` outside a class, falls back to that syntax, as browsers do
for a regex without ``u``. Python-only syntax (``(?i)``, ``\\Z``, ...) is either a compile-time
:class:`SchemaError` or means what ECMA says it means.

Heavy libraries (jsonschema, referencing, regress) are imported on first use, so
``import nbagent`` stays fast.
"""

from __future__ import annotations

import itertools
import json
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final, NoReturn, TypeAlias

from nbagent.errors import ArgumentsError, SchemaError
from nbagent.schema._schema_validator import (
    _load_jsonschema,
    _metaschema_validator,
    _new_registry,
    _regex,
    _validator_class,
)

if TYPE_CHECKING:
    pass

__all__ = ["SCHEMA_DIALECT", "CompiledSchema", "compile_schema", "normalize_schema"]

SCHEMA_DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"
_DIALECTS: Final = frozenset({SCHEMA_DIALECT, SCHEMA_DIALECT + "#"})

# Draft 2020-12 keywords whose value is a subschema, an array of subschemas, or an object whose
# values are subschemas. ``definitions`` is not a 2020-12 keyword, but ``referencing`` still looks
# for identifiers and anchors there, so it is checked like ``$defs``.
_IN_VALUE: Final = frozenset(
    {
        "additionalProperties",
        "contains",
        "contentSchema",
        "else",
        "if",
        "items",
        "not",
        "propertyNames",
        "then",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)
_IN_ARRAY: Final = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_IN_MAP: Final = frozenset(
    {"$defs", "definitions", "dependentSchemas", "patternProperties", "properties"}
)
# Applicators that apply a subschema to the *same* instance: a $ref cycle through only these
# never terminates.
_IN_PLACE_VALUE: Final = frozenset({"else", "if", "not", "then"})
_IN_PLACE_ARRAY: Final = frozenset({"allOf", "anyOf", "oneOf"})
_IN_PLACE_MAP: Final = frozenset({"dependentSchemas"})

_FORBIDDEN: Final = {
    "$id": "`$id` is not allowed: a tool schema is one self-contained document",
    "$recursiveRef": "`$recursiveRef` is Draft 2019-09; use `$dynamicRef` (Draft 2020-12)",
    "$recursiveAnchor": "`$recursiveAnchor` is Draft 2019-09; use `$dynamicAnchor` (Draft 2020-12)",
}
_MESSAGE_LIMIT: Final = 300

Path: TypeAlias = "tuple[str | int, ...]"


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
        return _compile(schema, require_object)  # not JSON: _compile says where, precisely
    cached = _CACHE.get(key)
    if cached is not None:
        _CACHE.move_to_end(key)
        return cached
    compiled = _compile(schema, require_object)
    _CACHE[key] = compiled
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return compiled


def _compile(schema: Mapping[str, Any] | bool | None, require_object: bool) -> CompiledSchema:
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
    walk = _PolicyWalk(normalized)
    walk.run()
    _check_metaschema(normalized)
    # The root's `$schema` (already checked) is dropped from the validator's copy: jsonschema picks
    # a validator class per `$schema`, which would silently swap in Python-`re` matching when a
    # `$ref` reaches the root.
    working = {key: value for key, value in normalized.items() if key != "$schema"}
    walk.locations[id(working)] = ""
    targets = _check_references(working, walk)
    _check_cycles(walk, targets)
    validator = _validator_class()(working, registry=_new_registry())
    return CompiledSchema(normalized, validator)


# --- copying -------------------------------------------------------------------------------------


def _json_copy(value: object, path: Path) -> object:
    """Deep-copy ``value`` as plain JSON data (dict/list/str/int/float/bool/None)."""
    if value is None or isinstance(value, (str, int, float)):
        return value
    if isinstance(value, Mapping):
        copied: dict[str, object] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise SchemaError(
                    f"schema object keys must be strings, not {key!r}", _pointer(path)
                )
            copied[key] = _json_copy(item, (*path, key))
        return copied
    if isinstance(value, (list, tuple)):
        return [_json_copy(item, (*path, index)) for index, item in enumerate(value)]
    raise SchemaError(
        f"a schema may hold only JSON values, not {type(value).__name__}", _pointer(path)
    )


# --- policy --------------------------------------------------------------------------------------


def _pointer(path: Iterable[str | int]) -> str:
    """Render a JSON pointer (RFC 6901) for ``path``."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)


def _resolve_pointer(root: object, fragment: str) -> tuple[Path, object] | None:
    """Follow a JSON-pointer fragment (already percent-decoded) from ``root``; None if it misses."""
    node = root
    path: list[str | int] = []
    for raw in fragment.split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
            path.append(part)
        elif isinstance(node, list) and part.isdigit() and (part == "0" or part[0] != "0"):
            index = int(part)
            if index >= len(node):
                return None
            node = node[index]
            path.append(index)
        else:
            return None
    return tuple(path), node


class _PolicyWalk:
    """One pass over every schema position: forbidden keywords, `$schema`, refs, regexes."""

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.locations: dict[int, str] = {}  # id(subschema dict) -> its pointer
        self.nodes: dict[str, dict[str, Any]] = {}  # pointer -> subschema dict
        self.refs: list[tuple[str, str, str]] = []  # (owner pointer, keyword, reference)

    def run(self) -> None:
        """Walk depth-first in document order, following same-document pointer refs."""
        stack: list[tuple[Path, object]] = [((), self.root)]
        while stack:
            path, node = stack.pop()
            pointer = _pointer(path)
            if pointer in self.nodes or not isinstance(node, dict):
                continue
            self.nodes[pointer] = node
            self.locations[id(node)] = pointer
            children = self._check(path, pointer, node)
            stack.extend(reversed(children))

    def _check(self, path: Path, pointer: str, node: dict[str, Any]) -> list[tuple[Path, object]]:
        for keyword, message in _FORBIDDEN.items():
            if keyword in node:
                raise SchemaError(message, f"{pointer}/{keyword}")
        if "$schema" in node:
            if path:
                raise SchemaError(
                    "`$schema` is allowed only at the root (there are no embedded resources)",
                    f"{pointer}/$schema",
                )
            if node["$schema"] not in _DIALECTS:
                raise SchemaError(
                    f"only JSON Schema Draft 2020-12 ({SCHEMA_DIALECT}) is supported, "
                    f"not {node['$schema']!r}",
                    "/$schema",
                )
        children: list[tuple[Path, object]] = []
        for keyword in ("$ref", "$dynamicRef"):
            ref = node.get(keyword)
            if not isinstance(ref, str):
                continue  # the metaschema check reports a non-string
            if not ref.startswith("#"):
                raise SchemaError(
                    f"`{keyword}` {ref!r} is not a same-document reference (it must start with "
                    "'#'); nbagent never fetches schemas",
                    f"{pointer}/{keyword}",
                )
            self.refs.append((pointer, keyword, ref))
            fragment = _unquote(ref[1:])
            if fragment == "" or fragment.startswith("/"):
                found = _resolve_pointer(self.root, fragment)
                if found is not None:  # an unresolvable ref is reported later
                    children.append(found)
        pattern = node.get("pattern")
        if isinstance(pattern, str):
            _checked_regex(pattern, f"{pointer}/pattern")
        for keyword, value in node.items():
            if keyword in _IN_VALUE:
                children.append(((*path, keyword), value))
            elif keyword in _IN_ARRAY and isinstance(value, list):
                children.extend(((*path, keyword, i), item) for i, item in enumerate(value))
            elif keyword in _IN_MAP and isinstance(value, dict):
                if keyword == "patternProperties":
                    for regex in value:
                        _checked_regex(regex, _pointer((*path, keyword, regex)))
                children.extend(((*path, keyword, name), item) for name, item in value.items())
        return children


def _unquote(fragment: str) -> str:
    from urllib.parse import unquote

    return unquote(fragment)


def _checked_regex(pattern: str, pointer: str) -> None:
    try:
        _regex(pattern)
    except Exception as exc:  # regress.RegressError; imported lazily
        raise SchemaError(
            f"invalid ECMA-262 regular expression {pattern!r}: {exc}", pointer
        ) from None


def _check_metaschema(schema: dict[str, Any]) -> None:
    from jsonschema.exceptions import best_match

    error = best_match(_metaschema_validator().iter_errors(schema))
    if error is not None:
        raise SchemaError(
            f"not a valid Draft 2020-12 schema: {_shorten(error.message)}",
            _pointer(error.absolute_path),
        )


def _check_references(working: dict[str, Any], walk: _PolicyWalk) -> dict[str, list[str]]:
    """Resolve every reference like the validator will; map owner pointer -> target pointers."""
    from referencing.exceptions import Unresolvable
    from referencing.jsonschema import DRAFT202012

    resolver = _new_registry().resolver_with_root(DRAFT202012.create_resource(working))
    targets: dict[str, list[str]] = {}
    for owner, keyword, ref in walk.refs:
        where = f"{owner}/{keyword}"
        try:
            contents = resolver.lookup(ref).contents
        except Unresolvable:
            raise SchemaError(
                f"`{keyword}` {ref!r} does not resolve in this schema", where
            ) from None
        if not isinstance(contents, (dict, bool)):
            raise SchemaError(f"`{keyword}` {ref!r} does not point at a schema", where)
        target = walk.locations.get(id(contents))
        if keyword == "$ref" and target is not None:
            targets.setdefault(owner, []).append(target)
    return targets


def _check_cycles(walk: _PolicyWalk, ref_targets: dict[str, list[str]]) -> None:
    """Reject a `$ref` cycle through in-place applicators only: validation would never end."""
    edges: dict[str, list[str]] = {}
    for pointer, subschema in walk.nodes.items():
        out: list[str] = []
        for keyword, value in subschema.items():
            if keyword in _IN_PLACE_VALUE and isinstance(value, dict):
                out.append(walk.locations[id(value)])
            elif keyword in _IN_PLACE_ARRAY and isinstance(value, list):
                out.extend(walk.locations[id(v)] for v in value if isinstance(v, dict))
            elif keyword in _IN_PLACE_MAP and isinstance(value, dict):
                out.extend(walk.locations[id(v)] for v in value.values() if isinstance(v, dict))
        out.extend(ref_targets.get(pointer, ()))
        edges[pointer] = out
    done: set[str] = set()
    for start in edges:
        if start in done:
            continue
        on_path = {start}
        stack: list[tuple[str, Iterator[str]]] = [(start, iter(edges[start]))]
        while stack:
            node, successors = stack[-1]
            step = next(successors, None)
            if step is None:
                stack.pop()
                on_path.discard(node)
                done.add(node)
            elif step in on_path:
                cycle = [entry for entry, _ in stack]
                cycle = [*cycle[cycle.index(step) :], step]
                closing = next(
                    a for a, b in itertools.pairwise(cycle) if b in ref_targets.get(a, ())
                )
                raise SchemaError(
                    "`$ref` cycle that never moves into the instance: validation would never end",
                    f"{closing}/$ref",
                )
            elif step not in done:
                on_path.add(step)
                stack.append((step, iter(edges[step])))


# --- reporting -----------------------------------------------------------------------------------


def _shorten(text: str) -> str:
    """Keep messages readable when they quote a large instance."""
    if len(text) <= _MESSAGE_LIMIT:
        return text
    head = _MESSAGE_LIMIT * 2 // 3
    tail = _MESSAGE_LIMIT - head - 5
    return f"{text[:head]} ... {text[-tail:]}"


def _violation(error: Any) -> tuple[str, str]:
    """(JSON pointer of the instance location, readable message) for one validation error."""
    from jsonschema.exceptions import best_match

    message = _shorten(error.message)
    if error.context:
        closest = best_match(error.context)
        where = _pointer(closest.absolute_path) or "(root)"
        message = f"{message}; closest: {_shorten(closest.message)} at {where}"
    return _pointer(error.absolute_path), message


def _violation_key(violation: tuple[str, str]) -> tuple[list[tuple[int, int, str]], str]:
    """Sort by pointer (array indexes numerically), then message."""
    pointer, message = violation
    parts = [
        (0, int(part), "") if part.isascii() and part.isdigit() else (1, 0, part)
        for part in pointer.split("/")[1:]
    ]
    return parts, message
