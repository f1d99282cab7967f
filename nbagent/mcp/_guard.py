"""nbagent's rules around the SDK's OAuth flow, mixed into the SDK's own providers.

:class:`Guard` drives the SDK's ``async_auth_flow`` and looks at every request it makes and
every answer it gets, asking its :class:`~._signer.Signer` what may go and what an answer
means; it never builds an OAuth request itself. What it adds: requests with no token or a
valid one go out beside the flow (the flow holds its lock until each answer's headers), and
so does a request whose token the flow just refreshed, once the flow let go of it; a 401
to a token the client still took for valid is answered by a refresh first; a 403 asking for
more scope is stepped up once per request, right after the sign-in it needed too; a request is
told that its new token was refused only when it sent one its own flow just got; and a failure
becomes the answer to the request that needed the sign-in (see ``SIGN_IN_FAILED`` in
:mod:`._http`), so the connection goes on.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any, Protocol

import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider

from ._http import SIGN_IN_FAILED

__all__ = [
    "AuthorizationCode",
    "ClientCredentials",
    "Guard",
    "Judge",
    "SignInRefused",
    "Unsigned",
]


class SignInRefused(Exception):
    """A sign-in that nbagent stopped (the message is the person's, ready to show)."""


class Unsigned(str):
    """Why a request was refused that is not a sign-in failure: the server asked for
    credentials but publishes no OAuth metadata, so it wants them some other way."""


class Judge(Protocol):
    """What the guard asks at each step of the flow (the :class:`~._signer.Signer`, which
    builds the guarded providers, is the one): whether a request may go, whether an answer
    wants a person, and how a sign-in ended."""

    sign_ins: int

    def needs_person(self, response: httpx2.Response) -> bool: ...

    def admit(self, request: httpx2.Request) -> str | None: ...

    async def challenged(
        self, request: httpx2.Request, response: httpx2.Response
    ) -> str | None: ...

    def answered(self, request: httpx2.Request, response: httpx2.Response) -> str | None: ...

    def still_refused(self, response: httpx2.Response) -> str: ...

    def explain(self, exc: Exception) -> str: ...

    def failed(self, problem: str) -> None: ...

    def said(self, problem: str) -> str: ...

    async def release(self) -> None: ...


class Guard:
    """nbagent's rules around the SDK's flow (mixed into its providers; see the module)."""

    signer: Judge
    context: Any  # the SDK's OAuthContext

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        signer, context = self.signer, self.context
        valid = context.is_token_valid
        # The SDK's flow holds its lock from each request until its answer's headers, so
        # calls to a server that answers only when done would wait for one another. With no
        # token (a server that asks for none, until it does) or a valid one, the request goes
        # out here, with the token the SDK obtained; the flow runs when the server asks for
        # authorization (it is handed that answer) or a token is due for a refresh.
        pending: httpx2.Response | None = None
        tokens = context.current_tokens
        if tokens is None or context.is_token_valid():
            if tokens is not None:
                request.headers["Authorization"] = f"Bearer {tokens.access_token}"
            pending = yield request
            if not signer.needs_person(pending):
                return
        sent_with = request.headers.get("Authorization")
        flow = super().async_auth_flow(request)  # type: ignore[misc]
        problem: str | None = None
        refreshed = stepped = rescoped = False  # each once per request: three flows at most
        try:
            outgoing = await flow.__anext__()
            # The flow holds the SDK's lock from here: a sign-in from now on is this request's
            # own. One another request completed while this one waited is not (its token may
            # be gone again, dropped by a sign-out that waited too).
            sign_ins = signer.sign_ins
            while True:
                if outgoing is not request:
                    problem = signer.admit(outgoing)
                    if problem is not None:
                        break
                answer, pending = (pending, None) if outgoing is request else (None, pending)
                if answer is not None and request.headers.get("Authorization") == sent_with:
                    response = answer  # the answer it already has: the flow brought no token
                elif outgoing is request and signer.sign_ins == sign_ins and valid():
                    # A token the flow refreshed, or another request's sign-in got while this
                    # one waited for the lock: the request goes out after the flow lets go of
                    # it, so that calls to a server that answers only when done do not wait
                    # for one another behind a refresh. An answer that wants a person goes to
                    # a new flow, as an answer before any flow does.
                    await flow.aclose()
                    response = yield outgoing
                    if not signer.needs_person(response):
                        return
                    pending, sent_with = response, request.headers.get("Authorization")
                    flow = super().async_auth_flow(request)  # type: ignore[misc]
                    outgoing = await flow.__anext__()
                    sign_ins = signer.sign_ins
                    continue
                else:
                    response = yield outgoing
                if outgoing is request and signer.needs_person(response):
                    scope = response.status_code == 403  # more scope (a 401: a token at all)
                    own = signer.sign_ins > sign_ins  # it answered the token just signed in for
                    if (own and not scope) or (scope and (stepped or (own and rescoped))):
                        problem = signer.still_refused(response)  # signed in, refused anyway
                        break
                    renew = not scope and not refreshed and self.context.can_refresh_token()
                    if renew or (scope and own):
                        # A new flow: to renew a token the server refused though the client
                        # still took it for valid, or to step up from the token this request's
                        # sign-in just got (the SDK's flow ends with the request it sends after
                        # signing in); each at most once per request.
                        if renew:
                            refreshed = True
                            self.context.token_expiry_time = 1.0
                        else:
                            rescoped = True
                            pending, sent_with = response, request.headers.get("Authorization")
                        await flow.aclose()
                        flow = super().async_auth_flow(request)  # type: ignore[misc]
                        outgoing = await flow.__anext__()
                        sign_ins = signer.sign_ins
                        continue
                    stepped = stepped or scope
                    problem = await signer.challenged(request, response)
                    if problem is not None:
                        break
                elif outgoing is not request:
                    problem = signer.answered(outgoing, response)
                    if problem is not None:
                        break
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            pass
        except Exception as exc:
            problem = signer.explain(exc)
        finally:
            await flow.aclose()
            await signer.release()
        if problem is not None:
            if not isinstance(problem, Unsigned):  # a sign-in that failed
                signer.failed(problem)
                problem = signer.said(problem)
            request.extensions = {**request.extensions, SIGN_IN_FAILED: str(problem)}
            yield request


class AuthorizationCode(Guard, OAuthClientProvider):
    """The SDK's authorization-code provider (a person signs in), guarded."""


class ClientCredentials(Guard, ClientCredentialsOAuthProvider):
    """The SDK's client-credentials provider (a program signs in), guarded."""
