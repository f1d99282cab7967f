"""The line that connects an MCP client to ``%agent serve``, shown once in the serving cell.

It holds the bearer token, so it is sent to the page as a message that no widget state keeps
(:mod:`.secretline`), and it leaves the cell when a client connects, on "Hide the line", when
another cell runs or when serving ends.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from ..shown.render import close_widgets, md_text

__all__ = ["Serving", "show_connection"]


class Serving(Protocol):
    """What the line reads of the serving (:class:`~.serving.ServedSession`)."""

    session: Any
    server: Any
    calls: Any
    hide_line: Callable[[], None] | None

    @property
    def url(self) -> str:
        """Where it serves."""

    def connection_line(self, client: str = "claude") -> str:
        """The line to paste into ``client``, with the token."""


def show_connection(served: Serving) -> None:
    """The line to paste, once: a widget whose saved form has no token. It leaves the cell
    (plain text without the token in its place, the widget closed, so that no widget state
    holds it any more) when the person clicks "Hide", when a client first connects with the
    token (it was seen and used), when the next cell runs, or when serving ends."""
    import ipywidgets as widgets
    from IPython.display import display

    from ..live.savedform import SavedForm
    from ..live.secretline import SecretLine

    # the lines travel as messages to the page, never as widget state (a notebook saved with
    # its widget state holds no token): see .secretline
    lines = [
        SecretLine(served.connection_line("claude")),
        SecretLine(served.connection_line("json")),
    ]
    small = widgets.Layout(margin="0")
    shown = widgets.VBox(
        [
            widgets.HTML(
                '<div style="font-size:0.9em">Connect a client (shown once; it holds the '
                "token, and disappears when a client connects, another cell runs or you hide "
                "it). Claude Code:</div>",
                layout=small,
            ),
            lines[0],
            widgets.HTML(
                '<div style="font-size:0.9em">Any client that takes JSON (Cursor, VS Code …):'
                "</div>",
                layout=small,
            ),
            lines[1],
        ]
    )
    button = widgets.Button(
        description="Hide the line", icon="eye-slash", tooltip="I have copied it: hide it now"
    )
    # what a notebook saved while the line shows holds instead (never the line: no page puts
    # it back after a reload either)
    saved_form = SavedForm(restore=False)
    box = widgets.VBox([shown, button, saved_form])
    saved_form.view_id = box.model_id
    text = (
        f"The line that connects a client to {served.url}, with its token, was shown here "
        "once (while it serves, nbagent.serve().connection_line() gives it again; "
        "%agent serve stop, then %agent serve, makes a new token)."
    )
    said = {"text/plain": text, "text/markdown": f"*{md_text(text)}*"}
    saved_form.keep(said, {})
    data = {
        "text/plain": text,
        "application/vnd.jupyter.widget-view+json": {
            "version_major": 2,
            "version_minor": 0,
            "model_id": box.model_id,
        },
    }
    display_id = f"nbagent-serve-line-{uuid.uuid4().hex}"
    display(data, raw=True, display_id=display_id)  # type: ignore[no-untyped-call]
    shell = served.session.shell
    made = int(getattr(shell, "execution_count", 0) or 0)
    done = threading.Lock()
    hidden: list[bool] = []

    def hide() -> None:
        from IPython.display import update_display

        with done:
            if hidden:
                return
            hidden.append(True)
        served.hide_line = None
        # plain text in place of the widget: a saved notebook then holds no widget here
        update_display(said, raw=True, display_id=display_id)  # type: ignore[no-untyped-call]
        saved_form.end(said, {})  # and in a page reloaded since, which missed that update
        for secret in lines:  # no view gets the token any more
            secret.forget()
        close_widgets([box, shown, *shown.children, button, saved_form])
        if shell is not None and hasattr(shell, "events"):
            try:
                shell.events.unregister("post_run_cell", after_cell)
            except ValueError:
                pass

    def after_cell(result: Any = None) -> None:
        count = getattr(result, "execution_count", None)
        if count is not None and count < made:
            return  # the serving cell's own end
        hide()

    loop = served.calls.loop

    def connected() -> None:  # on the server's thread: the cell's outputs are the kernel's
        try:
            loop.call_soon_threadsafe(hide)
        except RuntimeError:  # the kernel's loop is closed: serving ends with it
            pass

    button.on_click(lambda _button: hide())
    served.hide_line = hide
    served.server.on_connect = connected
    if served.server.connected.is_set():
        connected()
    if shell is not None and hasattr(shell, "events"):
        shell.events.register("post_run_cell", after_cell)
