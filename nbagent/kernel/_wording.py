"""What the kernel tools say: to the model (each tool's description and input schema) and to
the person (the note on a running snippet's card, the warning of ``--approve auto``)."""

from __future__ import annotations

from typing import Any

__all__ = [
    "AUTO_WARNING",
    "DESCRIBE_DESCRIPTION",
    "DESCRIBE_SCHEMA",
    "LIST_DESCRIPTION",
    "LIST_SCHEMA",
    "RUNNING_NOTE",
    "RUN_DESCRIPTION",
    "RUN_SCHEMA",
]

#: What ``--approve auto`` with the kernel tools allows, said once where it is set.
AUTO_WARNING = (
    "--approve auto with --kernel: the agent's Python code runs in this kernel without asking "
    "you first, with your rights (your files, the network, every variable). Undo restores "
    "variables, not files or data sent."
)


#: Shown on a snippet's card while it runs: a snippet that never returns is the person's to stop.
RUNNING_NOTE = (
    "running in your kernel: Stop or Kernel > Interrupt stops it (a call that blocks in C, "
    "such as time.sleep, stops when it returns)"
)


def _paragraph(text: str) -> str:
    return " ".join(text.split())


RUN_DESCRIPTION = _paragraph(
    """Run Python code in the person's Jupyter kernel, in the notebook's own namespace:
    variables the notebook defined are there, and what the code defines stays there for later
    snippets and for the person. Use it to load, clean, analyse and plot data the person has or
    asks about. You get back what it printed, displays (tables as text), figures as images, the
    value of a last expression, the traceback of an error (fix it and try again), and the names
    it added, rebound, deleted or changed. Keep each snippet short and focused on one step;
    import what you use. The person sees the code and usually approves each snippet before it
    runs; input() is not available. Prefer list_variables and describe_variable to look at data
    without running code."""
)

LIST_DESCRIPTION = _paragraph(
    """List the variables of the person's notebook: name, type and size (shape or length, or
    the value of a number). Runs no code; needs no approval."""
)

DESCRIBE_DESCRIPTION = _paragraph(
    """Describe one variable of the person's notebook without running code: a DataFrame's
    shape, columns, dtypes and first rows; an array's shape, dtype and a few values; other
    objects' type and a bounded repr. Needs no approval."""
)

RUN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "code": {
            "type": "string",
            "minLength": 1,
            "description": "The Python code to run, as in a notebook cell.",
        },
        "purpose": {
            "type": "string",
            "maxLength": 200,
            "description": "What this step does, in a few words (shown to the person).",
        },
    },
    "required": ["code"],
    "additionalProperties": False,
}

LIST_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}

DESCRIBE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 200}},
    "required": ["name"],
    "additionalProperties": False,
}
