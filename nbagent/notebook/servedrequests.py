"""The words of a ``%agent serve`` card (header, footer) and its request view: what the client
asked and what went back.

A run's card shows "what the model saw" at each step (:mod:`.exchanges`); a serving session has
no model, so its equivalent is each served call as the client sent it (``tools/call`` with the
tool's name and arguments, which client, when) and the answer it got, as MCP content (the
``CallToolResult`` the server sent: text, images by size, ``isError``, ``structuredContent``)
with how the call was decided. Everything here is client or tool text, so all of it is
escaped and credential-shaped text hidden; long texts are cut, and only the latest
:data:`SHOWN` calls are listed (the rest are in ``%agent report`` and ``.calls.records``).
"""

from __future__ import annotations

import html
import json
import time
from collections.abc import Iterable, Sequence
from typing import Any

from ..redact import redact_secrets
from .render import safe_markdown, shorten
from .wording import seconds

__all__ = [
    "SHOWN",
    "ServingForms",
    "answer_json",
    "decision_words",
    "request_html",
    "requests_forms",
    "served_counts",
]

#: Calls listed in the saved request view (the latest; a live view shows :data:`LIVE`).
SHOWN = 100
LIVE = 50
#: Longest arguments or answer shown for one call.
PART = 2_000
_PRE = (
    "white-space:pre-wrap;line-height:1.35;margin:2px 0;padding:3px 6px;"
    "font-family:var(--jp-code-font-family,"
    "monospace);font-size:var(--jp-code-font-size,12px);background:var(--jp-layout-color2,"
    "#f3f3f3);border-radius:3px"
)
_LABEL = "font-size:0.85em;opacity:0.7;margin-top:4px"
TITLE = "What the client asked and got"
_DIM = "opacity:0.8"


def _esc(text: str, limit: int = PART) -> str:
    return html.escape(shorten(redact_secrets(text), limit), quote=True)


def _pre(text: str) -> str:
    return f'<div style="{_PRE}">{_esc(text)}</div>'


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, indent=1, default=str)[: PART * 4]
    except (TypeError, ValueError, RecursionError):
        return "(not shown: not JSON)"


def answer_json(record: Any) -> str:
    """The MCP answer the client got for ``record`` (a ``ServedRecord``), as JSON text: the
    ``CallToolResult`` the server sends, with each image's data given by its size."""
    result = record.result
    if result is None:
        return "(no answer yet)"
    try:
        from ..mcp._serve_content import mcp_result

        answer = mcp_result(result, getattr(record, "tool", None)).model_dump(
            mode="json", by_alias=True, exclude_none=True
        )
    except Exception:  # no SDK here (a test's records): the same fields, built by hand
        answer = {
            "content": [{"type": "text", "text": result.text}] if result.text else [],
            "isError": bool(result.is_error),
        }
    for block in answer.get("content", ()):
        if isinstance(block, dict) and block.get("type") == "image":
            block["data"] = f"({len(str(block.get('data', ''))):,} characters of base64)"
    return _json(answer)


def decision_words(card: Any) -> str:
    """How a served call was decided, from its card's record (``None``: no card)."""
    decision = getattr(card, "decision", None)
    if decision is None:
        if card is not None and getattr(card, "open", False):
            return "waiting"
        if card is not None and getattr(card, "approval_asked", False):
            return "not decided (it ended while it waited for you)"
        return "ran without asking (it needs no approval)"
    by = getattr(decision, "by", "")
    verdict = "approved" if decision.approved else "denied"
    reason = f": {decision.reason}" if getattr(decision, "reason", None) else ""
    if by in ("rule", "always"):
        return f"{verdict} by a rule{reason}"
    if by == "auto":
        return "approved without asking (--approve auto)"
    edited = " with your edit" if getattr(decision, "arguments", None) is not None else ""
    return f"{verdict}{edited}{reason}"


def number(record: Any, fallback: int) -> int:
    """The call's number in its session (its id ends with it), else ``fallback``."""
    try:
        return int(str(record.call.id).rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return fallback


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def request_html(number: int, record: Any, card: Any) -> str:
    """One served call, folded: its summary line, the request, the answer."""
    call = record.call
    client = record.client or "a client that did not name itself"
    decided = decision_words(card)
    status = "waiting" if record.result is None else record.status
    summary = f"#{number} · {call.name} · {decided} · {status} · {client} · {_when(record.at)}"
    asked = {"method": "tools/call", "params": {"name": call.name, "arguments": record.arguments}}
    elapsed = f" · {record.elapsed:.1f} s" if record.result is not None else ""
    return (
        f'<details><summary style="{_LABEL}">{_esc(summary, 400)}</summary>'
        f'<div style="{_LABEL}"><b>what the client asked</b> · {_esc(client, 100)} · '
        f"{_esc(_when(record.at))}</div>{_pre(_json(asked))}"
        f'<div style="{_LABEL}"><b>what went back</b> · {_esc(decided, 400)}{elapsed}</div>'
        f"{_pre(answer_json(record))}</details>"
    )


def requests_html(records: Sequence[Any], cards: Any, *, limit: int = SHOWN) -> str:
    """The latest ``limit`` served calls under one fold (static: it survives saving)."""
    if not records:
        return ""
    count = len(records)
    first = max(0, count - limit)
    shown = "".join(
        f'<div style="margin-left:0.8em">'
        f"{request_html(number(r, i + 1), r, cards.get(r.call.id))}</div>"
        for i, r in enumerate(list(records)[first:], start=first)
    )
    earlier = (
        f'<div style="{_LABEL}">the {first:,} earlier calls: in <code>%agent report</code> '
        "and <code>.calls.records</code></div>"
        if first
        else ""
    )
    calls = f"{count:,} call{'s' if count != 1 else ''}"
    return (
        f'<details class="nbagent-exchanges nbagent-served-requests"><summary style="{_LABEL}">'
        f"{TITLE} ({calls})</summary>{earlier}{shown}</details>"
    )


def requests_forms(records: Iterable[Any], cards: Any) -> tuple[str, str, str] | None:
    """The request view in its three forms (HTML, Markdown, plain), None with no call."""
    listed = list(records)
    if not listed:
        return None
    count = len(listed)
    said = f"({TITLE.lower()}, {count:,} call{'s' if count != 1 else ''}: in the HTML form)"
    return requests_html(listed, cards), f"*{said}*", said


def served_counts(calls: Iterable[Any]) -> str:
    """How the served calls went, e.g. "3 calls: 1 approved, 1 denied, 1 by a rule; 1 failed"
    (``calls``: the transcript's call records)."""
    decided = dict.fromkeys(("approved", "denied", "by a rule", "without asking"), 0)
    ended = dict.fromkeys(("failed", "cancelled", "waiting"), 0)
    total = 0
    for record in calls:
        total += 1
        decision = record.decision
        by = getattr(decision, "by", "")
        if record.open:
            ended["waiting"] += 1
        elif record.status == "cancelled":
            ended["cancelled"] += 1
        elif record.status in ("error", "timeout") or (
            record.is_error and record.status != "denied"
        ):
            ended["failed"] += 1
        if decision is None or by == "auto":
            if not record.open and not (decision is None and record.approval_asked):
                decided["without asking"] += 1  # (one that waited for you was not decided)
        elif by in ("rule", "always"):
            decided["by a rule"] += 1
        else:
            decided["approved" if decision.approved else "denied"] += 1
    said = f"{total:,} call{'s' if total != 1 else ''}"
    how = ", ".join(f"{n:,} {word}" for word, n in decided.items() if n)
    end = ", ".join(f"{n:,} {word}" for word, n in ended.items() if n)
    if how or end:
        said += ": " + "; ".join(part for part in (how, end) if part)
    return said


class ServingForms:
    """The header, footer and request view of a serving session, for its live card and its
    finished output; ``served`` (a :class:`.serving.ServedSession`) is set once it exists."""

    def __init__(self) -> None:
        self.served: Any = None

    def _tools(self) -> str:
        served = self.served
        names = served.tool_names() if served is not None else []
        if not names:
            return "no tools yet (define some with @nbagent.tool)"
        shown = ", ".join(names[:12]) + (f" and {len(names) - 12} more" if len(names) > 12 else "")
        return shown

    def _clients(self) -> str:
        served = self.served
        names = list(served.calls.clients) if served is not None else []
        if not names:
            return "no client has connected yet"
        last = names[-4:]
        more = f" and {len(names) - 4} more" if len(names) > 4 else ""
        return "used by " + ", ".join(last) + more

    def header(self) -> str:
        """One line: what is served, where, by whom, and how calls are approved."""
        served = self.served
        if served is None:
            return "Starting to serve over MCP…"
        approval = "run without asking (--approve auto)" if served.auto else "asked as in a run"
        if served.running:
            lead = f"Serving over MCP at {served.url}"
        else:
            why = served.reason or "stopped"
            lead = f"Served over MCP at {served.url}, now ended ({why})"
        return f"{lead} · tools: {self._tools()} · {self._clients()} · calls {approval}"

    def head_forms(self) -> tuple[str, str, str]:
        """The header as HTML, Markdown and plain text (the client names are untrusted)."""
        text = redact_secrets(self.header())
        return (
            f'<div style="{_DIM}"><b>MCP:</b> {html.escape(text)}</div>',
            f"> **MCP:** {safe_markdown(text)}",
            f"MCP: {text}",
        )

    def footer(self, transcript: Any) -> str:
        """The calls and how they went, and how long it served; no tokens (no model)."""
        served = self.served
        running = served is not None and served.running
        state = "serving" if running else "stopped"
        counts = served_counts(transcript.calls.values())
        return f"{state} · {counts} · {seconds(transcript.elapsed)}"

    def records(self) -> list[Any]:
        served = self.served
        return list(served.calls.records) if served is not None else []

    def record(self, call_id: str) -> Any:
        served = self.served
        if served is None:
            return None
        return next((r for r in reversed(served.calls.records) if r.call.id == call_id), None)

    def requests_forms(self, transcript: Any) -> tuple[str, str, str] | None:
        return requests_forms(self.records(), transcript.calls)
