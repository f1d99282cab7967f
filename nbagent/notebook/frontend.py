"""Who is on the other side of the kernel, and therefore how a run is shown, run and approved.

Interactive (JupyterLab, Notebook 7, VS Code, Colab): a person can click. Runs show as widgets
and run as background tasks so that the clicks reach them. Headless (nbclient, papermill,
``jupyter execute``, ``nbconvert --execute``, plain IPython): nobody can click. Runs show as
ordinary outputs and run in the foreground, so that the outputs are saved with the cell.

The signal: every Jupyter client says in each ``execute_request`` whether it can answer
``input()`` (``allow_stdin``). Interactive frontends can; nbclient (and everything built on it)
sends ``allow_stdin: false``. A client that cannot answer a prompt cannot answer a button
either. ``NBAGENT_MODE=interactive|headless`` overrides the guess.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Literal

from ..approval import Approver, AutoApprove, DenyAll, InteractiveApprover

__all__ = ["Frontend", "Policy", "approver_for", "choose_policy", "detect"]

Policy = Literal["ask", "auto", "deny"]
_POLICIES: tuple[Policy, ...] = ("ask", "auto", "deny")

HOW_TO_ALLOW = (
    "set NBAGENT_APPROVAL=auto (or use `%agent --approve auto ...`) to let such calls run"
)


@dataclass(frozen=True)
class Frontend:
    """Whether a person can click, and why nbagent thinks so."""

    interactive: bool
    reason: str


def _parent_message(shell: Any) -> dict[str, Any] | None:
    kernel = getattr(shell, "kernel", None)
    get_parent = getattr(kernel, "get_parent", None)
    if callable(get_parent):
        try:
            parent = get_parent("shell")
        except Exception:
            parent = None
        if isinstance(parent, dict) and parent:
            return parent
    parent = getattr(shell, "parent_header", None)
    return parent if isinstance(parent, dict) and parent else None


def detect(shell: Any, environ: dict[str, str] | None = None) -> Frontend:
    """Is the cell being run by someone who can click? See the module docstring."""
    env = os.environ if environ is None else environ
    forced = env.get("NBAGENT_MODE", "").strip().lower()
    if forced in ("interactive", "headless"):
        return Frontend(forced == "interactive", f"NBAGENT_MODE={forced}")
    if getattr(shell, "kernel", None) is None:
        return Frontend(False, "not in a Jupyter kernel (plain IPython)")
    parent = _parent_message(shell)
    content = parent.get("content") if parent else None
    allow_stdin = content.get("allow_stdin") if isinstance(content, dict) else None
    if allow_stdin is False:
        return Frontend(
            False,
            "the client cannot answer input (nbclient, papermill, jupyter execute, "
            "nbconvert --execute)",
        )
    return Frontend(True, "a Jupyter frontend that can answer input (JupyterLab, VS Code …)")


def choose_policy(
    flag: str | None, frontend: Frontend, environ: dict[str, str] | None = None
) -> tuple[Policy, str]:
    """The approval policy of one run and where it came from: ``--approve``, then
    ``NBAGENT_APPROVAL``, then "ask" when someone can click and "deny" when nobody can."""
    env = os.environ if environ is None else environ
    for value, source in ((flag, "--approve"), (env.get("NBAGENT_APPROVAL"), "NBAGENT_APPROVAL")):
        if value and value.strip():
            key = value.strip().lower()
            for policy in _POLICIES:
                if key == policy:
                    return policy, source
            raise ValueError(f"{source}={value!r}: use ask, auto or deny")
    return ("ask" if frontend.interactive else "deny"), "default"


def approver_for(
    policy: Policy, source: str, frontend: Frontend, interactive: InteractiveApprover
) -> Approver:
    """The approver for a policy; "ask" with nobody to ask denies, saying how to allow."""
    if policy == "auto":
        return AutoApprove()
    if policy == "ask" and frontend.interactive:
        return interactive
    if policy == "ask" or source == "default":
        return DenyAll(f"nobody can approve calls in a headless run; {HOW_TO_ALLOW}")
    return DenyAll(f"calls that need approval are denied in this run ({source}=deny)")
