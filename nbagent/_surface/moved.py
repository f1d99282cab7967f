"""Module paths that moved, importable for one more release with a ``DeprecationWarning``.

Grouping the core into rooms moved documented modules (``nbagent.stepping`` is now
``nbagent.inspection.stepping`` …). Code written against the older docs keeps working:
``import nbagent.stepping``, ``from nbagent.stepping import next_step`` and ``nbagent.stepping``
after ``import nbagent`` give the module at its new path (the same module object, so every
attribute is the same object as at the new path), and warn once, at the line that first imports
the old path, naming the new one.

The finder goes last on ``sys.meta_path``: the import system asks it only about a module no
other finder found, so no other import pays for it, and ``import nbagent`` loads nothing more.
No module of ``nbagent`` imports an old path (``tests/test_moved.py``); each alias is removed in
the release after the next (CHANGELOG.md, "Deprecated").
"""

from __future__ import annotations

import os
import sys
import warnings
from types import FrameType, ModuleType
from typing import Any

#: Old path -> the path the module lives at now.
MOVED: dict[str, str] = {
    "nbagent.approval": "nbagent.approvals.approval",
    "nbagent.exchange": "nbagent.inspection.exchange",
    "nbagent.fork": "nbagent.inspection.fork",
    "nbagent.hooks": "nbagent.approvals.hooks",
    # the notebook front end's rooms (the paths its docs showed)
    "nbagent.notebook.cellnote": "nbagent.notebook.live.cellnote",
    "nbagent.notebook.frontend": "nbagent.notebook.core.frontend",
    "nbagent.notebook.grammar": "nbagent.notebook.command.grammar",
    "nbagent.rules": "nbagent.approvals.rules",
    "nbagent.run": "nbagent.loop.run",
    "nbagent.stepping": "nbagent.inspection.stepping",
}


def message(old: str) -> str:
    """What the warning says: the new path, and how long the old one works."""
    return (
        f"{old} moved to {MOVED[old]}: import from there, or from nbagent itself where the docs "
        f"show it; the old path works for one more release"
    )


class MovedFinder:
    """Finds an old path (only: every other name is someone else's) and loads it as the module
    at its new path."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in MOVED:
            return None
        from importlib.machinery import ModuleSpec

        # a loader by protocol (create_module, exec_module): importlib.abc costs an import
        loader: Any = MovedLoader(fullname)
        return ModuleSpec(fullname, loader)

    def __repr__(self) -> str:
        return "<nbagent's finder of moved module paths>"


class MovedLoader:
    """The module of an old path is the module of its new path, imported; loading it warns."""

    def __init__(self, old: str) -> None:
        self.old = old

    def create_module(self, spec: Any) -> ModuleType:
        import importlib

        # the import system keeps the module's own __name__, __spec__ and __loader__ (it sets
        # them only where a module has none), and binds it at the old name in sys.modules and
        # as an attribute of nbagent
        return importlib.import_module(MOVED[self.old])

    def exec_module(self, module: ModuleType) -> None:
        warn(self.old)


def warn(old: str) -> None:
    """Warn at the importer's line: the first frame outside the import machinery and nbagent's
    face (an import statement, ``importlib.import_module``, ``nbagent.stepping`` read as an
    attribute all reach here through different frames, so no fixed stacklevel fits)."""
    frame = _importer()
    if frame is None:
        warnings.warn(message(old), DeprecationWarning, stacklevel=2)
        return
    module_globals = frame.f_globals
    warnings.warn_explicit(
        message(old),
        DeprecationWarning,
        frame.f_code.co_filename,
        frame.f_lineno,
        module=module_globals.get("__name__") or "<string>",
        registry=module_globals.setdefault("__warningregistry__", {}),
        module_globals=module_globals,
    )


def _importer() -> FrameType | None:
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and _machinery(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def _machinery(filename: str) -> bool:
    """A frame of the import system (frozen or not, ``importlib.import_module`` included), of
    this module, or of the package's ``__getattr__``."""
    import importlib

    if filename.startswith("<frozen importlib"):
        return True
    if os.path.dirname(filename) == os.path.dirname(importlib.__file__ or ""):
        return True
    return filename in (__file__, sys.modules["nbagent"].__file__)


def attribute(name: str) -> ModuleType | None:
    """``nbagent.<name>`` for an old path read as an attribute of the package (``import
    nbagent; nbagent.stepping``): the module, imported through the finder (which warns)."""
    if f"nbagent.{name}" not in MOVED:
        return None
    import importlib

    return importlib.import_module(f"nbagent.{name}")


def install() -> None:
    """Put the finder last on ``sys.meta_path`` (once, also when nbagent is reloaded)."""
    if not any(type(finder).__module__ == __name__ for finder in sys.meta_path):
        sys.meta_path.append(MovedFinder())
