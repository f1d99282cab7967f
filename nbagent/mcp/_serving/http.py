"""The HTTP connections of a served notebook: each bounded in time, and never all held by
someone without the token.

uvicorn (its h11 protocol, which this module extends) bounds a connection only once it has
answered a request: ``timeout_keep_alive`` then closes it when it stays quiet, and any byte
received cancels that timer. Nothing bounds the time to a complete request head or body, and
``limit_concurrency`` counts every open connection alike. So 70 connections that each send
half a header, a byte now and then, hold every place and lock the token's holder out (503) for
as long as they like ("slowloris"); on a shared machine any local user can do it.
:func:`bounded_protocol` gives each connection:

- its **request head** complete within ``head_timeout`` of the connection (or of the end of
  the previous answer on it): bytes trickling in do not extend it;
- its **request body** complete within ``body_timeout`` of the head;
- at most ``idle_timeout`` of quiet between two requests (uvicorn's keep-alive);
- until it has shown the token, a **lifetime** of ``untrusted_lifetime`` at most, whatever it
  sends: a client without the token has nothing to wait for (each of its requests is a 401);
- a **place** among ``max_connections``: a connection past them takes the place of the oldest
  one that has not shown the token (closing it), or is closed at once when all have.

A connection that showed the token keeps its place for as long as it lives: an answer that
waits for a person (an SSE stream with progress) may take minutes, and the SDK drops a
session that stays silent (``ServeSettings.session_idle_timeout``).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

__all__ = ["TRUST_KEY", "ConnectionBounds", "bounded_protocol", "trust"]

#: Where a request's "this connection showed the token" callback sits in its ASGI scope.
TRUST_KEY = "nbagent.connection_trusted"


def trust(scope: Any) -> None:
    """The request of ``scope`` showed the token: its connection keeps its place from now on."""
    mark = scope.get(TRUST_KEY) if isinstance(scope, dict) else None
    if callable(mark):
        mark()


class ConnectionBounds:
    """The bounds of :func:`bounded_protocol` (seconds; see the module docs) and the open
    connections of one server, oldest first."""

    def __init__(
        self,
        *,
        max_connections: int,
        head_timeout: float,
        body_timeout: float,
        untrusted_lifetime: float,
    ) -> None:
        self.max_connections = max_connections
        self.head_timeout = head_timeout
        self.body_timeout = body_timeout
        self.untrusted_lifetime = untrusted_lifetime
        #: Open connections in the order they came (only the server's loop touches it).
        self.open: OrderedDict[int, Any] = OrderedDict()
        #: Connections closed by a bound, by why (for ``%agent serve status`` and tests).
        self.closed: dict[str, int] = {}

    def count(self, why: str) -> None:
        self.closed[why] = self.closed.get(why, 0) + 1


def bounded_protocol(bounds: ConnectionBounds) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with ``bounds`` applied to every connection: give it to
    ``uvicorn.Config(http=...)``."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class BoundedH11Protocol(H11Protocol):
        """One connection (see the module docs)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._trusted = False
            self._heads = 0
            self._timers: dict[str, asyncio.TimerHandle] = {}

        # --- timers --------------------------------------------------------------------------

        def _after(self, name: str, delay: float, check: Callable[[], bool]) -> None:
            """In ``delay`` seconds, close the connection if ``check()`` says it overstayed."""
            self._cancel(name)

            def fire() -> None:
                self._timers.pop(name, None)
                if check():
                    self._close(name)

            self._timers[name] = self.loop.call_later(delay, fire)

        def _cancel(self, name: str) -> None:
            timer = self._timers.pop(name, None)
            if timer is not None:
                timer.cancel()

        def _close(self, why: str) -> None:
            bounds.open.pop(id(self), None)
            if self.transport is not None and not self.transport.is_closing():
                bounds.count(why)
                self.transport.close()

        def _await_head(self) -> None:
            """From now on the next request head has ``head_timeout`` to arrive whole."""
            heads = self._heads

            def overstayed() -> bool:
                idle = self.cycle is None or self.cycle.response_complete
                return self._heads == heads and idle

            self._after("head", bounds.head_timeout, overstayed)

        def _trust(self) -> None:
            self._trusted = True
            self._cancel("lifetime")

        # --- uvicorn's protocol --------------------------------------------------------------

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            bounds.open[id(self)] = self
            self._await_head()
            self._after("lifetime", bounds.untrusted_lifetime, lambda: not self._trusted)
            if len(bounds.open) > bounds.max_connections:
                oldest = next((c for c in bounds.open.values() if not c._trusted), None)
                if oldest is None or oldest is self:
                    self._close("over the connection limit")
                else:
                    oldest._close("made room")

        def connection_lost(self, exc: Exception | None) -> None:
            bounds.open.pop(id(self), None)
            for name in list(self._timers):
                self._cancel(name)
            super().connection_lost(exc)

        def handle_events(self) -> None:
            before = self.cycle
            super().handle_events()
            cycle = self.cycle
            if cycle is None or cycle is before:
                return
            # a request head arrived whole: the body is next, then the answer
            self._heads += 1
            self._cancel("head")
            cycle.scope[TRUST_KEY] = self._trust  # type: ignore[literal-required]

            def body_unfinished() -> bool:
                return self.cycle is cycle and self.conn.their_state is h11.SEND_BODY

            if body_unfinished():
                self._after("body", bounds.body_timeout, body_unfinished)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._await_head()

    return BoundedH11Protocol
