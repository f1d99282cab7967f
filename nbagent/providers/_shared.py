"""Small helpers both adapters use to build requests."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from ..errors import ToolDefinitionError
from ..tools import Definition

__all__ = [
    "b64",
    "description_with_examples",
    "input_object",
    "provider_tool_spec",
]


def description_with_examples(definition: Definition) -> str:
    """The description, plus the input examples folded in for APIs without a field for them."""
    if not definition.input_examples:
        return definition.description
    lines = "\n".join(json.dumps(dict(e), ensure_ascii=False) for e in definition.input_examples)
    if definition.description:
        return f"{definition.description}\n\nExamples:\n{lines}"
    return f"Examples:\n{lines}"


def provider_tool_spec(definition: Definition) -> dict[str, Any]:
    """The provider's own tool spec of a provider-executed tool, sent verbatim."""
    spec = definition.provider_options.get("tool")
    if not isinstance(spec, Mapping):
        raise ToolDefinitionError(
            f"tool {definition.name!r} is provider-executed, so it needs provider_options"
            "['tool'] holding the provider's own tool spec (for example "
            '{"type": "web_search_20250305", "name": "web_search"})'
        )
    return dict(spec)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def input_object(arguments: str) -> dict[str, Any]:
    """A call's arguments as the JSON object an API wants back in the history.

    Arguments that are not a JSON object (the model sent something broken, and the loop
    answered with an error result) become ``{}``: the API requires an object here.
    """
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
