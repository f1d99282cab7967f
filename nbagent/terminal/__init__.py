"""The terminal front end: ``python -m nbagent`` (or the ``nbagent`` script).

Like every front end it only reads :mod:`nbagent.events` and answers approvals through an
approver. The pieces are usable on their own: :class:`TerminalView` renders any run's events as
a readable transcript, :func:`load_tools` gathers tools the way ``--tools`` does, and
:func:`demo_tools` are the tools offered when none are given.

Importing this package is cheap; the loop and the providers load when :func:`main` needs them.

May import (docs/architecture.md): every room below the front ends; never the notebook.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._cli import build_parser, main

if TYPE_CHECKING:
    from ._console import Console
    from ._demo import demo_tools
    from ._loading import LoadedTools, ToolsLoadError, load_tools
    from ._view import TerminalLimits, TerminalView

__all__ = [
    "Console",
    "LoadedTools",
    "TerminalLimits",
    "TerminalView",
    "ToolsLoadError",
    "build_parser",
    "demo_tools",
    "load_tools",
    "main",
]

_LAZY = {
    "Console": "._console",
    "demo_tools": "._demo",
    "LoadedTools": "._loading",
    "ToolsLoadError": "._loading",
    "load_tools": "._loading",
    "TerminalLimits": "._view",
    "TerminalView": "._view",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module, __name__), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
