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

import contextlib
import html
import json
import time
from collections import ChainMap, Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...redact import redact_secrets
from ..shown.exchanges import LABEL_STYLE, escaped, pre_html
from ..shown.render import md_text
from ..shown.wording import seconds

__all__ = [
    "CARDS",
    "SHOWN",
    "FoldedCall",
    "ServingForms",
    "answer_json",
    "decision_words",
    "outcome",
    "request_html",
    "requests_forms",
    "served_counts",
]

#: Calls listed in the saved request view (the latest; a live view shows :data:`LIVE`).
SHOWN = 100
LIVE = 50
#: Calls whose cards stay in the serving cell (the latest; a call waiting for you always
#: stays): older ones fold into one line that counts them by outcome.
CARDS = 50
#: Folded calls whose decision is remembered for the request view and the record (as many as
#: the session keeps records of).
KEEP_FOLDED = 1_000
#: Longest arguments or answer shown for one call.
PART = 2_000
TITLE = "What the client asked and got"
_DIM = "opacity:0.8"
_LABEL = LABEL_STYLE


def _esc(text: str, limit: int = PART) -> str:
    return escaped(text, limit)


def _pre(text: str) -> str:
    return pre_html(text, PART)


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
        from ...mcp._serving.content import mcp_result

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


def _until(day: float, at: float) -> str:
    """The time ``at``: alone on the same day as ``day``, else with its date."""
    same_day = time.localtime(day)[:3] == time.localtime(at)[:3]
    return time.strftime("%H:%M:%S" if same_day else "%Y-%m-%d %H:%M:%S", time.localtime(at))


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


_DECIDED = ("approved", "denied", "by a rule", "without asking")
_ENDED = ("failed", "cancelled", "waiting")


def outcome(record: Any) -> tuple[str | None, str | None]:
    """How one served call went, as the words :func:`served_counts` counts: how it was decided
    (None: not decided, it waited for you and ended) and how it ended (None: it ran)."""
    decision = record.decision
    by = getattr(decision, "by", "")
    ended: str | None = None
    if record.open:
        ended = "waiting"
    elif record.status == "cancelled":
        ended = "cancelled"
    elif record.status in ("error", "timeout") or (record.is_error and record.status != "denied"):
        ended = "failed"
    decided: str | None = None
    if decision is None or by == "auto":
        if not record.open and not (decision is None and record.approval_asked):
            decided = "without asking"  # (one that waited for you was not decided)
    elif by in ("rule", "always"):
        decided = "by a rule"
    else:
        decided = "approved" if decision.approved else "denied"
    return decided, ended


def served_counts(
    calls: Iterable[Any], folded: Mapping[str, int] | None = None, folded_total: int = 0
) -> str:
    """How the served calls went, e.g. "3 calls: 1 approved, 1 denied, 1 by a rule; 1 failed"
    (``calls``: the transcript's call records; ``folded``: the outcomes of the calls folded
    out of it, ``folded_total`` of them)."""
    counted: Counter[str] = Counter(folded or {})
    total = folded_total
    for record in calls:
        total += 1
        for word in outcome(record):
            if word is not None:
                counted[word] += 1
    said = f"{total:,} call{'s' if total != 1 else ''}"
    how = ", ".join(f"{counted[w]:,} {w}" for w in _DECIDED if counted[w])
    end = ", ".join(f"{counted[w]:,} {w}" for w in _ENDED if counted[w])
    if how or end:
        said += ": " + "; ".join(part for part in (how, end) if part)
    return said


@dataclass(frozen=True)
class FoldedCall:
    """What is kept of a folded call's card: enough to say how it was decided (the request
    view and the session's record read it as they read a card)."""

    decision: Any
    approval_asked: bool
    status: str
    is_error: bool
    open: bool = False


class ServingForms:
    """The header, footer and request view of a serving session, for its live card and its
    finished output; ``served`` (a :class:`.serving.ServedSession`) is set once it exists."""

    def __init__(self, keep: int = CARDS) -> None:
        self.served: Any = None
        #: Cards kept in the cell (see :data:`CARDS`).
        self.keep = max(1, keep)
        #: The outcomes of the calls folded out of the transcript, and how many there were.
        self.folded: Counter[str] = Counter()
        self.folded_total = 0
        self.folded_cards: dict[str, FoldedCall] = {}
        #: Set while the form a notebook is saved as is made (see :meth:`saving`).
        self.saved_at: float | None = None

    # --- folding: a long session keeps the cards of its latest calls --------------------------

    def fold(self, transcript: Any) -> list[str]:
        """Fold the oldest ended calls out of ``transcript`` until it holds at most
        :attr:`keep` (a call still waiting or running is never folded); their outcomes are
        counted, their decisions kept (bounded). Returns the ids folded, oldest first, for a
        live view to close their cards."""
        calls = transcript.calls
        extra = len(calls) - self.keep
        if extra <= 0:
            return []
        gone: list[str] = []
        for call_id, record in list(calls.items()):
            if len(gone) >= extra:
                break
            if record.open:
                continue  # waiting for you (or running): its card stays
            gone.append(call_id)
            self.folded_total += 1
            for word in outcome(record):
                if word is not None:
                    self.folded[word] += 1
            self.folded_cards[call_id] = FoldedCall(
                record.decision, record.approval_asked, record.status, record.is_error
            )
            while len(self.folded_cards) > KEEP_FOLDED:
                self.folded_cards.pop(next(iter(self.folded_cards)))
            del calls[call_id]
            transcript.helpers.pop(call_id, None)
        if gone:
            folded = set(gone)
            transcript.blocks = [
                b for b in transcript.blocks if getattr(b, "call_id", None) not in folded
            ]
        return gone

    def folded_forms(self) -> tuple[str, str, str] | None:
        """The line that stands for the folded calls (HTML, Markdown, plain), None if none."""
        if not self.folded_total:
            return None
        counts = served_counts((), self.folded, self.folded_total)
        total, _, how = counts.partition(": ")
        said = (
            f"{total.replace(' call', ' earlier call')} folded"
            + (f" ({how})" if how else "")
            + f": the cell keeps the cards of the latest {self.keep:,}; every call is in "
            "%agent report and .calls.records"
        )
        return (
            f'<div class="nbagent-served-folded" style="{_LABEL}">{html.escape(said)}</div>',
            f"*{md_text(said)}*",
            said,
        )

    def cards(self, transcript: Any) -> Mapping[str, Any]:
        """Each call's card record by id: the transcript's, then what is kept of folded ones."""
        return ChainMap(transcript.calls, self.folded_cards)

    def calls_count(self) -> int:
        """How many calls the session was asked (all of them, folded or not)."""
        served = self.served
        return int(getattr(served.calls, "_steps", 0) or 0) if served is not None else 0

    def _tools(self) -> str:
        served = self.served
        names = served.tool_names() if served is not None else []
        if not names:
            return "no tools yet (define some with @nbagent.tool)"
        shown = ", ".join(names[:12]) + (f" and {len(names) - 12} more" if len(names) > 12 else "")
        return shown

    def _clients(self, past: bool) -> str:
        served = self.served
        names = list(served.calls.clients) if served is not None else []
        if not names:
            return "no client connected" if past else "no client has connected yet"
        last = names[-4:]
        more = f" and {len(names) - 4} more" if len(names) > 4 else ""
        return "used by " + ", ".join(last) + more

    def _approval(self, past: bool) -> str:
        served = self.served
        if served is not None and served.auto:
            return f"every call {'ran' if past else 'runs'} without asking (--approve auto)"
        if served is not None and not getattr(served, "asks", True):  # no widgets: nobody clicks
            denied = "were" if past else "are"
            return f"approval by your rules; calls that ask {denied} denied (nobody can click)"
        return f"approval {'was ' if past else ''}as in a run: your rules, then you"

    @contextlib.contextmanager
    def saving(self, at: float) -> Iterator[None]:
        """Within it, the header and footer say what a notebook saved at ``at`` (wall clock)
        should say of a serving that goes on: as it stood then."""
        self.saved_at = at
        try:
            yield
        finally:
            self.saved_at = None

    def header(self) -> str:
        """One line: what is (or was) served, where, since when, to whom, how calls were
        approved; once ended, from when to when and why it ended."""
        served = self.served
        if served is None:
            return "Starting to serve over MCP…"
        started = served.server.started_at or time.time()
        began = _when(started)
        tools = f"tools: {self._tools()}"
        if self.saved_at is not None:
            lead = (
                f"Was serving over MCP at {served.url} when this notebook was saved (since "
                f"{began}; as it stood at {_until(started, self.saved_at)})"
            )
            return f"{lead} · {tools} · {self._clients(False)} · {self._approval(False)}"
        if served.running:
            lead = f"Serving over MCP at {served.url} since {_until(time.time(), started)}"
            return f"{lead} · {tools} · {self._clients(False)} · {self._approval(False)}"
        ended = getattr(served, "ended_at", None)
        until = f" to {_until(started, ended)}" if ended else ""
        why = served.reason or "stopped"
        lead = f"Served over MCP at {served.url} from {began}{until} ({why})"
        return f"{lead} · {tools} · {self._clients(True)} · {self._approval(True)}"

    def head_forms(self) -> tuple[str, str, str]:
        """The header as HTML, Markdown and plain text (the client names are untrusted)."""
        text = redact_secrets(self.header())
        return (
            f'<div style="{_DIM}"><b>MCP:</b> {html.escape(text)}</div>',
            f"> **MCP:** {md_text(text)}",
            f"MCP: {text}",
        )

    def footer(self, transcript: Any) -> str:
        """The calls by outcome and how long it served (no tokens: there is no model)."""
        served = self.served
        counts = self.counts(transcript)
        took = seconds(transcript.elapsed)
        if self.saved_at is not None:
            return f"{counts} · {took} of serving by then; it went on after this notebook was saved"
        if served is not None and served.running:
            return f"serving · {counts} · {took}"
        return f"{counts} · served for {took}"

    def counts(self, transcript: Any) -> str:
        """Every call of the session by outcome, the folded ones included."""
        return served_counts(transcript.calls.values(), self.folded, self.folded_total)

    def records(self) -> list[Any]:
        served = self.served
        return list(served.calls.records) if served is not None else []

    def record(self, call_id: str) -> Any:
        served = self.served
        if served is None:
            return None
        return next((r for r in reversed(served.calls.records) if r.call.id == call_id), None)

    def requests_forms(self, transcript: Any) -> tuple[str, str, str] | None:
        return requests_forms(self.records(), self.cards(transcript))
