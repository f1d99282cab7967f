"""What both HTTP adapters share: the client, retries and the SSE pump; the typed error each
failure becomes is :mod:`._status`'s (an HTTP status) or :mod:`._failures`' (anything else).

* One ``httpx2.AsyncClient`` per adapter, created on first use (and again if the adapter is used
  from another event loop, as the notebook does with one loop per cell). An injected ``client``
  is used as-is and never closed here; an injected ``transport`` gets a client of our own.
* Retries before the response (see :mod:`nbagent.providers._status`): 408, 409, 429, 5xx,
  connection failures and timeouts, with exponential backoff and jitter, honouring
  ``Retry-After`` up to ``retry_after_cap``; a longer ``Retry-After`` is raised at once, saying
  how long the server asked for. 400, 401, 403 and 404 are never retried.
* Retries after output began. Tool calls only ever run from a finished answer, so a response
  that breaks mid-stream executed nothing and may be asked for again, with the same backoff;
  the new response streams from its start. Retried mid-stream failures: the
  connection dropping, a read timeout (no data for ``timeout`` seconds), the body ending before
  the finish reason (a cut that looks clean), and error events the provider marks as transient
  (Anthropic ``overloaded_error``, ``api_error``, ``rate_limit_error``, ``timeout_error``;
  OpenAI-style ``server_error``, rate-limit and timeout types, or a numeric code of 408, 409,
  429 or 5xx). Not retried: invalid JSON, an unexpected event shape, an event over the size
  limit, and error events about the request itself. Every retry, before or after output,
  counts against the same ``max_retries``; when they run out the failure is final, as a
  :class:`~nbagent.generation.StreamError` event.
* Every retry, before the response or after output began, is announced by a
  :class:`~nbagent.generation.StreamRetry` *before* it is sent: consumers drop the partial
  answer (if any), and a run counts it as a request against ``Budget(requests=...)``; closing
  the stream there sends nothing more.
* A 200 answer whose body holds no event but one JSON document (a gateway's error, or a whole
  non-streamed answer) fails with what the document says, retried only when its error is
  transient; a web page (``text/html``, often a wrong base URL) fails saying so. Read as a
  stream each would look like a cut one, what it says lost.
* Limits: a line or an event of the stream may hold at most ``max_event_bytes`` (8 MiB by
  default), and one answer's whole body at most ``max_response_bytes`` (128 MiB: a 128k-token
  answer is about 40 MB of events); past either the answer fails, not retried, and no more is
  read. An error body is read up to 64 KB.
* Errors are :mod:`nbagent.errors` types whose message says what to do. They are raised outside
  any ``except`` block (nothing chained), and every message has the adapter's own key and
  anything else shaped like a credential replaced by ``***``
  (:func:`nbagent.redact.redact_secrets`).
* Once the first event is out, failures are *yielded* as ``StreamError`` events, never raised.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from contextlib import aclosing
from typing import Any, ClassVar, Protocol

import httpx2

from .. import errors
from ..generation import Request, StreamError, StreamEvent, StreamRetry
from ..redact import redact_secrets
from ._failures import (
    StreamFailure,
    connection_error,
    header_error,
    refuse_document,
    timeout_error,
)
from ._keys import Secret, check_key_destination, clean_api_key
from ._sse import DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_RESPONSE_BYTES, EventTooLarge, SSEDecoder
from ._status import ERROR_BODY_LIMIT, parse_retry_after, status_error, wait_too_long

__all__ = [
    "HTTPGenerator",
    "Secret",
    "StreamParser",
    "parse_retry_after",
]

log = logging.getLogger("nbagent.providers")

#: After the final event, wait this long for the end of the body so the connection is reusable.
_DRAIN_SECONDS = 0.25


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


class _Attempt:
    """How one streamed response ended: ``failure`` is None when it finished."""

    __slots__ = ("failure", "retryable")

    def __init__(self) -> None:
        self.failure: errors.StreamError | None = None
        self.retryable = False


class _Budget:
    """Retries used so far by one request, before and after output began alike."""

    __slots__ = ("used",)

    def __init__(self) -> None:
        self.used = 0


#: Hosts whose provider the GenAI conventions name (``gen_ai.provider.name`` well-known values).
_KNOWN_HOSTS: tuple[tuple[str, str], ...] = (
    ("api.openai.com", "openai"),
    ("openai.azure.com", "azure.ai.openai"),
    ("cognitiveservices.azure.com", "azure.ai.openai"),
    ("services.ai.azure.com", "azure.ai.inference"),
    ("api.anthropic.com", "anthropic"),
    ("amazonaws.com", "aws.bedrock"),
    ("api.deepseek.com", "deepseek"),
    ("api.mistral.ai", "mistral_ai"),
    ("api.groq.com", "groq"),
    ("api.x.ai", "x_ai"),
    ("api.perplexity.ai", "perplexity"),
    ("api.cohere.ai", "cohere"),
    ("api.cohere.com", "cohere"),
    ("generativelanguage.googleapis.com", "gcp.gemini"),
    ("aiplatform.googleapis.com", "gcp.vertex_ai"),
)


class HTTPGenerator:
    """Base of the HTTP adapters: settings, the lazily created client, retries, the SSE pump.

    Subclasses set ``provider``/``key_env``/``vendor``, and implement ``_headers`` and
    ``_prepare``. ``max_event_bytes`` caps one line and one event of the stream,
    ``max_response_bytes`` one answer's whole body.
    """

    provider: str = "provider"
    key_env: str = ""
    #: Whose keys this adapter may send: a recognised key of another vendor is refused.
    vendor: ClassVar[str] = ""
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
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        base = (base_url or self.default_base_url).rstrip("/")
        if not base.startswith(("http://", "https://")):
            raise errors.ConfigurationError(
                f"the {self.provider} base URL {redact_secrets(base)!r} must start with "
                "http:// or https://"
            )
        if max_retries < 0:
            raise errors.ConfigurationError("max_retries must be 0 or more")
        if max_event_bytes < 1024:
            raise errors.ConfigurationError("max_event_bytes must be at least 1024")
        if max_response_bytes < max_event_bytes:
            raise errors.ConfigurationError("max_response_bytes must be at least max_event_bytes")
        key = clean_api_key(api_key, "the api_key argument")
        check_key_destination(key, "the api_key argument", self.vendor, base)
        self.model = model
        self.base_url = base
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.retry_after_cap = retry_after_cap
        self.max_event_bytes = max_event_bytes
        self.max_response_bytes = max_response_bytes
        self.extra_headers = _checked_headers(headers)
        self._key = Secret(key)
        self._injected = client
        self._transport = transport
        self._client: httpx2.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._guard: AsyncGenerator[None, None] | None = None
        self._guard_started = False

    # --- presentation -------------------------------------------------------------------

    @property
    def telemetry_provider(self) -> str:
        """``gen_ai.provider.name`` for this adapter's spans (OpenTelemetry GenAI conventions):
        the provider behind a known host, else the API this adapter speaks (``vendor``)."""
        host = (httpx2.URL(self.base_url).host or "").lower()
        for suffix, name in _KNOWN_HOSTS:
            if host == suffix or host.endswith("." + suffix):
                return name
        return self.vendor or type(self).__name__.lower()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(model={self.model!r}, "
            f"base_url={redact_secrets(self.base_url)!r}, api_key={self._key!r})"
        )

    # --- to be provided by the adapter ----------------------------------------------------

    def _headers(self) -> dict[str, str]:
        raise NotImplementedError

    def _prepare(self, request: Request) -> tuple[str, dict[str, Any], Callable[[], StreamParser]]:
        """The URL path, the JSON body and a parser factory (one fresh parser per attempt)."""
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
        """Stream one model turn: raises before the first event, yields StreamError after it.

        Every retry, before the response or after output began, is announced by a
        :class:`StreamRetry` *before* it is sent (see the module docs), so a consumer that
        counts requests can refuse one by closing the stream there.
        """
        path, body, new_parser = self._prepare(request)
        content = _json_bytes(body)
        budget = _Budget()
        response: httpx2.Response | None = None
        emitted = False  # an answer's event went out: from then on, failures are events
        while True:
            if response is None:
                async with aclosing(self._open(path, content, budget)) as opening:
                    async for item in opening:
                        if isinstance(item, StreamRetry):
                            yield item
                        else:
                            response = item
                assert response is not None  # _open yields a response or raises
            attempt = _Attempt()
            async with aclosing(self._pump(response, new_parser(), attempt)) as events:
                async for event in events:
                    emitted = True
                    yield event
            response = None
            failure = attempt.failure
            if failure is None:
                return
            if not attempt.retryable or budget.used >= self.max_retries:
                yield StreamError(failure)
                return
            delay = self._delay(budget.used, None)
            budget.used += 1
            self._log_retry(str(failure), delay, budget.used)
            yield StreamRetry(str(failure), budget.used, delay)
            await asyncio.sleep(delay)
            try:
                async with aclosing(self._open(path, content, budget)) as opening:
                    async for item in opening:
                        if isinstance(item, StreamRetry):
                            yield item
                        else:
                            response = item
            except errors.NbagentError as exc:
                error: errors.NbagentError = exc
            else:
                continue
            if not emitted:
                raise error  # outside the except block: nothing chained
            yield StreamError(error)
            return

    async def _pump(
        self, response: httpx2.Response, parser: StreamParser, attempt: _Attempt
    ) -> AsyncGenerator[StreamEvent, None]:
        """Decode one response into events; how it ended goes into ``attempt``."""
        decoder = SSEDecoder(self.max_event_bytes)
        out = parser.out
        head: bytearray | None = bytearray()  # the body's start, until it shows it is a stream
        message: str | None = None
        retryable = False
        cut_after_finish = False
        room = self.max_response_bytes
        try:
            async with aclosing(response.aiter_bytes()) as chunks:
                done = False
                async for chunk in chunks:
                    room -= len(chunk)
                    if room < 0:
                        raise StreamFailure(
                            f"{self.provider} sent more than {self.max_response_bytes:,} bytes "
                            "in one answer (max_response_bytes); stopped reading; the answer "
                            "is incomplete"
                        )
                    if head is not None and len(head) < ERROR_BODY_LIMIT:
                        head += chunk[: ERROR_BODY_LIMIT - len(head)]
                    for name, data in decoder.feed(chunk):
                        head = None
                        if not data or data.isspace():
                            continue  # an empty data: line carries nothing
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
                        head = None
                        if data and not data.isspace() and parser.event(name, data):
                            break
                if head is not None:
                    refuse_document(
                        bytes(head),
                        response.headers.get("content-type"),
                        self.provider,
                        self.base_url,
                    )
                parser.end()
                for event in out:
                    yield event
                out.clear()
                if done:  # after the final event: reuse the connection if the body ends now
                    await _drain(chunks)
        except httpx2.HTTPError as exc:
            retryable = True
            if parser.finished():  # cut after the finish reason: nothing that matters is lost
                cut_after_finish = True
            elif isinstance(exc, httpx2.TimeoutException):
                message = (
                    f"the {self.provider} stream stalled: no data for {self.timeout:g} s "
                    "(read timeout); the answer is incomplete"
                )
            else:
                message = (
                    f"the connection to {self.provider} dropped mid-response "
                    f"({type(exc).__name__}: {exc}); the answer is incomplete"
                )
        except EventTooLarge as exc:
            message = f"{self.provider} sent {exc}; the answer is incomplete"
        except (ValueError, RecursionError) as exc:  # json.JSONDecodeError
            message = (
                f"{self.provider} sent an event whose data is not valid JSON ({exc}); the "
                "answer is incomplete"
            )
        except StreamFailure as exc:
            message, retryable = str(exc), exc.retryable
        except (KeyError, TypeError, AttributeError, IndexError) as exc:
            message = (
                f"{self.provider} sent an event of an unexpected shape ({type(exc).__name__}: "
                f"{exc}); the answer is incomplete"
            )
        finally:
            await response.aclose()
        if cut_after_finish:
            try:
                parser.end()
            except StreamFailure as exc:
                message, retryable = str(exc), exc.retryable
        for event in out:
            yield event
        out.clear()
        if message is not None:
            attempt.failure = errors.StreamError(self._clean(message))
            attempt.retryable = retryable

    def _clean(self, message: str) -> str:
        """``message`` without the key or anything else shaped like a credential."""
        return redact_secrets(self._key.redact(message))

    def _log_retry(self, reason: str, delay: float, used: int) -> None:
        log.info(
            "%s: %s; retrying in %.2f s (attempt %d of %d)",
            self.provider,
            reason.split("\n", 1)[0],
            delay,
            used + 1,
            self.max_retries + 1,
        )

    async def _open(
        self, path: str, content: bytes, budget: _Budget
    ) -> AsyncGenerator[StreamRetry | httpx2.Response, None]:
        """POST ``content`` and yield the streaming response, retrying what may be retried;
        each retry is yielded as a :class:`StreamRetry` before it is sent."""
        client = await self._client_for_request()
        url = self.base_url + path
        while True:
            retry_after: float | None = None
            try:
                response = await client.send(
                    client.build_request("POST", url, content=content, headers=self._headers()),
                    stream=True,
                )
            except httpx2.TimeoutException as exc:
                error: errors.NbagentError = timeout_error(
                    exc,
                    budget.used + 1,
                    self.provider,
                    self.base_url,
                    (self.connect_timeout, self.timeout),
                    self._clean,
                )
                retry = True
            except httpx2.LocalProtocolError:
                error, retry = header_error(self.provider), False
            except httpx2.TransportError as exc:
                error = connection_error(
                    exc, budget.used + 1, self.provider, self.base_url, self._clean
                )
                retry = True
            else:
                if response.status_code < 300:
                    yield response
                    return
                status, retry = await status_error(
                    response, self.provider, self.model, self.base_url, self.key_env
                )
                retry_after = parse_retry_after(response.headers)
                if retry and retry_after is not None and retry_after > self.retry_after_cap:
                    status, retry = wait_too_long(status, retry_after, self.retry_after_cap), False
                error = type(status)(
                    self._clean(str(status)), status=status.status, provider=status.provider
                )
            if not retry or budget.used >= self.max_retries:
                raise error
            delay = self._delay(budget.used, retry_after)
            budget.used += 1
            self._log_retry(str(error), delay, budget.used)
            # the first line says what happened; the rest is advice for a final failure
            yield StreamRetry(str(error).split("\n", 1)[0], budget.used, delay)
            await asyncio.sleep(delay)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.retry_after_cap)
        delay = min(self.backoff_cap, self.backoff_base * 2.0**attempt)
        return delay * (1 - 0.25 * random.random())  # jitter: 75-100 % of the step


def _checked_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    """Extra headers, refused (naming the header, never its value) if they cannot be sent."""
    checked: dict[str, str] = {}
    for name, value in (headers or {}).items():
        if not isinstance(name, str) or not name or not all("!" <= c <= "~" for c in name):
            raise errors.ConfigurationError(
                f"header name {name!r} must be printable ASCII without spaces"
            )
        if not isinstance(value, str) or not all(" " <= c <= "~" or c == "\t" for c in value):
            raise errors.ConfigurationError(
                f"the value of header {name!r} must be printable ASCII (no line breaks or "
                "control characters)"
            )
        checked[name] = value.strip()
    return checked


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


async def _drain(chunks: AsyncIterator[bytes]) -> None:
    """Read what follows the final event briefly, so the connection can be reused."""

    async def rest() -> None:
        async for _ in chunks:
            pass

    try:
        await asyncio.wait_for(rest(), _DRAIN_SECONDS)
    except (asyncio.TimeoutError, httpx2.HTTPError):
        pass
