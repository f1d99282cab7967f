"""Who shows an MCP sign-in link: the front end that owns the person hands its presenter to the
MCP client (``present_with``); the client imports no front end. In a kernel, loading the
extension makes the cell the place for links, unloading it withdraws that; a kernel without the
extension refuses a sign-in at once, saying how to get the link."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs the extra)")

from nbagent.mcp._signin import HookPresenter, TerminalPresenter, default_presenter, present_with

from ..notebook.conftest import kernel_env, start_kernel
from ..notebook.kernel import Kernel
from .oauth import oauth_server, stats

_SIGNIN = "nbagent.mcp._signin"


def test_the_newest_offer_that_gives_a_presenter_shows_the_links() -> None:
    first = HookPresenter(lambda url: None)
    second = HookPresenter(lambda url: None)
    assert isinstance(default_presenter(), TerminalPresenter)
    withdrawals = [present_with(lambda: first), present_with(lambda: None)]
    try:
        assert default_presenter() is first  # an offer of None (not its person) is passed over
        withdraw_second = present_with(lambda: second)
        assert default_presenter() is second
        withdraw_second()
        assert default_presenter() is first
    finally:
        for withdraw in withdrawals:
            withdraw()
    assert isinstance(default_presenter(), TerminalPresenter)


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    k = start_kernel(sys.executable, tmp_path_factory.mktemp("presenters"), kernel_env())
    try:
        k.execute(f"import {_SIGNIN} as signin")
        yield k
    finally:
        k.shutdown()


def _presenter(k: Kernel) -> str:
    return str(k.eval("type(signin.default_presenter()).__name__"))


def test_the_notebook_offers_its_presenter_while_the_extension_is_loaded(kernel: Kernel) -> None:
    assert _presenter(kernel) == "TerminalPresenter"
    refusal = kernel.eval("signin.default_presenter().refusal()")
    assert "%load_ext nbagent" in refusal, refusal
    kernel.execute("%load_ext nbagent")
    assert _presenter(kernel) == "NotebookPresenter"
    kernel.execute("%reload_ext nbagent")
    assert kernel.eval("len(signin._offered)") == 1  # loaded again: still one offer
    kernel.execute("%unload_ext nbagent")
    assert _presenter(kernel) == "TerminalPresenter"
    assert kernel.eval("len(signin._offered)") == 0


def test_a_kernel_without_the_extension_refuses_a_sign_in_at_once_saying_how(
    kernel: Kernel,
) -> None:
    with oauth_server(ttl=5) as base:
        before = stats(base)
        kernel.execute(
            "from nbagent import MCPSignInError, mcp_server\n"
            "try:\n"
            f"    mcp_server('secure', url='{base}/mcp').close()\n"
            "    said = None\n"
            "except MCPSignInError as exc:\n"
            "    said = str(exc)\n"
        )
        said = kernel.eval("said")
        assert said is not None and "%load_ext nbagent" in said, said
        assert stats(base)["authorizations"] == before["authorizations"]
