"""An OAuth-protected MCP server for the tests, written with the SDK's own server-side auth:
``python oauth_server.py PORT``. It is its own authorization server (metadata, dynamic client
registration, authorization with PKCE, tokens, refresh) and a resource server whose
streamable-HTTP endpoint ``/mcp`` answers 401 until a token is presented (with one JSON body
per request, once it is done).

The authorization endpoint sends the browser to a consent page (``/consent``) that answers
like a person who clicked "Allow": a redirect to the client's ``redirect_uri`` with the code.
Tokens last ``OAUTH_TOKEN_TTL`` seconds (default 3600), so a test can watch a refresh.

For what a well-behaved server never does, ``POST /test/mode?name=MODE`` (not protected) makes
it misbehave from then on, and ``GET /test/stats`` says what it saw and every secret it issued
(so a test can look for them where they must never be), and its process id. Modes:

* ``foreign-authorize`` / ``foreign-token``: the authorization-server metadata names the
  authorization (or token) endpoint on another host than its issuer (``localhost`` for
  ``127.0.0.1``, the same process).
* ``hang-metadata`` / ``hang-token``: that endpoint accepts the request and never answers.
* ``hold-metadata``: the authorization-server metadata is answered only once
  ``POST /test/release`` is asked (``held`` counts the requests that waited), so a test can
  hold a sign-in half-way while it lines other requests up behind it.
* ``garbage-token``: the token endpoint answers 200 with HTML; ``huge-token``: with 64 MB.
* ``fail-refresh``: a refresh is answered 400 ``invalid_grant``.
* ``deny``: the consent page sends the browser back with ``error=access_denied``.
* ``normal``: none of these.

A call to the tool ``admin`` with a token lacking the ``admin`` scope is answered 403
``insufficient_scope`` asking for ``tools admin`` (a step-up); in mode ``step-up-forever``,
whatever the token; in mode ``admin-everywhere``, every request whose token lacks ``admin``
(the first one after signing in included). In mode ``modern-scope-refused`` the server speaks
only the stateless protocol (``server/discover``; an ``initialize`` is answered 400, whatever
the token) and answers every other request that carries a token 403 ``insufficient_scope``.

``POST /test/expire`` drops every access token (as a server whose tokens ran out earlier than
it said). The token endpoint also grants ``client_credentials`` to a registered client that
authenticates with its secret (the SDK's server does not).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
import time
from typing import Any
from urllib.parse import parse_qs

import uvicorn
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 8765
ISSUER = f"http://127.0.0.1:{PORT}"
TTL = int(os.environ.get("OAUTH_TOKEN_TTL", "3600"))
STATE: dict[str, Any] = {
    "mode": "normal",
    "registrations": 0,
    "authorizations": 0,
    "codes": 0,
    "refreshes": 0,
    "tokens": 0,  # codes exchanged for tokens
    "client_credentials": 0,
    "failed_refreshes": 0,
    "calls": 0,
    "unauthorized": 0,  # requests to /mcp with no token
    "step_ups": 0,  # calls to admin refused for want of its scope
    "held": 0,  # metadata requests held in mode hold-metadata
    "listens": 0,  # subscriptions/listen requests (a 2026 client's listening stream)
    "issued": [],  # every code, access token, refresh token and client secret handed out
}


class Provider:
    """An in-memory authorization server (the SDK's OAuthAuthorizationServerProvider)."""

    def __init__(self) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.tickets: dict[str, tuple[str, AuthorizationParams]] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        STATE["registrations"] += 1
        client_info.scope = "tools admin"  # registered for both, granted as asked
        if client_info.client_secret:
            STATE["issued"].append(client_info.client_secret)
        self.clients[client_info.client_id] = client_info

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        STATE["authorizations"] += 1
        ticket = secrets.token_urlsafe(16)
        self.tickets[ticket] = (client.client_id, params)
        return f"{ISSUER}/consent?ticket={ticket}"

    def consent(self, ticket: str) -> str:
        """Where the consent page sends the browser: back to the client, with a code."""
        client_id, params = self.tickets.pop(ticket)
        if STATE["mode"] == "deny":
            return construct_redirect_uri(
                str(params.redirect_uri),
                error="access_denied",
                error_description="the person said no",
                state=params.state,
            )
        code = f"code-{secrets.token_urlsafe(24)}"
        STATE["codes"] += 1
        STATE["issued"].append(code)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or ["tools"],
            expires_at=time.time() + 300,
            client_id=client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    def _tokens(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access = f"access-{secrets.token_urlsafe(24)}"
        refresh = f"refresh-{secrets.token_urlsafe(24)}"
        STATE["issued"].extend([access, refresh])
        expires = int(time.time()) + TTL
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, expires_at=expires, resource=resource
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh, client_id=client_id, scopes=scopes, resource=resource
        )
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=TTL,
            refresh_token=refresh,
            scope=" ".join(scopes),
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        del self.codes[authorization_code.code]
        STATE["tokens"] += 1
        return self._tokens(
            client.client_id, authorization_code.scopes, authorization_code.resource
        )

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        if STATE["mode"] == "fail-refresh":
            STATE["failed_refreshes"] += 1
            raise TokenError("invalid_grant", "the refresh token was revoked")
        STATE["refreshes"] += 1
        del self.refresh[refresh_token.token]  # rotated
        return self._tokens(
            client.client_id, scopes or refresh_token.scopes, refresh_token.resource
        )

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is not None and found.expires_at is not None and found.expires_at < time.time():
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)


PROVIDER = Provider()
server = MCPServer(
    "secure",
    auth_server_provider=PROVIDER,
    auth=AuthSettings(
        issuer_url=ISSUER,  # type: ignore[arg-type]
        resource_server_url=f"{ISSUER}/mcp",  # type: ignore[arg-type]
        client_registration_options=ClientRegistrationOptions(
            enabled=True, valid_scopes=["tools", "admin"], default_scopes=["tools"]
        ),
        required_scopes=["tools"],
        validate_token_resource=True,
    ),
)


@server.tool()
def whoami() -> str:
    """Says who answered."""
    STATE["calls"] += 1
    return "the secure server, signed in"


@server.tool()
def admin() -> str:
    """Needs the ``admin`` scope (the middleware asks for it: a step-up)."""
    return "admin ok"


_MET: dict[str, asyncio.Event | None] = {"waiting": None}


@server.tool()
async def together() -> str:
    """Answers "together" once a second call to it is running too ("alone" if none comes
    within 60 s, a bound for a client that never sends it): the server answers with one JSON
    body when done, so only a client that sends both calls at once gets "together". Each pair
    of calls meets on its own."""
    waiting = _MET["waiting"]
    if waiting is not None:
        _MET["waiting"] = None
        waiting.set()
        return "together"
    event = _MET["waiting"] = asyncio.Event()
    try:
        await asyncio.wait_for(event.wait(), 60)
    except TimeoutError:
        return "alone"
    finally:
        if _MET["waiting"] is event:
            _MET["waiting"] = None
    return "together"


async def _json(send: Any, status: int, body: Any, kind: str = "application/json") -> None:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", kind.encode()),
                (b"content-length", str(len(data)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


async def _body(receive: Any) -> bytes:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


def _replay(body: bytes, receive: Any) -> Any:
    """A ``receive`` that gives the body read already, then waits on the real one."""
    sent = False

    async def replay() -> Any:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


async def _forever() -> None:
    await asyncio.Event().wait()  # an answer that never comes


_RELEASE: dict[str, asyncio.Event] = {}


def _release() -> asyncio.Event:
    """What held answers wait for (set by ``POST /test/release``, cleared by a new mode)."""
    if "event" not in _RELEASE:
        _RELEASE["event"] = asyncio.Event()
    return _RELEASE["event"]


class Hostile:
    """ASGI middleware: the test's control endpoints, and the misbehaviour of each mode."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path, mode = scope["path"], STATE["mode"]
        if path == "/mcp" and not any(name == b"authorization" for name, _ in scope["headers"]):
            STATE["unauthorized"] += 1
        query = parse_qs(scope.get("query_string", b"").decode())
        if path == "/test/mode":
            STATE["mode"] = query["name"][0]
            _release().clear()
            await _json(send, 200, {"mode": STATE["mode"]})
        elif path == "/test/release":
            _release().set()
            await _json(send, 200, {"released": True})
        elif path == "/test/stats":
            await _json(send, 200, {**STATE, "pid": os.getpid()})
        elif path == "/test/expire":
            PROVIDER.access.clear()
            await _json(send, 200, {"expired": True})
        elif path == "/consent":
            location = PROVIDER.consent(query["ticket"][0])
            await send(
                {
                    "type": "http.response.start",
                    "status": 302,
                    "headers": [(b"location", location.encode()), (b"content-length", b"0")],
                }
            )
            await send({"type": "http.response.body", "body": b""})
        elif path == "/.well-known/oauth-authorization-server" and mode == "hang-metadata":
            await _forever()
        elif path == "/.well-known/oauth-authorization-server" and mode == "hold-metadata":
            STATE["held"] += 1
            await _release().wait()
            await self.app(scope, receive, send)
        elif path == "/.well-known/oauth-authorization-server" and mode.startswith("foreign-"):
            await self._foreign(scope, receive, send, mode.removeprefix("foreign-"))
        elif path == "/token" and mode == "hang-token":
            await _forever()
        elif path == "/token" and mode == "garbage-token":
            await _json(
                send, 200, b"<html><body>Welcome to the login portal</body></html>", "text/html"
            )
        elif path == "/token" and mode == "huge-token":
            await self._huge(send)
        elif path == "/token":
            await self._token(scope, receive, send)
        elif path == "/mcp" and scope["method"] == "POST":
            await self._step_up(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _step_up(self, scope: Any, receive: Any, send: Any) -> None:
        """403 asking for more scope where the mode says (see the module); counts listens."""
        body = await _body(receive)
        try:
            message = json.loads(body or b"null")
        except ValueError:
            message = None
        params = message.get("params") if isinstance(message, dict) else None
        method = message.get("method") if isinstance(message, dict) else None
        if method == "subscriptions/listen":
            STATE["listens"] += 1
        token = b""
        for name, value in scope["headers"]:
            if name == b"authorization":
                token = value.removeprefix(b"Bearer ")
        access = PROVIDER.access.get(token.decode())
        if STATE["mode"] == "admin-everywhere" and access and "admin" not in access.scopes:
            await self._insufficient(send)
            return
        if STATE["mode"] == "modern-scope-refused":
            if method == "initialize":
                await _json(
                    send,
                    400,
                    {
                        "jsonrpc": "2.0",
                        "id": message.get("id"),
                        "error": {
                            "code": -32600,
                            "message": "this server has no initialize handshake",
                        },
                    },
                )
                return
            if any(name == b"authorization" for name, _ in scope["headers"]):
                await self._insufficient(send)
                return
        if isinstance(params, dict) and params.get("name") == "admin":
            forever = STATE["mode"] == "step-up-forever"
            if access is not None and ("admin" not in access.scopes or forever):
                await self._insufficient(send)
                return
        await self.app(scope, _replay(body, receive), send)

    async def _insufficient(self, send: Any) -> None:
        """403 ``insufficient_scope``, asking for ``tools admin``."""
        STATE["step_ups"] += 1
        challenge = (
            'Bearer error="insufficient_scope", scope="tools admin", '
            f'resource_metadata="{ISSUER}/.well-known/oauth-protected-resource/mcp"'
        )
        await send(
            {
                "type": "http.response.start",
                "status": 403,
                "headers": [(b"www-authenticate", challenge.encode()), (b"content-length", b"0")],
            }
        )
        await send({"type": "http.response.body", "body": b""})

    async def _token(self, scope: Any, receive: Any, send: Any) -> None:
        """The client_credentials grant here; every other grant to the SDK's handler."""
        body = await _body(receive)
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        if form.get("grant_type") != "client_credentials":
            await self.app(scope, _replay(body, receive), send)
            return
        client_id, secret = form.get("client_id"), form.get("client_secret")
        for name, value in scope["headers"]:
            if name == b"authorization" and value.startswith(b"Basic "):
                import base64
                from urllib.parse import unquote

                pair = base64.b64decode(value[6:]).decode()
                client_id, _, secret = (unquote(part) for part in pair.partition(":"))
        client = PROVIDER.clients.get(client_id or "")
        if client is None or not secret or client.client_secret != secret:
            await _json(send, 401, {"error": "invalid_client"})
            return
        STATE["client_credentials"] += 1
        token = PROVIDER._tokens(client.client_id, ["tools"], form.get("resource"))
        await _json(send, 200, token.model_dump(exclude_none=True))

    async def _foreign(self, scope: Any, receive: Any, send: Any, which: str) -> None:
        """The real metadata, with one endpoint moved to another host."""
        parts: list[bytes] = []
        started: dict[str, Any] = {}

        async def keep(message: Any) -> None:
            if message["type"] == "http.response.start":
                started.update(message)
            else:
                parts.append(message.get("body", b""))

        await self.app(scope, receive, keep)
        metadata = json.loads(b"".join(parts))
        key = "authorization_endpoint" if which == "authorize" else "token_endpoint"
        metadata[key] = metadata[key].replace("127.0.0.1", "localhost")
        await _json(send, started.get("status", 200), metadata)

    async def _huge(self, send: Any) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        piece = b'{"access_token": "' + b"x" * (1024 * 1024)
        for _ in range(64):
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b'"}'})


if __name__ == "__main__":
    app = Hostile(server.streamable_http_app(json_response=True))
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="error")
