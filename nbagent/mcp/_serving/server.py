"""An MCP server over streamable HTTP, on a thread of its own, for a :class:`ServedTools`.

The protocol is the official SDK's (its low-level ``Server`` and streamable HTTP session
manager); what this module adds is what a server that can run code in someone's kernel must
have, checked in this order for every HTTP request:

1. **The path**: only ``/mcp`` is served (404 for the rest).
2. **The bearer token** made for this start (``secrets``, 256 bits), compared in constant time
   (:func:`hmac.compare_digest`): 401 without it or with another. The token is registered with
   :func:`nbagent.redact.hide_exactly`, and no repr shows it.
3. **Host and Origin** (DNS rebinding): the SDK's checks, with the host and port this server
   listens on as the only ones allowed (:func:`allowed_names`; 421 for another Host, 403 for
   another Origin).
4. **The body**: at most ``max_body_bytes`` (413 past it, before it is parsed).
5. **Connections**: at most ``max_connections`` at once, each bounded in time (a complete
   request head within ``head_timeout``, its body within ``body_timeout``, ``idle_timeout``
   between requests, ``untrusted_lifetime`` until it shows the token); one past the limit
   takes the place of the oldest that has not shown the token, so connections without it never
   lock out a client that has it (:mod:`._serve_http`). At most ``max_calls`` tool calls are
   in progress (a call past it gets a tool error at once).

A call waits on its :class:`ServedTools` (the person, a rule, the tool); meanwhile the client gets
a progress notification every ``progress_interval`` seconds when it asked for progress, and a
client that closes its connection (or cancels) has its call cancelled: one that had not run
then never runs.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import secrets
import socket
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..._ground.extras import explained, missing
from ...content import ToolResult
from ...redact import forget_exactly, hide_exactly
from .content import error_content, mcp_result, mcp_tool
from .guard import PATH, Guard, gone_event
from .http import ConnectionBounds

if TYPE_CHECKING:
    import concurrent.futures
    from collections.abc import Callable

    from ...tools import Tool

__all__ = [
    "ServeError",
    "ServeSettings",
    "ServedTools",
    "ToolServer",
    "allowed_names",
    "is_loopback",
]

log = logging.getLogger("nbagent")


class ServeError(RuntimeError):
    """The server could not start (a bind refused, a bad setting): says why."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_names(host: str) -> list[str]:
    """The names a client may send in Host (and Origin) to a server bound at ``host``: the
    bound address itself; for 127.0.0.1 (or localhost) also ``localhost`` and ``[::1]``; for
    every address (``0.0.0.0``, ``::``) the loopback names and this machine's own name and
    addresses. Any other name is DNS rebinding's (or a mistake) and is refused."""
    bare = host.strip("[]")
    shown = f"[{bare}]" if ":" in bare else bare
    names = [shown]
    if bare in ("127.0.0.1", "localhost"):
        names = ["127.0.0.1", "localhost", "[::1]"]
    elif bare in ("0.0.0.0", "::"):
        names = ["127.0.0.1", "localhost", "[::1]"]
        try:
            machine = socket.gethostname()[:253]
            found = {str(info[4][0]) for info in socket.getaddrinfo(machine, None)[:32]}
        except (OSError, UnicodeError):
            machine, found = "", set()
        if machine:
            names.append(machine)
        for address in sorted(found):
            address = address.split("%", 1)[0]
            names.append(f"[{address}]" if ":" in address else address)
    return list(dict.fromkeys(names))


@dataclass(frozen=True)
class ServeSettings:
    """How a served session listens and what it allows (defaults in parentheses).

    ``host`` ("127.0.0.1"): another address than loopback needs ``expose=True``, which says
    that anyone who reaches it and holds the token may ask for the served tools; ``port`` (0:
    a free one); ``max_body_bytes`` (2 MiB) of one request; ``max_connections`` (64) HTTP
    connections at once; ``max_calls`` (16) tool calls in progress at once, waiting ones
    included; ``progress_interval`` (5 s) between two progress notifications of a waiting
    call; ``session_idle_timeout`` (30 min) before a silent client's session is dropped.
    Each connection (see :mod:`._serve_http`): ``head_timeout`` (10 s) to send a request head
    whole, ``body_timeout`` (30 s) to send its body, ``idle_timeout`` (5 s) of quiet between
    two requests, ``untrusted_lifetime`` (30 s) to live without showing the token.
    """

    host: str = "127.0.0.1"
    port: int = 0
    expose: bool = False
    max_body_bytes: int = 2 * 1024 * 1024
    max_connections: int = 64
    max_calls: int = 16
    progress_interval: float = 5.0
    session_idle_timeout: float = 30 * 60.0
    head_timeout: float = 10.0
    body_timeout: float = 30.0
    idle_timeout: float = 5.0
    untrusted_lifetime: float = 30.0
    #: For the conformance suite only: serve without a token (loopback only).
    no_token: bool = False

    def __post_init__(self) -> None:
        if not is_loopback(self.host) and not self.expose:
            raise ServeError(
                f"{self.host!r} is not a loopback address: serving there lets anyone who can "
                "reach it and holds the token ask for these tools (with the kernel tools, run "
                "code in this kernel). Say so explicitly: expose=True (--expose ADDRESS)."
            )
        if self.no_token and not is_loopback(self.host):
            raise ServeError("no_token is only for loopback addresses")
        for name in ("max_body_bytes", "max_connections", "max_calls"):
            if getattr(self, name) < 1:
                raise ServeError(f"{name} must be at least 1")
        for name in (
            "progress_interval",
            "session_idle_timeout",
            "head_timeout",
            "body_timeout",
            "idle_timeout",
            "untrusted_lifetime",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ServeError(f"{name} must be a positive number of seconds, not {value!r}")


class ServedTools(Protocol):
    """What the server serves (:class:`nbagent.loop._served.ServedCalls` is the one; this room
    cannot import the loop): the tools, a check before any card, and the call itself."""

    loop: asyncio.AbstractEventLoop

    def listed(self) -> list[Tool]:
        """The tools served now."""

    def check(self, name: str, arguments: Any) -> tuple[Tool, Any]:
        """The tool and checked arguments; a ``LookupError`` for a tool not served (a
        protocol error), a ``ValueError`` for arguments it refuses (a tool error)."""

    def submit(
        self,
        found: Tool,
        arguments: Any,
        *,
        client: str = "",
        max_calls: int = 16,
        on_progress: Callable[[ToolResult], None] | None = None,
    ) -> concurrent.futures.Future[ToolResult]:
        """Run one checked call on :attr:`loop`; cancelling the future stops it."""

    def client_seen(self, name: str) -> None:
        """A client that named itself in its ``initialize`` made a request (any thread)."""


class _Secret(str):
    """The token: a str whose repr never shows it."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<token hidden>"


class ToolServer:
    """An MCP server for ``calls`` (see the module docs): :meth:`start`, then :attr:`url`;
    :meth:`stop` ends it and every call still waiting (their cards say so)."""

    def __init__(self, calls: ServedTools, settings: ServeSettings | None = None) -> None:
        self.calls = calls
        self.settings = settings or ServeSettings()
        self._token = _Secret(secrets.token_urlsafe(32))
        hide_exactly(self._token)
        self._thread: threading.Thread | None = None
        self._server: Any = None
        self._ready = threading.Event()
        self._failed: BaseException | None = None
        self._socket: socket.socket | None = None
        self._inflight = 0
        self._inflight_lock = threading.Lock()
        self._futures: set[Any] = set()
        self.port = 0
        self.started_at = 0.0
        self.calls_refused = 0
        self.connected = threading.Event()  # set by the first request with the token
        self.bounds = ConnectionBounds(
            max_connections=self.settings.max_connections,
            head_timeout=self.settings.head_timeout,
            body_timeout=self.settings.body_timeout,
            untrusted_lifetime=self.settings.untrusted_lifetime,
        )
        self.on_connect: Any = None

    def __repr__(self) -> str:
        state = "serving" if self.running else "stopped"
        return f"<ToolServer {state} at {self.url or '(not started)'}>"

    @property
    def token(self) -> str:
        """The bearer token (its repr is hidden; show it only where a person asked for it)."""
        return self._token

    @property
    def url(self) -> str:
        if not self.port:
            return ""
        host = self.settings.host
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{self.port}{PATH}"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # --- starting and stopping ------------------------------------------------------------------

    def start(self, timeout: float = 20.0) -> None:
        """Bind, start the server thread, and return once it accepts connections."""
        if self._thread is not None:
            raise ServeError("this server was already started")
        lacking = missing("mcp", "Serving tools over MCP")
        if lacking is not None:
            raise ServeError(lacking)
        _quiet_logs()
        settings = self.settings
        family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
        # IPPROTO_TCP named: asyncio sets TCP_NODELAY on accepted sockets only when the
        # protocol says TCP, and without it each SSE answer waited ~40 ms for a delayed ACK
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((settings.host.strip("[]"), settings.port))
            sock.listen(128)
        except OSError as exc:
            sock.close()
            raise ServeError(f"cannot listen on {settings.host}:{settings.port}: {exc}") from None
        self._socket = sock
        self.port = sock.getsockname()[1]
        self._thread = threading.Thread(target=self._main, name="nbagent-serve", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout) or self._failed is not None:
            self.stop()
            failed = self._failed
            explained_ = explained(failed, "Serving tools over MCP") if failed else None
            if explained_ is not None:
                raise ServeError(explained_)
            raise ServeError(
                f"the MCP server could not start: {failed or 'it did not start in time'}"
            )
        self.started_at = time.time()

    def stop(self, timeout: float = 10.0) -> None:
        """End the server: open connections close, calls still waiting are cancelled."""
        for future in list(self._futures):
            future.cancel()
        server = self._server
        if server is not None:
            server.should_exit = True
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        if self._socket is not None:
            self._socket.close()
        forget_exactly(self._token)

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # said by start(), or logged once it served
            self._failed = exc
            self._ready.set()
            log.warning("nbagent serve: the server ended: %s", exc)

    async def _serve(self) -> None:
        import uvicorn

        from .http import bounded_protocol

        settings = self.settings
        config = uvicorn.Config(
            self._asgi(),
            http=bounded_protocol(self.bounds),
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="on",
            # the connections are capped by bounded_protocol; this bounds the requests still
            # being answered (one a connection, and those of connections just closed)
            limit_concurrency=2 * settings.max_connections,
            timeout_keep_alive=settings.idle_timeout,  # type: ignore[arg-type]
            ws="none",
            timeout_graceful_shutdown=2,
        )
        server = uvicorn.Server(config)
        self._server = server
        original = server.startup

        async def startup(sockets: Any = None) -> None:
            await original(sockets=sockets)
            self._ready.set()

        server.startup = startup  # type: ignore[method-assign]
        assert self._socket is not None
        await server.serve(sockets=[self._socket])

    # --- the application ------------------------------------------------------------------------

    def _asgi(self) -> Any:
        from mcp.server.lowlevel.server import Server
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
        from mcp.server.transport_security import TransportSecuritySettings

        from ..._version import __version__

        server: Server[Any] = Server(
            "nbagent",
            version=__version__,
            title="nbagent notebook",
            instructions=(
                "Tools of a Jupyter notebook. A person watches each call in the notebook and "
                "may approve, edit or deny it; a denial says why."
            ),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        port = self.port
        hosts = [f"{name}:{port}" for name in allowed_names(self.settings.host)]
        origins = [f"http://{host}" for host in hosts]
        manager = StreamableHTTPSessionManager(
            server,
            security_settings=TransportSecuritySettings(
                enable_dns_rebinding_protection=True,
                allowed_hosts=hosts,
                allowed_origins=origins,
            ),
            max_request_body_size=self.settings.max_body_bytes,
            session_idle_timeout=self.settings.session_idle_timeout,
            max_sessions=max(1, self.settings.max_connections),
        )
        guard = Guard(manager.handle_request, self)

        async def app(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "lifespan":
                while True:
                    message = await receive()
                    if message["type"] == "lifespan.startup":
                        self._manager_run = manager.run()
                        await self._manager_run.__aenter__()
                        await send({"type": "lifespan.startup.complete"})
                    elif message["type"] == "lifespan.shutdown":
                        await self._manager_run.__aexit__(None, None, None)
                        await send({"type": "lifespan.shutdown.complete"})
                        return
            await guard(scope, receive, send)

        return app

    async def _list_tools(self, ctx: Any, _params: Any) -> Any:
        import mcp_types as types

        self.calls.client_seen(_client_name(ctx))  # known from its initialize on
        tools = self.calls.listed()  # on this thread: a busy kernel does not hold up a list
        return types.ListToolsResult(tools=[mcp_tool(t) for t in tools])

    async def _call_tool(self, ctx: Any, params: Any) -> Any:
        import mcp_types as types
        from mcp.shared.exceptions import MCPError

        name, arguments = params.name, params.arguments
        try:
            found, value = self.calls.check(name, arguments)
        except LookupError as exc:  # no such tool now: the protocol's error
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        except ValueError as exc:  # arguments refused before any card: a tool error
            return error_content(str(exc))
        with self._inflight_lock:
            if self._inflight >= self.settings.max_calls:
                self.calls_refused += 1
                return error_content(
                    f"Too many calls in progress ({self.settings.max_calls}): this one was "
                    "not run; try again when one has ended."
                )
            self._inflight += 1
        future = None
        progress = _Progress(ctx, asyncio.get_running_loop())
        try:
            client = _client_name(ctx)
            future = self.calls.submit(
                found,
                value,
                client=client,
                max_calls=self.settings.max_calls,
                on_progress=progress.from_tool,
            )
            self._futures.add(future)
            result = await self._await(ctx, future, progress)
        finally:
            with self._inflight_lock:
                self._inflight -= 1
            if future is not None:
                self._futures.discard(future)
                if not future.done():
                    future.cancel()
        if result is None:
            return error_content("The call was cancelled before it ended; nothing more of it runs.")
        return mcp_result(result, found)

    async def _await(self, ctx: Any, future: Any, progress: _Progress) -> ToolResult | None:
        """The call's result; progress while it waits; None when the client went away."""
        gone = gone_event(ctx)
        waiting = asyncio.wrap_future(future)
        started = time.monotonic()
        interval = self.settings.progress_interval
        while True:
            watchers: set[Any] = {waiting}
            gone_task = None
            if gone is not None:
                gone_task = asyncio.ensure_future(gone.wait())
                watchers.add(gone_task)
            done, _ = await asyncio.wait(watchers, timeout=interval, return_when="FIRST_COMPLETED")
            if gone_task is not None and not gone_task.done():
                gone_task.cancel()
            if waiting in done:
                if waiting.cancelled():
                    return None
                result: ToolResult = waiting.result()
                return result
            if gone_task is not None and gone_task in done:
                future.cancel()
                return None
            if time.monotonic() - progress.last < interval / 2:
                continue  # the tool itself just said how it goes
            elapsed = time.monotonic() - started
            if not await progress.send(f"waiting in the notebook ({elapsed:.0f} s)"):
                future.cancel()  # the client's stream is gone: it will not read the answer
                return None


class _Progress:
    """A call's progress notifications: numbered 1, 2, 3 … (the protocol wants them to grow),
    each with a message: the tool's own update, or that the call still waits."""

    def __init__(self, ctx: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.ctx = ctx
        self.loop = loop
        self.count = 0
        self.last = 0.0

    async def send(self, message: str) -> bool:
        self.count += 1
        self.last = time.monotonic()
        try:
            await self.ctx.session.report_progress(float(self.count), None, message[:500])
        except Exception:
            return False
        return True

    def from_tool(self, update: ToolResult) -> None:
        """A ``context.update`` of the tool (on the calls' loop): sent from the server's."""
        text = update.text or "working"
        try:
            asyncio.run_coroutine_threadsafe(self.send(text), self.loop)
        except RuntimeError:  # the server has stopped
            pass


def _quiet_logs() -> None:
    """No log record of the SDK's or uvicorn's on stderr (in a kernel: whichever cell runs)
    unless the person configured logging; what matters shows on the cards."""
    from .._reasons import quiet_sdk_logging

    quiet_sdk_logging()
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
            logger.addHandler(logging.NullHandler())


def _client_name(ctx: Any) -> str:
    try:
        info = ctx.session.client_params.client_info
        return f"{info.name} {info.version}".strip()[:80]
    except AttributeError:
        return ""
