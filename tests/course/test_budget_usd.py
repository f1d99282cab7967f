"""``Budget(usd=...)``: a run stops before a request once it spent its dollars, priced from the
maintained table; on a model with no known price it sends nothing. Against a loopback
OpenAI-compatible server that counts requests."""

from __future__ import annotations

import pytest

from nbagent import Agent, tool
from nbagent._prices import cost_usd, price_known, usd_text
from nbagent.generation import Usage
from nbagent.limits import Budget
from nbagent.models import ScriptedModel
from nbagent.providers import OpenAIChat

from ..providers import wire
from .gateway import Gateway

KEY = "sk-test-budget-0123456789abcdef"


@tool
def lookup(word: str) -> str:
    """Look a word up."""
    return f"{word}: found"


def _call_turn() -> bytes:
    return wire.openai_sse(
        [
            wire.oa_chunk({"role": "assistant", "content": ""}),
            wire.oa_chunk({"tool_calls": [wire.oa_call(0, "c1", "lookup", '{"word": "a"}')]}),
            wire.oa_chunk({}, "tool_calls"),
            wire.oa_usage(82, 17),
        ]
    )


async def test_a_money_budget_stops_the_run_before_the_request_it_cannot_pay_for() -> None:
    with Gateway() as server:
        server.sse(_call_turn())
        server.sse(wire.openai_text("done"))
        model = OpenAIChat("gpt-4.1-mini", api_key=KEY, base_url=server.url)
        spent = cost_usd(model, Usage(82, 17))
        assert spent is not None and 0 < spent < 0.001
        agent = Agent(model=model, tools=[lookup], budget=Budget(usd=spent / 2))
        result = await agent.run("look up a")
        await model.aclose()
        assert result.stop_reason == "budget"
        assert len(server.requests) == 1  # the second request was never sent
        server.replies.clear()
        agent = Agent(
            model=OpenAIChat("gpt-4.1-mini", api_key=KEY, base_url=server.url),
            tools=[lookup],
            budget=Budget(usd=1.0),
        )
        server.sse(_call_turn())
        server.sse(wire.openai_text("done"))
        result = await agent.run("look up a")
        assert result.stop_reason == "finished" and len(server.requests) == 3


async def test_no_known_price_sends_nothing_under_a_money_budget() -> None:
    with Gateway() as server:
        server.sse(wire.openai_text("hi"))
        model = OpenAIChat("no-such-model-7", api_key=KEY, base_url=server.url)
        assert not price_known(model) and cost_usd(model, Usage(10, 10)) is None
        result = await Agent(model=model, budget=Budget(usd=1.0)).run("hello")
        await model.aclose()
        assert result.stop_reason == "budget" and server.requests == []


def test_models_that_bill_nothing_cost_nothing() -> None:
    scripted = ScriptedModel(["hi"])
    assert cost_usd(scripted, Usage(1000, 1000)) == 0.0 and price_known(scripted)
    assert usd_text(None) == "price unknown" and usd_text(0.0) == "$0"


@pytest.mark.parametrize("value", [0, -1, float("nan"), float("inf"), True, "1"])
def test_a_money_budget_must_be_a_positive_number(value: object) -> None:
    with pytest.raises(ValueError, match=r"Budget\.usd"):
        Budget(usd=value)  # type: ignore[arg-type]
