"""The loopback redirect: where the browser comes back from signing in, with the code.

A native app (RFC 8252 §7.3) listens on the loopback interface, on a port of its choosing, and
the authorization server sends the browser to ``http://127.0.0.1:PORT/callback?code=…&state=…``.
:class:`LoopbackListener` binds ``127.0.0.1`` only, on the event loop of the server's
connection, and reads every request as untrusted: a request head of at most
:data:`MAX_HEAD_BYTES`, read within :data:`HEAD_TIMEOUT` seconds, at most
:data:`MAX_CONNECTIONS` at once. Only ``GET /callback`` counts, and only while a sign-in waits;
its ``state`` must be the one nbagent sent, else the sign-in fails at once and nothing goes to
the token endpoint (an out-of-date link, or a request nbagent did not start). The page the
browser gets says only what happened, in fixed words naming the server: nothing from the
request is echoed.

:func:`read_redirect` reads the same answer from an address pasted by a person (the browser's
address bar, where the loopback cannot be reached), with the same checks.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import re
import socket
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

from ..redact import hide_exactly

if TYPE_CHECKING:
    from mcp.client.auth import AuthorizationCodeResult

__all__ = [
    "HEAD_TIMEOUT",
    "MAX_CONNECTIONS",
    "MAX_HEAD_BYTES",
    "PATH",
    "LoopbackListener",
    "RedirectRefused",
    "read_redirect",
]

#: The largest request head read (request line and headers); a larger one is answered 431.
MAX_HEAD_BYTES = 8 * 1024
#: Seconds a connection has to send its request head.
HEAD_TIMEOUT = 10.0
#: Connections served at once; more are closed unread.
MAX_CONNECTIONS = 8
PATH = "/callback"
# An OAuth error code (RFC 6749 §4.1.2.1) is a short ASCII token; anything else is not shown.
_ERROR_CODE = re.compile(r"[a-z_]{1,40}")

# The page the browser shows: a title for its tab, a heading, one sentence. The server's name
# is nbagent's own (checked when it was added), escaped all the same; nothing comes from the
# request. "Received", not "signed in": the code is exchanged for a token after this answer,
# and the notebook says how that ended.
_PAGE = (
    "<!doctype html><html lang=en><meta charset=utf-8>"
    "<meta name=viewport content='width=device-width'><title>{title} · nbagent</title>"
    "<body style='font-family:system-ui,sans-serif;max-width:36em;margin:4em auto;"
    "padding:0 1em;line-height:1.5;color:#222'><h1 style='font-size:1.4em'>{title}</h1>"
    "<p>{text}</p></body></html>"
)
_SIGNED_IN = (
    "Sign-in received",
    "Your sign-in {to} reached nbagent, which finishes it in the notebook: the notebook "
    "says when you are signed in. You can close this tab.",
)
_REFUSED = (
    "Sign-in not completed",
    "The sign-in {to} did not go through; the notebook says why. You can close this tab.",
)
_NOBODY = (
    "No sign-in is waiting",
    "No sign-in is waiting here: it has ended, or this address is from an earlier one. "
    "Start it again from the notebook.",
)


def _page(words: tuple[str, str], server: str) -> bytes:
    """The page for ``words`` (a title and a sentence), naming ``server`` if known."""
    to = f"to the MCP server {html.escape(server)}" if server else "to an MCP server"
    title, text = words
    return _PAGE.format(title=title, text=text.format(to=to)).encode()


class RedirectRefused(Exception):
    """The browser came back without a usable code (the message says why, never the code)."""


def _one(params: dict[str, list[str]], name: str) -> str | None:
    values = params.get(name)
    if not values:
        return None
    if len(values) > 1:
        raise RedirectRefused(f"the browser came back with {len(values)} values for {name!r}")
    return values[0]


def read_redirect(address: str, state: str) -> AuthorizationCodeResult:
    """The authorization code in the address the browser was sent back to, if its ``state``
    is ``state``; else :class:`RedirectRefused` saying why (the code is never in it)."""
    from mcp.client.auth import AuthorizationCodeResult

    query = urlsplit(address.strip()).query
    try:
        params = parse_qs(query, keep_blank_values=True, max_num_fields=32)
    except ValueError:
        raise RedirectRefused("the address the browser came back to has too many fields") from None
    code = _one(params, "code")
    if code:
        hide_exactly(code)
    given = _one(params, "state")
    if given != state:
        raise RedirectRefused(
            "the browser came back with a `state` that is not the one nbagent sent (a link "
            "from an earlier sign-in, or a request nbagent did not start), so the code was not "
            "used"
        )
    error = _one(params, "error")
    if error is not None:
        shown = error if _ERROR_CODE.fullmatch(error) else "an unreadable error"
        raise RedirectRefused(f"the authorization server did not grant access ({shown})")
    if not code:
        raise RedirectRefused("the browser came back without an authorization code")
    return AuthorizationCodeResult(code=code, state=given, iss=_one(params, "iss"))


class LoopbackListener:
    """An HTTP listener on ``127.0.0.1`` that receives one sign-in's redirect at a time.

    ``port`` 0 lets the system choose; once chosen, the same port is asked for again at each
    later :meth:`open` (a registered redirect URI names it), else a new one is taken and
    :attr:`moved` says so. ``server`` (the MCP server's nbagent name) is named on the page the
    browser gets, so that a person with several tabs can tell which sign-in it was.
    """

    def __init__(self, port: int = 0, server: str = "") -> None:
        self.port = port
        self.server = server
        self.fixed = port != 0
        self.moved = False
        self._server: asyncio.Server | None = None
        self._waiting: asyncio.Future[AuthorizationCodeResult] | None = None
        self._state = ""
        self._active = 0
        self._handlers: set[asyncio.Task[None]] = set()
        self._unread: set[asyncio.StreamWriter] = set()  # connections yet to send their head

    @property
    def state(self) -> str:
        """The ``state`` the redirect being waited for must carry."""
        return self._state

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}{PATH}"

    async def open(self) -> None:
        """Listen (again); raise OSError when a fixed port cannot be had."""
        if self._server is not None:
            return
        self.moved = False
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", self.port))
            except OSError:
                if self.fixed or self.port == 0:
                    raise
                sock.bind(("127.0.0.1", 0))  # the old port is taken: a new one
                self.moved = True
            self.port = sock.getsockname()[1]
            self._server = await asyncio.start_server(self._serve, sock=sock, limit=MAX_HEAD_BYTES)
        except BaseException:
            sock.close()
            raise

    def expect(self, state: str) -> asyncio.Future[AuthorizationCodeResult]:
        """The future the redirect carrying ``state`` resolves (or fails, on a bad one)."""
        if self._waiting is not None and not self._waiting.done():
            self._waiting.cancel()
        self._state = state
        self._waiting = asyncio.get_running_loop().create_future()
        return self._waiting

    async def close(self) -> None:
        """Stop listening; a sign-in still waiting is cancelled. Connections that have sent no
        request (a browser opens spare ones) are closed unanswered, and those being answered
        are given up to a second to finish: none is left to the loop's end, where a handler
        cancelled there was printed as an "Exception in callback" traceback."""
        server, self._server = self._server, None
        if self._waiting is not None and not self._waiting.done():
            self._waiting.cancel()
        self._waiting = None
        if server is not None:
            server.close()
        for writer in list(self._unread):
            writer.close()  # its handler's read ends at once, and the handler with it
        handlers = [task for task in self._handlers if task is not asyncio.current_task()]
        if handlers:
            await asyncio.wait(handlers, timeout=1.0)
        if server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 1.0)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._active >= MAX_CONNECTIONS:
            writer.close()
            return
        task = asyncio.current_task()
        assert task is not None  # asyncio runs each connection's handler as a task
        self._handlers.add(task)
        self._active += 1
        self._unread.add(writer)
        try:
            status, words = await self._answer(reader, writer)
            if status:
                body = _page(words, self.server)
                head = (
                    f"HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\n"
                    f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\n"
                    "Referrer-Policy: no-referrer\r\nConnection: close\r\n\r\n"
                )
                writer.write(head.encode() + body)
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(writer.drain(), HEAD_TIMEOUT)
        except asyncio.CancelledError:
            # The loop is ending with this connection open. The handler is a task nobody
            # awaits, and asyncio's stream protocol (Python 3.11) asks a cancelled one for its
            # exception, which prints a traceback: the connection just ends, unanswered.
            pass
        finally:
            self._active -= 1
            self._unread.discard(writer)
            self._handlers.discard(task)
            writer.close()

    async def _answer(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> tuple[str, tuple[str, str]]:
        """The status and page for one request ("" for a request not worth an answer)."""
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
        except (asyncio.LimitOverrunError, ValueError):
            return "431 Request Header Fields Too Large", _NOBODY
        except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
            return "", _NOBODY
        finally:
            self._unread.discard(writer)  # from here it is answered, even when close() comes
        words = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
        if len(words) != 3:
            return "400 Bad Request", _NOBODY
        method, target, _version = words
        if method != "GET":
            return "405 Method Not Allowed", _NOBODY
        if urlsplit(target).path != PATH:
            return "404 Not Found", _NOBODY
        waiting = self._waiting
        if waiting is None or waiting.done():
            return "410 Gone", _NOBODY
        try:
            result = read_redirect(target, self._state)
        except RedirectRefused as refused:
            waiting.set_exception(refused)
            return "400 Bad Request", _REFUSED
        waiting.set_result(result)
        return "200 OK", _SIGNED_IN
