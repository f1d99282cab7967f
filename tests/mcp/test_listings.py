"""A tool listing the SDK cannot take as a whole: each bad tool is refused alone, named with
its reason, and the server's other tools register; over stdio and streamable HTTP (a JSON
body and an event stream), from hand-written servers that send the listing's bytes as given."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs the extra)")

from nbagent.mcp import MCPLimits, MCPServer, mcp_server

from .conftest import RAW, RAW_HTTP, by_name, call, everything_command, http_server

OBJECT = {"type": "object", "properties": {"count": {"type": "integer"}}}


def nested(levels: int) -> dict[str, Any]:
    """An object schema with an object property ``levels`` levels down (2 JSON levels each)."""
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def listing_bytes() -> bytes:
    """Good tools around one of each per-tool problem, as JSON text no library would write."""
    good = [
        {"name": "first", "inputSchema": OBJECT},
        {"name": "last", "inputSchema": OBJECT, "annotations": {"readOnlyHint": True}},
    ]
    bad: list[Any] = [
        {"name": "deep", "inputSchema": nested(150)},  # 300 levels: past the SDK's parser
        {"name": "wrong-type", "inputSchema": OBJECT, "annotations": {"readOnlyHint": [1]}},
        {"inputSchema": OBJECT},  # no name
        {"name": "no-schema", "inputSchema": "none"},
        {"name": "odd-task", "inputSchema": OBJECT, "execution": {"taskSupport": "always"}},
        {"name": "research", "inputSchema": OBJECT, "execution": {"taskSupport": "required"}},
        {
            "name": "bad-output",
            "inputSchema": OBJECT,
            "outputSchema": {"type": "object", "properties": {"a": {"type": 5}}},
        },
    ]
    parts = [json.dumps(tool).encode() for tool in [good[0], *bad]]
    # 100,000 levels: past Python's own parser too; and a NaN, which JSON does not allow
    abyss = b'{"type": "object", "default": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    parts.append(b'{"name": "abyss", "inputSchema": ' + abyss + b"}")
    parts.append(b'{"name": "nan", "inputSchema": {"type": "object", "maximum": NaN}}')
    parts.append(json.dumps(good[1]).encode())
    return b"[" + b", ".join(parts) + b"]"


REASONS = {
    "deep": "its input schema nests arrays or objects deeper than 64 levels "
    "(MCPLimits.max_schema_depth)",
    "abyss": "its input schema nests arrays or objects deeper than 64 levels",
    "nan": "its input schema holds NaN or Infinity, which JSON does not allow",
    "wrong-type": "it is not a valid MCP tool: at 'annotations/readOnlyHint': input should be a "
    "valid boolean",
    "no-schema": "it is not a valid MCP tool: at 'inputSchema': input should be a valid dictionary",
    "odd-task": "it is not a valid MCP tool: at 'execution/taskSupport': input should be "
    "'forbidden', 'optional' or 'required'",
    "research": 'it runs only as an MCP task (execution.taskSupport is "required"), which '
    "nbagent does not support",
    "bad-output": "its output schema is not valid JSON Schema",
}


@pytest.fixture(scope="module")
def listing(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = Path(tmp_path_factory.mktemp("listing")) / "tools.json"
    path.write_bytes(listing_bytes())
    return str(path)


@pytest.fixture(params=["stdio", "http-json", "http-events"])
def hostile(request: pytest.FixtureRequest, listing: str) -> Iterator[MCPServer]:
    """The hostile listing from a server over each transport."""
    env = {"RAW_SERVER_TOOLS": listing}
    if request.param == "stdio":
        with mcp_server("raw", [sys.executable, RAW], env=env) as server:
            yield server
        return
    if request.param == "http-events":
        env["RAW_HTTP_SSE"] = "1"
    with http_server([sys.executable, RAW_HTTP], env) as url, mcp_server("raw", url=url) as server:
        yield server


def test_each_bad_tool_is_refused_alone_naming_why_and_the_others_register(
    hostile: MCPServer,
) -> None:
    assert hostile.origins == {"raw__first": "first", "raw__last": "last"}
    by_tool = {name: [r for r in hostile.rejected if f"tool {name!r} " in r] for name in REASONS}
    for name, reason in REASONS.items():
        [message] = by_tool[name]
        assert message.startswith(f"tool {name!r} of MCP server 'raw': "), message
        assert reason in message, message
    [nameless] = [r for r in hostile.rejected if "no usable name" in r]
    assert nameless.startswith("the 4th tool MCP server 'raw' listed (it has no usable name)")
    assert "at 'name': field required" in nameless
    assert len(hostile.rejected) == len(REASONS) + 1
    assert "errors.pydantic.dev" not in "\n".join(hostile.rejected)  # sentences, not dumps
    # the tools that registered work
    assert not call(by_name(hostile, "raw__last"), {}).is_error


def test_a_schema_depth_limit_of_ones_own_applies_and_is_bounded_by_the_sdk_s_parser(
    tmp_path: Path,
) -> None:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([{"name": "mid", "inputSchema": nested(5)}]))  # 11 levels
    env = {"RAW_SERVER_TOOLS": str(path)}
    limits = MCPLimits(max_schema_depth=10)
    with mcp_server("raw", [sys.executable, RAW], env=env, limits=limits) as server:
        assert server.tools == ()
        assert "deeper than 10 levels (MCPLimits.max_schema_depth)" in server.rejected[0]
    with mcp_server("raw", [sys.executable, RAW], env=env) as server:
        assert [t.name for t in server.tools] == ["raw__mid"]
    with pytest.raises(ValueError, match="at most 190"):
        MCPLimits(max_schema_depth=500)


def test_a_listing_deeper_than_the_sdk_s_parser_from_an_sdk_server(tmp_path: Path) -> None:
    """The demo server (the SDK's own server) lists `add` with a schema 99 objects deep."""
    from .conftest import demo_command

    with mcp_server("deep", demo_command(), env={"DEMO_DEEP_SCHEMA": "99"}) as server:
        assert "deep__add" not in server.origins and "deep__echo" in server.origins
        [refused] = server.rejected[:1]
        assert refused.startswith("tool 'add' of MCP server 'deep': its input schema nests")


def test_a_tool_the_sdk_would_drop_on_a_2026_connection_is_named(tmp_path: Path) -> None:
    """On 2026-07-28 connections the SDK drops a tool whose `x-mcp-header` annotation is
    invalid, logging it only: it is refused instead, saying why."""
    schema = {
        "type": "object",
        "properties": {"where": {"type": "object", "x-mcp-header": "Where"}},
    }
    path = tmp_path / "tools.json"
    path.write_text(
        json.dumps(
            [{"name": "header", "inputSchema": schema}, {"name": "plain", "inputSchema": OBJECT}]
        )
    )
    env = {"RAW_SERVER_TOOLS": str(path), "RAW_SERVER_MODERN": "1"}
    with mcp_server("raw", [sys.executable, RAW], env=env) as server:
        assert server._connection.protocol == "2026-07-28"
        assert list(server.origins.values()) == ["plain"]
        [refused] = server.rejected
        assert refused.startswith("tool 'header' of MCP server 'raw': its x-mcp-header ")
        assert "integer/string/boolean" in refused and "2026-07-28" in refused


def test_a_tool_the_sdk_drops_for_a_reason_nbagent_does_not_foresee_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stand-in for an SDK with a rule nbagent does not know yet: the screen is made to miss
    the x-mcp-header rule (the one internal patch here), so the SDK itself drops the tool."""
    from nbagent.mcp import _listing

    monkeypatch.setattr(_listing, "_x_mcp_header_problem", lambda entry, version: None)
    schema = {"type": "object", "properties": {"where": {"type": "object", "x-mcp-header": "W"}}}
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([{"name": "header", "inputSchema": schema}]))
    env = {"RAW_SERVER_TOOLS": str(path), "RAW_SERVER_MODERN": "1"}
    with mcp_server("raw", [sys.executable, RAW], env=env) as server:
        assert server.tools == ()
        assert server.rejected == (
            "tool 'header' of MCP server 'raw': the MCP SDK left it out of the listing (it "
            "says why only in its log)",
        )


def test_the_reference_server_s_task_only_tool_is_refused_at_registration() -> None:
    with mcp_server("everything", everything_command()) as server:
        assert "everything__simulate-research-query" not in server.origins
        [refused] = server.rejected
        assert refused.startswith("tool 'simulate-research-query' of MCP server 'everything': ")
        assert 'runs only as an MCP task (execution.taskSupport is "required")' in refused


def test_a_listing_of_thousands_of_bad_tools_is_read_only_up_to_max_tools(tmp_path: Path) -> None:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([{"name": f"t{i}", "inputSchema": "none"} for i in range(5000)]))
    env = {"RAW_SERVER_TOOLS": str(path)}
    limits = MCPLimits(max_tools=5)
    with mcp_server("raw", [sys.executable, RAW], env=env, limits=limits) as server:
        assert server.tools == ()
        *refused, note = server.rejected
        assert [r.split("'")[1] for r in refused] == ["t0", "t1", "t2", "t3", "t4"]
        assert note == (
            "the server lists more than 5 tools; the rest were left out (MCPLimits.max_tools)"
        )


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """A listing's pages as files: one tool, one tool of 17 MiB (past MCPLimits'
    max_message_bytes), one tool."""
    folder = Path(tmp_path_factory.mktemp("pages"))
    big = {"name": "big", "description": "x" * (17 * 1024 * 1024), "inputSchema": OBJECT}
    written = []
    for number, tools in enumerate(
        [
            [{"name": "first", "inputSchema": OBJECT}],
            [big],
            [{"name": "third", "inputSchema": OBJECT}],
        ]
    ):
        path = folder / f"page{number}.json"
        path.write_text(json.dumps(tools))
        written.append(str(path))
    return written


def _raw(transport: str, env: dict[str, str]) -> Any:
    """The raw server over ``transport``, with ``env``: a context giving the MCPServer."""
    import contextlib

    @contextlib.contextmanager
    def started() -> Iterator[MCPServer]:
        if transport == "stdio":
            with mcp_server("raw", [sys.executable, RAW], env=env) as server:
                yield server
            return
        events = {"RAW_HTTP_SSE": "1"} if transport == "http-events" else {}
        with (
            http_server([sys.executable, RAW_HTTP], {**env, **events}) as url,
            mcp_server("raw", url=url) as server,
        ):
            yield server

    return started()


TOO_LARGE = (
    "the server's answer was larger than 16,777,216 bytes, so nbagent did not read it "
    "(MCPLimits.max_message_bytes)"
)


@pytest.mark.parametrize("transport", ["stdio", "http-json", "http-events"])
def test_a_listing_page_over_the_byte_limit_is_refused_and_the_rest_is_kept(
    pages: list[str], transport: str
) -> None:
    """A page of 17 MiB is refused unread, saying so; the tools of the pages before it
    register, and the server stays running for its calls. The pages after it cannot be
    asked for: the cursor to them is inside the page that was not read."""
    import os

    with _raw(transport, {"RAW_SERVER_TOOLS": os.pathsep.join(pages)}) as server:
        assert server.status == "running"
        assert server.origins == {"raw__first": "first"}
        assert server.rejected == (
            f"page 2 of MCP server 'raw''s tool listing was refused: {TOO_LARGE}; its tools, "
            "and those of any later page, are left out",
        )
        assert not call(by_name(server, "raw__first"), {}).is_error


@pytest.mark.parametrize("transport", ["stdio", "http-json", "http-events"])
def test_a_one_page_listing_over_the_byte_limit_does_not_fail_the_start(
    pages: list[str], transport: str
) -> None:
    """The server starts with no tools and says why (a later change of its list is fetched
    again); another server goes on."""
    from .conftest import demo_command

    with (
        mcp_server("other", demo_command()) as other,
        _raw(transport, {"RAW_SERVER_TOOLS": pages[1]}) as server,
    ):
        assert server.status == "running" and server.tools == ()
        [refused] = server.rejected
        assert refused.startswith(
            f"page 1 of MCP server 'raw''s tool listing was refused: {TOO_LARGE}"
        )
        assert call(by_name(other, "other__add"), {"a": 2, "b": 2}).text == "4"
