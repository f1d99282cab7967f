"""One server's OAuth sign-in, done by the official SDK's client auth under nbagent's rules.

The SDK's ``OAuthClientProvider`` (an ``httpx2.Auth``) does the protocol: on a 401 it
discovers the protected resource's and the authorization server's metadata, checks the
issuer and the resource, registers a client (or uses a configured one), builds the
authorization link with PKCE and a ``state``, exchanges the code, and refreshes the token
before it expires. nbagent subclasses it only to stand around that flow
(:class:`~._guard.Guard`), which asks the :class:`Signer` at each step:

* **Who may sign in, and when.** A person signs in only while someone waits for the server
  (see :mod:`._signin`) and can follow a link there; otherwise (a headless run, or a tool call
  in the middle of a run) the request fails at once, saying why and how to sign in: after the
  metadata is read (it says whether the server does OAuth at all), before a client is
  registered or a link is shown.
* **Where its requests may go.** Every request of the flow must be over https (plain http
  only to this machine); the authorization link and the token and registration requests must
  go to the host of the issuer the metadata names (which the SDK checks against the
  authorization server the resource declared, RFC 8414 §3.3, RFC 9728 §3.3), or a host the
  person trusts (``OAuth.trusted_hosts``).
* **What its requests may cost.** Each is bounded by ``MCPLimits.auth_timeout`` (its whole
  answer) and ``MCPLimits.max_auth_bytes`` (see :mod:`._http`).
* **What a failure says.** One sentence, for the request that needed the sign-in (the
  connection, the other servers and the other tools go on); never a token or a code: they
  are kept only in a :class:`~._tokens.MemoryStore` and hidden wherever
  :func:`~nbagent.redact.redact_secrets` runs, the SDK's own log records included.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ipaddress
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.client.auth import AuthorizationCodeResult
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata
from pydantic import AnyUrl

from ..redact import forget_exactly, hide_in_logs, redact_secrets
from ._guard import AuthorizationCode, ClientCredentials, SignInRefused, Unsigned
from ._http import AUTH_PROBLEM, AUTH_REQUEST
from ._limits import MCPLimits
from ._loopback import LoopbackListener, RedirectRefused, read_redirect
from ._oauth import OAuth
from ._signin import Attendant, HookPresenter, SelfAttendant, SignInLink
from ._tokens import MemoryStore

__all__ = ["Signer", "SignInRefused"]

#: The SDK's loggers that may quote an answer of the authorization server.
_SDK_AUTH_LOGGERS = (
    "mcp.client.auth.oauth2",
    "mcp.client.auth.utils",
    "mcp.client.auth.extensions.client_credentials",
    # a script's own open_link often follows the link with httpx2, whose records name the
    # redirect's address (the code in it)
    "httpx2",
    "httpcore2.http11",
    "httpcore2.http2",
)
_LINK_CHARS = 8192


def _refused_words(response: httpx2.Response | None) -> str:
    from ._http import refused_words

    if response is None:
        return "the server answered HTTP 401 and publishes no OAuth metadata"
    return refused_words(response)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _first_line(text: str, limit: int = 300) -> str:
    line = redact_secrets(text).strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[:limit] + " …"


class Signer:
    """The OAuth sign-in of one server: the SDK's provider (:attr:`auth`, for the HTTP client),
    its tokens, its loopback listener, and how it went."""

    def __init__(
        self,
        name: str,
        url: str,
        config: OAuth,
        limits: MCPLimits,
        attendant: Callable[[], Attendant | None],
        clock: Callable[[bool], None],
        given: bool = True,
    ) -> None:
        hide_in_logs(*_SDK_AUTH_LOGGERS)
        self.given = given  # OAuth asked for by the person (else: tried when a server asks)
        self.name = name
        self.url = url
        self.config = config
        self.limits = limits
        self.problem: str | None = None  # why the last sign-in failed
        self.sign_ins = 0  # sign-ins completed so far
        self._waiting = attendant
        # a script's own open_link can be run with nobody waiting (see SelfAttendant)
        self._on_its_own = (
            SelfAttendant(HookPresenter(config.open_link)) if config.open_link else None
        )
        self._clock = clock
        self._paused = False
        self._refresh_note: str | None = None
        self._ever = False  # signed in once: a later sign-in is "again"
        self._last: tuple[str, httpx2.Request] | None = None
        self._challenge: httpx2.Response | None = None  # the server's last 401
        self._answer_seen: tuple[int, str, str] | None = None  # the last answer's status …
        self._expected: asyncio.Future[AuthorizationCodeResult] | None = None
        self._answer: concurrent.futures.Future[str | None] | None = None
        self.listener = LoopbackListener(config.redirect_port, name)
        self.person = config.grant == "authorization_code"
        self.store = MemoryStore(self._configured_client())
        self.auth: httpx2.Auth
        if self.person:
            metadata = OAuthClientMetadata(
                redirect_uris=[AnyUrl(self.listener.redirect_uri)],  # set at each sign-in
                client_name=config.client_name,
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
                scope=config.scope,
                token_endpoint_auth_method=config.auth_method if config.client_id else None,
            )
            provider: Any = AuthorizationCode(
                url,
                metadata,
                self.store,
                redirect_handler=self._redirect,
                callback_handler=self._callback,
                client_metadata_url=config.client_metadata_url,
            )
        else:
            import warnings

            assert config.client_id is not None and config.client_secret is not None
            method = config.auth_method
            with warnings.catch_warnings():
                # the SDK warns when no issuer is named: nbagent holds the flow to the issuer
                # the resource declares (see admit), so there is none to name in advance
                warnings.simplefilter("ignore")
                provider = ClientCredentials(
                    url,
                    self.store,
                    config.client_id,
                    config.client_secret,
                    token_endpoint_auth_method=(
                        method if method != "none" else "client_secret_basic"
                    ),
                    scope=config.scope,
                )
        provider.signer = self
        self.auth = provider

    def _configured_client(self) -> OAuthClientInformationFull | None:
        config = self.config
        if config.client_id is None or not self.person:
            return None
        return OAuthClientInformationFull(
            client_id=config.client_id,
            client_secret=config.client_secret,
            redirect_uris=[AnyUrl(self.listener.redirect_uri)],
            grant_types=["authorization_code", "refresh_token"],
            token_endpoint_auth_method=config.auth_method,
        )

    def _attendant(self) -> Attendant | None:
        """Who can sign in now: the thread waiting for the server, else a script's hook."""
        return self._waiting() or self._on_its_own

    # --- what the guard asks ---------------------------------------------------------------

    def needs_person(self, response: httpx2.Response) -> bool:
        """Whether the SDK would now start a sign-in (401, or 403 asking for more scope)."""
        if response.status_code == 401:
            return True
        challenge = response.headers.get("www-authenticate", "")
        return response.status_code == 403 and "insufficient_scope" in challenge

    async def challenged(self, request: httpx2.Request, response: httpx2.Response) -> str | None:
        """The server asked for authorization: None when the SDK may go on (discovering the
        authorization server; the loopback listens when someone can sign in), else why not.
        Who may sign in is decided before a client is registered or a link shown
        (:meth:`_person_problem`), once the metadata says whether the server does OAuth."""
        self._challenge = response
        if request.url.scheme != "https" and not _loopback(request.url.host):
            return (
                "could not sign in: its URL is plain http to another machine, so a token "
                "would cross the network unencrypted (use its https URL)"
            )
        attendant = self._attendant()
        if attendant is not None and attendant.failed is not None:
            return attendant.failed  # one sign-in per wait (the SDK asks twice at start)
        if not self.person or attendant is None or attendant.refusal:
            return None
        try:
            await self.listener.open()
        except OSError as exc:
            return (
                f"could not sign in: the loopback port {self.listener.port} cannot be used "
                f"({exc.strerror or exc}); choose another with OAuth(redirect_port=...)"
            )
        self._point_redirect()
        return None

    def _person_problem(self) -> str | None:
        """Why nobody can sign in now (None: someone can, and the listener listens)."""
        context = self.auth.context  # type: ignore[attr-defined]
        advertised = context.protected_resource_metadata or context.oauth_metadata
        if not advertised and not self.given:
            return Unsigned(_refused_words(self._challenge))
        attendant = self._attendant()
        if attendant is None:
            again = " again" if self._ever else ""
            note = f" ({self._refresh_note})" if self._refresh_note else ""
            return (
                f"needs you to sign in{again}{note}: run `%agent mcp login {self.name}` in the "
                "notebook (or server.sign_in() from Python)"
            )
        if attendant.refusal is not None:
            return f"could not sign in: {attendant.refusal}"
        return attendant.failed

    def _point_redirect(self) -> None:
        """The SDK's client metadata names this sign-in's redirect URI (a client registered
        for another port registers again; a configured one is told the new one)."""
        uri = AnyUrl(self.listener.redirect_uri)
        context = self.auth.context  # type: ignore[attr-defined]
        context.client_metadata.redirect_uris = [uri]
        info = context.client_info or self.store.client_info
        if info is None or (info.redirect_uris and info.redirect_uris[0] == uri):
            return
        if self.config.client_id is None:
            context.client_info = None
            self.store.client_info = None
        else:
            updated = info.model_copy(update={"redirect_uris": [uri]})
            context.client_info = updated
            self.store.client_info = updated

    def admit(self, request: httpx2.Request) -> str | None:
        """None when a request of the flow may go (it is then marked for bounding), else why
        not: only https (plain http only to this machine), and credentials only to the
        issuer's host."""
        what = self._what(request)
        host = request.url.host
        shown = f"{request.url.scheme}://{host}{request.url.path}"[:300]
        if request.url.scheme != "https" and not _loopback(host):
            return (
                f"could not sign in: the {what} is {shown}, plain http to another machine "
                "(nbagent signs in only over https)"
            )
        if what == "registration endpoint" and self.person:
            refused = self._person_problem()
            if refused is not None:
                return refused
        if request.method == "POST":
            issuer = self._issuer_host()
            if host != issuer and host not in self.config.trusted_hosts:
                return (
                    f"could not sign in: the authorization server {issuer} names its {what} on "
                    f"another host, {host}; nbagent sends codes and secrets only to the issuer's "
                    f"host (if you trust {host}, pass OAuth(trusted_hosts=({host!r},)))"
                )
        timeout = self.limits.auth_timeout
        request.extensions = {
            **request.extensions,
            AUTH_REQUEST: what,
            "timeout": {"connect": timeout, "read": timeout, "write": timeout, "pool": timeout},
        }
        self._last = (what, request)
        return None

    def _issuer_host(self) -> str:
        metadata = self.auth.context.oauth_metadata  # type: ignore[attr-defined]
        issuer = str(metadata.issuer) if metadata is not None else self.url
        return (urlsplit(issuer).hostname or "").lower()

    def _what(self, request: httpx2.Request) -> str:
        if request.method == "GET":
            return "metadata endpoint"
        body = request.content
        if b"grant_type=refresh_token" in body:
            return "token endpoint (a refresh)"
        if b"grant_type=" in body:
            return "token endpoint"
        return "registration endpoint"

    def answered(self, request: httpx2.Request, response: httpx2.Response) -> str | None:
        """Why the answer to a request of the flow cannot be used (None: the SDK reads it)."""
        what = request.extensions.get(AUTH_REQUEST, "authorization server")
        problem = response.extensions.get(AUTH_PROBLEM)
        if isinstance(problem, str):
            return f"could not sign in: the {what} ({request.url.netloc.decode()}) {problem}"
        kind = response.headers.get("content-type", "no content type").partition(";")[0]
        self._answer_seen = (response.status_code, kind[:60], _oauth_error(response))
        if what.endswith("(a refresh)") and response.status_code != 200:
            error = _oauth_error(response)
            self._refresh_note = (
                f"its token expired and the refresh was refused: HTTP {response.status_code}"
                + (f" {error}" if error else "")
            )
            self.store.forget()
        elif what.startswith("token endpoint") and response.status_code == 200:
            self._refresh_note = None
        # the SDK stores these tokens next, if it can read them: from a sign-in, or a refresh
        self.store.next_is_grant = what == "token endpoint" and response.status_code == 200
        return None

    def still_refused(self, response: httpx2.Response) -> str:
        return (
            f"could not sign in: the server answered HTTP {response.status_code} to the token "
            "it had just issued"
        )

    def explain(self, exc: Exception) -> str:
        """One sentence for a failure of the flow (never the SDK's quotes of secrets)."""
        from mcp.client.auth import OAuthFlowError, OAuthRegistrationError, OAuthTokenError
        from pydantic import ValidationError

        if isinstance(exc, SignInRefused):
            said: str = exc.args[0]  # an Unsigned stays one
            return said
        if isinstance(exc, RedirectRefused):
            return f"could not sign in: {exc}"
        where = ""
        if self._last is not None:
            what, request = self._last
            where = f" (the {what} at {request.url.netloc.decode()})"
        if isinstance(exc, OAuthRegistrationError):
            return (
                f"could not sign in: the authorization server did not register nbagent as a "
                f"client{where}: {_first_line(str(exc))}"
            )
        if isinstance(exc, OAuthTokenError):
            if self._answer_seen is not None:
                status, kind, error = self._answer_seen
                said = f"HTTP {status} {error}" if error else f"HTTP {status} ({kind})"
                return f"could not sign in: no usable token{where}: it answered {said}"
            return f"could not sign in: no usable token{where}: {_first_line(str(exc))}"
        if isinstance(exc, OAuthFlowError):
            return f"could not sign in: {_first_line(str(exc))}"
        if isinstance(exc, ValidationError):
            return f"could not sign in: an answer{where} is not valid OAuth metadata or JSON"
        return f"could not sign in{where}: {type(exc).__name__}: {_first_line(str(exc))}"

    def failed(self, problem: str) -> None:
        self.problem = problem
        attendant = self._attendant()
        if attendant is not None and attendant.failed is None:
            attendant.failed = problem

    def said(self, problem: str) -> str:
        return f"MCP server {self.name!r} {problem}"

    async def release(self) -> None:
        """The flow ended: stop listening, and the start's clock runs again."""
        await self.listener.close()
        if self._paused:
            self._paused = False
            self._clock(True)

    # --- the SDK's handlers ----------------------------------------------------------------

    async def _redirect(self, url: str) -> None:
        problem = self._person_problem() or self._check_link(url)
        if problem is not None:
            raise SignInRefused(problem)
        attendant = self._attendant()
        assert attendant is not None  # else a problem above
        state = (parse_qs(urlsplit(url).query).get("state") or [""])[0]
        self._expected = self.listener.expect(state)
        self._paused = True
        self._clock(False)
        self._answer = attendant.ask(
            SignInLink(
                server=self.name,
                url=url,
                host=urlsplit(url).netloc,
                redirect_uri=self.listener.redirect_uri,
                timeout=self.limits.sign_in_timeout,
            )
        )

    def _check_link(self, url: str) -> str | None:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        if len(url) > _LINK_CHARS or any(ord(c) < 0x21 or ord(c) == 0x7F for c in url):
            return "could not sign in: the authorization link is malformed"
        plain = parts.scheme == "http" and not _loopback(host)
        if parts.scheme not in ("https", "http") or plain:
            return (
                f"could not sign in: the authorization link is {parts.scheme}:, not https "
                "(plain http only to this machine)"
            )
        issuer = self._issuer_host()
        if host != issuer and host not in self.config.trusted_hosts:
            return (
                f"could not sign in: the authorization server {issuer} names its authorization "
                f"endpoint on another host, {host}; nbagent shows a sign-in link only on the "
                f"issuer's host (if you trust {host}, pass OAuth(trusted_hosts=({host!r},)))"
            )
        return None

    async def _callback(self) -> AuthorizationCodeResult:
        expected, answer = self._expected, self._answer
        assert expected is not None and answer is not None
        state = self.listener.state
        pasted: asyncio.Future[str | None] | None = asyncio.wrap_future(answer)
        timeout = self.limits.sign_in_timeout
        deadline = asyncio.get_running_loop().time() + timeout
        try:
            while True:
                waits: set[asyncio.Future[Any]] = {expected}
                if pasted is not None:
                    waits.add(pasted)
                left = deadline - asyncio.get_running_loop().time()
                done, _ = await asyncio.wait(
                    waits, timeout=max(0.0, left), return_when=asyncio.FIRST_COMPLETED
                )
                if expected in done:
                    result = expected.result()
                    break
                if pasted is not None and pasted in done:
                    error = pasted.exception()
                    if error is not None:
                        raise SignInRefused(
                            f"could not sign in: the open_link function raised "
                            f"{type(error).__name__}: {_first_line(str(error), 200)}"
                        )
                    address = pasted.result()
                    if address is not None:
                        result = read_redirect(address, state)
                        break
                    pasted = None
                    continue
                raise SignInRefused(
                    f"could not sign in: nobody signed in within {timeout:g} s "
                    "(MCPLimits.sign_in_timeout)"
                )
        finally:
            if pasted is not None and not pasted.done():
                pasted.cancel()
            elif pasted is not None and not pasted.cancelled():
                pasted.exception()  # retrieved: it was reported, or did not matter
            await self.release()
        self.sign_ins += 1
        self._ever = True
        self.problem = None
        return result

    # --- for people ------------------------------------------------------------------------

    @property
    def signed_in(self) -> bool:
        return self.store.tokens is not None

    def status(self) -> str:
        """ "signed in, expires at 14:05 (in 58 min)", "not signed in" …"""
        return self.store.describe(needed=bool(self.problem or self._ever))

    async def forget(self, unless_granted_since: int | None = None) -> None:
        """Sign out: the tokens are dropped (the client registration is kept).

        With ``unless_granted_since`` (the store's ``grants`` when a person asked to sign in
        again), tokens a sign-in got after that are kept: the SDK's lock may be held by another
        request signing in, through the very link the person was shown, and dropping what it
        got would undo the sign-in that was asked for."""
        context = self.auth.context  # type: ignore[attr-defined]
        async with context.lock:
            since = unless_granted_since
            if since is not None and self.store.grants > since and self.store.tokens is not None:
                return
            context.clear_tokens()
            self.store.forget()
        self._refresh_note = None

    async def close(self) -> None:
        self.store.forget()
        if self.store.client_info is not None and self.store.client_info.client_secret:
            forget_exactly(self.store.client_info.client_secret)
        await self.listener.close()


def _oauth_error(response: httpx2.Response) -> str:
    """The ``error`` code of an OAuth error answer (RFC 6749 §5.2), when it is a plain one."""
    import json
    import re

    try:
        body = json.loads(response.content[:4096])
    except (ValueError, httpx2.ResponseNotRead):
        return ""
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, str) and re.fullmatch(r"[a-z_]{1,40}", error) else ""
