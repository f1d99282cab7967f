"""The strict policy every schema passes before it is compiled (see :mod:`nbagent.schema`):
Draft 2020-12 only, no ``$id`` and no reference that leaves the document, references that
resolve to schemas, no ``$ref`` cycle that never consumes input, ECMA-262 regexes, and the
metaschema. Each refusal is a :class:`~nbagent.errors.SchemaError` naming the JSON pointer.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any, Final, TypeAlias

from nbagent.errors import SchemaError
from nbagent.schema._schema_validator import _metaschema_validator, _new_registry, _regex

__all__ = ["SCHEMA_DIALECT", "checked", "json_pointer", "shorten"]

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


def checked(normalized: dict[str, Any]) -> dict[str, Any]:
    """Check ``normalized`` against the policy; the copy the validator is built on (the root's
    ``$schema``, already checked, dropped: jsonschema picks a validator class per ``$schema``,
    which would silently swap in Python-``re`` matching when a ``$ref`` reaches the root)."""
    walk = _PolicyWalk(normalized)
    walk.run()
    _check_metaschema(normalized)
    working = {key: value for key, value in normalized.items() if key != "$schema"}
    walk.locations[id(working)] = ""
    targets = _check_references(working, walk)
    _check_cycles(walk, targets)
    return working


def json_pointer(path: Iterable[str | int]) -> str:
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
            pointer = json_pointer(path)
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
                        _checked_regex(regex, json_pointer((*path, keyword, regex)))
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
            f"not a valid Draft 2020-12 schema: {shorten(error.message)}",
            json_pointer(error.absolute_path),
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


def shorten(text: str) -> str:
    """Keep messages readable when they quote a large instance."""
    if len(text) <= _MESSAGE_LIMIT:
        return text
    head = _MESSAGE_LIMIT * 2 // 3
    tail = _MESSAGE_LIMIT - head - 5
    return f"{text[:head]} ... {text[-tail:]}"
