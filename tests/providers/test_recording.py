"""Record real adapter streams (loopback server), replay them with no network at all."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from nbagent.agent import Agent
from nbagent.approvals.approval import ScriptedApprover, deny
from nbagent.recording import Recording, record, replay

from .conftest import Reply, Server
from .helpers import ADAPTERS, KEY
from .test_agent_e2e import FINAL, TURN_BUILDERS, TURNS, make_tools

PROMPT = "Weather in Zürich and Bern? Delete /tmp/x. Plot it."


@pytest.mark.parametrize("kind", ["openai", "anthropic", "responses"])
async def test_record_a_provider_then_replay_it_offline(
    kind: str, server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, history_valid: Any
) -> None:
    build = TURN_BUILDERS[kind]
    server.queue(
        Reply(build(TURNS[0], "Let me look at that.")),
        Reply(build(TURNS[1])),
        Reply(build([], FINAL)),
    )
    ran: list[str] = []
    adapter = ADAPTERS[kind](server)
    recorder = record(adapter)
    agent = Agent(
        recorder,
        make_tools(ran),
        approver=ScriptedApprover({"delete_file": deny("not today")}),
        instructions="Be brief.",
    )
    live = await agent.run(PROMPT)
    await adapter.aclose()
    assert live.stop_reason == "finished" and live.text.endswith(FINAL)
    path = recorder.recording.save(tmp_path / "run.json")
    text = path.read_text()
    assert KEY not in text and server.url not in text and "127.0.0.1" not in text
    assert "authorization" not in text.lower() and "x-api-key" not in text.lower()

    def refuse(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("the replay opened a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    ran_again: list[str] = []
    twin = Agent(
        replay(Recording.load(path)),
        make_tools(ran_again),
        approver=ScriptedApprover({"delete_file": deny("not today")}),
        instructions="Be brief.",
    )
    replayed = await twin.run(PROMPT)
    assert replayed.text == live.text
    assert replayed.messages == live.messages  # the same calls, arguments, ids and results
    assert sorted(ran_again) == sorted(ran) == ["get_weather:Bern", "get_weather:Zürich", "plot"]
    assert replayed.usage == live.usage and replayed.steps == live.steps
    history_valid(twin.messages)
