"""``%agent policy``: the course policy in force for this notebook, where it came from, its digest.

Static Markdown with a plain-text twin (it survives saving), every rule with the key that set
it, so a student and a teacher read the same thing the checks at each run read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..._prices import usd_text
from ...course.policy import ENV, FILENAME, describe_value
from ...redact import redact_secrets
from ..policy.coursegate import current
from ..policy.courserecord import notebook_spent, session_spent
from ..shown.render import code_span, md_text, no_math

if TYPE_CHECKING:
    from ..core.session import Session

__all__ = ["policy_lines", "show_policy"]


def policy_lines(session: Session, shell: Any) -> list[str]:
    """The policy's description, one line each (plain text)."""
    course = current(shell)
    loc = course.location
    notebook = str(loc.notebook) if loc.notebook is not None else "unknown"
    lines = [f"notebook: {notebook} (found by {loc.how})"]
    if course.path is None:
        lines.append(
            f"no course policy: no {FILENAME} in {loc.folder} or a folder above it, and {ENV} "
            "is not set; every model and option is allowed"
        )
        return lines
    lines.append(f"policy: {course.path}" + (f" (named by {ENV})" if course.policy and
                                                course.policy.from_env else ""))  # fmt: skip
    if course.error is not None:
        lines.append(f"it cannot be read, so every %agent run is refused: {course.error}")
        return lines
    assert course.policy is not None
    lines.append(f"digest: {course.policy.digest}")
    sections = ", ".join(f"notebooks[{n}]" for n in course.sections) or "none"
    lines.append(f"sections that apply here: {sections}")
    rules = course.rules
    origin = rules.origin

    def said(rule: str, value: Any) -> str:
        where = origin.get(rule)
        return f"{describe_value(value)}" + (f"  ({where})" if where else "  (default)")

    lines.append(f"ai: {said('ai', rules.ai)}")
    if not rules.ai:
        lines.append(f"message: {rules.message or '(none)'}")
    lines.append(
        f"models: {said('models', list(rules.models)) if rules.models is not None else 'any'}"
    )
    if rules.default_model:
        lines.append(f"default model: {said('default_model', rules.default_model)}")
    lines.append(f"live calls: {said('live', rules.live)}" + ("" if rules.live else
                 " (only the course's recordings replay)"))  # fmt: skip
    lines.append(f"kernel tools (--kernel): {said('kernel_tools', rules.kernel_tools)}")
    lines.append(f"MCP servers: {said('mcp', rules.mcp)}")
    lines.append(f"--approve auto: {said('auto_approve', rules.auto_approve)}")
    spent = {"session": session_spent(session), "notebook": notebook_spent(session, course)}
    for scope in ("run", "session", "notebook"):
        limit = rules.budget(scope)
        if limit.empty:
            continue
        parts = []
        for part in ("tokens", "requests", "usd"):
            value = getattr(limit, part)
            if value is None:
                continue
            shown = usd_text(value) if part == "usd" else f"{value:,} {part}"
            if scope in spent:
                used = getattr(spent[scope], part)
                shown += f" ({usd_text(used) if part == 'usd' else f'{used:,}'} used)"
            parts.append(shown)
        lines.append(f"budget per {scope}: {', '.join(parts)}")
    return lines


def show_policy(session: Session, shell: Any, _words: list[str]) -> None:
    """``%agent policy``."""
    from IPython.display import display

    lines = [redact_secrets(line) for line in policy_lines(session, shell)]
    markdown = "**Course policy**\n\n" + "\n".join(
        f"- {md_text(line)}" if "sha256:" not in line else f"- digest: {code_span(line[8:])}"
        for line in lines
    )
    display(no_math({"text/markdown": markdown, "text/plain": "\n".join(lines)}), raw=True)  # type: ignore[no-untyped-call]
