"""A sign-in link and the plain words that go with it: what every presenter shows.

Kept apart from :mod:`._signin` so that front ends (:mod:`nbagent.notebook.signin`) can show a
link without importing the machinery that waits for it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SignInLink", "where_loopback_fails"]


@dataclass(frozen=True)
class SignInLink:
    """What a person needs to sign in to one MCP server."""

    server: str  #: the server's nbagent name
    url: str  #: the authorization link (checked: http(s), on the authorization server's host)
    host: str  #: the authorization server's host, as shown to the person
    redirect_uri: str  #: where the browser comes back (the loopback listener)
    timeout: float  #: seconds nbagent waits for it


def where_loopback_fails(link: SignInLink) -> str:
    """The plain words on where the loopback redirect cannot work, and what to do instead."""
    return (
        f"After you sign in, the browser is sent back to {link.redirect_uri}, which is this "
        "kernel's machine: that works when the browser runs on the same machine as the kernel. "
        "If the kernel runs elsewhere (a remote JupyterHub, a cloud notebook, a container "
        "without that port forwarded), the last page will not load: give the server a token "
        "instead (%agent mcp add NAME --url URL --header 'Authorization: Bearer $TOKEN_VAR', "
        "or headers= in Python), or pass OAuth(open_link=...) a function that returns the "
        "address the browser landed on."
    )
