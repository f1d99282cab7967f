"""Loading and unloading the extension: ``%agent`` and ``%%agent``, the transformers that let
a cell await its run, the post-cell scan for tools, the MCP sign-in presenter, and finishing
live runs when the kernel shuts down or the interpreter exits."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import _current
from ._current import current_session

__all__ = ["load_ipython_extension", "unload_ipython_extension"]


def _after_cell(*_args: Any) -> None:
    from .core.session import show_problems

    try:
        show_problems(current_session().scan())
    except Exception as exc:  # a hook must never break the notebook
        show_problems([f"could not scan the namespace for tools: {exc}"])


#: The shell whose cells show MCP sign-in links, and how to withdraw that offer.
_presenting: tuple[Any, Callable[[], None]] | None = None


def _present_sign_ins(ipython: Any) -> None:
    """Hand the MCP client this notebook's sign-in presenter (None: withdraw it): the client
    never imports a front end; the front end that owns the person offers it."""
    global _presenting
    if _presenting is not None:
        if _presenting[0] is ipython:
            return
        _presenting[1]()
        _presenting = None
    if ipython is not None:
        from ..mcp._signin import present_with
        from .signin import offered_by

        _presenting = (ipython, present_with(offered_by(ipython)))


_exit_hook = False


def _at_exit() -> None:
    """At interpreter exit, turn live runs into finished outputs (once per process)."""
    global _exit_hook
    if _exit_hook:
        return
    import atexit

    def close_runs() -> None:
        session = _current.existing()
        if session is not None:
            try:
                session.shutdown()
            except Exception:  # exiting: nothing left to tell
                pass

    atexit.register(close_runs)
    _exit_hook = True


def _end_external_agents(session: Any) -> None:
    """End the agents ``%agent --acp`` started (their processes never outlive the kernel;
    interpreter exit kills any left, :mod:`nbagent.acp.process`)."""
    from .external.agents import close_all

    try:
        close_all(session)
    except Exception:  # the kernel is going away: nothing left to tell
        pass


def _on_shutdown(ipython: Any) -> None:
    """A kernel asked to shut down sets ``shell.exit_now``: finish the live runs right then,
    while the kernel can still send their outputs (atexit may come too late for that)."""
    observe = getattr(ipython, "observe", None)
    if observe is None or getattr(ipython, "_nbagent_watches_exit", False):
        return

    def exiting(change: Any) -> None:
        session = _current.existing()
        if change.get("new") and session is not None and session.shell is ipython:
            try:
                session.shutdown()
            except Exception:  # the kernel is going away: nothing left to tell
                pass
            _end_external_agents(session)

    observe(exiting, names="exit_now")
    ipython._nbagent_watches_exit = True


def _result_of(run_id: str) -> Any:
    """A run of this kernel's session by its id, for ``compare("run-3", …)`` in a cell."""
    return current_session().result_of(run_id)


def load_ipython_extension(ipython: Any) -> None:
    """Register ``%agent`` / ``%%agent``, the transformers that let a cell await its run, and
    the post-cell hook that picks up tools."""
    from ..inspection.fork import set_run_lookup
    from .command import cells
    from .core.session import show_problems
    from .magics import AgentMagics
    from .map.mapmagic import install_default_view

    session = _current.for_shell(ipython)
    ipython.register_magics(AgentMagics(ipython, session))
    cells.install(ipython)
    _present_sign_ins(ipython)
    install_default_view()
    set_run_lookup(_result_of)
    _at_exit()
    _on_shutdown(ipython)
    if _after_cell not in ipython.events.callbacks["post_run_cell"]:
        ipython.events.register("post_run_cell", _after_cell)
    show_problems(session.scan())


def unload_ipython_extension(ipython: Any) -> None:
    """Stop rewriting ``%agent`` lines and picking up tools after each cell, and stop the MCP
    servers ``%agent mcp add`` started (the session and its runs stay)."""
    from .command import cells

    cells.uninstall(ipython)
    _present_sign_ins(None)
    if _after_cell in ipython.events.callbacks["post_run_cell"]:
        ipython.events.unregister("post_run_cell", _after_cell)
    session = _current.existing()
    if session is not None and session.shell is ipython:
        session.close_mcp_servers()
        _end_external_agents(session)
