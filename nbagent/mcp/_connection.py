"""One MCP server, spoken to through the official SDK from a thread and event loop of its own.

An SDK client session belongs to the loop it was started on, while tool calls come from
whichever loop runs the agent (the kernel's in a notebook, a worker loop under ``run_sync``).
So each server gets a daemon thread running its own loop, which owns the session from start
to close; a call hops onto it with :func:`asyncio.run_coroutine_threadsafe` and is bounded
there (:mod:`._calltime`: silence that progress starts again, and the whole call). Every way a
call can end (answer, error, timeout, crash, close, cancellation of the run) gives exactly one
result, or passes the run's cancellation on.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..content import ToolResult, error_result
from ..errors import NbagentError
from ..tools import Tool, ToolContext
from ._calltime import CallTime
from ._convert import make_tool, tool_result
from ._limits import THREAD_JOIN, MCPLimits
from ._listing import SCREENED, ListingScreen, describe_validation_error
from ._reasons import (
    answered_error,
    call_problem,
    leaves,
    quiet_sdk_logging,
    short,
    unread_page,
    unreadable_http,
)
from ._signing import SignInControl
from ._stdio import ProcessRecord, stdio_transport

if TYPE_CHECKING:
    import mcp_types
    from mcp import Client

    from ._oauth import OAuth
    from ._signer import Signer
    from ._signin import Attendant

__all__ = ["Connection", "Target"]

_MAX_PAGES = 64


@dataclass(frozen=True)
class Target:
    """Where the server is: a command to start (stdio) or a URL (streamable HTTP)."""

    command: tuple[str, ...] = ()
    url: str | None = None
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    cwd: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    auth: OAuth | None = None  # how to sign in when the server asks (HTTP only)
    auth_given: bool = False  # asked for by the person (else: tried because the server asks)


class Connection(SignInControl):
    """The session with one server, its current tools, and what went wrong if anything did."""

    def __init__(
        self,
        name: str,
        target: Target,
        limits: MCPLimits,
        needs_approval: bool,
        on_tools: Callable[[], None],
    ) -> None:
        self.name = name
        self.target = target
        self.limits = limits
        self.needs_approval = needs_approval
        self.on_tools = on_tools
        self.process = ProcessRecord()
        self.state = "starting"  # then running; or failed, exited, closed
        self.problem: str | None = None
        self.server_info: str | None = None
        self.protocol: str | None = None
        self.tools: tuple[Tool, ...] = ()
        self.origins: dict[str, str] = {}  # nbagent name -> the server's name
        self.rejected: tuple[str, ...] = ()
        self._listed: dict[str, Any] = {}  # nbagent name -> the mcp_types.Tool it was made from
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: Client | None = None
        self._main: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._timed_out = False
        self.signer: Signer | None = None  # the OAuth sign-in, for a server reached by URL
        self._attendant: Attendant | None = None  # the thread waiting for us, if any
        self._start_timer: asyncio.TimerHandle | None = None
        self._start_left: float | None = None
        self._changed = False  # a change notification not yet fetched
        self._refreshing: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._screen = ListingScreen(name, limits, lambda: self.protocol)
        self._thread = threading.Thread(target=self._run, name=f"nbagent-mcp-{name}", daemon=True)

    # --- lifetime ----------------------------------------------------------------------------

    def start(self) -> None:
        """Start the server and list its tools; raise MCPServerError saying why it failed
        (MCPSignInError when signing in failed). A sign-in link asked for meanwhile is shown
        from this thread (see :mod:`._signin`)."""
        quiet_sdk_logging()
        attendant = self._attendant = self._attendant_for() if self.target.auth else None
        self._thread.start()
        try:
            if attendant is None:
                ready = self._ready.wait(self.limits.start_timeout + THREAD_JOIN)
            else:
                ready = attendant.serve_until(
                    self._ready.is_set, self.limits.start_timeout + THREAD_JOIN
                )
        except BaseException:  # an interrupt while waiting: leave no server behind
            self._attendant = None
            if attendant is not None:
                attendant.finish("interrupted")
            self.close()
            raise
        self._attendant = None
        if not ready or self.state != "running":
            problem = self.problem or "did not start"
            if attendant is not None:
                attendant.finish(problem)
            self.close()
            raise self._error(problem)
        if attendant is not None:
            attendant.finish(None)

    def _mark_ready(self) -> None:
        self._ready.set()
        attendant = self._attendant
        if attendant is not None:
            attendant.wake()

    def close(self, wait: bool = True) -> Callable[[], None]:
        """Stop the server (its process and children); safe to call twice. With ``wait``,
        return once it has stopped; else at once, with a function that waits."""
        if self.state in ("starting", "running"):
            self.state = "closed"
            self.problem = "was removed"
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # its loop already ended
                loop.call_soon_threadsafe(self._request_stop)

        def join() -> None:
            if self._thread.is_alive() and threading.current_thread() is not self._thread:
                self._thread.join(THREAD_JOIN)

        if wait:
            join()
        return join

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process.returncode is None else None

    def _request_stop(self) -> None:
        if self._stop is not None:
            self._stop.set()
        if not self._ready.is_set() and self._main is not None:
            self._main.cancel()  # still starting: nothing to finish

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        try:
            self._main = loop.create_task(self._serve())
            self._loop = loop
            loop.run_until_complete(self._main)
        except BaseException:  # the task records its own failure; never let it escape a thread
            pass
        finally:
            self._mark_ready()
            leftovers = asyncio.all_tasks(loop)
            for task in leftovers:
                task.cancel()
            with contextlib.suppress(BaseException):
                loop.run_until_complete(asyncio.gather(*leftovers, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        main = asyncio.current_task()
        self._start_timer = loop.call_later(self.limits.start_timeout, self._start_timed_out, main)
        try:
            async with contextlib.AsyncExitStack() as stack:
                client = await self._connect(stack)
                self._client = client
                self.protocol = client.protocol_version
                info = client.server_info
                if info is not None:
                    self.server_info = short(f"{info.name} {info.version}".strip(), 200)
                self._changed = False
                await self._list(client)
                self._stop_start_clock()
                self.state = "running"
                self._mark_ready()
                if self._changed:
                    self._refresh_soon()
                self._spawn(self._listen(client))
                await self._stop.wait()
                await self._cancel_tasks()
        except asyncio.CancelledError:
            if self._timed_out:
                self._fail(
                    f"did not start within {self.limits.start_timeout:g} s "
                    "(MCPLimits.start_timeout)"
                )
            else:
                self._fail("was closed while starting")
        except BaseException as exc:  # exception groups included: reported, never raised here
            self._fail(self._explain(exc))
        finally:
            self._stop_start_clock()
            self._client = None
            if self.state in ("starting", "running"):
                self._fail(self._exited() or "closed its connection")

    def _stop_start_clock(self) -> None:
        timer, self._start_timer, self._start_left = self._start_timer, None, None
        if timer is not None:
            timer.cancel()

    def _start_timed_out(self, main: asyncio.Task[None] | None) -> None:
        if not self._ready.is_set() and main is not None:
            self._timed_out = True
            main.cancel()

    def _fail(self, problem: str) -> None:
        if self.state == "closed":
            return
        self.state = "exited" if self.process.returncode is not None else "failed"
        if self.problem is None:
            self.problem = problem
        self._mark_ready()

    async def _connect(self, stack: contextlib.AsyncExitStack) -> Client:
        from mcp import Client, Implementation

        from .._version import __version__

        target = self.target
        transport: Any
        if target.url is not None:
            transport = await self._http(stack, target)
        else:
            from mcp.client.stdio import get_default_environment

            transport = stdio_transport(
                target.command,
                env={**get_default_environment(), **target.env},
                cwd=target.cwd,
                max_message_bytes=self.limits.max_message_bytes,
                record=self.process,
                on_exit=self._on_exit,
                screen=self._screen,
            )
        client = Client(
            transport,
            cache=None,  # the listing is refetched on every change notification
            message_handler=self._on_message,
            client_info=Implementation(name="nbagent", version=__version__),
        )
        await stack.enter_async_context(client)
        return client

    async def _http(self, stack: contextlib.AsyncExitStack, target: Target) -> Any:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        from ._http import BoundedTransport

        assert target.url is not None
        auth: httpx2.Auth | None = None
        if target.auth is not None:
            from ._signer import Signer

            self.signer = Signer(
                self.name,
                target.url,
                target.auth,
                self.limits,
                attendant=lambda: self._attendant,
                clock=self._clock,
                given=target.auth_given,
            )
            stack.push_async_callback(self.signer.close)
            auth = self.signer.auth
        limits = self.limits
        http = httpx2.AsyncClient(
            headers=dict(target.headers),
            # a call's stream may be quiet while progress comes on another: _calltime bounds it
            timeout=httpx2.Timeout(30.0, read=limits.max_call_timeout + 5.0),
            # the SDK reads JSON answers whole: bounded (and tool lists screened) below it
            transport=BoundedTransport(
                limits.max_message_bytes,
                self._screen,
                auth_timeout=limits.auth_timeout,
                max_auth_bytes=limits.max_auth_bytes,
            ),
            auth=auth,
        )
        await stack.enter_async_context(http)
        return streamable_http_client(
            target.url, http_client=http, max_sse_event_size=self.limits.max_message_bytes
        )

    def _on_exit(self) -> None:
        """The process ended (stdout closed): calls from now on say so at once."""
        if self.state == "running":
            self._fail(self._exited() or "closed its output")

    def _exited(self) -> str | None:
        code = self.process.returncode
        if code is None:
            return None
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        tail = self.process.tail()
        return f"{how}" + (f"; its last output on stderr:\n{tail}" if tail else "")

    def _explain(self, exc: BaseException) -> str:
        """Why the server could not be used, in words a person can act on."""
        from pydantic import ValidationError

        found = leaves(exc)
        first = next((e for e in found if not isinstance(e, asyncio.CancelledError)), found[0])
        command = self.target.command[0] if self.target.command else ""
        if isinstance(first, FileNotFoundError) and self.target.url is None:
            return f"could not start: the command {command!r} was not found (is it installed?)"
        if isinstance(first, PermissionError) and self.target.url is None:
            return f"could not start: the command {command!r} may not be run ({first})"
        answered = answered_error(first)
        signer = self.signer
        failed = signer.problem if signer is not None else None
        # signing in failed: that is why. Also when a later request of the start failed for
        # its own reason (the SDK answers a refused `server/discover` with the legacy
        # handshake, which a server without one refuses): it could only fail, unsigned
        if failed and (self.state == "starting" or (answered and failed in answered)):
            return failed
        if answered is not None:  # the server answered, with an error: that is why
            answered = unreadable_http(answered, self.limits.max_message_bytes)
            return f"failed: {short(answered, 1000)}"
        exited = self._exited()
        if exited is not None and self.process.ended_alone:  # not because nbagent stopped it
            return exited
        name = type(first).__name__
        if isinstance(first, ValidationError):
            return f"failed: its answer is not valid MCP: {describe_validation_error(first)}"
        if name.startswith(("Connect", "Network", "Remote")) or "Timeout" in name:
            return f"could not be reached at {self.url_shown}: {name}: {short(str(first), 300)}"
        return f"failed: {name}: {short(str(first), 500)}"

    @property
    def url_shown(self) -> str:
        """The URL without credentials or query (they may hold tokens)."""
        from urllib.parse import urlsplit

        url = self.target.url or ""
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{host}{port}{parts.path}" if parts.scheme else short(url, 200)

    # --- tools -------------------------------------------------------------------------------

    async def _list(self, client: Client) -> None:
        """Fetch the whole listing (bounded) and rebuild the tools; unchanged ones are kept."""
        listed: list[mcp_types.Tool] = []
        rejected: list[str] = []
        cursor: str | None = None
        beyond = False  # more than max_tools listed (refused ones count): the rest left out
        for number in range(1, _MAX_PAGES + 1):
            try:
                page = await client.list_tools(cursor=cursor)
            except Exception as exc:  # a page too large to read costs its tools, not the rest
                refused_page = unread_page(exc, number, self.name, self.limits.max_message_bytes)
                if refused_page is None:
                    raise
                rejected.append(refused_page)
                break
            listed.extend(page.tools)
            refused, unread = self._screened_out(page)
            rejected.extend(refused)
            beyond = beyond or unread or len(listed) + len(rejected) > self.limits.max_tools
            cursor = page.next_cursor
            if not cursor or beyond:
                break
        tools: list[Tool] = []
        kept: dict[str, Any] = {}
        if beyond:
            rejected.append(
                f"the server lists more than {self.limits.max_tools} tools; the rest were left "
                "out (MCPLimits.max_tools)"
            )
        previous = {t.name: t for t in self.tools}
        for item in listed[: self.limits.max_tools]:
            try:
                made = make_tool(
                    self.name,
                    item,
                    self.call,
                    needs_approval=self.needs_approval,
                    limits=self.limits,
                )
            except NbagentError as exc:
                rejected.append(short(str(exc)))
                continue
            except Exception as exc:  # one odd listing costs that tool only, never the server
                rejected.append(
                    short(f"tool {item.name!r} could not be read: {type(exc).__name__}: {exc}")
                )
                continue
            first = kept.get(made.name)
            if first is not None and first.name == item.name:
                rejected.append(f"tool {item.name!r} is listed twice; the first one is used")
                continue
            if first is not None:  # a made-safe name met a real one (see tool_name)
                rejected.append(
                    short(
                        f"tool {item.name!r} would have the nbagent name {made.name!r} of the "
                        f"tool {first.name!r}, which is kept"
                    )
                )
                continue
            old = previous.get(made.name)
            if old is not None and self._listed.get(made.name) == item:
                made = old  # same definition: same object, so nothing downstream changes
            kept[made.name] = item
            tools.append(made)
        self._listed = kept
        self.origins = {name: item.name for name, item in kept.items()}
        self.tools, self.rejected = tuple(tools), tuple(rejected)
        if self.state == "running":
            self.on_tools()

    def _screened_out(self, page: mcp_types.ListToolsResult) -> tuple[list[str], bool]:
        """Why each tool of this page that the server listed is not in it: left out by the
        screen (see :mod:`._listing`), or by the SDK after it; and whether the screen left
        tools out unread, past ``max_tools``."""
        info = (page.meta or {}).get(SCREENED)
        if not isinstance(info, dict):
            return [], False
        reasons = [short(r) for r in info.get("refused", ()) if isinstance(r, str)]
        returned = {tool.name for tool in page.tools}
        reasons.extend(
            short(
                f"tool {name!r} of MCP server {self.name!r}: the MCP SDK left it out of the "
                "listing (it says why only in its log)"
            )
            for name in info.get("kept", ())
            if isinstance(name, str) and name not in returned
        )
        return reasons, bool(info.get("unread"))

    def _spawn(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _cancel_tasks(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks))

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
                self.rejected = (
                    *self.rejected,
                    f"the tool list changed but could not be fetched again: {self._explain(exc)}",
                )[-self.limits.max_tools :]

    async def _listen(self, client: Client) -> None:
        """On 2026-era connections, change notifications come only to a listening client."""
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return  # earlier versions send them unasked
        with contextlib.suppress(Exception):
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    pass  # the same notification reaches _on_message, which refetches

    # --- calls -------------------------------------------------------------------------------

    @property
    def _stdio(self) -> bool:
        return self.target.url is None

    def unavailable(self) -> str:
        why = self.problem or "closed its connection"
        return f"MCP server {self.name!r} is not running: it {why}"

    async def call(self, name: str, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        """Call the server's tool ``name`` from any event loop; always one result."""
        loop = self._loop
        if loop is None or self.state != "running":
            return error_result(self.unavailable())
        try:
            future = asyncio.run_coroutine_threadsafe(self._call(name, arguments, context), loop)
        except RuntimeError:  # its loop has just ended
            return error_result(self.unavailable())
        waiting = asyncio.wrap_future(future)
        try:
            await asyncio.wait({waiting})
        except asyncio.CancelledError:
            future.cancel()  # cancels the request on the server too
            raise
        if waiting.cancelled():
            return error_result(self.unavailable())
        error = waiting.exception()
        if error is not None:
            return error_result(f"the call to {name!r} on MCP server {self.name!r} failed: {error}")
        return waiting.result()

    async def _call(self, name: str, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED

        client = self._client
        if client is None or self.state != "running":
            return error_result(self.unavailable())

        bounds = CallTime(self.limits)
        progress = bounds.progress_to(context)
        label = f"{name!r} on MCP server {self.name!r}"
        try:
            with bounds.scope:
                result = await client.call_tool(name, arguments, progress_callback=progress)
            if bounds.ran_out:
                return error_result(bounds.overran(label))
        except MCPError as exc:
            if self.state != "running" or (exc.code == CONNECTION_CLOSED and self._stdio):
                return error_result(self.unavailable())
            # over HTTP the SDK also says "connection closed" for one request's stream that
            # broke off (an event past the limit): the server goes on, and its message says why
            message = unreadable_http(exc.error.message, self.limits.max_message_bytes)
            return error_result(f"{label} failed: {short(message)}")
        except Exception as exc:
            if self.state != "running":
                return error_result(self.unavailable())
            return error_result(f"{label} {call_problem(exc)}")
        try:
            return tool_result(result, self.limits)
        except Exception as exc:  # odd content must cost this call only
            return error_result(f"{label} answered, but its result could not be read: {exc}")

    def status(self) -> str:
        """``running``, or what happened to it."""
        if self.state == "running":
            return "running"
        problem = self.problem or "closed its connection"
        # "exited with code 3" already says it exited ("exited: exited with code 3" stuttered)
        return problem if problem.startswith(self.state) else f"{self.state}: {problem}"

    def describe(self) -> Sequence[str]:
        """Command line or URL, for people (environment and headers never shown)."""
        if self.target.url is not None:
            return (self.url_shown,)
        return tuple(short(part, 200) for part in self.target.command)
