"""A helper agent's run (``agent.as_tool``) inside the saved card of the call that ran it.

When a run's widget is replaced by static output (:mod:`.static`), each call that ran a helper
keeps the helper's own run under its result: its prompt, its text, its own calls and their
results, its answer and footer, rendered exactly as a run of its own is. In the HTML it is a
``<details>`` section (open, so the saved notebook reads as the live card did, and folds away
with a click), indented with a rule at its left; in the Markdown a quote; in the plain text each
line indented under the call. A helper of a helper nests once more, inside its caller's run.

The request view ("What the model saw, step by step") shows each helper's requests under the
step whose answer made the call (:func:`nested_requests`), nested again for a helper's helper.

The pieces are rendered by the caller (``render``: one run's pieces as (html, markdown, plain)),
so this room imports no renderer and the two never import each other.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from typing import Any

from ..shown.exchanges import exchanges_html

__all__ = ["nested_forms", "nested_requests"]

#: One rendered piece of a run, in its three forms: (HTML, Markdown, plain text).
Forms = tuple[str, str, str]

_SUMMARY_STYLE = "font-size:0.85em;opacity:0.8;margin-top:4px;cursor:pointer"
_BODY_STYLE = (
    "margin:2px 0 2px 0.4em;padding-left:0.8em;border-left:2px solid rgba(128,128,128,0.5)"
)
#: How the plain text indents a helper's run under its call.
_INDENT = "    "


def nested_forms(
    name: str, runs: Sequence[Any], render: Callable[[Any], list[Forms]]
) -> Forms | None:
    """The helper runs of one call (``runs``: their transcripts, in the order they began) as
    the three forms to append to the call's card; None when the call ran no helper."""
    if not runs:
        return None
    htmls, markdowns, plains = [], [], []
    for number, run in enumerate(runs, 1):
        pieces = render(run)
        label = f"{name}: its own run" + (f" ({number} of {len(runs)})" if len(runs) > 1 else "")
        body = "".join(piece[0] for piece in pieces)
        htmls.append(
            f'<details open class="nbagent-nested"><summary style="{_SUMMARY_STYLE}">'
            f'{html.escape(label)}</summary><div style="{_BODY_STYLE}">{body}</div></details>'
        )
        written = "\n\n".join(piece[1] for piece in pieces if piece[1])
        quoted = "\n".join(f"> {line}" if line else ">" for line in written.splitlines())
        markdowns.append(f"> *{label}*\n>\n{quoted}")
        said = "\n\n".join(piece[2] for piece in pieces if piece[2])
        lines = [f"  ┆ {label}"] + [
            f"{_INDENT}{line}" if line else "" for line in said.splitlines()
        ]
        plains.append("\n".join(lines))
    return "".join(htmls), "\n\n".join(markdowns), "\n".join(plains)


def nested_requests(transcript: Any) -> Callable[[str], str]:
    """For the request view of ``transcript``: the requests of the helper runs of a call, by
    the call's id (each its own fold, their helpers' under them in turn)."""

    def shown(call_id: str) -> str:
        record = transcript.calls.get(call_id)
        name = record.name if record is not None else "a helper"
        return "".join(
            '<div style="margin-left:0.8em">'
            + exchanges_html(run.exchanges, nested_requests(run), title=f"{name}: its own requests")
            + "</div>"
            for run in transcript.helpers.get(call_id, ())
        )

    return shown
