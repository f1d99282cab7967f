"""Messages survive a JSON round trip, images and reasoning included."""

from __future__ import annotations

import json

from nbagent.content import ImagePart, TextPart
from nbagent.messages import (
    AssistantMessage,
    ProviderToolResult,
    ReasoningPart,
    ToolMessage,
    ToolResultPart,
    messages_from_json,
    messages_to_json,
    user,
)
from nbagent.tools import ToolCall


def test_round_trip() -> None:
    conversation = [
        user("look", ImagePart(b"\x89PNG...", "image/png", 1, 1)),
        AssistantMessage(
            (
                ReasoningPart("hmm", signature="sig"),
                TextPart("calling"),
                ToolCall("c1", "t", '{"a": 1}'),
                ToolCall("s1", "web_search", '{"q": "x"}', provider_executed=True),
                ProviderToolResult("s1", "web_search", [{"url": "https://example.com"}]),
            )
        ),
        ToolMessage((ToolResultPart("c1", "t", (TextPart("ok"),), False),)),
    ]
    data = json.loads(json.dumps(messages_to_json(conversation)))
    again = messages_from_json(data)
    assert again == conversation
    assert again[1].content[-1].raw is None  # type: ignore[union-attr]
    assert again[1].tool_calls == (ToolCall("c1", "t", '{"a": 1}'),)  # type: ignore[union-attr]


def test_provider_blocks_go_back_verbatim() -> None:
    from nbagent.providers.anthropic import _assistant_blocks

    block = {"type": "mcp_tool_result", "tool_use_id": "m1", "server_name": "docs", "content": []}
    part = ProviderToolResult("m1", "mcp", [], False, block)
    again = messages_from_json(
        json.loads(json.dumps(messages_to_json([AssistantMessage((part,))])))
    )
    assert again[0].content[0].raw == block  # type: ignore[union-attr]
    assert _assistant_blocks(again[0]) == [block]  # type: ignore[arg-type]
