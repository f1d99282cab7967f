"""What ``%agent serve`` costs a call (nbagent only; the peers serve no notebook).

An auto-approved no-op tool (``add``), called:

* **in-process, the loop's call path**: ``ServedCalls`` without HTTP (hooks, rules, approval,
  execution, events): the reference;
* **the function itself**: the floor;
* **over MCP, raw HTTP**: one streamable HTTP session, one POST per call (httpx), so the figure
  is the server's cost (SDK, uvicorn, the token and Host checks, the hand-over to the calls' loop)
  with as little client as possible;
* **over MCP, nbagent's own client** (the official SDK's client under ``mcp_server``): what an
  agent written on the SDK sees.

And 100 calls sent at once over one session (raw HTTP, ``max_calls`` raised to 128 so that none
is refused): the wall time of the burst, per call.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from typing import Any

from _common import Section, compare, main

CALLS = 40
BURST = 100
VERSION = "2025-11-25"


class _Served:
    def __init__(self) -> None:
        from nbagent import AutoApprove, tool
        from nbagent.loop._served import ServedCalls
        from nbagent.mcp._serving.server import ServeSettings, ToolServer

        @tool
        def add(a: int, b: int) -> int:
            """Add two whole numbers."""
            return a + b

        self.add = add
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.calls = ServedCalls(
            lambda: {"add": add}, AutoApprove(), lambda e: None, loop=self.loop
        )
        self.server = ToolServer(
            self.calls, ServeSettings(max_calls=BURST + 28, max_connections=BURST + 28)
        )
        self.server.start()

    def headers(self, session: str | None = None) -> dict[str, str]:
        found = {
            "Authorization": f"Bearer {self.server.token}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }
        if session:
            found |= {"mcp-session-id": session, "mcp-protocol-version": VERSION}
        return found

    def close(self) -> None:
        self.server.stop()
        self.loop.call_soon_threadsafe(self.loop.stop)


def _initialize(http: Any, served: _Served) -> str:
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
                "clientInfo": {"name": "bench", "version": "1"},
            },
        },
    )
    session = answer.headers["mcp-session-id"]
    http.post(
        served.server.url,
        headers=served.headers(session),
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
    )
    return str(session)


def _body(n: int) -> str:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": n,
            "method": "tools/call",
            "params": {"name": "add", "arguments": {"a": n, "b": 1}},
        }
    )


def _check(text: str, n: int) -> None:
    if f'"text":"{n + 1}"' not in text.replace(" ", ""):
        raise RuntimeError(f"call {n} answered {text[:200]!r}")


def build(quick: bool) -> Section:
    import httpx2 as httpx

    from nbagent import mcp_server

    section = Section("serve", "Serving over MCP: a call's overhead (nbagent)")
    served = _Served()
    nodelay = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
    http = httpx.Client(timeout=30, transport=httpx.HTTPTransport(socket_options=nodelay))
    plain = httpx.Client(timeout=30)
    client = None
    try:
        session = _initialize(http, served)
        client = mcp_server(
            "bench",
            url=served.server.url,
            headers={"Authorization": f"Bearer {served.server.token}"},
        )
        listed = {t.name: t for t in client.tools}["bench__add"]

        def in_process() -> Any:
            found, value = served.calls.check("add", {"a": 1, "b": 2})

            def measure() -> float:
                started = time.perf_counter()
                for _ in range(CALLS):
                    served.calls.submit(found, value).result(10)
                return (time.perf_counter() - started) / CALLS

            return measure

        def function() -> Any:
            def measure() -> float:
                started = time.perf_counter()
                for n in range(CALLS * 100):
                    served.add(n, 1)
                return (time.perf_counter() - started) / (CALLS * 100)

            return measure

        def raw_http() -> Any:
            headers = served.headers(session)

            def measure() -> float:
                started = time.perf_counter()
                for n in range(CALLS):
                    _check(http.post(served.server.url, headers=headers, content=_body(n)).text, n)
                return (time.perf_counter() - started) / CALLS

            return measure

        def raw_http_nagle() -> Any:
            headers = served.headers(session)

            def measure() -> float:
                started = time.perf_counter()
                for n in range(CALLS // 4):
                    _check(plain.post(served.server.url, headers=headers, content=_body(n)).text, n)
                return (time.perf_counter() - started) / (CALLS // 4)

            return measure

        def sdk_client() -> Any:
            from nbagent.tools import ToolCall, ToolContext

            def one() -> Any:
                context = ToolContext(ToolCall("c", listed.name, "{}"), {"a": 1, "b": 2}, listed)
                return asyncio.run(listed.execute(context))

            def measure() -> float:
                started = time.perf_counter()
                for _ in range(CALLS // 4):
                    result = one()
                    if result.text != "3":
                        raise RuntimeError(result.text)
                return (time.perf_counter() - started) / (CALLS // 4)

            return measure

        rounds = 3 if quick else 7
        compare(
            section,
            f"one call ({CALLS} in a row)",
            {
                "in-process (the loop's call path)": in_process,
                "the function itself": function,
                "over MCP, raw HTTP": raw_http,
                "over MCP, raw HTTP, client without TCP_NODELAY": raw_http_nagle,
                "over MCP, nbagent's client (SDK)": sdk_client,
            },
            rounds=rounds,
            reference="in-process (the loop's call path)",
            unit="ms",
            scale=1e3,
        )

        async def burst() -> float:
            limits = httpx.Limits(max_connections=BURST)
            transport = httpx.AsyncHTTPTransport(limits=limits, socket_options=nodelay)
            async with httpx.AsyncClient(timeout=60, transport=transport) as flood:
                headers = served.headers(session)

                async def one(n: int) -> None:
                    answer = await flood.post(served.server.url, headers=headers, content=_body(n))
                    _check(answer.text, n)

                started = time.perf_counter()
                await asyncio.gather(*(one(n) for n in range(BURST)))
                return (time.perf_counter() - started) / BURST

        compare(
            section,
            f"{BURST} calls at once",
            {"over MCP, raw HTTP, concurrently": lambda: lambda: asyncio.run(burst())},
            rounds=rounds,
            reference="over MCP, raw HTTP, concurrently",
            unit="ms",
            scale=1e3,
        )
        over = section.row(f"one call ({CALLS} in a row)", "over MCP, raw HTTP")
        if over is not None and over.values:
            median = over.median * 1e3
            section.goal(
                "a served call costs under 10 ms over loopback HTTP (next to a model's seconds)",
                median < 10,
                f"median {median:.2f} ms",
            )
        section.notes.append(
            "per call: the median of rounds, each the mean of a run of calls; the burst row is "
            "its wall time divided by the calls in it; the SDK client opens an event loop per "
            "call (asyncio.run), as a script calling Tool.execute does"
        )
        section.notes.append(
            "'raw HTTP' sets TCP_NODELAY on the client; httpx's default (and so the SDK "
            "client's) writes a request's headers and body apart and may wait for the server's "
            "delayed ACK. The server sets TCP_NODELAY on every connection: before it did, each "
            "answer waited about 40 ms for the client's delayed ACK (48 ms a call, measured)"
        )
    finally:
        if client is not None:
            client.close()
        http.close()
        plain.close()
        served.close()
    return section


if __name__ == "__main__":
    main(build)
