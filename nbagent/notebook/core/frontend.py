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

import importlib.util
import os
from dataclasses import dataclass
from typing import Any, Literal

from ...approvals.approval import Approver, AutoApprove, DenyAll, InteractiveApprover

__all__ = [
    "AWAIT_FLOOR",
    "Frontend",
    "Policy",
    "approver_for",
    "awaiting_cells_take_clicks",
    "choose_policy",
    "detect",
]

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


#: The oldest ipykernel that dispatches comm messages (widget clicks) while a cell awaits.
AWAIT_FLOOR = (7, 4)


def awaiting_cells_take_clicks(environ: dict[str, str] | None = None) -> tuple[bool, str]:
    """Can a cell await a run and still receive its clicks? And why nbagent thinks so.

    ipykernel 7.4 dispatches comm messages while an async cell holds the main shell (measured
    in JupyterLab 4.6 with and without comm subshells, and from a bare kernel client); older
    kernels queue them behind the cell, so a cell that awaited a click would wait forever.
    ``NBAGENT_AWAIT_CLICKS=0|1`` overrides the guess (for a frontend proven not to work).
    """
    env = os.environ if environ is None else environ
    forced = env.get("NBAGENT_AWAIT_CLICKS", "").strip().lower()
    if forced in ("0", "false", "no", "1", "true", "yes"):
        return forced in ("1", "true", "yes"), f"NBAGENT_AWAIT_CLICKS={forced}"
    try:
        import ipykernel
    except ImportError:
        return False, "no ipykernel"
    version = getattr(ipykernel, "version_info", None) or ()
    parts = tuple(int(p) for p in version[:2] if isinstance(p, int))
    floor = ".".join(map(str, AWAIT_FLOOR))
    here = getattr(ipykernel, "__version__", "?")
    if parts >= AWAIT_FLOOR:
        return True, f"ipykernel {here} takes clicks while a cell waits"
    return False, f"ipykernel {here} cannot take clicks while a cell waits (≥ {floor} can)"


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


def widgets_available() -> bool:
    """ipywidgets and anywidget can be imported here (the live views need both)."""
    return all(importlib.util.find_spec(name) is not None for name in ("ipywidgets", "anywidget"))
