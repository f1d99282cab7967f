"""OpenAI strict mode: the schema changes it requires, and undoing their one visible effect.

With ``strict: true`` OpenAI constrains decoding to the schema, but only accepts a subset of JSON
Schema. :func:`strict_schema` rewrites a tool's schema into that subset, visibly:

* every object gets ``additionalProperties: false``;
* every property is listed in ``required``; a property that was optional becomes nullable
  (``"null"`` is added to its ``type``, ``None`` to its ``enum``, or ``{"type": "null"}`` to its
  ``anyOf``; a ``$ref`` or ``const`` is wrapped in an ``anyOf`` with null), so the model sends
  ``null`` where it would have left the property out;
* ``default`` values are moved into the description (``(default: 3)``), since strict mode has
  no defaults.

It refuses, with a :class:`~nbagent.errors.ToolDefinitionError` naming the JSON pointer, what
strict mode cannot express, and never narrows a schema silently: a root that is not an object,
``additionalProperties`` that is not ``false`` (maps), a free-form object (``settings: dict``:
no properties and no ``additionalProperties: false``, which made strict could only ever be
``{}``), a value of any type (``{}``, ``x: Any``: no ``type``, ``anyOf``, ``$ref``, ``enum`` or
``const``), and keywords OpenAI does not support (``allOf``, ``oneOf``, ``not``,
``if``/``then``/``else``, ``patternProperties``, ``minLength``/``maxLength``, ``uniqueItems`` …).
:func:`strict_problems` lists every such problem with its pointer (for preflight).

:func:`drop_added_nulls` undoes the visible effect on a call: a ``null`` the model sent for a
property that was optional and did not itself allow null is removed, so the arguments validate
against the tool's own schema.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..errors import ToolDefinitionError
from ..schema import normalize_schema

__all__ = ["drop_added_nulls", "strict_problems", "strict_schema"]

#: Keywords OpenAI strict mode rejects (from its "supported schemas" reference).
UNSUPPORTED = frozenset(
    {
        "allOf",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
        "dependentRequired",
        "dependentSchemas",
        "patternProperties",
        "unevaluatedProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "unevaluatedItems",
        "prefixItems",
        "contains",
        "minContains",
        "maxContains",
        "uniqueItems",
        "minLength",
        "maxLength",
        "$dynamicRef",
        "$dynamicAnchor",
    }
)
_HINTS = {
    "oneOf": "use anyOf",
    "allOf": "merge the subschemas into one",
    "patternProperties": "list the properties by name",
}


def strict_schema(schema: Mapping[str, Any] | None, *, tool: str = "") -> dict[str, Any]:
    """Rewrite ``schema`` into what OpenAI strict mode accepts (see the module docs).

    The input is not changed. Raises :class:`ToolDefinitionError` when the schema cannot be
    made strict; ``tool`` names the tool in that message.
    """
    root, problems = _rewrite(schema)
    if problems:
        pointer, reason = problems[0]
        label = f"tool {tool!r}" if tool else "the schema"
        raise ToolDefinitionError(
            f"{label} cannot be made strict for OpenAI: {reason} at {pointer or '/'}; change "
            "the schema or set strict=False"
        )
    return root


def strict_problems(schema: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """Everything that keeps ``schema`` from being made strict: ``(JSON pointer, reason)``
    pairs, in schema order; empty when :func:`strict_schema` would rewrite it."""
    return _rewrite(schema)[1]


def _rewrite(schema: Mapping[str, Any] | None) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    root = normalize_schema(schema)
    walk = _Walk()
    if root.get("type") != "object":
        walk.refuse("", "the root of a strict schema must be an object (type: object)")
    walk.node(root, "")
    return root, walk.problems


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


#: Keywords that give a subschema a kind strict mode can constrain decoding to.
_KINDS = ("type", "anyOf", "$ref", "enum", "const")


class _Walk:
    """Rewrites a schema in place, noting what strict mode cannot express (never narrowing a
    schema silently: what it would narrow is a problem, not a rewrite)."""

    def __init__(self) -> None:
        self.problems: list[tuple[str, str]] = []

    def refuse(self, pointer: str, reason: str) -> None:
        self.problems.append((pointer, reason))

    def node(self, node: Any, pointer: str) -> None:
        if not isinstance(node, dict):
            self.refuse(pointer, "boolean schemas are not supported")
            return
        for key in node:
            if key in UNSUPPORTED:
                hint = _HINTS.get(key)
                self.refuse(
                    pointer,
                    f"{key!r} is not supported in strict mode" + (f" ({hint})" if hint else ""),
                )
        if not any(key in node for key in _KINDS):
            # {} or only annotations: any value at all, which strict mode cannot decode to
            self.refuse(
                pointer,
                "a value of any type (no type, anyOf, $ref, enum or const) is not supported "
                "in strict mode (give it a type)",
            )
        if "default" in node:
            default = node.pop("default")
            note = f"(default: {json.dumps(default, ensure_ascii=False)})"
            text = node.get("description")
            node["description"] = f"{text} {note}" if text else note
        kind = node.get("type")
        if (
            kind == "object"
            or "properties" in node
            or (isinstance(kind, list) and "object" in kind)
        ):
            self.object(node, pointer)
        items = node.get("items")
        if items is not None:
            if isinstance(items, list):
                self.refuse(pointer + "/items", "tuple-form items are not supported")
            else:
                self.node(items, pointer + "/items")
        for index, sub in enumerate(node.get("anyOf", ())):
            self.node(sub, f"{pointer}/anyOf/{index}")
        for defs in ("$defs", "definitions"):
            for name, sub in node.get(defs, {}).items():
                self.node(sub, f"{pointer}/{defs}/{_escape(name)}")

    def object(self, node: dict[str, Any], pointer: str) -> None:
        declared = "properties" in node  # {"properties": {}} says: no properties at all
        properties = node.setdefault("properties", {})
        extra = node.get("additionalProperties")
        if extra is not None and extra is not False:
            self.refuse(
                pointer,
                "additionalProperties must be false (strict mode cannot express free-form "
                "objects or maps)",
            )
        elif extra is None and not declared:
            # A free-form object (``settings: dict``): made strict it could only ever be {}
            self.refuse(
                pointer,
                "a free-form object (no properties, and additionalProperties not false) is "
                "not supported in strict mode: made strict it could only be {} (list its "
                "properties, or set strict=False for this tool)",
            )
        node["additionalProperties"] = False
        required = set(node.get("required", ()))
        for name in list(properties):
            where = f"{pointer}/properties/{_escape(name)}"
            self.node(properties[name], where)
            if name not in required and isinstance(properties[name], dict):
                properties[name] = self.nullable(properties[name], where)
        node["required"] = list(properties)

    def nullable(self, node: dict[str, Any], pointer: str) -> dict[str, Any]:
        if _allows_null(node):
            return node
        if "$ref" in node or ("const" in node and "type" not in node):
            return {"anyOf": [node, {"type": "null"}]}
        if "anyOf" in node:
            node["anyOf"].append({"type": "null"})
            return node
        kind = node.get("type")
        if isinstance(kind, str):
            node["type"] = [kind, "null"]
        elif isinstance(kind, list):
            node["type"] = [*kind, "null"]
        if "enum" in node:
            node["enum"] = [*node["enum"], None]
        return node


def _allows_null(node: Mapping[str, Any]) -> bool:
    kind = node.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return "enum" not in node or None in node["enum"]
    if "enum" in node and "type" not in node:
        return None in node["enum"]
    if "const" in node:
        return node["const"] is None
    return any(isinstance(s, Mapping) and _allows_null(s) for s in node.get("anyOf", ()))


def drop_added_nulls(arguments: str, schema: Mapping[str, Any] | None) -> str:
    """Remove the nulls strict mode made the model send for optional properties.

    ``schema`` is the tool's own (not strict) schema. Returns ``arguments`` unchanged when
    nothing was removed or the text is not a JSON object.
    """
    try:
        value = json.loads(arguments)
        root = normalize_schema(schema)
        if not isinstance(value, dict) or not _prune(value, root, root, 0):
            return arguments
        return json.dumps(value, ensure_ascii=False)
    except (ValueError, RecursionError):  # not JSON, or nested too deep to walk: leave as sent
        return arguments


def _resolve(node: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    for _ in range(32):
        ref = node.get("$ref")
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return node
        target: Any = root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, Mapping) or part not in target:
                return node
            target = target[part]
        if not isinstance(target, Mapping):
            return node
        node = target
    return node


def _prune(value: Any, node: Mapping[str, Any], root: Mapping[str, Any], depth: int) -> bool:
    """Drop added nulls in ``value`` (in place) following ``node``; True if anything changed."""
    if depth > 64:
        return False
    node = _resolve(node, root)
    if "properties" not in node and "items" not in node and "anyOf" in node:
        branches = [b for b in node["anyOf"] if isinstance(b, Mapping) and not _allows_null(b)]
        if len(branches) == 1:  # Optional[Something]: follow the something
            node = _resolve(branches[0], root)
    changed = False
    if isinstance(value, dict):
        properties = node.get("properties")
        if not isinstance(properties, Mapping):
            return False
        required = set(node.get("required", ()))
        for name in list(value):
            sub = properties.get(name)
            if not isinstance(sub, Mapping):
                continue
            if value[name] is None:
                if name not in required and not _allows_null(_resolve(sub, root)):
                    del value[name]
                    changed = True
            elif _prune(value[name], sub, root, depth + 1):
                changed = True
    elif isinstance(value, list):
        items = node.get("items")
        if isinstance(items, Mapping):
            for item in value:
                if _prune(item, items, root, depth + 1):
                    changed = True
    return changed
