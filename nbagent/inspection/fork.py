"""Forks and comparisons of runs: start again from any step, and see where two runs part.

:func:`fork_history` gives the conversation of a run as the model saw it at one step (the
messages of that step's request): :meth:`nbagent.Agent.fork` and
:meth:`nbagent.events.RunResult.fork` start a new agent from it, with another prompt, model,
tools or instructions. The source run is untouched: a request holds its own tuple of messages,
and the fork gets a new list. Every request the loop sent was valid for its provider, so such a
history is too (each call answered exactly once); it is checked again all the same.

:func:`compare` puts two runs side by side: step by step, what each was asked and answered,
where they first differ, and their tokens, time and outcome (how a person compares two models,
or a fork with its original).
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import AgentError
from ..messages import AssistantMessage, Message, ToolMessage, UserMessage, message_to_dict
from ..redact import redact_secrets
from .exchange import Exchange, exchange_of

__all__ = [
    "Comparison",
    "compare",
    "fork_history",
    "set_run_lookup",
    "tools_missing",
    "tools_used",
]


#: How a front end finds a run by its id (see :func:`set_run_lookup`); None outside one.
_lookup: Callable[[str], Any] | None = None


def set_run_lookup(lookup: Callable[[str], Any] | None) -> None:
    """Let a front end that keeps runs by id (the notebook's session) resolve ``"run-3"``
    given to :func:`compare` or a fork: ``lookup(run_id)`` returns the run's result, or raises
    ValueError saying which runs there are."""
    global _lookup
    _lookup = lookup


def _run(source: Any, role: str) -> Any:
    """``source`` as a run (a RunResult or Run), a run id resolved; else an AgentError saying
    what ``role`` (e.g. "the second run") was instead."""
    if isinstance(source, str):
        if _lookup is None:
            raise AgentError(
                f"{role} is {source!r}, a name: outside a notebook nbagent keeps no runs by "
                "name; pass the RunResult (or Run) itself"
            )
        try:
            return _lookup(source)
        except (ValueError, KeyError) as exc:
            raise AgentError(f"{role}: {exc}") from None
    if getattr(source, "exchanges", None) is None:
        raise AgentError(
            f"{role} is a {type(source).__name__}, not a run: give a RunResult or a Run (their "
            "exchanges hold what the model saw at each step), or in a notebook a run's id "
            "such as 'run-3'"
        )
    return source


def _exchanges(source: Any) -> tuple[Exchange, ...]:
    return tuple(source.exchanges)


def fork_history(source: Any, step: int | None) -> list[Message]:
    """The messages of ``source``'s request at ``step`` (1-based), checked, as a new list
    (``source``: a RunResult, a Run, or in a notebook a run's id)."""
    from .._history import checked_history

    source = _run(source, "the run to fork")
    exchanges = _exchanges(source)
    name = getattr(source, "run_id", "") or getattr(source, "id", "") or "the run"
    if step is None:
        there = f"1 to {len(exchanges)}" if exchanges else "none"
        raise AgentError(f"fork {name} at which step? (steps: {there})")
    try:
        exchange = exchange_of(exchanges, step, name)
    except (TypeError, ValueError) as exc:
        raise AgentError(str(exc)) from None
    return checked_history(list(exchange.request.messages))


def tools_missing(history: Sequence[Message], offered: Collection[str]) -> list[str]:
    """The tools ``history`` calls that ``offered`` lacks, in the order first called: what
    every fork is checked for (``Agent.fork``, ``%agent fork``), since a request whose
    history holds calls to a tool it does not offer shows the model calls it cannot make, and
    some providers refuse it. Calls a provider ran itself need no tool here."""
    missing: dict[str, None] = {}
    for message in history:
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                if not call.provider_executed and call.name not in offered:
                    missing[call.name] = None
    return list(missing)


def tools_used(source: Any, step: int | None) -> list[str]:
    """The tools offered to the model at ``step`` of ``source`` (its request's definitions)."""
    if step is None:
        return []
    try:
        exchange = exchange_of(_exchanges(_run(source, "the run")), step, "the run")
    except (TypeError, ValueError, AgentError):
        return []
    return [d.name for d in exchange.request.tools if not d.provider_executed]


# --- comparing two runs ------------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    """One run's step, as the comparison shows it."""

    model: str
    asked: str  # what was new in the request (a prompt, tool results), short
    answered: str  # the answer: text, then each call
    tokens: int
    seconds: float
    status: str


@dataclass(frozen=True)
class Comparison:
    """Two runs side by side (see :func:`compare`)."""

    names: tuple[str, str]
    #: One row per step, numbered as the run that was forked numbers them; a side is None where
    #: that run has no such step (before a fork's first step, or after its last).
    rows: tuple[tuple[int, Side | None, Side | None], ...]
    first_difference: int | None  # the first step whose request or answer differs (None: none)
    why: str
    outcomes: tuple[str, str]
    totals: tuple[tuple[int, float], tuple[int, float]]  # tokens, seconds of each run
    #: The step each run's first step faces (1 for both, unless one is a fork of the other).
    starts: tuple[int, int] = (1, 1)

    def _missing(self, side: int, step: int) -> str:
        """Why ``side`` (0 or 1) has no row at ``step``."""
        if step < self.starts[side]:
            return f"as {self.names[1 - side]} (before the fork)"
        return "no such step"

    def __repr__(self) -> str:
        return f"<Comparison of {self.names[0]} and {self.names[1]}: {self.why}>"

    def __str__(self) -> str:
        a, b = self.names
        lines = [f"{a} vs {b}: {self.why}"]
        for step, left, right in self.rows:
            mark = (
                "≠" if self.first_difference is not None and step >= self.first_difference else "="
            )
            lines.append(f"step {step} {mark}")
            for index, (label, side) in enumerate(((a, left), (b, right))):
                if side is None:
                    lines.append(f"  {label}: ({self._missing(index, step)})")
                else:
                    lines.append(f"  {label} [{side.model}]: {side.answered}")
        for label, outcome, (tokens, seconds) in zip(
            self.names, self.outcomes, self.totals, strict=True
        ):
            lines.append(f"{label}: {outcome}, {tokens:,} tokens, {seconds:.1f} s")
        return redact_secrets("\n".join(lines))

    def _repr_html_(self) -> str:
        """Every text escaped (model text is never HTML); credential-shaped text hidden."""
        esc = _escape
        a, b = self.names
        left_ = ' style="text-align:left;vertical-align:top"'  # prose reads from the left
        head = f"<tr><th>step</th><th{left_}>{esc(a)}</th><th{left_}>{esc(b)}</th></tr>"
        body = []
        for step, left, right in self.rows:
            differs = self.first_difference is not None and step == self.first_difference
            style = ' style="background:rgba(255,152,0,0.15)"' if differs else ""
            cells = []
            for index, side in enumerate((left, right)):
                if side is None:
                    cells.append(f"<td{left_}><i>{esc(self._missing(index, step))}</i></td>")
                    continue
                cells.append(
                    f'<td{left_}><div style="opacity:0.7;font-size:0.85em">{esc(side.model)} · '
                    f"{side.tokens:,} tokens · {side.seconds:.1f} s · {esc(side.status)}</div>"
                    f"<div><b>asked:</b> {esc(side.asked)}</div>"
                    f"<div><b>answered:</b> {esc(side.answered)}</div></td>"
                )
            body.append(f"<tr{style}><td>{step}{' ≠' if differs else ''}</td>{''.join(cells)}</tr>")
        foot = "".join(
            f"<tr><td></td><td{left_}>{esc(o)} · {t:,} tokens · {s:.1f} s</td>"
            if i == 0
            else f"<td{left_}>{esc(o)} · {t:,} tokens · {s:.1f} s</td></tr>"
            for i, (o, (t, s)) in enumerate(zip(self.outcomes, self.totals, strict=True))
        )
        return (
            f'<div class="nbagent-compare"><p>{esc(self.why)}</p>'
            f'<table class="nbagent-table">{head}{"".join(body)}{foot}</table></div>'
        )


def _escape(text: object) -> str:
    return html.escape(redact_secrets(str(text)))


def _short(text: str, limit: int = 240) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _asked(messages: Sequence[Message]) -> str:
    parts = []
    for message in messages:
        if isinstance(message, UserMessage):
            parts.append(f"prompt {message.text!r}")
        elif isinstance(message, ToolMessage):
            parts += [f"{r.name} → {r.text}" for r in message.results]
    return _short("; ".join(parts)) or "(the history as it was)"


def _answered(message: AssistantMessage) -> str:
    parts = [message.text] if message.text else []
    parts += [f"{c.name}({c.arguments})" for c in message.tool_calls]
    return _short("; ".join(parts)) or "(nothing)"


def _side(exchanges: tuple[Exchange, ...], index: int) -> Side | None:
    """Step ``index + 1`` of a run, or None where the run has no such step."""
    if not 0 <= index < len(exchanges):
        return None
    from .exchange import new_messages

    exchange = exchanges[index]
    return Side(
        exchange.model,
        _asked(new_messages(exchanges, index)),
        _answered(exchange.answer),
        exchange.usage.total_tokens,
        exchange.seconds,
        exchange.status,
    )


def _same(left: Exchange, right: Exchange) -> str | None:
    """Why two steps differ ("" if they do not)."""

    def dump(messages: Sequence[Message]) -> str:
        return json.dumps([message_to_dict(m) for m in messages], sort_keys=True, default=str)

    if dump(left.request.messages) != dump(right.request.messages):
        return "they were asked different things"
    if left.request.instructions != right.request.instructions:
        return "their instructions differ"
    if [d.name for d in left.request.tools] != [d.name for d in right.request.tools]:
        return "they had other tools"
    if dump([left.answer]) != dump([right.answer]):
        return "they answered differently"
    return ""


def _dump(messages: Sequence[Message]) -> str:
    return json.dumps([message_to_dict(m) for m in messages], sort_keys=True, default=str)


def _offset(a: tuple[Exchange, ...], b: tuple[Exchange, ...]) -> tuple[int, int]:
    """Where the two runs start from the same history: a fork of run A at step k begins where
    A's step k began (asked again, or with a new prompt after that history), so A's step k + i
    faces the fork's step 1 + i. ``(0, 0)`` otherwise."""
    if not a or not b:
        return 0, 0
    for shift, (longer, shorter) in enumerate(((a, b), (b, a))):
        start = shorter[0].request.messages
        for k in range(1, len(longer)):
            if _forked_from(longer[k].request.messages, start):
                return (k, 0) if shift == 0 else (0, k)
    return 0, 0


def _forked_from(history: Sequence[Message], start: Sequence[Message]) -> bool:
    """``start`` is ``history`` asked again, or ``history`` and then a new prompt (not the
    answer to it: a run that went on after a step continued, it did not fork)."""
    if len(start) == len(history):
        return _dump(start) == _dump(history)
    return (
        len(start) > len(history)
        and isinstance(start[len(history)], UserMessage)
        and _dump(start[: len(history)]) == _dump(history)
    )


def compare(first: Any, second: Any) -> Comparison:
    """``first`` and ``second`` (RunResults or Runs; in a notebook also run ids such as
    ``"run-3"``) side by side, step by step: a fork faces its original from the step it was
    forked at. Anything else is refused, saying which argument was what."""
    first, second = _run(first, "the first run"), _run(second, "the second run")
    a, b = _exchanges(first), _exchanges(second)
    names = (
        getattr(first, "run_id", "") or "first run",
        getattr(second, "run_id", "") or "second run",
    )
    # a's step 1 faces the timeline's step 1 + shift_a, b's faces 1 + shift_b (a fork of a run
    # at step k starts where that run's step k began)
    shift_b, shift_a = _offset(a, b)
    rows = []
    difference: int | None = None
    why = "they went the same way, step by step"
    if shift_a or shift_b:
        fork, source = (names[0], names[1]) if shift_a else (names[1], names[0])
        why = f"{fork} starts from {source}'s step {max(shift_a, shift_b) + 1}; no difference after"
    length = max(len(a) + shift_a, len(b) + shift_b)
    for t in range(length):
        rows.append((t + 1, _side(a, t - shift_a), _side(b, t - shift_b)))
    for t in range(max(shift_a, shift_b), length):
        i, j = t - shift_a, t - shift_b
        if i >= len(a) or j >= len(b):
            difference = t + 1
            why = f"from step {t + 1} on only {names[0] if i < len(a) else names[1]} went on"
            break
        reason = _same(a[i], b[j])
        if reason:
            difference = t + 1
            why = f"they first differ at step {t + 1}: {reason}"
            models = (a[i].model, b[j].model)
            if models[0] != models[1]:
                why += f" ({models[0]} vs {models[1]})"
            break
    outcomes = (_outcome(first), _outcome(second))
    totals = (_totals(a), _totals(b))
    starts = (shift_a + 1, shift_b + 1)
    return Comparison(names, tuple(rows), difference, why, outcomes, totals, starts)


def _outcome(source: Any) -> str:
    reason = getattr(source, "stop_reason", None)
    if reason is None:
        final = getattr(source, "final", None)
        reason = getattr(final, "stop_reason", "running")
    return str(reason)


def _totals(exchanges: tuple[Exchange, ...]) -> tuple[int, float]:
    return sum(e.usage.total_tokens for e in exchanges), sum(e.seconds for e in exchanges)
