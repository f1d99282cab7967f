"""HTTP error answers: which are retried, how long to wait, and the typed error each becomes.

* Retried: 408, 409, 429 and 5xx (``x-should-retry: true|false`` overrides the rule); never
  400, 401, 403 or 404.
* ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date) says how long to wait;
  unparsable values are ignored. A wait longer than the adapter's ``retry_after_cap`` is not
  waited at all: the error is raised at once and says how long the server asked for.
* The message quotes the provider's own error text (read up to 64 KB) and says what to do.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Mapping
from contextlib import aclosing

import httpx2

from .. import errors

__all__ = [
    "error_detail",
    "parse_retry_after",
    "read_bounded",
    "retryable_status",
    "spending_refusal",
    "status_error",
    "wait_too_long",
]

#: Error bodies are read up to this many bytes (a message, not a download).
ERROR_BODY_LIMIT = 64 * 1024

_STATUS_ERRORS: dict[int, type[errors.ProviderError]] = {
    400: errors.BadRequestError,
    401: errors.AuthenticationError,
    403: errors.PermissionDeniedError,
    404: errors.NotFoundError,
    408: errors.ServerError,
    409: errors.ServerError,
    429: errors.RateLimitError,
}


def retryable_status(status: int) -> bool:
    return status in (408, 409, 429) or status >= 500


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


async def read_bounded(response: httpx2.Response) -> bytes:
    """The start of an error body, then the response is closed."""
    parts: list[bytes] = []
    size = 0
    try:
        async with aclosing(response.aiter_bytes()) as chunks:
            async for chunk in chunks:
                parts.append(chunk)
                size += len(chunk)
                if size >= ERROR_BODY_LIMIT:
                    break
    except httpx2.HTTPError:
        pass
    finally:
        await response.aclose()
    return b"".join(parts)[:ERROR_BODY_LIMIT]


def error_detail(body: bytes) -> str:
    """The provider's own error message from an error body (OpenAI, Anthropic, Ollama, vLLM)."""
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
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


def _advice(status: int, model: str, base_url: str, key_env: str) -> str:
    key = f"set {key_env} (or NBAGENT_API_KEY)" if key_env else "set NBAGENT_API_KEY"
    if status == 400:
        return "What to do: fix the request (model name, tool schemas, message history)."
    if status == 401:
        return f"What to do: the API key is missing or wrong: {key} to a valid key."
    if status == 403:
        return "What to do: this key may not use this model or endpoint; check its access."
    if status == 404:
        return f"What to do: check the model name ({model!r}) and the base URL ({base_url})."
    if status == 429:
        return "What to do: wait and try again, or lower the request rate (retries ran out)."
    if status >= 500 or status in (408, 409):
        return "What to do: the provider failed (retries ran out); try again later."
    return "What to do: check the request and the base URL."


def spending_refusal(status: int, body: bytes, provider: str) -> str | None:
    """One sentence for a refusal because the key's money is spent, or None for another error.

    LiteLLM's proxy answers a spent budget (of a key, a user, a team) with
    ``{"error": {"type": "budget_exceeded", "message": "Budget has been exceeded! …"}}``, on
    HTTP 400 (or 429 in newer versions, where it must not be retried as a rate limit);
    OpenRouter answers HTTP 402 ``{"error": {"code": 402, "message": "Insufficient credits…"}}``.
    """
    try:
        data = json.loads(body.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        data = None
    error = data.get("error") if isinstance(data, dict) else None
    kind = error.get("type") if isinstance(error, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    said = " ".join(str(message).split())[:300].rstrip(".") if message else ""
    if kind == "budget_exceeded":
        return (
            f"{provider} (a model gateway) refused the request because the budget of this "
            f"key is spent ({said or 'budget_exceeded'}): nothing more is sent until whoever "
            "runs the gateway raises it."
        )
    if status == 402:
        return (
            f"{provider} refused the request for want of credits (HTTP 402"
            f"{': ' + said if said else ''}): add credits to the key, or ask whoever runs the "
            "gateway, then run the cell again."
        )
    return None


async def status_error(
    response: httpx2.Response, provider: str, model: str, base_url: str, key_env: str
) -> tuple[errors.ProviderError, bool]:
    """The typed error for an HTTP error answer (body read and closed), and whether to retry."""
    status = response.status_code
    body = await read_bounded(response)
    spent = spending_refusal(status, body, provider)
    if spent is not None:
        return errors.SpendingLimitError(spent, status=status, provider=provider), False
    detail = error_detail(body) or response.reason_phrase or "no details"
    cls = _STATUS_ERRORS.get(status)
    if cls is None:
        if status >= 500:
            cls = errors.ServerError
        elif status >= 400:
            cls = errors.BadRequestError
        else:  # an unexpected redirect or informational status
            cls = errors.ProviderError
    retry = retryable_status(status)
    should = response.headers.get("x-should-retry")
    if should in ("true", "false"):
        retry = should == "true"
    message = f"{provider} answered HTTP {status}: {detail}\n" + _advice(
        status, model, base_url, key_env
    )
    return cls(message, status=status, provider=provider), retry


def wait_too_long(error: errors.ProviderError, seconds: float, cap: float) -> errors.ProviderError:
    """``error`` again, saying the server asked for a wait longer than nbagent will sleep."""
    first_line = str(error).split("\n", 1)[0]
    asked = f"{seconds:.0f}" if seconds >= 10 else f"{seconds:.2g}"
    message = (
        f"{first_line}\nThe server asked to wait {asked} s before trying again, longer "
        f"than retry_after_cap ({cap:g} s), so nbagent did not wait and did not retry. What to "
        "do: try again later, or raise retry_after_cap to let nbagent wait that long."
    )
    return type(error)(message, status=error.status, provider=error.provider)
