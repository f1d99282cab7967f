"""Outputs that are not a run: ``%agent tools | history | config | rules`` and registration
problems, each as Markdown with a plain-text twin.

They quote the conversation, prompts, recordings and errors, so like a run's outputs they show
credential-shaped text as ``***`` (:func:`nbagent.redact.redact_secrets`), all in one place.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...errors import NbagentError
from ...messages import AssistantMessage, ToolMessage, UserMessage
from ...redact import redact_secrets
from ...tools import Tool
from ..shown.render import code_span, md_text, no_math, safe_markdown, shorten
from ..shown.wording import decision_words

if TYPE_CHECKING:
    from ...approvals.approval import Decision
    from ...approvals.rules import RuleSet
    from ..core.frontend import Frontend
    from ..core.session import Session

__all__ = [
    "config",
    "history",
    "recordings",
    "rules",
    "schema_summary",
    "tools_table",
    "usage",
]


def _show(markdown: str, plain: str, metadata: dict[str, Any] | None = None) -> None:
    from IPython.display import display

    data = no_math({"text/markdown": redact_secrets(markdown), "text/plain": redact_secrets(plain)})
    display(data, raw=True, metadata=metadata or {})  # type: ignore[no-untyped-call]


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


def approval_rule(item: Tool, rules: RuleSet) -> str:
    """How a tool's calls are approved, in words (with the rules about it, by number)."""
    need = item.needs_approval
    if need is True:
        words = "asks every call"
    elif need is False:
        words = "no"
    else:
        words = f"asks when {getattr(need, '__name__', 'a rule')}(input) is true"
    mine = [f"#{n} {r.text}" for n, r in rules.numbered() if r.tool == item.name]
    if mine and need is not False:
        words += "; rules: " + "; ".join(mine)
    if item.preview is not None:
        words += "; shows a preview"
    return words


def provider_status(item: Tool, provider: str) -> str:
    """``ok``, or what the provider would reject (the first problem, and how many more)."""
    from ...providers import preflight

    problems = preflight(item, provider)
    if not problems:
        return "ok"
    first = problems[0]
    where = f" at {first.pointer}" if first.pointer else ""
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"rejects: {first.reason}{where}{more}"


def _cell(text: str) -> str:
    return md_text(text.replace("\n", " "))


def _table(
    header: tuple[str, ...], rows: Sequence[tuple[str, ...]], code_first: bool = True
) -> None:
    """A Markdown table and its plain-text twin."""
    md = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [code_span(row[0]) if code_first else _cell(row[0]), *(_cell(c) for c in row[1:])]
        md.append("| " + " | ".join(cells) + " |")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    plain = [
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip()
        for row in [header, *rows]
    ]
    _show("\n".join(md), "\n".join(plain))


def _first_line(text: str, limit: int = 120) -> str:
    line = text.strip().split("\n", 1)[0] if text else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def tools_table(session: Session) -> None:
    """A table of the registered tools: name, description, approval, parameters."""
    tools = list(session.tools.values())
    if not tools:
        _show(
            "No tools yet: define one in a cell with `@nbagent.tool`, "
            "or call `nbagent.register(...)`.",
            "No tools yet: define one with @nbagent.tool, or call nbagent.register(...).",
        )
        return
    from ...providers import PROVIDERS, provider_label

    titled = any(t.title for t in tools)
    providers: list[str] = list(PROVIDERS)
    header: tuple[str, ...] = (
        "tool",
        "description",
        "approval",
        "parameters (* required)",
        *(provider_label(p) for p in providers),
    )
    rows: list[tuple[str, ...]] = []
    for t in tools:
        description = _first_line(t.description)
        if titled and t.title:
            description = f"{t.title}: {description}" if description else t.title
        rows.append(
            (
                t.name,
                description,
                approval_rule(t, session.rules),
                schema_summary(t.input_schema),
                *(provider_status(t, p) for p in providers),
            )
        )
    _table(header, rows)


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
            md.append(f"**You:** {md_text(message.text)}")
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


def _model_rows(session: Session) -> list[tuple[str, str]]:
    """Where the model comes from: the same words before and after the first run."""
    from ...providers import describe_config

    spec = session.model_spec
    if spec is not None and not isinstance(spec, str):  # a Generator set from Python
        return [
            ("provider", type(spec).__name__),
            ("model", str(getattr(spec, "model", "") or "")),
            ("source", "set from Python (set_model)"),
        ]
    described = describe_config(spec)
    if spec:
        source = "%agent -m"
    elif os.environ.get("NBAGENT_MODEL", "").strip():
        source = "NBAGENT_MODEL"
    else:
        source = "default: no model is set, so the offline stand-in (not an LLM)"
    rows = [
        ("provider", described["provider"] or ""),
        ("model", described["model"] or ""),
        ("source", source),
    ]
    if described["base_url"]:
        rows.append(("base URL", f"{described['base_url']} (from {described['base_url_source']})"))
    if described["key_source"]:
        rows.append(("key", f"from {described['key_source']} (never shown)"))
    if described["problem"]:
        rows.append(("problem", described["problem"]))
    from ..._prices import table_missing

    lacking = table_missing()
    if lacking is not None:  # every model's cost shows as "price unknown" until it is there
        rows.append(("prices", lacking))
    return rows


def config(session: Session, frontend: Frontend) -> None:
    """Provider, model, base URL and where each comes from — never the key itself — and how
    runs are shown, run and approved here."""
    from ..core.frontend import awaiting_cells_take_clicks

    rows = _model_rows(session)
    rows.append(
        ("mode", ("interactive" if frontend.interactive else "headless") + f" ({frontend.reason})")
    )
    in_cell, why = awaiting_cells_take_clicks()
    rows.append(
        (
            "runs",
            "in their cell: " + why if in_cell else "in the background when they may ask: " + why,
        )
    )
    policy = os.environ.get("NBAGENT_APPROVAL")
    rows.append(
        (
            "approval",
            f"{policy} (NBAGENT_APPROVAL)"
            if policy
            else ("ask" if frontend.interactive else "deny (nobody can click)"),
        )
    )
    numbered = session.rules.numbered()
    rows.append(
        (
            "rules",
            "; ".join(f"#{n} {r.text}" for n, r in numbered)
            + " (before the policy; remove: %agent rules remove N)"
            if numbered
            else "none (%agent allow / %agent deny add some)",
        )
    )
    timeout = session.approval_timeout
    rows.append(
        (
            "approval timeout",
            f"{timeout:g} s (then the call is answered 'approval timed out')"
            if timeout is not None
            else "off (calls wait until someone answers; %agent approval-timeout SECONDS)",
        )
    )
    if session.timeout_problem:
        rows.append(("problem", session.timeout_problem))
    agent = session._agent
    hooks = []
    if agent is not None:
        hooks += [f"before: {_hook_name(h)}" for h in agent.before_tool_hooks]
        hooks += [f"after: {_hook_name(h)}" for h in agent.after_tool_hooks]
    rows.append(("hooks", ", ".join(hooks) or "none"))
    rows.append(("tools", ", ".join(sorted(session.tools)) or "none"))
    rows.append(("typed answers (--output)", _answer_route(session)))
    _table(("setting", "value"), rows, code_first=False)


def _answer_route(session: Session) -> str:
    from ...output import answer_route

    try:
        return answer_route(session.generator)
    except NbagentError as exc:  # the model cannot be loaded: the model row says why
        return f"unknown until the model loads ({type(exc).__name__})"


def _hook_name(hook: Any) -> str:
    from ...loop._usercode import describe

    return describe(hook)


def rules(session: Session) -> None:
    """The approval rules in force this session, and how to remove them."""
    numbered = session.rules.numbered()
    if not numbered:
        _show(
            "*No approval rules: every call that needs approval asks. Add one with "
            "`%agent allow TOOL [ARG=PATTERN ...]` or `%agent deny ...`.*",
            "No approval rules: every call that needs approval asks.",
        )
        return
    _table(
        ("#", "rule", "remove with"),
        [(str(n), r.text, f"%agent rules remove {n}") for n, r in numbered],
        code_first=False,
    )


def recordings(session: Session) -> None:
    """The recordings beside the notebook: which prompt, which model, when, how many steps."""
    from ..core.recordings import describe

    store = session.recordings
    rows = describe(store)
    if not rows:
        _show(
            f"*No recordings in {code_span(str(store.folder))}: run `%agent` with a model set (or "
            "`--record`) "
            "to make one.*",
            f"No recordings in {store.folder}.",
        )
        return
    _table(("file", "prompt", "model", "recorded", "steps"), rows)


def usage(session: Session) -> None:
    """Tokens per run and for the session, as the providers reported them."""
    rows: list[tuple[str, ...]] = []
    total_in = total_out = total_steps = 0
    for job in session.jobs:
        result = job.result
        if result is None:
            continue
        prompt = " ".join(job.prompt.split())
        prompt = prompt if len(prompt) <= 40 else prompt[:39] + "…"
        model = getattr(getattr(job.view, "transcript", None), "model", "") or ""
        u = result.usage
        rows.append(
            (
                job.run.id if job.run is not None else f"request {job.number}",
                prompt,
                model,
                str(result.steps),
                f"{u.input_tokens:,}",
                f"{u.output_tokens:,}",
                result.stop_reason,
            )
        )
        total_in += u.input_tokens
        total_out += u.output_tokens
        total_steps += result.steps
    if not rows:
        _show("*No run yet in this session.*", "No run yet in this session.")
        return
    rows.append(
        (
            "session",
            f"{len(rows)} runs",
            "",
            str(total_steps),
            f"{total_in:,}",
            f"{total_out:,}",
            "",
        )
    )
    header = ("run", "prompt", "model", "steps", "input tokens", "output tokens", "stop")
    _table(header, rows)
