"""The OAuth-protected test server (``oauth_server.py``) and a browser stand-in for it.

The browser follows redirects one by one, as a browser does, with ``urllib`` (which logs
nothing, so a test that looks for secrets in the logs sees only what nbagent logged). It can
change the address of the last hop (a redirect with a wrong ``state``) or stop before it (the
address a person would copy from the address bar of a page that did not load).
"""

from __future__ import annotations

import contextlib
import json
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .conftest import on_a_free_port

SERVER = str(Path(__file__).with_name("oauth_server.py"))


class _Manual(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *_args: Any, **_kwargs: Any) -> None:
        return None  # every hop is followed by hand


_OPENER = urllib.request.build_opener(_Manual)


def _get(url: str) -> str:
    """GET ``url``: where it redirects (or "")."""
    try:
        with _OPENER.open(url, timeout=15) as answer:
            answer.read()
            return ""
    except urllib.error.HTTPError as error:
        error.read()
        return str(error.headers.get("location", ""))


def browse(
    url: str, *, tamper: Callable[[str], str] | None = None, stop_at_loopback: bool = False
) -> str:
    """Follow ``url`` like a browser; return the last address requested (or, with
    ``stop_at_loopback``, the loopback address not requested). ``tamper`` rewrites the
    address of the loopback hop."""
    for _ in range(10):
        if urlsplit(url).path == "/callback":
            if tamper is not None:
                url = tamper(url)
            if stop_at_loopback:
                return url
            _get(url)
            return url
        location = _get(url)
        if not location:
            return url
        url = location
    raise AssertionError("too many redirects")


@contextlib.contextmanager
def oauth_server(ttl: int = 3600) -> Iterator[str]:
    """The server on a free port of 127.0.0.1; yields its base URL (the MCP endpoint is
    ``BASE/mcp``)."""

    def answering(port: int, pid: int) -> bool:
        try:
            said = stats(f"http://127.0.0.1:{port}")
        except OSError:
            return False
        return bool(said["pid"] == pid)  # this server, not another test's on a reused port

    with on_a_free_port(
        lambda port: [sys.executable, SERVER, str(port)],
        answering,
        "the OAuth server",
        env={"OAUTH_TOKEN_TTL": str(ttl)},
    ) as port:
        yield f"http://127.0.0.1:{port}"


def mode(base: str, name: str) -> None:
    """Make the server misbehave from now on (see oauth_server.py), or stop ("normal")."""
    request = urllib.request.Request(f"{base}/test/mode?name={name}", method="POST")
    with urllib.request.urlopen(request, timeout=10) as answer:
        answer.read()


def stats(base: str) -> dict[str, Any]:
    """What the server saw, and every secret it issued (``issued``)."""
    with urllib.request.urlopen(f"{base}/test/stats", timeout=5) as answer:
        found: dict[str, Any] = json.loads(answer.read())
    return found


def expire(base: str) -> None:
    """The server forgets its access tokens (the client still takes its own for valid)."""
    request = urllib.request.Request(f"{base}/test/expire", method="POST")
    with urllib.request.urlopen(request, timeout=10) as answer:
        answer.read()


def release(base: str) -> None:
    """Answer the requests the server holds (mode ``hold-metadata``), and those to come."""
    request = urllib.request.Request(f"{base}/test/release", method="POST")
    with urllib.request.urlopen(request, timeout=10) as answer:
        answer.read()


def settled(server: Any, base: str, listens: int) -> None:
    """Check that the 2026 listening request went out during the start (``listens``: the
    server's count before it), with the start's token: a started server already listens, so
    that request plays no part in what a test does next (it once went out after the start and
    raced a sign-out for the flow's lock)."""
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    if server._connection.protocol in MODERN_PROTOCOL_VERSIONS:
        assert stats(base)["listens"] > listens, "the start did not open its listening stream"


def leaked(base: str, *texts: str) -> list[str]:
    """The secrets the server issued that appear in any of ``texts``."""
    secrets = stats(base)["issued"]
    assert secrets, "the server issued nothing, so nothing could be looked for"
    return [s for s in secrets if any(s in text for text in texts)]
