"""The notebook as the agent's workspace: its cells read, edits proposed per cell, cells run.

The person's notebook is a :class:`Document` (the open page, through
:mod:`nbagent.notebook.editing`, or a :class:`NotebookDocument` held in memory). The
:class:`NotebookToolkit` (:func:`notebook_tools`) gives a run the tools that read it
(``read_notebook``, ``read_cell``) and propose changes to it (``insert_cell``, ``edit_cell``,
``delete_cell``, ``move_cell``) or run one of its cells (``run_cell``): every change is a
proposal the person accepts or rejects, as a per-cell diff; the person's own edits always win;
undo takes back a run's edits as one step. In a notebook: ``%agent --notebook …``.

May import (docs/architecture.md): the ground, the schema, the vocabulary, and the core
rooms up to :mod:`nbagent.events`; never a front end, never IPython or ipywidgets.
"""

from __future__ import annotations

from .cells import Cell, Output, Snapshot
from .changes import Applied, DeleteCell, EditCell, InsertCell, MoveCell, SetOutputs, StampCell
from .journal import NotebookUndoReport
from .limits import NotebookLimits
from .memory import NotebookDocument
from .protocol import Document, NotebookUnavailableError
from .toolkit import PROPOSALS, NotebookToolkit, notebook_tools

__all__ = [
    "PROPOSALS",
    "Applied",
    "Cell",
    "DeleteCell",
    "Document",
    "EditCell",
    "InsertCell",
    "MoveCell",
    "NotebookDocument",
    "NotebookLimits",
    "NotebookToolkit",
    "NotebookUndoReport",
    "NotebookUnavailableError",
    "Output",
    "SetOutputs",
    "Snapshot",
    "StampCell",
    "notebook_tools",
]
