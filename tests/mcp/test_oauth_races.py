"""Requests that meet a sign-in half-way, made to meet in one order every time: the test
server holds its authorization-server metadata (mode ``hold-metadata``) so that one request's
sign-in holds the SDK's flow lock while the test lines other requests up behind it, and looks
at that lock to know they are queued. Also a server that asks for more scope on the very
first request after a sign-in."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs the extra)")

from nbagent.mcp import OAuth, mcp_server

from .conftest import by_name, call, wait_until
from .oauth import browse, mode, oauth_server, release, settled, stats


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with oauth_server() as url:
        yield url


@pytest.fixture(autouse=True)
def behaving(base: str) -> Iterator[None]:
    mode(base, "normal")
    yield
    release(base)  # nothing stays held past a failed test
    mode(base, "normal")


def whoami(server: Any) -> Any:
    return call(by_name(server, f"{server.name}__whoami"), {})


def queued(server: Any) -> Callable[[], int]:
    """How many requests wait for the SDK's flow lock (held by the request signing in)."""
    lock = server._connection.signer.auth.context.lock
    return lambda: int(lock.statistics().tasks_waiting)


class Calling:
    """A tool call on a thread of its own (a cell's run while the person signs in)."""

    def __init__(self, server: Any) -> None:
        self.results: list[Any] = []
        self.thread = threading.Thread(target=lambda: self.results.append(whoami(server)))

    def start(self) -> None:
        self.thread.start()

    def result(self) -> Any:
        self.thread.join(60)
        assert len(self.results) == 1, "the call did not end"
        return self.results[0]


def test_a_sign_in_asked_for_while_a_request_signs_in_keeps_the_person_s_sign_in(
    base: str,
) -> None:
    """The interleaving a CI run met once. A request refused for want of a token (there, the
    2026 listening request the start sends; here, a call) started the SDK's sign-in just before
    ``sign_in()``, whose sign-out then waited for the flow's lock behind it, and a call waited
    behind that. The person signed in once, through the link ``sign_in()`` showed; the sign-out
    then dropped that very token, and the waiting call, finding none, read its old 401 as "the
    server answered HTTP 401 to the token it had just issued". A sign-in completed after
    ``sign_in()`` was asked for is the one it asked for: it is kept, and both calls use it."""
    listens = stats(base)["listens"]
    with mcp_server("secure", url=f"{base}/mcp", auth=OAuth(open_link=browse)) as server:
        settled(server, base, listens)
        server.sign_out()
        waiting = queued(server)
        mode(base, "hold-metadata")
        first, second = Calling(server), Calling(server)
        first.start()  # refused for want of a token: its sign-in takes the lock, then is held
        wait_until(lambda: stats(base)["held"] == 1, 10, "the sign-in's metadata request")
        tokens = stats(base)["tokens"]
        links: list[str] = []

        def person(url: str) -> None:
            links.append(url)
            second.start()  # refused for want of a token, and queued behind the sign-out
            wait_until(lambda: waiting() == 2, 10, "the second call to wait for the lock")
            browse(url)

        def go_on() -> None:
            wait_until(lambda: waiting() == 1, 10, "sign_in's sign-out to wait for the lock")
            release(base)

        releaser = threading.Thread(target=go_on)
        releaser.start()
        server.sign_in(person)
        releaser.join(10)
        assert len(links) == 1  # one sign-in, through the link sign_in() showed
        assert stats(base)["tokens"] == tokens + 1
        for calling in (first, second):
            result = calling.result()
            assert not result.is_error, result.text
        assert server.signed_in and not whoami(server).is_error


def test_a_call_whose_token_a_sign_out_dropped_while_it_waited_signs_in_again(base: str) -> None:
    """A call that waited behind another request's sign-in, then behind a sign-out, finds no
    token: its old 401 answered the request it sent with none, not a token just issued. It
    asks the server again like any request refused for want of a token (a script's own
    open_link signs in again), instead of failing with "the server answered HTTP 401 to the
    token it had just issued"."""
    links: list[str] = []

    def person(url: str) -> None:
        links.append(url)
        browse(url)

    listens = stats(base)["listens"]
    with mcp_server("secure", url=f"{base}/mcp", auth=OAuth(open_link=person)) as server:
        settled(server, base, listens)
        server.sign_out()
        waiting = queued(server)
        mode(base, "hold-metadata")
        held = stats(base)["held"]
        first, second = Calling(server), Calling(server)
        first.start()
        wait_until(lambda: stats(base)["held"] == held + 1, 10, "the sign-in's metadata request")
        signing_out = threading.Thread(target=server.sign_out)
        signing_out.start()
        wait_until(lambda: waiting() == 1, 10, "the sign-out to wait for the lock")
        second.start()
        wait_until(lambda: waiting() == 2, 10, "the second call to wait for the lock")
        release(base)
        signing_out.join(30)
        for calling in (first, second):
            result = calling.result()
            assert not result.is_error, result.text
        assert len(links) == 3  # the start, the first call, and the second after the sign-out


def test_more_scope_asked_for_by_the_first_request_after_a_sign_in_is_signed_in_for(
    base: str,
) -> None:
    """A server that wants more scope than the first sign-in asked for answers the request
    sent with the new token 403 ``insufficient_scope``: that request steps up like any other
    (one more sign-in, for the wider scope). A server that keeps asking gets that one more
    sign-in and then a clear refusal, as in the middle of a session (test_oauth.py's
    ``modern-scope-refused``)."""
    links: list[str] = []

    def person(url: str) -> None:
        links.append(url)
        browse(url)

    mode(base, "admin-everywhere")
    with mcp_server("secure", url=f"{base}/mcp", auth=OAuth(open_link=person)) as server:
        assert len(links) == 2
        assert "scope=tools&" in links[0] or links[0].endswith("scope=tools")
        assert "scope=tools+admin" in links[1]
        assert not whoami(server).is_error and len(links) == 2
