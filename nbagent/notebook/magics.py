"""The ``%agent`` line magic and ``%%agent`` cell magic."""

from __future__ import annotations

import importlib.util
import re
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument as _argument
from IPython.core.magic_arguments import magic_arguments as _magic_arguments

from ..approval import InteractiveApprover
from ..errors import NbagentError
from . import report
from .frontend import approver_for, choose_policy, detect
from .runner import Job, View

if TYPE_CHECKING:
    from .session import Session

__all__ = ["AgentMagics", "interpolate", "split_options"]

# IPython's argument decorators are untyped; these names give them a type.
Decorator = Callable[[Any], Any]
magic_arguments: Callable[[], Decorator] = _magic_arguments
argument: Callable[..., Decorator] = _argument

_VALUE_OPTIONS = {"-m", "--model", "-o", "--output", "--approve", "--max-steps", "--tools"}
_FLAG_OPTIONS = {"--new", "--reset"}
_COMMANDS = ("tools", "history", "config", "stop", "help")
_FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\}")


def split_options(line: str) -> tuple[list[str], str]:
    """Leading options as tokens, and the rest of the line verbatim (the prompt).

    The prompt is never shell-split, so quotes and apostrophes in it stay as typed. ``--``
    ends the options; a word that merely starts with a dash (``-5°C?``) starts the prompt.
    """
    tokens: list[str] = []
    rest = line.lstrip()
    while rest.startswith("-"):
        match = re.match(r"(\S+)\s*", rest)
        assert match is not None
        token = match.group(1)
        name = token.split("=", 1)[0]
        if token == "--":
            rest = rest[match.end() :]
            break
        if name in _FLAG_OPTIONS:
            tokens.append(token)
            rest = rest[match.end() :]
        elif name in _VALUE_OPTIONS:
            tokens.append(token)
            rest = rest[match.end() :]
            if "=" not in token:
                value = re.match(r"(\S+)\s*", rest)
                if value is None:
                    raise UsageError(f"{name} needs a value")
                tokens.append(value.group(1))
                rest = rest[value.end() :]
        elif token.startswith("--"):
            raise UsageError(
                f"unknown option {name}; see `%agent?` (put `--` before a prompt that starts "
                "with dashes)"
            )
        else:
            break
    return tokens, rest


def interpolate(text: str, namespace: dict[str, Any]) -> str:
    """Replace ``{name}`` and ``{name.attr}`` with values from the namespace.

    Unknown names stay as written; ``{{`` and ``}}`` give literal braces. No code is evaluated.
    """

    def replace(match: re.Match[str]) -> str:
        whole = match.group(0)
        if whole in ("{{", "}}"):
            return whole[0]
        path = match.group(1).split(".")
        if path[0] not in namespace:
            return whole
        value = namespace[path[0]]
        for attr in path[1:]:
            try:
                value = getattr(value, attr)
            except AttributeError:
                return whole
        return str(value)

    return _FIELD.sub(replace, text)


def _widgets_available() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("ipywidgets", "anywidget"))


@magics_class
class AgentMagics(Magics):
    """``%agent`` and ``%%agent``: ask the model, watch the run, approve its calls."""

    def __init__(self, shell: Any, session: Session) -> None:
        super().__init__(shell)
        self.session = session

    @magic_arguments()
    @argument("-m", "--model", help="model from now on: offline, openai:MODEL, ollama:MODEL …")
    @argument("--new", "--reset", dest="new", action="store_true", help="start a new conversation")
    @argument("-o", "--output", metavar="NAME", help="store the run's result in this variable")
    @argument("--approve", choices=["ask", "auto", "deny"], help="approval policy for this run")
    @argument("--max-steps", type=int, metavar="N", help="stop after N model turns")
    @argument("--tools", metavar="A,B", help="only these tools in this run (comma-separated)")
    @argument("prompt", nargs="*", help="what to ask; {name} is replaced by a variable's value")
    @no_var_expand
    @line_cell_magic
    def agent(self, line: str, cell: str | None = None) -> None:
        """Ask the agent; the answer streams into the cell.

        %agent PROMPT            one line ({name} is replaced by the variable's value)
        %%agent [options]        the cell body is the prompt
        %agent tools | history | config | stop

        Tools: every @nbagent.tool function defined in the notebook, and nbagent.register(...).
        In JupyterLab and similar, the run goes on in the background: the cell returns at once,
        calls that need approval wait for Approve / Deny, Stop cancels, and -o NAME is set
        when the run ends. With --approve auto|deny (or NBAGENT_APPROVAL) nobody needs to
        click, so the cell waits for the run, and the next cell can use -o NAME. Headless
        (nbclient, CI) runs wait too, show plain outputs, and deny approval-needing calls
        unless NBAGENT_APPROVAL or --approve says auto.
        """
        stripped = line.strip()
        if cell is None and stripped in _COMMANDS:
            self._command(stripped)
            return
        tokens, rest = split_options(line)
        args = self.agent.parser.parse_args(tokens)
        prompt = rest.strip()
        if cell is not None and cell.strip():
            prompt = f"{prompt}\n{cell.strip()}" if prompt else cell.strip()
        if not prompt:
            raise UsageError("what should the agent do? `%agent PROMPT`, or see `%agent?`")
        prompt = interpolate(prompt, self._namespace())
        self._start(args, prompt)

    def _namespace(self) -> dict[str, Any]:
        shell = self.shell
        assert shell is not None
        namespace: dict[str, Any] = shell.user_ns
        return namespace

    # --- a run ----------------------------------------------------------------------------------

    def _start(self, args: Any, prompt: str) -> None:
        session = self.session
        report.problems(session.scan())
        try:
            if args.model:
                session.set_model(args.model)
            session.agent  # noqa: B018 - resolve the model now: a bad setting fails in this cell
        except NbagentError as exc:
            raise UsageError(str(exc)) from None
        if args.output is not None and not args.output.isidentifier():
            raise UsageError(f"-o needs a variable name, not {args.output!r}")
        if args.max_steps is not None and args.max_steps < 1:
            raise UsageError("--max-steps must be at least 1")
        tools = None
        if args.tools is not None:
            tools = [t.strip() for t in args.tools.split(",") if t.strip()]
            unknown = [t for t in tools if t not in session.tools]
            if unknown:
                known = ", ".join(sorted(session.tools)) or "none"
                raise UsageError(f"unknown tools {', '.join(unknown)}; registered: {known}")
        frontend = detect(self.shell)
        try:
            policy, source = choose_policy(args.approve, frontend)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        approver = approver_for(policy, source, frontend, session.approver)
        foreground = not frontend.interactive or (policy != "ask" and source != "default")
        use_widgets = frontend.interactive and _widgets_available()
        display_id = f"nbagent-{uuid.uuid4().hex}" if use_widgets else None
        output = args.output

        view: View
        holder: list[Job] = []
        if use_widgets:
            from .view import RunView

            view = RunView(
                prompt,
                approver=approver if isinstance(approver, InteractiveApprover) else None,
                on_stop=lambda: holder[0].cancel() if holder else None,
            )
        else:
            from .textview import TextView

            view = TextView(prompt)

        def ended(job: Job) -> None:
            try:
                if output and job.result is not None:
                    self._namespace()[output] = job.result
                if display_id is not None:
                    report.update_run_display(job.view, display_id)
            finally:
                session.job_ended(job)

        job = Job(
            session.sync_agent,
            prompt,
            view,
            approver=approver,
            foreground=foreground,
            max_steps=args.max_steps,
            tools=tools,
            reset=args.new,
            on_end=ended,
        )
        holder.append(job)
        try:
            if display_id is not None:
                report.show_run_display(view, display_id)
            session.submit(job)
        except NbagentError as exc:
            view.close("refused")
            raise UsageError(str(exc)) from None
        except BaseException:  # e.g. an interrupt before the run started: say it never ran
            if job.state == "queued" and job not in session.queue:
                view.close("cancelled")
            raise

    # --- subcommands ------------------------------------------------------------------------------

    def _command(self, name: str) -> None:
        session = self.session
        if name == "help":
            print(self.agent.__doc__)
            return
        if name == "stop":
            count = session.stop()
            print(f"stopped {count} run(s)" if count else "no run is in progress")
            return
        report.problems(session.scan())
        if name == "tools":
            report.tools_table(session)
        elif name == "history":
            report.history(session)
        elif name == "config":
            report.config(session, detect(self.shell))
