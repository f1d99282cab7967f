"""What a server can cost over streamable HTTP is bounded as over stdio (an answer past
``MCPLimits.max_message_bytes`` is refused while it streams in, never read whole), an HTTP
error status says what it was and what to do, and a burst of tool-list changes costs two
fetches, not one per notification."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs the extra)")

from nbagent.errors import MCPServerError
from nbagent.mcp import MCPServer, mcp_server

from .conftest import RAW, RAW_HTTP, ROOT, by_name, call, http_server, wait_until

HUGE = 200_000_000  # bytes of text in one answer
LIMIT = 16 * 1024 * 1024  # MCPLimits.max_message_bytes' default

# In a fresh interpreter, so that its peak memory is this call's alone.
MEASURE = """
import json, sys
sys.path.insert(0, {root!r})
from nbagent.mcp import MCPServer, mcp_server
from tests.mcp.conftest import by_name, call

def megabytes(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) // 1024

with mcp_server("web", url={url!r}) as server:
    before = megabytes("VmRSS")
    result = call(by_name(server, "web__huge"), {{"size": {size}, "chunked": {chunked}}})
    peak = megabytes("VmHWM")
    sent = int(call(by_name(server, "web__sent"), {{}}).text)
    after = call(by_name(server, "web__echo"), {{}}).text
print(json.dumps({{"grew": peak - before, "error": result.is_error, "text": result.text[:500],
                  "sent": sent, "after": after}}))
"""


@pytest.mark.parametrize(
    ("events", "chunked"),
    [(False, False), (False, True), (True, True)],
    ids=["json-with-length", "json-chunked", "event-stream"],
)
def test_a_200_mb_answer_over_http_is_refused_as_it_streams_in(events: bool, chunked: bool) -> None:
    env = {"RAW_HTTP_SSE": "1"} if events else {}
    with http_server([sys.executable, RAW_HTTP], env) as url:
        script = MEASURE.format(root=str(ROOT), url=url, size=HUGE, chunked=chunked)
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
        )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["error"], seen["text"][:200]
    assert seen["text"] == (
        "'huge' on MCP server 'web' failed: the server's answer was larger than 16,777,216 "
        "bytes, so nbagent did not read it (MCPLimits.max_message_bytes)"
    )
    # never read whole: the server could write little more than the limit (socket buffers)
    assert seen["sent"] < 2 * LIMIT, seen
    assert seen["grew"] < 100, seen  # megabytes, for a 200 MB answer (about 1,100 before)
    assert seen["after"] == "ok: echo"  # the connection goes on


@pytest.mark.parametrize(
    ("status", "words"),
    [
        ("401", "HTTP 401 Unauthorized: the server wants credentials (it asks for Bearer)"),
        ("403", "HTTP 403 Forbidden: the server wants other credentials"),
        ("500", "HTTP 500 Internal Server Error"),
    ],
)
def test_an_http_error_status_says_which_and_how_to_pass_credentials(
    status: str, words: str
) -> None:
    with (
        http_server([sys.executable, RAW_HTTP], {"RAW_HTTP_STATUS": status}) as url,
        pytest.raises(MCPServerError) as caught,
    ):
        mcp_server("web", url=url)
    message = str(caught.value)
    assert message.startswith("MCP server 'web' failed: the server answered "), message
    assert words in message, message
    assert "Server returned an error response" not in message
    if status in ("401", "403"):
        assert 'headers={"Authorization": f"Bearer {token}"}' in message
        assert "add_mcp_server" in message  # and how, in a notebook
    else:
        assert "headers=" not in message


def test_an_answer_compressed_although_none_was_asked_for_is_refused() -> None:
    """A compressed body could unpack past any limit (the bound counts the bytes read)."""
    with (
        http_server([sys.executable, RAW_HTTP], {"RAW_HTTP_GZIP": "1"}) as url,
        mcp_server("web", url=url) as server,
    ):
        result = call(by_name(server, "web__echo"), {})
    assert result.is_error
    assert "the server compressed its answer (gzip) although nbagent asked for none" in result.text


def names(server: MCPServer) -> set[str]:
    return {t.name for t in server.tools}


def test_a_burst_of_list_changes_costs_two_fetches_and_ends_on_the_last() -> None:
    with mcp_server("raw", [sys.executable, RAW, "burst", "listings"]) as server:
        seen: list[int] = []
        server.on_change(lambda s: seen.append(len(s.tools)))
        assert call(by_name(server, "raw__burst"), {"count": 500}).text == "burst"
        wait_until(lambda: "raw__v500" in names(server), 30, "the list after the last change")
        fetches = int(call(by_name(server, "raw__listings"), {}).text)
        # the first listing, the fetch the first notification started, and one more for the
        # 499 that came while it ran; the list is the one the last notification announced
        assert 2 <= fetches <= 3, fetches
        assert names(server) == {"raw__burst", "raw__listings", "raw__v500"}
        assert seen and seen[-1] == 3


def test_no_refetch_is_lost_when_a_change_comes_during_a_fetch() -> None:
    """Changes spread out over time: each one after the previous fetch ended is fetched."""
    with mcp_server("raw", [sys.executable, RAW, "burst", "listings"]) as server:
        for change in range(1, 4):
            call(by_name(server, "raw__burst"), {"count": 1})
            tool = f"raw__v{change}"
            wait_until(lambda t=tool: t in names(server), 30, f"the list after change {change}")
        assert int(call(by_name(server, "raw__listings"), {}).text) == 4
