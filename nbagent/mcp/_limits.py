"""Bounds on what an MCP server may cost: time to start and to answer, bytes, tools, text."""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["MCPLimits", "too_large"]

# The SDK's JSON parser (pydantic's) stops at about 200 levels; a listing's envelope takes 4.
_DEEPEST = 190
#: Seconds to wait for a server's thread after a close: stop grace periods, then reaping.
THREAD_JOIN = 15.0


@dataclass(frozen=True)
class MCPLimits:
    """Limits nbagent applies to one MCP server (every byte from it is untrusted).

    ``start_timeout``: seconds for the server to start, answer the handshake and list its
    tools; past it the start fails and the process is stopped.
    ``call_timeout``: seconds one tool call may go without a word from the server: its answer,
    or a progress notification, each of which starts the count again (a call waiting for a
    person who takes their time stays alive while the server says it waits); past it the
    call is cancelled on the server and answered with an error result, so a server that
    hangs never hangs a run.
    ``max_call_timeout``: seconds one tool call may take in all, progress or not (a server
    that reports progress forever still ends); at least ``call_timeout``.
    ``max_message_bytes``: the largest message read from the server: a line over stdio, a
    JSON body or one server-sent event over HTTP. A larger one is skipped (or refused) as it
    streams in, never held whole; when it was the answer to a call, that call gets an error
    result saying so, and the connection goes on. A page of the tool listing that large is
    refused with its tools and those of later pages (their cursor is inside it), saying so;
    the tools of earlier pages register and the server starts, or keeps running.
    ``max_tools``: tools taken from one listing; the rest are left out with a note.
    ``max_schema_bytes``: the JSON size of one tool's input schema; a larger tool is not
    registered.
    ``max_schema_depth``: how deeply arrays and objects may nest in one listed tool's fields
    (its input and output schemas above all; a flat object is 1). A deeper tool is not
    registered, and the server's other tools are (at most 190: the SDK's JSON parser reads
    a message no deeper than about 200 levels).
    ``max_description_chars``: characters of a tool's description kept (the model reads it on
    every request); the rest is cut, with a marker.
    ``max_result_chars`` / ``max_result_images`` / ``max_result_parts``: text, images and
    content blocks kept from one result (the agent's own :class:`~nbagent.Limits` then apply
    as for any tool).
    ``sign_in_timeout``: seconds a sign-in (OAuth, see :class:`~nbagent.mcp.OAuth`) waits for
    the person to follow the link and the browser to come back; past it the sign-in fails.
    The start's own clock stops meanwhile.
    ``auth_timeout``: seconds one request to the authorization server (metadata, client
    registration, a token) may take, its whole answer included; past it the sign-in (or the
    refresh) fails, saying which server did not answer.
    ``max_auth_bytes``: the largest answer read from the authorization server; a larger one
    is refused as it streams in, never held whole.
    """

    start_timeout: float = 30.0
    call_timeout: float = 60.0
    max_call_timeout: float = 30 * 60.0
    max_message_bytes: int = 16 * 1024 * 1024
    max_tools: int = 256
    max_schema_bytes: int = 256 * 1024
    max_schema_depth: int = 64
    max_description_chars: int = 4_000
    max_result_chars: int = 100_000
    max_result_images: int = 8
    max_result_parts: int = 256
    sign_in_timeout: float = 300.0
    auth_timeout: float = 30.0
    max_auth_bytes: int = 64 * 1024

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"MCPLimits.{item.name} must be a positive number, not {value!r}")
            if item.type == "int" and not isinstance(value, int):
                raise ValueError(f"MCPLimits.{item.name} must be an integer, not {value!r}")
        if self.max_call_timeout < self.call_timeout:
            raise ValueError(
                f"MCPLimits.max_call_timeout ({self.max_call_timeout:g} s) is shorter than "
                f"call_timeout ({self.call_timeout:g} s): give a longer max_call_timeout too"
            )
        if self.max_schema_depth > _DEEPEST:
            raise ValueError(
                f"MCPLimits.max_schema_depth is at most {_DEEPEST} (the MCP SDK reads no "
                f"deeper), not {self.max_schema_depth!r}"
            )


def too_large(limit: int) -> str:
    """What a request hears when its answer was over ``limit`` bytes (stdio and HTTP alike)."""
    return (
        f"the server's answer was larger than {limit:,} bytes, so nbagent did not read it "
        "(MCPLimits.max_message_bytes)"
    )
