"""``%agent report``: this notebook's AI use, as one static output that survives saving.

Each ended run of the session is read back from the record its output carries (the
:class:`~nbagent.course.provenance.Provenance` that :mod:`.courserecord` made when it ended),
with its snippets' state as the kernel toolkit knows it now (a snippet undone since says so),
and :func:`nbagent.course.runs_bundle` puts them into escaped HTML tables and plain text:
prompt, model, live or replayed, tokens, cost, each call and how it was decided, and the code
the agent ran with what became of it (kept, undone, made into cells). Each ``%agent serve`` of
the session follows, as a run of mode ``served``: what the external agent asked (tool and
arguments), how each call was decided, and what it got. Runs of kernel sessions before this
one (a restart) come from the saved notebook, when the kernel knows its file
(:func:`~.coursegate.locate`), read with :func:`nbagent.course.notebook_report`. No widget: a
notebook saved and reopened without a kernel reads the same.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ...course import FollowUp, Provenance, ProvenanceError, from_metadata, runs_bundle
from ...course.provenance import MAX_CODE, SnippetRecord
from ..shown.render import no_math

if TYPE_CHECKING:
    from ..core.runner import Job
    from ..core.session import Session

__all__ = ["earlier_runs", "provenance_of", "report", "served_of", "session_runs"]


def provenance_of(job: Job, session: Session) -> Provenance | None:
    """The record of one ended run (None: it never started), its snippets as they are now."""
    record = getattr(job.view, "provenance", None)
    run: Provenance | None = None
    if record is not None:
        try:
            run = from_metadata(record)
        except ProvenanceError:
            run = None
    if run is None:  # the run ended before its record was made (it failed to start)
        from ..policy.courserecord import run_record

        run = run_record(session, job, None)
    if run is None:
        return None
    kit = session.kernel
    if kit is not None and run.run_id:
        snippets = kit.snippets(run.run_id)
        if snippets:
            now = tuple(
                SnippetRecord(s.code[:MAX_CODE], "undone" if s.undone else "kept")
                for s in snippets[:200]
            )
            run = dataclasses.replace(run, snippets=now, snippets_total=len(snippets))
    return run


def session_runs(session: Session) -> tuple[list[Provenance], list[FollowUp]]:
    """The session's ended runs and refused attempts, oldest first, and what later commands
    did with their code. A refusal comes after the run that was the newest when it was refused
    (first, when that run is no longer kept)."""
    with session._lock:
        jobs = list(session.jobs)
        follow_ups = [f for f in session.follow_ups if isinstance(f, FollowUp)]
        refusals = list(session.refusals)
    after: dict[int, list[Provenance]] = {}
    kept = {id(job) for job in jobs}
    first: list[Provenance] = []
    for job, record in refusals:
        if isinstance(record, Provenance):
            (after.setdefault(id(job), []) if id(job) in kept else first).append(record)
    runs = first
    for job in jobs:
        if job.done:
            run = provenance_of(job, session)
            if run is not None:
                runs.append(run)
        runs.extend(after.get(id(job), ()))
    runs += [served_of(served) for served in list(getattr(session, "served_sessions", ()))]
    return runs, follow_ups


def served_of(served: Any) -> Provenance:
    """A ``%agent serve`` session's record: the one its cell's output carries once it stopped,
    else what it has served so far."""
    from ..policy.servedrecord import served_record

    record = getattr(served.view, "provenance", None)
    if record is not None and not served.running:
        try:
            return from_metadata(record)
        except ProvenanceError:
            pass
    return served_record(served)


def _identity(run: Provenance) -> tuple[Any, ...]:
    """What tells one run from another in a saved file and in the session alike (a session's
    records are redacted and cut as they are saved; a snippet's state may change since)."""
    saved = run.to_metadata()
    return (saved["run_id"], saved.get("at"), saved["mode"], saved["prompt"], saved["refused"])


def earlier_runs(shell: Any, runs: list[Provenance]) -> tuple[list[Provenance], str | None]:
    """Runs the saved notebook holds that this kernel session does not (sessions before a
    restart), read as untrusted as any submission; and a line saying where they came from
    (None: no saved notebook found, or nothing earlier in it)."""
    from ...course import notebook_report
    from ..policy.coursegate import locate

    where = locate(shell).notebook
    if where is None:
        return [], None
    saved = notebook_report(where)
    if saved.error is not None:
        return [], f"the saved notebook {where.name} could not be read: {saved.error}"
    known = {_identity(run) for run in runs}
    earlier = [run for run in saved.runs if _identity(run) not in known]
    if not earlier:
        return [], None
    return earlier, (
        f"{len(earlier)} earlier run(s) read from the saved notebook {where.name} (kernel "
        "sessions before this one, as it was last saved)"
    )


def report(session: Session, shell: Any = None, _words: list[str] | None = None) -> None:
    """Show the notebook's runs as one static output (``%agent report``): those the saved
    notebook holds from earlier kernel sessions first, then this session's."""
    import html

    from IPython.display import display

    runs, follow_ups = session_runs(session)
    earlier, note = earlier_runs(shell if shell is not None else session.shell, runs)
    bundle = runs_bundle([*earlier, *runs], follow_ups)
    if note is not None:
        bundle["text/html"] += f"<p><small>{html.escape(note)}</small></p>"
        bundle["text/plain"] += f"\n{note}"
    display(no_math(bundle), raw=True)  # type: ignore[no-untyped-call]
