"""The loopback listener that receives the browser after a sign-in, spoken to over real
sockets as a browser (or anything else on this machine) would: only ``GET /callback`` with
the right ``state`` counts; heads, time and connections are bounded; the page echoes nothing."""

from __future__ import annotations

import asyncio
import re
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs the extra)")

from nbagent.mcp import _loopback
from nbagent.mcp._loopback import MAX_CONNECTIONS, LoopbackListener, RedirectRefused, read_redirect
from nbagent.redact import redact_secrets

from .conftest import wait_until


class Running:
    """A listener on an event loop of its own thread (as on a server's connection)."""

    def __init__(self, server: str = "") -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.listener = LoopbackListener(server=server)
        self.run(self.listener.open())

    def run(self, work: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(10)

    def expect(self, state: str) -> Any:
        async def make() -> Any:
            return self.listener.expect(state)

        return self.run(make())

    def close(self) -> None:
        self.run(self.listener.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture
def running() -> Iterator[Running]:
    r = Running()
    try:
        yield r
    finally:
        r.close()


def ask(port: int, raw: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), 5) as sock:
        sock.sendall(raw)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def get(port: int, target: str) -> bytes:
    return ask(port, f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())


def test_only_the_awaited_redirect_counts(running: Running) -> None:
    port = running.listener.port
    assert running.listener.redirect_uri == f"http://127.0.0.1:{port}/callback"
    assert get(port, "/callback?code=early-code-1&state=s").startswith(b"HTTP/1.1 410")
    waiting = running.expect("the-state")
    assert get(port, "/favicon.ico").startswith(b"HTTP/1.1 404")
    assert ask(port, b"POST /callback HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 405")
    assert ask(port, b"nonsense\r\n\r\n").startswith(b"HTTP/1.1 400")
    huge = b"GET /callback?x=" + b"a" * 20_000 + b" HTTP/1.1\r\n\r\n"
    assert ask(port, huge).startswith(b"HTTP/1.1 431")
    assert not waiting.done()  # none of those ended the wait
    answer = get(port, "/callback?code=the-code-1234&state=the-state&iss=https%3A%2F%2Fas")
    assert answer.startswith(b"HTTP/1.1 200") and b"the-code-1234" not in answer
    assert b"Cache-Control: no-store" in answer and b"Referrer-Policy: no-referrer" in answer
    result = waiting.result()
    assert (result.code, result.state, result.iss) == ("the-code-1234", "the-state", "https://as")
    assert get(port, "/callback?code=c2-123456&state=the-state").startswith(b"HTTP/1.1 410")


def page_of(answer: bytes) -> tuple[str, str, str]:
    """The title, heading and text of the page in an HTTP answer."""
    body = answer.split(b"\r\n\r\n", 1)[1].decode()
    found = [re.search(f"<{tag}[^>]*>(.*?)</{tag}>", body) for tag in ("title", "h1", "p")]
    assert all(found), body
    title, heading, text = (m.group(1) for m in found if m)
    return title, heading, text


def test_the_page_the_browser_gets_says_in_plain_words_which_sign_in_and_what_next() -> None:
    running = Running("tracker<x>")
    try:
        port = running.listener.port
        waiting = running.expect("s1")
        done = page_of(get(port, "/callback?code=c0de-1234567&state=s1"))
        assert done == (
            "Sign-in received · nbagent",
            "Sign-in received",
            "Your sign-in to the MCP server tracker&lt;x&gt; reached nbagent, which finishes it "
            "in the notebook: the notebook says when you are signed in. You can close this tab.",
        )
        assert waiting.result().code == "c0de-1234567"
        gone = page_of(get(port, "/callback?code=c0de-1234567&state=s1"))
        assert gone[1] == "No sign-in is waiting" and "from an earlier one" in gone[2]
        waiting = running.expect("s2")
        denied = page_of(get(port, "/callback?error=access_denied&state=s2"))
        assert denied[1] == "Sign-in not completed"
        assert "to the MCP server tracker&lt;x&gt; did not go through" in denied[2]
        assert "the notebook says why" in denied[2]
        with pytest.raises(RedirectRefused):
            waiting.result()
    finally:
        running.close()


def test_a_wrong_state_ends_the_sign_in_without_using_or_showing_the_code(
    running: Running,
) -> None:
    waiting = running.expect("the-state")
    answer = get(running.listener.port, "/callback?code=stolen-code-5678&state=other")
    assert answer.startswith(b"HTTP/1.1 400") and b"stolen-code-5678" not in answer
    with pytest.raises(RedirectRefused, match="`state` that is not the one nbagent sent") as e:
        waiting.result()
    assert "stolen-code-5678" not in str(e.value)
    assert redact_secrets("code stolen-code-5678 seen") == "code *** seen"


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ("error=access_denied&state=s", "did not grant access (access_denied)"),
        ("error=%3Cscript%3E&state=s", "did not grant access (an unreadable error)"),
        ("state=s", "without an authorization code"),
        ("code=a1234567&code=b1234567&state=s", "2 values for 'code'"),
        ("code=a1234567&state=s&state=s", "2 values for 'state'"),
    ],
)
def test_what_the_browser_brings_back_is_read_strictly(query: str, words: str) -> None:
    with pytest.raises(RedirectRefused, match=words.replace("(", r"\(").replace(")", r"\)")):
        read_redirect(f"http://127.0.0.1:1/callback?{query}", "s")


def test_an_address_pasted_back_is_read_like_the_redirect() -> None:
    result = read_redirect("  http://127.0.0.1:9/callback?state=s&code=pasted-code-1  ", "s")
    assert result.code == "pasted-code-1"


def test_a_client_that_sends_nothing_is_let_go_and_connections_are_bounded(
    running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_loopback, "HEAD_TIMEOUT", 0.5)
    port = running.listener.port
    idle = [socket.create_connection(("127.0.0.1", port), 5) for _ in range(MAX_CONNECTIONS)]
    try:
        for sock in idle:  # each is let go after HEAD_TIMEOUT, unanswered
            assert sock.recv(100) == b""
    finally:
        for sock in idle:
            sock.close()
    waiting = running.expect("s")
    assert get(port, "/callback?code=after-1234&state=s").startswith(b"HTTP/1.1 200")
    assert waiting.result().code == "after-1234"


def test_more_connections_than_the_bound_are_closed_unread(running: Running) -> None:
    port = running.listener.port
    idle = [socket.create_connection(("127.0.0.1", port), 5) for _ in range(MAX_CONNECTIONS)]
    try:
        for sock in idle:  # each sends a byte, so the listener is serving all of them
            sock.sendall(b"G")
        extra = socket.create_connection(("127.0.0.1", port), 5)
        with extra:
            extra.sendall(b"GET /callback HTTP/1.1\r\n\r\n")
            try:
                answer = extra.recv(100)
            except ConnectionResetError:  # closed with the request unread
                answer = b""
            assert answer == b""  # closed, not answered
    finally:
        for sock in idle:
            sock.close()


def test_a_fixed_port_is_asked_for_again_and_a_taken_one_is_said(running: Running) -> None:
    port = running.listener.port
    running.run(running.listener.close())
    running.run(running.listener.open())  # the same port again: its redirect URI holds
    assert running.listener.port == port and not running.listener.moved
    running.run(running.listener.close())
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        running.run(running.listener.open())  # taken: another one, and it says so
        assert running.listener.port != port and running.listener.moved
        fixed = LoopbackListener(port)
        with pytest.raises(OSError):
            running.run(fixed.open())


def _end_loop(running: Running) -> None:
    """End the listener's loop as a server's connection ends its own: the tasks left are
    cancelled and awaited, then the loop is closed."""
    loop = running.loop
    loop.call_soon_threadsafe(loop.stop)
    running.thread.join(5)
    leftovers = asyncio.all_tasks(loop)
    for task in leftovers:
        task.cancel()
    if leftovers:
        loop.run_until_complete(asyncio.gather(*leftovers, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()


def _idle_connections(running: Running) -> tuple[list[socket.socket], list[Any]]:
    """Connections as a browser leaves them (spare ones that send nothing, one with half a
    request), each being served; and the loop's exception handler's record."""
    seen: list[Any] = []

    def record(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        seen.append(context)
        loop.default_exception_handler(context)

    running.loop.call_soon_threadsafe(running.loop.set_exception_handler, record)
    port = running.listener.port
    idle = [socket.create_connection(("127.0.0.1", port), 5) for _ in range(3)]
    idle[0].sendall(b"GET /callback?sta")
    wait_until(lambda: running.listener._active == 3, 10, "the listener to serve them")
    return idle, seen


def test_connections_left_idle_are_closed_when_the_listener_closes(
    capfd: pytest.CaptureFixture[str],
) -> None:
    running = Running()
    idle, seen = _idle_connections(running)
    try:
        running.run(running.listener.close())

        async def tasks() -> set[asyncio.Task[Any]]:
            return asyncio.all_tasks() - {asyncio.current_task()}  # type: ignore[operator]

        assert running.run(tasks()) == set()  # no handler left waiting on a socket
        for sock in idle:
            assert sock.recv(100) == b""  # closed by the listener, unanswered
    finally:
        for sock in idle:
            sock.close()
        _end_loop(running)
    assert seen == []
    assert "Exception in callback" not in capfd.readouterr().err


def test_a_loop_that_ends_with_connections_open_prints_nothing(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The connection's loop can end with the listener still open (a server closed while a
    sign-in waited): the handlers it cancels end quietly."""
    running = Running()
    idle, seen = _idle_connections(running)
    try:
        _end_loop(running)
    finally:
        for sock in idle:
            sock.close()
    assert seen == []
    assert "Exception in callback" not in capfd.readouterr().err
