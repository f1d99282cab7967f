"""How nbagent signs in to an MCP server that asks for OAuth 2.1: :class:`OAuth`.

Only the settings live here (importing this module needs no SDK); the sign-in itself is the
official SDK's client auth (``mcp.client.auth``), driven by :mod:`._signer`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["OAuth"]

Grant = Literal["authorization_code", "client_credentials"]
TokenAuthMethod = Literal["none", "client_secret_post", "client_secret_basic"]
_GRANTS = ("authorization_code", "client_credentials")
_METHODS = ("none", "client_secret_post", "client_secret_basic")


@dataclass(frozen=True)
class OAuth:
    """How to sign in to an MCP server that asks for OAuth 2.1 authorization.

    Give it as ``mcp_server(NAME, url=URL, auth=OAuth(...))``. Without ``auth=``, a server
    reached by URL gets ``OAuth()`` (unless ``headers`` already carry an ``Authorization``):
    when it answers 401, nbagent discovers its authorization server (RFC 9728, RFC 8414),
    registers itself as a client (RFC 7591) unless ``client_id`` (or, where the server
    supports it, ``client_metadata_url``) says who it is, and has the person sign in with the
    authorization code flow and PKCE; the browser comes back to a loopback listener on
    ``127.0.0.1``. Tokens are kept in memory only and refreshed as they expire.

    ``open_link(url)`` is how the authorization link is followed. By default, in a notebook
    the cell shows it as a link and waits; in a script run at a terminal it is printed to
    stderr; where nobody could follow it (a headless run), the sign-in fails at once. A script
    or a test gives its own: a function that follows the link itself (for example with an
    HTTP client, as a browser would; it returns anything), or one that returns the address the
    browser was sent back to (a ``str``, for a kernel whose loopback the browser cannot
    reach). It runs on the thread that waits for the server, and, when the server asks for a
    new sign-in in the middle of a session (a refresh refused, more scope), on a thread of its
    own (at most once per request); without it, such a request fails saying how to sign in.

    ``grant="client_credentials"`` signs in as a program, with ``client_id`` and
    ``client_secret`` and no person (no link). ``scope`` overrides the scopes the server asks
    for. ``token_endpoint_auth_method`` is how a configured ``client_secret`` is sent
    (``client_secret_basic`` by default when there is one, else ``none``). ``redirect_port``
    fixes the loopback port (0: any free one; a pre-registered client or a forwarded port may
    need a fixed one). The authorization, token and registration endpoints must be on the
    host of the authorization server's issuer; ``trusted_hosts`` names other hosts you trust
    for them (see the how-to on what is refused).
    """

    open_link: Callable[[str], object] | None = None
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    client_metadata_url: str | None = None
    scope: str | None = None
    grant: Grant = "authorization_code"
    token_endpoint_auth_method: TokenAuthMethod | None = None
    redirect_port: int = 0
    trusted_hosts: tuple[str, ...] = ()
    client_name: str = "nbagent"

    def __post_init__(self) -> None:
        if self.open_link is not None and not callable(self.open_link):
            raise ValueError("OAuth(open_link=...) takes a function of the link (a str)")
        for name in ("client_id", "client_secret", "client_metadata_url", "scope"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ValueError(f"OAuth({name}=...) is a non-empty string or None")
        if self.grant not in _GRANTS:
            raise ValueError(f"OAuth(grant=...) is one of {', '.join(_GRANTS)}, not {self.grant!r}")
        method = self.token_endpoint_auth_method
        if method is not None and method not in _METHODS:
            raise ValueError(
                f"OAuth(token_endpoint_auth_method=...) is one of {', '.join(_METHODS)}, not "
                f"{method!r}"
            )
        if self.grant == "client_credentials" and not (self.client_id and self.client_secret):
            raise ValueError('OAuth(grant="client_credentials") needs client_id and client_secret')
        if self.client_secret is not None and self.client_id is None:
            raise ValueError("OAuth(client_secret=...) goes with a client_id")
        url = self.client_metadata_url
        if url is not None and (not url.startswith("https://") or url.count("/") < 3):
            raise ValueError(
                "OAuth(client_metadata_url=...) is an https URL with a path (the client's "
                "metadata document)"
            )
        port = self.redirect_port
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"OAuth(redirect_port=...) is 0 (any) or a port number, not {port!r}")
        hosts = self.trusted_hosts
        if isinstance(hosts, str) or not all(isinstance(h, str) and h for h in hosts):
            raise ValueError("OAuth(trusted_hosts=...) is a tuple of host names")
        object.__setattr__(self, "trusted_hosts", tuple(h.lower() for h in hosts))
        if not isinstance(self.client_name, str) or not self.client_name.strip():
            raise ValueError("OAuth(client_name=...) is a non-empty string")

    @property
    def auth_method(self) -> TokenAuthMethod:
        """How the client secret goes to the token endpoint (a configured client only)."""
        if self.token_endpoint_auth_method is not None:
            return self.token_endpoint_auth_method
        return "client_secret_basic" if self.client_secret else "none"
