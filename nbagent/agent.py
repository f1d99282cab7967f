"""The Agent: a model, tools, instructions and a conversation, and the ways to run it.

Each run (see :mod:`nbagent.loop.run`) streams :mod:`nbagent.events` to whoever listens.
:meth:`Agent.run` and :meth:`Agent.run_sync` return the result, and raise
:class:`~nbagent.errors.RunFailedError` when the run failed, so that a failure in a script never
looks like an empty answer; :meth:`Agent.run_sync` works in a script and inside a running event
loop (a Jupyter kernel), running the loop on a worker thread.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any

from ._ground.threads import run_on_worker_loop
from ._history import checked_history, prompt_for_history
from .approvals.approval import Approver, DenyAll
from .approvals.hooks import AfterToolHook, BeforeToolHook
from .content import Part
from .errors import (
    AgentError,
    NbagentError,
    RunFailedError,
    RunInProgressError,
    ToolDefinitionError,
    raised_to_caller,
)
from .events import AgentEvent, RunResult
from .generation import Generator, Options, Request
from .limits import Budget, Limits
from .loop.run import Run, _as_user_message
from .messages import Message, ToolMessage, UserMessage
from .output import DEFAULT_TRIES, typed_answer
from .tools import Tool, validate_tools

__all__ = ["Agent", "Run"]

#: Makes "is this agent idle? then it is mine" one step, for runs started from several threads
#: (``run_sync`` from a thread pool): held for a check and an assignment only, so one for all.
_CLAIM = threading.Lock()


class Agent:
    """A model, tools, instructions and a conversation; runs the validated tool loop.

    Every tool schema is compiled here: a bad schema fails now, not mid-run. ``model`` is a
    :class:`~nbagent.generation.Generator`, a model string such as ``"openai:gpt-4.1-mini"`` or
    ``"offline"``, or ``None`` (``NBAGENT_MODEL``, else the offline model). Calls that need
    approval go to ``approver`` (default: deny, saying that nobody was asked); one that gets no
    decision within ``approval_timeout`` seconds (None: wait forever) is denied, and the run
    goes on. ``limits`` bounds what a model may send and what a tool result may give back
    (:class:`~nbagent.limits.Limits`). Images in ``messages`` are decode-checked.

    ``before_tool`` / ``after_tool`` hooks (see :mod:`nbagent.approvals.hooks`; add more later with
    the decorators :meth:`before_tool` and :meth:`after_tool`) may veto a call, rewrite its
    arguments, or rewrite the result the model reads; each gets ``hook_timeout`` seconds, and
    so does a tool's ``needs_approval`` function (one that fails or overruns denies the call). A
    tool's preview gets ``preview_timeout`` seconds. When the model's provider has rules for
    tool schemas (OpenAI, Anthropic), a tool it would reject is reported at once as a
    :class:`~nbagent.providers.ToolSchemaWarning`, not at the first request.
    """

    def __init__(
        self,
        model: Generator | str | None = None,
        tools: Iterable[Tool | Agent] = (),
        *,
        instructions: str | None = None,
        approver: Approver | None = None,
        max_steps: int = 20,
        options: Options | None = None,
        tool_timeout: float | None = None,
        max_concurrency: int | None = None,
        messages: Iterable[Message] = (),
        limits: Limits | None = None,
        approval_timeout: float | None = None,
        budget: Budget | None = None,
        before_tool: Iterable[BeforeToolHook] = (),
        after_tool: Iterable[AfterToolHook] = (),
        hook_timeout: float | None = 30.0,
        preview_timeout: float | None = 10.0,
        name: str | None = None,
        description: str | None = None,
    ) -> None:
        if isinstance(model, str) or model is None:
            from .providers import resolve_generator

            self.generator: Generator = resolve_generator(model)
        else:
            self.generator = model
        #: The agent's name and what it does, for when it is another agent's tool (as_tool).
        self.name = name
        self.description = description
        tool_list = [_as_tool(t) for t in tools]
        self._schemas = validate_tools(tool_list)
        self.tools: dict[str, Tool] = {t.name: t for t in tool_list}
        self.instructions = instructions
        self.approver: Approver = approver or DenyAll(
            "denied: this agent has no approver, so nobody could approve the call"
        )
        if max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        self.max_steps = max_steps
        self.options = options or Options()
        self.tool_timeout = tool_timeout
        if max_concurrency is not None and max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self.max_concurrency = max_concurrency
        if approval_timeout is not None and not approval_timeout > 0:
            raise ValueError("approval_timeout must be a positive number of seconds, or None")
        self.approval_timeout = approval_timeout
        for name, value in (("hook_timeout", hook_timeout), ("preview_timeout", preview_timeout)):
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be a positive number of seconds, or None")
        self.hook_timeout = hook_timeout
        self.preview_timeout = preview_timeout
        self.before_tool_hooks: list[BeforeToolHook] = [_hook(h) for h in before_tool]
        self.after_tool_hooks: list[AfterToolHook] = [_hook(h) for h in after_tool]
        self.limits = limits or Limits()
        self.budget = budget
        self.messages: list[Message] = checked_history(list(messages))
        #: Names this conversation, for traces and logs: a random id, unique across kernels,
        #: processes and machines, the same for every run of it; :meth:`reset` and :meth:`fork`
        #: begin a new one.
        self.conversation_id = _new_conversation_id()
        #: Called with every event of every run, as it happens (telemetry, logs); an observer
        #: that raises is logged and never breaks the run. See :meth:`observe`.
        self.observers: list[Callable[[str, AgentEvent], Any]] = []
        self._running = False
        _warn_rejected(self.generator, tool_list)

    # --- hooks ------------------------------------------------------------------------------

    def before_tool(self, hook: BeforeToolHook) -> BeforeToolHook:
        """Add a before-tool hook (usable as a decorator); see :mod:`nbagent.approvals.hooks`."""
        self.before_tool_hooks.append(_hook(hook))
        return hook

    def after_tool(self, hook: AfterToolHook) -> AfterToolHook:
        """Add an after-tool hook (usable as a decorator); see :mod:`nbagent.approvals.hooks`."""
        self.after_tool_hooks.append(_hook(hook))
        return hook

    # --- conversation -----------------------------------------------------------------------

    def reset(self) -> None:
        """Forget the conversation (tools and settings stay)."""
        self._check_idle()
        self.messages.clear()
        self.conversation_id = _new_conversation_id()

    def fork(
        self,
        source: Any = None,
        step: int | None = None,
        *,
        model: Generator | str | None = None,
        tools: Iterable[Tool] | None = None,
        instructions: str | None = None,
    ) -> Agent:
        """A new agent with the same tools and settings and a copy of the conversation; the
        original is untouched.

        With a ``source`` run (a :class:`~nbagent.events.RunResult` or a live :class:`Run`) and
        a ``step``, the copy's conversation is that run's as the model saw it at that step (the
        messages of its request): ``await forked.run(None)`` asks the model that step again,
        ``await forked.run("try the cache")`` adds a prompt. ``model`` (a string or a
        Generator), ``tools`` (replace the tool set: another set, or other implementations) and
        ``instructions`` change the copy only. See :func:`nbagent.inspection.fork.fork_history`.
        """
        from .inspection.fork import fork_history

        twin = Agent.__new__(Agent)
        twin.__dict__.update(self.__dict__)
        twin.tools = dict(self.tools)
        twin.messages = list(self.messages)
        if source is not None:
            twin.messages = fork_history(source, step)
        elif step is not None:
            raise AgentError("fork(step=...) needs the run to fork: agent.fork(result, step)")
        if model is not None:
            if isinstance(model, str):
                from .providers import resolve_generator

                twin.generator = resolve_generator(model)
            else:
                twin.generator = model
        if tools is not None:
            tool_list = [_as_tool(t) for t in tools]
            twin._schemas = validate_tools(tool_list)
            twin.tools = {t.name: t for t in tool_list}
        if instructions is not None:
            twin.instructions = instructions
        if source is not None and tools is None:
            from .inspection.fork import tools_missing

            gone = tools_missing(twin.messages, twin.tools)
            if gone:
                raise AgentError(
                    f"the run used tools this agent no longer has ({', '.join(gone)}): give "
                    "tools=[...] to fork onto another tool set"
                )
        if source is not None:
            from .loop._stepmode import history_problem

            probe = Request(
                twin.messages,
                getattr(twin.generator, "model", ""),
                tuple(t.definition for t in twin.tools.values()),
                twin.instructions,
                twin.options,
            )
            problem = history_problem(twin.generator, probe)
            if problem:
                name = getattr(twin.generator, "model", "") or type(twin.generator).__name__
                raise AgentError(f"cannot fork at step {step} onto {name}: {problem}")
        twin.conversation_id = _new_conversation_id()  # the copy goes its own way
        twin.observers = list(self.observers)
        twin.before_tool_hooks = list(self.before_tool_hooks)
        twin.after_tool_hooks = list(self.after_tool_hooks)
        twin._running = False
        return twin

    def remove_tool(self, name: str) -> None:
        """Unregister a tool by name (no error if there is none)."""
        self._check_idle()
        self.tools = {k: v for k, v in self.tools.items() if k != name}
        self._schemas = {k: v for k, v in self._schemas.items() if k != name}

    def add_tool(self, new: Tool | Agent) -> None:
        """Register (or replace, by name) one tool, or an agent as one (:meth:`as_tool`); its
        schema is compiled now."""
        made: Tool = _as_tool(new)
        compiled = validate_tools([made])  # only the new tool: the others are already checked
        tools, schemas = dict(self.tools), dict(self._schemas)
        tools[made.name] = made
        schemas.update(compiled)
        self.tools, self._schemas = tools, schemas
        _warn_rejected(self.generator, [made])

    def as_tool(
        self,
        *,
        name: str | None = None,
        description: str | None = None,
        input: Any = None,
        output: Any = None,
        max_steps: int | None = None,
        max_depth: int = 4,
        needs_approval: bool = False,
        timeout: float | None = None,
    ) -> Tool:
        """This agent as a tool of another: the call's prompt (or ``input``, a type whose JSON
        is the prompt) runs it in a conversation of its own, and its answer (its typed
        ``output``, as JSON, when given) is the result. The caller's stop, budget, timeouts and
        approver reach it; helpers nest at most ``max_depth`` deep. See :mod:`nbagent.delegation`.
        ``name`` / ``description`` default to the agent's own."""
        from .delegation import agent_tool

        called = name or self.name
        if not called:
            raise ToolDefinitionError(
                "an agent used as a tool needs a name: agent.as_tool(name=...), or "
                "Agent(..., name=...)"
            )
        said = description or self.description or self.instructions or f"Ask the agent {called}."
        return agent_tool(
            self,
            name=called,
            description=said,
            input=input,
            output=output,
            max_steps=max_steps,
            max_depth=max_depth,
            needs_approval=needs_approval,
            timeout=timeout,
        )

    def observe(self, observer: Callable[[str, AgentEvent], Any]) -> Callable[[], None]:
        """Call ``observer(run_id, event)`` for every event of every later run, as it happens
        (even when nobody reads the run's events, as in :meth:`run`). Returns a function that
        stops it. Observers run on the run's loop: keep them quick."""
        self.observers.append(observer)

        def stop() -> None:
            if observer in self.observers:
                self.observers.remove(observer)

        return stop

    def _check_idle(self) -> None:
        if self._running:
            raise RunInProgressError(
                "this agent is already running: wait for the run to end or cancel it first "
                "(agent.fork() gives a second conversation). A loop over agent.stream(...) "
                "left with break ends its run only once the iterator is closed: loop over "
                "contextlib.aclosing(agent.stream(...))"
            )

    # --- running ----------------------------------------------------------------------------

    def start(
        self,
        prompt: str | UserMessage | Sequence[str | Part] | None,
        *,
        approver: Approver | None = None,
        max_steps: int | None = None,
        tools: Iterable[str] | None = None,
        options: Options | None = None,
        budget: Budget | None = None,
        step: bool = False,
        output: Any = None,
        output_tries: int = DEFAULT_TRIES,
        output_mode: str = "auto",
    ) -> Run:
        """Start a run as a task on the running loop and return its :class:`Run` handle.

        ``output``: a Python type or JSON Schema the run must answer with; the validated value
        is ``result.output`` (see :mod:`nbagent.output`). An answer that does not fit goes back
        to the model, up to ``output_tries`` answers in all, then the run fails with
        :class:`~nbagent.errors.OutputInvalidError`. ``output_mode``: "auto" (the provider's
        strict structured output where it has one, else a final-answer tool), "native" or
        "tool". A type that cannot be an answer raises :class:`~nbagent.errors.OutputTypeError`
        before any request.

        Raises :class:`~nbagent.errors.ImageError` for a prompt image that does not decode.
        A failed run is reported as the ``RunFailed`` event (and ``stop_reason="failed"``).
        ``prompt=None`` asks the model about the conversation as it is (a fork that re-asks a
        step): it must end with a prompt or tool results. ``step=True``: step mode, a pause
        before each model request and each batch of calls (see :mod:`nbagent.inspection.stepping`);
        the run's approver must be able to pause (an AgentError says so otherwise).
        """
        self._check_idle()
        chosen_approver = approver or self.approver
        if step and getattr(chosen_approver, "pause", None) is None:
            raise AgentError(
                f"step mode needs an approver that can pause (InteractiveApprover, "
                f"ScriptedApprover(pauses=...), or one with a pause method); "
                f"{type(chosen_approver).__name__} cannot, so nobody could click Next"
            )
        if prompt is None and not (
            self.messages and isinstance(self.messages[-1], (UserMessage, ToolMessage))
        ):
            raise AgentError(
                "nothing to answer: without a prompt the conversation must end with one, or "
                "with tool results (give a prompt)"
            )
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise AgentError(
                "Agent.start needs a running event loop: in a script use agent.run_sync(...), "
                "in async code await agent.run(...)"
            ) from None
        if tools is not None:
            names = list(tools)
            unknown = [n for n in names if n not in self.tools]
            if unknown:
                raise AgentError(f"unknown tools {unknown}; registered: {sorted(self.tools)}")
            chosen = {n: self.tools[n] for n in names}
        else:
            chosen = dict(self.tools)
        answer = None
        if output is not None:
            answer = typed_answer(
                output, self.generator, chosen, tries=output_tries, mode=output_mode
            )
        message = prompt_for_history(_as_user_message(prompt if prompt is not None else ""))
        with _CLAIM:  # another thread may have started a run since the check above
            self._check_idle()
            self._running = True
        try:
            run = Run(
                self,
                message,
                chosen_approver,
                max_steps or self.max_steps,
                chosen,
                options or self.options,
                budget or self.budget,
                step=step,
                continuing=prompt is None,
                answer=answer,
            )
            run._start()
        except BaseException:
            self._running = False  # no task exists to end the run and free the agent
            raise
        return run

    async def stream(
        self, prompt: str | UserMessage | Sequence[str | Part], **kwargs: Any
    ) -> AsyncIterator[AgentEvent]:
        """Run and yield every event; a failure is the ``RunFailed`` event, never an exception
        (but a tool's ``KeyboardInterrupt`` / ``SystemExit`` is re-raised after that event).

        Closing the iterator early cancels the run cleanly: wrap it in
        ``contextlib.aclosing(...)`` when you may ``break`` out of the loop."""
        run = self.start(prompt, **kwargs)
        try:
            async for event in run.events():
                yield event
        finally:
            if run._task is not None and not run._task.done():
                run.cancel()
                await asyncio.wait({run._task})
        _reraise_stop(run.final)

    async def run(
        self,
        prompt: str | UserMessage | Sequence[str | Part] | None,
        *,
        raise_on_error: bool = True,
        **kwargs: Any,
    ) -> RunResult:
        """Run to the end and return the :class:`~nbagent.events.RunResult`.

        A run that failed (the provider refused the key, the stream broke …) raises
        :class:`~nbagent.errors.RunFailedError`, carrying the partial result as ``.result`` and
        the cause as ``.error`` / ``__cause__``; with ``raise_on_error=False`` it is returned
        with ``stop_reason="failed"`` instead. Runs that stop for other reasons ("finished",
        "terminated", "max_steps", "length", "budget", "repeated_call", "cancelled") return their
        result. A tool or callback that raised ``KeyboardInterrupt`` or ``SystemExit`` stops
        the run; once every call is answered, that exception itself is re-raised (whatever
        ``raise_on_error`` says), so Ctrl-C and ``sys.exit()`` keep their meaning. Other
        keywords go to :meth:`start`.
        """
        run = self.start(prompt, **kwargs)
        run.discard_events()
        return _outcome(await run.result(), raise_on_error)

    def run_sync(
        self,
        prompt: str | UserMessage | Sequence[str | Part] | None,
        *,
        raise_on_error: bool = True,
        **kwargs: Any,
    ) -> RunResult:
        """Run to the end, blocking; works in a script and inside a running loop (Jupyter).

        Like :meth:`run`: a failed run raises :class:`~nbagent.errors.RunFailedError` unless
        ``raise_on_error=False``, and a tool's ``KeyboardInterrupt`` / ``SystemExit`` is
        re-raised once the run ended. The run happens on a worker thread with its own event loop
        (copying the current context, so notebook output lands in the calling cell); Ctrl-C /
        a kernel interrupt cancels the run cleanly and re-raises KeyboardInterrupt. A tool
        function that ignores cancellation is abandoned, never waited for: this returns, and the
        interpreter can exit.
        """
        try:
            result = run_on_worker_loop(lambda: self.run(prompt, raise_on_error=False, **kwargs))
        except asyncio.CancelledError:
            raise NbagentError("the run was cancelled") from None
        return _outcome(result, raise_on_error)  # raised here, on the caller's thread

    # --- many runs ----------------------------------------------------------------------------

    async def map(self, inputs: Any, template: str | None = None, **options: Any) -> Any:
        """Run once per input and return a pandas DataFrame, one row per input (see
        docs/howto/batch.md).

        ``inputs``: prompt strings, or a DataFrame whose rows fill ``template``
        (``"Grade {answer} against {key}"``). Rows keep the inputs' order and index; columns:
        prompt, status ("done", "failed", "cancelled", "not run"), text, output (with
        ``output=``), steps, tokens, seconds, stop_reason, error, attempts, result (the
        :class:`~nbagent.events.RunResult`). A failed run is a row with its error, never an
        exception. Each run has a conversation of its own (``keep_history=True``: a copy of
        this agent's); this agent is left untouched. Options:

        ``concurrency`` (8) runs at once; ``max_steps``, ``timeout`` (seconds) per run;
        ``approver``: "auto", "deny" or a non-interactive Approver (default: this agent's; one
        that asks a person is refused); ``output``: a JSON Schema or Python type each run must
        answer with (the ``output`` column); ``checkpoint``: a JSON-lines file that gets each
        finished row and, when it exists, is resumed from; ``resume``: an earlier results table
        (done rows are kept, the rest run); ``retries`` (3) / ``retry_delay`` (2 s) for runs
        that failed on a busy provider (429, 5xx); ``engine``: a ``dask.distributed.Client``;
        ``model``: a model string for this batch (what Dask workers build their model from);
        ``tools``, ``options``; ``progress``: "auto", None or a callable given
        :class:`~nbagent.batch.BatchProgress` snapshots; ``budget``: a
        :class:`~nbagent.Budget` for the whole map, every row and its helpers together (each
        request reserves from it before it is sent; rows it can no longer pay for are "not
        run", saying why), while this agent's own ``budget`` bounds each row's run. Bad
        inputs (a template naming a missing column …) raise
        :class:`~nbagent.errors.BatchInputError` before any run.
        """
        from .batch import Batch

        return await Batch(self, inputs, template, **options).result()

    def map_sync(self, inputs: Any, template: str | None = None, **options: Any) -> Any:
        """:meth:`map`, blocking; works in a script and inside a running loop (Jupyter).

        Ctrl-C (a kernel interrupt) stops the batch and raises
        :class:`~nbagent.batch.BatchInterrupted`, a ``KeyboardInterrupt`` whose ``table``
        holds every row finished before it.
        """
        from .batch import Batch, BatchInterrupted

        batch = Batch(self, inputs, template, **options)

        def stop() -> None:
            batch.cancel()

        try:
            return run_on_worker_loop(batch.result, on_interrupt=stop)
        except KeyboardInterrupt:
            raise BatchInterrupted("the batch was interrupted", batch.table()) from None


def _outcome(result: RunResult, raise_on_error: bool) -> RunResult:
    """The result of :meth:`Agent.run` / :meth:`Agent.run_sync`, or what they raise instead."""
    _reraise_stop(result)
    if raise_on_error and result.stop_reason == "failed":
        raise RunFailedError(result) from result.error
    return result


def _reraise_stop(result: RunResult | None) -> None:
    """Re-raise a tool's ``KeyboardInterrupt`` / ``SystemExit`` once the run ended.

    Inside the run such an exception only stops it (through the event loop it would break the
    loop, and in a kernel the kernel); once every call is answered, the script that called
    :meth:`Agent.run` gets what Ctrl-C or ``sys.exit()`` mean, whatever ``raise_on_error`` says.
    """
    raised = raised_to_caller(result.error if result is not None else None)
    if raised is not None:
        raise raised


def _as_tool(item: Any) -> Any:
    """An Agent where a tool goes is that agent as a tool (by its own name and description)."""
    return item.as_tool() if isinstance(item, Agent) else item


def _new_conversation_id() -> str:
    return f"conv_{uuid.uuid4().hex}"


def _hook(fn: Any) -> Any:
    if not callable(fn):
        raise TypeError(f"a hook must be a function, not {type(fn).__name__}")
    return fn


def _warn_rejected(generator: Generator, tools: Sequence[Tool]) -> None:
    """Warn now about tools the model's provider would reject (see ``tool_rules``)."""
    rules = getattr(generator, "tool_rules", None)
    if not isinstance(rules, str) or not tools:
        return
    import warnings

    from .providers import ToolSchemaWarning, preflight

    for item in tools:
        for problem in preflight(item, rules):
            warnings.warn(ToolSchemaWarning(problem.message), stacklevel=3)
