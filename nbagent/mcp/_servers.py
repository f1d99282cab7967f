"""MCP servers as nbagent tools: :class:`MCPServer`, :func:`mcp_server` that starts or connects
to one, and closing them (each, several at once, all at exit). What the person sees of them is
in :mod:`nbagent.mcp`'s docstring; the connection itself is :mod:`._connection`'s.
"""

from __future__ import annotations

import shlex
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from ._limits import MCPLimits
from ._oauth import OAuth

if TYPE_CHECKING:
    from ..tools import Tool
    from ._connection import Connection

__all__ = ["MCPServer", "close_all", "close_servers", "mcp_server", "tool_name"]

_live: weakref.WeakSet[MCPServer] = weakref.WeakSet()
_exit_hook = threading.Lock()
_exit_registered = False


def tool_name(server: str, name: str) -> str:
    """The nbagent name of the MCP tool ``name`` on ``server`` (``server__name``, made safe)."""
    from ._convert import tool_name as make

    return make(server, name)


class MCPServer:
    """A running MCP server and its tools. Close it (or use ``with``) to stop the server.

    Made by :func:`mcp_server`. ``tools`` is the current list (it changes when the server says
    its list changed); ``rejected`` says which of the server's tools were not registered and
    why; ``status`` is ``"running"`` or what happened to it (exited, failed, closed).
    """

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._listeners: list[Callable[[MCPServer], None]] = []
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self._connection.name

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The server's tools as nbagent Tools (a snapshot; read it again after a change)."""
        return self._connection.tools

    @property
    def rejected(self) -> tuple[str, ...]:
        """One message per tool that was not registered (server, tool, JSON pointer, reason)."""
        return self._connection.rejected

    @property
    def origins(self) -> dict[str, str]:
        """Each tool's nbagent name mapped to its name on the server."""
        return dict(self._connection.origins)

    @property
    def status(self) -> str:
        return self._connection.status()

    @property
    def running(self) -> bool:
        return self._connection.state == "running"

    @property
    def transport(self) -> str:
        """``"stdio"`` (a command nbagent started) or ``"http"`` (streamable HTTP at a URL)."""
        return "http" if self._connection.target.url is not None else "stdio"

    @property
    def target(self) -> str:
        """The command line or URL (never the environment, headers, or a URL's credentials)."""
        parts = self._connection.describe()
        return parts[0] if self.transport == "http" else shlex.join(parts)

    @property
    def server_info(self) -> str | None:
        """The name and version the server gave, when it gave them."""
        return self._connection.server_info

    @property
    def pid(self) -> int | None:
        """The server process's id (stdio servers while they run), else None."""
        return self._connection.pid

    @property
    def signed_in(self) -> bool:
        """Whether nbagent holds a token for the server (OAuth; False for the others)."""
        signer = self._connection.signer
        return signer is not None and signer.signed_in

    @property
    def sign_in_status(self) -> str:
        """``"signed in, expires at 14:05 (in 58 min)"``, ``"not signed in"``, ``"sign-in
        needed"`` …; empty for a server that does not sign in with OAuth."""
        signer = self._connection.signer
        return signer.status() if signer is not None else ""

    @property
    def sign_in_problem(self) -> str | None:
        """Why the last sign-in failed or was refused (None when it did not, or no OAuth)."""
        signer = self._connection.signer
        return signer.problem if signer is not None else None

    def sign_in(self, open_link: Callable[[str], object] | None = None) -> None:
        """Sign in again now (after a refresh failed, to change accounts): the tokens held are
        dropped and the sign-in runs from this thread, as at the start (``open_link`` as in
        :class:`OAuth`; default: the server's own, else the notebook's or the terminal's).
        A sign-in that another request completes while this one waits is kept: it is the one
        asked for. Raises :class:`~nbagent.errors.MCPSignInError` saying why it did not
        succeed."""
        self._connection.sign_in(open_link)

    def sign_out(self) -> None:
        """Forget the server's tokens (they are not revoked at the server; they expire). The
        next request that needs them says how to sign in again."""
        self._connection.sign_out()

    def on_change(self, callback: Callable[[MCPServer], None]) -> Callable[[], None]:
        """Call ``callback(server)`` whenever the tool list changed; returns an unsubscribe.

        It runs on the server's own thread: keep it short, and lock what it shares.
        """
        with self._lock:
            self._listeners.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._listeners:
                    self._listeners.remove(callback)

        return unsubscribe

    def _changed(self) -> None:
        import logging

        with self._lock:
            listeners = list(self._listeners)
        for callback in listeners:
            try:
                callback(self)
            except Exception:  # a listener's bug must not stop the others or the server
                logging.getLogger("nbagent").exception("an MCP on_change callback raised")

    def close(self) -> None:
        """Stop the server: its process (and the processes it started) end and are reaped."""
        self._connection.close()
        _live.discard(self)

    def _close_soon(self) -> Callable[[], None]:
        """Ask the server to stop now; the returned function waits until it has."""
        _live.discard(self)
        return self._connection.close(wait=False)

    def __enter__(self) -> MCPServer:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools)

    def __repr__(self) -> str:
        return (
            f"<MCPServer {self.name!r} {self.transport} {self.status.splitlines()[0]}, "
            f"{len(self.tools)} tools>"
        )


def mcp_server(
    name: str,
    command: Sequence[str] | str | None = None,
    *,
    url: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    headers: Mapping[str, str] | None = None,
    auth: OAuth | bool | None = None,
    needs_approval: bool = True,
    limits: MCPLimits | None = None,
) -> MCPServer:
    """Start (``command``, over stdio) or connect to (``url``, streamable HTTP) an MCP server.

    Blocks until the server has answered the handshake and listed its tools, then returns an
    :class:`MCPServer` whose ``tools`` go to an :class:`~nbagent.Agent` like any others.
    ``command`` is a list of arguments, or one string split like a shell would (no shell
    runs it). The process gets only a minimal environment (``PATH``, ``HOME`` …) plus
    ``env``: pass what the server needs (tokens) explicitly. ``headers`` go with every HTTP
    request. ``auth`` is how to sign in when a server reached by URL asks for authorization
    (OAuth 2.1): an :class:`OAuth`, ``False`` for never, or None (the default): ``OAuth()``,
    unless ``headers`` already carry an ``Authorization``. ``needs_approval`` (default True)
    applies to every tool of the server.
    Raises :class:`~nbagent.errors.MCPServerError` saying why the server could not be used
    (missing command, crash on start, no answer within ``limits.start_timeout`` …), and
    :class:`~nbagent.errors.MCPSignInError` when signing in did not succeed.
    """
    from .._ground.extras import missing
    from ..errors import MCPServerError
    from ._connection import Connection, Target
    from ._convert import check_server_name

    check_server_name(name)
    lacking = missing("mcp", "Connecting to MCP servers")
    if lacking is not None:
        raise MCPServerError(lacking)
    if (command is None) == (url is None):
        raise ValueError("give the server's command (stdio) or its url (streamable HTTP), not both")
    if isinstance(command, str):
        command = shlex.split(command)
    if command is not None:
        if not command or not all(isinstance(part, str) and part for part in command):
            raise ValueError(f"an MCP server command is a non-empty list of strings: {command!r}")
    elif not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError("an MCP server url starts with http:// or https://")
    given = dict(headers or {})
    target = Target(
        command=tuple(command or ()),
        url=url,
        env=dict(env or {}),
        cwd=cwd,
        headers=given,
        auth=_auth(auth, url, given),
        auth_given=isinstance(auth, OAuth),
    )
    holder: list[MCPServer] = []
    connection = Connection(
        name,
        target,
        limits or MCPLimits(),
        needs_approval,
        on_tools=lambda: holder[0]._changed() if holder else None,
    )
    server = MCPServer(connection)
    holder.append(server)
    _close_at_exit()
    connection.start()
    _live.add(server)
    return server


def _auth(auth: OAuth | bool | None, url: str | None, headers: Mapping[str, str]) -> OAuth | None:
    """The sign-in of a server: only over HTTP, and not over a token the headers carry."""
    if auth is not None and not isinstance(auth, (OAuth, bool)):
        raise ValueError(f"auth= takes an OAuth, True, False or None, not {auth!r}")
    if url is None:
        if isinstance(auth, OAuth) or auth is True:
            raise ValueError("auth= is for a server reached by url (stdio servers get env=)")
        return None
    if auth is False:
        return None
    if isinstance(auth, OAuth):
        return auth
    if auth is None and any(name.lower() == "authorization" for name in headers):
        return None
    return OAuth()


def close_servers(servers: Sequence[MCPServer]) -> None:
    """Close several servers at once (their grace periods run side by side)."""
    waits = []
    for server in servers:
        try:
            waits.append(server._close_soon())
        except Exception:  # closing the others matters more
            continue
    for wait in waits:
        wait()


def close_all() -> None:
    """Close every server still open in this process (also done at interpreter exit)."""
    close_servers(list(_live))


def _close_at_exit() -> None:
    global _exit_registered
    with _exit_hook:
        if not _exit_registered:
            import atexit

            atexit.register(close_all)
            _exit_registered = True
