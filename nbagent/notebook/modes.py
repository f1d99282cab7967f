"""Where an ``%agent`` run runs: in its cell (the cell awaits it), in the foreground, or in the
background, and why when it is not in its cell (see :mod:`.core.runner`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .core.frontend import awaiting_cells_take_clicks

if TYPE_CHECKING:
    from .core.runner import Mode
    from .core.session import Session

__all__ = ["run_mode"]


def run_mode(shell: Any, session: Session, awaited: bool, needs_clicks: bool) -> tuple[Mode, str]:
    """Where the run runs (see :mod:`.runner`), and why when it is not in its cell."""
    if awaited:
        ok, why = awaiting_cells_take_clicks()
        if ok or (not needs_clicks and not session.busy):
            return "cell", ""
        if not needs_clicks:  # waiting in the cell for a run that waits for a click
            return "background", f"it must wait for the run before it, and {why}"
        return "background", why
    if needs_clicks:
        from .command.cells import installed, installed_in_this_cell

        if not installed(shell):
            return "background", (
                "nbagent's extension is not loaded (after %unload_ext nbagent), so the cell "
                "cannot wait for its run (%load_ext nbagent makes cells wait again)"
            )
        if installed_in_this_cell(shell):
            return "background", (
                "nbagent was loaded in this same cell, too late to make the cell wait for "
                "its run (run %load_ext nbagent in a cell of its own)"
            )
        return "background", (
            "this %agent is not at the top level of its cell (or it runs inside another "
            "magic, such as %%time), so the cell cannot wait for it"
        )
    if session.busy:
        return "background", "another run is still going on in the background"
    return "foreground", ""
