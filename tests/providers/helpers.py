"""Adapters pointed at the loopback server, and small helpers the provider tests share."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import httpx2

from nbagent.generation import Answer, Generator, Request, StreamEvent
from nbagent.messages import user
from nbagent.providers.anthropic import AnthropicMessages
from nbagent.providers.openai import OpenAIChat
from nbagent.providers.responses import OpenAIResponses

from .conftest import Server

KEY = "sk-test-SECRET-0123456789abcdef"
FAST = {"backoff_base": 0.001, "backoff_cap": 0.002, "retry_after_cap": 0.5}


def openai(server: Server, **options: Any) -> OpenAIChat:
    settings: dict[str, Any] = {"api_key": KEY, "base_url": server.url + "/v1", **FAST}
    settings.update(options)
    return OpenAIChat("gpt-4.1-mini", **settings)


def anthropic(server: Server, **options: Any) -> AnthropicMessages:
    settings: dict[str, Any] = {"api_key": KEY, "base_url": server.url, **FAST}
    settings.update(options)
    return AnthropicMessages("claude-sonnet-4-5", **settings)


def responses(server: Server, **options: Any) -> OpenAIResponses:
    settings: dict[str, Any] = {"api_key": KEY, "base_url": server.url + "/v1", **FAST}
    settings.update(options)
    return OpenAIResponses("gpt-5-mini", **settings)


ADAPTERS: dict[str, Callable[..., OpenAIChat | AnthropicMessages | OpenAIResponses]] = {
    "openai": openai,
    "anthropic": anthropic,
    "responses": responses,
}

HELLO = Request([user("hi")])


async def collect(generator: Generator, request: Request = HELLO) -> list[StreamEvent]:
    return [event async for event in generator.stream(request)]


def chunked_transport(pieces: Sequence[bytes], status: int = 200) -> httpx2.MockTransport:
    """A transport answering every request with ``pieces`` delivered exactly as given."""

    class Body(httpx2.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            for piece in pieces:
                yield piece

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, headers={"content-type": "text/event-stream"}, stream=Body())

    return httpx2.MockTransport(handler)


def answer_of(events: Sequence[StreamEvent]) -> Answer:
    answer = Answer()
    for event in events:
        answer.add(event)
    answer.end()
    return answer


def on_transport(kind: str, transport: httpx2.AsyncBaseTransport, **options: Any) -> Any:
    """An adapter of ``kind`` talking to an in-memory transport (no socket)."""
    if kind == "openai":
        return OpenAIChat(
            "m", api_key=KEY, base_url="http://mock/v1", transport=transport, **options
        )
    if kind == "responses":
        return OpenAIResponses(
            "gpt-5-mini", api_key=KEY, base_url="http://mock/v1", transport=transport, **options
        )
    return AnthropicMessages(
        "m", api_key=KEY, base_url="http://mock", transport=transport, **options
    )
