"""The course policy at the start of each ``%agent`` run, and the record each run leaves.

Before a run is planned, :func:`check` reads the policy in force for this notebook
(:mod:`nbagent.course.policy`) and either refuses the run — one sentence naming the rule and the
file, shown in the cell with the refusal's provenance record, and nothing sent to any model — or
grants it, with the budget it may spend (the run's own, what is left of the kernel session's
and of the notebook's) and whether it may only replay the course's recordings.

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
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._prices import price_known, table_missing, usd_text
from ..course.policy import (
    CoursePolicy,
    CoursePolicyError,
    Limit,
    Rules,
    describe_value,
    find_policy,
    load_policy,
)
from ..course.provenance import Provenance
from ..limits import Budget
from ..redact import redact_secrets
from .courserecord import mode_of, model_text, notebook_spent, refusal_record, session_spent

if TYPE_CHECKING:
    from .session import Session

__all__ = ["Course", "CourseRefusal", "Granted", "current", "locate"]


@dataclass(frozen=True)
class Location:
    """Where the notebook is: its path (None: unknown), its folder, and how that was found."""

    notebook: Path | None
    folder: Path
    how: str


def locate(shell: Any, environ: dict[str, str] | None = None) -> Location:
    """This kernel's notebook (see the module): ``JPY_SESSION_NAME`` / ``__session__``, VS
    Code's ``__vsc_ipynb_file__``, else unknown in the working folder."""
    env = os.environ if environ is None else environ
    cwd = Path(os.getcwd())
    namespace = getattr(shell, "user_ns", None) or {}
    candidates = [
        (env.get("JPY_SESSION_NAME", ""), "JPY_SESSION_NAME (set by jupyter-server)"),
        (namespace.get("__session__", ""), "__session__ (set by ipykernel)"),
        (namespace.get("__vsc_ipynb_file__", ""), "__vsc_ipynb_file__ (set by VS Code)"),
    ]
    for value, how in candidates:
        if not isinstance(value, str) or not value.endswith(".ipynb") or len(value) > 4096:
            continue
        path = Path(value)
        for option in (path, cwd / path, cwd / path.name) if not path.is_absolute() else (path,):
            try:
                if option.is_file():
                    return Location(option.resolve(), option.resolve().parent, how)
            except OSError:
                continue
    return Location(None, cwd, "unknown (no JPY_SESSION_NAME, __session__ or __vsc_ipynb_file__)")


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
        """``rule `ai = false` (notebooks[2]) in nbagent-course.toml``: for refusals."""
        key = self.rules.origin.get(rule, rule)
        value = getattr(self.rules, rule, None) if "." not in rule else None
        if value is None and rule.startswith("budget."):
            _, scope, part = rule.split(".")
            value = getattr(self.rules.budget(scope), part)
        shown = f"{key} = {describe_value(value)}" if value is not None else key
        return f"rule `{shown}` in {self.source}"


def current(shell: Any, environ: dict[str, str] | None = None) -> Course:
    """The policy in force for this kernel's notebook, read afresh (a teacher's edit counts
    from the next run on)."""
    env = dict(os.environ if environ is None else environ)
    location = locate(shell, env)
    path = find_policy(location.folder, env)
    if path is None:
        return Course(location)
    try:
        policy = load_policy(path, from_env=bool(env.get("NBAGENT_COURSE_POLICY", "").strip()))
    except CoursePolicyError as exc:
        return Course(location, error=str(exc), path=path)
    notebook = folder = None
    try:
        if location.notebook is not None:
            notebook = location.notebook.relative_to(policy.folder.resolve()).as_posix()
        else:
            folder = location.folder.resolve().relative_to(policy.folder.resolve()).as_posix()
            folder = "" if folder == "." else folder
    except ValueError:
        pass  # outside the policy's folder (a hub's policy elsewhere): the top level applies
    sections = tuple(policy.sections_for(notebook, folder))
    return Course(location, policy, policy.for_notebook(notebook, folder), None, path, sections)


class CourseRefusal(Exception):
    """A run the course policy refuses: ``sentence`` says which rule of which file."""

    def __init__(self, sentence: str, *, rule: str, ai_off: bool = False) -> None:
        super().__init__(sentence)
        self.sentence = sentence
        self.rule = rule  # the policy's key: ``ai``, ``models``, ``budget.run.usd`` …
        self.ai_off = ai_off


@dataclass(frozen=True)
class Granted:
    """A run the policy allows: its budget and whether it may only replay."""

    course: Course
    budget: Budget | None
    replay_only: bool


# --- the check -------------------------------------------------------------------------------


def check(
    session: Session,
    course: Course,
    *,
    model: str | None,
    approve: str,
    approve_source: str,
    kernel: bool,
    run_budget: int | None,
    notebook: bool = False,
) -> Granted:
    """Refuse (:class:`CourseRefusal`) or grant one run; ``model`` is the model string the run
    would use (``provider:name``, or None for a model object set from Python or the offline
    stand-in); ``approve`` the approval policy chosen and where it came from."""
    if course.error is not None:
        raise CourseRefusal(
            f"nbagent is off until the course policy reads again: {course.error}.",
            rule="unreadable",
        )
    rules = course.rules
    if course.policy is None:
        return Granted(course, Budget(tokens=run_budget) if run_budget else None, False)
    if not rules.ai:
        message = rules.message or "the course turns AI off for this notebook"
        raise CourseRefusal(
            f"AI is off here: {message.rstrip('.')} ({course.where('ai')}); nothing was sent.",
            rule="ai",
            ai_off=True,
        )
    if model is not None and not rules.model_allowed(model):
        allowed = ", ".join(rules.models or ()) or "none"
        raise CourseRefusal(
            f"The model {model} is not allowed here: the course allows {allowed} "
            f"({course.where('models')}); nothing was sent.",
            rule="models",
        )
    if kernel and not rules.kernel_tools:
        raise CourseRefusal(
            "The kernel tools (--kernel) are off in this notebook "
            f"({course.where('kernel_tools')}); nothing was sent.",
            rule="kernel_tools",
        )
    if notebook and not rules.notebook_tools:
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
    if approve == "auto" and not rules.auto_approve:
        raise CourseRefusal(
            f"Approving every call automatically ({approve_source}=auto) is not allowed here "
            f"({course.where('auto_approve')}); nothing was sent.",
            rule="auto_approve",
        )
    return Granted(course, _budget(session, course, run_budget), not rules.live)


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


def check_price(course: Course, granted: Granted, generator: Any, model: str) -> None:
    """A money budget on a model the price table does not know cannot be kept: refuse."""
    budget = granted.budget
    if budget is None or budget.usd is None or price_known(generator):
        return
    scope = next(
        (s for s in ("run", "session", "notebook") if course.rules.budget(s).usd is not None),
        "run",
    )
    lacking = table_missing()  # no price at all here: say what installs them
    raise CourseRefusal(
        f"The course sets a money budget, and the price of {model} is unknown, so it cannot be "
        f"kept ({course.where(f'budget.{scope}.usd')}); nothing was sent."
        + (f" {lacking}" if lacking else ""),
        rule=f"budget.{scope}.usd",
    )


# --- what the magics call ----------------------------------------------------------------------


def admit(session: Session, shell: Any, plan: Any) -> bool:
    """Check one planned run against the policy in force; False when it was refused (the
    refusal is shown, with its record). Sets ``plan.course`` (the :class:`Granted`) and, when
    the policy names a default model and nothing else sets one, ``plan.model``."""
    from ..errors import NbagentError
    from .frontend import choose_policy, detect

    course = current(shell)
    rules = course.rules
    if (
        course.policy is not None
        and rules.default_model
        and not plan.model
        and session.model_spec is None
        and not os.environ.get("NBAGENT_MODEL", "").strip()
    ):
        plan.model = rules.default_model
    spec = plan.model or session.model_spec
    model = model_text(spec)
    try:
        approve, source = choose_policy(plan.approve, detect(shell))
    except ValueError:
        approve, source = "ask", "default"  # the run's own planning says what is wrong
    # unique in any notebook, across kernel restarts and refusals in the same second
    run_id = f"refused-{secrets.token_hex(6)}"
    try:
        granted = check(
            session,
            course,
            model=model,
            approve=approve,
            approve_source=source,
            kernel=plan.kernel,
            run_budget=plan.budget,
            notebook=bool(plan.notebook),
        )
        if granted.replay_only:
            _replay_or_refuse(session, course, plan, model)
        elif granted.budget is not None and granted.budget.usd is not None:
            from ..providers import resolve_generator

            try:
                generator = resolve_generator(spec)
            except NbagentError:
                generator = None  # no key: the run says so itself
            if generator is not None:
                check_price(course, granted, generator, model or "this model")
    except CourseRefusal as refusal:
        record = refusal_record(course, refusal, plan.prompt, run_id, model)
        show_refusal(refusal, record)
        if getattr(shell, "kernel", None) is not None:  # a page may copy it into the cell
            from .cellnote import note_cell

            note_cell("output", run_id)
        with session._lock:  # kept for %agent report, after the run it followed
            session.refusals.append((session.jobs[-1] if session.jobs else None, record))
        return False
    plan.course = granted
    return True


def _replay_or_refuse(session: Session, course: Course, plan: Any, model: str | None) -> None:
    """Live calls are off: a run on a real model must replay one of the course's recordings
    (found as every replay is, by its first request), and may not go on live from it."""
    from ..errors import NbagentError
    from .recordings import first_request

    if model is None and not isinstance(session.model_spec, str):
        spec = session.model_spec
        if spec is None or mode_of(spec) == "offline":
            return  # the offline stand-in or a scripted model: nothing reaches a server
    try:
        request = first_request(session.sync_agent(), plan.prompt, plan.tools, fresh=plan.new)
        found = session.recordings.find(request)
    except (NbagentError, KeyError):
        found = None
    if found is None:
        raise CourseRefusal(
            "Live calls are off here: only the course's recordings replay, and none was "
            f"recorded for this prompt ({course.where('live')}); nothing was sent.",
            rule="live",
        )
    plan.recording = "replay"


def show_refusal(refusal: CourseRefusal, record: Provenance) -> None:
    """The refusal's one sentence in the cell, its record in the output's metadata (which the
    page copies into the cell's own metadata: :mod:`.cellnote`)."""
    from IPython.display import display

    from .render import safe_markdown

    sentence = redact_secrets(refusal.sentence)
    display(  # type: ignore[no-untyped-call]
        {"text/plain": sentence, "text/markdown": f"**nbagent:** {safe_markdown(sentence)}"},
        metadata={"nbagent": record.to_metadata()},
        raw=True,
    )
