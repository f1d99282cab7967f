"""What a snippet changed in the process besides the namespace, said in its result.

Code the agent runs may ``os.chdir``, edit ``sys.path`` or ``os.environ``, or import modules:
all of it outlives the snippet and changes what later cells do (a relative path now opens another
file). :class:`ProcessState` notes these before a snippet and :meth:`ProcessState.changes` says
what differs after it. The model reads what follows from the snippet's own code; what also
depends on the kernel's history (a module some called code loaded for the first time in *this*
kernel) is for the person only, since a recorded run must replay the same in a kernel that had
loaded it already. An environment variable is named, never shown: its value may be a key. Undo
does not change any of it back.
"""

from __future__ import annotations

import ast
import os
import sys
from dataclasses import dataclass

from ..redact import redact_secrets

__all__ = ["ProcessState", "imported_names"]

#: Names (paths, variables, modules) listed per kind of change; the rest are counted.
MAX_NAMED = 12
#: Top-level names of the standard library: importing one is not news to the model.
_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | frozenset(sys.builtin_module_names)
#: Characters of one path shown.
MAX_PATH = 200


def _cwd() -> str | None:
    try:
        return os.getcwd()
    except OSError:  # the folder was removed under the process
        return None


def _shown_path(path: str) -> str:
    """A path as the result shows it: the home folder as ``~``, cut when very long."""
    home = os.path.expanduser("~")
    if home not in ("", "~", "/") and (path == home or path.startswith(home + os.sep)):
        path = "~" + path[len(home) :]
    path = redact_secrets(path)
    return path if len(path) <= MAX_PATH else path[: MAX_PATH - 1] + "…"


def _listed(names: list[str], quote: bool = False) -> str:
    shown = [repr(n) if quote else n for n in names[:MAX_NAMED]]
    more = len(names) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more else "")


@dataclass(frozen=True)
class ProcessState:
    """The working directory, ``sys.path``, the environment and the imported modules."""

    cwd: str | None
    path: tuple[str, ...] | None  # None: sys.path is no longer a list
    environ: dict[str, str] | None  # None: os.environ is no longer the process's mapping
    modules: frozenset[str]

    @classmethod
    def take(cls) -> ProcessState:
        path = sys.path
        entries = (
            tuple(p if type(p) is str else f"<{type(p).__name__}>" for p in path)
            if type(path) is list
            else None
        )
        environ = dict(os.environ) if type(os.environ) is os._Environ else None
        modules = frozenset(k for k in list(sys.modules) if type(k) is str)
        return cls(_cwd(), entries, environ, modules)

    def changes(
        self, now: ProcessState, imports: frozenset[str] = frozenset()
    ) -> tuple[list[str], list[str]]:
        """What differs in ``now``, one phrase per kind of change (none: nothing did), as
        ``(for the model and the person, for the person only)``; ``imports``: the modules the
        snippet's code imports (:func:`imported_names`)."""
        said: list[str] = []
        if now.cwd != self.cwd:
            where = _shown_path(now.cwd) if now.cwd is not None else "a folder that was removed"
            was = _shown_path(self.cwd) if self.cwd is not None else "a removed folder"
            said.append(
                f"working directory is now {where} (was {was}): relative paths in later cells "
                "open files there"
            )
        said += self._path_changes(now)
        said += self._environ_changes(now)
        own, loaded = self._module_changes(now, imports)
        return said + own, loaded

    def _path_changes(self, now: ProcessState) -> list[str]:
        if now.path == self.path:
            return []
        if now.path is None:
            return ["sys.path was replaced by something that is not a list"]
        before = set(self.path or ())
        after = set(now.path)
        added = [p for p in now.path if p not in before]
        removed = [p for p in (self.path or ()) if p not in after]
        parts = []
        if added:
            parts.append(f"added {_listed([_shown_path(p) for p in added], quote=True)}")
        if removed:
            parts.append(f"removed {_listed([_shown_path(p) for p in removed], quote=True)}")
        return [f"sys.path: {'; '.join(parts) if parts else 'reordered'}"]

    def _environ_changes(self, now: ProcessState) -> list[str]:
        if now.environ is None:
            return ["os.environ was replaced by another object"]
        was = self.environ or {}
        if now.environ == was:
            return []
        added = sorted(n for n in now.environ if n not in was)
        changed = sorted(n for n in now.environ if n in was and now.environ[n] != was[n])
        removed = sorted(n for n in was if n not in now.environ)
        parts = []
        for verb, names in (("set", added), ("changed", changed), ("removed", removed)):
            if names:
                parts.append(f"{verb} {_listed(names)}")
        return [f"environment variables: {'; '.join(parts)} (values not shown)"]

    def _module_changes(
        self, now: ProcessState, named: frozenset[str]
    ) -> tuple[list[str], list[str]]:
        new = now.modules - self.modules
        gone = self.modules - now.modules
        said: list[str] = []
        loaded: list[str] = []
        # the modules the snippet's own import statements name, loaded now: the same whether
        # this kernel had loaded them before or not (an import statement imports either way).
        # The standard library is left out (``import os`` is no news: every kernel has it),
        # and what the modules import in turn differs between library versions: never named
        brought = {n for n in named & now.modules if n.partition(".")[0] not in _STDLIB}
        own = sorted(n for n in brought if n.rpartition(".")[0] not in brought)
        if own:
            said.append(f"imported {_listed(own)} (with the modules they need)")
        # loaded for the first time in this kernel by code it called: the new top-level
        # packages (not every submodule of a package already there: pandas imports its own
        # parts as it goes), for the person only, since another kernel may have had them
        packages = {n.partition(".")[0] for n in self.modules} | {
            n.partition(".")[0] for n in named
        }
        roots = sorted(
            {n.partition(".")[0] for n in new} - packages,
            key=lambda n: (n.startswith("_"), n),
        )
        if roots:
            loaded.append(f"imported {_listed(roots)} (by code it called)")
        if gone:
            said.append(f"removed from sys.modules: {_listed(sorted(gone))}")
        return said, loaded


def imported_names(source: str) -> frozenset[str]:
    """The modules a snippet's own import statements name (``import a.b`` → ``a.b``;
    ``from a import b`` → ``a``, and ``a.b`` in case ``b`` is a module)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return frozenset()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return frozenset(names)
