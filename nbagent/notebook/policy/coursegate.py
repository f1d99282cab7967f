"""The course policy's decision: one check that every route to a model passes.

:func:`check` reads what a run would do (the model it reaches, whether its calls are approved
without asking, whether it offers the kernel tools) against the policy in force for this
notebook (:mod:`nbagent.course.policy`) and either refuses it — :class:`CourseRefusal`, one
sentence naming the rule and the file — or grants it, with the budget it may spend (the run's
own, what is left of the kernel session's and of the notebook's) and whether it may only
replay the course's recordings. Two callers ask it. The gate on the request path
(:mod:`.requestgate`) asks it before every model request of the kernel, whatever route led
there (``%agent``, ``%agent map``, a fork, step mode's model switch, a helper, a model set from
Python, an ``Agent`` of one's own); and a magic asks it before it plans a run (:func:`admit`,
:func:`admit_map`), so that a refused cell shows its sentence and its provenance record
instead of a run that would fail at its first request.

**Which notebook.** A kernel is not told which notebook it runs. jupyter-server (JupyterLab,
Notebook 7, JupyterHub) starts it with ``JPY_SESSION_NAME``: the notebook's path when the
kernel started (absolute when the front end named the file, else relative to the server's
root; a rename later is not seen); ipykernel copies it to ``__session__``. VS Code sets
``__vsc_ipynb_file__``. nbclient and ``jupyter execute`` set neither, but start the kernel in the
notebook's folder. :func:`locate` uses them in that order; when none names an existing notebook,
the notebook's name is unknown: the policy is looked for from the kernel's working folder, and a
``[[notebooks]]`` section applies when its glob's folder matches that folder (``exams/*.ipynb``
applies to any notebook run in ``exams/``). ``%agent policy`` says which it was.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..._prices import price_known, table_missing, usd_text
from ...approvals.approval import AutoApprove
from ...approvals.rules import RuleApprover
from ...course.policy import (
    CoursePolicy,
    CoursePolicyError,
    Limit,
    Rules,
    describe_value,
    find_policy,
    load_policy,
)
from ...course.refusal import ai_off_sentence, rule_said
from ...errors import RequestRefusedError
from ...limits import Budget
from ..core.notebookfile import Location, locate
from .coursereach import Reach
from .courserecord import notebook_spent, session_spent

if TYPE_CHECKING:
    from ..core.session import Session

__all__ = [
    "Asked",
    "Course",
    "CourseRefusal",
    "Granted",
    "approves_everything",
    "check",
    "check_price",
    "current",
    "locate",
]


@dataclass(frozen=True)
class Course:
    """The policy in force for this notebook now (``policy`` None: no policy file), or why it
    cannot be read (``error``: every run is refused until it can)."""

    location: Location
    policy: CoursePolicy | None = None
    rules: Rules = field(default_factory=Rules)
    error: str | None = None
    path: Path | None = None
    sections: tuple[int, ...] = ()

    @property
    def source(self) -> str | None:
        """The policy's path as the record keeps it: relative to the notebook's folder."""
        if self.path is None:
            return None
        try:
            return os.path.relpath(self.path, self.location.folder).replace(os.sep, "/")
        except ValueError:  # another drive (Windows)
            return str(self.path)

    @property
    def digest(self) -> str | None:
        return self.policy.digest if self.policy is not None else None

    @property
    def notebook_key(self) -> str:
        """The notebook as the per-notebook budget counts it."""
        loc = self.location
        return str(loc.notebook) if loc.notebook is not None else str(loc.folder / "?")

    def where(self, rule: str) -> str:
        """``rule `notebooks[2].ai = false` in nbagent-course.toml``: for refusals."""
        return rule_said(self.rules.said(rule), self.source)


_read: dict[tuple[str, bool], tuple[tuple[int, int, int], CoursePolicy]] = {}


def _load(path: Path, from_env: bool) -> CoursePolicy:
    """The policy at ``path``, parsed again only when the file changed (every model request
    asks: a teacher's edit counts from the next request on, a file unchanged is not re-read)."""
    key = (str(path), from_env)
    try:
        info = path.stat()
        stamp = (info.st_mtime_ns, info.st_size, info.st_ino)
    except OSError:
        stamp = None
    known = _read.get(key)
    if stamp is not None and known is not None and known[0] == stamp:
        return known[1]
    policy = load_policy(path, from_env=from_env)
    if stamp is not None:
        if len(_read) > 32:
            _read.clear()
        _read[key] = (stamp, policy)
    return policy


def current(shell: Any, environ: dict[str, str] | None = None) -> Course:
    """The policy in force for this kernel's notebook (a teacher's edit counts from the next
    model request on)."""
    env = dict(os.environ if environ is None else environ)
    location = locate(shell, env)
    path = find_policy(location.folder, env)
    if path is None:
        return Course(location)
    try:
        policy = _load(path, bool(env.get("NBAGENT_COURSE_POLICY", "").strip()))
    except CoursePolicyError as exc:
        return Course(location, error=str(exc), path=path)
    notebook = folder = None
    inside = True
    home = policy.folder.resolve()
    try:
        if location.notebook is not None:
            notebook = location.notebook.relative_to(home).as_posix()
        else:
            folder = location.folder.resolve().relative_to(home).as_posix()
            folder = "" if folder == "." else folder
    except ValueError:  # outside the policy's folder (a hub's policy elsewhere): its whole path
        inside = False
        if location.notebook is not None:
            notebook = location.notebook.as_posix()
        else:
            folder = location.folder.resolve().as_posix()
    sections = tuple(policy.sections_for(notebook, folder, inside=inside))
    rules = policy.for_notebook(notebook, folder, inside=inside)
    return Course(location, policy, rules, None, path, sections)


class CourseRefusal(RequestRefusedError):
    """A run (or one of its requests) the course policy refuses: ``sentence`` says which rule
    of which file, ``rule`` is the policy's key (``ai``, ``models``, ``budget.run.usd`` …)."""


@dataclass(frozen=True)
class Asked:
    """What a run would do, as the policy judges it: the model it reaches, whether every call
    is approved without asking (and what said so: ``--approve``, ``NBAGENT_APPROVAL``, or
    ``""`` for an approver object), whether it offers the kernel tools, its own token budget,
    whether it offers the notebook tools."""

    reach: Reach
    auto: bool = False
    auto_source: str = ""
    kernel: bool = False
    run_budget: int | None = None
    notebook: bool = False


def approves_everything(approver: Any) -> bool:
    """Whether ``approver`` approves every call no rule decides without asking anyone (an
    :class:`~nbagent.approvals.approval.AutoApprove`, also behind the session's rules). An
    approver of one's own cannot be judged, and counts as asking."""
    seen = approver
    for _ in range(16):
        if isinstance(seen, AutoApprove):
            return True
        if not isinstance(seen, RuleApprover):
            return False
        seen = seen.fallback
    return False


@dataclass(frozen=True)
class Granted:
    """A run the policy allows: its budget and whether it may only replay."""

    course: Course
    budget: Budget | None
    replay_only: bool


# --- the check -------------------------------------------------------------------------------


def check(session: Session, course: Course, asked: Asked) -> Granted:
    """Refuse (:class:`CourseRefusal`) or grant one run, or one request of a run, by what it
    would do (:class:`Asked`)."""
    if course.error is not None:
        raise CourseRefusal(
            f"nbagent is off until the course policy reads again: {course.error}.",
            rule="unreadable",
        )
    rules = course.rules
    if course.policy is None:
        return Granted(course, Budget(tokens=asked.run_budget) if asked.run_budget else None, False)
    reach = asked.reach
    if not rules.ai:
        raise CourseRefusal(
            ai_off_sentence(rules.message, course.where("ai")), rule="ai", ai_off=True
        )
    if rules.models is not None and reach.may_reach_a_server:
        allowed = ", ".join(rules.models) or "none"
        if reach.model is None:
            raise CourseRefusal(
                f"This run's model is {reach.named}, and the course allows only {allowed} "
                f"({course.where('models')}); nothing was sent.",
                rule="models",
            )
        if not rules.model_allowed(reach.model):
            raise CourseRefusal(
                f"The model {reach.model} is not allowed here: the course allows {allowed} "
                f"({course.where('models')}); nothing was sent.",
                rule="models",
            )
    if asked.kernel and not rules.kernel_tools:
        raise CourseRefusal(
            "The kernel tools (--kernel) are off in this notebook "
            f"({course.where('kernel_tools')}); nothing was sent.",
            rule="kernel_tools",
        )
    if asked.notebook and not rules.notebook_tools:
        raise CourseRefusal(
            "The notebook tools (--notebook) are off in this notebook "
            f"({course.where('notebook_tools')}); nothing was sent.",
            rule="notebook_tools",
        )
    if not rules.mcp and session.mcp_servers:
        names = ", ".join(sorted(session.mcp_servers))
        raise CourseRefusal(
            f"MCP servers are off in this notebook, and {names} is connected (remove it with "
            f"%agent mcp remove NAME; {course.where('mcp')}); nothing was sent.",
            rule="mcp",
        )
    if asked.auto and not rules.auto_approve:
        how = f"{asked.auto_source}=auto" if asked.auto_source else "an AutoApprove approver"
        raise CourseRefusal(
            f"Approving every call automatically ({how}) is not allowed here "
            f"({course.where('auto_approve')}); nothing was sent.",
            rule="auto_approve",
        )
    return Granted(course, _budget(session, course, asked.run_budget), not rules.live)


def refuse_live(course: Course, reach: Reach, why: str | None = None) -> CourseRefusal:
    """The refusal of a request that would reach a live model where only replays may run."""
    why = why or f"and {reach.named} would be asked live"
    return CourseRefusal(
        f"Live calls are off here: only the course's recordings replay, {why} "
        f"({course.where('live')}); nothing was sent.",
        rule="live",
    )


def _budget(session: Session, course: Course, run_budget: int | None) -> Budget | None:
    """The run's budget: the least of its own, the policy's per run, and what is left of the
    session's and the notebook's; a scope already spent refuses the run."""
    rules = course.rules
    bounds: dict[str, list[float]] = {"tokens": [], "requests": [], "usd": []}
    if run_budget:
        bounds["tokens"].append(run_budget)
    per_run = rules.budget("run")
    for part in bounds:
        value = getattr(per_run, part)
        if value is not None:
            bounds[part].append(value)
    for scope, spent in (
        ("session", session_spent(session)),
        ("notebook", notebook_spent(session, course)),
    ):
        limit: Limit = rules.budget(scope)
        for part in bounds:
            value = getattr(limit, part)
            if value is None:
                continue
            left = value - getattr(spent, part)
            if left <= 0 or (part == "usd" and left < 1e-9):
                used = usd_text(spent.usd) if part == "usd" else f"{getattr(spent, part):,}"
                whose = "this kernel session" if scope == "session" else "this notebook"
                raise CourseRefusal(
                    f"The {scope} budget is spent: {whose} used {used} "
                    f"{'' if part == 'usd' else part + ' '}of {describe_value(value)} "
                    f"({course.where(f'budget.{scope}.{part}')}); nothing was sent.",
                    rule=f"budget.{scope}.{part}",
                )
            bounds[part].append(left)
    if not any(bounds.values()):
        return None
    tokens = min(bounds["tokens"]) if bounds["tokens"] else None
    requests = min(bounds["requests"]) if bounds["requests"] else None
    usd = min(bounds["usd"]) if bounds["usd"] else None
    return Budget(
        tokens=None if tokens is None else max(1, int(tokens)),
        requests=None if requests is None else max(1, int(requests)),
        usd=usd,
    )


def check_price(course: Course, generator: Any, named: str) -> None:
    """A money budget on a model the price table does not know cannot be kept: refuse."""
    scope = next(
        (s for s in ("run", "session", "notebook") if course.rules.budget(s).usd is not None),
        None,
    )
    if scope is None or course.policy is None or price_known(generator):
        return
    lacking = table_missing()  # no price at all here: say what installs them
    raise CourseRefusal(
        f"The course sets a money budget, and the price of {named} is unknown, so it cannot be "
        f"kept ({course.where(f'budget.{scope}.usd')}); nothing was sent."
        + (f" {lacking}" if lacking else ""),
        rule=f"budget.{scope}.usd",
    )
