"""A slowloris flood against ``%agent serve`` in a real kernel: more connections than the
server takes, each sending half a request head a byte at a time and reopened as soon as the
server closes it, do not lock out a client that has the token (nbagent's own MCP client lists
and calls the served tools meanwhile, each answer within its limits), and the server closes
every one of the flood's sockets itself.

The served session's bounds are short here (a second to send a head) so the test stays quick;
their defaults are in :class:`nbagent.mcp._serving.server.ServeSettings`.
"""

from __future__ import annotations

import errno
import json
import select
import socket
import textwrap
import threading
import time

import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs the extra)")

from nbagent import mcp_server
from nbagent.mcp import MCPLimits

from ..mcp.conftest import by_name, call
from .kernel import Kernel

#: More than the server's 64 places.
FLOOD = 80


class Slowloris:
    """``FLOOD`` connections that never finish their request head: each sends one more header
    byte every ``drip`` seconds; one the server closes is counted and replaced while
    :attr:`reopen` is set."""

    def __init__(self, port: int, drip: float = 0.3) -> None:
        self.port = port
        self.drip = drip
        self.reopen = threading.Event()
        self.reopen.set()
        self.done = threading.Event()
        self.opened = 0
        self.closed_by_server = 0
        self.open: list[socket.socket] = []
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _connect(self) -> None:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        sock.setblocking(False)
        head = f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nX-Slow: "
        sock.send(head.encode())
        self.open.append(sock)
        self.opened += 1

    def _closed(self, sock: socket.socket) -> bool:
        """Whether the server closed ``sock`` (it reads as the end, or as a reset)."""
        try:
            return sock.recv(4096) == b""  # a 408/400 first would still be followed by EOF
        except BlockingIOError:
            return False
        except OSError as exc:
            return exc.errno in (errno.ECONNRESET, errno.EPIPE)

    def _run(self) -> None:
        try:
            last = time.monotonic()
            while self.reopen.is_set() or self.open:
                while self.reopen.is_set() and len(self.open) < FLOOD:
                    self._connect()
                readable, _, _ = select.select(self.open, [], [], 0.05) if self.open else ([], 0, 0)
                for sock in readable:
                    if self._closed(sock):
                        self.open.remove(sock)
                        sock.close()
                        self.closed_by_server += 1
                if time.monotonic() - last >= self.drip:
                    last = time.monotonic()
                    for sock in list(self.open):
                        try:
                            sock.send(b"a")  # a byte more of the header, never its end
                        except OSError:
                            pass  # closed meanwhile: select sees it next
                if not self.reopen.is_set() and not self.open:
                    break
        except BaseException as exc:
            self.errors.append(exc)
        finally:
            self.done.set()

    def stop(self) -> None:
        for sock in self.open:
            sock.close()


def test_a_slowloris_flood_neither_locks_out_a_client_with_the_token_nor_stays(
    kernel: Kernel,
) -> None:
    kernel.execute(
        textwrap.dedent(
            """
            @tool
            def add(a: int, b: int) -> int:
                \"\"\"Add two whole numbers.\"\"\"
                return a + b

            from nbagent.mcp._serving.server import ServeSettings as _Settings
            from nbagent.notebook.serving.serve import serve as _serve
            """
        )
    )
    serving = kernel.submit(
        "_flooded = _serve(nbagent.current_session(), "
        "settings=_Settings(head_timeout=1.0, body_timeout=1.0, untrusted_lifetime=3.0))"
    )
    kernel.finish(serving)
    out = kernel.execute(
        "import json as _json\n"
        "print(_json.dumps({'url': _flooded.url, 'token': _flooded.token, "
        "'port': _flooded.server.port}))"
    )
    found = json.loads(next(m for m in out if m["msg_type"] == "stream")["content"]["text"])
    flood = Slowloris(found["port"])
    try:
        kernel.wait_for(lambda: flood.opened >= FLOOD, what="the flood to fill every place")
        answers: list[str] = []
        limits = MCPLimits(start_timeout=20.0, call_timeout=20.0)
        headers = {"Authorization": f"Bearer {found['token']}"}
        with mcp_server("nb", url=found["url"], headers=headers, limits=limits) as client:
            add = by_name(client, "nb__add")
            for n in range(8):
                result = call(add, {"a": n, "b": 1})
                assert not result.is_error, result.text
                answers.append(result.text)
                # the flood goes on: the server's bounds close its sockets, and it reopens them
                kernel.pump(0.05)
        assert answers == [str(n + 1) for n in range(8)]
        assert flood.opened > FLOOD  # the server closed some and the flood came back
        flood.reopen.clear()
        assert flood.done.wait(30), f"{len(flood.open)} of the flood's sockets are still open"
        assert not flood.errors, flood.errors
        assert flood.closed_by_server == flood.opened
        status = kernel.execute("%agent serve status")
        said = "".join(m["content"].get("text", "") for m in status if m["msg_type"] == "stream")
        assert "connections closed for their bounds (too slow, or without the token)" in said
    finally:
        flood.reopen.clear()
        flood.done.wait(30)
        flood.stop()
        kernel.execute("%agent serve stop")
    bounds = kernel.eval("dict(_flooded.server.bounds.closed)")
    assert sum(bounds.values()) >= FLOOD, bounds
