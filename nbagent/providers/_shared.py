"""Small helpers both adapters use: request building, and rules for reading streams."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from ..errors import ToolDefinitionError
from ..tools import Definition

__all__ = [
    "CHAT_REASONING_MARK",
    "DAMAGED_ARGUMENTS",
    "INCOMPLETE_ARGUMENTS",
    "RESPONSES_REASONING_MARK",
    "b64",
    "damaged",
    "description_with_examples",
    "input_object",
    "provider_tool_spec",
    "retryable_error",
    "text_of",
]

#: Put before the arguments of a call whose bytes were not valid UTF-8 on the wire. The text is
#: then not JSON, so the loop never runs the call: it answers with an "invalid arguments" error
#: the model reads, while the call's clean siblings run. Running it with U+FFFD in place of the
#: bytes the model meant would silently change what it asked for.
DAMAGED_ARGUMENTS = (
    "(not run: the provider sent these arguments with invalid UTF-8 bytes, shown as U+FFFD) "
)
#: Put before the arguments of a call the provider itself marked incomplete: not JSON, so the
#: loop never runs what may be only the start of the arguments, and the model reads why.
INCOMPLETE_ARGUMENTS = "(not run: the provider marked this call incomplete) "

#: Starts the ``signature`` of a reasoning part that carries an OpenAI Responses reasoning item
#: (see :mod:`nbagent.providers.responses`): no other API may take it for a signature of its own.
RESPONSES_REASONING_MARK = "openai-responses:"

#: Starts the ``signature`` of a reasoning part that carries the ``reasoning_details`` of a Chat
#: Completions server (OpenRouter), with the host they came from (see
#: :mod:`nbagent.providers.openai`): they go back to that host only, and to no other API.
CHAT_REASONING_MARK = "chat-reasoning-details:"

#: Marks of reasoning parts that are not a thinking signature of their own.
FOREIGN_REASONING_MARKS = (RESPONSES_REASONING_MARK, CHAT_REASONING_MARK)

#: Error types and codes of mid-stream error events that are transient (asking again may work).
_RETRYABLE_KINDS = frozenset(
    {
        "api_error",
        "internal_error",
        "internal_server_error",
        "overloaded",
        "overloaded_error",
        "rate_limit_error",
        "rate_limit_exceeded",
        "server_error",
        "service_unavailable",
        "timeout",
        "timeout_error",
    }
)


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


def damaged(fragment: str, lossy: bool) -> bool:
    """True when ``fragment`` came from an event with invalid UTF-8 and holds a replacement."""
    return lossy and "\ufffd" in fragment


def retryable_error(error: Any) -> bool:
    """Whether a mid-stream error object is transient: its type or code names an overload,
    rate limit, timeout or server error, or a numeric code/status is 408, 409, 429 or 5xx."""
    if not isinstance(error, Mapping):
        return False
    for field in ("type", "code", "status"):
        value = error.get(field)
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value.strip())
        if isinstance(value, int) and not isinstance(value, bool):
            if value in (408, 409, 429) or 500 <= value <= 599:
                return True
        elif isinstance(value, str) and value.lower() in _RETRYABLE_KINDS:
            return True
    return False


def text_of(value: Any, what: str) -> str:
    """``value`` if it is a string (None counts as ""); anything else is a shape error."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    raise TypeError(f"{what} should be a string, not {type(value).__name__}")
