"""Claude Code itself (npm ``@zed-industries/claude-code-acp``, pinned, installed by
scripts/test) over ACP, pointed at a loopback server that speaks the Anthropic Messages
stream: its Bash call asks permission, which nbagent's approver grants or denies, and the
command runs (or not) in the agent's folder. Offline: no key, no network."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("acp", reason="the acp extra (agent-client-protocol) is not installed")

from nbagent.acp import ExternalAgent, ExternalAgentSession
from nbagent.approvals.approval import DenyAll, ScriptedApprover, approve
from nbagent.events import ApprovalRequested, ToolFinished
from nbagent.limits import ExternalAgentLimits

from .anthropic_loopback import COMMAND, AnthropicLoopback, tool_result

ROOT = Path(__file__).resolve().parents[2]
CLAUDE_CODE_ACP = Path(
    os.environ.get(
        "NBAGENT_CLAUDE_CODE_ACP",
        ROOT / ".venv" / "clients-acp" / "node_modules" / ".bin" / "claude-code-acp",
    )
)


@pytest.fixture
def claude(tmp_path: Path) -> Iterator[tuple[ExternalAgentSession, AnthropicLoopback, Path]]:
    if not CLAUDE_CODE_ACP.exists() or shutil.which("node") is None:
        pytest.skip(
            f"Claude Code over ACP is not installed at {CLAUDE_CODE_ACP} (scripts/test installs "
            "npm @zed-industries/claude-code-acp; NBAGENT_CLAUDE_CODE_ACP names another)"
        )
    home = Path(tempfile.mkdtemp(dir=tmp_path))
    work = tmp_path / "work"
    work.mkdir()
    with AnthropicLoopback() as server:
        env = {
            "ANTHROPIC_BASE_URL": server.url,
            "ANTHROPIC_API_KEY": "sk-ant-loopback-not-a-key",
            "HOME": str(home),  # no login, settings or history of the developer's
            "IS_SANDBOX": "1",  # Claude Code refuses to run as root otherwise
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
        }
        agent = ExternalAgent(
            "claude", str(CLAUDE_CODE_ACP), (), tuple(env.items()), title="Claude Code"
        )
        limits = ExternalAgentLimits(start_timeout=120)
        with ExternalAgentSession(agent, cwd=str(work), limits=limits) as session:
            yield session, server, work


async def turn(session: ExternalAgentSession, prompt: str, approver: Any) -> tuple[list[Any], Any]:
    run = session.start(prompt, approver=approver)
    events = [event async for event in run.events()]
    return events, await run.result()


async def test_claude_code_s_bash_call_granted_runs(claude: Any) -> None:
    session, server, work = claude
    events, result = await turn(session, "write made.txt", ScriptedApprover([approve()]))
    assert result.stop_reason == "finished", result.error
    asked = [e for e in events if isinstance(e, ApprovalRequested)]
    assert len(asked) == 1
    assert asked[0].request.call.name == "execute"
    assert asked[0].request.input["command"] == COMMAND
    assert (work / "made.txt").read_text().strip() == "made-by-claude"
    done = [e for e in events if isinstance(e, ToolFinished) and e.call.name == "execute"]
    assert [e.status for e in done] == ["done"]
    assert result.text.startswith("the command said:")
    assert any(tool_result(r) is not None for r in server.requests)  # the result went back
    assert session.agent_info.startswith("@zed-industries/claude-code-acp")


async def test_claude_code_s_bash_call_denied_never_runs(claude: Any) -> None:
    session, _server, work = claude
    events, result = await turn(session, "write made.txt", DenyAll())
    assert result.stop_reason == "finished", result.error
    assert [e.request.call.name for e in events if isinstance(e, ApprovalRequested)] == ["execute"]
    assert not (work / "made.txt").exists()
    (call,) = [e for e in events if isinstance(e, ToolFinished) and e.call.name == "execute"]
    assert call.status == "error" and "refused permission" in call.result.text
