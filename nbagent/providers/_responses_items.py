"""What a Responses output item holds, and what it carries into the next request.

A reasoning item travels in a :class:`~nbagent.messages.ReasoningPart`'s ``signature``, in a
format this module owns: :func:`reasoning_signature` writes it, :func:`read_reasoning_signature`
reads it back (and refuses anything else). The fields of message and function_call items that
nbagent does not model go back as they came (:func:`item_fields`, :func:`carried_fields`). The
readers of a finished item's text serve the stream's parser (:mod:`._responses_stream`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ._shared import RESPONSES_REASONING_MARK, text_of

__all__ = [
    "ITEM_KEY",
    "carried_fields",
    "executed_name",
    "item_fields",
    "message_text",
    "read_reasoning_signature",
    "reasoning_signature",
    "reasoning_text",
]


# --- the reasoning item, carried in a ReasoningPart's signature ------------------------------


def reasoning_signature(model: str, item: Mapping[str, Any] | None, follower: Any) -> str:
    """The ``signature`` of a reasoning part: the item as received, who made it, what followed.

    ``follower`` describes the output item right after the reasoning item (``type``, ``id``,
    and ``call_id`` for a function call), or is None when nothing followed it: the API only
    accepts a reasoning item back together with that item.
    """
    payload = {"model": model, "item": item, "next": follower}
    return RESPONSES_REASONING_MARK + json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def read_reasoning_signature(signature: str | None) -> dict[str, Any] | None:
    """The payload of a signature written by :func:`reasoning_signature`, or None.

    None for signatures of other providers, and for anything damaged or hand-edited: such
    reasoning is simply not sent back.
    """
    if not signature or not signature.startswith(RESPONSES_REASONING_MARK):
        return None
    try:
        payload = json.loads(signature[len(RESPONSES_REASONING_MARK) :])
    except (ValueError, RecursionError):
        return None
    if not isinstance(payload, dict) or not isinstance(payload.get("model"), str):
        return None
    item, follower = payload.get("item"), payload.get("next")
    if not isinstance(item, dict) or not isinstance(item.get("id"), str):
        return None
    if not isinstance(follower, dict) or not isinstance(follower.get("type"), str):
        return None
    return payload


# --- what an item must carry back ------------------------------------------------------------

#: The key under which an item's own fields travel in a part's ``raw``.
ITEM_KEY = "responses_item"
#: Fields nbagent models itself (the text, the call), or decides when to send (``id``, which
#: pairs an item with the reasoning before it; ``status``): every other field of a message or
#: function_call item goes back as it came (``phase``, ``namespace``, ``caller`` …), so the API
#: accepts the item again and a field it adds later survives too.
_OWN_FIELDS = {
    "message": frozenset({"type", "id", "role", "status", "content"}),
    "function_call": frozenset({"type", "id", "call_id", "name", "arguments", "status"}),
}


def item_fields(item: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """The fields of an output ``item`` of ``kind`` that must go back with it (see above)."""
    own = _OWN_FIELDS[kind]
    return {k: v for k, v in item.items() if isinstance(k, str) and k not in own and v is not None}


def carried_fields(raw: Any, kind: str) -> dict[str, Any]:
    """The fields of an item of ``kind`` that a part's ``raw`` carries (written by this parser),
    or none; never one nbagent sets itself, whatever a hand-edited history holds."""
    if isinstance(raw, Mapping):
        fields = raw.get(ITEM_KEY)
        if isinstance(fields, Mapping):
            return item_fields(fields, kind)
    return {}


# --- reading a finished item ----------------------------------------------------------------


def executed_name(item: Mapping[str, Any], kind: str) -> str:
    """The name of a tool the provider ran (``web_search_call`` → ``web_search``)."""
    name = item.get("name")
    return name if isinstance(name, str) and name else kind[: -len("_call")]


def message_text(item: Mapping[str, Any]) -> str:
    """The text of a finished message item: its output_text and refusal parts, in order."""
    parts = item.get("content") or ()
    if not isinstance(parts, list):
        raise TypeError(f"a message's content should be a list, not {type(parts).__name__}")
    pieces = []
    for part in parts:
        if isinstance(part, Mapping):
            kind = part.get("type")
            if kind == "output_text":
                pieces.append(text_of(part.get("text"), "an output_text part's text"))
            elif kind == "refusal":
                pieces.append(text_of(part.get("refusal"), "a refusal part's text"))
    return "".join(pieces)


def reasoning_text(item: Mapping[str, Any]) -> str:
    """The readable text of a reasoning item: its summary, then its content."""
    pieces = []
    for field in ("summary", "content"):
        parts = item.get(field) or ()
        if isinstance(parts, list):
            for part in parts:
                if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                    pieces.append(part["text"])
    return "\n\n".join(p for p in pieces if p)
