"""Pydantic models inside other types: ``list[Model]``, ``Model | None``, a dataclass field …

A pydantic model is compiled by pydantic itself (``model_json_schema``): its schema becomes a
named type of the surrounding schema, and the models it uses become ``$defs`` of that schema,
renamed where a name is taken. Its decoder is the model's own validation, in JSON mode, of the
value the schema already passed (so a ``datetime`` field parses from its string, as it would at
the top level). pydantic is never imported for this: a class is a model when pydantic is loaded
and the class derives from its ``BaseModel``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from ._decoders import _Decoder, _Mismatch

__all__ = ["is_pydantic_model", "pydantic_schema"]

_DEFS = "#/$defs/"


def is_pydantic_model(tp: Any) -> bool:
    """Whether ``tp`` is a pydantic model class (without importing pydantic)."""
    pydantic = sys.modules.get("pydantic")
    base = getattr(pydantic, "BaseModel", None)
    return isinstance(tp, type) and base is not None and issubclass(tp, base)


def pydantic_schema(
    tp: type, name_for: Callable[[str], str]
) -> tuple[dict[str, Any], dict[str, Any], _Decoder]:
    """The model's schema (without ``$defs``), the ``$defs`` it uses (renamed by ``name_for``,
    which gives a name not yet taken), and its decoder. Raises ValueError when pydantic cannot
    make its schema."""
    try:
        made = dict(tp.model_json_schema())  # type: ignore[attr-defined]
    except Exception as exc:  # the model's own schema generation failed
        raise ValueError(f"pydantic could not make its JSON Schema: {exc}") from None
    inner = made.pop("$defs", {})
    names = {old: name_for(old) for old in inner}
    renamed = {names[old]: _renamed(schema, names) for old, schema in inner.items()}
    return _renamed(made, names), renamed, _decoder(tp)


def _renamed(schema: Any, names: dict[str, str]) -> Any:
    if isinstance(schema, dict):
        out = {}
        for key, value in schema.items():
            if key == "$ref" and isinstance(value, str) and value.startswith(_DEFS):
                old = value[len(_DEFS) :]
                value = _DEFS + names.get(old, old)
            out[key] = _renamed(value, names)
        return out
    if isinstance(schema, list):
        return [_renamed(item, names) for item in schema]
    return schema


def _decoder(tp: type) -> _Decoder:
    label = tp.__name__

    def decode(value: Any) -> Any:
        try:
            return tp.model_validate_json(json.dumps(value))  # type: ignore[attr-defined]
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise _first_error(label, exc) from None

    return decode


def _first_error(label: str, exc: ValueError) -> _Mismatch:
    """pydantic's first complaint, its location as the mismatch's path."""
    errors = getattr(exc, "errors", None)
    try:
        first = errors()[0] if callable(errors) else None
    except Exception:
        first = None
    if not isinstance(first, dict):
        return _Mismatch(f"{label} rejected the values: {str(exc)[:300]}")
    mismatch = _Mismatch(f"{label} rejected the values: {str(first.get('msg', ''))[:300]}")
    mismatch.path = [str(part) for part in reversed(first.get("loc", ()))]
    return mismatch
