"""Signing in to an OAuth-protected MCP server (the SDK's own server-side auth, a real process
on 127.0.0.1) through the public API, with a script's ``open_link`` playing the person: the
sign-in, calls, a refresh, sign-out and signing in again; what a hostile or broken
authorization server gets; who may sign in (nobody, in a headless run); and that no token or
code shows anywhere nbagent writes."""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs the extra)")

from nbagent.errors import MCPServerError, MCPSignInError
from nbagent.mcp import MCPLimits, OAuth, mcp_server

from .conftest import by_name, call, demo_command, free_port, wait_until
from .oauth import browse, expire, leaked, mode, oauth_server, settled, stats


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    """Tokens that outlast any test: a test that needs one refreshed makes it due (or has the
    server drop it), so a loaded machine never has one expire in the middle of another test."""
    with oauth_server() as url:
        yield url


@pytest.fixture
def short_lived() -> Iterator[str]:
    """A server whose tokens last 4 s, for the test of a token that runs out."""
    with oauth_server(ttl=4) as url:
        yield url


@pytest.fixture(autouse=True)
def behaving(base: str) -> Iterator[None]:
    mode(base, "normal")
    yield
    mode(base, "normal")


@pytest.fixture(scope="module")
def other() -> Iterator[Any]:
    """Another server, which must go on whatever happens to the OAuth one."""
    server = mcp_server("other", demo_command())
    try:
        yield server
    finally:
        server.close()


def follow(url: str) -> None:
    browse(url)


def whoami(server: Any) -> Any:
    return call(by_name(server, f"{server.name}__whoami"), {})


def test_sign_in_call_refresh_sign_out_and_sign_in_again(
    short_lived: str, caplog: pytest.LogCaptureFixture
) -> None:
    base = short_lived
    caplog.set_level(logging.DEBUG)  # every logger, the SDK's and httpx2's included
    before = stats(base)
    links: list[str] = []

    def person(url: str) -> None:
        links.append(url)
        browse(url)

    texts: list[str] = []
    with mcp_server("secure", url=f"{base}/mcp", auth=OAuth(open_link=person)) as server:
        assert len(links) == 1 and links[0].startswith(f"{base}/authorize?")
        assert "code_challenge_method=S256" in links[0] and "state=" in links[0]
        assert server.signed_in and server.sign_in_status.startswith("signed in")
        first = whoami(server)
        assert not first.is_error and first.text == "the secure server, signed in"
        # the token lasts 4 s: past it the SDK refreshes before the call
        wait_until(lambda: "renewed at the next call" in server.sign_in_status, 30, "expiry")
        refreshes = stats(base)["refreshes"]
        assert not whoami(server).is_error
        assert stats(base)["refreshes"] == refreshes + 1
        assert server.sign_in_status.startswith("signed in, expires at")
        server.sign_out()
        assert not server.signed_in and server.sign_in_status == "sign-in needed"
        # the script's own open_link signs in again when a call needs it (nobody waits)
        again = whoami(server)
        assert not again.is_error and len(links) == 2 and server.signed_in
        server.sign_in()  # and when asked to
        assert len(links) == 3 and server.signed_in
        assert not whoami(server).is_error
        texts += [repr(server), server.status, server.sign_in_status, again.text, first.text]
    after = stats(base)
    assert after["registrations"] == before["registrations"] + 1  # registered once, reused
    assert after["tokens"] == before["tokens"] + 3
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "HTTP Request: POST" in logged  # the SDK's requests were logged, token ones too
    assert leaked(base, logged, caplog.text, *texts) == []


def test_a_server_asking_for_more_scope_is_signed_in_to_again_once(base: str) -> None:
    """A 403 insufficient_scope (the SDK's step-up): a script's open_link is followed again
    for the wider scope; the call then goes through. A server that keeps asking gets one new
    sign-in per request, not a loop."""
    links: list[str] = []

    def person(url: str) -> None:
        links.append(url)
        browse(url)

    with mcp_server("secure", url=f"{base}/mcp", auth=OAuth(open_link=person)) as server:
        assert "scope=tools&" in links[0] or links[0].endswith("scope=tools")
        steps = stats(base)["step_ups"]
        result = call(by_name(server, "secure__admin"), {})
        assert not result.is_error and result.text == "admin ok"
        assert len(links) == 2 and "scope=tools+admin" in links[1]
        assert stats(base)["step_ups"] == steps + 1
        assert not call(by_name(server, "secure__admin"), {}).is_error and len(links) == 2
        mode(base, "step-up-forever")
        endless = call(by_name(server, "secure__admin"), {})
        assert endless.is_error and len(links) == 3  # one more sign-in, then it stops
        assert endless.text.endswith(
            "could not sign in: the server answered HTTP 403 to the token it had just issued"
        ), endless.text
        assert not whoami(server).is_error  # the other tools go on


@pytest.mark.parametrize("token", ["valid", "due for a refresh", "dropped by the server"])
def test_calls_to_a_signed_in_server_go_out_side_by_side(base: str, token: str) -> None:
    """The SDK's flow holds a lock from each request until its answer's headers: two calls to
    a server that answers only when done would go one after the other. Its tool "together"
    answers so only when both calls are running at once. Also when the token is due for a
    refresh (the flow refreshes it, then lets the request go), or the server dropped it (both
    calls are refused; one refreshes, and both go out with the new token): a run under load
    met the token of a 4-second sign-in due between the start and the calls, and the calls
    went one after the other."""
    import asyncio

    from nbagent.tools import ToolCall, ToolContext

    with mcp_server("secure", url=f"{base}/mcp", auth=OAuth(open_link=follow)) as server:
        tool = by_name(server, "secure__together")
        refreshes = stats(base)["refreshes"]
        if token == "due for a refresh":
            server._connection.signer.auth.context.token_expiry_time = 1.0
        elif token == "dropped by the server":
            expire(base)

        async def both() -> list[Any]:
            contexts = [ToolContext(ToolCall(f"c{i}", tool.name, "{}"), {}, tool) for i in (1, 2)]
            return list(await asyncio.gather(*(tool.execute(c) for c in contexts)))

        results = asyncio.run(both())
        assert [r.text for r in results] == ["together", "together"]
        if token != "valid":
            assert stats(base)["refreshes"] == refreshes + 1  # one refresh, for both calls


def test_a_call_that_waited_behind_a_sign_in_goes_out_with_its_token(base: str) -> None:
    """A request refused for want of a token waits for the flow's lock while another request
    signs in; it must then be sent again with the new token, not answered with its old 401
    (which read as "the server refused the token it had just issued")."""
    import threading

    listens = stats(base)["listens"]
    with mcp_server("secure", url=f"{base}/mcp", auth=OAuth(open_link=follow)) as server:
        # the listening request went out during the start: it cannot go out after the
        # sign-out and sign in first, through this sign-in's link (test_oauth_races.py plays
        # requests queued behind a sign-in)
        settled(server, base, listens)
        server.sign_out()
        results: list[Any] = []
        caller = threading.Thread(target=lambda: results.append(whoami(server)))

        def person(url: str) -> None:
            refused = stats(base)["unauthorized"]
            caller.start()  # a call, refused for want of a token while this sign-in waits
            wait_until(lambda: stats(base)["unauthorized"] > refused, 10, "the call's 401")
            browse(url)

        server.sign_in(person)
        caller.join(30)
        assert server.signed_in
        assert len(results) == 1 and not results[0].is_error, results[0].text


def test_a_token_the_server_drops_early_is_refreshed(base: str) -> None:
    """A 401 to a token the client still takes for valid is answered by a refresh first
    (the SDK alone would start a new sign-in, which nobody is there for mid-run)."""
    with mcp_server("secure", url=f"{base}/mcp", auth=OAuth(open_link=follow)) as server:
        refreshes = stats(base)["refreshes"]
        expire(base)
        assert not whoami(server).is_error
        assert stats(base)["refreshes"] == refreshes + 1


class _Terminal:
    """A terminal a person sits at: what is printed to it is read by them (a thread that
    follows the link it shows, as a browser would)."""

    def __init__(self) -> None:
        self.text = ""
        self.followed = 0

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.text += text
        for word in text.split():
            if word.startswith("http") and "/authorize?" in word:
                self.followed += 1
                threading.Thread(target=browse, args=(word,), daemon=True).start()
        return len(text)

    def flush(self) -> None:
        pass


def test_a_person_at_a_terminal_gets_the_link_and_a_refresh_refused_mid_session_says_so(
    base: str, other: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No open_link: a script run at a terminal prints the link (and where the loopback cannot
    work). In the middle of a session nobody waits, so a call whose token could not be renewed
    says how to sign in again, and the other servers and tools go on."""
    terminal = _Terminal()  # set here: pytest sets its own capture between fixtures and test
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setattr(sys, "stdin", terminal)
    with mcp_server("secure", url=f"{base}/mcp") as server:
        assert terminal.followed == 1 and "To sign in to the MCP server 'secure'" in terminal.text
        assert "a remote JupyterHub" in terminal.text and "Signed in." in terminal.text
        mode(base, "fail-refresh")
        expire(base)
        result = whoami(server)
        assert result.is_error
        assert result.text == (
            "'whoami' on MCP server 'secure' failed: MCP server 'secure' needs you to sign in "
            "again (its token expired and the refresh was refused: HTTP 400 invalid_grant): "
            "run `%agent mcp login secure` in the notebook (or server.sign_in() from Python)"
        )
        assert server.running and server.sign_in_status == "sign-in needed"
        assert terminal.followed == 1  # a call never waits for a person
        assert call(by_name(other, "other__add"), {"a": 1, "b": 2}).text == "3"
        again = whoami(server)  # no second refresh of a token already refused
        assert again.is_error and "needs you to sign in again" in again.text
        assert stats(base)["failed_refreshes"] == 1
        mode(base, "normal")
        server.sign_in()
        assert terminal.followed == 2 and not whoami(server).is_error
        assert leaked(base, result.text, again.text, terminal.text) == []


def test_with_its_own_open_link_a_script_signs_in_again_when_a_refresh_is_refused(
    base: str,
) -> None:
    links: list[str] = []

    def person(url: str) -> None:
        links.append(url)
        browse(url)

    with mcp_server("secure", url=f"{base}/mcp", auth=OAuth(open_link=person)) as server:
        mode(base, "fail-refresh")
        expire(base)
        failed = stats(base)["failed_refreshes"]
        assert not whoami(server).is_error
        assert len(links) == 2 and stats(base)["failed_refreshes"] == failed + 1


def _refused_start(base: str, **kwargs: Any) -> str:
    with pytest.raises(MCPSignInError) as caught:
        mcp_server("secure", url=f"{base}/mcp", **kwargs)
    return str(caught.value)


@pytest.mark.parametrize(
    ("misbehaviour", "words", "gets_a_link"),
    [
        (
            "foreign-authorize",
            "the authorization server 127.0.0.1 names its authorization endpoint on another "
            "host, localhost; nbagent shows a sign-in link only on the issuer's host (if you "
            "trust localhost, pass OAuth(trusted_hosts=('localhost',)))",
            False,
        ),
        (
            "foreign-token",
            "the authorization server 127.0.0.1 names its token endpoint on another host, "
            "localhost; nbagent sends codes and secrets only to the issuer's host",
            True,
        ),
        ("hang-metadata", "did not answer within 1 s (MCPLimits.auth_timeout)", False),
        ("hang-token", "the token endpoint (127.0.0.1:", True),
        ("garbage-token", "no usable token (the token endpoint at 127.0.0.1:", True),
        (
            "huge-token",
            "answered with more than 65,536 bytes, so nbagent did not read it "
            "(MCPLimits.max_auth_bytes)",
            True,
        ),
        ("deny", "the authorization server did not grant access (access_denied)", True),
    ],
)
def test_a_hostile_or_broken_authorization_server_gets_a_clear_refusal(
    base: str, other: Any, misbehaviour: str, words: str, gets_a_link: bool
) -> None:
    links: list[str] = []

    def person(url: str) -> None:
        links.append(url)
        browse(url)

    mode(base, misbehaviour)
    limits = MCPLimits(auth_timeout=1.0)
    message = _refused_start(base, auth=OAuth(open_link=person), limits=limits)
    assert message.startswith("MCP server 'secure' could not sign in: "), message
    assert words in message, message
    assert len(links) == (1 if gets_a_link else 0)  # one sign-in, though the SDK asks twice
    if misbehaviour == "hang-token":
        assert "did not answer within 1 s (MCPLimits.auth_timeout)" in message
    if misbehaviour == "garbage-token":
        assert message.endswith("it answered HTTP 200 (text/html)"), message
    assert leaked(base, message) == []
    assert call(by_name(other, "other__add"), {"a": 2, "b": 2}).text == "4"


def test_a_start_whose_sign_in_failed_says_so_whatever_fails_after_it(
    base: str, other: Any
) -> None:
    """The SDK answers a refused ``server/discover`` by trying the legacy handshake; on a
    server that has none, that fails too, for its own reason. The start failed because the
    sign-in did, and must say that, not the handshake's error."""
    links: list[str] = []

    def person(url: str) -> None:
        links.append(url)
        browse(url)

    mode(base, "modern-scope-refused")
    message = _refused_start(base, auth=OAuth(open_link=person))
    assert message == (
        "MCP server 'secure' could not sign in: the server answered HTTP 403 to the token it "
        "had just issued"
    ), message
    assert len(links) == 2  # the sign-in, and one step-up for the scope it asks for
    assert leaked(base, message) == []
    assert call(by_name(other, "other__add"), {"a": 2, "b": 2}).text == "4"


def test_a_foreign_endpoint_the_person_trusts_is_used(base: str) -> None:
    mode(base, "foreign-token")
    trusted = OAuth(open_link=follow, trusted_hosts=("LocalHost",))
    with mcp_server("secure", url=f"{base}/mcp", auth=trusted) as server:
        assert server.signed_in and not whoami(server).is_error


def test_a_redirect_with_a_wrong_state_is_refused_before_any_token_request(base: str) -> None:
    def forger(url: str) -> None:
        browse(url, tamper=lambda address: address.replace("state=", "state=forged"))

    before = stats(base)
    message = _refused_start(base, auth=OAuth(open_link=forger))
    assert message == (
        "MCP server 'secure' could not sign in: the browser came back with a `state` that is "
        "not the one nbagent sent (a link from an earlier sign-in, or a request nbagent did not "
        "start), so the code was not used"
    )
    after = stats(base)
    assert after["codes"] == before["codes"] + 1 and after["tokens"] == before["tokens"]
    assert leaked(base, message) == []


def test_nobody_signing_in_in_time_ends_the_wait(base: str) -> None:
    message = _refused_start(
        base, auth=OAuth(open_link=lambda url: None), limits=MCPLimits(sign_in_timeout=1.0)
    )
    assert message.endswith(
        "could not sign in: nobody signed in within 1 s (MCPLimits.sign_in_timeout)"
    )


def test_an_open_link_that_raises_ends_that_sign_in_saying_so(base: str) -> None:
    def broken(url: str) -> None:
        raise RuntimeError("no browser here")

    message = _refused_start(base, auth=OAuth(open_link=broken))
    assert message.endswith(
        "could not sign in: the open_link function raised RuntimeError: no browser here"
    )


def test_the_address_the_browser_landed_on_can_be_given_back(base: str) -> None:
    """Where the browser cannot reach the kernel's loopback (a remote hub), the person copies
    the address of the page that did not load; ``open_link`` returns it."""
    landed: list[str] = []

    def paste(url: str) -> str:
        landed.append(browse(url, stop_at_loopback=True))
        return landed[0]

    with mcp_server("secure", url=f"{base}/mcp", auth=OAuth(open_link=paste)) as server:
        assert landed and "/callback?code=" in landed[0]
        assert server.signed_in and not whoami(server).is_error


def test_headless_runs_never_wait_and_register_nothing(
    base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No open_link and no person: a script run with no terminal (as here: pytest's stdin is
    not one), or NBAGENT_MODE=headless. Refused after discovery, before registering."""
    # not in a kernel: the words differ where ipykernel is imported (another test module on
    # the same worker may have imported it)
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    before = stats(base)
    message = _refused_start(base)
    assert message == (
        "MCP server 'secure' could not sign in: nobody can follow a sign-in link here (not a "
        "notebook, and no terminal): pass a token with headers=, or OAuth(open_link=...)"
    )
    monkeypatch.setenv("NBAGENT_MODE", "headless")
    assert "NBAGENT_MODE=headless" in _refused_start(base, auth=OAuth())
    after = stats(base)
    assert after["registrations"] == before["registrations"]
    assert after["authorizations"] == before["authorizations"]


def test_a_configured_client_id_is_used_without_registering(base: str) -> None:
    """A client registered beforehand (here by the test, through the server's registration
    endpoint), with its secret and the fixed loopback port it was registered for."""
    import json
    import urllib.request

    port = free_port()
    metadata = {
        "redirect_uris": [f"http://127.0.0.1:{port}/callback"],
        "grant_types": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_method": "client_secret_basic",
        "scope": "tools",
    }
    request = urllib.request.Request(
        f"{base}/register",
        data=json.dumps(metadata).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        client = json.loads(answer.read())
    registrations = stats(base)["registrations"]
    auth = OAuth(
        open_link=follow,
        client_id=client["client_id"],
        client_secret=client["client_secret"],
        redirect_port=port,
    )
    assert client["client_secret"] not in repr(auth)
    with mcp_server("secure", url=f"{base}/mcp", auth=auth) as server:
        assert server.signed_in and not whoami(server).is_error
    assert stats(base)["registrations"] == registrations


def test_client_credentials_sign_in_with_no_person(base: str) -> None:
    import json
    import urllib.request

    metadata = {  # the SDK's server registers code-flow clients; the test's grants them this
        "redirect_uris": ["http://127.0.0.1:1/callback"],
        "grant_types": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_method": "client_secret_basic",
        "scope": "tools",
    }
    request = urllib.request.Request(
        f"{base}/register",
        data=json.dumps(metadata).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        client = json.loads(answer.read())
    granted = stats(base)["client_credentials"]
    auth = OAuth(
        grant="client_credentials",
        client_id=client["client_id"],
        client_secret=client["client_secret"],
    )
    with mcp_server("machine", url=f"{base}/mcp", auth=auth) as server:
        assert server.signed_in and not whoami(server).is_error
    assert stats(base)["client_credentials"] == granted + 1


def test_no_oauth_when_asked_for_none_or_a_token_is_given(base: str) -> None:
    with pytest.raises(MCPServerError) as caught:
        mcp_server("secure", url=f"{base}/mcp", auth=False)
    assert not isinstance(caught.value, MCPSignInError)
    assert "HTTP 401 Unauthorized: the server wants credentials" in str(caught.value)
    registrations = stats(base)["registrations"]
    with pytest.raises(MCPServerError) as given:
        mcp_server("secure", url=f"{base}/mcp", headers={"Authorization": "Bearer nope-1234"})
    assert "HTTP 401 Unauthorized" in str(given.value) and "nope-1234" not in str(given.value)
    assert stats(base)["registrations"] == registrations


def test_oauth_settings_are_checked_when_made() -> None:
    with pytest.raises(ValueError, match="needs client_id and client_secret"):
        OAuth(grant="client_credentials")
    with pytest.raises(ValueError, match="redirect_port"):
        OAuth(redirect_port=70000)
    with pytest.raises(ValueError, match="https URL with a path"):
        OAuth(client_metadata_url="http://example.com/client.json")
    with pytest.raises(ValueError, match="auth= is for a server reached by url"):
        mcp_server("x", [sys.executable, "-c", "pass"], auth=OAuth())


def test_the_tokens_are_never_in_a_repr_or_the_settings(base: str) -> None:
    with mcp_server("secure", url=f"{base}/mcp", auth=OAuth(open_link=follow)) as server:
        connection = server._connection
        signer = connection.signer
        assert signer is not None
        shown = [repr(server), repr(connection.target), repr(signer.store), str(vars(server))]
        assert leaked(base, *shown) == []
    assert not server.signed_in  # closed: the tokens are dropped


def test_the_how_to_s_sign_in_from_a_script_runs_as_written(base: str) -> None:
    """docs/howto/mcp.md's script: open_link follows the link with httpx2, as a browser."""
    from pathlib import Path

    howto = (Path(__file__).parents[2] / "docs" / "howto" / "mcp.md").read_text("utf-8")
    blocks = [b.split("```", 1)[0] for b in howto.split("```python\n")[1:]]
    (script,) = [b for b in blocks if "def follow(url)" in b]
    names: dict[str, Any] = {"URL": f"{base}/mcp"}
    tokens = stats(base)["tokens"]
    exec(compile(script, "howto-mcp", "exec"), names)
    server = names["server"]
    try:
        assert server.signed_in and stats(base)["tokens"] == tokens + 2  # in, out, in again
        assert not whoami(server).is_error
    finally:
        server.close()
