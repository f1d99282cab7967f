"""Why something failed with an MCP server, in words a person can act on (and no secrets)."""

from __future__ import annotations

from ._limits import too_large
from ._listing import describe_validation_error

__all__ = [
    "answered_error",
    "call_problem",
    "leaves",
    "quiet_sdk_logging",
    "short",
    "unread_page",
    "unreadable_http",
]

_MESSAGE_LIMIT = 2_000
#: The SDK's loggers: its modules', and the bare "client" its client session logs under.
_SDK_LOGGERS = ("mcp", "mcp_types", "client")


def short(text: str, limit: int = _MESSAGE_LIMIT) -> str:
    from ..redact import redact_secrets

    text = redact_secrets(text)
    return text if len(text) <= limit else f"{text[:limit]} [... {len(text) - limit:,} cut]"


def answered_error(exc: BaseException) -> str | None:
    """The message of an error the server (or the transport, for it) answered a request with;
    None for anything else, a closed connection included (its exit says more)."""
    try:
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED
    except ImportError:  # pragma: no cover - the SDK is there whenever a server runs
        return None
    if isinstance(exc, MCPError) and exc.code != CONNECTION_CLOSED:
        return str(exc.error.message)
    return None


def quiet_sdk_logging() -> None:
    """Keep the SDK's log records out of stderr unless the person configured logging.

    The SDK logs a warning with a traceback for each message of a server it cannot use (a
    notification that does not validate, a bad event); with no handler anywhere, Python prints
    them to stderr, which in a kernel is whichever cell runs, and a server can send thousands.
    A NullHandler (the library convention) stops that last resort; records still propagate
    to handlers the person set up. nbagent reports what matters itself (a call's result, the
    server's status).
    """
    import logging

    for name in _SDK_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
            logger.addHandler(logging.NullHandler())


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (possibly nested) exception groups, or the exception itself."""
    inner = getattr(exc, "exceptions", None)
    if isinstance(inner, (list, tuple)) and inner:
        return [leaf for item in inner for leaf in leaves(item)]
    return [exc]


def unreadable_http(message: str, limit: int) -> str:
    """The SDK's message for an answer it could not take, or nbagent's own reason alone when
    nbagent refused the answer (the SDK puts "Failed to parse JSON response: " before it)."""
    ours = too_large(limit)
    return ours if ours in message else message


def unread_page(exc: BaseException, number: int, server: str, limit: int) -> str | None:
    """Why page ``number`` of a tool listing is left out, when nbagent refused to read it (an
    answer over ``limit`` bytes, over stdio or HTTP alike); None for any other failure.

    One JSON-RPC answer cannot be read in part, and the cursor to the next page is inside it:
    that page's tools and those after it are left out, the pages before it are kept, and the
    connection goes on (the transports skip the answer as it streams in)."""
    try:
        from mcp import MCPError
    except ImportError:  # pragma: no cover - the SDK is there whenever a server runs
        return None
    ours = too_large(limit)
    if not isinstance(exc, MCPError) or ours not in str(exc.error.message):
        return None
    return (
        f"page {number} of MCP server {server!r}'s tool listing was refused: {ours}; its "
        "tools, and those of any later page, are left out"
    )


def call_problem(exc: Exception) -> str:
    """What went wrong with a call the SDK could not complete, in a sentence (pydantic's and
    jsonschema's reports run to dozens of lines, with URLs and the whole input)."""
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        return f"answered with a result that is not valid MCP: {describe_validation_error(exc)}"
    cause = exc.__cause__
    message = getattr(cause, "message", None)
    if isinstance(exc, RuntimeError) and isinstance(message, str):  # jsonschema's error
        where = getattr(cause, "json_path", "$")
        return (
            "answered with structured content its output schema does not allow: "
            f"{short(message, 300)} (at {where})"
        )
    return f"failed: {type(exc).__name__}: {short(str(exc))}"
