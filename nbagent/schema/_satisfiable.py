"""Which parts of a JSON Schema no value can satisfy: found cheaply, and reported soundly.

:func:`unsatisfiable` walks a (normalized, Draft 2020-12) schema and names every subschema that
certainly accepts no value, with the JSON pointer where the contradiction is and why. It is
sound, not complete: what it reports is impossible for certain; what it cannot decide cheaply
(a ``pattern`` no string matches, ``not`` of anything but ``{}``, conditionals) is never
reported.

A subschema is reported where its own keywords contradict each other (``minLength`` 5 with
``maxLength`` 2), wherever it sits, even in an optional property or one branch of an
``anyOf``: nobody writes such a schema on purpose, and a grammar built from it (llama.cpp's)
cannot be built at all. A type the ``type`` keyword names is reported when its own keywords
leave no value of it (``{"type": ["string", "null"], "minLength": 5, "maxLength": 2}`` allows
only null: the string is a mistake). ``false`` (or ``{"not": {}}``) is not reported by itself, since
it is how a schema forbids (``additionalProperties: false``, ``properties: {"x": false}``); it
is reported where it must still be satisfied: the root, a required property, an ``allOf``
member, every branch of an ``anyOf``.

What counts as a contradiction, per type: a string's ``minLength`` over its ``maxLength``; a
number's lower bound (``minimum``, ``exclusiveMinimum``) over its upper one; an integer range
with no integer in it, or no multiple of an integer ``multipleOf``; an array's ``minItems`` over
its ``maxItems`` (or over what ``items: false`` / ``prefixItems`` allow, or ``minContains`` over
``maxContains``); an object's ``minProperties`` over its ``maxProperties``, more required
properties than ``maxProperties``, a required property that is not allowed or accepts no value;
an empty ``enum``, an ``enum`` or ``const`` none of whose values has an allowed type, a
``const`` not in the ``enum``; ``type: []``. ``allOf`` members are merged first (types
intersected, bounds combined, ``required`` joined), so contradictions between members count
too.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["unsatisfiable"]

_TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")
_MAX_DEPTH = 128  # deeper than this, nothing is decided (the walk stays bounded)

# Keywords whose value is one subschema / a list of subschemas / a map of subschemas
_ONE = (
    "additionalProperties",
    "items",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
)
_MANY = ("allOf", "anyOf", "oneOf", "prefixItems")
_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


def _escape(name: str) -> str:
    return str(name).replace("~", "~0").replace("/", "~1")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _count(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


def _kinds_of(value: Any) -> set[str]:
    """The JSON types ``value`` has (an integral number is both integer and number)."""
    if value is None:
        return {"null"}
    if isinstance(value, bool):
        return {"boolean"}
    if isinstance(value, int):
        return {"integer", "number"}
    if isinstance(value, float):
        return {"integer", "number"} if value.is_integer() else {"number"}
    if isinstance(value, str):
        return {"string"}
    if isinstance(value, list):
        return {"array"}
    if isinstance(value, dict):
        return {"object"}
    return set()


def _same(a: Any, b: Any) -> bool:
    """JSON equality (``1 == 1.0``, but ``true`` is not ``1``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if _number(a) and _number(b):
        return bool(a == b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _declared(node: Mapping[str, Any]) -> set[str] | None:
    """The types the ``type`` keyword names (``number`` includes ``integer``), or None."""
    kind = node.get("type")
    if isinstance(kind, str):
        found = {kind}
    elif isinstance(kind, list):
        found = {k for k in kind if isinstance(k, str)}
    else:
        return None
    if "number" in found:
        found.add("integer")
    return found & set(_TYPES)


class _Analysis:
    def __init__(self, root: Any) -> None:
        self.root = root
        self._dead: dict[int, str | None] = {}
        self._busy: set[int] = set()

    # --- references -------------------------------------------------------------------------

    def resolve(self, ref: Any) -> Any:
        """The target of a same-document JSON pointer reference, or None."""
        if not isinstance(ref, str) or not ref.startswith("#"):
            return None
        fragment = ref[1:]
        if fragment and not fragment.startswith("/"):
            return None  # an anchor: not followed (never reported through)
        target: Any = self.root
        for token in fragment.split("/")[1:] if fragment else ():
            token = token.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and token in target:
                target = target[token]
            elif isinstance(target, list) and token.isdigit() and int(token) < len(target):
                target = target[int(token)]
            else:
                return None
        return target

    # --- does a subschema accept nothing at all? ----------------------------------------------

    def dead(self, node: Any, depth: int = 0) -> str | None:
        """Why ``node`` accepts no value at all, or None when it may accept one."""
        if node is False:
            return "it is `false`"
        if not isinstance(node, dict) or depth > _MAX_DEPTH:
            return None
        key = id(node)
        if key in self._dead:
            return self._dead[key]
        if key in self._busy:
            return None  # a recursive reference: assume it can be satisfied (sound)
        self._busy.add(key)
        try:
            reason = self._own(node, depth)
        finally:
            self._busy.discard(key)
        self._dead[key] = reason
        return reason

    def _own(self, node: dict[str, Any], depth: int) -> str | None:
        if "$ref" in node:
            target = self.resolve(node["$ref"])
            if target is not None and self.dead(target, depth + 1):
                return f"its $ref {node['$ref']} accepts no value"
        negated = node.get("not")
        if negated is True or negated == {}:
            return "`not` of a schema that accepts everything accepts nothing"
        for keyword in ("anyOf", "oneOf"):
            branches = node.get(keyword)
            if isinstance(branches, list):
                if not branches:
                    return f"`{keyword}` is empty"
                if all(self.dead(b, depth + 1) for b in branches):
                    return f"none of its `{keyword}` branches accepts a value"
        members = node.get("allOf")
        merged = dict(node)
        if isinstance(members, list):
            for index, member in enumerate(members):
                if self.dead(member, depth + 1):
                    return f"its allOf member {index} accepts no value"
            merged = self._merged(node, members)
            if merged.get("type") == []:
                return "its `allOf` members' types have nothing in common"
        alive, reasons = self.alive_types(merged, depth)
        if not alive:
            return "; ".join(reasons) or "no type is allowed"
        return None

    def _merged(self, node: dict[str, Any], members: list[Any]) -> dict[str, Any]:
        """``node``'s own keywords combined with its ``allOf`` members' (one level)."""
        out = {k: v for k, v in node.items() if k != "allOf"}
        types = _declared(node)
        for member in members:
            if isinstance(member, dict) and "$ref" in member:
                target = self.resolve(member["$ref"])
                member = target if isinstance(target, dict) else {}
            if not isinstance(member, dict):
                continue
            theirs = _declared(member)
            if theirs is not None:
                types = theirs if types is None else types & theirs
            for low in ("minLength", "minItems", "minProperties", "minimum", "exclusiveMinimum"):
                if _number(member.get(low)):
                    out[low] = max(out[low], member[low]) if _number(out.get(low)) else member[low]
            for high in ("maxLength", "maxItems", "maxProperties", "maximum", "exclusiveMaximum"):
                if _number(member.get(high)):
                    have = out.get(high)
                    out[high] = min(have, member[high]) if _number(have) else member[high]
            if isinstance(member.get("required"), list):
                out["required"] = [*out.get("required", ()), *member["required"]]
            if "const" in member and "const" not in out:
                out["const"] = member["const"]
            if isinstance(member.get("enum"), list):
                mine = out.get("enum")
                out["enum"] = (
                    member["enum"]
                    if not isinstance(mine, list)
                    else [v for v in mine if any(_same(v, w) for w in member["enum"])]
                )
        if types is not None:
            out["type"] = sorted(types)
        return out

    # --- which types a node leaves any value of -----------------------------------------------

    def alive_types(self, node: dict[str, Any], depth: int) -> tuple[set[str], list[str]]:
        """The types ``node`` still allows a value of, and why each of the others has none."""
        declared = _declared(node)
        types = set(_TYPES) if declared is None else declared
        reasons: list[str] = []
        if node.get("type") == []:
            return set(), ["`type` is an empty list"]
        values: list[Any] | None = None
        if "enum" in node and isinstance(node["enum"], list):
            values = list(node["enum"])
            if not values:
                return set(), ["`enum` is empty: no value is allowed"]
        if "const" in node:
            if values is not None:
                values = [v for v in values if _same(v, node["const"])]
                if not values:
                    return set(), ["its `const` is not one of its `enum` values"]
            else:
                values = [node["const"]]
        alive: set[str] = set()
        for kind in sorted(types):
            why = self._type_dead(node, kind, depth)
            if why is None:
                alive.add(kind)
            else:
                reasons.append(why)
        if values is not None and not any(_kinds_of(v) & alive for v in values):
            allowed = ", ".join(sorted(alive)) or "none"
            what = "`const`" if "enum" not in node else "`enum`"
            return set(), [f"no value of its {what} has a type it allows ({allowed})"]
        return alive, reasons

    def _type_dead(self, node: dict[str, Any], kind: str, depth: int) -> str | None:
        """Why no value of ``kind`` satisfies ``node``'s own keywords, or None."""
        if kind == "string":
            low, high = _count(node.get("minLength")), _count(node.get("maxLength"))
            if low is not None and high is not None and low > high:
                return f"no string is at least {low} and at most {high} characters long"
        elif kind == "number":
            return _number_range(node)
        elif kind == "integer":
            return _number_range(node) or _integer_range(node)
        elif kind == "array":
            return self._array(node, depth)
        elif kind == "object":
            return self._object(node, depth)
        return None

    def _array(self, node: dict[str, Any], depth: int) -> str | None:
        low = _count(node.get("minItems")) or 0
        high = _count(node.get("maxItems"))
        if high is not None and low > high:
            return f"no array has at least {low} and at most {high} items"
        prefix = node.get("prefixItems")
        prefix = prefix if isinstance(prefix, list) else []
        for index, item in enumerate(prefix[:low]):
            if self.dead(item, depth + 1):
                return f"item {index} must be there (minItems {low}) and accepts no value"
        if low > len(prefix) and "items" in node and self.dead(node["items"], depth + 1):
            allowed = len(prefix)
            return f"its items allow at most {allowed} (items accepts none), minItems is {low}"
        if "contains" in node:
            least = _count(node.get("minContains"))
            least = 1 if least is None else least
            most = _count(node.get("maxContains"))
            if most is not None and least > most:
                return f"minContains {least} is over maxContains {most}"
            if least and self.dead(node["contains"], depth + 1):
                return "its `contains` accepts no value, so no item can match it"
            if least and high is not None and least > high:
                return f"minContains {least} is over maxItems {high}"
        return None

    def _object(self, node: dict[str, Any], depth: int) -> str | None:
        low = _count(node.get("minProperties")) or 0
        high = _count(node.get("maxProperties"))
        if high is not None and low > high:
            return f"no object has at least {low} and at most {high} properties"
        required = node.get("required")
        names = (
            [r for r in dict.fromkeys(required) if isinstance(r, str)]
            if isinstance(required, list)
            else []
        )
        if high is not None and len(names) > high:
            return f"it requires {len(names)} properties but allows at most {high}"
        properties = node.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        extra = node.get("additionalProperties", True)
        for name in names:
            if name in properties:
                if self.dead(properties[name], depth + 1):
                    return f"its required property {name!r} accepts no value"
            elif "patternProperties" not in node and self.dead(extra, depth + 1):
                return (
                    f"its required property {name!r} is not allowed (not in `properties`, and "
                    "additionalProperties allows none)"
                )
        names_schema = node.get("propertyNames")
        if (names or low) and names_schema is not None and self.dead(names_schema, depth + 1):
            return "it must have a property, and its `propertyNames` accepts no name"
        return None


def _number_range(node: Mapping[str, Any]) -> str | None:
    lows = [(node[k], k[0] == "e") for k in ("minimum", "exclusiveMinimum") if _number(node.get(k))]
    highs = [
        (node[k], k[0] == "e") for k in ("maximum", "exclusiveMaximum") if _number(node.get(k))
    ]
    for low, low_open in lows:
        for high, high_open in highs:
            if low > high or (low == high and (low_open or high_open)):
                return f"no number is within its bounds ({_bounds(node)})"
    return None


def _integer_range(node: Mapping[str, Any]) -> str | None:
    low: float = -math.inf
    high: float = math.inf
    if _number(node.get("minimum")):
        low = max(low, math.ceil(node["minimum"]))
    if _number(node.get("exclusiveMinimum")):
        low = max(low, math.floor(node["exclusiveMinimum"]) + 1)
    if _number(node.get("maximum")):
        high = min(high, math.floor(node["maximum"]))
    if _number(node.get("exclusiveMaximum")):
        high = min(high, math.ceil(node["exclusiveMaximum"]) - 1)
    if low > high:
        return f"no integer is within its bounds ({_bounds(node)})"
    step = node.get("multipleOf")
    if (
        isinstance(step, int)
        and not isinstance(step, bool)
        and step > 0
        and math.isfinite(low)
        and math.isfinite(high)
    ):
        first = -(-int(low) // step) * step  # the first multiple at or above the low bound
        if first > high:
            return f"no multiple of {step} is within its bounds ({_bounds(node)})"
    return None


def _bounds(node: Mapping[str, Any]) -> str:
    shown = [
        f"{k} {node[k]}"
        for k in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")
        if k in node
    ]
    return ", ".join(shown)


def _children(node: dict[str, Any], pointer: str) -> Iterator[tuple[str, Any]]:
    for key in _ONE:
        if key in node:
            yield f"{pointer}/{key}", node[key]
    for key in _MANY:
        items = node.get(key)
        if isinstance(items, list):
            for index, item in enumerate(items):
                yield f"{pointer}/{key}/{index}", item
    for key in _MAP:
        children = node.get(key)
        if isinstance(children, dict):
            for name, child in children.items():
                yield f"{pointer}/{key}/{_escape(name)}", child


def _forbids(node: dict[str, Any]) -> bool:
    """``{"not": {}}`` (or ``{"not": true}``), with annotations only: like ``false``."""
    return node.get("not") in (True, {}) and all(
        key in ("not", "description", "title", "$comment", "deprecated") for key in node
    )


def unsatisfiable(schema: Any) -> list[tuple[str, str]]:
    """Every subschema of ``schema`` that certainly accepts no value: ``(JSON pointer, why)``,
    in document order (see the module docs); empty when none was found."""
    analysis = _Analysis(schema)
    found: list[tuple[str, str]] = []
    stack: list[tuple[str, Any, int]] = [("", schema, 0)]
    seen: set[int] = set()
    while stack:
        pointer, node, depth = stack.pop()
        if not isinstance(node, dict) or id(node) in seen or depth > _MAX_DEPTH:
            continue
        seen.add(id(node))
        reason = analysis.dead(node)
        if reason is not None and pointer and _forbids(node):
            reason = None  # how a schema says "never": reported only where it must hold
        if reason is None:
            declared = _declared(node)
            if declared and "enum" not in node and "const" not in node:
                for kind in sorted(declared):
                    why = analysis._type_dead(node, kind, 0)
                    if why is not None and not (kind == "integer" and "number" in declared):
                        reason = why  # a type it names has no value: a mistake
                        break
        if reason is not None:
            found.append((pointer, reason))
        stack.extend(
            (where, child, depth + 1) for where, child in reversed(list(_children(node, pointer)))
        )
    return found
