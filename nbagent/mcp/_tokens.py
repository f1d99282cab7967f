"""One server's OAuth tokens, in memory only, and how they read to a person.

:class:`MemoryStore` is the SDK's ``TokenStorage``: nothing is written anywhere, nothing is
shown (its repr says only what it is), and every token and client secret it holds is hidden
wherever :func:`~nbagent.redact.redact_secrets` runs, until it is forgotten.
"""

from __future__ import annotations

import time

from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from ..redact import forget_exactly, hide_exactly

__all__ = ["MemoryStore"]


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class MemoryStore:
    """The SDK's ``TokenStorage``, in memory only (never written anywhere, never shown)."""

    def __init__(self, client_info: OAuthClientInformationFull | None) -> None:
        self.tokens: OAuthToken | None = None
        self.expires_at: float | None = None
        self.client_info = client_info
        # Tokens stored from a grant (a sign-in: the code, or the client's credentials), not a
        # refresh. The signer says which one comes next when the token endpoint answers it.
        self.grants = 0
        self.next_is_grant = False
        if client_info is not None and client_info.client_secret:
            hide_exactly(client_info.client_secret)

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        hide_exactly(tokens.access_token, tokens.refresh_token or "")
        self.forget()
        self.tokens = tokens
        self.expires_at = time.time() + tokens.expires_in if tokens.expires_in else None
        if self.next_is_grant:
            self.grants += 1
            self.next_is_grant = False

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        if client_info.client_secret:
            hide_exactly(client_info.client_secret)
        self.client_info = client_info

    def forget(self) -> None:
        """Drop the tokens (they are no longer looked for in text either)."""
        tokens, self.tokens, self.expires_at = self.tokens, None, None
        if tokens is not None:
            forget_exactly(tokens.access_token, tokens.refresh_token or "")

    def __repr__(self) -> str:
        return "<nbagent OAuth tokens, in memory>"

    def describe(self, needed: bool) -> str:
        """ "signed in, expires at 14:05 (in 58 min)", "not signed in", "sign-in needed" (when
        ``needed``: a sign-in failed, or the tokens were dropped) …"""
        tokens, expires = self.tokens, self.expires_at
        if tokens is None:
            return "sign-in needed" if needed else "not signed in"
        if expires is None:
            return "signed in"
        when = time.strftime("%H:%M", time.localtime(expires))
        left = expires - time.time()
        if left > 0:
            return f"signed in, expires at {when} (in {_duration(left)})"
        if tokens.refresh_token:
            return f"signed in; the token expired at {when} and is renewed at the next call"
        return f"signed in, but the token expired at {when}: sign in again"
