"""``%agent serve``'s protocol side over real HTTP: a served tool that waits for a person, and
every kind of bad input the issue lists, each answered with its protocol's error while the
loop the calls run on stays responsive and nothing runs unapproved.

The person is an :class:`~nbagent.approvals.approval.InteractiveApprover` resolved by the test, the
"kernel" a loop on a thread of its own (tests/notebook covers the same path in real kernels,
clicked as a browser clicks); the clients are nbagent's own MCP client and raw HTTP.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs the extra)")

import httpx2 as httpx

from nbagent import mcp_server, tool
from nbagent.approvals.approval import Decision, InteractiveApprover
from nbagent.events import ApprovalRequested, ToolCallStarted, ToolFinished
from nbagent.loop._served import ServedCalls
from nbagent.mcp._serving.server import ServeError, ServeSettings, ToolServer
from nbagent.redact import redact_secrets

from .conftest import ROOT, by_name, call, wait_until

VERSION = "2025-11-25"


@dataclass
class Served:
    server: ToolServer
    calls: ServedCalls
    approver: InteractiveApprover
    loop: asyncio.AbstractEventLoop
    tools: dict[str, Any]
    events: list[Any] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)

    def headers(self, **extra: str) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {self.server.token}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            **extra,
        }

    def asked(self) -> list[ApprovalRequested]:
        return [e for e in self.events if isinstance(e, ApprovalRequested)]

    def finished(self) -> list[ToolFinished]:
        return [e for e in self.events if isinstance(e, ToolFinished)]

    def loop_answers(self) -> bool:
        """The loop the calls run on still runs other work promptly."""
        future = asyncio.run_coroutine_threadsafe(asyncio.sleep(0, result=True), self.loop)
        return bool(future.result(timeout=5))


def _make(settings: ServeSettings | None = None) -> Iterator[Served]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    ran: list[str] = []

    @tool(needs_approval=True)
    def delete_file(path: str) -> str:
        """Delete a file (it only says so)."""
        ran.append(path)
        return f"deleted {path}"

    @tool
    def add(a: int, b: int) -> int:
        """Add two whole numbers."""
        return a + b

    tools: dict[str, Any] = {"delete_file": delete_file, "add": add}
    approver = InteractiveApprover()
    events: list[Any] = []
    calls = ServedCalls(lambda: dict(tools), approver, events.append, loop=loop)
    server = ToolServer(calls, settings or ServeSettings(progress_interval=0.2))
    server.start()
    served = Served(server, calls, approver, loop, tools, events, ran)
    try:
        yield served
    finally:
        server.stop()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)


@pytest.fixture
def served() -> Iterator[Served]:
    yield from _make()


def decide_when_asked(served: Served, decision: Decision) -> threading.Thread:
    """A person who answers the first call that asks."""

    def person() -> None:
        wait_until(lambda: served.asked(), what="the call to ask")
        request = served.asked()[0].request
        assert served.approver.resolve(request.call.id, decision, fingerprint=request.fingerprint)

    thread = threading.Thread(target=person, daemon=True)
    thread.start()
    return thread


# --- the served path, with nbagent's own client ---------------------------------------------------


def test_a_call_waits_for_the_person_and_the_client_gets_the_approved_result(
    served: Served,
) -> None:
    with mcp_server(
        "nb", url=served.server.url, headers={"Authorization": f"Bearer {served.server.token}"}
    ) as client:
        listed = {t.name: t for t in client.tools}
        assert set(listed) == {"nb__add", "nb__delete_file"}
        assert listed["nb__add"].input_schema["required"] == ["a", "b"]
        person = decide_when_asked(served, Decision(True, by="person"))
        result = call(by_name(client, "nb__delete_file"), {"path": "a.txt"})
        person.join(5)
    assert not result.is_error
    assert result.text == "deleted a.txt"
    assert served.ran == ["a.txt"]
    record = served.calls.records[-1]
    assert (record.call.name, record.status, record.arguments) == (
        "delete_file",
        "done",
        {"path": "a.txt"},
    )
    spans = served.calls.timeline().spans
    assert [(s.kind, s.label) for s in spans if s.kind.startswith("tool")] == [
        ("tool", "delete_file")
    ]
    assert any(s.kind == "approval" for s in spans), spans
    # a serving session's timeline speaks of its calls: no steps, no model lane
    timeline = served.calls.timeline()
    assert timeline.calls == 1 and timeline.lanes == 1
    assert {s.lane for s in spans} == {0}
    assert timeline.summary().startswith("timeline: 1 served call, "), timeline.summary()
    svg = timeline.svg()
    assert ">calls<" in svg and ">model<" not in svg and "step" not in svg
    assert "1 served call · " in svg


def test_a_denied_call_reaches_the_client_as_a_tool_error_with_the_reason(served: Served) -> None:
    with mcp_server(
        "nb", url=served.server.url, headers={"Authorization": f"Bearer {served.server.token}"}
    ) as client:
        person = decide_when_asked(served, Decision(False, "not that file", by="person"))
        result = call(by_name(client, "nb__delete_file"), {"path": "b.txt"})
        person.join(5)
    assert result.is_error
    assert "not that file" in result.text
    assert served.ran == []
    assert served.finished()[-1].status == "denied"


# --- raw HTTP -------------------------------------------------------------------------------------


def _session(served: Served, http: httpx.Client) -> str:
    answer = http.post(
        served.server.url,
        headers=served.headers(),
        json={
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": VERSION,
                "capabilities": {},
                "clientInfo": {"name": "raw-test", "version": "1"},
            },
        },
    )
    assert answer.status_code == 200, answer.text
    session = answer.headers["mcp-session-id"]
    note = http.post(
        served.server.url,
        headers=served.headers(**{"mcp-session-id": session, "mcp-protocol-version": VERSION}),
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
    )
    assert note.status_code == 202
    return session


def _messages(text: str) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an answer (SSE or plain JSON)."""
    if text.lstrip().startswith("{"):
        return [json.loads(text)]
    return [
        json.loads(line[5:])
        for line in text.splitlines()
        if line.startswith("data:") and line[5:].strip()
    ]


def _post(served: Served, http: httpx.Client, session: str, message: Any) -> httpx.Response:
    return http.post(
        served.server.url,
        headers=served.headers(**{"mcp-session-id": session, "mcp-protocol-version": VERSION}),
        content=message if isinstance(message, (bytes, str)) else json.dumps(message),
    )


def test_no_token_or_a_wrong_one_is_refused_before_anything_else(served: Served) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    with httpx.Client(timeout=10) as http:
        for auth in ({}, {"Authorization": "Bearer nope"}, {"Authorization": served.server.token}):
            headers = {k: v for k, v in served.headers().items() if k != "Authorization"}
            answer = http.post(served.server.url, headers={**headers, **auth}, json=body)
            assert answer.status_code == 401
            assert answer.headers["www-authenticate"].startswith("Bearer")
            assert served.server.token not in answer.text
    assert served.events == []


def test_another_host_or_origin_is_refused(served: Served) -> None:
    with httpx.Client(timeout=10) as http:
        port = served.server.port
        bad_host = http.post(
            served.server.url,
            headers=served.headers(Host=f"evil.example:{port}"),
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        )
        assert bad_host.status_code == 421
        bad_origin = http.post(
            served.server.url,
            headers=served.headers(Origin="http://evil.example"),
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        )
        assert bad_origin.status_code == 403
        ok_origin = http.post(
            served.server.url,
            headers=served.headers(Origin=f"http://127.0.0.1:{port}"),
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            },
        )
        assert ok_origin.status_code == 200


def test_a_100_mb_body_is_refused_without_being_read(served: Served) -> None:
    size = 100 * 1024 * 1024
    with httpx.Client(timeout=30) as http:
        declared = http.post(served.server.url, headers=served.headers(), content=b"x" * size)
        assert declared.status_code == 413
        sent = [0]

        def chunks() -> Iterator[bytes]:  # no Content-Length: read until the bound
            piece = b"[" * 65536
            while sent[0] < size:
                sent[0] += len(piece)
                yield piece

        try:
            streamed = http.post(served.server.url, headers=served.headers(), content=chunks())
            assert streamed.status_code == 413
        except httpx.TransportError:
            pass  # the server answered 413 and closed while the rest was still being sent
        assert sent[0] > served.server.settings.max_body_bytes
    assert served.events == []
    assert served.loop_answers()


def test_malformed_json_rpc_and_unknown_methods_get_json_rpc_errors(served: Served) -> None:
    with httpx.Client(timeout=10) as http:
        session = _session(served, http)
        broken = _post(served, http, session, b'{"jsonrpc": "2.0", "id": 1, "method": ')
        assert broken.status_code == 400
        assert _messages(broken.text)[0]["error"]["code"] == -32700
        not_rpc = _post(served, http, session, {"id": 1, "method": 7})
        assert not_rpc.status_code == 400
        assert _messages(not_rpc.text)[0]["error"]["code"] in (-32600, -32602, -32700)
        unknown = _post(served, http, session, {"jsonrpc": "2.0", "id": 2, "method": "x/y"})
        errors = [m for m in _messages(unknown.text) if "error" in m]
        assert errors and errors[0]["error"]["code"] == -32601
    assert served.events == []


def test_arguments_that_fail_the_schema_are_refused_before_any_card(served: Served) -> None:
    with httpx.Client(timeout=10) as http:
        session = _session(served, http)
        for arguments in ({"a": "1", "b": 2}, {"a": 1}, {"a": 1, "b": 2, "c": 3}, []):
            answer = _post(
                served,
                http,
                session,
                {
                    "jsonrpc": "2.0",
                    "id": 3,
                    "method": "tools/call",
                    "params": {"name": "add", "arguments": arguments},
                },
            )
            found = next(m for m in _messages(answer.text) if m.get("id") == 3)
            if "error" in found:  # arguments not an object: the SDK's own params check
                assert found["error"]["code"] == -32602
                continue
            assert found["result"]["isError"] is True
            assert "nothing was run" in found["result"]["content"][0]["text"]
    assert served.events == []


def test_a_tool_unregistered_since_listing_is_an_unknown_tool(served: Served) -> None:
    with httpx.Client(timeout=10) as http:
        session = _session(served, http)
        listed = _post(served, http, session, {"jsonrpc": "2.0", "id": 4, "method": "tools/list"})
        names = {t["name"] for t in _messages(listed.text)[0]["result"]["tools"]}
        assert "add" in names
        del served.tools["add"]
        answer = _post(
            served,
            http,
            session,
            {
                "jsonrpc": "2.0",
                "id": 5,
                "method": "tools/call",
                "params": {"name": "add", "arguments": {"a": 1, "b": 2}},
            },
        )
        found = next(m for m in _messages(answer.text) if m.get("id") == 5)
        assert found["error"]["code"] == -32602
        assert "Unknown tool 'add'" in found["error"]["message"]
    assert served.events == []


def test_a_waiting_call_sends_progress_and_one_whose_client_left_never_runs(
    served: Served,
) -> None:
    with httpx.Client(timeout=10) as http:
        session = _session(served, http)
        headers = served.headers(**{"mcp-session-id": session, "mcp-protocol-version": VERSION})
        body = {
            "jsonrpc": "2.0",
            "id": 6,
            "method": "tools/call",
            "params": {
                "name": "delete_file",
                "arguments": {"path": "c.txt"},
                "_meta": {"progressToken": "p-6"},
            },
        }
        progress: list[dict[str, Any]] = []
        with http.stream("POST", served.server.url, headers=headers, json=body) as answer:
            for line in answer.iter_lines():
                if line.startswith("data:") and line[5:].strip():
                    message = json.loads(line[5:])
                    if message.get("method") == "notifications/progress":
                        progress.append(message["params"])
                if len(progress) >= 2:
                    break  # the client goes away while its call waits
    assert {p["progressToken"] for p in progress} == {"p-6"}
    assert progress[1]["progress"] > progress[0]["progress"]
    wait_until(lambda: served.finished(), what="the card to be marked")
    finished = served.finished()[-1]
    assert finished.status == "cancelled"
    assert "went away" in finished.result.text
    request = served.asked()[0].request
    late = served.approver.resolve(request.call.id, Decision(True, by="person"))
    assert late is False  # a click after the client left approves nothing
    time.sleep(0)  # nothing to wait for: the call was answered before the click
    assert served.ran == []
    assert served.loop_answers()


def test_a_thousand_calls_at_once_are_bounded_and_nothing_runs_unapproved(
    served: Served,
) -> None:
    stop = threading.Event()

    def person() -> None:  # denies every call as it comes up, so that each gets its answer
        while not stop.is_set():
            for request in served.approver.pending():
                served.approver.resolve(
                    request.call.id,
                    Decision(False, "flood", by="person"),
                    fingerprint=request.fingerprint,
                )
            stop.wait(0.05)

    async def flood() -> list[int | str]:
        limits = httpx.Limits(max_connections=1000, max_keepalive_connections=0)
        async with httpx.AsyncClient(timeout=120, limits=limits) as http:
            first = await http.post(
                served.server.url,
                headers=served.headers(),
                json={
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": VERSION,
                        "capabilities": {},
                        "clientInfo": {"name": "flood", "version": "1"},
                    },
                },
            )
            session = first.headers["mcp-session-id"]
            headers = served.headers(**{"mcp-session-id": session, "mcp-protocol-version": VERSION})

            async def one(n: int) -> int | str:
                body = {
                    "jsonrpc": "2.0",
                    "id": n,
                    "method": "tools/call",
                    "params": {"name": "delete_file", "arguments": {"path": f"{n}.txt"}},
                }
                try:
                    answer = await http.post(served.server.url, headers=headers, json=body)
                except httpx.TransportError:
                    return "refused"  # the connection itself was refused or dropped
                if answer.status_code != 200:
                    return answer.status_code
                found = [m for m in _messages(answer.text) if m.get("id") == n]
                text = found[0]["result"]["content"][0]["text"] if found else ""
                if "Too many calls in progress" in text:
                    return "busy"
                return "denied" if "flood" in text else text

            return list(await asyncio.gather(*(one(n) for n in range(1, 1001))))

    deciding = threading.Thread(target=person, daemon=True)
    deciding.start()
    try:
        outcomes = asyncio.run(flood())
    finally:
        stop.set()
        deciding.join(5)
    assert len(outcomes) == 1000
    assert set(outcomes) <= {"denied", "refused", "busy", 503}, set(outcomes)
    assert outcomes.count("busy") + outcomes.count(503) > 0  # the bounds acted
    assert outcomes.count("denied") == len(served.calls.records)
    # never more than max_calls calls in progress at once (cards open, waiting or running)
    open_now = peak = 0
    for event in served.events:
        if isinstance(event, ToolCallStarted):
            open_now += 1
            peak = max(peak, open_now)
        elif isinstance(event, ToolFinished):
            open_now -= 1
    assert peak <= served.server.settings.max_calls
    assert served.ran == []  # nobody approved anything
    assert served.loop_answers()


def test_the_token_never_shows(served: Served) -> None:
    token = served.server.token
    assert token not in repr(served.server)
    assert repr(token) == "<token hidden>"
    assert token not in redact_secrets(f"Authorization: Bearer {token}")


def test_another_address_than_loopback_needs_expose() -> None:
    with pytest.raises(ServeError, match="not a loopback address"):
        ServeSettings(host="0.0.0.0")
    assert ServeSettings(host="0.0.0.0", expose=True).expose
    with socket.socket() as probe:  # a port taken is said, not raised as it is
        probe.bind(("127.0.0.1", 0))
        probe.listen()
        taken = probe.getsockname()[1]
        loop = asyncio.new_event_loop()
        try:
            calls = ServedCalls(dict, InteractiveApprover(), lambda e: None, loop=loop)
            with pytest.raises(ServeError, match="cannot listen"):
                ToolServer(calls, ServeSettings(port=taken)).start()
        finally:
            loop.close()


def test_the_stdio_bridge_carries_a_call_that_waits_for_the_person(served: Served) -> None:
    command = [sys.executable, "-m", "nbagent.mcp.bridge", served.server.url]
    env = {"NBAGENT_SERVE_TOKEN": served.server.token, "PYTHONPATH": str(ROOT)}
    with mcp_server("br", command, env=env) as client:
        assert {t.name for t in client.tools} == {"br__add", "br__delete_file"}
        assert call(by_name(client, "br__add"), {"a": 2, "b": 3}).text == "5"
        person = decide_when_asked(served, Decision(False, "not over stdio", by="person"))
        denied = call(by_name(client, "br__delete_file"), {"path": "d.txt"})
        person.join(5)
    assert denied.is_error
    assert "not over stdio" in denied.text
    assert served.ran == []


def test_the_bridge_refuses_to_start_without_its_token() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "nbagent.mcp.bridge", "http://127.0.0.1:9/mcp"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "")},
        timeout=60,
    )
    assert done.returncode == 2
    assert "NBAGENT_SERVE_TOKEN" in done.stderr


def test_annotations_output_schema_and_structured_content_reach_the_client(
    served: Served,
) -> None:
    @tool(
        provider_options={
            "mcp": {
                "annotations": {"readOnlyHint": True, "openWorldHint": False},
                "outputSchema": {
                    "type": "object",
                    "properties": {"rows": {"type": "integer"}},
                    "required": ["rows"],
                },
            }
        }
    )
    def count_rows(table: str) -> dict[str, int]:
        """How many rows a table has."""
        return {"rows": len(table)}

    served.tools["count_rows"] = count_rows
    with httpx.Client(timeout=10) as http:
        session = _session(served, http)
        listed = _post(served, http, session, {"jsonrpc": "2.0", "id": 7, "method": "tools/list"})
        tools = {t["name"]: t for t in _messages(listed.text)[0]["result"]["tools"]}
        assert tools["count_rows"]["annotations"] == {"readOnlyHint": True, "openWorldHint": False}
        assert tools["count_rows"]["outputSchema"]["required"] == ["rows"]
        assert "outputSchema" not in tools["add"]
        answer = _post(
            served,
            http,
            session,
            {
                "jsonrpc": "2.0",
                "id": 8,
                "method": "tools/call",
                "params": {"name": "count_rows", "arguments": {"table": "abc"}},
            },
        )
        result = next(m for m in _messages(answer.text) if m.get("id") == 8)["result"]
        assert result["structuredContent"] == {"rows": 3}
        assert result["isError"] is False
