"""``%agent mcp add | list | remove``: MCP servers whose tools the session's agent can call.

::

    %agent mcp add NAME [--env VAR[=VALUE]]… [--timeout SECONDS] -- COMMAND ARGS…   (stdio)
    %agent mcp add NAME [--timeout SECONDS] --url URL                               (HTTP)
    %agent mcp list
    %agent mcp remove NAME

A server starts only when a person writes ``add``; ``remove``, ``%unload_ext nbagent`` and the
kernel's shutdown stop it. ``add`` with a name in use starts the new server first and stops the
old one only once the new one runs (so re-running the cell restarts the server). The server's
process gets a minimal environment: ``--env VAR`` passes the kernel's value of ``VAR`` (a token
stays out of the notebook), ``--env VAR=VALUE`` sets one.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from .render import code_span, fenced, safe_markdown
from .report import _show, _table

if TYPE_CHECKING:
    from ..mcp import MCPServer
    from .session import Session

__all__ = ["USAGE", "accepts", "run", "split"]

_SHADOWED = "tool {0!r}: a tool of the notebook has that name and is kept (rename one of them)"

USAGE = """\
%agent mcp add NAME [--env VAR[=VALUE]] [--timeout SECONDS] -- COMMAND ARGS...
%agent mcp add NAME [--timeout SECONDS] --url URL
%agent mcp list
%agent mcp remove NAME"""

_OPTIONS = {"--env", "--timeout", "--url"}


def split(line: str) -> list[str]:
    """The words of an ``%agent mcp …`` line, quoted as a shell would (no shell runs them)."""
    try:
        return shlex.split(line)
    except ValueError as exc:
        words = line.split()
        if words[1:2] in (["add"], ["list"], ["remove"]):
            raise UsageError(f"%agent mcp: {exc} (check the quotes)\n{USAGE}") from None
        return words  # not a subcommand: a prompt that starts with "mcp"


def accepts(words: list[str]) -> bool:
    """Whether the words after ``mcp`` are a subcommand (else the line is a prompt)."""
    if words == ["list"]:
        return True
    if len(words) == 2 and words[0] == "remove":
        return True
    if len(words) < 3 or words[0] != "add":
        return False
    return words[2] in _OPTIONS or words[2] == "--"


def run(session: Session, _shell: Any, words: list[str]) -> None:
    """Do what the words say (see :data:`USAGE`)."""
    if words == ["list"]:
        show(session)
    elif words[0] == "remove":
        _remove(session, words[1])
    else:
        _add(session, words[1], words[2:])


def _add(session: Session, name: str, words: list[str]) -> None:
    from ..errors import NbagentError
    from ..mcp import MCPLimits, mcp_server

    env: dict[str, str] = {}
    url: str | None = None
    timeout: float | None = None
    command: list[str] | None = None
    index = 0
    while index < len(words):
        word = words[index]
        if word == "--":
            command = words[index + 1 :]
            break
        if word not in _OPTIONS or index + 1 >= len(words):
            raise UsageError(f"%agent mcp add: unexpected {word!r}\n{USAGE}")
        value = words[index + 1]
        index += 2
        if word == "--url":
            url = value
        elif word == "--timeout":
            timeout = _seconds(value)
        else:
            key, sep, given = value.partition("=")
            if not sep:
                if key not in os.environ:
                    raise UsageError(f"--env {key}: the kernel has no environment variable {key}")
                given = os.environ[key]
            env[key] = given
    if (command is None) == (url is None) or command == []:
        raise UsageError(f"%agent mcp add {name}: give `-- COMMAND ARGS…` or `--url URL`\n{USAGE}")
    limits = MCPLimits(call_timeout=timeout) if timeout is not None else None
    try:
        server = mcp_server(name, command, url=url, env=env, limits=limits)
    except (NbagentError, ValueError) as exc:
        old = session.mcp_servers.get(name)
        still = f"\n(the server {name!r} that was running goes on)" if old is not None else ""
        raise UsageError(f"{exc}{still}") from None
    old = session.add_mcp_server(server)
    if old is not None:
        old.close()
    show(session, only=name)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise UsageError(f"--timeout needs a positive number of seconds, not {text!r}")
    return value


def _remove(session: Session, name: str) -> None:
    server = session.remove_mcp_server(name)
    if server is None:
        known = ", ".join(sorted(session.mcp_servers)) or "none"
        raise UsageError(f"no MCP server named {name!r}; running: {known}")
    print(f"stopped the MCP server {name!r} and removed its {len(server.origins)} tool(s)")


def show(session: Session, only: str | None = None) -> None:
    """The servers (or one): how each runs, its tools (nbagent name ← the server's), and the
    tools it offered that were not registered, with the reason."""
    servers = [s for n, s in sorted(session.mcp_servers.items()) if only in (None, n)]
    if not servers:
        _show(
            "No MCP servers: add one with `%agent mcp add NAME -- COMMAND ARGS…` "
            "or `%agent mcp add NAME --url URL`.",
            "No MCP servers: add one with %agent mcp add NAME -- COMMAND ARGS... "
            "or %agent mcp add NAME --url URL.",
        )
        return
    rows = [
        (
            s.name,
            s.status.splitlines()[0].rstrip(":"),
            f"{s.transport}: {s.target}",
            str(len(s.tools)),
            s.server_info or "",
        )
        for s in servers
    ]
    _table(("server", "status", "started with", "tools", "says it is"), rows)
    for server in servers:
        _details(server, session.mcp_shadowed.get(server.name, ()))


def _details(server: MCPServer, shadowed: Sequence[str]) -> None:
    blocks: list[str] = []  # Markdown paragraphs and lists
    plain: list[str] = []
    status = server.status
    if "\n" in status:  # what the process said on stderr before it ended
        first, _, rest = status.partition("\n")
        blocks.append(f"**{safe_markdown(server.name)}** {safe_markdown(first.rstrip(':'))}:")
        blocks.append(fenced(rest))
        plain.append(f"{server.name}: {status}")
    origins = server.origins
    if origins:
        blocks.append(
            f"Tools of **{safe_markdown(server.name)}** (nbagent name ← the server's name; "
            "each asks for approval unless a rule allows it):"
        )
        lines = [f"- {code_span(mine)} ← {code_span(theirs)}" for mine, theirs in origins.items()]
        blocks.append("\n".join(lines))
        plain.append(f"Tools of {server.name} (nbagent name <- the server's name):")
        plain.extend(f"  {mine} <- {theirs}" for mine, theirs in origins.items())
    rejected = [*server.rejected, *(_SHADOWED.format(name) for name in shadowed)]
    if rejected:
        blocks.append(f"Not registered from **{safe_markdown(server.name)}**:")
        blocks.append("\n".join(f"- {safe_markdown(reason)}" for reason in rejected))
        plain.append(f"Not registered from {server.name}:")
        plain.extend(f"  {reason}" for reason in rejected)
    if blocks:
        _show("\n\n".join(blocks), "\n".join(plain))
