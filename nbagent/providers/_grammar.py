"""What llama.cpp's grammar is given for a tool's schema, and what it does not enforce.

llama.cpp turns a JSON Schema into a grammar that constrains every token the model writes. Its
converter handles a part of JSON Schema, and some schemas break it: a contradiction such as
``minLength`` 5 with ``maxLength`` 2 makes its grammar parser allocate memory without end, a
repetition count over 2,000 is refused (and the grammar is printed on stderr), and a ``pattern``
it cannot read is written to the process's stderr as a warning, which in a notebook is the
cell's. So, before any request:

* :func:`check_satisfiable` refuses a schema with a subschema no value can satisfy
  (:func:`nbagent.schema._satisfiable.unsatisfiable`), naming the tool and the JSON pointer;
* :func:`grammar_schema` is the schema llama.cpp gets: without ``pattern`` (nbagent checks it
  on every call; llama.cpp would enforce only some patterns, and warn about the others), and
  without a length or item count over :data:`MAX_REPETITION` or an integer bound beyond 64 bits;
  with the keywords the grammar does not enforce listed, to tell the person once.

Nothing here loosens what a call must satisfy: every call is still validated against the
tool's own schema before it runs, so what the grammar does not enforce, validation does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ToolDefinitionError
from ..schema import normalize_schema
from ..schema._satisfiable import unsatisfiable

__all__ = ["MAX_REPETITION", "check_satisfiable", "grammar_schema", "unenforced"]

#: llama.cpp refuses a grammar repetition over this (its parser's own limit).
MAX_REPETITION = 2000
_INT64 = (-(2**63), 2**63 - 1)
_COUNTS = ("minLength", "maxLength", "minItems", "maxItems")
_INT_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")

#: Keywords llama.cpp's grammar ignores (read from its converter, json-schema-to-grammar.cpp).
_IGNORED = (
    "multipleOf",
    "uniqueItems",
    "contains",
    "minContains",
    "maxContains",
    "minProperties",
    "maxProperties",
    "patternProperties",
    "propertyNames",
    "dependentRequired",
    "dependentSchemas",
    "not",
    "if",
    "then",
    "else",
    "unevaluatedItems",
    "unevaluatedProperties",
)
_ONE = ("additionalProperties", "items", "not", "if", "then", "else", "contains", "propertyNames")
_MANY = ("allOf", "anyOf", "oneOf", "prefixItems")
_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


def _escape(name: str) -> str:
    return str(name).replace("~", "~0").replace("/", "~1")


def check_satisfiable(tool: str, schema: Mapping[str, Any] | None) -> None:
    """Refuse, naming the pointer, a schema with a part no value can satisfy (see module)."""
    found = unsatisfiable(normalize_schema(schema))
    if found:
        # the deepest is where the contradiction is; the parts above fail because of it
        pointer, reason = max(found, key=lambda problem: problem[0].count("/"))
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise ToolDefinitionError(
            f"tool {tool!r} cannot be called: no value satisfies its schema at "
            f"{pointer or '/'} ({reason}){more}; fix the schema (llama.cpp's grammar cannot be "
            "built from it)"
        )


def _is_integer(node: Mapping[str, Any]) -> bool:
    return node.get("type") == "integer"


def _is_number(node: Mapping[str, Any]) -> bool:
    kind = node.get("type")
    return kind == "number" or (isinstance(kind, list) and "number" in kind)


class _Rewrite:
    def __init__(self) -> None:
        self.notes: list[tuple[str, str]] = []  # (pointer, keyword) the grammar leaves to us

    def node(self, node: Any, pointer: str, depth: int = 0) -> Any:
        if not isinstance(node, dict) or depth > 128:
            return node
        out: dict[str, Any] = {}
        for key, value in node.items():
            where = f"{pointer}/{key}"
            if key == "pattern":
                self.notes.append((where, key))
                continue
            if key in _COUNTS and isinstance(value, (int, float)) and value > MAX_REPETITION:
                self.notes.append((where, f"{key} over {MAX_REPETITION:,}"))
                continue
            if key in _INT_BOUNDS and _is_integer(node):
                if not isinstance(value, int) or not _INT64[0] <= value <= _INT64[1]:
                    self.notes.append((where, f"{key} {value!r}"))
                    continue
            elif key in _INT_BOUNDS and _is_number(node):
                self.notes.append((where, key))  # enforced for integers only
            if key in _IGNORED:
                self.notes.append((where, key))
            if key in _ONE:
                out[key] = self.node(value, where, depth + 1)
            elif key in _MANY and isinstance(value, list):
                out[key] = [self.node(v, f"{where}/{i}", depth + 1) for i, v in enumerate(value)]
            elif key in _MAP and isinstance(value, dict):
                out[key] = {
                    name: self.node(v, f"{where}/{_escape(name)}", depth + 1)
                    for name, v in value.items()
                }
            else:
                out[key] = value
        if "oneOf" in node:
            self.notes.append((f"{pointer}/oneOf", "oneOf (only one branch)"))
        if "allOf" in node:
            self.notes.append((f"{pointer}/allOf", "allOf (beyond properties and enums)"))
        return out


def grammar_schema(schema: Any) -> tuple[Any, list[tuple[str, str]]]:
    """``schema`` as llama.cpp's grammar gets it, and ``(pointer, keyword)`` for what the
    grammar does not enforce (see the module docs). The input is not changed."""
    rewrite = _Rewrite()
    return rewrite.node(schema, ""), rewrite.notes


def unenforced(schema: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """What llama.cpp's grammar does not enforce of a tool's ``schema``: ``(pointer, keyword)``."""
    return grammar_schema(normalize_schema(schema))[1]
