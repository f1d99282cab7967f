"""Following a server's tool list: change notifications, the listening stream, the refetch.

A server tells its client that its tool list changed with ``notifications/tools/list_changed``;
the client then fetches the list again (:meth:`ToolListFollowing._refresh_soon`, coalesced).
Before the 2026-07-28 protocol the notification comes unasked. From 2026-07-28 on it reaches
only a client that listens (``subscriptions/listen``), and a change made while nobody listened
is never told: there is no replay. So on a 2026 connection the start opens the listening
stream, and waits for the server's acknowledgment, *before* it lists the tools, so that no
change falls between the listing and the stream (a change made before the acknowledgment is
in the listing, one after it is notified). A stream that drops is opened again, and the list
fetched again, for what changed while it was down; a server that ends it deliberately (or
refuses it) is not asked again.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from ._limits import MCPLimits

if TYPE_CHECKING:
    from mcp import Client

__all__ = ["ToolListFollowing"]

#: Streams that drop one after another before one lasts: then following stops, saying so.
_RELISTENS = 5
_RELISTEN_PAUSE = 0.5  # seconds, doubled after each drop in a row: a server that drops at once
_LASTS = 30.0  # seconds a stream stays open to count as one that lasted (the drops restart)


class ToolListFollowing:
    """Mixed into :class:`~._connection.Connection` (whose attributes these are)."""

    name: str
    limits: MCPLimits
    state: str
    rejected: tuple[str, ...]
    _client: Client | None
    _changed: bool
    _refreshing: asyncio.Task[None] | None
    _tasks: set[asyncio.Task[Any]]

    async def _list(self, client: Client) -> None:
        raise NotImplementedError

    def _explain(self, exc: BaseException) -> str:
        raise NotImplementedError

    def _spawn(self, work: Any) -> asyncio.Task[Any]:
        raise NotImplementedError

    def _note(self, problem: str) -> None:
        """Say why the list may be behind the server's (``%agent mcp list`` shows it)."""
        self.rejected = (*self.rejected, problem)[-self.limits.max_tools :]

    async def _on_message(self, message: Any) -> None:
        """Server notifications: a changed tool list is fetched again (coalesced)."""
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            self._changed = True
            if self.state == "running":
                self._refresh_soon()

    def _refresh_soon(self) -> None:
        """Fetch the list again: one fetch at a time, and at most one more after it, which
        starts after the last notification so far (a burst of 500 costs two fetches, not
        500, and the list ends as the last notification left it)."""
        if self._refreshing is None or self._refreshing.done():
            self._refreshing = asyncio.ensure_future(self._refresh())
            self._tasks.add(self._refreshing)
            self._refreshing.add_done_callback(self._tasks.discard)

    async def _refresh(self) -> None:
        import anyio

        while self._changed and self._client is not None and self.state == "running":
            self._changed = False  # a notification from now on asks for one more fetch
            try:
                with anyio.fail_after(self.limits.call_timeout):
                    await self._list(self._client)
            except Exception as exc:  # the old list stays; `%agent mcp list` shows why
                self._note(
                    f"the tool list changed but could not be fetched again: {self._explain(exc)}"
                )

    async def _start_listening(self, client: Client) -> None:
        """On a 2026 connection, open the listening stream and wait for its acknowledgment
        (the start's clock bounds the wait); return at once on earlier ones."""
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return  # earlier versions send the notifications unasked
        opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._spawn(self._listen(client, opened))
        await opened

    async def _listen(self, client: Client, opened: asyncio.Future[None]) -> None:
        """Hold the listening stream open for the connection's life (see the module)."""
        import anyio
        from mcp.client.subscriptions import SubscriptionLost

        loop = asyncio.get_running_loop()
        drops = 0
        try:
            while True:
                since = loop.time()
                try:
                    async with contextlib.AsyncExitStack() as stack:
                        with anyio.fail_after(self.limits.call_timeout):  # its acknowledgment
                            subscription = await stack.enter_async_context(
                                client.listen(tools_list_changed=True)
                            )
                        if opened.done():  # opened again: what changed while it was down
                            self._changed = True
                            self._refresh_soon()
                        else:
                            opened.set_result(None)
                        async for _event in subscription:
                            pass  # the same notification reaches _on_message, which refetches
                    return  # the server ended the stream deliberately: it is not asked again
                except SubscriptionLost as exc:
                    if not opened.done() or self.state not in ("starting", "running"):
                        return  # lost before its first acknowledgment: the server cannot
                    drops = 0 if loop.time() - since > _LASTS else drops + 1
                    if drops > _RELISTENS:
                        self._note(
                            f"its listening stream (subscriptions/listen) dropped {drops} times "
                            "in a row; the tool list no longer follows its changes (reconnect "
                            f"to follow them again): {self._explain(exc)}"
                        )
                        return
                    await asyncio.sleep(_RELISTEN_PAUSE * 2 ** (drops - 1) if drops else 0)
                except Exception as exc:  # refused, or no acknowledgment in time
                    if opened.done() and self.state == "running":
                        self._note(
                            "its listening stream (subscriptions/listen) could not be opened "
                            f"again; the tool list no longer follows its changes: "
                            f"{self._explain(exc)}"
                        )
                    return  # a server refusing to be listened to sends no changes
        finally:
            if not opened.done():
                opened.set_result(None)  # the start goes on, without following changes
