"""Short, stable digests of JSON data and of tool definitions.

A recording names the requests it answered by these digests, and a batch checkpoint names the
configuration its answers came from: both must give the same digest for the same data in every
process, and both ask the same question of a tool (would a model see it differently?).
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .tools import Definition

__all__ = ["definition_digest", "digest"]


def digest(value: Any) -> str:
    """16 hex digits of SHA-256 over ``value`` as canonical JSON (sorted keys; a value JSON
    cannot hold is written as its ``str``; lone surrogates kept, so no text is refused)."""
    data = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def definition_digest(definition: Definition) -> str:
    """The digest of what a model is told of a tool: description, normalised schema, title,
    strictness, examples, and whether the provider runs it."""
    from .schema import normalize_schema

    return digest(
        {
            "description": definition.description,
            "schema": normalize_schema(definition.input_schema),
            "title": definition.title,
            "strict": definition.strict,
            "examples": [dict(e) for e in definition.input_examples],
            "provider_executed": bool(getattr(definition, "provider_executed", False)),
        }
    )
