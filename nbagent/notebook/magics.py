"""The ``%agent`` line magic and ``%%agent`` cell magic: options, subcommands, and each run's plan.

A run is planned once (model, tools, approval policy, view, where it runs) and then either awaited
by its cell (the usual case: see :mod:`.cells`), started in the background, or run on a worker
thread while the cell blocks (see :mod:`.runner` for when each applies).
"""

from __future__ import annotations

import keyword
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import (
    Magics,
    line_cell_magic,
    magics_class,
    needs_local_scope,
    no_var_expand,
)

from ..approvals.approval import InteractiveApprover
from ..approvals.rules import RuleApprover
from ..errors import NbagentError
from ..limits import Budget
from . import commands
from .command.helptext import HELP
from .command.options import interpolate as interpolate
from .command.options import parser, run_options, split_at_options
from .command.options import split_options as split_options
from .core.continuation import first_note
from .core.frontend import (
    approver_for,
    choose_policy,
    detect,
    widgets_available,
)
from .core.recordings import RecordMode, choose, first_request, model_configured, offer_again
from .core.runner import Job, PendingRun
from .core.session import KERNEL_TOOLS, show_problems
from .editing.tools import NOTEBOOK_AUTO, NOTEBOOK_TOOLS, use_notebook
from .editing.undo import offer_undo as offer_notebook_undo
from .external import acprun
from .live import outputs
from .live.outputs import View
from .modes import run_mode
from .policy import courseadmit, courserecord
from .toolkit import kernelview

if TYPE_CHECKING:
    from ..agent import Agent
    from ..events import RunResult
    from ..recording import Pace
    from .core.recordings import Choice
    from .core.session import Session

__all__ = ["HELP", "KERNEL_TOOLS", "AgentMagics", "interpolate", "split_options"]


def _fork_label(plan: _Plan) -> str:
    """What a run with no prompt is (a fork that asks a step again)."""
    if plan.reoffer:
        return "(a continued conversation: the calls left waiting for approval are asked again)"
    if plan.fork is None:
        return ""
    run_id, step = plan.fork
    return f"(a fork of {run_id} at step {step}: the model is asked that step again)"


def _load_model(generator: object) -> None:
    """Load a model that loads once per kernel (``local:``) now, saying so in the cell."""
    load = getattr(generator, "load", None)
    if not callable(load) or getattr(generator, "loaded", True):
        return
    note = getattr(generator, "loading_note", None)
    if callable(note):
        outputs.note(str(note()))
    outputs.note(str(load()))


def _budget(tokens: int | None) -> Budget | None:
    return Budget(tokens=tokens) if tokens else None


@dataclass
class _Plan:
    """One parsed request: the prompt and its options."""

    prompt: str
    model: str | None
    new: bool
    output: str | None
    approve: str | None
    max_steps: int | None
    tools: list[str] | None
    recording: RecordMode = "auto"
    pace: str | None = None
    budget: int | None = None
    kernel: bool = False
    step: bool = False
    fork: tuple[str, int] | None = None  # run id, step
    output_type: Any = None  # --output: the type the run answers with
    course: Any = None  # what the course policy granted (coursegate.Granted)
    notebook: bool | str = False  # --notebook (True), or --notebook=NAME (a variable's name)
    reoffer: bool = False  # --continue: a run that offers the calls left waiting again
    acp: str | None = None  # --acp NAME: the external agent that answers (see .external)


@magics_class
class AgentMagics(Magics):
    """``%agent`` and ``%%agent``: ask the model, watch the run, approve its calls."""

    _by_session: dict[int, AgentMagics] = {}  # noqa: RUF012 - one instance per session

    def __init__(self, shell: Any, session: Session) -> None:
        super().__init__(shell)
        self.session = session
        AgentMagics._by_session[id(session)] = self

    @classmethod
    def for_session(cls, session: Session) -> AgentMagics:
        """The magics object registered for ``session`` (made if the extension is not loaded)."""
        found = cls._by_session.get(id(session))
        if found is None or found.session is not session:
            found = cls(session.shell, session)
        return found

    @no_var_expand
    @needs_local_scope
    @line_cell_magic
    def agent(
        self, line: str, cell: str | None = None, local_ns: dict[str, Any] | None = None
    ) -> Any:
        # IPython shows this docstring for `%agent?`: it is set from HELP below.
        found = self._subcommand(line, cell)
        if found is not None and found[0].run is not None:
            return self._run_command(*found)  # a map's table (None for the others)
        self.run_line(line, cell, local_ns)
        return None  # a bare `%agent` echoes nothing; `x = %agent` gets run_line's value

    agent.__doc__ = HELP

    def run_line(
        self, line: str, cell: str | None = None, local_ns: dict[str, Any] | None = None
    ) -> RunResult | PendingRun | Any:
        """The form that is not awaited: run (or start, in the background) and return the
        result, a :class:`PendingRun` for a background run, a subcommand's value (a map's
        table; None for the others). ``local_ns``: the caller's variables, for ``{name}`` in a
        prompt inside a function."""
        found = self._subcommand(line, cell)
        if found is not None and found[0].run is not None:
            return self._run_command(*found)
        plan = self._parse(line, cell, local_ns, found)
        if plan is None or not self._admit(plan):
            return None
        job, pending = self._job(plan, awaited=False)
        self.session.submit(job)
        return pending if pending is not None else job.result

    async def run_awaited(self, line: str, cell: str | None) -> RunResult | PendingRun | Any:
        """The awaited form (see :mod:`.cells`): returns when the run ended, with its result."""
        __tracebackhide__ = True  # see agent_cell
        found = self._subcommand(line, cell)
        if found is not None and found[0].run is not None:
            command, words = found
            if command.awaited is None:
                return self._run_command(command, words)
            if command.scan:
                show_problems(self.session.scan())
            return await command.awaited(self.session, self.shell, words)
        plan = self._parse(line, cell, None, found)
        if plan is None or not self._admit(plan):
            return None
        job, output = self._job(plan, awaited=True)
        queued = self.session.submit(job)
        if job.mode != "cell":
            return output
        return await job.run_in_cell(queued)

    def _admit(self, plan: _Plan) -> bool:
        """The course policy's word on a planned run (refused: shown, with its record)."""
        if plan.acp is not None:
            return acprun.admit(self.session, self.shell, plan)
        return courseadmit.admit(self.session, self.shell, plan)

    # --- parsing ------------------------------------------------------------------------------

    def _subcommand(self, line: str, cell: str | None) -> tuple[commands.Command, list[str]] | None:
        """The subcommand the line is (see :mod:`.grammar`), a cell's body added for one that
        takes it; None for a prompt. A subcommand in none of its forms, or given a body it does
        not take, raises UsageError: it is never sent as a prompt."""
        found = commands.find(line)
        if found is None:
            return None
        command, words = found
        body = cell.strip() if cell is not None else ""
        if body:
            name = line.split(None, 1)[0]
            if not command.body:
                raise UsageError(
                    f"%agent {name} takes no cell body; nothing was sent to the model. To ask "
                    f"the model, put -- first: %%agent -- {' '.join(line.split())}"
                )
            words = [*words, body]
        return command, words

    def _run_command(self, command: commands.Command, words: list[str]) -> Any:
        assert command.run is not None
        if command.scan:
            show_problems(self.session.scan())
        return command.run(self.session, self.shell, words)

    def _parse(
        self,
        line: str,
        cell: str | None,
        local_ns: dict[str, Any] | None = None,
        found: tuple[commands.Command, list[str]] | None = None,
    ) -> _Plan | None:
        """The run a line asks for: a prompt with its options, or a fork (``found``: the
        subcommand the line is, when it is ``fork``); None when it only changes a setting."""
        fork: tuple[str, int] | None = None
        if found is not None:  # fork RUN STEP [options] [PROMPT] (a cell's body: the prompt)
            words = found[1]
            fork = (words[0], int(words[1]))
            line, cell = words[2], (words[3] if len(words) > 3 else None)
        tokens, rest, ended = split_at_options(line)
        args = parser().parse_args(tokens)
        if args.acp is not None:
            if fork is not None:
                raise UsageError("a fork asks nbagent's own model again: --acp does not apply")
            acprun.refuse_options(args)
        if fork is None and not ended:
            first = rest.split(None, 1)[0] if rest.strip() else ""
            if commands.is_subcommand(first):
                options = " ".join([*tokens, "--", rest.strip()])
                raise UsageError(
                    f"{first!r} is a subcommand, and comes first (see `%agent help {first}`); "
                    "nothing was sent to the model. To ask the model a prompt that starts with "
                    f"it, put -- before the prompt: %agent {options}"
                )
        prompt = rest.strip()
        if cell is not None and cell.strip():
            prompt = f"{prompt}\n{cell.strip()}" if prompt else cell.strip()
        if args.resume is not False and (args.new or fork is not None or args.acp is not None):
            raise UsageError(
                "--continue goes on with a saved conversation: not with --new, fork or --acp"
            )
        reoffer = False
        if args.resume is not False:
            self._use_model(args.model)  # the run's model: continuing checks it is the run's
            reoffer = self._continue(args.resume, with_prompt=bool(prompt))
            if not prompt and not reoffer:
                return None
        if not prompt and fork is None and not reoffer:
            if args.acp is not None and args.new and not run_options(args):
                acprun.new_conversation(self.session, args.acp)
                return None
            if (args.new or args.model) and not run_options(args):
                self._settings_only(args.model, new=args.new)
                return None
            raise UsageError("what should the agent do? `%agent PROMPT`, or see `%agent help`")
        if args.output is not None and (
            not args.output.isidentifier() or keyword.iskeyword(args.output)
        ):
            raise UsageError(f"-o needs a variable name, not {args.output!r}")
        if args.max_steps is not None and args.max_steps < 1:
            raise UsageError("--max-steps must be at least 1")
        if args.budget is not None and args.budget < 1:
            raise UsageError("--budget must be a positive number of tokens")
        tools = None
        if args.tools is not None:
            tools = [t.strip() for t in args.tools.split(",") if t.strip()]
        wanted = None
        if args.output_type is not None:
            from .command.outputtype import output_type

            wanted = output_type(args.output_type, {**self._namespace(), **(local_ns or {})})
        notebook = args.notebook
        if isinstance(notebook, str) and not notebook.isidentifier():
            raise UsageError(f"--notebook={notebook!r}: give the name of a variable")
        modes = [m for m in ("record", "replay", "live") if getattr(args, m)]
        if len(modes) > 1:
            raise UsageError(f"choose one of --record, --replay and --live, not {modes}")
        return _Plan(
            interpolate(prompt, {**self._namespace(), **(local_ns or {})}),
            args.model,
            args.new,
            args.output,
            args.approve,
            args.max_steps,
            tools,
            modes[0] if modes else "auto",  # type: ignore[arg-type]
            args.pace,
            args.budget,
            args.kernel,
            args.step,
            fork,
            wanted,
            notebook=notebook,
            reoffer=reoffer,
            acp=args.acp,
        )

    def _namespace(self) -> dict[str, Any]:
        shell = self.shell
        assert shell is not None
        namespace: dict[str, Any] = shell.user_ns
        return namespace

    def _use_model(self, model: str | None) -> None:
        """Set ``model`` (if given) and load the model now: a bad setting fails here, and a
        model that cannot load does not stay set."""
        session = self.session
        previous = session.model_spec
        try:
            if model:
                session.set_model(model)
            _load_model(session.generator)
        except NbagentError as exc:
            problem = str(exc)
        else:
            return
        if model:
            try:
                session.set_model(previous)
            except NbagentError:
                pass  # the previous setting fails too: the message below still holds
        raise UsageError(problem)

    def _continue(self, run_id: str | bool, *, with_prompt: bool) -> bool:
        """``--continue [RUN]``: rebuild the saved conversation and say so in one line; True
        when calls it left waiting for approval are to be offered again (by a run now)."""
        try:
            continued = self.session.continue_from(
                run_id if isinstance(run_id, str) else None, with_prompt=with_prompt
            )
        except ValueError as exc:
            raise UsageError(f"nothing was continued: {exc}") from None
        outputs.note(str(continued))
        return bool(continued.pending)

    def _settings_only(self, model: str | None, *, new: bool) -> None:
        """``%agent --new`` / ``%agent -m MODEL`` with no prompt: change that, ask nothing."""
        session = self.session
        if session.busy:
            raise UsageError(
                f"{session.active.label if session.active else 'a run'} is still going on: "
                "wait for it to end (or `%agent stop` it) before changing the conversation"
            )
        if model:
            self._use_model(model)
            print(f"model from now on: {model}")
        if new:
            session.agent.reset()
            session.continued = None
            print("new conversation: the next %agent starts afresh (tools and rules stay)")

    # --- planning a run -------------------------------------------------------------------------

    def _job(self, plan: _Plan, *, awaited: bool) -> tuple[Job, PendingRun | None]:
        """Check the request, choose approver, view and mode, show the view; nothing runs yet."""
        session = self.session
        if plan.acp is not None:
            return acprun.job(
                session,
                self.shell,
                plan,
                awaited=awaited,
                mode_for=lambda awaited, clicks: run_mode(self.shell, session, awaited, clicks),
                namespace=self._namespace,
            )
        show_problems(session.scan())
        unavailable = self._model_or_recording(plan)
        if plan.tools is not None:
            unknown = [t for t in plan.tools if t not in session.tools]
            if plan.kernel:
                unknown = [t for t in unknown if t not in KERNEL_TOOLS]
            if plan.notebook:
                unknown = [t for t in unknown if t not in NOTEBOOK_TOOLS]
            if unknown:
                known = ", ".join(sorted(session.tools)) or "none"
                raise UsageError(f"unknown tools {', '.join(unknown)}; registered: {known}")
        frontend = detect(self.shell)
        run_tools = kernelview.use_kernel(session, plan.tools, wanted=plan.kernel)
        run_tools = use_notebook(
            session, self.shell, run_tools, wanted=plan.notebook, frontend=frontend
        )
        waiting = session.continued
        if waiting is not None and not plan.reoffer:  # continued from Python: the call first
            if not (plan.new or plan.fork):
                names = ", ".join(waiting.continued.pending)
                raise UsageError(
                    f"the conversation continued from {waiting.continued.run_id} has its call to "
                    f"{names} waiting for approval: %agent --continue asks it again first (or "
                    "--new starts afresh)"
                )
            session.continued = None
        if plan.fork is None and not plan.new:  # (a continued conversation: nothing to say)
            line = first_note(session)
            if line:
                outputs.note(line)
        if plan.fork is not None:
            try:
                session.fork(*plan.fork, tools=run_tools)
            except (ValueError, NbagentError) as exc:
                raise UsageError(str(exc)) from None
        try:
            policy, source = choose_policy(plan.approve, frontend)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        asked = approver_for(policy, source, frontend, session.approver)
        needs_clicks = isinstance(asked, InteractiveApprover)
        approver = RuleApprover(session.rules, fallback=asked)  # the session's rules come first
        # the open page answers the notebook tools as a click does: where a cell cannot hear
        # clicks while it awaits, neither can it hear the page
        needs_page = plan.notebook is True and frontend.interactive
        mode, why = run_mode(self.shell, self.session, awaited, needs_clicks or needs_page)
        use_widgets = frontend.interactive and widgets_available()
        step = plan.step
        if step and not needs_clicks:
            why = frontend.reason if source == "default" else f"{source} says {policy}"
            outputs.note(
                f"--step: nobody can click Next here ({why}), so the run goes to the end "
                "without pausing"
            )
            step = False
        if plan.kernel and policy == "auto":
            warning = kernelview.warn_auto_once(session)
            if warning:
                outputs.note(warning)
        kit = session.notebook
        if plan.notebook and policy == "auto" and kit is not None and not kit.warned_auto:
            kit.warned_auto = True  # once per session, as for --kernel
            outputs.note(NOTEBOOK_AUTO)

        view: View
        holder: list[Job] = []
        if use_widgets:
            from .live.view import RunView

            view = RunView(
                plan.prompt or _fork_label(plan),
                approver=asked if needs_clicks else None,  # type: ignore[arg-type]
                on_stop=lambda: holder[0].cancel() if holder else None,
            )
        else:
            from .saved.textview import TextView

            view = TextView(plan.prompt or _fork_label(plan))
        output = plan.output
        pending: PendingRun | None = None

        def ended(job: Job) -> None:
            try:
                if output and job.result is not None:
                    namespace = self._namespace()
                    if mode != "background" or namespace.get(output) is pending:
                        namespace[output] = job.result
                outputs.run_ended(job.view, static_segments=mode != "background")
                run_id = job.run.id if job.run else None
                if plan.notebook and use_widgets:
                    offer_notebook_undo(session, run_id)  # its namespace changes too
                elif plan.kernel and use_widgets:
                    kernelview.offer_undo(session, run_id)
            finally:
                session.job_ended(job)

        job = Job(
            session.sync_agent,
            plan.prompt,
            view,
            approver=approver,
            mode=mode,
            max_steps=plan.max_steps,
            budget=plan.course.budget if plan.course else _budget(plan.budget),
            tools=run_tools,
            reset=plan.new and plan.fork is None,
            step=step,
            continuing=(plan.fork is not None or plan.reoffer) and not plan.prompt,
            output=plan.output_type,
            on_end=ended,
            on_record=lambda job: courserecord.finished(session, job, plan.course),
            model_for=self._model_for(plan, widgets=use_widgets, unavailable=unavailable),
        )
        holder.append(job)
        if mode == "background":
            pending = PendingRun(job)
            if output:
                self._namespace()[output] = pending
            outputs.note(
                f"This run goes on in the background: {why}. The next cells do not wait "
                f"for it{f'; {output} holds a pending result until it ends' if output else ''}."
            )
        if use_widgets:
            outputs.show_live(view, f"nbagent-{uuid.uuid4().hex}")
        return job, pending

    def _model_for(
        self, plan: _Plan, *, widgets: bool, unavailable: bool = False
    ) -> Callable[[Agent, str, list[str] | None], Choice]:
        """How the run gets its model: live, recorded or replayed (see :mod:`.recordings`).
        ``unavailable``: the run's model cannot be used here, and its recording replays."""
        store = self.session.recordings
        pace: Pace = plan.pace or ("readable" if widgets else "instant")  # type: ignore[assignment]
        mode: RecordMode = "replay" if unavailable else plan.recording
        replay_only = plan.course is not None and plan.course.replay_only

        def model_for(agent: Agent, prompt: str, tools: list[str] | None) -> Choice:
            configured = (
                not unavailable and not replay_only and model_configured(self.session.model_spec)
            )
            rebuilt, self.session.continued = self.session.continued, None
            if plan.reoffer and rebuilt is not None:  # its answer replays; then the model
                return offer_again(agent, rebuilt.recording, store, pace, configured)
            return choose(agent, prompt, tools, mode, store, pace, configured)

        return model_for

    def _model_or_recording(self, plan: _Plan) -> bool:
        """Load the run's model; True when it cannot be used here (no key, no server address)
        but the run has a recording, which then replays: a lesson whose cells name their model
        (``-m openai:…``) runs top to bottom where there is no key, as one that sets none does.
        Without a recording (or with ``--live`` / ``--record``) the model's problem is raised."""
        try:
            self._use_model(plan.model)
            self._tell_grammar()
        except UsageError as problem:
            if plan.recording in ("live", "record") or self.session.busy:
                raise
            try:
                agent = self.session.sync_agent()  # the tools this run will have
                request = first_request(agent, plan.prompt, plan.tools, fresh=plan.new)
            except (NbagentError, KeyError):  # no conversation to look up, an unknown tool
                raise problem from None
            if self.session.recordings.find(request) is None:
                raise
            return True
        return False

    def _tell_grammar(self) -> None:
        """Say once in the cell what a local model's grammar leaves to validation."""
        notes = getattr(self.session.generator, "grammar_notes", None)
        if callable(notes):
            tools = self.session.sync_agent().tools.values()
            for line in notes([t.definition for t in tools]):
                outputs.note(line)


# --- what the cells rewritten by .cells call ----------------------------------------------------


async def agent_cell(line: str, cell: str | None = None, *, value: bool = False) -> Any:
    """What a rewritten ``%agent`` line or ``%%agent`` cell awaits: the run, to its end.

    Returns the run's result when the line assigned it (``x = %agent …``), else None (so the
    cell does not echo it). A kernel interrupt cancels the run and is re-raised once the run
    wound down.
    """
    # IPython leaves frames that set this out of a traceback: an interrupted run's shows the
    # person's cell and the frame that raised, not nbagent's awaiting between them
    __tracebackhide__ = True
    from ._current import current_session

    magics = AgentMagics.for_session(current_session())
    result = await magics.run_awaited(line, cell)
    return result if value else None


def agent_value(line: str, local_ns: dict[str, Any] | None = None) -> Any:
    """What a rewritten ``x = %agent …`` that cannot be awaited calls: the magic, returning the
    run's result (a :class:`~.runner.PendingRun` while a background run goes on); ``local_ns``
    are the variables where it stands, for ``{name}`` in the prompt."""
    from ._current import current_session

    return AgentMagics.for_session(current_session()).run_line(line, local_ns=local_ns)
