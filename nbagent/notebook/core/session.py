"""Session: one per kernel — the tool registry, the conversation, the settings, the runs.

Tools come from two places. Every :class:`~nbagent.tools.Tool` defined in a cell (``@nbagent.tool``
on a function) is picked up from the user namespace after each cell runs: a re-run cell
replaces its tool by name, and a tool whose variable is gone or rebound to something else is
dropped, so the registry matches what the notebook shows. Tools passed to :meth:`Session.register`
(imported ones, or a Definition plus a function) stay until replaced or unregistered.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..._history import checked_history
from ...approvals.approval import InteractiveApprover
from ...approvals.rules import Predicate, RuleSet, make_rule
from ...errors import NbagentError
from ...output import ANSWER_TOOL
from ...tools import Tool, validate_tools
from ..live.outputs import flush_iopub
from .continuation import Continued, Rebuilt, rebuild
from .recordings import RecordingStore, model_text
from .registry import as_tool, defined_in_notebook, show_problems
from .runner import kernel_loop

if TYPE_CHECKING:
    from ...agent import Agent
    from ...document import NotebookToolkit
    from ...events import RunResult
    from ...generation import Generator
    from ...kernel import KernelToolkit
    from ...mcp import MCPServer
    from .runner import Job

__all__ = ["Session", "as_tool", "show_problems"]


#: Finished runs the session remembers (for `%agent history`'s decisions).
_KEEP_JOBS = 200


def _timeout_from_env() -> tuple[float | None, str | None]:
    """``NBAGENT_APPROVAL_TIMEOUT`` in seconds (unset, empty, "0" or "off": no timeout), and
    what was wrong with it (shown by ``%agent config``)."""
    import math
    import os

    text = os.environ.get("NBAGENT_APPROVAL_TIMEOUT", "").strip().lower()
    if text in ("", "0", "off", "none"):
        return None, None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        return None, f"NBAGENT_APPROVAL_TIMEOUT={text[:40]!r} is not a number of seconds: ignored"
    return value, None


#: The kernel tools' names (``%agent --kernel``), known before the toolkit is made.
KERNEL_TOOLS = ("run_python", "list_variables", "describe_variable")


class Session:
    """Everything ``%agent`` keeps between cells in one kernel."""

    def __init__(self, shell: Any = None) -> None:
        self.shell = shell
        self.tools: dict[str, Tool] = {}
        self._explicit: set[str] = set()
        self._from_namespace: set[str] = set()
        self._seen: dict[str, Tool] = {}
        self.model_spec: str | Generator | None = None
        self._next_generator: Generator | None = None  # set during a run, for the next one
        self._agent: Agent | None = None
        # "Always allow" becomes a rule in self.rules (removable), not a set of its own
        self.approver = InteractiveApprover(remember_always=False)
        self.rules = RuleSet(tools=lambda: self.tools)
        self.approval_timeout, self.timeout_problem = _timeout_from_env()
        self.jobs: list[Job] = []
        self.active: Job | None = None
        self.queue: deque[Job] = deque()
        self._lock = threading.RLock()
        self._saved_sigint: list[Any] = []
        self._closing = False
        self.recordings = RecordingStore()
        self.mcp_servers: dict[str, MCPServer] = {}
        #: The kernel tools (``%agent --kernel``), made on first use by :mod:`.kernelview`.
        self.kernel: KernelToolkit | None = None
        #: The notebook tools (``%agent --notebook``), made on first use by :mod:`.editing`.
        self.notebook: NotebookToolkit | None = None
        self._mcp_tools: dict[str, str] = {}  # tool name -> the MCP server it comes from
        #: per server, its tools left out because a tool of the notebook has their name
        self.mcp_shadowed: dict[str, tuple[str, ...]] = {}
        #: what ``%agent cells`` / ``%agent undo`` did with runs' code (course FollowUps, for
        #: ``%agent report``), the newest _KEEP_JOBS
        self.follow_ups: deque[Any] = deque(maxlen=_KEEP_JOBS)
        #: runs the course policy refused, as (the newest job then, or None; its Provenance)
        self.refusals: deque[tuple[Any, Any]] = deque(maxlen=_KEEP_JOBS)
        #: What ``%agent serve`` serves now (:class:`.serving.ServedSession`), or None.
        self.served: Any = None
        self.served_sessions: list[Any] = []  # every %agent serve of this session (the report)
        #: A conversation continued with calls left waiting for approval: the next run offers
        #: them again (:meth:`continue_from`).
        self.continued: Rebuilt | None = None
        self.noted_earlier = False  # the saved conversation was pointed out (first_note)

    # --- the model and the conversation ----------------------------------------------------------

    @property
    def agent(self) -> Agent:
        """The Agent holding the conversation (created on first use, with the session's model)."""
        if self._agent is None:
            from ...agent import Agent

            self._agent = Agent(self.model_spec, approver=self.approver)
        return self._agent

    def set_model(self, spec: str | Generator | None) -> None:
        """Use another model from now on (the conversation goes on).

        While a run goes on (in the background) it keeps its model: the new one is checked now
        and takes over when the next run starts.
        """
        if self._agent is None:
            from ...agent import Agent

            self._agent = Agent(spec, approver=self.approver)
        else:
            if isinstance(spec, str) or spec is None:
                from ...providers import resolve_generator

                generator = resolve_generator(spec)
            else:
                generator = spec
            with self._lock:
                if self.busy:
                    self._next_generator = generator
                else:
                    self._next_generator = None
                    self._agent.generator = generator
        before = self._model_providers()
        self.model_spec = spec
        if self._model_providers() != before:  # a new provider: check the tools against it
            show_problems(self.provider_problems(self.tools.values(), model_only=True))

    def result_of(self, run_id: str) -> RunResult:
        """The result of a run this session made (``run-k7q2x-3``, or this session's ``run-3``),
        or a UsageError-worthy ValueError saying which runs there are."""
        from ...loop._ids import expand

        asked, run_id = run_id, expand(run_id)
        with self._lock:
            jobs = list(self.jobs)
        for job in reversed(jobs):
            result = job.result
            if job.run is not None and job.run.id == run_id:
                if result is None:
                    raise ValueError(f"{run_id} has not ended yet: wait for it, or stop it")
                return result
        known = [j.run.id for j in jobs if j.run is not None and j.result is not None]
        there = ", ".join(known[-8:]) or "none yet"
        last = " (the last 8)" if len(known) > 8 else ""
        raise ValueError(f"no run named {asked!r} in this session; its runs are: {there}{last}")

    def fork(self, run_id: str, step: int, tools: Iterable[str] | None = None) -> None:
        """The conversation from now on is ``run_id``'s as the model saw it at ``step`` (a new
        conversation; the one before stays in its runs' results).

        ``tools``: the names the fork's run will offer (None: every registered tool). A fork
        whose history calls a tool that run would not offer (deleted from the notebook,
        unregistered, left out by ``--tools``, a kernel tool without ``--kernel``) is refused,
        naming it, by the check every fork goes through
        (:func:`nbagent.inspection.fork.tools_missing`).
        """
        from ...inspection.fork import fork_history, tools_missing

        if self.busy:
            active = self.active.label if self.active is not None else "a run"
            raise ValueError(f"{active} is still going on: wait for it to end before forking")
        result = self.result_of(run_id)
        agent = self.sync_agent()  # its tools are the registered ones, as the run's will be
        offered = set(agent.tools) if tools is None else set(tools)
        history = fork_history(result, step)
        gone = tools_missing(history, offered)
        if gone:
            why = "; ".join(f"{name}: {self._why_not_offered(name)}" for name in gone)
            raise ValueError(
                f"cannot fork {run_id} at step {step}: its history calls "
                f"{', '.join(repr(n) for n in gone)}, which this run would not offer ({why})"
            )
        self._agent = agent.fork(result, step)

    def continue_from(self, run_id: str | None = None, *, with_prompt: bool = False) -> Continued:
        """Go on with the conversation the saved notebook holds after a kernel restart: the
        latest run's (None), or ``run_id``'s, rebuilt from its record and recording exactly as
        the model had seen it (:mod:`.continuation`); the next run goes on from there. A
        history that cannot be rebuilt is a ValueError in one sentence naming what is missing,
        and the conversation stays as it was. Calls left waiting for approval (the kernel
        stopped while they were asked) are offered again by the next ``%agent --continue``;
        ``with_prompt``: a prompt is to follow, which such calls refuse (they come first)."""
        from ...inspection.fork import tools_missing

        if self.busy:
            active = self.active.label if self.active is not None else "a run"
            raise ValueError(f"{active} is still going on: wait for it to end before continuing")
        rebuilt = rebuild(self.shell, self.recordings.folder, model_text(self.model_spec), run_id)
        pending = rebuilt.continued.pending
        if pending and with_prompt:
            raise ValueError(
                f"{rebuilt.continued.run_id}'s call to {', '.join(pending)} was waiting for "
                "approval when the kernel stopped: %agent --continue, with no prompt, asks it again"
            )
        try:
            messages = checked_history(list(rebuilt.conversation.asked))
        except NbagentError as exc:  # an image in it that does not decode
            raise ValueError(f"{rebuilt.continued.run_id}'s conversation: {exc}") from None
        offered = {*self.tools, *KERNEL_TOOLS, ANSWER_TOOL}  # a typed run's answer: its own
        offered |= set(self.notebook.names if self.notebook else ())
        gone = tools_missing(messages, offered)
        if gone:
            raise ValueError(
                f"{rebuilt.continued.run_id}'s conversation calls {', '.join(map(repr, gone))}, "
                "which no tool of this session is: run the cells that define it first"
            )
        agent = self.agent
        agent.reset()
        agent.messages.extend(messages)
        self.continued = rebuilt if rebuilt.conversation.pending else None
        return rebuilt.continued

    def _why_not_offered(self, name: str) -> str:
        if name not in self.tools and name not in KERNEL_TOOLS:
            return "no tool of that name is registered now; define it again, or nbagent.register it"
        if name in KERNEL_TOOLS:
            return "a kernel tool: add --kernel"
        if self.notebook is not None and name in self.notebook.names:
            return "a notebook tool: add --notebook"
        return "--tools leaves it out"

    @property
    def generator(self) -> Generator:
        """The model the next run uses."""
        return self._next_generator or self.agent.generator

    def _model_providers(self) -> list[str]:
        from ...providers import configured_providers

        try:
            return configured_providers(self.model_spec, {})
        except Exception:  # a model setting that does not resolve is reported elsewhere
            return []

    def sync_agent(self) -> Agent:
        """Give the agent exactly the registered tools and the session's approval timeout (at
        the start of a run, never during)."""
        import warnings

        from ...providers import ToolSchemaWarning

        agent = self.agent
        agent.approval_timeout = self.approval_timeout
        with self._lock:
            if self._next_generator is not None:  # set while the run before went on
                agent.generator, self._next_generator = self._next_generator, None
        with warnings.catch_warnings():  # said when the tool was registered
            warnings.simplefilter("ignore", ToolSchemaWarning)
            for name, item in self.tools.items():
                if agent.tools.get(name) is not item:
                    agent.add_tool(item)
        for name in [n for n in agent.tools if n not in self.tools]:
            agent.remove_tool(name)
        return agent

    # --- approval rules and hooks --------------------------------------------------------------

    def allow(self, tool: str | Tool, *, when: Predicate | None = None, **where: Any) -> int:
        """Allow calls to a registered tool without asking (those whose arguments match
        ``where`` globs and ``when``); checked against the tool now. Returns its number."""
        return self.rules.add(make_rule("allow", tool, when, where))

    def deny(self, tool: str | Tool, *, when: Predicate | None = None, **where: Any) -> int:
        """Deny calls to a registered tool (or those whose arguments match). Its number."""
        return self.rules.add(make_rule("deny", tool, when, where))

    def set_approval_timeout(self, seconds: float | None) -> None:
        """Answer a call nobody decides within ``seconds`` "approval timed out" (None: wait)."""
        if seconds is not None and not (seconds > 0 and seconds != float("inf")):
            raise ValueError("the approval timeout must be a positive number of seconds, or None")
        self.approval_timeout = seconds
        self.timeout_problem = None

    def before_tool(self, hook: Any) -> Any:
        """Add a before-tool hook to the session's agent (see :mod:`nbagent.approvals.hooks`)."""
        return self.agent.before_tool(hook)

    def after_tool(self, hook: Any) -> Any:
        """Add an after-tool hook to the session's agent (see :mod:`nbagent.approvals.hooks`)."""
        return self.agent.after_tool(hook)

    def provider_problems(self, tools: Iterable[Tool], *, model_only: bool = False) -> list[str]:
        """Warnings for tools a configured provider would reject (see ``%agent tools``);
        ``model_only``: only the session model's provider."""
        from ...providers import configured_providers, preflight

        try:
            providers = configured_providers(self.model_spec, {} if model_only else None)
        except Exception:  # a model setting that does not resolve is reported elsewhere
            return []
        return [
            f"warning: {problem.message}"
            for item in tools
            for provider in providers
            for problem in preflight(item, provider)
        ]

    # --- tools --------------------------------------------------------------------------------

    def register(self, *items: Any, function: Callable[..., Any] | None = None) -> list[Tool]:
        """Register tools now (their schemas are compiled now); same name replaces."""
        if function is not None and len(items) != 1:
            raise TypeError("function= goes with exactly one Definition")
        made = [as_tool(item, function) for item in items]
        validate_tools(made)
        with self._lock:
            for item in made:
                self.tools[item.name] = item
                self._take_from_mcp(item.name)
                self._explicit.add(item.name)
                self._from_namespace.discard(item.name)
        show_problems(self.provider_problems(made))
        return made

    def unregister(self, name: str) -> bool:
        """Forget a tool; True if there was one."""
        with self._lock:
            self._explicit.discard(name)
            self._from_namespace.discard(name)
            return self.tools.pop(name, None) is not None

    def scan(self, namespace: dict[str, Any] | None = None) -> list[str]:
        """Pick up the Tools defined in the notebook's namespace; returns problems to show."""
        if namespace is None:
            namespace = getattr(self.shell, "user_ns", None) or {}
        candidates: dict[str, list[tuple[str, Tool]]] = {}
        for var, value in list(namespace.items()):
            # type(value), never isinstance: that asks the object's __class__ (a dead weak
            # proxy raises ReferenceError, any object may pretend to be a Tool)
            if type(var) is not str or var.startswith("_") or not issubclass(type(value), Tool):
                continue
            if defined_in_notebook(value):
                candidates.setdefault(value.name, []).append((var, value))
        problems: list[str] = []
        with self._lock:
            seen = self._seen
            for name, found in candidates.items():
                new = [(var, v) for var, v in found if seen.get(var) is not v]
                if not new:
                    continue  # unchanged since the last cell: keep whatever is registered
                var, chosen = new[-1]
                try:
                    validate_tools([chosen])
                except NbagentError as exc:
                    note = ""
                    if name in self._from_namespace:
                        self._from_namespace.discard(name)
                        self.tools.pop(name, None)
                        note = " (its previous version was removed too)"
                    problems.append(f"tool {name!r} ({var}) was not registered{note}: {exc}")
                    continue
                if len({id(v) for _, v in found}) > 1:
                    names = ", ".join(v for v, _ in found)
                    problems.append(
                        f"several tools are named {name!r} ({names}); using the one in {var}"
                    )
                self.tools[name] = chosen
                self._take_from_mcp(name)
                self._from_namespace.add(name)
                self._explicit.discard(name)
                problems += self.provider_problems([chosen])
            self._seen = {var: v for found in candidates.values() for var, v in found}
            for name in list(self._from_namespace):
                if name not in candidates:
                    self._from_namespace.discard(name)
                    self.tools.pop(name, None)
        return problems

    # --- MCP servers (%agent mcp) ---------------------------------------------------------------

    def add_mcp_server(self, server: MCPServer) -> MCPServer | None:
        """Register ``server``'s tools, following its tool list from now on; returns the server
        of the same name it replaces (the caller closes that one)."""
        with self._lock:
            old = self.mcp_servers.get(server.name)
            self.mcp_servers[server.name] = server
            self._sync_mcp_tools(server.name, server.tools)
        server.on_change(self._mcp_tools_changed)
        return old

    def _mcp_tools_changed(self, server: MCPServer) -> None:
        """On the server's thread: its list changed (the next run sees the new tools)."""
        with self._lock:
            if self.mcp_servers.get(server.name) is server:
                self._sync_mcp_tools(server.name, server.tools)

    def _sync_mcp_tools(self, owner: str, tools: Iterable[Tool]) -> None:
        # A new dict, not an edit: a reader iterating over the old one (sync_agent, a report)
        # on the kernel's thread is never disturbed by a change arriving on the server's.
        registry = dict(self.tools)
        for name in [n for n, o in self._mcp_tools.items() if o == owner]:
            del self._mcp_tools[name]
            registry.pop(name, None)
        shadowed: list[str] = []
        for item in tools:
            if item.name in registry:  # a tool of the notebook's: the person's own tool wins
                shadowed.append(item.name)
                continue
            registry[item.name] = item
            self._mcp_tools[item.name] = owner
        if shadowed:
            self.mcp_shadowed[owner] = tuple(shadowed)
        else:
            self.mcp_shadowed.pop(owner, None)
        self.tools = registry

    def _take_from_mcp(self, name: str) -> None:
        """A tool of the person's now holds ``name``: the MCP tool of that name is left out
        (and said so), so its server's changes and removal never touch the person's tool."""
        owner = self._mcp_tools.pop(name, None)
        if owner is not None:
            self.mcp_shadowed[owner] = (*self.mcp_shadowed.get(owner, ()), name)

    def remove_mcp_server(self, name: str) -> MCPServer | None:
        """Stop the server ``name`` and drop its tools; returns it (None if there was none)."""
        with self._lock:
            server = self.mcp_servers.pop(name, None)
            if server is not None:
                self._sync_mcp_tools(name, ())
        if server is not None:
            server.close()
        return server

    def close_mcp_servers(self) -> None:
        """Stop every MCP server of the session, side by side (kernel shutdown, unload_ext)."""
        with self._lock:
            servers = list(self.mcp_servers.values())
            for name in list(self.mcp_servers):
                self._sync_mcp_tools(name, ())
            self.mcp_servers.clear()
        if servers:
            from ...mcp import close_servers

            close_servers(servers)

    # --- runs -----------------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self.active is not None

    def submit(self, job: Job) -> bool:
        """Start ``job``, or queue it behind the run in progress; True when it was queued.

        One rule for every run, whatever its approval policy: runs never interleave, a run asked
        for while another goes on waits for it. A job run in its cell starts when its cell
        awaits it (:meth:`Job.run_in_cell`); the others start here.
        """
        with self._lock:
            self.jobs.append(job)
            del self.jobs[: max(0, len(self.jobs) - _KEEP_JOBS)]
            queued = self.active is not None
            if queued:
                assert self.active is not None
                self.queue.append(job)
                set_status = getattr(job.view, "set_status", None)
                if callable(set_status):
                    set_status(f"queued: starts when {self.active.label} ends")
            else:
                self.active = job
        if job.mode == "background":
            self._arm_interrupt()
        if not queued:
            if job.mode == "background":
                job.start_background()
            elif job.mode == "foreground":
                job.run_foreground()
        return queued

    # --- Kernel > Interrupt for runs that no cell awaits ----------------------------------------

    def _arm_interrupt(self) -> None:
        """While background runs exist, a SIGINT to the idle kernel stops them.

        An idle kernel ignores SIGINT. While a cell runs, ipykernel has its own handler in place
        and puts back the one it saved (``kernel.saved_sigint_handler``) when the cell ends, so
        from inside a cell this handler goes there; from outside a cell, straight in.
        """
        import signal

        if threading.current_thread() is not threading.main_thread() or self._saved_sigint:
            return
        loop = kernel_loop()

        def interrupted(_signum: int, _frame: Any) -> None:
            loop.call_soon_threadsafe(self._interrupt_background)

        kernel = getattr(self.shell, "kernel", None)
        in_cell = signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
        if in_cell and kernel is not None and hasattr(kernel, "saved_sigint_handler"):
            self._saved_sigint = ["kernel", kernel.saved_sigint_handler, interrupted]
            kernel.saved_sigint_handler = interrupted
            return
        try:
            previous = signal.signal(signal.SIGINT, interrupted)
        except (ValueError, RuntimeError):  # not the main thread of the main interpreter
            return
        self._saved_sigint = ["signal", previous, interrupted]

    def _disarm_interrupt(self) -> None:
        import signal

        if not self._saved_sigint or threading.current_thread() is not threading.main_thread():
            return
        where, previous, ours = self._saved_sigint
        self._saved_sigint = []
        kernel = getattr(self.shell, "kernel", None)
        if kernel is not None and getattr(kernel, "saved_sigint_handler", None) is ours:
            kernel.saved_sigint_handler = previous
        if signal.getsignal(signal.SIGINT) is ours:
            signal.signal(signal.SIGINT, previous if where == "signal" else signal.SIG_IGN)

    def _interrupt_background(self) -> None:
        with self._lock:
            targets = [
                j
                for j in [self.active, *self.queue]
                if j is not None and j.mode == "background" and not j.done
            ]
        for job in reversed(targets):
            job.cancel()

    def job_ended(self, job: Job) -> None:
        """Called by every job at its end: start the next queued one."""
        with self._lock:
            if self._closing:
                return
            if job in self.queue:
                self.queue.remove(job)
            if self.active is not job:
                return
            self.active = None
            while self.queue:
                nxt = self.queue.popleft()
                if not nxt.done:
                    self.active = nxt
                    break
            else:
                self._disarm_interrupt()
                return
        if nxt.mode == "cell":
            nxt.your_turn()
        else:  # a queued foreground job runs in the background: its cell has ended
            nxt.mode = "background"
            nxt.start_background()

    def shutdown(self, reason: str = "the kernel shut down before the run ended") -> None:
        """The kernel is going away: every live run becomes a finished output saying why (its
        loop will not run again), so that a notebook saved afterwards shows no live widget."""
        with self._lock:
            self._closing = True
            targets = [j for j in self.jobs if not j.done]
            self.queue.clear()
        for job in targets:
            transcript = getattr(job.view, "transcript", None)
            if transcript is not None and transcript.error is None:
                transcript.error = reason
            job.cancel()
            job.abandon()
        if self.served is not None:  # %agent serve: its server and waiting calls end too
            self.served.stop("the kernel shut down")
        self.close_mcp_servers()
        flush_iopub(self.shell)

    def stop(self) -> int:
        """Cancel the running run and everything queued; returns how many were stopped."""
        with self._lock:
            targets = [j for j in [self.active, *self.queue] if j is not None and not j.done]
        for job in reversed(targets):
            job.cancel()
        return len(targets)

    def tool_list(self) -> Iterable[Tool]:
        return list(self.tools.values())
