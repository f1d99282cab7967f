"""A failed run never looks like an empty answer: a 401 from a real (loopback) server makes
``Agent.run`` and ``Agent.run_sync`` raise RunFailedError, carrying the partial result and the
cause, with the key nowhere in it; ``stream()`` and ``start()`` report it as the RunFailed event."""

from __future__ import annotations

import asyncio
import json
import pickle
import traceback

import pytest

from nbagent import Agent, RunFailedError
from nbagent.errors import AuthenticationError
from nbagent.events import RunFailed

from .conftest import Reply, Server
from .helpers import ADAPTERS, KEY


def unauthorized(kind: str) -> Reply:
    if kind in ("openai", "responses"):
        error = {"error": {"message": f"Incorrect API key provided: {KEY}", "type": "auth"}}
    else:
        error = {"type": "error", "error": {"type": "authentication_error", "message": "bad key"}}
    return Reply(json.dumps(error).encode(), 401, content_type="application/json")


@pytest.mark.parametrize("kind", ["openai", "anthropic", "responses"])
async def test_run_raises_with_the_partial_result_and_the_cause(kind: str, server: Server) -> None:
    server.default = unauthorized(kind)
    model = ADAPTERS[kind](server)
    agent = Agent(model)
    with pytest.raises(RunFailedError) as raised:
        await agent.run("hi")
    error = raised.value
    assert isinstance(error.error, AuthenticationError) and error.__cause__ is error.error
    assert error.result.stop_reason == "failed" and error.result.text == ""
    assert error.result.error is error.error
    assert "HTTP 401" in str(error)
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    assert KEY not in text and KEY not in repr(error)
    assert not agent._running and len(agent.messages) == 1  # the prompt; still a valid history
    copy = pickle.loads(pickle.dumps(error))  # crosses process boundaries intact
    assert str(copy) == str(error) and copy.result.stop_reason == "failed"
    assert type(copy.error) is AuthenticationError
    await model.aclose()


@pytest.mark.parametrize("kind", ["openai", "anthropic", "responses"])
async def test_run_sync_raises_too(kind: str, server: Server) -> None:
    server.default = unauthorized(kind)
    model = ADAPTERS[kind](server)
    agent = Agent(model)
    # run_sync blocks its thread: call it from another one so this loop keeps serving
    with pytest.raises(RunFailedError, match="AuthenticationError"):
        await asyncio.to_thread(agent.run_sync, "hi")


@pytest.mark.parametrize("kind", ["openai", "anthropic", "responses"])
async def test_opting_out_returns_the_failed_result(kind: str, server: Server) -> None:
    server.default = unauthorized(kind)
    model = ADAPTERS[kind](server)
    result = await Agent(model).run("hi", raise_on_error=False)
    assert result.stop_reason == "failed" and isinstance(result.error, AuthenticationError)
    await model.aclose()


@pytest.mark.parametrize("kind", ["openai", "anthropic", "responses"])
async def test_streaming_reports_the_failure_as_an_event(kind: str, server: Server) -> None:
    server.default = unauthorized(kind)
    model = ADAPTERS[kind](server)
    events = [e async for e in Agent(model).stream("hi")]
    assert isinstance(events[-1], RunFailed)
    assert isinstance(events[-1].error, AuthenticationError)
    await model.aclose()
