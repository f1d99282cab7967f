"""The external agents of a notebook's session: which there are (``%agent acp``, ``add``,
``remove``), the one running conversation with each, and their end (``stop``, the extension
unloaded, the kernel gone).

One :class:`~nbagent.acp.ExternalAgentSession` per agent name lives as long as the kernel's
session: the next ``%agent --acp NAME`` cell goes on with its conversation. The agent works in
the notebook's folder (the kernel's working directory).
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from ..._ground.extras import missing

if TYPE_CHECKING:
    from ...acp import AgentRegistry, ExternalAgent, ExternalAgentSession
    from ..core.session import Session

__all__ = ["ExternalAgents", "agents_of", "register_agent", "run_command"]

FEATURE = "%agent --acp"


def needs_the_extra() -> None:
    """A UsageError with the install line when the acp extra is missing."""
    problem = missing("acp", FEATURE)
    if problem is not None:
        raise UsageError(problem)


class ExternalAgents:
    """The agents one session can start, and the conversation it holds with each."""

    def __init__(self) -> None:
        from ...acp import AgentRegistry

        self.registry: AgentRegistry = AgentRegistry()
        self._sessions: dict[str, ExternalAgentSession] = {}
        self._lock = threading.Lock()

    def agent(self, name: str) -> ExternalAgent:
        from ...errors import ExternalAgentError

        try:
            return self.registry.get(name)
        except ExternalAgentError as exc:
            raise UsageError(str(exc)) from None

    def session(self, name: str) -> ExternalAgentSession:
        """The conversation with ``name``, started (its process: on the first prompt) when
        there is none, or when the agent was registered again since."""
        from ...acp import ExternalAgentSession

        agent = self.agent(name)
        with self._lock:
            found = self._sessions.get(name)
            if found is not None and found.agent == agent:
                return found
        if found is not None:
            found.close()
        fresh = ExternalAgentSession(agent, cwd=os.getcwd())
        with self._lock:
            self._sessions[name] = fresh
        return fresh

    def running(self) -> dict[str, ExternalAgentSession]:
        with self._lock:
            return dict(self._sessions)

    def stop(self, name: str | None = None) -> list[str]:
        """End the conversation (and process) with ``name``, or with every agent; the names."""
        with self._lock:
            names = [name] if name is not None else list(self._sessions)
            ended = [(n, self._sessions.pop(n)) for n in names if n in self._sessions]
        for _, session in ended:
            session.close()
        return [n for n, _ in ended]


_BY_SESSION: weakref.WeakKeyDictionary[Any, ExternalAgents] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def agents_of(session: Session) -> ExternalAgents:
    """The external agents of ``session`` (made on first use)."""
    needs_the_extra()
    with _LOCK:
        found = _BY_SESSION.get(session)
        if found is None:
            found = _BY_SESSION[session] = ExternalAgents()
        return found


def close_all(session: Session) -> None:
    """End every external agent of ``session`` (the extension is unloaded)."""
    with _LOCK:
        found = _BY_SESSION.get(session)
    if found is not None:
        found.stop()


def register_agent(
    session: Session,
    name: str,
    command: str,
    *args: str,
    env: dict[str, str] | None = None,
    title: str = "",
) -> ExternalAgent:
    """Register the agent ``name`` in ``session`` (see :func:`nbagent.notebook.register_agent`)."""
    try:
        return agents_of(session).registry.add(name, command, *args, env=env, title=title)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


# --- %agent acp ---------------------------------------------------------------------------------


def _listed(agents: ExternalAgents) -> str:
    from ...acp import KNOWN_AGENTS, resolve_command
    from ...errors import ExternalAgentError

    running = agents.running()
    lines = ["External agents (ACP): %agent --acp NAME PROMPT"]
    for agent in agents.registry.all():
        own = "yours" if agent.name not in KNOWN_AGENTS or agent != KNOWN_AGENTS[agent.name] else ""
        conversation = running.get(agent.name)
        state = (
            "running, in a conversation" if conversation is not None and conversation.alive else ""
        )
        try:
            resolve_command(agent)
            found = ""
        except ExternalAgentError:
            found = f"not installed: {agent.install}" if agent.install else "not installed"
        notes = ", ".join(x for x in (own, state, found) if x)
        lines.append(f"  {agent.name:<10} {agent.command_line}" + (f"  ({notes})" if notes else ""))
    lines.append("Register your own: %agent acp add NAME -- COMMAND [ARGS ...]")
    return "\n".join(lines)


def run_command(session: Session, _shell: Any, words: list[str]) -> None:
    """``%agent acp`` in its forms (see the grammar)."""
    agents = agents_of(session)
    if not words:
        print(_listed(agents))
    elif words[0] == "add":
        name, command, args = words[1], words[3], words[4:]
        try:
            agent = agents.registry.add(name, command, *args)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        print(f"{agent.name}: {agent.command_line} (%agent --acp {agent.name} PROMPT)")
    elif words[0] == "remove":
        if not agents.registry.remove(words[1]):
            raise UsageError(f"{words[1]!r} is not an agent you registered (see %agent acp)")
        agents.stop(words[1])
        print(f"forgot {words[1]}")
    else:  # stop [NAME]
        ended = agents.stop(words[1] if len(words) > 1 else None)
        print(f"ended {', '.join(ended)}" if ended else "no external agent is running")
