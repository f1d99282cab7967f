"""The kernel's one session, made on first use: what ``%agent``, the post-cell hook and
:func:`nbagent.session` all work on.

A room of its own (below the magics, which look it up when a rewritten ``%agent`` line runs,
and below the package's face, which loads the magics) so that neither imports the other back.
Cheap to import: the session's module loads when the session is first made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .core.session import Session

__all__ = ["current_session", "existing", "for_shell", "shell"]

_session: Session | None = None


def current_session() -> Session:
    """The session of this kernel (created on first use): tools, conversation, runs."""
    running = shell()
    if _session is None or (running is not None and _session.shell is not running):
        return _made(running)
    return _session


def for_shell(ipython: Any) -> Session:
    """The session of ``ipython`` (the extension loading there): a new one unless the
    session belongs to that shell."""
    if _session is None or _session.shell is not ipython:
        return _made(ipython)
    return _session


def _made(ipython: Any) -> Session:
    """A new session for ``ipython``, its course policy's gate on the request path (every
    model request of the kernel passes it: :mod:`.requestgate`)."""
    global _session
    from .core.session import Session
    from .policy.requestgate import govern

    _session = Session(ipython)
    govern(_session)
    return _session


def existing() -> Session | None:
    """The session, if one was made."""
    return _session


def shell() -> Any:
    """The running IPython shell, or None (a script, or IPython not installed)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()
