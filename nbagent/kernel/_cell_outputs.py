"""A snippet's outputs as a notebook cell's: what a cell the agent ran shows in its output area.

``run_cell`` (the notebook tools) runs a cell's source as a snippet; its cell then shows what
the snippet printed and displayed, its figures, its last value and its error, as nbformat
outputs, in the order they came. Every text passes :func:`~nbagent.redact.redact_secrets`
(the saved notebook keeps them), every value is bounded (:data:`MAX_VALUE_CHARS`), and only
the forms a cell shows are kept: text, Markdown, HTML, PNG, JPEG, SVG and JSON.
"""

from __future__ import annotations

import base64
from typing import Any

from ..content import ImagePart, Shown, Table
from ..redact import redact_secrets
from ._capture import Capture
from ._execute import Ending

__all__ = ["MAX_VALUE_CHARS", "Outputs", "cell_outputs"]

#: Where ``KernelToolkit.run_code`` puts a snippet's outputs as a cell's (None: nowhere).
Outputs = list[dict[str, Any]] | None

#: The longest value one output keeps per form (an image's base64 included).
MAX_VALUE_CHARS = 2_000_000
_FORMS = (
    "text/plain",
    "text/markdown",
    "text/html",
    "image/png",
    "image/jpeg",
    "image/svg+xml",
    "application/json",
)
_TEXT_FORMS = ("text/plain", "text/markdown", "text/html", "image/svg+xml")


def _bounded(value: str) -> str:
    return value if len(value) <= MAX_VALUE_CHARS else value[:MAX_VALUE_CHARS] + "…"


def _data(bundle: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for form in _FORMS:
        value = bundle.get(form)
        if isinstance(value, bytes) and form.startswith("image/") and form != "image/svg+xml":
            value = base64.b64encode(value).decode("ascii")
        if isinstance(value, str):
            data[form] = redact_secrets(_bounded(value)) if form in _TEXT_FORMS else _bounded(value)
        elif form == "application/json" and isinstance(value, (dict, list)):
            data[form] = value
    return data


def _table_text(table: Table) -> str:
    rows = [table.columns, *table.rows]
    widths = [
        max(len(str(r[i])) if i < len(r) else 0 for r in rows) for i in range(len(table.columns))
    ]
    return "\n".join(
        "  ".join(str(cell).ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows
    )


def _out_text(pieces: list[Shown]) -> str | None:
    for piece in pieces:
        if piece.label != "Out" and not piece.label.startswith("Out:"):
            continue
        if isinstance(piece.value, Table):
            return _table_text(piece.value)
        return str(piece.value)
    return None


def cell_outputs(
    capture: Capture, ending: Ending, figures: list[ImagePart], pieces: list[Shown]
) -> list[dict[str, Any]]:
    """The nbformat outputs of one snippet (see the module); ``pieces``: what the person was
    shown of it, for its last value's text."""
    outputs: list[dict[str, Any]] = []
    for item in capture.items:
        if item.kind in ("stdout", "stderr"):
            text = redact_secrets(item.text)
            if outputs and outputs[-1].get("name") == item.kind:
                outputs[-1]["text"] += text
            else:
                outputs.append({"output_type": "stream", "name": item.kind, "text": text})
            continue
        data = _data(item.data)
        if data:
            outputs.append({"output_type": "display_data", "data": data, "metadata": {}})
    for figure in figures:
        encoded = base64.b64encode(figure.data).decode("ascii")
        outputs.append(
            {
                "output_type": "display_data",
                "data": {
                    figure.mime_type: encoded,
                    "text/plain": f"<Figure {figure.width}x{figure.height}>",
                },
                "metadata": {},
            }
        )
    value = _out_text(pieces) if ending.has_value and ending.value is not None else None
    if value is not None:
        outputs.append(
            {
                "output_type": "execute_result",
                "data": {"text/plain": redact_secrets(value)},
                "metadata": {},
                "execution_count": None,
            }
        )
    if ending.error:
        lines = redact_secrets(ending.error).rstrip("\n").splitlines()
        last = lines[-1] if lines else ""
        name, _, said = last.partition(": ")
        outputs.append(
            {
                "output_type": "error",
                "ename": ending.error_name or name or "Error",
                "evalue": said if name == (ending.error_name or name) else last,
                "traceback": lines[-200:],
            }
        )
    elif ending.interrupted:
        outputs.append(
            {
                "output_type": "error",
                "ename": "KeyboardInterrupt",
                "evalue": "",
                "traceback": ["KeyboardInterrupt: the agent's run of this cell was interrupted"],
            }
        )
    return outputs
