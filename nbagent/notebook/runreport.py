"""``%agent report``: this notebook's AI use, as one static output that survives saving.

Each ended run of the session is read back from the record its output carries (the
:class:`~nbagent.course.provenance.Provenance` that :mod:`.courserecord` made when it ended),
with its snippets' state as the kernel toolkit knows it now (a snippet undone since says so),
and :func:`nbagent.course.runs_bundle` puts them into escaped HTML tables and plain text:
prompt, model, live or replayed, tokens, cost, each call and how it was decided, and the code
the agent ran with what became of it (kept, undone, made into cells). Each ``%agent serve`` of
the session follows, as a run of mode ``served``: what the external agent asked (tool and
arguments), how each call was decided, and what it got. No widget: a notebook
saved and reopened without a kernel reads the same.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ..course import FollowUp, Provenance, ProvenanceError, from_metadata, runs_bundle
from ..course.provenance import MAX_CODE, SnippetRecord
from .render import no_math

if TYPE_CHECKING:
    from .runner import Job
    from .session import Session

__all__ = ["provenance_of", "report", "served_of", "session_runs"]


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
        from .courserecord import run_record

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
    """The session's ended runs, oldest first, and what later commands did with their code."""
    with session._lock:
        jobs = list(session.jobs)
        follow_ups = [f for f in session.follow_ups if isinstance(f, FollowUp)]
    runs = [p for job in jobs if job.done for p in [provenance_of(job, session)] if p is not None]
    runs += [served_of(served) for served in list(getattr(session, "served_sessions", ()))]
    return runs, follow_ups


def served_of(served: Any) -> Provenance:
    """A ``%agent serve`` session's record: the one its cell's output carries once it stopped,
    else what it has served so far."""
    from .servedrecord import served_record

    record = getattr(served.view, "provenance", None)
    if record is not None and not served.running:
        try:
            return from_metadata(record)
        except ProvenanceError:
            pass
    return served_record(served)


def report(session: Session, _shell: Any = None, _words: list[str] | None = None) -> None:
    """Show the session's runs as one static output (``%agent report``)."""
    from IPython.display import display

    runs, follow_ups = session_runs(session)
    display(no_math(runs_bundle(runs, follow_ups)), raw=True)  # type: ignore[no-untyped-call]
