"""A real MCP server written with the SDK (tests/mcp/demo_server.py), over stdio and HTTP:
registration, results, bad input of every kind, tool-list changes, lifetime."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs the extra)")

from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from nbagent.content import ImagePart, ToolResult
from nbagent.errors import MCPServerError
from nbagent.mcp import MCPLimits, mcp_server, tool_name

from .conftest import (
    DEMO,
    RAW,
    ROOT,
    alive,
    by_name,
    call,
    demo_command,
    http_server,
    wait_until,
)

#: How long a test waits for an event before it fails (a bound for a hung run, never a
#: speed check: a loaded machine only makes the wait longer).
EVENT_BOUND = 120.0

# --- registration -----------------------------------------------------------------------------


def test_tools_register_under_the_server_prefix_and_bad_schemas_are_refused_one_by_one(
    demo: Any,
) -> None:
    names = {t.name for t in demo.tools}
    assert {"demo__add", "demo__echo", "demo__picture", "demo__pair"} <= names
    assert demo.origins["demo__add"] == "add"
    assert all(t.needs_approval is True for t in demo.tools)  # approval by default
    rejected = "\n".join(demo.rejected)
    assert len(demo.rejected) == 3, rejected
    assert (
        "tool 'ref_sibling' of MCP server 'demo': draft-07 ignores `maxLength` beside `$ref`"
        in rejected
    )
    assert "at '/properties/word/maxLength'" in rejected
    assert "tool 'remote_ref' of MCP server 'demo'" in rejected
    assert "not a same-document reference" in rejected and "'/properties/where/$ref'" in rejected
    assert "tool 'old_draft'" in rejected and "draft-04" in rejected and "'/$schema'" in rejected
    pair = by_name(demo, "demo__pair").input_schema  # draft-07 tuple, translated
    assert pair["properties"]["pair"]["prefixItems"] == [{"type": "string"}, {"type": "integer"}]
    assert "$schema" not in pair


def test_names_that_providers_refuse_are_made_safe_and_stay_distinct() -> None:
    assert tool_name("fs", "read_file") == "fs__read_file"
    dotted, underscored = tool_name("fs", "read.file"), tool_name("fs", "read_file")
    assert dotted != underscored and dotted.startswith("fs__read_file_")
    long = tool_name("fs", "x" * 200)
    assert len(long) <= 64 and long != tool_name("fs", "x" * 199)
    with pytest.raises(ValueError, match="MCP server name"):
        mcp_server("bad name", ["true"])
    with pytest.raises(ValueError, match="not both"):
        mcp_server("x", ["true"], url="http://127.0.0.1:1/mcp")


# --- results ----------------------------------------------------------------------------------


def test_results_map_text_structured_images_errors_and_progress(demo: Any) -> None:
    assert call(by_name(demo, "demo__add"), {"a": 2, "b": 40}).text == "42"
    picture = call(by_name(demo, "demo__picture"), {})
    assert isinstance(picture, ToolResult) and not picture.is_error
    assert [type(p) for p in picture.content] == [ImagePart]
    assert (picture.images[0].width, picture.images[0].mime_type) == (8, "image/png")
    failed = call(by_name(demo, "demo__fail"), {"message": "the disk is on fire"})
    assert failed.is_error and "the disk is on fire" in failed.text
    updates: list[Any] = []
    counted = call(by_name(demo, "demo__count"), {"steps": 3}, updates)
    assert counted.text == "counted to 3"
    assert [u.text for u in updates] == ["step 1 of 3", "step 2 of 3", "step 3 of 3"]
    assert call(by_name(demo, "demo__pair"), {"pair": ["a", 1], "note": "n"}).text == "a=1 n"


def test_a_20_mb_answer_is_refused_with_a_message_and_the_session_goes_on(demo: Any) -> None:
    result = call(by_name(demo, "demo__big"), {"size": 20_000_000})
    assert result.is_error
    assert "larger than 16,777,216 bytes" in result.text
    assert "MCPLimits.max_message_bytes" in result.text
    assert call(by_name(demo, "demo__echo"), {"text": "still here"}).text == "echo: still here"
    # an answer under the message limit is kept up to the result limit, with a marker
    kept = call(by_name(demo, "demo__big"), {"size": 300_000})
    assert not kept.is_error and kept.content[0].text == "x" * 100_000  # type: ignore[union-attr]
    assert "200,000 more characters were cut" in kept.text


def test_the_server_gets_a_minimal_environment_plus_what_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NBAGENT_TEST_SECRET_KEY", "sk-should-not-leak")
    with mcp_server("envs", demo_command(), env={"GIVEN": "yes"}) as server:
        environment = by_name(server, "envs__environment")
        assert call(environment, {"name": "NBAGENT_TEST_SECRET_KEY"}).text == "(unset)"
        assert call(environment, {"name": "GIVEN"}).text == "yes"
        assert call(environment, {"name": "PATH"}).text == os.environ["PATH"]


def test_lines_that_are_not_json_rpc_on_stdout_are_ignored() -> None:
    with mcp_server("noisy", demo_command("--noisy")) as server:
        assert call(by_name(server, "noisy__add"), {"a": 1, "b": 1}).text == "2"


# --- a server that hangs, crashes, or never starts --------------------------------------------


def test_a_call_that_never_answers_times_out_and_the_server_still_answers() -> None:
    with mcp_server("slow", demo_command(), limits=MCPLimits(call_timeout=0.5)) as server:
        started = time.monotonic()
        result = call(by_name(server, "slow__hang"), {})
        assert time.monotonic() - started < 10
        assert result.is_error
        assert "'hang' on MCP server 'slow' did not answer within 0.5 s" in result.text
        assert call(by_name(server, "slow__add"), {"a": 1, "b": 2}).text == "3"


def test_a_crash_answers_the_call_and_every_later_call_with_why() -> None:
    server = mcp_server("fragile", demo_command())
    pid = server.pid
    assert pid is not None
    try:
        crashed = call(by_name(server, "fragile__crash"), {})
        assert crashed.is_error
        assert "MCP server 'fragile' is not running: it exited with code 3" in crashed.text
        assert "demo server: crashing on purpose" in crashed.text  # its last words on stderr
        later = call(by_name(server, "fragile__add"), {"a": 1, "b": 2})
        assert later.is_error and "exited with code 3" in later.text
        assert server.status.startswith("exited with code 3;")  # not "exited: exited …"
        wait_until(lambda: not alive(pid), what="the crashed process to be reaped")
    finally:
        server.close()


def test_a_call_that_cannot_be_written_to_a_dying_server_says_why(tmp_path: Any) -> None:
    """The server stopped reading (its input closed) and is about to exit: writing the next
    call fails with a broken pipe, and that ended the connection before anyone learned how
    the process ended, so both calls read "it closed its connection" (seen in a kernel when a
    batch's sibling call went out just after a crash), never the exit code or stderr."""
    import threading

    go = tmp_path / "go"
    server = mcp_server(
        "raw", [sys.executable, RAW, "vanish", "add"], env={"RAW_SERVER_GO": str(go)}
    )
    pid = server.pid
    assert pid is not None
    results: dict[str, ToolResult] = {}

    def run(name: str, arguments: dict[str, Any]) -> None:
        results[name] = call(by_name(server, name), arguments)

    try:
        first = threading.Thread(target=run, args=("raw__vanish", {"count": 0}))
        first.start()
        wait_until(lambda: not os.path.exists(f"/proc/{pid}/fd/0"), what="its input to close")
        second = threading.Thread(target=run, args=("raw__add", {"count": 0}))
        second.start()
        second.join(0.5)  # without the fix it is answered at once, saying too little
        go.touch()  # now the server exits, with code 3
        for thread in (first, second):
            thread.join(30)
        for name in ("raw__vanish", "raw__add"):
            text = results[name].text
            assert "exited with code 3" in text and "raw server: vanishing" in text, text
    finally:
        go.touch()
        server.close()


@pytest.mark.parametrize(
    ("command", "limits", "words"),
    [
        (
            ["nbagent-no-such-mcp-server"],
            None,
            "the command 'nbagent-no-such-mcp-server' was not found",
        ),
        (
            [
                sys.executable,
                "-c",
                "import sys; sys.stderr.write('boom: bad config\\n'); sys.exit(2)",
            ],
            None,
            "exited with code 2; its last output on stderr:\nboom: bad config",
        ),
        (
            [sys.executable, "-c", "import time; time.sleep(60)"],
            MCPLimits(start_timeout=0.5),
            "did not start within 0.5 s (MCPLimits.start_timeout)",
        ),
    ],
    ids=["missing", "crashes-on-start", "never-answers"],
)
def test_a_server_that_cannot_start_says_why(
    command: list[str], limits: MCPLimits | None, words: str
) -> None:
    with pytest.raises(MCPServerError) as caught:
        mcp_server("broken", command, limits=limits)
    assert words in str(caught.value)


def test_an_answer_that_cannot_be_parsed_fails_its_call_at_once_saying_why() -> None:
    # a result nested past the SDK's JSON parser: the call would wait for its timeout, and
    # say so ("did not answer within 60 s")
    with mcp_server("raw", [sys.executable, RAW, "deep", "echo"]) as server:
        result = call(by_name(server, "raw__deep"), {})
        assert result.is_error
        assert "the server's answer could not be read" in result.text
        assert "recursion" in result.text
        assert call(by_name(server, "raw__echo"), {}).text == "babbled"  # the session goes on


def test_a_tool_whose_schema_nests_too_deeply_costs_only_itself() -> None:
    import mcp_types

    from nbagent.errors import NbagentError
    from nbagent.mcp._convert import make_tool

    async def unused(*args: Any) -> Any:
        raise AssertionError("never called")

    schema: dict[str, Any] = {"type": "object"}
    for _ in range(400):
        schema = {"type": "object", "properties": {"a": schema}}
    listed = mcp_types.Tool(name="deep", input_schema=schema)
    with pytest.raises(NbagentError, match="tool 'deep' of MCP server 's'"):
        make_tool("s", listed, unused, needs_approval=True, limits=MCPLimits())


# --- the tool list follows the server ---------------------------------------------------------


def test_the_tool_list_follows_list_changed_and_tells_listeners() -> None:
    with mcp_server("growing", demo_command()) as server:
        told = threading.Event()
        seen: list[int] = []

        def listener(changed: Any) -> None:
            seen.append(len(changed.tools))
            told.set()

        unsubscribe = server.on_change(listener)
        before = {t.name: t for t in server.tools}
        assert "growing__extra" not in before
        assert call(before["growing__grow"], {}).text == "grown"
        # the listeners are told once the new list is in place: wait for that, not for a time
        assert told.wait(EVENT_BOUND), "the listener was never told of the change"
        assert seen == [len(before) + 1]
        after = {t.name: t for t in server.tools}
        assert "growing__extra" in after
        assert after["growing__add"] is before["growing__add"]  # unchanged tools stay the same
        assert call(after["growing__extra"], {"word": "hi"}).text == "HI"
        unsubscribe()


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_change_made_before_the_listening_stream_opens_is_in_the_tools(transport: str) -> None:
    """On a 2026 connection a change reaches only a client that listens, with no replay: one
    the server makes after the start listed its tools but before it acknowledged the listening
    stream was never told (the CI flake: the tool `grow` added went unseen). The demo server
    here changes its list on the listen request itself, before its acknowledgment: the tools
    a started server has include it, with nothing to wait for."""
    env = {"DEMO_GROW_ON_LISTEN": "1"}
    if transport == "stdio":
        with mcp_server("early", demo_command(), env=env) as server:
            assert server._connection.protocol in MODERN_PROTOCOL_VERSIONS
            assert "early__extra" in {t.name for t in server.tools}
        return
    with (
        http_server([sys.executable, DEMO, "http"], env=env) as url,
        mcp_server("early", url=url) as server,
    ):
        assert server._connection.protocol in MODERN_PROTOCOL_VERSIONS
        assert "early__extra" in {t.name for t in server.tools}


def test_a_listening_stream_that_breaks_off_is_opened_again_and_the_list_fetched_again() -> None:
    """No replay: a change made while the stream was down is never told. The client listens
    again and fetches the list again, so the tool added meanwhile shows up."""
    with mcp_server("dropping", demo_command()) as server:
        assert server._connection.protocol in MODERN_PROTOCOL_VERSIONS
        told = threading.Event()
        unsubscribe = server.on_change(
            lambda s: told.set() if "dropping__late" in {t.name for t in s.tools} else None
        )
        assert call(by_name(server, "dropping__drop_listening"), {}).text == "dropped"
        assert told.wait(EVENT_BOUND), "the tool added while the stream was down never showed"
        unsubscribe()
        assert call(by_name(server, "dropping__grow"), {}).text == "grown"  # still followed
        wait_until(lambda: "dropping__extra" in {t.name for t in server.tools}, EVENT_BOUND)
        assert not [r for r in server.rejected if "listening stream" in r]


# --- streamable HTTP --------------------------------------------------------------------------


def test_a_server_over_streamable_http(http_demo: str) -> None:
    with mcp_server("web", url=http_demo, headers={"X-Test": "1"}) as server:
        assert server.transport == "http" and server.target == http_demo
        assert call(by_name(server, "web__add"), {"a": 20, "b": 22}).text == "42"
        assert call(by_name(server, "web__grow"), {}).text == "grown"  # 2026-07-28: listen
        wait_until(lambda: "web__extra" in {t.name for t in server.tools}, what="new tool")


def test_an_unreachable_url_says_so() -> None:
    from .conftest import free_port

    url = f"http://user:pass@127.0.0.1:{free_port()}/mcp?token=abc"
    with pytest.raises(MCPServerError) as caught:
        mcp_server("gone", url=url, limits=MCPLimits(start_timeout=10))
    message = str(caught.value)
    assert "could not be reached at http://127.0.0.1:" in message
    assert "pass" not in message and "token" not in message  # credentials never shown


# --- lifetime ---------------------------------------------------------------------------------


def test_close_stops_and_reaps_the_process_and_later_calls_say_so() -> None:
    server = mcp_server("short", demo_command())
    pid = server.pid
    assert pid is not None and alive(pid)
    add = by_name(server, "short__add")
    server.close()
    assert not alive(pid)  # ended and reaped: no zombie left behind
    result = call(add, {"a": 1, "b": 2})
    assert result.is_error and "MCP server 'short' is not running: it was removed" in result.text
    server.close()  # twice is fine


def test_what_the_sdk_logs_about_a_misbehaving_server_never_reaches_stderr() -> None:
    # In a kernel, stderr is the cell: the SDK logs a traceback for every notification it
    # cannot validate, and a server can send thousands. A fresh interpreter, because pytest's
    # own log capture would hide the stderr a notebook shows.
    script = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from nbagent.mcp import mcp_server
from tests.mcp.conftest import by_name, call
with mcp_server("loud", [sys.executable, {RAW!r}]) as server:
    print(call(by_name(server, "loud__babble"), {{"count": 200}}).text)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.stdout.strip() == "babbled", done.stderr[-2000:]
    assert done.stderr == ""


def test_two_tools_that_would_share_an_nbagent_name_are_told_apart() -> None:
    # `read.file` becomes `raw__read_file_dd32cd`; a tool may be named `read_file_dd32cd`.
    names = ["read.file", "read_file_dd32cd", "echo", "echo"]
    with mcp_server("raw", [sys.executable, RAW, *names]) as server:
        assert server.origins == {"raw__read_file_dd32cd": "read.file", "raw__echo": "echo"}
        assert server.rejected == (
            "tool 'read_file_dd32cd' would have the nbagent name 'raw__read_file_dd32cd' of "
            "the tool 'read.file', which is kept",
            "tool 'echo' is listed twice; the first one is used",
        )
