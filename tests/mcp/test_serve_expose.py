"""``%agent serve --expose ADDRESS``: another bind than 127.0.0.1 is asked for explicitly, and
the Host and Origin checks follow the address bound (a real server; the tests only ever talk
to it over loopback, and a bind to every address lasts one test).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs the extra)")

import httpx2 as httpx

from nbagent.mcp._serving.server import ServeError, ServeSettings, allowed_names

from .test_serve import VERSION, Served, _make

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": VERSION,
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


def _status(served: Served, url: str, **headers: str) -> int:
    with httpx.Client(timeout=10) as http:
        return http.post(url, headers=served.headers(**headers), json=INITIALIZE).status_code


@pytest.fixture
def on_127_0_0_2() -> Iterator[Served]:
    try:
        with socket.socket() as probe:
            probe.bind(("127.0.0.2", 0))
    except OSError as exc:
        pytest.skip(f"this machine cannot bind 127.0.0.2 ({exc})")
    yield from _make(ServeSettings(host="127.0.0.2"))


def test_host_and_origin_follow_the_address_bound(on_127_0_0_2: Served) -> None:
    served = on_127_0_0_2
    port = served.server.port
    assert served.server.url == f"http://127.0.0.2:{port}/mcp"
    url = served.server.url
    assert _status(served, url) == 200  # Host: 127.0.0.2:port, as a client sends it
    assert _status(served, url, Origin=f"http://127.0.0.2:{port}") == 200
    # the names of another address are not this server's
    assert _status(served, url, Host=f"127.0.0.1:{port}") == 421
    assert _status(served, url, Host=f"localhost:{port}") == 421
    assert _status(served, url, Origin=f"http://127.0.0.1:{port}") == 403
    assert _status(served, url, Host=f"evil.example:{port}") == 421
    assert _status(served, url, Host="127.0.0.2:1") == 421  # another port too


def test_every_address_needs_expose_and_allows_only_this_machine_s_names() -> None:
    with pytest.raises(ServeError, match=r"not a loopback address.*--expose ADDRESS"):
        ServeSettings(host="0.0.0.0")
    with pytest.raises(ServeError, match="no_token is only for loopback"):
        ServeSettings(host="0.0.0.0", expose=True, no_token=True)
    names = allowed_names("0.0.0.0")
    assert names[:3] == ["127.0.0.1", "localhost", "[::1]"]
    assert socket.gethostname()[:253] in names
    assert allowed_names("127.0.0.1") == ["127.0.0.1", "localhost", "[::1]"]
    assert allowed_names("::1") == ["[::1]"]
    assert allowed_names("192.0.2.7") == ["192.0.2.7"]
    served_all: Any = _make(ServeSettings(host="0.0.0.0", expose=True))
    served: Served = next(served_all)
    try:
        port = served.server.port
        loopback = f"http://127.0.0.1:{port}/mcp"  # reached over loopback only
        assert _status(served, loopback) == 200
        assert _status(served, loopback, Host=f"evil.example:{port}") == 421
        assert _status(served, loopback, Origin="http://evil.example") == 403
        with httpx.Client(timeout=10) as http:  # the token is still asked for
            plain = http.post(loopback, json=INITIALIZE, headers={"Accept": "application/json"})
        assert plain.status_code == 401
    finally:
        served_all.close()
