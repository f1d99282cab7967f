"""Conversation messages, and their JSON form for saving and reloading a conversation.

A conversation is a list of :data:`Message`: user turns, assistant turns (text, reasoning and tool
calls in the order the model produced them), and tool turns (one result per call of the batch).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

from .content import ImagePart, Part, TextPart
from .tools import ToolCall

__all__ = [
    "AssistantMessage",
    "Message",
    "ProviderToolResult",
    "ReasoningPart",
    "ToolMessage",
    "ToolResultPart",
    "UserMessage",
    "message_from_dict",
    "message_to_dict",
    "messages_from_json",
    "messages_to_json",
    "user",
]


@dataclass(frozen=True, slots=True)
class ReasoningPart:
    """Model reasoning ("thinking"); ``signature``/``redacted`` are kept to send back verbatim."""

    text: str
    signature: str | None = None
    redacted: str | None = None


@dataclass(frozen=True, slots=True)
class ProviderToolResult:
    """The result of a provider-executed tool (e.g. web search), kept as the provider sent it.

    ``raw`` is the provider's whole block (JSON), sent back verbatim in the history so that
    fields nbagent does not model (block type, server names …) survive the round trip.
    """

    call_id: str
    name: str
    content: Any
    is_error: bool = False
    raw: Any = field(default=None, compare=False)


AssistantPart = Union[TextPart, ReasoningPart, ToolCall, ProviderToolResult]


@dataclass(frozen=True, slots=True)
class UserMessage:
    """What the person said: text and images."""

    content: tuple[Part, ...]

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.content if isinstance(p, TextPart))


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """One model turn, parts in the order they were produced."""

    content: tuple[AssistantPart, ...]

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.content if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """Calls the loop must answer (provider-executed ones are answered by the provider)."""
        return tuple(p for p in self.content if isinstance(p, ToolCall) and not p.provider_executed)


@dataclass(frozen=True, slots=True)
class ToolResultPart:
    """The answer to one tool call, as the model will read it. ``edited``: a person rewrote or
    removed it at a step-mode pause before the model read it
    (:mod:`nbagent.inspection.stepping`)."""

    call_id: str
    name: str
    content: tuple[Part, ...]
    is_error: bool = False
    edited: bool = False

    @property
    def text(self) -> str:
        return "\n".join(p.text for p in self.content if isinstance(p, TextPart))


@dataclass(frozen=True, slots=True)
class ToolMessage:
    """The results of one batch of calls, in call order: one per call of the previous turn."""

    results: tuple[ToolResultPart, ...] = field(default=())


Message = Union[UserMessage, AssistantMessage, ToolMessage]


def user(*content: str | Part) -> UserMessage:
    """A user message from strings and parts: ``user("What is in this?", image_part(png))``."""
    return UserMessage(tuple(TextPart(c) if isinstance(c, str) else c for c in content))


def _part_to_dict(part: Any) -> dict[str, Any]:
    if isinstance(part, TextPart):
        if part.raw is not None:
            return {"type": "text", "text": part.text, "raw": part.raw}
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        return {
            "type": "image",
            "mime_type": part.mime_type,
            "data": base64.b64encode(part.data).decode("ascii"),
            "width": part.width,
            "height": part.height,
        }
    if isinstance(part, ReasoningPart):
        return {
            "type": "reasoning",
            "text": part.text,
            "signature": part.signature,
            "redacted": part.redacted,
        }
    if isinstance(part, ToolCall):
        return {
            "type": "tool_call",
            "id": part.id,
            "name": part.name,
            "arguments": part.arguments,
            "provider_executed": part.provider_executed,
            **({"raw": part.raw} if part.raw is not None else {}),
        }
    if isinstance(part, ProviderToolResult):
        return {
            "type": "provider_tool_result",
            "call_id": part.call_id,
            "name": part.name,
            "content": part.content,
            "is_error": part.is_error,
            "raw": part.raw,
        }
    raise TypeError(f"cannot serialize {type(part).__name__}")


def _part_from_dict(data: Mapping[str, Any]) -> Any:
    kind = data.get("type")
    if kind == "text":
        return TextPart(data["text"], data.get("raw"))
    if kind == "image":
        return ImagePart(
            base64.b64decode(data["data"]),
            data["mime_type"],
            data.get("width", 0),
            data.get("height", 0),
        )
    if kind == "reasoning":
        return ReasoningPart(data["text"], data.get("signature"), data.get("redacted"))
    if kind == "tool_call":
        return ToolCall(
            data["id"],
            data["name"],
            data.get("arguments", "{}"),
            bool(data.get("provider_executed", False)),
            data.get("raw"),
        )
    if kind == "provider_tool_result":
        return ProviderToolResult(
            data["call_id"],
            data["name"],
            data.get("content"),
            bool(data.get("is_error", False)),
            data.get("raw"),
        )
    raise ValueError(f"unknown part type {kind!r}")


def message_to_dict(message: Message) -> dict[str, Any]:
    """A JSON-ready dict for one message (images as base64)."""
    if isinstance(message, UserMessage):
        return {"role": "user", "content": [_part_to_dict(p) for p in message.content]}
    if isinstance(message, AssistantMessage):
        return {"role": "assistant", "content": [_part_to_dict(p) for p in message.content]}
    if isinstance(message, ToolMessage):
        return {
            "role": "tool",
            "results": [
                {
                    "call_id": r.call_id,
                    "name": r.name,
                    "is_error": r.is_error,
                    "content": [_part_to_dict(p) for p in r.content],
                    **({"edited": True} if r.edited else {}),
                }
                for r in message.results
            ],
        }
    raise TypeError(f"not a message: {type(message).__name__}")


def message_from_dict(data: Mapping[str, Any]) -> Message:
    """Rebuild a message from :func:`message_to_dict` output; raises ValueError on bad input."""
    role = data.get("role")
    if role == "user":
        return UserMessage(tuple(_part_from_dict(p) for p in data["content"]))
    if role == "assistant":
        return AssistantMessage(tuple(_part_from_dict(p) for p in data["content"]))
    if role == "tool":
        return ToolMessage(
            tuple(
                ToolResultPart(
                    r["call_id"],
                    r["name"],
                    tuple(_part_from_dict(p) for p in r["content"]),
                    bool(r.get("is_error", False)),
                    bool(r.get("edited", False)),
                )
                for r in data["results"]
            )
        )
    raise ValueError(f"unknown message role {role!r}")


def messages_to_json(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """A conversation as JSON-ready data."""
    return [message_to_dict(m) for m in messages]


def messages_from_json(data: Sequence[Mapping[str, Any]]) -> list[Message]:
    """A conversation back from :func:`messages_to_json` output."""
    return [message_from_dict(m) for m in data]
