"""Run a course with nbagent: the teacher's policy, the provenance each cell carries, the cost.

This room holds what a course adds to a notebook: the policy file a teacher ships beside the
notebooks (:mod:`.policy`), what a run's tokens cost (:mod:`._prices`), and the provenance
record every ``%agent`` cell's output carries under the ``"nbagent"`` metadata key
(:mod:`.provenance`), which the class report reads back from submitted notebooks.

May import: the core (ground, vocabulary, :mod:`nbagent.schema`, :mod:`nbagent.inspection`,
:mod:`nbagent.approvals`, :mod:`nbagent.events`) and :mod:`nbagent.recording`; never IPython,
ipywidgets or the HTTP client. The front ends import it, never the other way round.
"""

from __future__ import annotations

from .provenance import (
    CallRecord,
    FollowUp,
    Provenance,
    ProvenanceError,
    SnippetRecord,
    follow_up_from_metadata,
    from_metadata,
    is_follow_up,
    read_output,
    sha256_digest,
)

__all__ = [
    "CallRecord",
    "FollowUp",
    "Provenance",
    "ProvenanceError",
    "SnippetRecord",
    "follow_up_from_metadata",
    "from_metadata",
    "is_follow_up",
    "read_output",
    "sha256_digest",
]
