"""What every HTTP request to a served notebook passes before the SDK sees it: the path and
the bearer token (constant time; a connection that shows it keeps its place among the
server's connections), and a watch on the connection, so that a client that leaves while its
call waits is seen (the SDK then does Host, Origin, the body's size, the protocol)."""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from typing import Any

from .http import trust

__all__ = ["GONE_KEY", "PATH", "Guard", "gone_event"]

log = logging.getLogger("nbagent")

#: The one path served.
PATH = "/mcp"
#: Where a request's "the client left" event sits in its ASGI scope.
GONE_KEY = "nbagent.client_gone"


def gone_event(ctx: Any) -> Any:
    """The "client left" event of the request a handler serves (None where there is none)."""
    request = getattr(ctx, "request", None)
    scope = getattr(request, "scope", None)
    if isinstance(scope, dict):
        return scope.get(GONE_KEY)
    return None


class Guard:
    """The token, then the SDK (Host, Origin, body size, the protocol); and a watch on each
    request's connection so that a client that leaves is seen while its call waits."""

    def __init__(self, app: Any, owner: Any) -> None:
        self.app = app
        self.owner = owner

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope.get("path", "").rstrip("/") != PATH:
            await _plain(send, 404, "not found: the MCP endpoint is " + PATH)
            return
        if not self.owner.settings.no_token and not self._authorized(scope):
            await _plain(
                send,
                401,
                "a bearer token is needed: Authorization: Bearer TOKEN (the line shown when "
                "the server started)",
                [(b"www-authenticate", b'Bearer realm="nbagent"')],
            )
            return
        trust(scope)  # its connection keeps its place (see ._serve_http)
        if not self.owner.connected.is_set():
            self.owner.connected.set()
            callback = self.owner.on_connect
            if callback is not None:
                try:
                    callback()
                except Exception:
                    log.exception("nbagent serve: on_connect failed")
        gone = asyncio.Event()
        scope[GONE_KEY] = gone
        body_done = asyncio.Event()

        async def inner_receive() -> Any:
            if not body_done.is_set():
                message = await receive()
                if message["type"] == "http.disconnect":
                    gone.set()
                    body_done.set()
                elif not message.get("more_body", False):
                    body_done.set()
                return message
            await gone.wait()
            return {"type": "http.disconnect"}

        async def watch() -> None:
            await body_done.wait()
            while not gone.is_set():
                message = await receive()
                if message["type"] == "http.disconnect":
                    gone.set()

        watcher = asyncio.ensure_future(watch())
        try:
            await self.app(scope, inner_receive, send)
        finally:
            watcher.cancel()

    def _authorized(self, scope: Any) -> bool:
        given = b""
        for key, value in scope.get("headers", ()):
            if key == b"authorization":
                given = value
                break
        scheme, _, token = given.partition(b" ")
        expected = self.owner.token.encode()
        ok = hmac.compare_digest(token.strip(), expected)
        return ok and scheme.lower() == b"bearer"


async def _plain(
    send: Any, status: int, text: str, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": text}}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
