"""Draft-07 input schemas at the MCP boundary: translated to Draft 2020-12 where that is exact.

MCP servers written with zod (the TypeScript SDK's converter, hence the reference server) tag
every input schema ``"$schema": "http://json-schema.org/draft-07/schema#"``, which nbagent's
strict Draft 2020-12 policy rejects as a foreign dialect. For the keywords a schema actually
holds, the two drafts mostly mean the same thing, so :func:`to_draft_2020_12` rewrites what
differs only in spelling and rejects, per tool, what differs in meaning:

* ``$schema`` naming draft-07 is dropped (a schema without ``$schema`` is 2020-12 here).
* ``items`` as an array becomes ``prefixItems``, and ``additionalItems`` beside it becomes
  ``items``; ``additionalItems`` beside a single ``items`` schema (draft-07 ignores it) is
  dropped.
* ``dependencies`` splits into ``dependentRequired`` (array values) and ``dependentSchemas``
  (schema values).
* Rejected, naming the JSON pointer: a ``$ref`` with assertion keywords beside it (draft-07
  ignores them, 2020-12 applies them); a 2019-09/2020-12 keyword that draft-07 ignores
  (``prefixItems``, ``unevaluatedProperties``, ``dependentSchemas``, ``$anchor`` …); a
  ``$ref`` that points into a renamed tuple ``items`` or ``dependencies``.

Everything else (types, ranges, ``enum``, ``const``, ``pattern``, ``if``/``then``/``else``,
``definitions`` …) means the same in both and is kept as written; the result then goes
through the same strict compile as every other tool schema. A schema without ``$schema`` is
taken as Draft 2020-12, as the MCP specification says, and passes through untouched.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ..errors import SchemaError

__all__ = ["DRAFT_07", "original_pointer", "to_draft_2020_12"]

#: The ``$schema`` values taken as draft-07 (with or without the empty fragment, http or https).
DRAFT_07: Final = frozenset(
    f"{scheme}://json-schema.org/draft-07/schema{tail}"
    for scheme in ("http", "https")
    for tail in ("", "#")
)

# Draft-07 keywords whose value is one subschema, an array of them, or a map of them.
_IN_VALUE: Final = frozenset(
    {"additionalItems", "additionalProperties", "contains", "else", "if", "not", "propertyNames",
     "then"}
)  # fmt: skip
_IN_ARRAY: Final = frozenset({"allOf", "anyOf", "oneOf"})
_IN_MAP: Final = frozenset({"$defs", "definitions", "patternProperties", "properties"})

# Keywords that constrain an instance in either draft (annotations such as title, description,
# default, examples, format, readOnly are not here: beside `$ref` they change nothing).
_ASSERTING: Final = frozenset(
    {"additionalItems", "additionalProperties", "allOf", "anyOf", "const", "contains",
     "dependencies", "dependentRequired", "dependentSchemas", "else", "enum",
     "exclusiveMaximum", "exclusiveMinimum", "if", "items", "maxContains", "maxItems",
     "maxLength", "maxProperties", "maximum", "minContains", "minItems", "minLength",
     "minProperties", "minimum", "multipleOf", "not", "oneOf", "pattern", "patternProperties",
     "prefixItems", "properties", "propertyNames", "required", "then", "type",
     "unevaluatedItems", "unevaluatedProperties", "uniqueItems", "$dynamicRef"}
)  # fmt: skip

# 2019-09 / 2020-12 keywords draft-07 does not know (so ignores), each meaning something now.
_LATER: Final = frozenset(
    {"$anchor", "$dynamicAnchor", "$dynamicRef", "$recursiveAnchor", "$recursiveRef",
     "$vocabulary", "dependentRequired", "dependentSchemas", "maxContains", "minContains",
     "prefixItems", "unevaluatedItems", "unevaluatedProperties"}
)  # fmt: skip

Path = tuple[str | int, ...]


def _pointer(path: Path) -> str:
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)


def to_draft_2020_12(schema: Any) -> tuple[Any, list[tuple[str, str]]]:
    """``schema`` as Draft 2020-12, and the renamed locations as (new pointer, old pointer).

    A schema that is not a draft-07 object is returned as it is (the strict compile judges
    it). Raises :class:`SchemaError` naming the JSON pointer (in the server's own schema)
    where draft-07 and 2020-12 would mean different things.
    """
    if not isinstance(schema, Mapping) or schema.get("$schema") not in DRAFT_07:
        return schema, []
    renames: list[tuple[str, str]] = []
    translated = _node(schema, (), (), renames)
    assert isinstance(translated, dict)
    translated.pop("$schema", None)
    _check_refs(translated, renames)
    return translated, renames


def original_pointer(pointer: str, renames: list[tuple[str, str]]) -> str:
    """Map a pointer into the translated schema back to the server's own schema."""
    best = max(
        (pair for pair in renames if pointer == pair[0] or pointer.startswith(pair[0] + "/")),
        key=lambda pair: len(pair[0]),
        default=None,
    )
    return pointer if best is None else best[1] + pointer[len(best[0]) :]


def _node(value: Any, old: Path, new: Path, renames: list[tuple[str, str]]) -> Any:
    """Translate one schema position (``old``: its path in the original, ``new``: after)."""
    if not isinstance(value, Mapping):
        return value  # a boolean schema, or something the strict compile will name
    for keyword in value:
        if keyword in _LATER:
            raise SchemaError(
                f"`{keyword}` is not a draft-07 keyword (draft-07 ignores it, Draft 2020-12 "
                "applies it), so this draft-07 schema cannot be translated exactly",
                _pointer((*old, keyword)),
            )
    if "$ref" in value:
        beside = sorted(k for k in value if k in _ASSERTING)
        if beside:
            them = "it" if len(beside) == 1 else "them"
            raise SchemaError(
                f"draft-07 ignores {', '.join(f'`{k}`' for k in beside)} beside `$ref`, "
                f"Draft 2020-12 applies {them}: the translation would change what is accepted",
                _pointer((*old, beside[0])),
            )
    out: dict[str, Any] = {}
    items = value.get("items")
    tuple_items = isinstance(items, list)
    for keyword, item in value.items():
        if keyword == "items":
            if tuple_items:
                out["prefixItems"] = [
                    _node(s, (*old, "items", i), (*new, "prefixItems", i), renames)
                    for i, s in enumerate(item)
                ]
                renames.append((_pointer((*new, "prefixItems")), _pointer((*old, "items"))))
            else:
                out["items"] = _node(item, (*old, "items"), (*new, "items"), renames)
        elif keyword == "additionalItems":
            if tuple_items:  # the schema for items past the tuple: 2020-12 calls it `items`
                out["items"] = _node(item, (*old, keyword), (*new, "items"), renames)
                renames.append((_pointer((*new, "items")), _pointer((*old, keyword))))
            # beside a single `items` schema draft-07 ignores it: dropped, meaning kept
        elif keyword == "dependencies" and isinstance(item, Mapping):
            _dependencies(item, old, new, out, renames)
        elif keyword in _IN_VALUE:
            out[keyword] = _node(item, (*old, keyword), (*new, keyword), renames)
        elif keyword in _IN_ARRAY and isinstance(item, list):
            out[keyword] = [
                _node(s, (*old, keyword, i), (*new, keyword, i), renames)
                for i, s in enumerate(item)
            ]
        elif keyword in _IN_MAP and isinstance(item, Mapping):
            out[keyword] = {
                name: _node(s, (*old, keyword, name), (*new, keyword, name), renames)
                for name, s in item.items()
            }
        else:
            out[keyword] = item
    return out


def _dependencies(
    value: Mapping[str, Any],
    old: Path,
    new: Path,
    out: dict[str, Any],
    renames: list[tuple[str, str]],
) -> None:
    """Split draft-07 ``dependencies`` into ``dependentRequired`` and ``dependentSchemas``."""
    for name, item in value.items():
        was = (*old, "dependencies", name)
        if isinstance(item, list):
            out.setdefault("dependentRequired", {})[name] = item
            renames.append((_pointer((*new, "dependentRequired", name)), _pointer(was)))
        else:
            now = (*new, "dependentSchemas", name)
            out.setdefault("dependentSchemas", {})[name] = _node(item, was, now, renames)
            renames.append((_pointer(now), _pointer(was)))


def _check_refs(schema: Any, renames: list[tuple[str, str]]) -> None:
    """Refuse a same-document ``$ref`` into a renamed place: its target moved."""
    if not renames:
        return
    olds = [old for _, old in renames]
    stack: list[tuple[Path, Any]] = [((), schema)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/"):
                target = _unquote(ref[1:])
                if any(target == o or target.startswith(o + "/") for o in olds):
                    raise SchemaError(
                        f"`$ref` {ref!r} points into a draft-07 tuple `items` or `dependencies`, "
                        "which Draft 2020-12 spells differently; it cannot be translated",
                        original_pointer(_pointer((*path, "$ref")), renames),
                    )
            stack.extend(((*path, key), child) for key, child in node.items())
        elif isinstance(node, list):
            stack.extend(((*path, index), child) for index, child in enumerate(node))


def _unquote(fragment: str) -> str:
    from urllib.parse import unquote

    return unquote(fragment)
