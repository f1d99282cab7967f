"""A real HTTP/1.1 server on 127.0.0.1, written on asyncio streams, for the provider tests.

It runs on the test's own event loop. Each request is answered by the next queued
:class:`Reply` (or the default one): any status and headers, a body sent as separate writes
(chunked, with Content-Length, or until close), optionally slowly, then finished, dropped
(connection reset) or held open until the client leaves. Every request's method, path, headers
and body are recorded; the server counts open connections and notes every disconnect.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Literal

import pytest


@dataclass
class Reply:
    """One HTTP response. ``body`` pieces are written separately (one chunk each when chunked)."""

    body: bytes | Sequence[bytes] = b""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "text/event-stream"
    framing: Literal["chunked", "length", "close"] = "chunked"
    delay: float = 0.0  # seconds between pieces; 0 still yields to the loop between them
    before_headers: float = 0.0  # wait this long before the status line (or the client leaving)
    end: Literal["finish", "drop", "hang"] = "finish"


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class Server:
    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.default: Reply | None = None
        self.requests: list[Recorded] = []
        self.connections = 0  # ever opened
        self.open = 0  # open now
        self.disconnects: list[float] = []  # monotonic time of each close
        self.abandoned = 0  # requests the client gave up on before the status line came
        self.changed = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def queue(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=2.0)
        await self._server.wait_closed()

    async def wait_all_closed(self, timeout: float = 2.0) -> float:
        """Wait until no connection is open; returns the time of the last disconnect."""
        deadline = time.monotonic() + timeout
        while self.open:
            self.changed.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"{self.open} connection(s) still open after {timeout} s")
            try:
                await asyncio.wait_for(self.changed.wait(), remaining)
            except asyncio.TimeoutError:
                pass
        return self.disconnects[-1] if self.disconnects else 0.0

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        self.open += 1
        self._writers.add(writer)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                    break
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if line:
                        name, _, value = line.partition(":")
                        headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                self.requests.append(Recorded(method, path, headers, body))
                reply = self.replies.popleft() if self.replies else self.default
                if reply is None:
                    reply = Reply(b'{"error": "no reply queued"}', 500, content_type="text/plain")
                if not await self._send(reply, reader, writer):
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the client left, or the fixture is shutting the server down
        finally:
            self._writers.discard(writer)
            writer.close()
            self.open -= 1
            self.disconnects.append(time.monotonic())
            self.changed.set()
            self._tasks.discard(task)

    async def _send(
        self, reply: Reply, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Write one response; False when the connection must not be reused."""
        if reply.before_headers and await _left_within(reader, reply.before_headers):
            self.abandoned += 1
            return False
        pieces = [reply.body] if isinstance(reply.body, bytes) else list(reply.body)
        reason = (
            HTTPStatus(reply.status).phrase
            if reply.status in HTTPStatus._value2member_map_
            else "Status"
        )
        head = [f"HTTP/1.1 {reply.status} {reason}", f"content-type: {reply.content_type}"]
        if reply.framing == "chunked":
            head.append("transfer-encoding: chunked")
        elif reply.framing == "length":
            head.append(f"content-length: {sum(len(p) for p in pieces)}")
        else:
            head.append("connection: close")
        head.extend(f"{k}: {v}" for k, v in reply.headers.items())
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        await writer.drain()
        for piece in pieces:
            if not piece:
                continue
            if reply.framing == "chunked":
                writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            else:
                writer.write(piece)
            await writer.drain()
            await asyncio.sleep(reply.delay)
        if reply.end == "drop":
            writer.transport.abort()
            return False
        if reply.end == "hang":
            while await reader.read(65536):  # until the client goes away
                pass
            return False
        if reply.framing == "chunked":
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        return reply.framing != "close"


async def _left_within(reader: asyncio.StreamReader, seconds: float) -> bool:
    """Wait ``seconds``, or until the client closes its end first (True then). A request has
    been read whole, so all a client sends while it waits for its reply is its leaving."""
    try:
        return await asyncio.wait_for(reader.read(1), seconds) == b""
    except asyncio.TimeoutError:
        return False


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    instance = Server()
    await instance.start()
    try:
        yield instance
    finally:
        await instance.close()


@pytest.fixture
def free_port() -> int:
    """A port nothing listens on (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
