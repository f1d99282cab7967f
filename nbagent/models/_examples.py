"""Build arguments that fit a JSON Schema, preferring values the person quoted in the prompt."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PromptValues", "example_for"]

_QUOTED = re.compile(r"\"([^\"]+)\"|'([^']+)'|“([^”]+)”|`([^`]+)`")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?!\w)(?!\.\d)")


@dataclass
class PromptValues:
    """Values found in a prompt, handed out in order to the fields that need them."""

    text: str
    strings: list[str] = field(default_factory=list)
    numbers: list[float] = field(default_factory=list)

    @classmethod
    def parse(cls, text: str) -> PromptValues:
        strings = [next(g for g in m.groups() if g is not None) for m in _QUOTED.finditer(text)]
        unquoted = _QUOTED.sub(" ", text)
        numbers = [float(n) for n in _NUMBER.findall(unquoted)]
        return cls(text, strings, numbers)

    def take_string(self) -> str | None:
        return self.strings.pop(0) if self.strings else None

    def take_number(self) -> float | None:
        return self.numbers.pop(0) if self.numbers else None


def _resolve(schema: Any, root: Mapping[str, Any], depth: int) -> Any:
    ref = schema.get("$ref") if isinstance(schema, Mapping) else None
    if isinstance(ref, str) and ref.startswith("#/") and depth < 8:
        target: Any = root
        for token in ref[2:].split("/"):
            token = token.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, Mapping) or token not in target:
                return {}
            target = target[token]
        return _resolve(target, root, depth + 1)
    return schema


def example_for(
    schema: Any,
    values: PromptValues,
    root: Mapping[str, Any] | None = None,
    depth: int = 0,
    name: str = "",
) -> Any:
    """A value valid for ``schema`` (as far as a simple walk can tell), using prompt values."""
    if root is None:
        root = schema if isinstance(schema, Mapping) else {}
    schema = _resolve(schema, root, depth)
    if schema is True or not isinstance(schema, Mapping) or depth > 12:
        return values.take_string() or "example"
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        options = list(schema["enum"])
        lowered = values.text.lower()
        for option in options:
            if isinstance(option, str) and option.lower() in lowered:
                return option
        return options[0]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            arms = [_resolve(a, root, depth) for a in schema[key]]
            non_null = [a for a in arms if not (isinstance(a, Mapping) and a.get("type") == "null")]
            return example_for((non_null or arms)[0], values, root, depth + 1, name)
    if schema.get("allOf"):
        merged: dict[str, Any] = {}
        for arm in schema["allOf"]:
            arm = _resolve(arm, root, depth)
            if isinstance(arm, Mapping):
                merged.update(arm)
        return example_for(merged, values, root, depth + 1, name)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "string"
    if kind == "object":
        out: dict[str, Any] = {}
        properties = schema.get("properties", {})
        required = set(schema.get("required", ()))
        for key, sub in properties.items():
            if key in required or _mentions(values.text, key):
                out[key] = example_for(sub, values, root, depth + 1, key)
        return out
    if kind == "array":
        prefix = schema.get("prefixItems")
        if prefix:
            return [example_for(s, values, root, depth + 1, name) for s in prefix]
        count = max(1, int(schema.get("minItems", 1)))
        items = schema.get("items", {})
        return [example_for(items, values, root, depth + 1, name) for _ in range(count)]
    if kind in ("integer", "number"):
        found = values.take_number()
        low = schema.get("minimum", schema.get("exclusiveMinimum"))
        high = schema.get("maximum", schema.get("exclusiveMaximum"))
        value = found if found is not None else (low if low is not None else 1)
        if low is not None and value < low:
            value = low + (1 if "exclusiveMinimum" in schema else 0)
        if high is not None and value > high:
            value = high - (1 if "exclusiveMaximum" in schema else 0)
        return int(value) if kind == "integer" else float(value)
    if kind == "boolean":
        return bool(re.search(rf"\b{re.escape(name)}\b", values.text, re.I)) if name else True
    if kind == "null":
        return None
    text = values.take_string() or _guess_string(name, values.text)
    min_length = int(schema.get("minLength", 0))
    max_length = schema.get("maxLength")
    if len(text) < min_length:
        text = text.ljust(min_length, "x")
    if max_length is not None:
        text = text[: int(max_length)]
    return text


def _mentions(text: str, key: str) -> bool:
    return bool(re.search(rf"\b{re.escape(key)}\b", text, re.I))


def _guess_string(name: str, prompt: str) -> str:
    """Without a quoted value, take the word after the field's name, or the prompt's last word."""
    if name:
        match = re.search(rf"\b{re.escape(name)}\b\s*(?:=|:|is)?\s*([\w.@/-]+)", prompt, re.I)
        if match:
            return match.group(1)
    words = re.findall(r"[A-Za-z][\w-]*", prompt)
    return words[-1] if words else "example"
