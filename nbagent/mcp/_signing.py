"""Signing in to a server from the thread that waits for it: the Connection's part of OAuth.

The sign-in itself is the SDK's, run by :class:`~._signer.Signer` on the connection's event
loop; this is what the waiting thread does meanwhile (show the links it is handed, see
:mod:`._signin`), and what a person asks of a running server: :meth:`SignInControl.sign_in`
again (after a refresh was refused, or to change accounts), :meth:`SignInControl.sign_out`.
While the server starts, a person signing in is not the server being slow: the start's clock
stops (:meth:`SignInControl._clock`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import MCPServerError
from ._limits import THREAD_JOIN
from ._reasons import short

if TYPE_CHECKING:
    from mcp import Client

    from ._limits import MCPLimits
    from ._signer import Signer
    from ._signin import Attendant

__all__ = ["SignInControl"]


class SignInControl:
    """Mixed into :class:`~._connection.Connection` (whose attributes these are)."""

    name: str
    target: Any
    limits: MCPLimits
    state: str
    signer: Signer | None
    _attendant: Attendant | None
    _loop: asyncio.AbstractEventLoop | None
    _client: Client | None
    _ready: threading.Event
    _main: asyncio.Task[None] | None
    _start_timer: asyncio.TimerHandle | None
    _start_left: float | None

    def unavailable(self) -> str:
        raise NotImplementedError

    def _start_timed_out(self, main: asyncio.Task[None] | None) -> None:
        raise NotImplementedError

    async def _list(self, client: Client) -> None:
        raise NotImplementedError

    def _attendant_for(self, open_link: Callable[[str], object] | None = None) -> Attendant:
        from ._signin import Attendant, HookPresenter, default_presenter

        hook = open_link or (self.target.auth.open_link if self.target.auth else None)
        return Attendant(HookPresenter(hook) if hook is not None else default_presenter())

    def _error(self, problem: str) -> MCPServerError:
        from ..errors import MCPSignInError

        signer = self.signer
        signing = signer is not None and signer.problem is not None and signer.problem == problem
        kind = MCPSignInError if signing else MCPServerError
        return kind(f"MCP server {self.name!r} {problem}")

    def _clock(self, running: bool) -> None:
        """Stop (or run again) the start's clock: a person signing in is not the server
        being slow."""
        loop = self._loop
        if self._ready.is_set() or loop is None:
            return
        if not running and self._start_timer is not None:
            self._start_left = max(0.0, self._start_timer.when() - loop.time())
            self._start_timer.cancel()
            self._start_timer = None
        elif running and self._start_timer is None and self._start_left is not None:
            self._start_timer = loop.call_later(self._start_left, self._start_timed_out, self._main)

    # --- signing in (OAuth) ----------------------------------------------------------------

    def sign_in(self, open_link: Callable[[str], object] | None = None) -> None:
        """Sign in (again) now, from this thread: the tokens held are dropped, then the tool
        list is fetched, which asks the server and so starts the sign-in (a sign-in another
        request completes meanwhile, through the link shown here, is kept: it is the one
        asked for). Raises MCPSignInError saying why it did not succeed."""
        from ..errors import MCPSignInError

        signer, loop = self.signer, self._loop
        if signer is None or loop is None:
            raise MCPServerError(f"MCP server {self.name!r} does not sign in with OAuth")
        if self.state != "running":
            raise MCPServerError(self.unavailable())
        attendant = self._attendant_for(open_link)
        if attendant.refusal is not None and signer.person:
            raise MCPSignInError(f"MCP server {self.name!r} could not sign in: {attendant.refusal}")
        self._attendant = attendant
        asked = signer.store.grants  # a sign-in completed from now on is the one asked for
        try:
            future = asyncio.run_coroutine_threadsafe(self._sign_in_now(signer, asked), loop)
        except RuntimeError:  # its loop has just ended
            self._attendant = None
            raise MCPServerError(self.unavailable()) from None
        future.add_done_callback(attendant.wake)
        limits = self.limits
        try:
            bound = (
                8 * limits.auth_timeout + limits.call_timeout + THREAD_JOIN
            )  # + each link's wait
            if not attendant.serve_until(future.done, bound):
                future.cancel()
        except BaseException:  # an interrupt: the sign-in stops too
            future.cancel()
            self._attendant = None
            attendant.finish("interrupted")
            raise
        self._attendant = None
        problem = signer.problem if signer.problem else None
        if not future.done() or future.cancelled():
            problem = problem or "did not finish signing in"
        elif future.exception() is not None and problem is None:
            problem = f"could not sign in: {short(str(future.exception()), 300)}"
        attendant.finish(problem)
        if problem is not None:
            raise MCPSignInError(f"MCP server {self.name!r} {problem}")

    async def _sign_in_now(self, signer: Signer, asked: int) -> None:
        import anyio

        # another request may be signing in already (through the link this sign-in shows):
        # the sign-out waits for it, and keeps what it got (see Signer.forget)
        await signer.forget(unless_granted_since=asked)
        signer.problem = None
        client = self._client
        if client is None:
            raise MCPServerError(self.unavailable())
        # each request of the sign-in has its own bound; this one is the whole: the person's
        # time and the listing's
        limits = self.limits
        with anyio.fail_after(
            limits.sign_in_timeout + 8 * limits.auth_timeout + limits.call_timeout
        ):
            await self._list(client)

    def sign_out(self) -> None:
        """Forget the tokens (they are not revoked: they expire on their own)."""
        signer, loop = self.signer, self._loop
        if signer is None:
            raise MCPServerError(f"MCP server {self.name!r} does not sign in with OAuth")
        if loop is not None and self.state == "running":
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(signer.forget(), loop).result(THREAD_JOIN)
        else:
            signer.store.forget()
