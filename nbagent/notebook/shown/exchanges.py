"""What the model saw and said at each step, as safe HTML: for a pause, and for the saved run.

Every text is escaped and credential-shaped text hidden (model and tool text is never HTML);
long texts are cut. A step shows what was *new* in its request (the prompt, the tool results
the model read) and says how many messages came before it, so a saved run of many steps grows
linearly, not with the square of its length; instructions and tools are shown at the first step
and again only when they changed.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Sequence
from typing import Any

from ...content import ImagePart, TextPart
from ...generation import Request
from ...inspection.exchange import Exchange, new_messages
from ...messages import AssistantMessage, Message, ReasoningPart, ToolMessage, UserMessage
from ...redact import redact_secrets
from ...tools import ToolCall
from .render import shorten

__all__ = [
    "LABEL_STYLE",
    "escaped",
    "exchange_html",
    "exchanges_html",
    "message_html",
    "pre_html",
    "request_summary",
]

#: Longest text shown for one message part.
PART = 4_000
_PRE = (
    "white-space:pre-wrap;margin:2px 0;padding:3px 6px;font-family:var(--jp-code-font-family,"
    "monospace);font-size:var(--jp-code-font-size,12px);background:var(--jp-layout-color2,"
    "#f3f3f3);border-radius:3px"
)
#: The small dim label over each part of a request view (the serving's too).
LABEL_STYLE = _LABEL = "font-size:0.85em;opacity:0.7;margin-top:4px"


def escaped(text: str, limit: int = PART) -> str:
    """Untrusted text for a request view: secrets hidden, cut to ``limit``, escaped."""
    return html.escape(shorten(redact_secrets(text), limit))


def pre_html(text: str, limit: int = PART) -> str:
    """Untrusted text as a preformatted block of a request view."""
    return f'<div style="{_PRE}">{escaped(text, limit)}</div>'


def _part_html(part: Any) -> str:
    if isinstance(part, TextPart):
        return pre_html(part.text) if part.text else ""
    if isinstance(part, ImagePart):
        return (
            f"<div><i>[image {part.width}×{part.height}, {html.escape(part.mime_type)}]</i></div>"
        )
    if isinstance(part, ReasoningPart):
        text = part.text or ("(encrypted)" if part.signature or part.redacted else "")
        return f'<div style="font-style:italic;opacity:0.75">thinking: {escaped(text)}</div>'
    if isinstance(part, ToolCall):
        return f"<div><code>{escaped(part.name, 64)}</code> {pre_html(part.arguments)}</div>"
    return f"<div><i>{html.escape(type(part).__name__)}</i></div>"


def message_html(message: Message) -> str:
    """One message of a request: who, and what it holds."""
    if isinstance(message, UserMessage):
        return f'<div style="{_LABEL}">user</div>' + "".join(_part_html(p) for p in message.content)
    if isinstance(message, AssistantMessage):
        body = "".join(_part_html(p) for p in message.content) or "<div><i>(empty)</i></div>"
        return f'<div style="{_LABEL}">assistant</div>{body}'
    if isinstance(message, ToolMessage):
        parts = []
        for result in message.results:
            marks = []
            if result.is_error:
                marks.append("error")
            if result.edited:
                marks.append("edited by the person")
            mark = f" ({', '.join(marks)})" if marks else ""
            parts.append(
                f'<div style="{_LABEL}">tool result of <code>{escaped(result.name, 64)}</code> '
                f"{html.escape(result.call_id)}{mark}</div>"
                + "".join(_part_html(p) for p in result.content)
            )
        return "".join(parts)
    return ""


def _tools_html(request: Request) -> str:
    items = []
    for definition in request.tools:
        schema = json.dumps(definition.input_schema or {}, ensure_ascii=False, indent=1)
        items.append(
            f"<li><code>{escaped(definition.name, 64)}</code>: "
            f"{escaped(definition.description, 400)}"
            f'<details><summary style="{_LABEL}">input schema</summary>{pre_html(schema)}</details>'
            "</li>"
        )
    return f'<ul style="margin:2px 0">{"".join(items)}</ul>' if items else "<i>no tools</i>"


def _options_text(request: Request) -> str:
    options = request.options
    choice = options.tool_choice
    said = [
        f"tool choice: {choice if isinstance(choice, str) else getattr(choice, 'name', choice)}"
    ]
    for name in ("max_tokens", "temperature", "top_p"):
        value = getattr(options, name, None)
        if value is not None:
            said.append(f"{name}: {value}")
    if getattr(options, "stop", ()):
        said.append(f"stop: {list(options.stop)}")
    if getattr(options, "extra", None):
        said.append(f"extra: {json.dumps(dict(options.extra), default=str)[:400]}")
    if getattr(request, "answer_format", None) is not None:
        said.append("answer: JSON in the output type's schema, through the API's structured output")
    elif any(d.name == "final_answer" for d in request.tools):
        said.append("answer: through the final_answer tool")
    return " · ".join(said)


def request_html(request: Request, shown: Sequence[Message], *, before: int, full: bool) -> str:
    """A request: ``shown`` messages (the new ones), how many came ``before``; instructions,
    tools and options when ``full``."""
    parts = []
    if full:
        instructions = request.instructions or "(none)"
        parts.append(f'<div style="{_LABEL}">instructions</div>{pre_html(instructions)}')
        parts.append(f'<div style="{_LABEL}">tools</div>{_tools_html(request)}')
    parts.append(f'<div style="{_LABEL}">{html.escape(_options_text(request))}</div>')
    earlier = f", after the {before} before" if before else ""
    parts.append(
        f'<div style="{_LABEL}">messages: {len(request.messages)} in all; new here{earlier}:</div>'
    )
    parts.extend(message_html(m) for m in shown)
    return "".join(parts)


def exchange_html(exchanges: Sequence[Exchange], index: int) -> str:
    """One step: what the model saw (new at this step), and what came back."""
    exchange = exchanges[index]
    previous = exchanges[index - 1] if index else None
    request = exchange.request
    full = previous is None or (
        previous.request.instructions != request.instructions
        or [d.name for d in previous.request.tools] != [d.name for d in request.tools]
    )
    shown = new_messages(list(exchanges), index)
    before = len(request.messages) - len(shown)
    saw = request_html(request, shown, before=before, full=full)
    answer = message_html(exchange.answer)
    details = [
        f"finish: {exchange.finish or '-'}",
        f"{exchange.usage.input_tokens:,} in / {exchange.usage.output_tokens:,} out tokens",
        f"{exchange.seconds:.1f} s",
    ]
    if exchange.retries:
        details.append(f"sent {exchange.retries + 1} times")
    if exchange.error is not None:
        details.append(f"error: {type(exchange.error).__name__}: {exchange.error}")
    edits = "".join(f"<li>{escaped(e, 300)}</li>" for e in exchange.edited)
    edited = (
        f'<div style="{_LABEL}">edited at the pause before it</div><ul>{edits}</ul>'
        if edits
        else ""
    )
    return (
        f'<div style="{_LABEL}"><b>what the model saw</b></div>{saw}{edited}'
        f'<div style="{_LABEL}"><b>what came back</b> · {escaped(" · ".join(details), 600)}</div>'
        f"{answer}"
    )


def exchanges_html(
    exchanges: Sequence[Exchange],
    inner: Callable[[str], str] | None = None,
    *,
    title: str = "What the model saw, step by step",
) -> str:
    """Every step of a run, each folded, under one fold (static: it survives saving).

    ``inner(call_id)``: the safe HTML of the requests a helper agent made for that call of
    the run (``agent.as_tool``), shown under the step whose answer made the call ("" when
    the call ran none)."""
    if not exchanges:
        return ""
    steps = []
    for index, exchange in enumerate(exchanges):
        summary = f"step {exchange.step} · {exchange.model or 'model'} · {exchange.status}" + (
            " · edited" if exchange.edited else ""
        )
        under = ""
        if inner is not None:
            calls = [p for p in exchange.answer.content if isinstance(p, ToolCall)]
            under = "".join(inner(call.id) for call in calls)
        steps.append(
            f'<details style="margin-left:0.8em"><summary style="{_LABEL}">'
            f"{escaped(summary, 200)}</summary>{exchange_html(exchanges, index)}{under}</details>"
        )
    count = len(exchanges)
    return (
        f'<details class="nbagent-exchanges"><summary style="{_LABEL}">{escaped(title, 300)} '
        f"({count} request{'s' if count != 1 else ''})</summary>"
        f"{''.join(steps)}</details>"
    )


def request_summary(request: Request) -> str:
    """One line about a request about to be sent (for a pause)."""
    last = request.messages[-1] if request.messages else None
    if isinstance(last, ToolMessage):
        names = list(dict.fromkeys(r.name for r in last.results))  # each tool once, in order
        results = "result" if len(last.results) == 1 else f"{len(last.results)} results"
        new = f"the {results} of {', '.join(names)}"
    elif isinstance(last, UserMessage):
        new = "your prompt"
    else:
        new = "the conversation as it is"
    messages, tools = _count(len(request.messages), "message"), _count(len(request.tools), "tool")
    return f"{messages} (new: {new}), {tools}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
