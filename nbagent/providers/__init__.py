"""Model providers: OpenAI Chat Completions (and compatible servers), OpenAI Responses,
Anthropic Messages, and ``local:`` models run in this process by llama.cpp.

Importing this package is cheap: the adapters (and httpx2) load on first use, through
:func:`resolve_generator` or by touching ``OpenAIChat`` / ``OpenAIResponses`` /
``AnthropicMessages`` / ``LocalChat`` here.

May import (docs/architecture.md): the ground, :mod:`nbagent.schema`, the vocabulary and
:mod:`nbagent.models`; the rest of nbagent reaches an adapter through this face only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._config import describe_config, model_id, model_string, resolve_generator

if TYPE_CHECKING:
    from ._preflight import (
        PROVIDERS,
        SchemaProblem,
        ToolSchemaWarning,
        configured_providers,
        preflight,
        provider_label,
    )
    from ._strict import strict_schema
    from .anthropic import AnthropicMessages
    from .local import LocalChat
    from .openai import OpenAIChat
    from .responses import OpenAIResponses

__all__ = [
    "PROVIDERS",
    "AnthropicMessages",
    "LocalChat",
    "OpenAIChat",
    "OpenAIResponses",
    "SchemaProblem",
    "ToolSchemaWarning",
    "configured_providers",
    "describe_config",
    "model_id",
    "model_string",
    "preflight",
    "provider_label",
    "resolve_generator",
    "strict_schema",
]

_LAZY = {
    "OpenAIChat": ".openai",
    "OpenAIResponses": ".responses",
    "AnthropicMessages": ".anthropic",
    "LocalChat": ".local",
    "strict_schema": "._strict",
    "SchemaProblem": "._preflight",
    "ToolSchemaWarning": "._preflight",
    "configured_providers": "._preflight",
    "preflight": "._preflight",
    "provider_label": "._preflight",
    "PROVIDERS": "._preflight",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module, __name__), name)
