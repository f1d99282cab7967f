"""A sign-in link in the cell: how an MCP server's OAuth sign-in reaches a notebook reader.

The link is a plain output (``text/html`` with an escaped ``<a href>``, and ``text/plain``),
never a widget, so it shows in every frontend and needs no click to reach the kernel: the
browser comes back to the loopback listener, not to the notebook. Only a URL the sign-in
already checked (http or https, on the authorization server's host) gets here, and it is
shown escaped; nothing the server sent is rendered as HTML. When the sign-in ends, the link is
replaced by "Signed in …", or, when it failed, by nothing (the cell's error says why, in one
line), so a saved notebook does not keep a dead link.

A headless run (nbclient, ``jupyter execute``, papermill; see :mod:`.frontend`) cannot follow
a link: the sign-in is refused at once, before any request, saying why and what to do.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

from ..mcp._link import SignInLink, where_loopback_fails
from .core.frontend import detect

__all__ = ["NotebookPresenter", "offered_by"]


class NotebookPresenter:
    """Shows sign-in links in the running cell (see the module docstring)."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self._handle: Any = None
        self._server = ""

    def refusal(self) -> str | None:
        frontend = detect(self.shell)
        if frontend.interactive:
            return None
        return (
            f"this run is headless ({frontend.reason}): nobody can follow a sign-in link, so "
            "nbagent did not wait for one. Give the server a token instead (%agent mcp add "
            "NAME --url URL --header 'Authorization: Bearer $TOKEN_VAR', or headers= in "
            "Python), or sign in from a notebook open in a browser"
        )

    def show(self, link: SignInLink) -> str | None:
        from IPython.display import display

        self._server = link.server
        url = html.escape(link.url, quote=True)
        name = html.escape(link.server)
        host = html.escape(link.host)
        note = html.escape(where_loopback_fails(link))
        bundle = {
            "text/html": (
                f"<p><b>Sign in to the MCP server {name}</b> ({host}): "
                f'<a href="{url}" target="_blank" rel="noopener noreferrer">open the sign-in '
                f"page</a>. This cell goes on when you have signed in (it waits up to "
                f"{link.timeout:g} s; interrupt the kernel to stop).</p>"
                f"<p><small>{note}</small></p>"
            ),
            "text/plain": (
                f"Sign in to the MCP server {link.server} ({link.host}): open\n{link.url}\n"
                f"This cell goes on when you have signed in (it waits up to {link.timeout:g} s; "
                f"interrupt the kernel to stop).\n{where_loopback_fails(link)}"
            ),
        }
        if self._handle is None:
            self._handle = display(bundle, raw=True, display_id=True)  # type: ignore[no-untyped-call]
        else:
            self._handle.update(bundle, raw=True)
        return None

    def finish(self, problem: str | None) -> None:
        if self._handle is None:
            return
        if problem is not None:
            # the cell ends with the error that says why, one line: a second one here would
            # only repeat it less precisely (and a dead link must not stay in the notebook)
            self._handle.update({}, raw=True)
            return
        text = f"Signed in to the MCP server {self._server}."
        self._handle.update(
            {"text/html": f"<p>{html.escape(text)}</p>", "text/plain": text}, raw=True
        )


def offered_by(shell: Any) -> Callable[[], NotebookPresenter | None]:
    """What the extension hands the MCP client (:func:`nbagent.mcp._signin.present_with`): a
    presenter for ``shell``'s cells while it runs in a kernel, else None (a plain IPython has
    no cell output to put a link in)."""

    def offer() -> NotebookPresenter | None:
        return NotebookPresenter(shell) if getattr(shell, "kernel", None) is not None else None

    return offer
