"""The provenance of a ``%agent serve`` session: what an external agent asked, and what it got.

A serving session is recorded like a run (mode ``served``): one
:class:`~nbagent.course.provenance.Provenance` whose calls are the served calls, each with its
tool, how it was decided (from the serving cell's transcript, where the cards were), how it
ended, its arguments as JSON and a summary of its result, both cut short and redacted. The
serving cell's final output carries it (``metadata["nbagent"]["provenance"]``), so a saved
notebook, ``%agent report`` and the class report read it like any run's record.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ...course.provenance import MAX_ASKED, MAX_ITEMS, CallRecord, Provenance
from ...redact import redact_secrets
from .courserecord import _decision

__all__ = ["served_record"]


def _flat(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_ASKED else flat[: MAX_ASKED - 1] + "…"


def _arguments(arguments: Any) -> str:
    try:
        text = json.dumps(arguments, ensure_ascii=False, separators=(", ", ": "), default=str)
    except (TypeError, ValueError, RecursionError):
        text = "(arguments not shown)"
    return _flat(redact_secrets(text[: MAX_ASKED * 4]))


def _result(record: Any) -> str:
    result = record.result
    if result is None:
        return "(no answer yet)" if record.status == "waiting" else "(no answer)"
    text = result.text if isinstance(getattr(result, "text", None), str) else ""
    images = len(getattr(result, "images", ()) or ())
    if images:
        text = f"{text} [{images} image(s)]".strip()
    if not text:
        text = "(no text)"
    return _flat(redact_secrets(text[: MAX_ASKED * 4]))


def served_record(served: Any, *, until: float | None = None) -> Provenance:
    """The record of ``served`` (a :class:`.serving.ServedSession`, which imports this module)
    as it is now: its calls so far, the oldest 200 listed."""
    calls = served.calls
    records = list(calls.records)
    transcript = getattr(served.view, "transcript", None)
    forms = getattr(transcript, "serving", None)
    shown: Any = getattr(transcript, "calls", {}) or {}
    if forms is not None and hasattr(forms, "cards"):
        shown = forms.cards(transcript)  # folded calls keep their decisions
    listed = []
    for record in records[:MAX_ITEMS]:
        card = shown.get(record.call.id)
        decision = _decision(getattr(card, "decision", None)) if card is not None else "not asked"
        listed.append(
            CallRecord(
                tool=record.call.name,
                decision=decision,  # type: ignore[arg-type]
                status=record.status,
                arguments=_arguments(record.arguments),
                result=_result(record),
            )
        )
    started = getattr(served, "started", None)
    seconds = max(0.0, (until or time.monotonic()) - started) if started else 0.0
    tools = ", ".join(served.tool_names()[:20])
    approval = "approved without asking (--approve auto)" if served.auto else "approval as in a run"
    from .coursegate import current

    course = current(served.session.shell)
    return Provenance(
        run_id=calls.id,
        policy_digest=course.digest,
        policy_source=course.source,
        prompt=redact_secrets(
            f"tool calls from an MCP client at {served.url} ({approval}; tools: {tools or 'none'})"
        ),
        model=None,
        provider=None,
        mode="served",
        seconds=seconds,
        stop_reason="serving" if served.running else "stopped",
        calls=tuple(listed),
        calls_total=max(len(records), int(getattr(calls, "_steps", 0) or 0)),
    )
