"""nbagent in Jupyter: ``%load_ext nbagent``, then ``%agent`` and ``@nbagent.tool`` in any cell.

Loading the extension is cheap: widgets are imported when the first run starts. After it is
loaded, every ``@nbagent.tool`` defined in a cell is registered when the cell finishes (a post-run
hook scans the notebook's namespace); :func:`register` adds tools from elsewhere at once.

Inside, the front end is in rooms of its own (docs/architecture.md, "The notebook's rooms"):
the command language (``command/``), what every view is made of (``shown/``), the saved and the
live view (``saved/``, ``live/``), the session (``core/``), the course policy on it
(``policy/``), the kernel and notebook tools' front ends (``toolkit/``, ``editing/``), the
features (``serving/``, ``map/``, ``reports/``), and here, at the top, the magics that dispatch
to them (``magics``, ``commands``, ``servers``) and the extension's load (``extension``).

May import (docs/architecture.md): every room below the front ends; never the terminal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, overload

from . import _current
from ._current import current_session
from .extension import load_ipython_extension, unload_ipython_extension

if TYPE_CHECKING:
    from ..acp import ExternalAgent
    from ..tools import Definition, Tool

__all__ = [
    "current_session",
    "load_ipython_extension",
    "register",
    "register_agent",
    "unattended",
    "unload_ipython_extension",
]


def unattended() -> bool:
    """True when nobody can click in this cell: nbclient, ``jupyter execute``, papermill, CI
    (then calls that need approval are decided by ``--approve`` or ``NBAGENT_APPROVAL``, else
    denied). A lesson can pick its policy for such runs with it."""
    from .core.frontend import detect

    return not detect(_current.shell()).interactive


@overload
def register(item: Tool | Definition | Callable[..., Any], /, *, function: None = None) -> Tool: ...
@overload
def register(item: Definition, /, *, function: Callable[..., Any]) -> Tool: ...
@overload
def register(
    *items: Tool | Definition | Callable[..., Any], function: None = None
) -> tuple[Tool, ...]: ...
def register(*items: Any, function: Callable[..., Any] | None = None) -> Tool | tuple[Tool, ...]:
    """Register tools in this kernel's session now; the same name replaces the old tool.

    Pass Tools (``@nbagent.tool`` functions, e.g. imported from a module), plain functions (made
    into tools), or one Definition with ``function=`` (called with the arguments as keywords).
    The schema is compiled now: a rejected tool raises here, naming what is wrong.
    """
    made = current_session().register(*items, function=function)
    return made[0] if len(items) == 1 else tuple(made)


def register_agent(
    name: str, command: str, *args: str, env: dict[str, str] | None = None, title: str = ""
) -> ExternalAgent:
    """Register the external agent ``name`` for ``%agent --acp NAME``: ``command args…``
    starts it speaking ACP on stdio, with ``env`` added to the kernel's environment (read a
    key from the environment rather than writing it in the notebook:
    ``env={"KEY": os.environ["KEY"]}``). The same as ``%agent acp add NAME -- COMMAND ARGS``."""
    from .external.agents import register_agent as add

    return add(current_session(), name, command, *args, env=env, title=title)
