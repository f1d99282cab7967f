"""The course policy before a magic plans a run: a refused cell shows why, with its record.

Every model request is judged again on the request path (:mod:`.requestgate`), whatever route
led to it; here the magics ask the same :func:`~.coursegate.check` before they build anything,
so that a refused ``%agent``, ``%agent map`` or ``%agent serve`` cell holds one sentence naming
the rule and the file, and the refusal's provenance record (which the class report counts),
instead of a view of a run that would fail at its first request. Nothing is sent to any model
either way.
"""

from __future__ import annotations

import os
import secrets
from typing import TYPE_CHECKING, Any

from ...course.provenance import Provenance
from ...errors import NbagentError
from ...redact import redact_secrets
from .coursegate import (
    Asked,
    Course,
    CourseRefusal,
    Granted,
    check,
    check_price,
    current,
    refuse_live,
)
from .coursereach import Reach, reach_of
from .courserecord import model_text, refusal_record

if TYPE_CHECKING:
    from ..core.session import Session

__all__ = [
    "admit",
    "admit_external",
    "admit_map",
    "admit_serving",
    "planned_reach",
    "show_refusal",
]


def planned_reach(spec: Any) -> Reach:
    """What a run set to ``spec`` (a model string, a model object set from Python, or None for
    ``NBAGENT_MODEL`` / the offline stand-in) would reach, without making its model."""
    if spec is not None and not isinstance(spec, str):
        return reach_of(spec)
    model = model_text(spec)
    if model is None:
        return Reach("offline", None, "the offline stand-in")
    return Reach("live", model, model)


def _refused(
    session: Session, shell: Any, course: Course, refusal: CourseRefusal, prompt: str,
    model: str | None,
) -> None:  # fmt: skip
    # unique in any notebook, across kernel restarts and refusals in the same second
    run_id = f"refused-{secrets.token_hex(6)}"
    record = refusal_record(course, refusal, prompt, run_id, model)
    show_refusal(refusal, record)
    if getattr(shell, "kernel", None) is not None:  # a page may copy it into the cell
        from ..live.cellnote import note_cell

        note_cell("output", run_id)
    with session._lock:  # kept for %agent report, after the run it followed
        session.refusals.append((session.jobs[-1] if session.jobs else None, record))


def _default_model(session: Session, course: Course, named: Any) -> Any:
    """The policy's default model when nothing else names one (the cell, ``%agent -m``,
    ``NBAGENT_MODEL``)."""
    rules = course.rules
    if (
        course.policy is not None
        and rules.default_model
        and not named
        and session.model_spec is None
        and not os.environ.get("NBAGENT_MODEL", "").strip()
    ):
        return rules.default_model
    return named


def _approval(flag: str | None, shell: Any) -> tuple[bool, str]:
    from ..core.frontend import choose_policy, detect

    try:
        approve, source = choose_policy(flag, detect(shell))
    except ValueError:
        return False, "default"  # the run's own planning says what is wrong
    return approve == "auto", source


def admit(session: Session, shell: Any, plan: Any) -> bool:
    """Check one planned ``%agent`` run (or fork) against the policy in force; False when it
    was refused (the refusal is shown, with its record). Sets ``plan.course`` (the
    :class:`~.coursegate.Granted`) and, when the policy names a default model and nothing else
    sets one, ``plan.model``."""
    course = current(shell)
    plan.model = _default_model(session, course, plan.model)
    spec = plan.model or session.model_spec
    reach = planned_reach(spec)
    auto, source = _approval(plan.approve, shell)
    try:
        granted = check(
            session,
            course,
            Asked(reach, auto, source, plan.kernel, plan.budget, notebook=bool(plan.notebook)),
        )
        if granted.replay_only and reach.may_reach_a_server:
            _replay_or_refuse(session, course, plan, reach)
        elif reach.may_reach_a_server:
            _price_or_refuse(course, spec, reach)
    except CourseRefusal as refusal:
        _refused(session, shell, course, refusal, plan.prompt, reach.model)
        return False
    plan.course = granted
    return True


def _price_or_refuse(course: Course, spec: Any, reach: Reach) -> None:
    if course.policy is None:
        return
    from ...providers import resolve_generator

    try:
        generator = resolve_generator(spec)
    except NbagentError:
        return  # no key: the run says so itself
    check_price(course, generator, reach.model or reach.named)


def admit_map(
    session: Session, shell: Any, *, prompt: str, spec: Any, approver: str, source: str,
    kernel: bool,
) -> tuple[Granted, Any] | None:  # fmt: skip
    """Check one ``%agent map`` before its batch is built: what the policy granted and the
    model the batch uses (the policy's default model when nothing names one), or None when
    it was refused (shown, with its record). ``spec``: the model the map names (a model
    string, the session's model object, or None), ``approver`` "auto" or "deny" and where it
    came from, ``kernel``: whether its tools include the kernel tools. A map never replays,
    so ``live = false`` refuses a live model here."""
    course = current(shell)
    spec = _default_model(session, course, spec)
    reach = planned_reach(spec)
    try:
        granted = check(session, course, Asked(reach, approver == "auto", source, kernel))
        if granted.replay_only and reach.may_reach_a_server:
            raise refuse_live(course, reach, f"and a map asks {reach.named} live for every row")
        if reach.may_reach_a_server:
            _price_or_refuse(course, spec, reach)
    except CourseRefusal as refusal:
        _refused(session, shell, course, refusal, prompt, reach.model)
        return None
    return granted, spec


def admit_serving(
    session: Session, shell: Any, *, prompt: str, kernel: bool, auto: bool, notebook: bool = False
) -> CourseRefusal | None:
    """Check one ``%agent serve`` before it starts: an external agent that calls the
    notebook's tools is AI use (AI off refuses it), ``--kernel`` needs the kernel tools and
    ``--approve auto`` the policy's ``auto_approve``, ``--notebook`` its ``notebook_tools``.
    The refusal (shown, with its record), or None. The served calls reach no model of this
    kernel; a served tool that runs an agent (a helper) is judged at each of its requests like
    any other."""
    course = current(shell)
    source = "--approve" if auto else ""
    try:
        reach = Reach("offline", None, "an MCP client")
        check(session, course, Asked(reach, auto, source, kernel, notebook=notebook))
    except CourseRefusal as refusal:
        _refused(session, shell, course, refusal, prompt, None)
        return refusal
    return None


def admit_external(session: Session, shell: Any, plan: Any, *, agent: str) -> bool:
    """Check one ``%agent --acp NAME`` before its agent is started: an external agent is AI
    use (AI off refuses it, and no agent process starts), its model is its own (a course that
    names the models it allows refuses it: nbagent cannot tell which one it asks), and its
    turns are not recorded (``live = false`` refuses it). False when refused (shown, with its
    record); else sets ``plan.course``."""
    course = current(shell)
    reach = Reach("unknown", None, f"the external agent {agent}")
    auto, source = _approval(plan.approve, shell)
    try:
        granted = check(session, course, Asked(reach, auto, source))
        if granted.replay_only:
            raise refuse_live(course, reach, "and an external agent's turns are not recorded")
    except CourseRefusal as refusal:
        _refused(session, shell, course, refusal, plan.prompt, None)
        return False
    plan.course = granted
    return True


def _replay_or_refuse(session: Session, course: Course, plan: Any, reach: Reach) -> None:
    """Live calls are off: a run on a real model must replay one of the course's recordings
    (found as every replay is, by its first request), and may not go on live from it."""
    from ..core.recordings import first_request

    try:
        request = first_request(session.sync_agent(), plan.prompt, plan.tools, fresh=plan.new)
        found = session.recordings.find(request)
    except (NbagentError, KeyError):
        found = None
    if found is None:
        raise refuse_live(course, reach, "and none was recorded for this prompt")
    plan.recording = "replay"


def show_refusal(refusal: CourseRefusal, record: Provenance) -> None:
    """The refusal's one sentence in the cell, its record in the output's metadata (which the
    page copies into the cell's own metadata: :mod:`.cellnote`)."""
    from IPython.display import display

    from ...course.refusal import refusal_bundle

    display(  # type: ignore[no-untyped-call]
        refusal_bundle(redact_secrets(refusal.sentence)),
        metadata={"nbagent": record.to_metadata()},
        raw=True,
    )
