"""The record a course run leaves: its provenance (what the outputs carry), and what it spent
(counted per kernel session and, in a file beside the recordings, per notebook).

:mod:`.coursegate` checks a run before it starts; this module writes down what it was once it
ended (or was refused), in the shape :mod:`nbagent.course.provenance` defines.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..._prices import cost_usd, usd_text
from ...course.provenance import Provenance, utc_now
from ...errors import RequestRefusedError
from ...generation import Usage
from ...loop._ids import new_id
from ...redact import redact_secrets
from ..core.recordings import model_text

if TYPE_CHECKING:
    from ..core.session import Session

__all__ = [
    "Spent",
    "count_request",
    "finished",
    "map_record",
    "mode_of",
    "model_text",
    "notebook_spent",
    "refusal_record",
    "run_record",
    "session_spent",
]

_USAGE_FILE = ".course-usage"  # in the recordings folder: not *.json, so not a recording
_lock = threading.Lock()


# --- spending, per kernel session and per notebook ---------------------------------------


@dataclass
class Spent:
    tokens: int = 0
    requests: int = 0
    usd: float = 0.0

    def add(self, tokens: int, requests: int, usd: float | None) -> None:
        self.tokens += tokens
        self.requests += requests
        self.usd += usd or 0.0


_sessions: dict[int, Spent] = {}


def session_spent(session: Session) -> Spent:
    with _lock:
        return _sessions.setdefault(id(session), Spent())


def _usage_path(session: Session) -> Path:
    return session.recordings.folder / _USAGE_FILE


def notebook_spent(session: Session, course: Any) -> Spent:
    """What this notebook's runs spent, in every kernel session (a file beside the
    recordings: a student can delete it, which the honest limits of the how-to say)."""
    try:
        data = json.loads(_usage_path(session).read_text(encoding="utf-8")[:1_000_000])
        entry = data.get(course.notebook_key, {}) if isinstance(data, dict) else {}
        return Spent(
            int(entry.get("tokens", 0)), int(entry.get("requests", 0)), float(entry.get("usd", 0))
        )
    except (OSError, ValueError, TypeError, AttributeError):
        return Spent()


def count_request(session: Session, course: Any, usage: Usage | None, requests: int,
                  usd: float | None) -> None:  # fmt: skip
    """Count what a model request spent against the session's and (with a policy that bounds
    the notebook) the notebook's totals: the gate on the request path
    (:mod:`.requestgate`) counts every request of the kernel, whatever route sent it."""
    tokens = usage.total_tokens if usage is not None else 0
    session_spent(session).add(tokens, requests, usd)
    if course is None or course.policy is None or course.rules.budget("notebook").empty:
        return
    path = _usage_path(session)
    with _lock:
        try:
            data = json.loads(path.read_text(encoding="utf-8")[:1_000_000])
            data = data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            data = {}
        spent = notebook_spent(session, course)
        spent.add(tokens, requests, usd)
        data[course.notebook_key] = {
            "tokens": spent.tokens,
            "requests": spent.requests,
            "usd": spent.usd,
        }
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(data, sort_keys=True), encoding="utf-8")
        except OSError:
            pass  # counted for this session; the notebook's total could not be kept


# --- the record ------------------------------------------------------------------------------


def refusal_record(
    course: Any, refusal: Any, prompt: str, run_id: str, model: str | None
) -> Provenance:
    """The provenance a refused cell carries: no model was asked."""
    provider = model.split(":", 1)[0] if model and ":" in model else None
    return Provenance(
        run_id=run_id,
        prompt=prompt,
        model=model,
        provider=provider,
        mode="offline",
        policy_digest=course.digest,
        policy_source=course.source,
        ai_off=refusal.ai_off,
        refused=redact_secrets(refusal.sentence),
        stop_reason="refused",
        cost_usd=0.0,
        rule=getattr(refusal, "rule", None),
        at=utc_now(),
    )


def _decision(decision: Any) -> str:
    if decision is None:
        return "not asked"
    by = getattr(decision, "by", "")
    if by in ("rule", "always"):
        return "rule"
    if by == "auto":
        return "auto"
    if not decision.approved:
        return "denied"
    return "edited" if getattr(decision, "arguments", None) is not None else "approved"


def mode_of(generator: Any) -> str:
    from ...recording import ReplayGenerator

    if isinstance(generator, ReplayGenerator):
        return "replayed"
    kind = type(getattr(generator, "inner", generator)).__name__
    return "offline" if kind in ("OfflineModel", "ScriptedModel", "FunctionModel") else "live"


def run_record(session: Session, job: Any, course: Any) -> Provenance | None:
    """The provenance of a finished run (None: it never started)."""
    from ...course.provenance import CallRecord, SnippetRecord, sha256_digest

    transcript = getattr(job.view, "transcript", None)
    run = job.run
    if transcript is None or run is None:
        return None
    generator = getattr(job, "generator", None)
    mode = mode_of(generator)
    external = getattr(generator, "external_agent", None)  # %agent --acp: its own model
    model = external if isinstance(external, str) else model_text(session.model_spec)
    if model is None:
        model = str(getattr(generator, "model", "") or type(generator).__name__)[:200] or None
    provider = model.split(":", 1)[0] if model and ":" in model else None
    replayed = getattr(generator, "recording", None) if mode == "replayed" else None
    recording_path = getattr(job, "replayed_from", None) or job.saved
    recording_digest = None
    if recording_path:
        try:  # every recording is in the store's folder, whatever path is shown
            with open(session.recordings.folder / Path(recording_path).name, "rb") as handle:
                recording_digest = sha256_digest(handle.read(64 * 1024 * 1024))
        except OSError:
            recording_digest = None
    del replayed
    usage = transcript.usage
    cost = cost_usd(generator, usage) if generator is not None else None
    result = job.result
    text = result.text if result is not None else ""
    snippets = []
    kit = session.kernel
    if kit is not None and run.id:
        for snippet in kit.snippets(run.id):
            snippets.append(SnippetRecord(snippet.code, "undone" if snippet.undone else "kept"))
    calls = [
        CallRecord(record.name, _decision(record.decision), record.status)  # type: ignore[arg-type]
        for record in transcript.calls.values()
    ]
    refusal = getattr(result, "error", None)
    if not isinstance(refusal, RequestRefusedError):
        refusal = None  # a request the course policy refused (on the request path) ends it
    return Provenance(
        run_id=run.id,
        prompt=job.prompt,
        model=model,
        provider=provider,
        mode=mode,  # type: ignore[arg-type]
        recording=recording_path,
        recording_digest=recording_digest,
        policy_digest=course.digest if course else None,
        policy_source=course.source if course else None,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        requests=int(getattr(run, "_requests", 0)),
        cost_usd=cost,
        seconds=transcript.elapsed,
        stop_reason="refused" if refusal else transcript.stop_reason or "failed",
        calls=tuple(calls),
        snippets=tuple(snippets),
        output_digest=sha256_digest(text) if result is not None and not refusal else None,
        refused=redact_secrets(refusal.sentence) if refusal else None,
        ai_off=bool(refusal and refusal.ai_off),
        rule=refusal.rule if refusal else None,
        at=utc_now(transcript.elapsed),
    )


def map_record(
    course: Any, counted: Any, prompt: str, generator: Any, seconds: float, stopped: bool
) -> Provenance:
    """The provenance of one ``%agent map``: every request its rows (and their helpers) made,
    as the request path counted them (``counted``: a :class:`.requestgate.Tally`), in one
    record that stands for its ``rows`` runs."""
    from .coursereach import reach_of

    reach = reach_of(generator)
    models = list(counted.models) or ([reach.model] if reach.model else [])
    model = "; ".join(models)[:200] or None
    if model is None and reach.kind != "live":
        model = str(getattr(generator, "model", "") or type(generator).__name__)[:200] or None
    provider = model.split(":", 1)[0] if model and ":" in model and len(models) == 1 else None
    mode = {"live": "live", "unknown": "live", "replayed": "replayed"}.get(reach.kind, "offline")
    refusal = counted.refused if not counted.runs or not counted.requests else None
    cost = None if counted.unpriced else counted.usd
    return Provenance(
        run_id=new_id("map"),
        prompt=prompt,
        model=model,
        provider=provider,
        mode=mode,  # type: ignore[arg-type]
        policy_digest=course.digest if course else None,
        policy_source=course.source if course else None,
        input_tokens=counted.input_tokens,
        output_tokens=counted.output_tokens,
        requests=counted.requests,
        cost_usd=0.0 if mode != "live" and cost is not None else cost,
        seconds=seconds,
        stop_reason="refused" if refusal else "stopped" if stopped else "finished",
        refused=redact_secrets(refusal.sentence) if refusal else None,
        ai_off=bool(refusal and refusal.ai_off),
        rule=refusal.rule if refusal else None,
        at=utc_now(seconds),
        rows=len(counted.runs),
    )


def finished(session: Session, job: Any, granted: Any) -> None:
    """At a run's end, before its view writes its final output: its record onto the view
    (the outputs carry it) and its cost into the footer. (What it spent was counted against
    the session and the notebook request by request, on the request path.)"""
    course = granted.course if granted is not None else None
    try:
        record = run_record(session, job, course)
    except Exception as exc:  # the record must never cost the run its outputs
        from ...redact import redact_secrets as hide

        job.view.provenance = None
        import logging

        logging.getLogger("nbagent").warning("no provenance record: %s", hide(str(exc)))
        return
    if record is None:
        return
    job.view.provenance = record.to_metadata()
    transcript = getattr(job.view, "transcript", None)
    if transcript is not None and record.mode == "live":  # a replay or offline model: no bill
        transcript.cost_text = usd_text(record.cost_usd)
