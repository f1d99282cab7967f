"""The HTTP client nbagent hands the SDK's streamable-HTTP transport, bounded at the root.

The SDK reads a JSON answer whole (``response.aread()``) before looking at it: a 200 MB answer
was held, parsed and accepted (about 1.1 GB more in the kernel, measured). It bounds one
server-sent event, but not a JSON body; and an HTTP error status reaches a person as "Server
returned an error response". So nbagent gives the SDK an ``httpx2`` client whose transport
(:class:`BoundedTransport`) stands between it and the network:

* A JSON body over ``MCPLimits.max_message_bytes`` is refused as it streams in: at once when
  its ``Content-Length`` says so, else at the first byte past the limit; never held whole.
  The request it answered gets an error naming the limit, as over stdio. One server-sent
  event is bounded the same way. Bodies are asked for uncompressed (a compressed one could
  unpack past any limit), and one that comes compressed anyway is refused, saying so.
* An error status (401, 403, 500 …) with no JSON-RPC error in its body answers the request
  with an error naming the status, and for 401 / 403, how to pass credentials.
* The answers to ``tools/list`` go through the :class:`~._listing.ListingScreen` (one bad
  tool costs only itself), in a JSON body or an event stream alike.
* The requests of an OAuth sign-in (:mod:`._signer` marks them) are read whole, bounded by
  ``MCPLimits.auth_timeout`` (headers and body) and ``MCPLimits.max_auth_bytes``; what goes
  wrong becomes a note on the answer for the sign-in to report, never an exception that would
  end the connection. A request whose sign-in failed is answered here, with the reason, and
  never sent.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Mapping
from http import HTTPStatus
from typing import Any

import anyio
import httpx2

from ._limits import too_large
from ._listing import ListingScreen

# Set by ._signer on requests (they are plain strings so that this module needs no SDK).
AUTH_REQUEST = "nbagent.auth"
AUTH_PROBLEM = "nbagent.auth_problem"
SIGN_IN_FAILED = "nbagent.sign_in_failed"

__all__ = ["AnswerTooLarge", "BoundedTransport", "EventTooLarge"]

_ERROR_BODY = 64 * 1024  # enough for any JSON-RPC error a server sends with a status
_LINE_END = re.compile(rb"\r\n|\r|\n")
# Statuses the SDK itself gives a meaning (404: session ended), left to it.
_SDK_STATUSES = frozenset({404})


class AnswerTooLarge(httpx2.StreamError):
    """A JSON body past ``MCPLimits.max_message_bytes``: the SDK answers its request with an
    error holding this message (it catches ``StreamError`` while reading a JSON answer)."""


class EventTooLarge(httpx2.SSEError):
    """One server-sent event past ``MCPLimits.max_message_bytes`` (the SDK catches it too)."""


def _credentials_hint(status: int, response: httpx2.Response) -> str:
    if status not in (401, 403):
        return ""
    challenge = response.headers.get("www-authenticate", "")
    wants = "credentials" if status == 401 else "other credentials (or refused the ones given)"
    scheme = challenge.split(" ", 1)[0] if challenge else ""
    asked = f" (it asks for {scheme[:40]})" if scheme else ""
    return (
        f": the server wants {wants}{asked}. Pass them as HTTP headers, for example "
        'mcp_server(NAME, url=URL, headers={"Authorization": f"Bearer {token}"}); in a '
        "notebook, then add that server with nbagent.current_session().add_mcp_server(server)"
    )


def refused_words(response: httpx2.Response) -> str:
    """What a request hears when the server refused it with this status (and, for 401 / 403,
    how to pass credentials)."""
    status = response.status_code
    return f"the server answered {_status_words(status)}{_credentials_hint(status, response)}"


def _status_words(status: int) -> str:
    try:
        return f"HTTP {status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"HTTP {status}"


def _request_id(request: httpx2.Request) -> Any:
    """The JSON-RPC id of an outgoing POST, or None (a notification, or not JSON-RPC)."""
    message = _message(request)
    return message.get("id") if isinstance(message, dict) else None


def _is_listing(request: httpx2.Request) -> bool:
    """Whether an outgoing POST asks for ``tools/list`` (the body is parsed only when it may)."""
    if request.method != "POST" or b"tools/list" not in _content(request):
        return False
    message = _message(request)
    return isinstance(message, dict) and message.get("method") == "tools/list"


def _content(request: httpx2.Request) -> bytes:
    try:
        return request.content
    except httpx2.RequestNotRead:  # a streamed body: the SDK sends none
        return b""


def _message(request: httpx2.Request) -> Any:
    try:
        return json.loads(_content(request) or b"null")
    except (ValueError, UnicodeDecodeError):
        return None


def _error_response(
    response: httpx2.Response, request_id: Any, message: str, status: int | None = None
) -> httpx2.Response:
    """A JSON-RPC error answering ``request_id``, in place of ``response`` (the SDK takes a
    JSON-RPC error from the body of any answer, whatever its status)."""
    error = {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32603, "message": message}}
    headers = {"content-type": "application/json"}
    challenge = response.headers.get("www-authenticate")
    if challenge is not None:  # where an OAuth sign-in learns what the server asks for
        headers["www-authenticate"] = challenge
    return httpx2.Response(
        status or response.status_code,
        headers=headers,
        content=json.dumps(error).encode(),
        extensions=response.extensions,
    )


class BoundedTransport(httpx2.AsyncBaseTransport):
    """An ``httpx2`` transport that bounds and screens what a streamable-HTTP server sends."""

    def __init__(
        self,
        max_bytes: int,
        screen: ListingScreen,
        inner: httpx2.AsyncBaseTransport | None = None,
        *,
        auth_timeout: float = 30.0,
        max_auth_bytes: int = 64 * 1024,
    ) -> None:
        self.max_bytes = max_bytes
        self.screen = screen
        self.inner = inner or httpx2.AsyncHTTPTransport()
        self.auth_timeout = auth_timeout
        self.max_auth_bytes = max_auth_bytes

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        failed = request.extensions.get(SIGN_IN_FAILED)
        if isinstance(failed, str):
            return _unsent(request, failed)
        request.headers["accept-encoding"] = "identity"
        if request.extensions.get(AUTH_REQUEST):
            return await self._auth_answer(request)
        response = await self.inner.handle_async_request(request)
        status = response.status_code
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if status < 400 and encoding in ("", "identity") and not self._too_long(response):
            return self._bounded(request, response)
        # only a request (a POST with an id) waits for an answer that can be replaced
        request_id = _request_id(request) if request.method == "POST" else None
        if request_id is None:
            if encoding in ("", "identity"):
                return self._bounded(request, response)
            await _stream(response).aclose()
            return httpx2.Response(502, extensions=response.extensions)
        if status >= 400 and status not in _SDK_STATUSES:
            return await self._refused(response, request_id)
        if encoding not in ("", "identity"):
            await _stream(response).aclose()
            return _error_response(
                response,
                request_id,
                f"the server compressed its answer ({encoding[:40]}) although nbagent asked for "
                "none, so nbagent did not read it (a compressed answer could unpack past "
                "MCPLimits.max_message_bytes)",
                status=200,
            )
        if self._too_long(response):
            await _stream(response).aclose()
            return _error_response(response, request_id, too_large(self.max_bytes))
        return self._bounded(request, response)  # the SDK's own meaning of its status (404)

    def _too_long(self, response: httpx2.Response) -> bool:
        """Whether a body (not an event stream) says, by its length, that it is too large."""
        kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        size = response.headers.get("content-length", "")
        return kind != "text/event-stream" and size.isdigit() and int(size) > self.max_bytes

    def _bounded(self, request: httpx2.Request, response: httpx2.Response) -> httpx2.Response:
        """``response`` with its body bounded as it streams in (and screened, for a listing)."""
        kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        status = response.status_code
        listing = self.screen if status < 300 and _is_listing(request) else None
        stream: httpx2.AsyncByteStream
        if kind == "text/event-stream":
            stream = _Events(response, self.max_bytes, listing)
        else:
            stream = _Body(response, self.max_bytes, listing)
        headers = _without_length(response.headers) if listing is not None else response.headers
        return httpx2.Response(
            status, headers=headers, stream=stream, extensions=response.extensions
        )

    async def _refused(self, response: httpx2.Response, request_id: Any) -> httpx2.Response:
        """An error status: the server's own JSON-RPC error when its body holds one, else an
        error naming the status (and how to pass credentials, for 401 / 403)."""
        body = bytearray()
        stream = _stream(response)
        try:
            async for chunk in stream:
                body += chunk
                if len(body) > _ERROR_BODY:
                    break
        except httpx2.HTTPError:
            pass
        finally:
            await stream.aclose()
        try:
            given = json.loads(bytes(body)) if len(body) <= _ERROR_BODY else None
        except ValueError:
            given = None
        error = given.get("error") if isinstance(given, dict) else None
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return httpx2.Response(
                response.status_code,
                headers={"content-type": "application/json"},
                content=bytes(body),
                extensions=response.extensions,
            )
        return _error_response(response, request_id, refused_words(response))

    async def _auth_answer(self, request: httpx2.Request) -> httpx2.Response:
        """A request of a sign-in, read whole within the bounds; a failure is a note on a
        stand-in answer (``AUTH_PROBLEM``), for the sign-in to report."""
        problem: str | None = None
        body = bytearray()
        response: httpx2.Response | None = None
        try:
            with anyio.fail_after(self.auth_timeout):
                response = await self.inner.handle_async_request(request)
                stream = _stream(response)
                try:
                    encoding = response.headers.get("content-encoding", "identity").lower()
                    size = response.headers.get("content-length", "")
                    if encoding.strip() not in ("", "identity"):
                        problem = "answered compressed although nbagent asked for no compression"
                    elif size.isdigit() and int(size) > self.max_auth_bytes:
                        problem = self._too_large()
                    else:
                        async for chunk in stream:
                            body += chunk
                            if len(body) > self.max_auth_bytes:
                                problem = self._too_large()
                                break
                finally:
                    await stream.aclose()
        except TimeoutError:
            problem = f"did not answer within {self.auth_timeout:g} s (MCPLimits.auth_timeout)"
        except httpx2.TransportError as exc:
            problem = f"could not be reached ({type(exc).__name__})"
        if problem is not None or response is None:
            return httpx2.Response(
                502,
                extensions={AUTH_PROBLEM: problem or "did not answer"},
                request=request,
            )
        return httpx2.Response(
            response.status_code,
            headers=_without_length(response.headers),
            content=bytes(body),
            extensions=response.extensions,
        )

    def _too_large(self) -> str:
        return (
            f"answered with more than {self.max_auth_bytes:,} bytes, so nbagent did not read it "
            "(MCPLimits.max_auth_bytes)"
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


def _unsent(request: httpx2.Request, message: str) -> httpx2.Response:
    """The answer to a request whose sign-in failed: the reason, as a JSON-RPC error for a
    request (its caller reads it), a bare 401 for anything else."""
    request_id = _request_id(request) if request.method == "POST" else None
    if request_id is None:
        return httpx2.Response(401, request=request)
    error = {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32603, "message": message}}
    return httpx2.Response(
        401,
        headers={"content-type": "application/json"},
        content=json.dumps(error).encode(),
        request=request,
    )


def _stream(response: httpx2.Response) -> httpx2.AsyncByteStream:
    stream = response.stream
    assert isinstance(stream, httpx2.AsyncByteStream)  # an async transport's
    return stream


def _without_length(headers: httpx2.Headers) -> Mapping[str, str]:
    """The headers of a body nbagent rewrote: its length is no longer the server's."""
    return {k: v for k, v in headers.items() if k.lower() not in ("content-length",)}


class _Body(httpx2.AsyncByteStream):
    """A body read up to ``limit`` bytes; a ``tools/list`` answer is screened whole."""

    def __init__(self, response: httpx2.Response, limit: int, screen: ListingScreen | None) -> None:
        self.inner = _stream(response)
        self.limit = limit
        self.screen = screen

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        held = bytearray()
        async for chunk in self.inner:
            seen += len(chunk)
            if seen > self.limit:
                raise AnswerTooLarge(too_large(self.limit))
            if self.screen is None:
                yield chunk
            else:
                held += chunk
        if self.screen is not None:
            screened = self.screen.screen_bytes(bytes(held)) if held else None
            yield screened if screened is not None else bytes(held)

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Events(httpx2.AsyncByteStream):
    """An event stream whose events are each at most ``limit`` bytes; the events of a
    ``tools/list`` answer are screened one by one."""

    def __init__(self, response: httpx2.Response, limit: int, screen: ListingScreen | None) -> None:
        self.inner = _stream(response)
        self.limit = limit
        self.screen = screen

    async def __aiter__(self) -> AsyncIterator[bytes]:
        event = 0  # bytes of the event so far
        line = 0  # bytes of its unfinished line
        after_cr = False
        held = bytearray()  # the event's bytes, when screening
        async for chunk in self.inner:
            start = 0
            if after_cr and chunk.startswith(b"\n"):
                start = 1  # the rest of a CRLF split between chunks
            after_cr = chunk.endswith(b"\r")
            ready = bytearray()
            for end in _LINE_END.finditer(chunk, start):
                line += end.start() - start
                ended = line == 0
                event = 0 if ended else event + line + 1
                line = 0
                if event > self.limit:
                    raise EventTooLarge(too_large(self.limit))
                if self.screen is not None:
                    held += chunk[start : end.end()]
                    if ended:
                        ready += self._screened(bytes(held))
                        held.clear()
                start = end.end()
            line += len(chunk) - start
            if event + line > self.limit:
                raise EventTooLarge(too_large(self.limit))
            if self.screen is None:
                yield chunk
            else:
                held += chunk[start:]
                if ready:
                    yield bytes(ready)
        if held:
            yield self._screened(bytes(held))

    def _screened(self, raw: bytes) -> bytes:
        """One whole event, its data screened when it is a JSON-RPC answer."""
        assert self.screen is not None
        lines = _LINE_END.split(raw)
        data = [ln[5:].removeprefix(b" ") for ln in lines if ln.startswith(b"data:")]
        if not data:
            return raw
        screened = self.screen.screen_bytes(b"\n".join(data))
        if screened is None:
            return raw
        rest = [ln for ln in lines if ln and not ln.startswith(b"data:")]
        return b"".join(ln + b"\n" for ln in rest) + b"data: " + screened + b"\n\n"

    async def aclose(self) -> None:
        await self.inner.aclose()
