"""Which external agents there are: the known ones (Claude Code, Codex, Gemini CLI, OpenCode)
and the person's own, each as the command that starts it speaking ACP on stdio.

A known agent is named by the program its own package installs, never fetched on the fly: an
agent that is not on ``PATH`` is refused in one sentence with the line that installs it (a
cell never downloads code by itself). A person who prefers ``npx`` registers it under the same
name (``%agent acp add claude -- npx @zed-industries/claude-code-acp``).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..errors import ExternalAgentError

__all__ = ["KNOWN_AGENTS", "AgentRegistry", "ExternalAgent", "resolve_command"]

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class ExternalAgent:
    """One agent that speaks ACP on stdio: ``command`` and ``args`` start it, ``env`` is added
    to the kernel's environment for it (values are never shown: they may be keys), ``install``
    is the line that installs it, for the sentence when it is missing."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    title: str = ""
    install: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ValueError(
                f"an agent's name is a word of letters, digits, '_', '.' or '-', not {self.name!r}"
            )
        if not isinstance(self.command, str) or not self.command.strip():
            raise ValueError(f"agent {self.name}: give the command that starts it")
        object.__setattr__(self, "args", tuple(str(a) for a in self.args))
        object.__setattr__(self, "env", tuple((str(k), str(v)) for k, v in self.env))

    @property
    def label(self) -> str:
        """How a person names it: its title and name (``Claude Code (claude)``)."""
        return f"{self.title} ({self.name})" if self.title else self.name

    @property
    def command_line(self) -> str:
        """The command as a person would type it (environment names only, never values)."""
        names = " ".join(f"{k}=…" for k, _ in self.env)
        return " ".join(x for x in (names, self.command, *self.args) if x)


def _known(name: str, title: str, command: str, args: Iterable[str], install: str) -> ExternalAgent:
    return ExternalAgent(name, command, tuple(args), title=title, install=install)


#: The agents nbagent knows how to start, by name.
KNOWN_AGENTS: dict[str, ExternalAgent] = {
    agent.name: agent
    for agent in (
        _known(
            "claude",
            "Claude Code",
            "claude-code-acp",
            (),
            "npm install -g @zed-industries/claude-code-acp",
        ),
        _known("codex", "Codex", "codex-acp", (), "npm install -g @zed-industries/codex-acp"),
        _known(
            "gemini",
            "Gemini CLI",
            "gemini",
            ("--experimental-acp",),
            "npm install -g @google/gemini-cli",
        ),
        _known("opencode", "OpenCode", "opencode", ("acp",), "npm install -g opencode-ai"),
    )
}


class AgentRegistry:
    """The agents a session can start: the known ones, and those the person registered (which
    take a known agent's name over)."""

    def __init__(self, own: Mapping[str, ExternalAgent] | None = None) -> None:
        self._own: dict[str, ExternalAgent] = dict(own or {})

    def add(
        self,
        name: str,
        command: str,
        *args: str,
        env: Mapping[str, str] | None = None,
        title: str = "",
    ) -> ExternalAgent:
        """Register (or replace) the agent ``name``: ``command args…``, with ``env`` added."""
        agent = ExternalAgent(name, command, tuple(args), tuple((env or {}).items()), title=title)
        self._own[name] = agent
        return agent

    def remove(self, name: str) -> bool:
        """Forget the person's agent ``name`` (a known one stays); whether there was one."""
        return self._own.pop(name, None) is not None

    def get(self, name: str) -> ExternalAgent:
        """The agent ``name``; a clear error naming the ones there are."""
        found = self._own.get(name) or KNOWN_AGENTS.get(name)
        if found is None:
            raise ExternalAgentError(
                f"no external agent is called {name!r}: the known ones are "
                f"{', '.join(sorted(self.names()))}; register your own with "
                f"%agent acp add {name if _NAME.fullmatch(name) else 'NAME'} -- COMMAND [ARGS]"
            )
        return found

    def names(self) -> list[str]:
        return sorted({*KNOWN_AGENTS, *self._own})

    def own(self) -> list[ExternalAgent]:
        """The agents the person registered, by name."""
        return [self._own[n] for n in sorted(self._own)]

    def all(self) -> list[ExternalAgent]:
        return [self.get(n) for n in self.names()]


def resolve_command(agent: ExternalAgent) -> str:
    """The program that starts ``agent`` (its full path); an :class:`ExternalAgentError`
    with the install line when it is not installed here."""
    path = dict(agent.env).get("PATH", os.environ.get("PATH", ""))
    found = shutil.which(agent.command, path=path)
    if found is not None:
        return found
    how = (
        f": {agent.install}"
        if agent.install
        else ": install it, or register the command that starts it with "
        f"%agent acp add {agent.name} -- COMMAND [ARGS]"
    )
    raise ExternalAgentError(
        f"{agent.label} is not installed here ({agent.command} is not on PATH){how}"
    )
