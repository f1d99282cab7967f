"""Agent.map against a real OpenAI-compatible server on 127.0.0.1 that rate-limits half-way.

The server is the provider tests' loopback HTTP server (``tests/providers/conftest.py``),
answering every request with a real Chat Completions SSE stream, except the requests it is told
to refuse with ``429 Too Many Requests``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from nbagent import Agent
from nbagent.providers.openai import OpenAIChat
from tests.providers.conftest import Reply, Server
from tests.providers.helpers import FAST, KEY
from tests.providers.wire import openai_text


class RateLimiting(Server):
    """Answers each request with a text stream, but refuses the requests numbered in
    ``refuse`` (1-based, in arrival order) with 429."""

    def __init__(self, refuse: set[int]) -> None:
        super().__init__()
        self.refuse = refuse
        self.refused = 0

    @property  # type: ignore[override]
    def default(self) -> Reply:
        number = len(self.requests)
        if number in self.refuse:
            self.refused += 1
            body = b'{"error": {"message": "Rate limit reached", "type": "rate_limit_error"}}'
            return Reply(body, 429, {"retry-after": "0"}, content_type="application/json")
        prompt = self.requests[-1].json["messages"][-1]["content"]
        return Reply(openai_text(f"graded: {prompt}"))

    @default.setter
    def default(self, value: Any) -> None:
        pass


@pytest.fixture
async def limited(request: pytest.FixtureRequest) -> AsyncIterator[RateLimiting]:
    server = RateLimiting(request.param)
    await server.start()
    try:
        yield server
    finally:
        await server.close()


def model(server: Server) -> OpenAIChat:
    return OpenAIChat("gpt-4.1-mini", api_key=KEY, base_url=server.url + "/v1", **FAST)


@pytest.mark.parametrize("limited", [set(range(11, 31))], indirect=True)
async def test_a_provider_that_rate_limits_half_way_slows_the_batch_down(
    limited: RateLimiting,
) -> None:
    """Requests 11 to 30 get 429: more than the adapter's own retries (2) can absorb for the
    runs that meet them, so the batch retries those runs after a pause, and every row ends
    done."""
    agent = Agent(model(limited))
    seen: list[Any] = []
    out = await agent.map(
        [f"answer {i}" for i in range(40)],
        concurrency=4,
        retries=6,
        retry_delay=0.01,
        progress=seen.append,
    )
    assert limited.refused == 20
    assert (out["status"] == "done").all(), out[out["status"] != "done"]["error"].tolist()
    assert list(out["text"]) == [f"graded: answer {i}" for i in range(40)]
    assert out["attempts"].max() > 1  # some runs were tried again by the batch
    assert seen[-1].rate_limited > 0  # and the batch paused the others meanwhile
    assert "rate-limited" in seen[-1].summary()


@pytest.mark.parametrize("limited", [set(range(3, 1000))], indirect=True)
async def test_runs_still_refused_after_the_retries_are_failed_rows(
    limited: RateLimiting,
) -> None:
    out = await Agent(model(limited)).map(
        [f"answer {i}" for i in range(4)], concurrency=1, retries=1, retry_delay=0.01, progress=None
    )
    assert list(out["status"]) == ["done", "done", "failed", "failed"]
    assert out["error"][2].startswith("RateLimitError")
    assert list(out["attempts"]) == [1, 1, 2, 2]
    assert KEY not in " ".join(out["error"][2:])
