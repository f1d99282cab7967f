"""Provider preflight: what each API would reject about a tool, said when the tool is defined.

nbagent's own schema policy (Draft 2020-12, an object at the root) is what every call is
validated against; each provider adds rules of its own that it enforces with a 400 on the
*first request*, which in a notebook is a confusing failure far from the cell that defined the
tool. These checks run when a tool is registered (and on ``%agent tools``), and name the rule,
the JSON pointer and the fix. Rules, by provider:

``openai`` (Chat Completions, and Ollama and other compatible servers, which take the same
tool format):

* an array schema needs ``items`` (the API answers "array schema missing items");
* with ``strict=True``: everything :func:`~nbagent.providers.strict_schema` cannot rewrite
  (keywords strict mode does not support, free-form objects and maps, values of any type …),
  each at its own JSON pointer, and strict mode's documented limits: at most 10 levels of
  object nesting, 5,000 object properties, 1,000 enum values.

``anthropic`` (Messages):

* no ``oneOf``, ``allOf`` or ``anyOf`` at the root of ``input_schema`` (the API answers
  "input_schema does not support oneOf, allOf, or anyOf at the top level");
* with ``strict=True``: every object needs ``additionalProperties: false``, and the keywords
  strict tool use does not support (numeric bounds, string lengths, array bounds beyond
  ``minItems`` 0 or 1) and recursive references are refused.

``local`` (a ``local:`` model, llama.cpp in this process):

* no part of the schema may be unsatisfiable (``minLength`` over ``maxLength``, ``minimum``
  over ``maximum``, an empty ``enum`` …; see :mod:`nbagent.schema._satisfiable`): llama.cpp cannot
  build a grammar from it, and the adapter refuses such a tool before any request.

Each problem is a :class:`SchemaProblem`; :data:`PROVIDERS` maps a provider key to its check, so
a new API adds one entry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import NbagentError
from ..schema import normalize_schema
from ..tools import Definition

__all__ = [
    "PROVIDERS",
    "SchemaProblem",
    "ToolSchemaWarning",
    "configured_providers",
    "preflight",
    "provider_label",
]


class ToolSchemaWarning(UserWarning):
    """A tool that a configured provider would reject at the first request."""


@dataclass(frozen=True)
class SchemaProblem:
    """One reason ``provider`` would reject ``tool``: ``pointer`` into the schema, and why."""

    provider: str
    tool: str
    pointer: str
    reason: str

    @property
    def message(self) -> str:
        where = f" at {self.pointer}" if self.pointer else ""
        return (
            f"{provider_label(self.provider)} would reject tool {self.tool!r}: {self.reason}{where}"
        )


_LABELS = {"openai": "OpenAI", "anthropic": "Anthropic", "local": "Local model"}


def provider_label(key: str) -> str:
    """How a provider key reads: "OpenAI", "Anthropic"."""
    return _LABELS.get(key, key)


def _escape(name: str) -> str:
    return str(name).replace("~", "~0").replace("/", "~1")


def _walk(
    node: Any, pointer: str = "", depth: int = 0
) -> Iterator[tuple[str, dict[str, Any], int]]:
    """Every subschema with its pointer and its object-nesting depth (bounded walk)."""
    if not isinstance(node, dict) or depth > 64:
        return
    yield pointer, node, depth
    nested = depth + (1 if node.get("type") == "object" or "properties" in node else 0)
    for key in ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas"):
        children = node.get(key)
        if isinstance(children, Mapping):
            for name, child in children.items():
                yield from _walk(child, f"{pointer}/{key}/{_escape(name)}", nested)
    for key in (
        "items",
        "additionalProperties",
        "not",
        "if",
        "then",
        "else",
        "contains",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
    ):
        child = node.get(key)
        if isinstance(child, dict):
            yield from _walk(child, f"{pointer}/{key}", nested)
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        children = node.get(key)
        if isinstance(children, list):
            for index, child in enumerate(children):
                yield from _walk(child, f"{pointer}/{key}/{index}", nested)


def _is_array(node: Mapping[str, Any]) -> bool:
    kind = node.get("type")
    return kind == "array" or (isinstance(kind, list) and "array" in kind)


def _openai(definition: Definition) -> list[tuple[str, str]]:
    schema = normalize_schema(definition.input_schema)
    found: list[tuple[str, str]] = []
    for pointer, node, _ in _walk(schema):
        if _is_array(node) and "items" not in node and "prefixItems" not in node:
            found.append((pointer, "an array schema needs `items` (say what the array holds)"))
    if definition.strict:
        from ._strict import strict_problems, strict_schema

        problems = strict_problems(schema)
        if problems:
            found += problems
        else:
            found += _strict_limits(strict_schema(schema, tool=definition.name))
    return found


#: OpenAI strict mode's documented limits.
_MAX_NESTING, _MAX_PROPERTIES, _MAX_ENUM = 10, 5_000, 1_000


def _strict_limits(schema: dict[str, Any]) -> list[tuple[str, str]]:
    deepest = properties = enums = 0
    for _, node, depth in _walk(schema):
        deepest = max(deepest, depth + (1 if "properties" in node else 0))
        if isinstance(node.get("properties"), Mapping):
            properties += len(node["properties"])
        if isinstance(node.get("enum"), list):
            enums += len(node["enum"])
    found = []
    if deepest > _MAX_NESTING:
        found.append(("", f"strict mode allows {_MAX_NESTING} levels of nesting, it has {deepest}"))
    if properties > _MAX_PROPERTIES:
        found.append(
            ("", f"strict mode allows {_MAX_PROPERTIES:,} properties, it has {properties:,}")
        )
    if enums > _MAX_ENUM:
        found.append(("", f"strict mode allows {_MAX_ENUM:,} enum values, it has {enums:,}"))
    return found


#: Keywords Anthropic's strict tool use does not support.
_ANTHROPIC_STRICT_UNSUPPORTED = (
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
)


def _anthropic(definition: Definition) -> list[tuple[str, str]]:
    schema = normalize_schema(definition.input_schema)
    found: list[tuple[str, str]] = []
    for key in ("oneOf", "allOf", "anyOf"):
        if key in schema:
            found.append(
                (
                    f"/{key}",
                    f"`{key}` is not allowed at the root of input_schema (move it into a property)",
                )
            )
    if not definition.strict:
        return found
    for pointer, node, _ in _walk(schema):
        is_object = node.get("type") == "object" or "properties" in node
        if is_object and node.get("additionalProperties", True) is not False:
            found.append(
                (pointer, "strict tool use needs `additionalProperties: false` on every object")
            )
        for key in _ANTHROPIC_STRICT_UNSUPPORTED:
            if key in node:
                found.append((f"{pointer}/{key}", f"strict tool use does not support `{key}`"))
        if node.get("minItems", 0) not in (0, 1):
            found.append((f"{pointer}/minItems", "strict tool use supports minItems 0 or 1 only"))
    if _recursive(schema):
        found.append(("", "strict tool use does not support recursive schemas"))
    return found


def _recursive(schema: dict[str, Any]) -> bool:
    """True when following ``$ref`` can lead back to where it started (a recursive schema)."""
    refs = [
        (pointer, node["$ref"][1:])
        for pointer, node, _ in _walk(schema)
        if isinstance(node.get("$ref"), str) and node["$ref"].startswith("#")
    ]

    def inside(pointer: str, target: str) -> bool:
        return target == "" or pointer == target or pointer.startswith(target + "/")

    graph = {target: {t for p, t in refs if inside(p, target)} for _, target in refs}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def cycle(node: str) -> bool:
        state[node] = 1
        for nxt in graph.get(node, ()):
            if state.get(nxt) == 1 or (state.get(nxt) is None and cycle(nxt)):
                return True
        state[node] = 2
        return False

    return any(state.get(target) is None and cycle(target) for target in graph)


def _local(definition: Definition) -> list[tuple[str, str]]:
    """llama.cpp turns any schema into a grammar, but cannot build one no value satisfies."""
    from ..schema._satisfiable import unsatisfiable

    return [
        (pointer, f"no value satisfies this part of the schema ({reason})")
        for pointer, reason in unsatisfiable(normalize_schema(definition.input_schema))
    ]


#: Provider key → its check. A check returns ``(pointer, reason)`` pairs.
PROVIDERS: dict[str, Callable[[Definition], list[tuple[str, str]]]] = {
    "openai": _openai,
    "anthropic": _anthropic,
    "local": _local,
}
_ALIASES = {
    "ollama": "openai",
    "openai-compatible": "openai",
    "openai-chat": "openai",
    "openai-responses": "openai",
}


def preflight(tool: Definition, provider: str) -> list[SchemaProblem]:
    """What ``provider`` ("openai", "anthropic"; "ollama" and "openai-compatible" follow
    OpenAI's rules) would reject about ``tool``; an empty list when nothing. A provider-run
    tool (``provider_executed``) is the provider's own and is not checked."""
    key = _ALIASES.get(provider, provider)
    check = PROVIDERS.get(key)
    if check is None or tool.provider_executed:
        return []
    try:
        found = check(tool)
    except NbagentError as exc:
        found = [("", str(exc))]
    except (TypeError, ValueError, RecursionError) as exc:
        found = [("", f"its schema could not be checked: {exc}")]
    seen: set[tuple[str, str]] = set()
    problems = []
    for pointer, reason in found:
        if (pointer, reason) not in seen:
            seen.add((pointer, reason))
            problems.append(SchemaProblem(key, tool.name, pointer, reason))
    return problems


def configured_providers(model: Any = None, environ: Mapping[str, str] | None = None) -> list[str]:
    """The providers a notebook is set up for: the model's (a model string, a Generator with
    ``tool_rules``, or ``NBAGENT_MODEL``), and every vendor whose key variable is set."""
    import os

    from ._config import describe_config

    env = os.environ if environ is None else environ
    found: list[str] = []
    rules = getattr(model, "tool_rules", None)
    if isinstance(rules, str):
        found.append(_ALIASES.get(rules, rules))
    elif model is None or isinstance(model, str):
        provider = describe_config(model, environ=env).get("provider")
        if isinstance(provider, str):
            found.append(_ALIASES.get(provider, provider))
    for key, variable in (("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY")):
        if env.get(variable, "").strip():
            found.append(key)
    return [key for index, key in enumerate(found) if key in PROVIDERS and key not in found[:index]]
