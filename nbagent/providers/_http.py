"""What both HTTP adapters share: the client, retries, error mapping and the SSE pump.

* One ``httpx2.AsyncClient`` per adapter, created on first use (and again if the adapter is used
  from another event loop, as the notebook does with one loop per cell). An injected ``client``
  is used as-is and never closed here; an injected ``transport`` gets a client of our own.
* Retries: 408, 409, 429, 5xx, connection failures and timeouts, with exponential backoff and
  jitter; ``Retry-After`` (seconds or an HTTP date) and ``retry-after-ms`` are honoured up to a
  cap; unparsable values are ignored; ``x-should-retry`` overrides the status rule. 400, 401,
  403 and 404 are never retried.
* Errors are :mod:`nbagent.errors` types whose message says what to do. They are raised outside
  any ``except`` block (nothing chained), and every message passes through the key's redaction.
* Once the first event is out, failures are *yielded* as ``StreamError`` events, never raised.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import aclosing
from typing import Any, ClassVar, Protocol

import httpx2

from .. import errors
from ..generation import Request, StreamError, StreamEvent
from ._sse import SSEDecoder

__all__ = ["HTTPGenerator", "Secret", "StreamFailure", "StreamParser", "parse_retry_after"]

log = logging.getLogger("nbagent.providers")

#: Error bodies are read up to this many bytes (a message, not a download).
_ERROR_BODY_LIMIT = 64 * 1024
#: After the final event, wait this long for the end of the body so the connection is reusable.
_DRAIN_SECONDS = 0.25


class Secret:
    """An API key that never shows itself: ``repr`` and ``str`` are ``'***'``."""

    __slots__ = ("_value",)

    def __init__(self, value: str | None) -> None:
        self._value = value or ""

    def reveal(self) -> str:
        return self._value

    def redact(self, text: str) -> str:
        """``text`` with every occurrence of the key replaced by ``***``."""
        if self._value and self._value in text:
            return text.replace(self._value, "***")
        return text

    def __bool__(self) -> bool:
        return bool(self._value)

    def __repr__(self) -> str:
        return "'***'" if self._value else "None"

    __str__ = __repr__

    def __reduce__(self) -> Any:  # never pickle a key into a saved object
        raise TypeError("an API key is not picklable")

    def __copy__(self) -> Secret:
        return self

    def __deepcopy__(self, memo: Any) -> Secret:
        return self


class StreamFailure(Exception):
    """Raised by a parser when the stream itself reports or shows a failure."""


class StreamParser(Protocol):
    """Turns one provider's SSE events into StreamEvents, appended to ``out``."""

    out: list[StreamEvent]

    def event(self, name: bytes, data: bytes) -> bool:
        """Handle one event; True when it was the last one of the response."""
        ...

    def finished(self) -> bool:
        """True once the response carried its finish reason (a later drop loses nothing)."""
        ...

    def end(self) -> None:
        """The stream is over: append the Finish, or raise :class:`StreamFailure`."""
        ...


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After``; None when absent or garbage."""
    value = headers.get("retry-after-ms")
    if value:
        try:
            seconds = float(value) / 1000
        except ValueError:
            seconds = -1.0
        if 0 <= seconds < float("inf"):
            return seconds
    value = headers.get("retry-after")
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
        return max(0.0, seconds)
    if not 0 <= seconds < float("inf"):  # negative, nan, inf
        return None
    return seconds


_STATUS_ERRORS: dict[int, type[errors.ProviderError]] = {
    400: errors.BadRequestError,
    401: errors.AuthenticationError,
    403: errors.PermissionDeniedError,
    404: errors.NotFoundError,
    408: errors.ServerError,
    409: errors.ServerError,
    429: errors.RateLimitError,
}


def _retryable_status(status: int) -> bool:
    return status in (408, 409, 429) or status >= 500


class HTTPGenerator:
    """Base of the HTTP adapters: settings, the lazily created client, retries, the SSE pump.

    Subclasses set ``provider``/``key_env``, and implement ``_headers`` and ``_prepare``.
    """

    provider: str = "provider"
    key_env: str = ""
    default_base_url: ClassVar[str] = ""

    def __init__(
        self,
        model: str = "",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: httpx2.AsyncClient | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
        max_retries: int = 2,
        backoff_base: float = 0.5,
        backoff_cap: float = 8.0,
        retry_after_cap: float = 60.0,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        base = (base_url or self.default_base_url).rstrip("/")
        if not base.startswith(("http://", "https://")):
            raise errors.ConfigurationError(
                f"the {self.provider} base URL {base!r} must start with http:// or https://"
            )
        if max_retries < 0:
            raise errors.ConfigurationError("max_retries must be 0 or more")
        self.model = model
        self.base_url = base
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.retry_after_cap = retry_after_cap
        self.extra_headers = dict(headers or {})
        self._key = Secret(api_key)
        self._injected = client
        self._transport = transport
        self._client: httpx2.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._guard: AsyncGenerator[None, None] | None = None
        self._guard_started = False

    # --- presentation -------------------------------------------------------------------

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r}, "
            f"api_key={self._key!r})"
        )

    # --- to be provided by the adapter ----------------------------------------------------

    def _headers(self) -> dict[str, str]:
        raise NotImplementedError

    def _prepare(self, request: Request) -> tuple[str, dict[str, Any], StreamParser]:
        """The URL path, the JSON body and a fresh parser for one request."""
        raise NotImplementedError

    # --- the client ----------------------------------------------------------------------

    def _get_client(self) -> httpx2.AsyncClient:
        if self._injected is not None:
            return self._injected
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop or self._client.is_closed:
            # A client belongs to the loop that made it; a new loop (one per notebook cell)
            # gets a new client. The old one was closed when its loop shut down (see below).
            self._client = httpx2.AsyncClient(
                transport=self._transport,
                timeout=httpx2.Timeout(
                    self.timeout, connect=self.connect_timeout, pool=self.connect_timeout
                ),
                follow_redirects=False,
            )
            self._client_loop = loop
            self._guard = _close_with_loop(self._client)
            self._guard_started = False
        return self._client

    async def _client_for_request(self) -> httpx2.AsyncClient:
        client = self._get_client()
        if self._guard is not None and not self._guard_started:
            # Started on this loop, the guard is finalized by the loop's shutdown
            # (asyncio.run, asyncio.Runner, a kernel's exit), which closes the client there:
            # no idle connection outlives its loop.
            self._guard_started = True
            await self._guard.__anext__()
        return client

    async def aclose(self) -> None:
        """Close the adapter's own client and its connections (an injected client is left)."""
        client, self._client = self._client, None
        loop, self._client_loop = self._client_loop, None
        guard, self._guard = self._guard, None
        if client is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:  # pragma: no cover - called outside a loop
            running = None
        if running is loop:
            if guard is not None and self._guard_started:
                await guard.aclose()  # closes the client
            await client.aclose()

    # --- one request ----------------------------------------------------------------------

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        """Stream one model turn: raises before the first event, yields StreamError after it."""
        path, body, parser = self._prepare(request)
        response = await self._open(path, body)
        decoder = SSEDecoder()
        out = parser.out
        failure: errors.StreamError | None = None
        cut_after_finish = False
        try:
            async with aclosing(response.aiter_bytes()) as chunks:
                done = False
                async for chunk in chunks:
                    for name, data in decoder.feed(chunk):
                        if parser.event(name, data):
                            done = True
                            break
                    if out:
                        for event in out:
                            yield event
                        out.clear()
                    if done:
                        break
                if not done:
                    for name, data in decoder.flush():
                        if parser.event(name, data):
                            break
                parser.end()
                for event in out:
                    yield event
                out.clear()
                if done:  # after the final event: reuse the connection if the body ends now
                    await _drain(chunks)
        except httpx2.HTTPError as exc:
            if parser.finished():  # cut after the finish reason: nothing that matters is lost
                cut_after_finish = True
            elif isinstance(exc, httpx2.TimeoutException):
                failure = self._failure(
                    f"the {self.provider} stream stalled: no data for {self.timeout:g} s "
                    "(read timeout); the answer is incomplete"
                )
            else:
                failure = self._failure(
                    f"the connection to {self.provider} dropped mid-response "
                    f"({type(exc).__name__}: {exc}); the answer is incomplete"
                )
        except UnicodeDecodeError as exc:
            failure = self._failure(
                f"{self.provider} sent bytes that are not valid UTF-8 ({exc.reason}); the "
                "answer is incomplete"
            )
        except ValueError as exc:  # json.JSONDecodeError
            failure = self._failure(
                f"{self.provider} sent an event whose data is not valid JSON ({exc}); the "
                "answer is incomplete"
            )
        except StreamFailure as exc:
            failure = self._failure(str(exc))
        except (KeyError, TypeError, AttributeError, IndexError) as exc:
            failure = self._failure(
                f"{self.provider} sent an event of an unexpected shape ({type(exc).__name__}: "
                f"{exc}); the answer is incomplete"
            )
        finally:
            await response.aclose()
        if cut_after_finish:
            try:
                parser.end()
            except StreamFailure as exc:
                failure = self._failure(str(exc))
        for event in out:
            yield event
        out.clear()
        if failure is not None:
            yield StreamError(failure)

    def _failure(self, message: str) -> errors.StreamError:
        return errors.StreamError(self._key.redact(message))

    async def _open(self, path: str, body: dict[str, Any]) -> httpx2.Response:
        """POST ``body`` and return the streaming response, retrying what may be retried."""
        client = await self._client_for_request()
        url = self.base_url + path
        content = _json_bytes(body)
        attempt = 0
        while True:
            retry_after: float | None = None
            try:
                response = await client.send(
                    client.build_request("POST", url, content=content, headers=self._headers()),
                    stream=True,
                )
            except httpx2.TimeoutException as exc:
                error: errors.GenerationError = self._timeout_error(exc)
                retry = True
            except httpx2.TransportError as exc:
                error = self._connection_error(exc)
                retry = True
            else:
                if response.status_code < 300:
                    return response
                error, retry = await self._status_error(response)
                retry_after = parse_retry_after(response.headers)
            if not retry or attempt >= self.max_retries:
                raise error
            delay = self._delay(attempt, retry_after)
            log.info(
                "%s: %s; retrying in %.2f s (attempt %d of %d)",
                self.provider,
                str(error).split("\n", 1)[0],
                delay,
                attempt + 2,
                self.max_retries + 1,
            )
            await asyncio.sleep(delay)
            attempt += 1

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.retry_after_cap)
        delay = min(self.backoff_cap, self.backoff_base * 2.0**attempt)
        return delay * (1 - 0.25 * random.random())  # jitter: 75-100 % of the step

    # --- errors ---------------------------------------------------------------------------

    def _timeout_error(self, exc: httpx2.TimeoutException) -> errors.ProviderTimeoutError:
        if isinstance(exc, (httpx2.ConnectTimeout, httpx2.PoolTimeout)):
            what = f"connecting to {self.base_url} took longer than {self.connect_timeout:g} s"
            fix = "check the network and the base URL, or raise connect_timeout"
        else:
            what = f"{self.provider} sent no response within {self.timeout:g} s"
            fix = "try again, or raise timeout"
        return errors.ProviderTimeoutError(f"{what} (after {self.max_retries + 1} attempts): {fix}")

    def _connection_error(self, exc: httpx2.TransportError) -> errors.ProviderConnectionError:
        reason = self._key.redact(str(exc) or type(exc).__name__)
        return errors.ProviderConnectionError(
            f"could not reach {self.provider} at {self.base_url} ({reason}; after "
            f"{self.max_retries + 1} attempts): check that the server is running and the base "
            "URL is right"
        )

    async def _status_error(self, response: httpx2.Response) -> tuple[errors.ProviderError, bool]:
        status = response.status_code
        body = await _read_bounded(response)
        detail = _error_detail(body) or response.reason_phrase or "no details"
        cls = _STATUS_ERRORS.get(status)
        if cls is None:
            if status >= 500:
                cls = errors.ServerError
            elif status >= 400:
                cls = errors.BadRequestError
            else:  # an unexpected redirect or informational status
                cls = errors.ProviderError
        retry = _retryable_status(status)
        should = response.headers.get("x-should-retry")
        if should in ("true", "false"):
            retry = should == "true"
        message = f"{self.provider} answered HTTP {status}: {detail}\n{self._advice(status)}"
        return cls(self._key.redact(message), status=status, provider=self.provider), retry

    def _advice(self, status: int) -> str:
        key = f"set {self.key_env} (or NBAGENT_API_KEY)" if self.key_env else "set NBAGENT_API_KEY"
        if status == 400:
            return "What to do: fix the request (model name, tool schemas, message history)."
        if status == 401:
            return f"What to do: the API key is missing or wrong: {key} to a valid key."
        if status == 403:
            return "What to do: this key may not use this model or endpoint; check its access."
        if status == 404:
            return (
                f"What to do: check the model name ({self.model!r}) and the base URL "
                f"({self.base_url})."
            )
        if status == 429:
            return "What to do: wait and try again, or lower the request rate (retries ran out)."
        if status >= 500 or status in (408, 409):
            return "What to do: the provider failed (retries ran out); try again later."
        return "What to do: check the request and the base URL."


def _json_bytes(body: dict[str, Any]) -> bytes:
    try:
        return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    except UnicodeEncodeError:  # a lone surrogate (from a model's broken escape): keep it escaped
        return json.dumps(body, separators=(",", ":")).encode()


async def _close_with_loop(client: httpx2.AsyncClient) -> AsyncGenerator[None, None]:
    """Suspended until its loop shuts down its async generators; then closes ``client``."""
    try:
        yield
    finally:
        await client.aclose()


async def _read_bounded(response: httpx2.Response) -> bytes:
    parts: list[bytes] = []
    size = 0
    try:
        async with aclosing(response.aiter_bytes()) as chunks:
            async for chunk in chunks:
                parts.append(chunk)
                size += len(chunk)
                if size >= _ERROR_BODY_LIMIT:
                    break
    except httpx2.HTTPError:
        pass
    finally:
        await response.aclose()
    return b"".join(parts)[:_ERROR_BODY_LIMIT]


def _error_detail(body: bytes) -> str:
    """The provider's own error message from an error body (OpenAI, Anthropic, Ollama, vLLM)."""
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text[:500]
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, str):
            return error[:500]
        if isinstance(error, dict):
            message = error.get("message") or error.get("detail")
            kind = error.get("type") or error.get("code")
            if message:
                return f"{message} ({kind})"[:500] if kind else str(message)[:500]
        detail = data.get("detail") or data.get("message")
        if detail:
            return str(detail)[:500]
    return text[:500]


async def _drain(chunks: AsyncIterator[bytes]) -> None:
    """Read what follows the final event briefly, so the connection can be reused."""

    async def rest() -> None:
        async for _ in chunks:
            pass

    try:
        await asyncio.wait_for(rest(), _DRAIN_SECONDS)
    except (asyncio.TimeoutError, httpx2.HTTPError):
        pass
