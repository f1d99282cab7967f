"""The documented limits of each API's strict structured output, measured on the schema sent.

A schema past one of them is refused by the API (HTTP 400), so a typed run whose output type
is past one answers through the ``final_answer`` tool instead (see :mod:`._answers`). What
each vendor documents, and is measured here on the schema as it goes on the wire (after the
strict rewrite of :mod:`._strict`):

* OpenAI Structured Outputs (Chat Completions ``response_format`` and the Responses API's
  ``text.format``, "Supported schemas"): at most 5,000 object properties in all and 10 levels
  of object nesting; at most 1,000 enum values in all; property names, definition names, enum
  values and const values at most 120,000 characters together; one string enum of more than
  250 values at most 15,000 characters. Recursive schemas (``#`` or a ``$defs`` entry that
  refers to itself) are supported.
* Anthropic structured outputs (``output_config.format``, "JSON Schema limitations"): no
  recursive schema; no numeric bounds (``minimum``, ``maximum``, ``exclusiveMinimum``,
  ``exclusiveMaximum``, ``multipleOf``), no string lengths (``minLength``, ``maxLength``), no
  ``maxItems``, and ``minItems`` only 0 or 1; ``format`` only date-time, time, date, duration,
  email, hostname, uri, ipv4, ipv6 or uuid; enum values only strings, numbers, booleans or
  null; at most 16 properties whose schema is a union (``anyOf`` or a list of types, which is
  what a nullable property becomes) and 24 optional ones. A ``pattern`` is supported only in
  a regex subset (no backreferences, lookaround or ``\\b``), which is not checked here: a
  schema with one goes through the tool.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["anthropic_problem", "openai_problem"]

#: OpenAI's documented bounds (Structured Outputs, "Supported schemas").
OPENAI_MAX_PROPERTIES = 5_000
OPENAI_MAX_NESTING = 10
OPENAI_MAX_ENUM_VALUES = 1_000
OPENAI_MAX_NAME_CHARS = 120_000
OPENAI_LARGE_ENUM = 250
OPENAI_MAX_LARGE_ENUM_CHARS = 15_000

#: Anthropic's documented bounds (structured outputs, "JSON Schema limitations").
ANTHROPIC_MAX_UNION_PROPERTIES = 16
ANTHROPIC_MAX_OPTIONAL_PROPERTIES = 24
ANTHROPIC_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}
)
ANTHROPIC_UNSUPPORTED = frozenset(
    {
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "maxItems",
        "pattern",
    }
)
#: Deeper than this the walk stops (the schema compiler bounds nesting well below it).
_DEEPEST = 256


def openai_problem(wire: Mapping[str, Any]) -> str | None:
    """Why OpenAI's strict structured output would refuse ``wire`` (None: it would not)."""
    size = _Size()
    size.walk(wire, "", 0)
    if size.properties > OPENAI_MAX_PROPERTIES:
        return (
            f"it has {size.properties:,} object properties, more than the "
            f"{OPENAI_MAX_PROPERTIES:,} OpenAI's structured outputs take"
        )
    nesting = _Nesting(wire).depth(wire, 0)
    if nesting > OPENAI_MAX_NESTING:
        return (
            f"its objects nest {nesting} levels deep, more than the {OPENAI_MAX_NESTING} "
            "OpenAI's structured outputs take"
        )
    if size.enum_values > OPENAI_MAX_ENUM_VALUES:
        return (
            f"it has {size.enum_values:,} enum values, more than the "
            f"{OPENAI_MAX_ENUM_VALUES:,} OpenAI's structured outputs take"
        )
    if size.names > OPENAI_MAX_NAME_CHARS:
        return (
            f"its property names, definition names, enum and const values are {size.names:,} "
            f"characters together, more than the {OPENAI_MAX_NAME_CHARS:,} OpenAI's structured "
            "outputs take"
        )
    if size.large_enum is not None:
        pointer, chars = size.large_enum
        return (
            f"the string enum at {pointer or '/'} has more than {OPENAI_LARGE_ENUM} values of "
            f"{chars:,} characters together, more than the {OPENAI_MAX_LARGE_ENUM_CHARS:,} "
            "OpenAI's structured outputs take"
        )
    return None


def anthropic_problem(wire: Mapping[str, Any]) -> str | None:
    """Why Anthropic's structured outputs would refuse ``wire`` (None: they would not)."""
    cycle = _Nesting(wire).cycle()
    if cycle is not None:
        return f"it is recursive ({cycle} refers to itself), which Anthropic does not support"
    found = _anthropic_keyword(wire, "", 0)
    if found is not None:
        return found
    size = _Size()
    size.walk(wire, "", 0)
    if size.unions > ANTHROPIC_MAX_UNION_PROPERTIES:
        return (
            f"{size.unions} of its properties are unions (anyOf or a list of types: a nullable "
            f"property is one), more than the {ANTHROPIC_MAX_UNION_PROPERTIES} Anthropic takes"
        )
    if size.optional > ANTHROPIC_MAX_OPTIONAL_PROPERTIES:
        return (
            f"{size.optional} of its properties are optional, more than the "
            f"{ANTHROPIC_MAX_OPTIONAL_PROPERTIES} Anthropic takes"
        )
    return None


class _Size:
    """Counts over the whole schema document (each ``$defs`` entry once)."""

    def __init__(self) -> None:
        self.properties = 0
        self.enum_values = 0
        self.names = 0
        self.unions = 0
        self.optional = 0
        self.large_enum: tuple[str, int] | None = None

    def walk(self, node: Any, pointer: str, depth: int) -> None:
        if depth > _DEEPEST:
            return
        if isinstance(node, list):
            for index, item in enumerate(node):
                self.walk(item, f"{pointer}/{index}", depth + 1)
            return
        if not isinstance(node, Mapping):
            return
        if _names_at(pointer):  # property or definition names, each with its schema
            for name, sub in node.items():
                self.walk(sub, f"{pointer}/{name}", depth + 1)
            return
        properties = node.get("properties")
        if isinstance(properties, Mapping):
            required = set(node.get("required", ()))
            self.properties += len(properties)
            for name, sub in properties.items():
                self.names += len(str(name))
                if name not in required:
                    self.optional += 1
                if isinstance(sub, Mapping) and (
                    "anyOf" in sub or isinstance(sub.get("type"), list)
                ):
                    self.unions += 1
        for defs in ("$defs", "definitions"):
            table = node.get(defs)
            if isinstance(table, Mapping):
                self.names += sum(len(str(name)) for name in table)
        enum = node.get("enum")
        if isinstance(enum, list):
            self.enum_values += len(enum)
            chars = sum(len(v) if isinstance(v, str) else len(str(v)) for v in enum)
            self.names += chars
            strings = [v for v in enum if isinstance(v, str)]
            if (
                len(strings) > OPENAI_LARGE_ENUM
                and sum(map(len, strings)) > OPENAI_MAX_LARGE_ENUM_CHARS
                and self.large_enum is None
            ):
                self.large_enum = (pointer, sum(map(len, strings)))
        if "const" in node:
            const = node["const"]
            self.names += len(const) if isinstance(const, str) else len(str(const))
        for key, sub in node.items():
            if key in ("enum", "const"):
                continue
            if isinstance(sub, (Mapping, list)):
                self.walk(sub, f"{pointer}/{key}", depth + 1)


class _Nesting:
    """How deeply objects nest, following same-document references (a reference back to a
    schema being walked is recursion: it adds no depth, and :meth:`cycle` names it)."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self._depths: dict[str, int] = {}
        self._cycle: str | None = None

    def cycle(self) -> str | None:
        self.depth(self.root, 0, ("#",))
        return self._cycle

    def depth(self, node: Any, level: int, path: tuple[str, ...] = ("#",)) -> int:
        """The deepest object level in ``node`` (the root object is level 1)."""
        if level > _DEEPEST or not isinstance(node, (Mapping, list)):
            return 0
        if isinstance(node, list):
            return max((self.depth(item, level + 1, path) for item in node), default=0)
        ref = node.get("$ref")
        here = 0
        if isinstance(ref, str) and ref.startswith("#"):
            if ref in path:
                self._cycle = self._cycle or ref
            elif ref in self._depths:
                here = self._depths[ref]
            else:
                target = _resolve(self.root, ref)
                if target is not None:
                    here = self.depth(target, level + 1, (*path, ref))
                    self._depths[ref] = here
        is_object = node.get("type") == "object" or "properties" in node
        inner = 0
        for key, sub in node.items():
            if key in ("$defs", "definitions", "enum", "const"):
                continue  # definitions count where they are used
            if isinstance(sub, (Mapping, list)):
                inner = max(inner, self.depth(sub, level + 1, path))
        return max(here, inner + (1 if is_object else 0))


def _names_at(pointer: str) -> bool:
    """Whether the mapping at ``pointer`` is keyed by names (properties, definitions), not
    by keywords."""
    return pointer.endswith(("/properties", "/$defs", "/definitions"))


def _resolve(root: Mapping[str, Any], ref: str) -> Any:
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None
    target: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(target, Mapping) or part not in target:
            return None
        target = target[part]
    return target


def _anthropic_keyword(node: Any, pointer: str, depth: int) -> str | None:
    if depth > _DEEPEST:
        return None
    if isinstance(node, list):
        for index, item in enumerate(node):
            found = _anthropic_keyword(item, f"{pointer}/{index}", depth + 1)
            if found is not None:
                return found
        return None
    if not isinstance(node, Mapping):
        return None
    where = pointer or "/"
    in_properties = _names_at(pointer)  # keys here are property (or definition) names
    if not in_properties:
        for key in ANTHROPIC_UNSUPPORTED:
            if key in node:
                return f"{key!r} is not supported by Anthropic's structured outputs at {where}"
        least = node.get("minItems")
        if least is not None and least not in (0, 1):
            return (
                f"'minItems' other than 0 or 1 is not supported by Anthropic's structured "
                f"outputs at {where}"
            )
        shape = node.get("format")
        if isinstance(shape, str) and shape not in ANTHROPIC_FORMATS:
            return (
                f"the format {shape!r} is not one Anthropic's structured outputs support at {where}"
            )
        enum = node.get("enum")
        if isinstance(enum, list) and any(isinstance(v, (dict, list)) for v in enum):
            return (
                f"an enum of objects or arrays is not supported by Anthropic's structured "
                f"outputs at {where}"
            )
    for key, sub in node.items():
        if not in_properties and key in ("enum", "const"):
            continue
        if isinstance(sub, (Mapping, list)):
            found = _anthropic_keyword(sub, f"{pointer}/{key}", depth + 1)
            if found is not None:
                return found
    return None
