"""What a snippet may not take away: nbagent's own objects and the shell's names (put back
after the snippet, and said), and the kernel itself (an ``exit()`` is refused)."""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Any

from .._ground.guard import derives
from ._namespace import SHELL_NAMES

__all__ = ["Keeper", "refuse_exit", "restore"]

_MISSING = object()


class Keeper:
    """Finds the names to keep: modules of nbagent, values of ``kinds`` (tools, agents,
    toolkits, and their subclasses), and the shell's own names (``In``, ``Out``,
    ``get_ipython`` …)."""

    def __init__(self, *kinds: type) -> None:
        self.kinds = kinds
        #: Each type met, and whether its values are kept: looked at once.
        self._kept: dict[type, bool] = dict.fromkeys(kinds, True)

    def take(self, namespace: Mapping[str, Any]) -> dict[str, Any]:
        """The names of ``namespace`` to keep, and their values now."""
        kept = {}
        for name, value in list(namespace.items()):
            kind = type(value)
            if kind is types.ModuleType:
                module = vars(value).get("__name__")  # not value.__name__: a module's __getattr__
                if type(module) is str and module.split(".")[0] == "nbagent":
                    kept[name] = value
                continue
            # a type whose metaclass is not type is never hashed (its __hash__ is someone's
            # code), and its MRO is read by identity (issubclass against KernelToolkit, a
            # Sequence, would hash it)
            cached = type(kind) is type
            is_kept = self._kept.get(kind) if cached else None
            if is_kept is None:
                is_kept = derives(kind, *self.kinds)
                if cached:
                    self._kept[kind] = is_kept
            if is_kept or name in SHELL_NAMES:
                kept[name] = value
        return kept


def restore(namespace: dict[str, Any], kept: Mapping[str, Any]) -> list[str]:
    """Put back each kept name the snippet rebound or deleted; the names put back."""
    restored = []
    for name, value in kept.items():
        if namespace.get(name, _MISSING) is not value:
            namespace[name] = value
            restored.append(name)
    return restored


def refuse_exit(shell: Any) -> bool:
    """Undo an ``exit()`` / ``quit()`` the snippet called: the shell would end the kernel (or
    ask the frontend to) once the cell ends. True if there was one."""
    if shell is None:
        return False
    asked = bool(getattr(shell, "exit_now", False))
    payloads = getattr(shell, "payload_manager", None)
    if payloads is not None:
        kept = [p for p in payloads.read_payload() if p.get("source") != "ask_exit"]
        asked = asked or len(kept) != len(payloads.read_payload())
        payloads.clear_payload()
        for payload in kept:
            payloads.write_payload(payload, single=False)
    if asked:
        shell.exit_now = False
    return asked
