"""External agents (Claude Code, Codex, Gemini CLI, OpenCode, your own) over the Agent Client
Protocol, through its official Python SDK (``nbagent[acp]``, imported as ``acp``)::

    from nbagent.acp import ExternalAgentSession, KNOWN_AGENTS
    from nbagent import AutoApprove

    with ExternalAgentSession(KNOWN_AGENTS["claude"]) as claude:
        run = claude.start("list the notebooks here", approver=AutoApprove())
        async for event in run.events():
            ...

A prompt's turn reads as a run of nbagent's own: its events (:mod:`nbagent.events`: text and
thoughts streaming, a card per tool call with its kind and status, the plan, diffs) and its
:class:`~nbagent.events.RunResult`; the agent's permission requests are answered by the
approver (rules first) with the agent's own options. The agent's process is started on first
use, bounded (:class:`~nbagent.limits.ExternalAgentLimits`) and always ended. The room is core:
it imports no front end and no HTTP client; the SDK is imported on first use.

May import (docs/architecture.md): the ground, the schema, the vocabulary, inspection,
approvals and events.
"""

from __future__ import annotations

from .client import ExternalAgentSession, ExternalRun
from .registry import KNOWN_AGENTS, AgentRegistry, ExternalAgent, resolve_command

__all__ = [
    "KNOWN_AGENTS",
    "AgentRegistry",
    "ExternalAgent",
    "ExternalAgentSession",
    "ExternalRun",
    "resolve_command",
]
