"""``%agent --acp NAME PROMPT``: one prompt to an external agent, run as any ``%agent`` run.

The run is planned as the magics plan their own (approval policy, the session's rules first,
the view, where it runs: awaited by its cell, so Approve, Deny, Stop and Kernel > Interrupt
reach it) and driven by the same :class:`~..core.runner.Job`; only what answers is another:
the agent's own loop and model, over ACP (:mod:`nbagent.acp`). The options that set nbagent's
own loop (a model, its tools, steps, budgets, recordings) do not apply and are refused.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from IPython.core.error import UsageError

from ...approvals.approval import Approver, InteractiveApprover
from ...approvals.rules import RuleApprover
from ...errors import ExternalAgentError
from ..core.frontend import approver_for, choose_policy, detect, widgets_available
from ..core.runner import Job, Mode, PendingRun
from ..live import outputs
from ..live.outputs import View
from ..policy import courseadmit, courserecord
from .agents import agents_of

if TYPE_CHECKING:
    from ...acp import ExternalAgentSession, ExternalRun
    from ..core.session import Session

__all__ = ["NOT_FOR_ACP", "admit", "job", "new_conversation"]

#: The options of nbagent's own loop, which an external agent's run does not take.
NOT_FOR_ACP = {
    "model": "-m",
    "kernel": "--kernel",
    "notebook": "--notebook",
    "tools": "--tools",
    "step": "--step",
    "output_type": "--output",
    "max_steps": "--max-steps",
    "budget": "--budget",
    "record": "--record",
    "replay": "--replay",
    "live": "--live",
    "pace": "--pace",
}


def refuse_options(args: Any) -> None:
    """A UsageError naming the options given that an external agent's run does not take."""
    given = [flag for name, flag in NOT_FOR_ACP.items() if getattr(args, name) not in (None, False)]
    if given:
        raise UsageError(
            f"--acp asks the external agent, which runs its own loop and model: "
            f"{', '.join(given)} do not apply to it; nothing was sent"
        )


class _AgentModel:
    """What the run's record names as its model: the external agent (``acp:NAME``)."""

    def __init__(self, name: str) -> None:
        self.external_agent = self.model = f"acp:{name}"

    def __repr__(self) -> str:
        return f"<external agent {self.model}>"


class _Starter:
    """What a :class:`Job` starts a run through, for an external agent (the Job's
    ``agent``): ``start`` sends the prompt over ACP."""

    def __init__(self, external: ExternalAgentSession, new: bool) -> None:
        self.external = external
        self.new = new
        self.generator: Any = _AgentModel(external.agent.name)

    def reset(self) -> None:
        self.new = True

    def start(self, prompt: str | None, *, approver: Approver, **_ignored: Any) -> ExternalRun:
        from ...loop._ids import new_id

        try:
            return self.external.start(
                prompt or "", approver=approver, new=self.new, run_id=new_id("run")
            )
        finally:
            self.new = False


def admit(session: Session, shell: Any, plan: Any) -> bool:
    """The course policy's word on the run (AI off: no agent starts)."""
    label = agents_of(session).agent(plan.acp).label
    return courseadmit.admit_external(session, shell, plan, agent=label)


def new_conversation(session: Session, name: str) -> None:
    """``%agent --acp NAME --new`` alone: the next prompt to NAME starts a new conversation."""
    agents = agents_of(session)
    ended = agents.stop(name)
    agents.agent(name)  # an unknown name is refused, as the prompt would be
    print(
        f"new conversation with {name}: the next %agent --acp {name} starts afresh"
        + (" (its process was ended)" if ended else "")
    )


def job(
    session: Session,
    shell: Any,
    plan: Any,
    *,
    awaited: bool,
    mode_for: Callable[[bool, bool], tuple[Mode, str]],
    namespace: Callable[[], dict[str, Any]],
) -> tuple[Job, PendingRun | None]:
    """The run of ``plan`` (its ``acp``: the agent's name) planned as the magics plan theirs:
    nothing runs yet; a missing agent is refused here, in one sentence."""
    from ...acp import resolve_command

    agents = agents_of(session)
    external = agents.session(plan.acp)
    try:
        resolve_command(external.agent)
    except ExternalAgentError as exc:
        raise UsageError(str(exc)) from None
    frontend = detect(shell)
    try:
        policy, source = choose_policy(plan.approve, frontend)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    asked = approver_for(policy, source, frontend, session.approver)
    needs_clicks = isinstance(asked, InteractiveApprover)
    approver = RuleApprover(session.rules, fallback=asked)  # the session's rules come first
    mode, why = mode_for(awaited, needs_clicks)
    use_widgets = frontend.interactive and widgets_available()
    label = f"{plan.prompt}"
    holder: list[Job] = []
    view: View
    if use_widgets:
        from ..live.view import RunView

        view = RunView(
            label,
            approver=asked if needs_clicks else None,  # type: ignore[arg-type]
            on_stop=lambda: holder[0].cancel() if holder else None,
        )
    else:
        from ..saved.textview import TextView

        view = TextView(label)
    output = plan.output
    pending: PendingRun | None = None

    def ended(job: Job) -> None:
        try:
            if output and job.result is not None:
                names = namespace()
                if mode != "background" or names.get(output) is pending:
                    names[output] = job.result
            outputs.run_ended(job.view, static_segments=mode != "background")
        finally:
            session.job_ended(job)

    starter = _Starter(external, plan.new)
    job = Job(
        lambda: cast(Any, starter),
        plan.prompt,
        view,
        approver=approver,
        mode=mode,
        on_end=ended,
        on_record=lambda job: courserecord.finished(session, job, plan.course),
    )
    holder.append(job)
    if mode == "background":
        pending = PendingRun(job)
        if output:
            namespace()[output] = pending
        outputs.note(
            f"This run goes on in the background: {why}. The next cells do not wait for it"
            f"{f'; {output} holds a pending result until it ends' if output else ''}."
        )
    if use_widgets:
        outputs.show_live(view, f"nbagent-{uuid.uuid4().hex}")
    return job, pending
