"""Run an agent over many inputs: prompts, or a template filled from a table's rows.

:meth:`nbagent.Agent.map` (and ``map_sync``) is the way in; this package holds the parts:
:class:`Batch` (a batch in progress, with :meth:`Batch.cancel`), :class:`BatchProgress` (what
progress views show), :class:`BatchRow` (one input's outcome), :class:`ProgressLine` (the
terminal's progress line) and :class:`BatchInterrupted`. Each run gets a conversation of its
own; at most ``concurrency`` run at once; a failed run is a row with its error, never an
exception that loses the other rows. Finished rows can be checkpointed to a JSON-lines file and
a later batch resumes from it (or from an earlier results table), running only what is not done.
``engine=`` a ``dask.distributed.Client`` spreads the runs over a cluster (:mod:`._dask`).

May import (docs/architecture.md): the ground, the vocabulary, :mod:`nbagent.schema`,
inspection, approvals, events, the loop and the providers' face; never the agent (``Agent.map``
hands itself in) or a front end.
"""

from __future__ import annotations

from typing import Any

from ._batch import DEFAULT_CONCURRENCY, Batch
from ._checkpoint import MAX_LINE_BYTES, LoadedCheckpoint, load_checkpoint
from ._inputs import MAX_FORMAT_CHARS, MAX_INPUTS, MAX_PROMPT_CHARS
from ._progress import BatchProgress, ProgressLine, Reporter, set_default_reporter
from ._rows import COLUMNS, BatchRow, RowStatus

__all__ = [
    "COLUMNS",
    "DEFAULT_CONCURRENCY",
    "MAX_FORMAT_CHARS",
    "MAX_INPUTS",
    "MAX_LINE_BYTES",
    "MAX_PROMPT_CHARS",
    "Batch",
    "BatchInterrupted",
    "BatchProgress",
    "BatchRow",
    "LoadedCheckpoint",
    "ProgressLine",
    "Reporter",
    "RowStatus",
    "load_checkpoint",
    "set_default_reporter",
]


class BatchInterrupted(KeyboardInterrupt):
    """Ctrl-C (a kernel interrupt) stopped :meth:`~nbagent.Agent.map_sync`: it is still a
    ``KeyboardInterrupt``, and ``table`` holds every row finished before it (the rest are
    "cancelled" or "not run")."""

    def __init__(self, message: str, table: Any) -> None:
        super().__init__(message)
        self.table = table
