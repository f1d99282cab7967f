"""Progress keeps a call alive: a server that reports progress more often than
``MCPLimits.call_timeout`` keeps its call going past that timeout, up to
``MCPLimits.max_call_timeout`` in all; a server that stays silent is cancelled after
``call_timeout``. Against real servers written with the official SDK (tests/mcp/
progress_server.py, over stdio and streamable HTTP) and the npm reference server's
long-running operation, with the bounds shortened for the test.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs the extra)")

from nbagent import mcp_server
from nbagent.mcp import MCPLimits

from .conftest import by_name, call, everything_command, http_server, wait_until

PROGRESS = str(Path(__file__).with_name("progress_server.py"))
#: Progress every 0.15 s keeps a call going past 0.5 s of call_timeout; 2.5 s in all at most.
SHORT = MCPLimits(call_timeout=0.5, max_call_timeout=2.5)


@pytest.fixture(scope="module", params=["stdio", "http"])
def server(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == "stdio":
        with mcp_server("p", [sys.executable, PROGRESS, "stdio"], limits=SHORT) as found:
            yield found
        return
    with (
        http_server([sys.executable, PROGRESS, "http"]) as url,
        mcp_server("p", url=url, limits=SHORT, auth=False) as found,
    ):
        yield found


def test_progress_keeps_a_call_alive_past_the_silence_timeout(server: Any) -> None:
    updates: list[Any] = []
    result = call(by_name(server, "p__tick"), {"seconds": 1.2, "every": 0.15}, updates)
    assert not result.is_error, result.text
    assert result.text == "ticked for 1.2 s"
    assert len(updates) >= 4  # the card showed how it went meanwhile


def test_a_silent_call_is_cancelled_after_the_silence_timeout(server: Any) -> None:
    before = int(call(by_name(server, "p__cancelled"), {}).text)
    result = call(by_name(server, "p__quiet"), {"seconds": 30})
    assert result.is_error
    assert "'quiet' on MCP server 'p' did not answer within 0.5 s" in result.text
    assert "sent no progress meanwhile" in result.text
    assert "(MCPLimits.call_timeout)" in result.text
    # cancelled on the server too, and the server goes on
    assert int(call(by_name(server, "p__cancelled"), {}).text) == before + 1


def test_progress_forever_still_ends_at_the_maximum(server: Any) -> None:
    before = int(call(by_name(server, "p__cancelled"), {}).text)
    result = call(by_name(server, "p__tick"), {"seconds": 60, "every": 0.15})
    assert result.is_error
    assert "'tick' on MCP server 'p' was still working after 2.5 s" in result.text
    assert "(MCPLimits.max_call_timeout)" in result.text
    assert int(call(by_name(server, "p__cancelled"), {}).text) == before + 1


def test_the_tools_own_bound_leaves_room_for_the_maximum(server: Any) -> None:
    # the loop's timeout on the tool is a backstop behind the connection's bounds
    assert by_name(server, "p__tick").timeout == SHORT.max_call_timeout + 5.0


def test_the_reference_servers_long_running_operation_outlives_the_silence_timeout() -> None:
    with mcp_server("ref", everything_command(), limits=SHORT) as everything:
        updates: list[Any] = []
        result = call(
            by_name(everything, "ref__trigger-long-running-operation"),
            {"duration": 1.5, "steps": 10},
            updates,
        )
    assert not result.is_error, result.text
    assert "completed" in result.text.lower(), result.text
    assert len(updates) >= 5


def test_the_maximum_is_at_least_the_silence_timeout() -> None:
    with pytest.raises(ValueError, match=r"max_call_timeout \(30 s\) is shorter than call_timeout"):
        MCPLimits(call_timeout=60, max_call_timeout=30)
    with pytest.raises(ValueError, match="max_call_timeout must be a positive number"):
        MCPLimits(max_call_timeout=0)
    assert MCPLimits().max_call_timeout == 30 * 60.0


def test_a_served_notebook_call_waits_for_a_slow_person_while_it_reports_progress() -> None:
    """The issue's case: nbagent's own served notebook sends progress while a call waits for
    the person (every 0.2 s here, 5 s by default); its client waits past its call_timeout."""
    import threading

    from nbagent.approvals.approval import Decision

    from .test_serve import _make

    made = _make()
    served = next(made)
    try:
        headers = {"Authorization": f"Bearer {served.server.token}"}
        with mcp_server("nb", url=served.server.url, headers=headers, limits=SHORT) as client:
            updates: list[Any] = []

            def person() -> None:  # decides once the client has heard "waiting" 5 times
                wait_until(lambda: len(updates) >= 5 and served.asked(), 20, "the progress")
                request = served.asked()[0].request
                decision = Decision(True, by="person")
                served.approver.resolve(request.call.id, decision, fingerprint=request.fingerprint)

            slow = threading.Thread(target=person, daemon=True)
            slow.start()
            result = call(by_name(client, "nb__delete_file"), {"path": "a.txt"}, updates)
            slow.join(20)
        assert not result.is_error, result.text
        assert result.text == "deleted a.txt"
        assert any("waiting in the notebook" in str(u) for u in updates)
    finally:
        made.close()
