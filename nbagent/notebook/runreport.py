"""``%agent report``: this notebook's AI use, as one static output that survives saving.

Each run of the session becomes its :class:`~nbagent.course.provenance.Provenance` — the record
its cell's output carries — and :func:`nbagent.course.runs_bundle` puts them into escaped HTML
tables and plain text: prompt, model, live or replayed, tokens, cost, each call and how it was
decided, and the code the agent ran with what became of it (kept, undone, made into cells). No
widget: a notebook saved and reopened without a kernel reads the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..course import FollowUp, Provenance, runs_bundle
from ..course.provenance import CallRecord, SnippetRecord
from .render import no_math

if TYPE_CHECKING:
    from .records import CallRecord as SeenCall
    from .runner import Job
    from .session import Session

__all__ = ["provenance_of", "report", "session_runs"]


def _decision(record: SeenCall) -> str:
    decision = record.decision
    if decision is None:
        return "not asked"
    if not decision.approved:
        return "rule" if decision.by == "rule" else "denied"
    if decision.by in ("rule", "always"):
        return "rule"
    if decision.by in ("auto", "script"):
        return "auto"
    if decision.arguments is not None or record.changes:
        return "edited"
    return "approved"


def _mode(model: str) -> str:
    """From the model's name as the run reported it (a replay names itself "replay of …"; the
    offline stand-ins have no provider prefix)."""
    if model.startswith("replay of"):
        return "replayed"
    return "live" if ":" in model else "offline"


def provenance_of(job: Job, session: Session) -> Provenance | None:
    """The record of one ended run: the one its output carries when the front end made one,
    else one made from what the session saw of the run."""
    made = getattr(job, "provenance", None)
    if isinstance(made, Provenance):
        return made
    transcript = getattr(job.view, "transcript", None)
    if transcript is None or not transcript.run_id:
        return None
    model = transcript.model or ""
    calls = tuple(
        CallRecord(r.name, _decision(r), r.status)  # type: ignore[arg-type]
        for r in transcript.calls.values()
        if r.repeat_of is None
    )
    snippets: tuple[SnippetRecord, ...] = ()
    kit = session.kernel
    if kit is not None:
        snippets = tuple(
            SnippetRecord(s.code[:2000], "undone" if s.undone else "kept")
            for s in kit.snippets(transcript.run_id)
        )
    result = job.result
    return Provenance(
        run_id=transcript.run_id,
        prompt=job.prompt[:500],
        model=model[:200] or None,
        provider=model.split(":", 1)[0][:64] if ":" in model else None,
        mode=_mode(model),  # type: ignore[arg-type]
        recording=transcript.saved_to,
        input_tokens=transcript.usage.input_tokens,
        output_tokens=transcript.usage.output_tokens,
        requests=transcript.steps,
        seconds=transcript.elapsed,
        stop_reason=(transcript.stop_reason or (result.stop_reason if result else "running"))[:64],
        calls=calls[:200],
        calls_total=len(calls),
        snippets=snippets[:200],
        snippets_total=len(snippets),
    )


def session_runs(session: Session) -> tuple[list[Provenance], list[FollowUp]]:
    """The session's ended runs, oldest first, and what later commands did with their code."""
    with session._lock:
        jobs = list(session.jobs)
    runs = [p for job in jobs if job.done for p in [provenance_of(job, session)] if p is not None]
    follow_ups = [f for f in getattr(session, "follow_ups", ()) if isinstance(f, FollowUp)]
    return runs, follow_ups


def report(session: Session, _shell: Any = None, _words: list[str] | None = None) -> None:
    """Show the session's runs as one static output (``%agent report``)."""
    from IPython.display import display

    runs, follow_ups = session_runs(session)
    display(no_math(runs_bundle(runs, follow_ups)), raw=True)  # type: ignore[no-untyped-call]
