"""The ACP client against a real agent: ``scripted_agent.py``, written with the SDK's agent
side, run as a subprocess on stdio. Each test drives a turn through
:class:`nbagent.acp.ExternalAgentSession` and checks the run it reads as: events, result, and
what the agent was answered."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("acp", reason="the acp extra (agent-client-protocol) is not installed")

from nbagent.acp import KNOWN_AGENTS, AgentRegistry, ExternalAgent, ExternalAgentSession
from nbagent.approvals.approval import (
    AutoApprove,
    DenyAll,
    InteractiveApprover,
    ScriptedApprover,
    approve,
)
from nbagent.approvals.rules import RuleApprover, parse_rule
from nbagent.errors import ArgumentsError, ExternalAgentError
from nbagent.events import (
    ApprovalRequested,
    ApprovalResolved,
    AssistantTextDelta,
    ReasoningTextDelta,
    RunCancelled,
    RunFailed,
    RunFinished,
    ToolCallStarted,
    ToolFinished,
    ToolProgress,
)
from nbagent.limits import ExternalAgentLimits

SCRIPT = str(Path(__file__).with_name("scripted_agent.py"))


def scripted(**env: str) -> ExternalAgent:
    return ExternalAgent("scripted", sys.executable, (SCRIPT,), tuple(env.items()))


@pytest.fixture(scope="module")
def session() -> Iterator[ExternalAgentSession]:
    """One agent process for the tests that leave it well (each starting its process costs
    seconds: Python and the SDK)."""
    with ExternalAgentSession(scripted()) as found:
        yield found


async def turn(
    session: ExternalAgentSession, prompt: str, approver: Any = None, **kwargs: Any
) -> tuple[list[Any], Any]:
    run = session.start(prompt, approver=approver or DenyAll(), **kwargs)
    events = [event async for event in run.events()]
    return events, await run.result()


def text_of(events: list[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, AssistantTextDelta))


def finished(events: list[Any]) -> dict[str, ToolFinished]:
    return {e.call.id: e for e in events if isinstance(e, ToolFinished)}


async def test_a_turn_streams_thoughts_text_and_the_plan_as_a_run(
    session: ExternalAgentSession,
) -> None:
    events, result = await turn(session, "chat")
    assert isinstance(events[-1], RunFinished) and result.stop_reason == "finished"
    assert result.text == text_of(events) == "Hello, notebook!"
    assert "".join(e.text for e in events if isinstance(e, ReasoningTextDelta)) == (
        "thinking about it"
    )
    plans = [e.update.text for e in events if isinstance(e, ToolProgress)]
    assert plans[0] == "[ ] read the question\n[ ] answer"
    assert finished(events)["acp-plan"].result.text == "[x] read the question\n[x] answer"
    assert session.agent_info == "scripted-agent 1.0"


async def test_a_permission_granted_runs_the_call_and_its_card_shows_the_result(
    session: ExternalAgentSession,
) -> None:
    approver = ScriptedApprover([approve()])
    events, result = await turn(session, "tool", approver)
    started = next(e for e in events if isinstance(e, ToolCallStarted))
    assert (started.name, started.title) == ("execute", "Run ls")
    asked = next(e for e in events if isinstance(e, ApprovalRequested))
    assert asked.request.input == {"command": "ls"}
    resolved = next(e for e in events if isinstance(e, ApprovalResolved))
    assert resolved.decision.approved and resolved.decision.binding is not None
    call = finished(events)["call-1"]
    assert (call.status, call.result.text) == ("done", "a.txt\nb.txt")
    assert result.text == "ran (yes)"  # the agent's allow_once option was chosen


async def test_a_permission_denied_answers_the_agent_s_reject_option(
    session: ExternalAgentSession,
) -> None:
    events, result = await turn(session, "tool", DenyAll())
    assert result.text == "denied (no)"
    assert finished(events)["call-1"].status == "error"
    assert not next(e for e in events if isinstance(e, ApprovalResolved)).decision.approved


async def test_the_session_s_rules_answer_without_asking_and_always_is_the_agent_s_always(
    session: ExternalAgentSession,
) -> None:
    denied = RuleApprover([parse_rule("deny execute")], fallback=AutoApprove())
    events, result = await turn(session, "tool", denied)
    assert result.text == "denied (no)"
    assert not any(isinstance(e, ApprovalRequested) for e in events)  # nobody was asked
    always = ScriptedApprover([approve(always=True)])
    _, result = await turn(session, "tool", always)
    assert result.text == "ran (always)"


async def test_edited_arguments_are_refused_and_the_agent_is_answered_with_its_reject(
    session: ExternalAgentSession,
) -> None:
    edited = ScriptedApprover([approve(arguments={"command": "rm -rf /"})])
    events, result = await turn(session, "tool", edited)
    assert result.text == "denied (no)"  # the agent ran nothing
    asked = next(e for e in events if isinstance(e, ApprovalRequested)).request
    with pytest.raises(ArgumentsError, match="cannot be edited"):
        asked.check_arguments({"command": "rm -rf /"})
    assert asked.check_arguments({"command": "ls"}) == {"command": "ls"}
    resolved = next(e for e in events if isinstance(e, ApprovalResolved)).decision
    assert not resolved.approved and "cannot be edited" in (resolved.reason or "")


async def test_the_conversation_goes_on_and_new_starts_another(
    session: ExternalAgentSession,
) -> None:
    await turn(session, "chat")
    conversation = session.session_id
    _, second = await turn(session, "remember")
    assert second.text == "you said: chat" and session.session_id == conversation
    _, fresh = await turn(session, "remember", new=True)
    assert fresh.text == "you said: " and session.session_id != conversation


async def test_a_diff_is_shown_as_a_unified_diff_in_its_call_s_result(
    session: ExternalAgentSession,
) -> None:
    events, _ = await turn(session, "edit")
    shown = finished(events)["edit-1"].result.text
    assert "--- a/notes.txt\n+++ b/notes.txt\n" in shown
    assert "-two\n+three\n" in shown


async def test_a_permission_for_a_call_never_reported_gets_its_own_card_and_one_result(
    session: ExternalAgentSession,
) -> None:
    events, result = await turn(session, "ghost", DenyAll())
    assert result.text == "asked (no)"
    asked = next(e for e in events if isinstance(e, ApprovalRequested))
    assert (asked.request.call.name, asked.request.title) == ("delete", "Delete everything")
    ghost = finished(events)["ghost-1"]
    assert ghost.status == "error" and "never said how this call ended" in ghost.result.text


async def test_cancel_while_waiting_for_a_click_answers_cancelled_and_the_run_is_cancelled(
    session: ExternalAgentSession,
) -> None:
    approver = InteractiveApprover()
    run = session.start("tool", approver=approver)
    events = []
    async for event in run.events():
        events.append(event)
        if isinstance(event, ApprovalRequested):
            run.cancel()
    result = await run.result()
    assert result.stop_reason == "cancelled" and isinstance(events[-1], RunCancelled)
    assert approver.pending() == []  # the bar's question was withdrawn
    assert finished(events)["call-1"].status in ("error", "cancelled")
    _, after = await turn(session, "remember")  # the agent lives on, the conversation too
    assert after.text == "you said: tool"


async def test_cancel_ends_a_turn_the_agent_ends_itself(session: ExternalAgentSession) -> None:
    run = session.start("wait", approver=DenyAll())
    async for event in run.events():
        if isinstance(event, AssistantTextDelta):
            run.cancel()
    assert (await run.result()).stop_reason == "cancelled"
    assert session.alive


async def test_a_run_stopped_before_its_agent_answered_asks_nothing() -> None:
    with ExternalAgentSession(scripted()) as session:
        run = session.start("chat", approver=DenyAll())
        run.cancel()
        events = [event async for event in run.events()]
        assert [type(e) for e in events] == [RunCancelled]
        assert (await run.result()).stop_reason == "cancelled"


async def test_an_agent_that_ignores_cancel_is_killed_after_the_grace() -> None:
    limits = ExternalAgentLimits(cancel_grace=0.5)
    with ExternalAgentSession(scripted(), limits=limits) as session:
        run = session.start("stubborn", approver=DenyAll())
        async for event in run.events():
            if isinstance(event, AssistantTextDelta):
                run.cancel()
        assert (await run.result()).stop_reason == "cancelled"
        assert not session.alive and session.session_id is None
        _, after = await turn(session, "remember")  # started again, in a new conversation
        assert after.text == "you said: "
        # stopped and asked again at once (a kernel interrupt does not wait for the turn's
        # end): the next prompt waits for it, within the grace, and is answered
        run = session.start("stubborn", approver=DenyAll())
        async for event in run.events():
            if isinstance(event, AssistantTextDelta):
                run.cancel()
                break
        _, after = await turn(session, "remember")
        assert after.text == "you said: "
        assert (await run.result()).stop_reason == "cancelled"


async def test_an_agent_that_crashes_mid_turn_fails_the_run_in_one_sentence() -> None:
    with ExternalAgentSession(scripted()) as session:
        await crash_and_start_again(session)


async def crash_and_start_again(session: ExternalAgentSession) -> None:
    events, result = await turn(session, "crash")
    assert isinstance(events[-1], RunFailed) and result.stop_reason == "failed"
    said = str(result.error)
    assert "exited in the middle of its turn (exit code 3)" in said
    assert "crashing on purpose" in said  # its last stderr
    assert text_of(events) == "about to crash"
    _, after = await turn(session, "chat")  # the next prompt starts it again
    assert after.text == "Hello, notebook!"


async def test_malformed_lines_are_skipped_within_the_bound_and_stop_the_agent_past_it() -> None:
    with ExternalAgentSession(scripted()) as session:
        _, result = await turn(session, "malformed")
        assert result.text == "still here"  # three bad lines: let go
    strict = ExternalAgentLimits(max_malformed=2)
    with ExternalAgentSession(scripted(), limits=strict) as session:
        _, result = await turn(session, "malformed")
        assert result.stop_reason == "failed"
        assert "it sent 3 malformed messages" in str(result.error)
        assert not session.alive


async def test_a_message_over_the_size_limit_is_skipped_unread() -> None:
    limits = ExternalAgentLimits(max_message_bytes=65536)
    with ExternalAgentSession(scripted(), limits=limits) as session:
        _, result = await turn(session, "big")
        assert result.text == "after big"
        assert session._wire is not None and session._wire.malformed == 1
        assert "more than 65536 bytes" in session._wire.last_problem


async def test_a_flood_of_updates_stops_the_turn_at_the_bound() -> None:
    limits = ExternalAgentLimits(max_updates_per_turn=100, cancel_grace=2)
    with ExternalAgentSession(scripted(), limits=limits) as session:
        events, result = await turn(session, "flood")
        assert result.stop_reason == "failed"
        assert "more than 100 updates in one turn" in str(result.error)
        assert text_of(events).split() == [str(i) for i in range(100)]


async def test_an_agent_that_is_not_installed_is_one_sentence_with_its_install_line() -> None:
    claude = KNOWN_AGENTS["claude"]
    missing = ExternalAgent(
        claude.name, "no-such-claude-code-acp", title=claude.title, install=claude.install
    )
    with ExternalAgentSession(missing) as session:
        events, result = await turn(session, "hello")
    assert [type(e) for e in events] == [RunFailed]
    assert str(result.error) == (
        "Claude Code (claude) is not installed here (no-such-claude-code-acp is not on PATH): "
        "npm install -g @zed-industries/claude-code-acp"
    )


async def test_an_agent_that_exits_while_starting_says_so_with_its_stderr() -> None:
    with ExternalAgentSession(scripted(SCRIPTED_AGENT_START="stderr")) as session:
        _, result = await turn(session, "hello")
    said = str(result.error)
    assert "exited before it answered initialize (exit code 2)" in said
    assert "no credentials here" in said


async def test_a_second_prompt_while_one_runs_is_refused(session: ExternalAgentSession) -> None:
    run = session.start("wait", approver=DenyAll())
    with pytest.raises(ExternalAgentError, match="still answering the previous prompt"):
        session.start("chat", approver=DenyAll())
    run.cancel()
    assert (await run.result()).stop_reason == "cancelled"


def test_close_ends_the_process_and_its_group() -> None:
    session = ExternalAgentSession(scripted())

    async def main() -> int:
        await turn(session, "chat")
        assert session.process is not None
        return session.process.pid

    pid = asyncio.run(main())
    session.close()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(ExternalAgentError, match="closed"):
        session.start("chat", approver=DenyAll())


def test_the_registry_knows_the_agents_and_takes_the_person_s_own() -> None:
    registry = AgentRegistry()
    assert {"claude", "codex", "gemini", "opencode"} <= set(registry.names())
    assert registry.get("opencode").args == ("acp",)
    mine = registry.add("mine", "my-agent", "--acp", env={"MY_KEY": "sk-secret-value"})
    assert registry.get("mine") is mine and "sk-secret" not in repr(mine)
    assert mine.command_line == "MY_KEY=… my-agent --acp"
    assert registry.remove("mine") and not registry.remove("mine")
    with pytest.raises(ExternalAgentError, match="no external agent is called 'nope'"):
        registry.get("nope")
    with pytest.raises(ValueError, match="a word of letters"):
        registry.add("bad name", "x")
