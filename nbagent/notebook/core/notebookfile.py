"""Which notebook file this kernel runs, as far as a kernel can know it.

A kernel is not told which notebook it runs. jupyter-server (JupyterLab, Notebook 7,
JupyterHub) starts it with ``JPY_SESSION_NAME``: the notebook's path when the kernel started;
ipykernel copies it to ``__session__``. VS Code sets ``__vsc_ipynb_file__``. nbclient and
``jupyter execute`` set neither, but start the kernel in the notebook's folder. The course
policy looks its file up from here, ``%agent report`` reads earlier runs from the saved file,
and ``%agent --continue`` the conversation they held.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Location", "locate"]


@dataclass(frozen=True)
class Location:
    """Where the notebook is: its path (None: unknown), its folder, and how that was found."""

    notebook: Path | None
    folder: Path
    how: str


def locate(shell: Any, environ: dict[str, str] | None = None) -> Location:
    """This kernel's notebook (see the module): ``JPY_SESSION_NAME`` / ``__session__``, VS
    Code's ``__vsc_ipynb_file__``, else unknown in the working folder."""
    env = os.environ if environ is None else environ
    cwd = Path(os.getcwd())
    namespace = getattr(shell, "user_ns", None) or {}
    candidates = [
        (env.get("JPY_SESSION_NAME", ""), "JPY_SESSION_NAME (set by jupyter-server)"),
        (namespace.get("__session__", ""), "__session__ (set by ipykernel)"),
        (namespace.get("__vsc_ipynb_file__", ""), "__vsc_ipynb_file__ (set by VS Code)"),
    ]
    for value, how in candidates:
        if not isinstance(value, str) or not value.endswith(".ipynb") or len(value) > 4096:
            continue
        path = Path(value)
        for option in (path, cwd / path, cwd / path.name) if not path.is_absolute() else (path,):
            try:
                if option.is_file():
                    return Location(option.resolve(), option.resolve().parent, how)
            except OSError:
                continue
    return Location(None, cwd, "unknown (no JPY_SESSION_NAME, __session__ or __vsc_ipynb_file__)")
