"""How a request that went wrong is told, before any status code says so: a parser's
:class:`StreamFailure`, a 200 answer that is no event stream, and the typed errors of a request
that got no answer (a timeout, a connection refused or dropped, a header that cannot be sent).

Errors of an HTTP status are :mod:`._status`'s. Every message says what to do; the
``clean`` each builder takes removes the adapter's key and anything else shaped like a
credential (the HTTP library's own text may quote a URL or a header).
"""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx2

from .. import errors
from ._shared import retryable_error
from ._status import error_detail

__all__ = [
    "StreamFailure",
    "connection_error",
    "header_error",
    "refuse_document",
    "timeout_error",
]


class StreamFailure(Exception):
    """Raised by a parser when the stream itself reports or shows a failure.

    ``retryable``: the failure is transient (an overloaded server, a cut stream), so asking
    again may succeed.
    """

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


def refuse_document(body: bytes, content_type: str | None, provider: str, base_url: str) -> None:
    """A body with no event at all that is a web page or one JSON document: say so.

    Some servers answer 200 with a JSON error, or with a whole non-streamed answer, where a
    stream was asked for, and a wrong base URL often gets a web page; read as SSE each would
    only look like a cut stream (retried, what it says lost).
    """
    if (content_type or "").split(";", 1)[0].strip().lower() == "text/html":
        raise StreamFailure(
            f"{provider} answered with a web page, not an event stream: check the "
            f"base URL ({base_url}); the answer is incomplete"
        )
    try:
        document = json.loads(body.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return
    if not isinstance(document, dict):
        return
    error = document.get("error")
    if error:
        raise StreamFailure(
            f"{provider} answered with an error instead of a stream: "
            f"{error_detail(body)}; the answer is incomplete",
            retryable=retryable_error(error),
        )
    raise StreamFailure(
        f"{provider} answered with a JSON document, not an event stream (does the "
        f"server at {base_url} support streaming?); the answer is incomplete"
    )


def timeout_error(
    exc: httpx2.TimeoutException,
    attempts: int,
    provider: str,
    base_url: str,
    timeouts: tuple[float, float],
    clean: Callable[[str], str],
) -> errors.ProviderTimeoutError:
    """No answer in time: connecting (``timeouts[0]``, the connect timeout) or waiting for the
    response (``timeouts[1]``)."""
    connect_timeout, timeout = timeouts
    if isinstance(exc, (httpx2.ConnectTimeout, httpx2.PoolTimeout)):
        what = f"connecting to {base_url} took longer than {connect_timeout:g} s"
        fix = "check the network and the base URL, or raise connect_timeout"
    else:
        what = f"{provider} sent no response within {timeout:g} s"
        fix = "try again, or raise timeout"
    return errors.ProviderTimeoutError(clean(f"{what} ({_after(attempts)}): {fix}"))


def connection_error(
    exc: httpx2.TransportError,
    attempts: int,
    provider: str,
    base_url: str,
    clean: Callable[[str], str],
) -> errors.ProviderConnectionError:
    """The server could not be reached, or the connection failed before an answer."""
    reason = str(exc) or type(exc).__name__
    return errors.ProviderConnectionError(
        clean(
            f"could not reach {provider} at {base_url} ({reason}; "
            f"{_after(attempts)}): check that the server is running and the base URL is right"
        )
    )


def header_error(provider: str) -> errors.ConfigurationError:
    """A header the HTTP library refused to send (nothing was sent)."""
    # The HTTP library's message quotes the header, which may be the key: never show it.
    return errors.ConfigurationError(
        f"the request to {provider} could not be sent: a header value holds a line "
        "break or another control character (check the API key and headers=...); "
        "nothing was sent"
    )


def _after(attempts: int) -> str:
    return "after 1 attempt" if attempts == 1 else f"after {attempts} attempts"
