"""The stdio framing: lines split in linear time whatever the chunking, a line over the limit
skipped but its response id found (both SDKs' key orders), and the limits of one server."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs the extra)")

from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent.errors import MCPServerError
from nbagent.mcp import MCPLimits, mcp_server
from nbagent.mcp._stdio import _Lines, _response_id

from .conftest import demo_command

LIMIT = 40


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(
        st.binary(min_size=0, max_size=90).map(lambda b: b.replace(b"\n", b"")), max_size=6
    ),
    cuts=st.lists(st.integers(1, 30), max_size=40),
)
def test_lines_come_out_whole_whatever_the_chunks(lines: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(line + b"\n" for line in lines)
    chunks, at = [], 0
    for size in cuts:
        chunks.append(stream[at : at + size])
        at += size
    chunks.append(stream[at:])
    splitter = _Lines(LIMIT)
    out: list[Any] = [item for chunk in chunks for item in splitter.feed(chunk)]
    expected = [
        (line[:256], line[-256:]) if len(line) > LIMIT else line
        for line in lines
        if len(line) > LIMIT or line.strip()
    ]
    assert out == expected
    assert len(splitter.buffer) <= LIMIT + 30  # never more than the limit and one chunk


@pytest.mark.parametrize(
    ("message", "found"),
    [
        ({"jsonrpc": "2.0", "id": 7, "result": {"content": []}}, 7),  # Python SDK order
        ({"result": {"content": []}, "jsonrpc": "2.0", "id": "r-1"}, "r-1"),  # TypeScript's
        ({"error": {"code": 1, "message": "x"}, "jsonrpc": "2.0", "id": 3}, 3),
        ({"jsonrpc": "2.0", "id": 4, "method": "sampling/createMessage"}, None),  # a request
        ({"method": "notifications/message", "jsonrpc": "2.0"}, None),
    ],
)
def test_the_id_of_a_skipped_answer(message: dict[str, Any], found: Any) -> None:
    line = json.dumps(message, separators=(",", ":")).encode()
    assert _response_id(line[:256], line[-256:]) == found


def test_the_limits_of_one_server_apply() -> None:
    limits = MCPLimits(max_tools=3, max_description_chars=5, max_result_parts=1)
    with mcp_server("few", demo_command(), limits=limits) as server:
        assert len(server.tools) == 3
        assert any("more than 3 tools" in r for r in server.rejected)
        assert all(t.description.startswith(t.description[:5]) for t in server.tools)
        assert any("more characters cut" in t.description for t in server.tools)
    with pytest.raises(ValueError, match="positive"):
        MCPLimits(call_timeout=0)


def test_without_the_sdk_the_message_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    # a stand-in for a machine without the extra: find_spec answers as it would there
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "mcp" else real(name, *a)
    )
    with pytest.raises(MCPServerError, match=r'pip install "nbagent\[mcp\]"'):
        mcp_server("x", ["true"])
