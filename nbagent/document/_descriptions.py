"""What the model is told of each notebook tool: its title, description and input schema."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .limits import NotebookLimits

__all__ = ["DESCRIPTIONS", "SCHEMAS", "TITLES"]


def _paragraph(text: str) -> str:
    return " ".join(text.split())


TITLES = {
    "read_notebook": "Read the notebook",
    "read_cell": "Read one cell",
    "insert_cell": "Propose a new cell",
    "edit_cell": "Propose an edit of a cell",
    "delete_cell": "Propose deleting a cell",
    "move_cell": "Propose moving a cell",
    "run_cell": "Run a cell in your kernel",
}

_PROPOSAL = """It is a proposal: the person sees it as a diff and accepts or rejects it (you read
their reason); only an accepted one changes the notebook."""

DESCRIPTIONS = {
    "read_notebook": _paragraph(
        """Read the person's open notebook: each cell's id, type (code, markdown, raw),
        execution count, source and a short summary of its outputs and errors; which cell the
        person is in ("this cell"; "the cell above" is the one before it) and where the newest
        error is. Long notebooks are shown in part: the rest is listed by id, and start=N shows
        them from cell N. Name cells by their id, never by number. Needs no approval."""
    ),
    "read_cell": _paragraph(
        """Read one cell of the notebook whole: its source and its outputs (errors with the end
        of their traceback). Read a cell whole before you propose to edit it. Needs no
        approval."""
    ),
    "insert_cell": _paragraph(
        f"""Propose a new cell: its type and source, and where it goes (after_cell_id, or
        before_cell_id; neither: at the end). {_PROPOSAL} You learn the new cell's id."""
    ),
    "edit_cell": _paragraph(
        f"""Propose a new source for one cell (the whole source, as it should read), and
        optionally a new type. Read the cell first: the edit is made against the source you
        read, and if the person changed the cell since, it is not applied (you get the source
        as it is now). {_PROPOSAL}"""
    ),
    "delete_cell": _paragraph(f"""Propose deleting one cell you have read. {_PROPOSAL}"""),
    "move_cell": _paragraph(
        f"""Propose moving one cell you have read after another (after_cell_id) or before one
        (before_cell_id). {_PROPOSAL}"""
    ),
    "run_cell": _paragraph(
        """Run one code cell of the notebook in the person's kernel, as its own source reads
        now (edit it first if it needs fixing). You get what it printed, its value, its error
        and the names it changed; its outputs appear in the cell. The person sees the code and
        usually approves each run first."""
    ),
}

_ID = {"type": "string", "minLength": 1, "maxLength": 64, "pattern": "^[A-Za-z0-9_-]+$"}
_TYPE = {"type": "string", "enum": ["code", "markdown", "raw"]}


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _source(limits: NotebookLimits) -> dict[str, Any]:
    return {
        "type": "string",
        "maxLength": limits.max_source_chars,
        "description": "The cell's whole source, as it should read.",
    }


SCHEMAS: dict[str, Callable[[NotebookLimits], dict[str, Any]]] = {
    "read_notebook": lambda limits: _object(
        {
            "start": {
                "type": "integer",
                "minimum": 1,
                "description": "Show the cells from this number on (default 1).",
            }
        },
        [],
    ),
    "read_cell": lambda limits: _object(
        {"cell_id": {**_ID, "description": "The cell's id."}}, ["cell_id"]
    ),
    "insert_cell": lambda limits: _object(
        {
            "source": _source(limits),
            "cell_type": {**_TYPE, "description": "code (the default), markdown or raw."},
            "after_cell_id": {**_ID, "description": "The id of the cell it goes after."},
            "before_cell_id": {**_ID, "description": "The id of the cell it goes before."},
        },
        ["source"],
    ),
    "edit_cell": lambda limits: _object(
        {
            "cell_id": {**_ID, "description": "The id of the cell to edit."},
            "source": _source(limits),
            "cell_type": {**_TYPE, "description": "A new type, if it changes."},
        },
        ["cell_id", "source"],
    ),
    "delete_cell": lambda limits: _object(
        {"cell_id": {**_ID, "description": "The id of the cell to delete."}}, ["cell_id"]
    ),
    "move_cell": lambda limits: _object(
        {
            "cell_id": {**_ID, "description": "The id of the cell to move."},
            "after_cell_id": {**_ID, "description": "The id of the cell it goes after."},
            "before_cell_id": {**_ID, "description": "The id of the cell it goes before."},
        },
        ["cell_id"],
    ),
    "run_cell": lambda limits: _object(
        {"cell_id": {**_ID, "description": "The id of the code cell to run."}}, ["cell_id"]
    ),
}
