"""The bounds of the notebook tools: what is read, what the model is sent, what may be written."""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["NotebookLimits"]


@dataclass(frozen=True)
class NotebookLimits:
    """Bounds of the notebook tools (defaults in parentheses).

    ``max_cells`` (2,000): cells read from a notebook; a larger one is read that far, and the
    model is told so. ``max_read_chars`` (40,000): characters one ``read_notebook`` sends the
    model, all of it (sources and outputs, then the cells past that share listed by id, one line
    each, then where to read on).
    ``max_cell_chars`` (50,000): characters of one cell's source that ``read_cell`` sends; a
    longer cell is cut, and cannot be edited (the model never saw it whole).
    ``max_source_chars`` (100,000): the longest source a proposal may write.
    ``max_overview_chars`` (4,000): characters of one cell's source ``read_notebook`` shows.
    ``max_output_chars`` (1,500): characters of one cell's outputs the model reads;
    ``max_outputs`` (20): outputs of one cell looked at.
    ``max_proposals`` (100): proposals (insert, edit, delete, move, run) one run may make; more
    are refused before anyone is asked.
    ``page_timeout`` (5 s): how long the notebook's page may take to answer one request.
    ``undo_chars`` (5,000,000): characters kept to undo edits (sources, deleted cells, outputs),
    all runs together; the oldest runs' go first (and say so when undone).
    ``max_runs`` (200): runs whose accepted edits are remembered for undo.
    """

    max_cells: int = 2_000
    max_read_chars: int = 40_000
    max_cell_chars: int = 50_000
    max_source_chars: int = 100_000
    max_overview_chars: int = 4_000
    max_output_chars: int = 1_500
    max_outputs: int = 20
    max_proposals: int = 100
    page_timeout: float = 5.0
    undo_chars: int = 5_000_000
    max_runs: int = 200

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name == "page_timeout":
                ok = isinstance(value, (int, float)) and not isinstance(value, bool)
                if not ok or not 0 < value < float("inf"):
                    raise ValueError("NotebookLimits.page_timeout must be a positive number")
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"NotebookLimits.{item.name} must be a positive integer")
