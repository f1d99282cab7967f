"""Outputs that are not a live run: ``%agent tools | history | config``, registration problems,
and the display output that holds a run's widgets plus its saved-notebook fallback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..messages import AssistantMessage, ToolMessage, UserMessage
from ..tools import Tool
from .render import code_span, safe_markdown, shorten
from .transcript import decision_words

if TYPE_CHECKING:
    from ..approval import Decision
    from .frontend import Frontend
    from .runner import View
    from .session import Session

__all__ = [
    "config",
    "history",
    "problems",
    "schema_summary",
    "show_run_display",
    "tools_table",
    "update_run_display",
]

_WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def _show(markdown: str, plain: str, metadata: dict[str, Any] | None = None) -> None:
    from IPython.display import display

    display(  # type: ignore[no-untyped-call]
        {"text/markdown": markdown, "text/plain": plain}, raw=True, metadata=metadata or {}
    )


def problems(messages: Sequence[str]) -> None:
    """Registration problems, shown in the cell that caused them."""
    for message in messages:
        print(f"nbagent: {message}", file=sys.stderr)


# --- %agent tools --------------------------------------------------------------------------------


def _type_of(schema: Any) -> str:
    if not isinstance(schema, Mapping):
        return "any"
    if "enum" in schema:
        return "|".join(json.dumps(v) for v in list(schema["enum"])[:6])
    kind = schema.get("type")
    if isinstance(kind, list):
        return "|".join(str(k) for k in kind)
    if kind == "array":
        return f"array of {_type_of(schema.get('items'))}"
    if kind:
        return str(kind)
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return "|".join(_type_of(s) for s in schema[key])
    return "any"


def schema_summary(schema: Any) -> str:
    """``city: string*, days: integer`` (``*`` marks required parameters)."""
    if not isinstance(schema, Mapping):
        return ""
    props = schema.get("properties")
    if not isinstance(props, Mapping) or not props:
        return "(no parameters)"
    required = set(schema.get("required") or ())
    return ", ".join(
        f"{name}: {_type_of(sub)}{'*' if name in required else ''}" for name, sub in props.items()
    )


def approval_rule(item: Tool, always: set[str]) -> str:
    """How a tool's calls are approved, in words."""
    rule = item.needs_approval
    if item.name in always:
        return "always allowed (this session)"
    if rule is True:
        return "asks every call"
    if rule is False:
        return "no"
    return f"asks when {getattr(rule, '__name__', 'a rule')}(input) is true"


def _cell(text: str) -> str:
    return safe_markdown(text).replace("|", "\\|").replace("\n", " ")


def tools_table(session: Session) -> None:
    """A table of the registered tools: name, title, approval, parameters."""
    tools = list(session.tools.values())
    if not tools:
        _show(
            "No tools yet: define one in a cell with `@nbagent.tool`, "
            "or call `nbagent.register(...)`.",
            "No tools yet: define one with @nbagent.tool, or call nbagent.register(...).",
        )
        return
    always = session.approver.always_allowed
    rows = [
        (t.name, t.title or "", approval_rule(t, always), schema_summary(t.input_schema))
        for t in tools
    ]
    md = ["| tool | title | approval | parameters (* required) |", "|---|---|---|---|"]
    md += [f"| {code_span(n)} | {_cell(ti)} | {_cell(a)} | {_cell(p)} |" for n, ti, a, p in rows]
    widths = [
        max(len(r[i]) for r in [("tool", "title", "approval", "parameters"), *rows])
        for i in range(4)
    ]
    plain = [
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip()
        for row in [("tool", "title", "approval", "parameters"), *rows]
    ]
    _show("\n".join(md), "\n".join(plain))


# --- %agent history ------------------------------------------------------------------------------


def _decisions(session: Session) -> dict[str, Decision]:
    found: dict[str, Decision] = {}
    for job in session.jobs:
        transcript = getattr(job.view, "transcript", None)
        for call_id, record in getattr(transcript, "calls", {}).items():
            if record.decision is not None:
                found[call_id] = record.decision
    return found


def history(session: Session) -> None:
    """The conversation so far, with each approval decision."""
    agent = session._agent
    messages = list(agent.messages) if agent is not None else []
    if not messages:
        _show("*No conversation yet.*", "No conversation yet.")
        return
    decisions = _decisions(session)
    md: list[str] = []
    plain: list[str] = []
    for message in messages:
        if isinstance(message, UserMessage):
            md.append(f"**You:** {safe_markdown(message.text)}")
            plain.append(f"You: {message.text}")
        elif isinstance(message, AssistantMessage):
            if message.text.strip():
                md.append(f"**Assistant:** {safe_markdown(message.text)}")
                plain.append(f"Assistant: {message.text}")
            for call in message.tool_calls:
                decision = decisions.get(call.id)
                note = f" — {decision_words(decision)}" if decision is not None else ""
                md.append(
                    f"→ {code_span(f'{call.name}({shorten(call.arguments, 300)})')}{_cell(note)}"
                )
                plain.append(f"→ {call.name}({shorten(call.arguments, 300)}){note}")
        elif isinstance(message, ToolMessage):
            for result in message.results:
                label = "error" if result.is_error else "result"
                text = shorten(result.text, 500)
                md.append(f"← {code_span(result.name)} {label}: {code_span(text)}")
                plain.append(f"← {result.name} {label}: {text}")
    _show("\n\n".join(md), "\n".join(plain))


# --- %agent config -------------------------------------------------------------------------------


def config(session: Session, frontend: Frontend) -> None:
    """Provider, model, base URL and where each comes from — never the key itself."""
    import os

    from ..providers import describe_config

    spec = session.model_spec
    if spec is None and session._agent is not None:
        spec = session._agent.generator
    described = describe_config(spec)
    rows = [(key, "" if value is None else str(value)) for key, value in described.items()]
    rows.append(
        ("mode", ("interactive" if frontend.interactive else "headless") + f" ({frontend.reason})")
    )
    policy = os.environ.get("NBAGENT_APPROVAL") or ("ask" if frontend.interactive else "deny")
    rows.append(("approval", policy))
    rows.append(("tools", ", ".join(sorted(session.tools)) or "none"))
    md = ["| setting | value |", "|---|---|"] + [f"| {k} | {_cell(v)} |" for k, v in rows]
    width = max(len(k) for k, _ in rows)
    _show("\n".join(md), "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows))


# --- the run display -----------------------------------------------------------------------------


def _run_bundle(view: View) -> tuple[dict[str, Any], dict[str, Any]]:
    transcript = getattr(view, "transcript", None)
    widget = getattr(view, "widget", None)
    data: dict[str, Any] = {}
    metadata: dict[str, Any] = {}
    if transcript is not None:
        if transcript.done:
            data, metadata = transcript.bundle()
        else:
            note = "(live view: needs Jupyter widgets; this text is replaced when the run ends)"
            data = {
                "text/plain": f"nbagent run: {transcript.prompt}\n{note}",
                "text/markdown": f"**You:** {safe_markdown(transcript.prompt)}\n\n*{note}*",
            }
    if widget is not None:
        data[_WIDGET_MIME] = {"version_major": 2, "version_minor": 0, "model_id": widget.model_id}
    return data, metadata


def show_run_display(view: View, display_id: str) -> None:
    """Display the run's widgets, with a text form for viewers without widgets."""
    from IPython.display import display

    data, metadata = _run_bundle(view)
    display(data, raw=True, metadata=metadata, display_id=display_id)  # type: ignore[no-untyped-call]


def update_run_display(view: View, display_id: str) -> None:
    """At the end: the same output, now with the whole transcript as Markdown, text and metadata."""
    from IPython.display import update_display

    data, metadata = _run_bundle(view)
    update_display(  # type: ignore[no-untyped-call]
        data, raw=True, metadata=metadata, display_id=display_id
    )
