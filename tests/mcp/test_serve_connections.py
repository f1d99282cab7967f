"""Each connection to a served notebook is bounded in time, over raw sockets: a request head
that never ends, a body that trickles in, a byte now and then after an answer (which would
cancel uvicorn's keep-alive timer), a client without the token that keeps asking; and past the
connection limit, a newcomer takes the place of one that never showed the token, never of one
that did. (The flood itself, against a served kernel: tests/notebook/test_kernel_serve_flood.py.)
"""

from __future__ import annotations

import errno
import json
import select
import socket
import time
from collections.abc import Iterator

import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs the extra)")

from nbagent.mcp._serving.server import ServeError, ServeSettings

from .test_serve import Served, _make

SHORT = ServeSettings(
    head_timeout=0.5,
    body_timeout=0.5,
    idle_timeout=5.0,
    untrusted_lifetime=1.5,
    max_connections=4,
    progress_interval=0.2,
)


@pytest.fixture
def served() -> Iterator[Served]:
    yield from _make(SHORT)


def _connect(served: Served) -> socket.socket:
    return socket.create_connection(("127.0.0.1", served.server.port), timeout=5)


def _head(served: Served, *, token: bool, length: int | None = None) -> bytes:
    port = served.server.port
    lines = [
        "POST /mcp HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        "Accept: application/json, text/event-stream",
        "Content-Type: application/json",
    ]
    if token:
        lines.append(f"Authorization: Bearer {served.server.token}")
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _ping(served: Served, *, token: bool = True) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    return _head(served, token=token, length=len(body)) + body


def _closed_within(sock: socket.socket, seconds: float, drip: bytes = b"") -> bool:
    """Whether the server closes ``sock`` within ``seconds`` (answers read and dropped),
    sending ``drip`` every 0.1 s meanwhile."""
    deadline = time.monotonic() + seconds
    sock.setblocking(False)
    while time.monotonic() < deadline:
        readable, _, _ = select.select([sock], [], [], 0.1)
        if readable:
            try:
                if sock.recv(65536) == b"":
                    return True
            except OSError as exc:
                if exc.errno in (errno.ECONNRESET, errno.EPIPE):
                    return True
                raise
        if drip:
            try:
                sock.send(drip)
            except OSError:
                return True
    return False


def _answered(sock: socket.socket, request: bytes) -> bytes:
    """Send ``request`` and read the whole answer (its ``Content-Length``); its status line."""
    sock.setblocking(True)
    sock.sendall(request)
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = sock.recv(4096)
        assert chunk, "the server closed the connection instead of answering"
        got += chunk
    head, _, body = got.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    length = next(
        int(line.split(b":", 1)[1]) for line in lines if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        chunk = sock.recv(4096)
        assert chunk, "the answer broke off"
        body += chunk
    return lines[0]


def test_a_request_head_that_never_ends_is_closed_though_bytes_keep_coming(
    served: Served,
) -> None:
    sock = _connect(served)
    sock.sendall(b"POST /mcp HTTP/1.1\r\nX-Slow: ")
    assert _closed_within(sock, 5.0, drip=b"a")
    assert served.server.bounds.closed.get("head", 0) >= 1


def test_a_body_that_trickles_in_is_closed(served: Served) -> None:
    sock = _connect(served)
    sock.sendall(_head(served, token=True, length=10_000))
    assert _closed_within(sock, 5.0, drip=b"x")
    assert served.server.bounds.closed.get("body", 0) >= 1


def test_a_byte_after_an_answer_does_not_keep_a_connection_open(served: Served) -> None:
    sock = _connect(served)
    status = _answered(sock, _ping(served))
    assert status.startswith(b"HTTP/1.1 "), status
    # uvicorn's keep-alive timer (5 s here) is cancelled by any byte: the head's bound is not
    assert _closed_within(sock, 4.0, drip=b"G")


def test_a_client_without_the_token_has_a_bounded_lifetime(served: Served) -> None:
    sock = _connect(served)
    deadline = time.monotonic() + 6.0
    answers = 0
    closed = False
    while time.monotonic() < deadline:
        try:
            status = _answered(sock, _ping(served, token=False))
        except (AssertionError, OSError):
            closed = True
            break
        assert b" 401 " in status, status
        answers += 1
        time.sleep(0.2)
    assert closed, f"still open after {answers} refused requests"
    assert answers >= 2
    assert served.server.bounds.closed.get("lifetime", 0) >= 1


def test_past_the_limit_a_newcomer_takes_the_place_of_a_stranger_not_of_a_client(
    served: Served,
) -> None:
    clients = [_connect(served) for _ in range(2)]
    for sock in clients:  # each shows the token (the SDK then wants a session: not a 401)
        assert b" 401 " not in _answered(sock, _ping(served))
    strangers = [_connect(served) for _ in range(2)]
    for sock in strangers:
        sock.sendall(b"POST /mcp HTTP/1.1\r\n")
    time.sleep(0.05)
    newcomer = _connect(served)  # the fifth of four places
    assert _closed_within(strangers[0], 0.4)  # the oldest stranger made room
    assert served.server.bounds.closed.get("made room") == 1
    for sock in clients:  # the clients keep theirs: each is answered again
        assert b" 401 " not in _answered(sock, _ping(served))
    assert b" 401 " not in _answered(newcomer, _ping(served))
    for sock in [*clients, *strangers, newcomer]:
        sock.close()


def test_once_every_place_is_a_client_s_a_newcomer_is_closed_at_once(served: Served) -> None:
    clients = [_connect(served) for _ in range(4)]
    for sock in clients:
        assert b" 401 " not in _answered(sock, _ping(served))
    newcomer = _connect(served)
    assert _closed_within(newcomer, 2.0)
    assert served.server.bounds.closed.get("over the connection limit") == 1
    for sock in clients:
        assert b" 401 " not in _answered(sock, _ping(served))
        sock.close()


@pytest.mark.parametrize(
    "field", ["head_timeout", "body_timeout", "idle_timeout", "untrusted_lifetime"]
)
def test_each_bound_must_be_a_positive_number_of_seconds(field: str) -> None:
    for bad in (0, -1.0, float("nan"), True):
        with pytest.raises(ServeError, match=field):
            ServeSettings(**{field: bad})  # type: ignore[arg-type]
