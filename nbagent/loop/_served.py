"""Calls from an external MCP client, run through nbagent's own call path.

A :class:`ServedCalls` is to a served session what a :class:`~nbagent.loop.run.Run` is to a run:
each call a client sends is checked against its tool's strict schema (a call that fails it is
refused before anything is shown or asked), then goes through exactly what a model's call goes
through (:func:`nbagent.loop._calls.run_valid_call`: before-tool hooks, rules and approval with
the tool's previews and the person's edits, execution with its timeout, after-tool hooks), and
emits the same :mod:`nbagent.events` a run's call does, so that any front end shows it as a
card. Every call is kept as a :class:`ServedRecord`, and the events fold into a
:class:`~nbagent.timeline.Timeline` as a run's do.

Calls run on ``loop`` (in a notebook: the kernel's, where cards and clicks live); the HTTP
side, on its own thread, hands them over with :meth:`ServedCalls.submit` and may cancel the
future it gets back (a client that went away): a call cancelled before it ran never runs, and
its card says why.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from .._ground.spending import Account, spend_from
from .._history import result_for_model
from ..approvals.approval import Approver
from ..content import ToolResult, error_result
from ..errors import ArgumentsError
from ..events import (
    AbandonedCall,
    AgentEvent,
    RunStarted,
    ToolCallReady,
    ToolCallStarted,
    ToolFinished,
    ToolProgress,
)
from ..limits import Budget, Limits
from ..schema._strict_json import parse_arguments
from ..tools import Tool, ToolCall, validate_tools
from ._calls import run_valid_call
from ._execution import copy_json
from ._ids import new_id
from ._timing import TimelineBuilder

if TYPE_CHECKING:
    from ..approvals.hooks import AfterToolHook, BeforeToolHook
    from ..schema import CompiledSchema
    from ..timeline import Timeline
    from ._loopstate import RunState

__all__ = [
    "ArgumentsRefusedError",
    "CallRefused",
    "ServedCalls",
    "ServedRecord",
    "UnknownToolError",
]

log = logging.getLogger("nbagent")
#: Served calls remembered for the timeline and the report (the oldest go first).
KEEP_RECORDS = 1_000
#: Client names remembered (from their ``initialize``), the most recent last.
KEEP_CLIENTS = 16


class CallRefused(Exception):
    """A call refused before it reached a card; ``str()`` says why, for the client. The HTTP
    side tells the two kinds apart by their standard bases (it cannot import this room)."""


class UnknownToolError(CallRefused, LookupError):
    """No such tool is served now (never was, or unregistered since the client listed it)."""


class ArgumentsRefusedError(CallRefused, ValueError):
    """The arguments are not a JSON object, are too large or deep, or fail the schema."""


@dataclass
class ServedRecord:
    """One served call as it was asked and answered (for the timeline, the report, tests)."""

    call: ToolCall
    arguments: Any
    client: str
    started: float
    status: str = "waiting"
    result: ToolResult | None = None
    elapsed: float = 0.0
    #: When it came (seconds since the epoch), for a person reading the request view.
    at: float = field(default_factory=time.time)
    #: The tool that answered (its output schema shapes the MCP answer), None if unknown.
    tool: Tool | None = field(default=None, repr=False, compare=False)


@dataclass
class _AgentSettings:
    """What a served call reads of an agent: hooks, timeouts, limits, and the compiled schema
    of each served tool (the served tools are not the agent's own)."""

    limits: Limits = field(default_factory=Limits)
    before_tool_hooks: list[BeforeToolHook] = field(default_factory=list)
    after_tool_hooks: list[AfterToolHook] = field(default_factory=list)
    tool_timeout: float | None = None
    approval_timeout: float | None = None
    hook_timeout: float | None = 30.0
    preview_timeout: float | None = 10.0
    _schemas: dict[str, CompiledSchema] = field(default_factory=dict)


class ServedCalls:
    """The calls of one served session (see the module docs).

    ``tools()`` gives the tools served now (read at each list and each call, so a tool
    unregistered since a client listed it is refused as unknown); ``approver`` decides the calls
    that need approval; ``emit`` receives every event, on ``loop``; ``agent`` (optional) lends
    its hooks, timeouts and limits, read at each call. ``run_id`` names the session in events,
    snippets (``%agent undo serve-1``) and the timeline. ``budget`` bounds what all the
    session's calls spend together, where a served tool runs an agent (a helper): every model
    request it makes reserves from one account (:mod:`nbagent._ground.spending`).
    """

    def __init__(
        self,
        tools: Callable[[], Mapping[str, Tool]],
        approver: Approver,
        emit: Callable[[AgentEvent], None],
        *,
        loop: asyncio.AbstractEventLoop,
        agent: Any = None,
        run_id: str | None = None,
        label: str = "",
        budget: Budget | None = None,
    ) -> None:
        self._tools = tools
        #: What the session's calls spend, all of them together, when they run agents (a
        #: helper served as a tool): one account, as a run's helpers spend from the run's.
        self.account: Account | None = (
            Account(budget, label="the serving's budget") if budget is not None else None
        )
        self.approver = approver
        self._sink = emit
        self.loop = loop
        self._agent = agent
        self.id = run_id or new_id("serve")
        self.label = label
        self._steps = 0
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        self._schemas: dict[str, tuple[Tool, CompiledSchema]] = {}
        self._timeline = TimelineBuilder(keep=KEEP_RECORDS)
        self.records: deque[ServedRecord] = deque(maxlen=KEEP_RECORDS)
        self._semaphore: asyncio.Semaphore | None = None
        self._sequential: dict[str, asyncio.Lock] = {}
        self._abandoned: dict[str, AbandonedCall] = {}
        self._listeners: dict[str, Callable[[ToolResult], None]] = {}
        self._open: dict[str, ServedRecord] = {}  # calls not answered yet, by call id
        self._started = False
        self.closed = False
        self._clients: dict[str, float] = {}

    # --- what RunState asks of a run ------------------------------------------------------------

    @property
    def agent(self) -> _AgentSettings:
        source = self._agent
        settings = _AgentSettings()
        if source is not None:
            for name in (
                "limits",
                "before_tool_hooks",
                "after_tool_hooks",
                "tool_timeout",
                "approval_timeout",
                "hook_timeout",
                "preview_timeout",
            ):
                if hasattr(source, name):
                    setattr(settings, name, getattr(source, name))
        settings._schemas = {name: compiled for name, (_, compiled) in self._schemas.items()}
        return settings

    @property
    def schemas(self) -> dict[str, CompiledSchema]:
        """The compiled input schema of each tool served so far, by name."""
        with self._lock:
            return {name: compiled for name, (_, compiled) in self._schemas.items()}

    @property
    def limits(self) -> Limits:
        return self.agent.limits

    @property
    def tools(self) -> dict[str, Tool]:
        return dict(self._tools())

    def emit(self, event: AgentEvent) -> None:
        self._timeline.add(event)
        for observer in tuple(getattr(self._agent, "observers", ()) or ()):
            try:
                observer(self.id, event)
            except Exception:  # an observer must never break a call
                log.exception("an observer of %s failed on %s", self.id, type(event).__name__)
        if self.closed:
            return  # the front end is gone: the timeline still gets it
        try:
            self._sink(event)
        except Exception:  # the front end failed: the call goes on, and it is said
            log.exception("the front end of %s failed on %s", self.id, type(event).__name__)

    def _progress(self, call_id: str) -> Callable[[ToolResult, float], None]:
        def deliver(update: ToolResult, elapsed: float) -> None:
            self.emit(ToolProgress(call_id, update, elapsed))
            listener = self._listeners.get(call_id)
            if listener is not None:
                try:
                    listener(update)
                except Exception:  # the client's side of it failed: the call goes on
                    log.exception("progress of %s could not be sent", call_id)

        return deliver

    def _abandon(self, handle: AbandonedCall) -> None:
        self._abandoned[handle.call_id] = handle

    # --- the tools ------------------------------------------------------------------------------

    def listed(self) -> list[Tool]:
        """The tools served now, each with its schema compiled (a tool whose schema does not
        compile is left out, and logged: it could not be called)."""
        out = []
        for name, found in sorted(self._tools().items()):
            if found.execute is None or found.provider_executed:
                continue
            if self._compiled(name, found) is not None:
                out.append(found)
        return out

    def _compiled(self, name: str, found: Tool) -> CompiledSchema | None:
        with self._lock:
            cached = self._schemas.get(name)
            if cached is not None and cached[0] is found:
                return cached[1]
        try:
            compiled = validate_tools([found])[name]
        except Exception as exc:  # a tool that cannot be registered cannot be served
            log.warning("nbagent serve: tool %s left out: %s", name, exc)
            return None
        with self._lock:
            self._schemas[name] = (found, compiled)
        return compiled

    def check(self, name: str, arguments: Any) -> tuple[Tool, Any]:
        """The tool and a fresh copy of the arguments, or :class:`UnknownToolError` /
        :class:`ArgumentsRefusedError` saying why nothing will be shown or run."""
        found = self._tools().get(name)
        if found is None or found.execute is None or found.provider_executed:
            available = ", ".join(t.name for t in self.listed()) or "none"
            raise UnknownToolError(f"Unknown tool {name!r}. Available tools: {available}.")
        compiled = self._compiled(name, found)
        if compiled is None:
            raise UnknownToolError(f"Tool {name!r} cannot be served (its schema fails).")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise ArgumentsRefusedError(f"Arguments of {name!r} must be a JSON object.")
        limits = self.limits
        try:
            text = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
            value = parse_arguments(
                text,
                name=name,
                max_bytes=limits.max_argument_bytes,
                max_depth=limits.max_argument_depth,
            )
            compiled.validate(value)
        except ArgumentsError as exc:
            raise ArgumentsRefusedError(
                f"Invalid arguments for {name}, nothing was run: {exc}"
            ) from None
        except (TypeError, ValueError, RecursionError) as exc:
            raise ArgumentsRefusedError(f"Invalid arguments for {name}: {exc}") from None
        return found, value

    def client_seen(self, name: str) -> None:
        """A client that named itself (``clientInfo`` of its ``initialize``) made a request;
        from any thread. At most :data:`KEEP_CLIENTS` names are kept, the latest ones."""
        name = " ".join(str(name).split())[:80]
        if not name:
            return
        with self._lock:
            self._clients.pop(name, None)
            self._clients[name] = time.time()
            while len(self._clients) > KEEP_CLIENTS:
                self._clients.pop(next(iter(self._clients)))

    @property
    def clients(self) -> list[str]:
        """The names of the clients that used this session, the most recent last."""
        with self._lock:
            return list(self._clients)

    # --- calls ----------------------------------------------------------------------------------

    def submit(
        self,
        found: Tool,
        arguments: Any,
        *,
        client: str = "",
        max_calls: int = 16,
        on_progress: Callable[[ToolResult], None] | None = None,
    ) -> concurrent.futures.Future[ToolResult]:
        """Run one checked call on :attr:`loop` (from any thread); cancel the future to stop
        it (a call that had not run then never runs). ``on_progress`` gets the tool's own
        progress updates (``context.update``), on the loop."""
        return asyncio.run_coroutine_threadsafe(
            self._call(found, arguments, client, max_calls, on_progress), self.loop
        )

    async def _call(
        self,
        found: Tool,
        arguments: Any,
        client: str,
        max_calls: int,
        on_progress: Callable[[ToolResult], None] | None,
    ) -> ToolResult:
        if not self._started:
            self._started = True
            self.emit(RunStarted(self.id, self.label or "served over MCP", "an MCP client"))
        if self.account is not None:
            spend_from(self.account)  # this call's task: the runs its tool starts spend here
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(max_calls)
        number = next(self._numbers)
        self._steps = number  # each call is its own step: `%agent undo serve-1 step 3`
        text = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
        call = ToolCall(f"{self.id}-call-{number}", found.name, text)
        record = ServedRecord(call, copy_json(arguments), client, time.monotonic(), tool=found)
        self.client_seen(client)
        if on_progress is not None:
            self._listeners[call.id] = on_progress
        self.records.append(record)
        self._open[call.id] = record
        started = time.monotonic()
        self.emit(
            ToolCallStarted(
                number, call.id, found.name, found.title, code_arguments=found.code_arguments
            )
        )
        self.emit(ToolCallReady(number, call, copy_json(arguments)))
        try:
            # run_valid_call reads of its run and agent only what this class has (the hooks,
            # timeouts, limits and schemas; not the conversation or the model)
            outcome = await run_valid_call(
                cast("RunState", self), found, call, arguments, self._semaphore, self._sequential
            )
        except asyncio.CancelledError:
            self._listeners.pop(call.id, None)
            if self._open.pop(call.id, None) is not None:  # else close() answered it
                self._cancelled(record, "The MCP client went away (or cancelled the call)")
            raise
        self._open.pop(call.id, None)
        self._listeners.pop(call.id, None)
        shown = result_for_model(outcome.result, self.limits)  # what the client reads
        original = outcome.original
        if original is None and shown is not outcome.result:
            original = outcome.result
        record.status, record.result = outcome.status, shown
        record.elapsed = time.monotonic() - started
        self.emit(
            ToolFinished(
                call,
                shown,
                outcome.status,
                record.elapsed,
                outcome.trace,
                outcome.abandoned,
                original,
            )
        )
        return shown

    def _cancelled(self, record: ServedRecord, who: str) -> None:
        call = record.call
        record.status = "cancelled"
        record.elapsed = time.monotonic() - record.started
        record.result = error_result(f"{who} before {call.name} ended; nothing more of it runs.")
        self.emit(
            ToolFinished(
                call,
                record.result,
                "cancelled",
                record.elapsed,
                None,
                self._abandoned.pop(call.id, None),
            )
        )

    def close(self, why: str = "Serving stopped") -> None:
        """No more events to the front end; the calls still open are answered cancelled now
        (their tasks, cancelled by the server, end on the loop later and emit nothing)."""
        for call_id in list(self._open):
            record = self._open.pop(call_id, None)
            if record is not None:
                self._cancelled(record, why)
        self.closed = True

    def timeline(self) -> Timeline:
        """The served calls over time, as a run's timeline shows its calls."""
        return self._timeline.build("serving" if not self.closed else "stopped", calls=self._steps)
