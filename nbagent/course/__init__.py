"""Run a course with nbagent: the teacher's policy, the provenance each cell carries, the cost.

This room holds what a course adds to a notebook: the policy file a teacher ships beside the
notebooks (:mod:`.policy`), what a run's tokens cost (:mod:`._prices`), and the provenance
record every ``%agent`` cell's output carries under the ``"nbagent"`` metadata key
(:mod:`.provenance`), which the class report reads back from submitted notebooks
(:mod:`.report`: one row per notebook, with flags; :mod:`.runs_report`: one notebook's runs,
as ``%agent report`` shows them).

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
    StepRecord,
    follow_up_from_metadata,
    from_metadata,
    is_follow_up,
    read_output,
    sha256_digest,
)
from .report import (
    FLAGS,
    NotebookRow,
    class_report,
    read_class,
    write_csv,
    write_html,
)
from .runs_report import NotebookReport, notebook_report, runs_bundle, runs_text

__all__ = [
    "FLAGS",
    "CallRecord",
    "FollowUp",
    "NotebookReport",
    "NotebookRow",
    "Provenance",
    "ProvenanceError",
    "SnippetRecord",
    "StepRecord",
    "class_report",
    "follow_up_from_metadata",
    "from_metadata",
    "is_follow_up",
    "notebook_report",
    "read_class",
    "read_output",
    "runs_bundle",
    "runs_text",
    "sha256_digest",
    "write_csv",
    "write_html",
]
