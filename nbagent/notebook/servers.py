"""``%agent mcp add | list | remove | login | logout``: MCP servers whose tools the session's
agent can call.

::

    %agent mcp add NAME [--env VAR[=VALUE]]… [--timeout SECONDS] [--max-timeout SECONDS]
                   -- COMMAND ARGS…   (stdio)
    %agent mcp add NAME [--timeout SECONDS] [--max-timeout SECONDS] [--header 'NAME: VALUE']…
                        [--client-id ID] [--client-secret '$VAR'] [--scope SCOPES] --url URL
    %agent mcp list
    %agent mcp remove NAME
    %agent mcp login NAME | logout NAME

A server starts only when a person writes ``add``; ``remove``, ``%unload_ext nbagent`` and the
kernel's shutdown stop it. ``add`` with a name in use starts the new server first and stops the
old one only once the new one runs (so re-running the cell restarts the server). The server's
process gets a minimal environment: ``--env VAR`` passes the kernel's value of ``VAR`` (a token
stays out of the notebook), ``--env VAR=VALUE`` sets one.

Over HTTP, a server that asks for authorization is signed in to with OAuth (the link shows in
the cell; see :mod:`.signin`); ``login`` signs in again, ``logout`` forgets the tokens.
``--header`` sends a header with every request: ``$VAR`` or ``${VAR}`` in its value is the
kernel's environment variable, and a credential header (``Authorization``, ``Cookie``, a name
with ``key``, ``token`` or ``secret``) must take its secret from one, so that the secret never
sits in the notebook; it is hidden wherever nbagent shows text. A server given an
``Authorization`` header is not signed in to with OAuth.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from .command.grammar import GRAMMARS
from .reports.classreport import _show, _table
from .shown.render import code_span, fenced, md_text

if TYPE_CHECKING:
    from ..mcp import MCPServer
    from .core.session import Session

__all__ = ["USAGE", "run", "run_awaited"]

_SHADOWED = "tool {0!r}: a tool of the notebook has that name and is kept (rename one of them)"

#: The forms of ``%agent mcp`` (its grammar's, so the usage and the parser agree).
USAGE = GRAMMARS["mcp"].usage()

_OPTIONS = {
    *("--env", "--timeout", "--max-timeout", "--url", "--header"),
    *("--client-id", "--client-secret", "--scope"),
}
_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}")
_CREDENTIAL_HEADER = re.compile(r"authorization|cookie|key|token|secret", re.IGNORECASE)


def run(session: Session, shell: Any, words: list[str]) -> None:
    """Do what the words say, as the grammar matched them (see :data:`USAGE`)."""
    if words[0] in ("add", "login") and _course_refuses(shell, words[1]):
        return
    if words == ["list"]:
        show(session)
    elif words[0] == "remove":
        _remove(session, words[1])
    elif words[0] in ("login", "logout"):
        _sign(session, words[0], words[1])
    else:
        _add(session, words[1], words[2:])


def _course_refuses(shell: Any, name: str) -> bool:
    """A course policy with ``mcp = false``: say so (one sentence, naming the rule and the
    file) instead of starting or signing in to a server."""
    from .policy.coursegate import current

    course = current(shell)
    if course.policy is None or course.rules.mcp:
        return False
    print(
        f"MCP servers are off in this notebook, so {name!r} was not started "
        f"({course.where('mcp')})."
    )
    return True


async def run_awaited(session: Session, shell: Any, words: list[str]) -> None:
    """:func:`run` in an awaiting cell: what may wait for a sign-in (``add --url``,
    ``login``) waits on a worker, so that interrupting the kernel stops it."""
    import asyncio

    from ..mcp._limits import THREAD_JOIN
    from ..mcp._signin import in_a_worker
    from .core.runner import CellInterrupted

    signs_in = words[:1] == ["login"] or (words[:1] == ["add"] and "--url" in words)
    if not signs_in:
        run(session, shell, words)
        return
    if _course_refuses(shell, words[1]):
        return
    try:
        await in_a_worker(lambda: run(session, shell, words), THREAD_JOIN)
    except asyncio.CancelledError:
        said = (
            f"the sign-in to the MCP server {words[1]!r} was stopped by a kernel interrupt: "
            "it is not signed in"
            if words[0] == "login"
            else f"adding the MCP server {words[1]!r} was stopped by a kernel interrupt: it "
            "was not added"
            + (" (the one that was running goes on)" if words[1] in session.mcp_servers else "")
        )
        raise CellInterrupted(said) from None


def _add(session: Session, name: str, words: list[str]) -> None:
    from ..errors import NbagentError
    from ..mcp import MCPLimits, OAuth, mcp_server

    env: dict[str, str] = {}
    headers: dict[str, str] = {}
    oauth: dict[str, str] = {}
    url: str | None = None
    timeout: float | None = None
    longest: float | None = None
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
        elif word == "--header":
            key, given = _header(value)
            headers[key] = given
        elif word in ("--client-id", "--scope"):
            oauth[word[2:].replace("-", "_")] = value
        elif word == "--client-secret":
            oauth["client_secret"] = _secret(value, "--client-secret")
        elif word == "--timeout":
            timeout = _seconds(value, word)
        elif word == "--max-timeout":
            longest = _seconds(value, word)
        else:
            key, sep, given = value.partition("=")
            if not sep:
                if key not in os.environ:
                    raise UsageError(f"--env {key}: the kernel has no environment variable {key}")
                given = os.environ[key]
            env[key] = given
    if (command is None) == (url is None) or command == []:
        raise UsageError(f"%agent mcp add {name}: give `-- COMMAND ARGS…` or `--url URL`\n{USAGE}")
    if command is not None and (headers or oauth):
        raise UsageError("--header, --client-id, --client-secret and --scope go with --url")
    limits = None
    if timeout is not None or longest is not None:
        silence = timeout if timeout is not None else MCPLimits.call_timeout
        # a long silence allowed alone: the whole call may take at least as long
        whole = longest if longest is not None else max(silence, MCPLimits.max_call_timeout)
        try:
            limits = MCPLimits(call_timeout=silence, max_call_timeout=whole)
        except ValueError as exc:
            raise UsageError(f"%agent mcp add {name}: {exc} (--timeout, --max-timeout)") from None
    try:
        auth = OAuth(**oauth) if oauth else None  # type: ignore[arg-type]
        server = mcp_server(
            name, command, url=url, env=env, headers=headers, auth=auth, limits=limits
        )
    except (NbagentError, ValueError) as exc:
        old = session.mcp_servers.get(name)
        still = f"\n(the server {name!r} that was running goes on)" if old is not None else ""
        raise UsageError(f"{exc}{still}") from None
    old = session.add_mcp_server(server)
    if old is not None:
        old.close()
    show(session, only=name)


def _expand(text: str, what: str) -> tuple[str, bool]:
    """``text`` with ``$VAR`` / ``${VAR}`` replaced by the kernel's environment variables,
    and whether it named any."""
    named = False

    def value(match: re.Match[str]) -> str:
        nonlocal named
        key = match.group(1) or match.group(2)
        if key not in os.environ:
            raise UsageError(f"{what}: the kernel has no environment variable {key}")
        named = True
        return os.environ[key]

    expanded = _VARIABLE.sub(value, text)
    if any(c in expanded for c in "\r\n\0"):
        raise UsageError(f"{what}: the value holds a line break or a NUL, which a header cannot")
    return expanded, named


def _header(text: str) -> tuple[str, str]:
    """One ``--header 'NAME: VALUE'``, its secret (if any) from the environment."""
    from ..redact import hide_exactly

    key, sep, raw = text.partition(":")
    key = key.strip()
    if not sep or not _HEADER_NAME.fullmatch(key):
        raise UsageError(
            f"--header takes 'NAME: VALUE' (a header name, a colon, its value)\n{USAGE}"
        )
    value, named = _expand(raw.strip(), f"--header {key}")
    if _CREDENTIAL_HEADER.search(key):
        if not named:
            raise UsageError(
                f"--header {key}: write the secret as an environment variable of the kernel "
                f"(for example --header '{key}: Bearer $MY_TOKEN'), so that it never sits in "
                "the notebook"
            )
        hide_exactly(*value.split())  # hidden wherever nbagent shows text
    return key, value


def _secret(text: str, what: str) -> str:
    from ..redact import hide_exactly

    value, named = _expand(text, what)
    if not named:
        raise UsageError(f"{what}: give it as an environment variable of the kernel ('$VAR')")
    hide_exactly(value)
    return value


def _sign(session: Session, verb: str, name: str) -> None:
    """``login`` (sign in again now, from this cell) or ``logout`` (forget the tokens)."""
    from ..errors import NbagentError

    server = session.mcp_servers.get(name)
    if server is None:
        known = ", ".join(sorted(session.mcp_servers)) or "none"
        raise UsageError(f"no MCP server named {name!r}; running: {known}")
    try:
        if verb == "login":
            server.sign_in()
        else:
            server.sign_out()
    except NbagentError as exc:
        raise UsageError(str(exc)) from None
    if verb == "logout":
        print(f"signed out of the MCP server {name!r}: its tokens are forgotten")
    show(session, only=name)


def _seconds(text: str, option: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise UsageError(f"{option} needs a positive number of seconds, not {text!r}")
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
    rows: list[tuple[str, ...]] = [
        (
            s.name,
            s.status.splitlines()[0].rstrip(":"),
            f"{s.transport}: {s.target}",
            str(len(s.tools)),
            s.server_info or "",
        )
        for s in servers
    ]
    header: tuple[str, ...] = ("server", "status", "started with", "tools", "says it is")
    if any(s.sign_in_status for s in servers):  # a column only where someone signs in
        header = (*header, "sign-in")
        rows = [(*row, s.sign_in_status) for row, s in zip(rows, servers, strict=True)]
    _table(header, rows)
    for server in servers:
        _details(server, session.mcp_shadowed.get(server.name, ()))


def _details(server: MCPServer, shadowed: Sequence[str]) -> None:
    blocks: list[str] = []  # Markdown paragraphs and lists
    plain: list[str] = []
    status = server.status
    if "\n" in status:  # what the process said on stderr before it ended
        first, _, rest = status.partition("\n")
        blocks.append(f"**{md_text(server.name)}** {md_text(first.rstrip(':'))}:")
        blocks.append(fenced(rest))
        plain.append(f"{server.name}: {status}")
    trouble = server.sign_in_problem
    if trouble:
        blocks.append(f"**{md_text(server.name)}** {md_text(trouble)}")
        plain.append(f"{server.name} {trouble}")
    origins = server.origins
    if origins:
        blocks.append(
            f"Tools of **{md_text(server.name)}** (nbagent name ← the server's name; "
            "each asks for approval unless a rule allows it):"
        )
        lines = [f"- {code_span(mine)} ← {code_span(theirs)}" for mine, theirs in origins.items()]
        blocks.append("\n".join(lines))
        plain.append(f"Tools of {server.name} (nbagent name <- the server's name):")
        plain.extend(f"  {mine} <- {theirs}" for mine, theirs in origins.items())
    rejected = [*server.rejected, *(_SHADOWED.format(name) for name in shadowed)]
    if rejected:
        blocks.append(f"Not registered from **{md_text(server.name)}**:")
        blocks.append("\n".join(f"- {md_text(reason)}" for reason in rejected))
        plain.append(f"Not registered from {server.name}:")
        plain.extend(f"  {reason}" for reason in rejected)
    if blocks:
        _show("\n\n".join(blocks), "\n".join(plain))
