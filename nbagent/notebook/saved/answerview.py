"""A typed run's answer (``output=``) for the person: a table where its shape is one, else JSON.

An object of plain values is a two-column table (field, value); a list of such objects is a
table with a column per field; anything else is indented JSON. While the answer streams
(:func:`filling_html`) an object is a field/value table whatever its values (a nested one
shown as JSON in its cell), filling in as the fields arrive. Every value is escaped and
credential-shaped text hidden (the saved notebook keeps this), and the shown size is bounded.
"""

from __future__ import annotations

import html
import json
from typing import Any

from ...redact import redact_secrets
from ..shown.render import fenced, shorten

__all__ = ["answer_forms", "filling_html"]

MAX_ROWS = 50
MAX_COLUMNS = 20
MAX_JSON = 20_000
_CELL = 300
_TABLE = "border-collapse:collapse;margin:4px 0"
_TD = "border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top"
_LABEL = "font-weight:600;margin-top:6px"
_FILLING = "font-weight:600;margin-top:6px;opacity:0.7"


def answer_forms(value: Any) -> tuple[str, str, str]:
    """The answer as HTML, Markdown and plain text."""
    text = shorten(redact_secrets(_json(value, indent=1)), MAX_JSON)
    table = _table(value)
    body = table if table is not None else f'<pre style="margin:2px 0">{_esc(text)}</pre>'
    head = f'<div style="{_LABEL}">Answer</div>'
    return head + body, "**Answer**\n\n" + fenced(text, "json"), f"Answer:\n{text}"


def filling_html(value: Any, text: str = "", state: str = "filling in…") -> str:
    """A typed answer as it streams: ``value`` is the best parse of what arrived (None when
    nothing parses yet: then the ``text`` that arrived is shown as it is). Never validated."""
    head = f'<div style="{_FILLING}">Answer <small>({html.escape(state)})</small></div>'
    if value is None:
        said = shorten(text, MAX_JSON) if text.strip() else "…"
        return head + f'<pre style="margin:2px 0">{_esc(said)}</pre>'
    table = _table(value, partial=True)
    if table is not None:
        return head + table
    said = shorten(_json(value, indent=1), MAX_JSON)
    return head + f'<pre style="margin:2px 0">{_esc(said)}</pre>'


def _table(value: Any, partial: bool = False) -> str | None:
    if isinstance(value, dict) and value and (partial or all(_plain(v) for v in value.values())):
        pairs = list(value.items())[:MAX_ROWS]
        body = "".join(f"<tr><th style='{_TD}'>{_esc(k)}</th>{_td(v)}</tr>" for k, v in pairs)
        return f"<table style='{_TABLE}'><tbody>{body}</tbody></table>{_more(len(value))}"
    if (
        isinstance(value, list)
        and value
        and all(
            isinstance(row, dict) and (partial or all(_plain(v) for v in row.values()))
            for row in value
        )
    ):
        columns: list[str] = []
        for row in value[:MAX_ROWS]:
            columns += [str(k) for k in row if str(k) not in columns]
        columns = columns[:MAX_COLUMNS]
        head = "".join(f"<th style='{_TD}'>{_esc(c)}</th>" for c in columns)
        rows = "".join(
            "<tr>" + "".join(_td(row.get(c, "")) for c in columns) + "</tr>"
            for row in value[:MAX_ROWS]
        )
        return (
            f"<table style='{_TABLE}'><thead><tr>{head}</tr></thead><tbody>{rows}</tbody>"
            f"</table>{_more(len(value))}"
        )
    return None


def _plain(value: Any) -> bool:
    return (
        value is None
        or isinstance(value, (str, int, float, bool))
        or (
            isinstance(value, list)
            and len(value) <= 20
            and all(v is None or isinstance(v, (str, int, float, bool)) for v in value)
        )
    )


def _td(value: Any) -> str:
    shown = value if isinstance(value, str) else _json(value)
    return f"<td style='{_TD}'>{_esc(shorten(shown, _CELL))}</td>"


def _more(count: int) -> str:
    return f"<p><small>{count:,} in all, {MAX_ROWS} shown</small></p>" if count > MAX_ROWS else ""


def _json(value: Any, indent: int | None = None) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, indent=indent, default=str)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def _esc(text: Any) -> str:
    return html.escape(redact_secrets(str(text)), quote=True)
