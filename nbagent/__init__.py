"""nbagent: build, watch and teach LLM agents in Jupyter.

The core (tools, schemas, the agent loop, offline models) imports no IPython, ipywidgets or HTTP
client; providers and the notebook front end load on first use. In a notebook::

    %load_ext nbagent

    @nbagent.tool
    def weather(city: str) -> str:
        "Current weather for a city."
        return f"Sunny in {city}"

    %agent What is the weather in "Paris"?
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import errors as errors
from ._surface import moved as _moved
from ._surface.names import _LAZY
from ._version import __version__ as __version__

if TYPE_CHECKING:  # what each name is, for type checkers; at run time, __getattr__ loads it
    from ._surface.names import *  # noqa: F403

_moved.install()


def __getattr__(name: str) -> Any:
    """A name of ``__all__`` loaded on first use (see :mod:`nbagent._surface.names`), or a
    module path that moved (:mod:`nbagent._surface.moved`: it warns)."""
    module = _LAZY.get(name)
    if module is None:
        moved = _moved.attribute(name)
        if moved is None:
            raise AttributeError(f"module 'nbagent' has no attribute {name!r}")
        return moved
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = sorted(
    [
        *_LAZY,
        "allow",
        "current_session",
        "forbid",
        "load_ipython_extension",
        "register",
        "serve",
        "unload_ipython_extension",
    ],
    key=str,
)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext nbagent``: register the magics (the notebook front end loads only now)."""
    from .notebook import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext nbagent``."""
    from .notebook import unload_ipython_extension as unload

    unload(ipython)


def current_session() -> Any:
    """The notebook session of this kernel (tools, conversation, settings); loads the front end."""
    from .notebook import current_session as session

    return session()


def register(*tools: Any, **kwargs: Any) -> Any:
    """Register tools with the notebook session (see :func:`nbagent.notebook.register`)."""
    from .notebook import register as notebook_register

    return notebook_register(*tools, **kwargs)


def allow(tool: Any, *, when: Any = None, **where: Any) -> int:
    """Allow calls to ``tool`` in this notebook without asking, all of them or those whose
    arguments match (``allow("write_file", path="data/*")``; see :mod:`nbagent.approvals.rules`).
    The rule is checked against the registered tool now; returns its number (``%agent rules``)."""
    from .notebook import current_session as session

    return int(session().allow(tool, when=when, **where))


def forbid(tool: Any, *, when: Any = None, **where: Any) -> int:
    """Deny calls to ``tool`` in this notebook, all of them or those whose arguments match: the
    Python twin of ``%agent deny`` (``nbagent.deny`` makes a Decision). Returns its number."""
    from .notebook import current_session as session

    return int(session().deny(tool, when=when, **where))


def serve(
    *,
    kernel: bool = False,
    notebook: bool = False,
    approve: str | None = None,
    port: int = 0,
    expose: str | None = None,
) -> Any:
    """Serve this notebook's tools over MCP, as ``%agent serve`` does (``kernel``: the kernel
    tools too; ``notebook``: the notebook tools, on the page of the cell that serves, each
    change a card to accept or reject; ``approve="auto"``: without asking, said once;
    ``expose``: an address beyond loopback). Returns what is served (``.url``, ``.token``,
    ``.stop()``); if something is served already, that. See docs/howto/serve.md: there is no
    sandbox."""
    from .notebook import current_session as session
    from .notebook.serving.serve import serve as start

    return start(
        session(), kernel=kernel, notebook=notebook, approve=approve, port=port, expose=expose
    )
