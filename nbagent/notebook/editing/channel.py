"""The open page as a :class:`~nbagent.document.Document`: requests to the notebook's shared model.

The kernel does not hold the notebook: the page does (and, with ``jupyter-collaboration``, the
server's copy of its shared document, which every view and collaborator shares). A
:class:`PageChannel` is a widget that is never displayed; JupyterLab's and Notebook 7's widget
manager makes its model all the same, and its script (``page.js``) reaches the notebook's
shared model (a YNotebook) through the manager's document context, as :mod:`..cellnote` does.

:class:`PageDocument` speaks to it: a ``hello`` naming the cell the run is in goes to every
page that shows this kernel (two tabs, a collaborator); only a page whose notebook holds that
cell answers, with an id of its own, and every request after is addressed to one of them (the
page that ran the cell, where the person is, when it answers; else the first), so an edit lands
once (with collaboration, it reaches the others through the
shared document). Where no page can answer (nbclient, papermill, ``jupyter execute``, a closed
tab, a front end with no widget manager context such as VS Code), each request is refused in
one sentence within ``NotebookLimits.page_timeout``: nothing is ever written to the file behind
the person's back.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from ...document.cells import Snapshot, snapshot_from_wire
from ...document.changes import Applied, Change, applied_from_wire
from ...document.limits import NotebookLimits
from ...document.protocol import NotebookUnavailableError
from ...redact import redact_secrets

__all__ = ["PageChannel", "PageDocument"]

log = logging.getLogger("nbagent")
#: Requests waiting for the page, at most (a page that stops answering cannot pile them up).
MAX_WAITING = 64
#: How long an old channel's pages may take to say hello before a new channel is opened (a
#: page reloaded since has no model for the old one).
OLD_CHANNEL_WAIT = 1.5
#: After the first page that holds the cell answered, how long the page that ran the cell
#: (another tab, a collaborator's view answered first) may take to answer too.
OTHERS_WAIT = 0.5


def _script(name: str) -> str:
    """A script beside this module, without comment lines and indentation (it travels with
    every channel)."""
    lines = (
        line.strip() for line in (Path(__file__).parent / name).read_text("utf-8").splitlines()
    )
    return "\n".join(line for line in lines if line and not line.startswith(("//", "/*", "*")))


class PageChannel(anywidget.AnyWidget):
    """A widget never displayed: the page side of the notebook tools (``page.js``)."""

    _esm = _script("page.js")
    nbagent_channel = traitlets.Unicode("notebook").tag(sync=True)


class PageDocument:
    """The notebook open in the page, as a Document (see the module).

    :meth:`begin` (called where a run is planned, on the kernel's thread) names the cell the
    run is in and whether a page can answer at all; the page that answers is chosen at the
    first request and kept until it stops answering.
    """

    def __init__(self) -> None:
        self._channel: PageChannel | None = None
        self._page: str | None = None
        self.path: str | None = None
        self.cell_id: str | None = None
        self.collaborative = False
        self._reachable: tuple[bool, str] = (True, "")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._asks = itertools.count(1)
        self._lock = threading.Lock()
        self._waiting: dict[int, concurrent.futures.Future[dict[str, Any]]] = {}
        self._hello: concurrent.futures.Future[dict[str, Any]] | None = None
        self._hello_ask = 0
        self._heard_pages: list[dict[str, Any]] = []  # the pages that answered this hello
        self._first_heard = 0.0
        #: The kernel client that ran the cell (its session id, as its messages carry it).
        self.client: str | None = None

    def __repr__(self) -> str:
        page = f"page {self._page[:8]}" if self._page else "no page chosen"
        return f"<PageDocument {self.name}: {page}>"

    @property
    def name(self) -> str:
        return self.path or "this notebook"

    def begin(
        self,
        cell_id: str | None,
        *,
        reachable: bool,
        why: str = "",
        loop: Any = None,
        client: str | None = None,
    ) -> None:
        """A run is planned from cell ``cell_id``: the page is chosen again at its first
        request. ``reachable``: a page can answer here at all (False: ``why`` not, one clause);
        ``loop``: the kernel's loop (a request from another loop cannot hear the page);
        ``client``: the session id of the kernel client that ran the cell (its page is the
        one chosen when it answers: the person's own undo history then holds the edits)."""
        self.cell_id = cell_id
        self.client = client
        self._page = None
        self._reachable = (reachable, why)
        self._loop = loop

    # --- the Document protocol ---------------------------------------------------------------

    async def read(self, ids: Sequence[str] | None, limits: NotebookLimits) -> Snapshot:
        if ids is None:
            max_source, budget = limits.max_overview_chars, limits.max_read_chars * 4
        else:
            max_source = limits.max_cell_chars
            budget = limits.max_cell_chars * max(1, len(ids))
        answer = await self._ask(
            {
                "op": "read",
                "ids": None if ids is None else list(ids)[:100],
                "cell": self.cell_id,
                "max_cells": limits.max_cells,
                "max_source": max_source,
                "budget": budget,
                "max_output": limits.max_output_chars,
                "max_outputs": limits.max_outputs,
            },
            limits,
        )
        snapshot = snapshot_from_wire(answer, limits, max_source=max_source, name=self.name)
        if snapshot.name:
            self.path = snapshot.name
        return snapshot

    async def apply(
        self, changes: Sequence[Change], limits: NotebookLimits, *, together: bool = False
    ) -> list[Applied]:
        if not changes:
            return []
        answer = await self._ask(
            {
                "op": "apply",
                "changes": [c.wire() for c in changes],
                "together": together,
                "max_source": limits.max_cell_chars,
            },
            limits,
        )
        results = answer.get("results")
        if not isinstance(results, list) or len(results) != len(changes):
            raise NotebookUnavailableError(
                "The notebook's page did not say what became of the change: look at the "
                "notebook before asking again."
            )
        return [applied_from_wire(r, limits.max_cell_chars) for r in results]

    # --- asking the page ---------------------------------------------------------------------

    def _check_reachable(self) -> None:
        reachable, why = self._reachable
        if not reachable:
            raise NotebookUnavailableError(
                f"No page can show this notebook here ({why}): the notebook tools need it open "
                "in JupyterLab or Notebook 7, so nothing was read or changed."
            )
        if self._loop is not None:
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is not self._loop:
                raise NotebookUnavailableError(
                    "This run does not run on the kernel's own loop (its cell blocks while it "
                    "runs), so the page cannot answer it: nothing was read or changed. Run "
                    "%agent --notebook at the top level of a cell of its own."
                )

    async def _ask(self, request: dict[str, Any], limits: NotebookLimits) -> dict[str, Any]:
        self._check_reachable()
        timeout = limits.page_timeout
        if self._page is None:
            await self._choose_page(timeout)
        assert self._channel is not None and self._page is not None
        ask = next(self._asks)
        future: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
        with self._lock:
            if len(self._waiting) >= MAX_WAITING:
                raise NotebookUnavailableError(
                    "Too many requests wait for the notebook's page: nothing was changed."
                )
            self._waiting[ask] = future
        try:
            self._channel.send({**request, "ask": ask, "page": self._page})
            answer = await asyncio.wait_for(asyncio.wrap_future(future), timeout)
        except asyncio.TimeoutError:
            self._page = None  # chosen again next time (the tab may have been reopened)
            if request.get("op") == "apply":  # it may have landed: never say it did not
                raise NotebookUnavailableError(
                    f"The notebook's page did not confirm the change within {timeout:g} s "
                    "(closed, or its kernel connection was lost): it may or may not have "
                    "landed; look at the notebook before asking again."
                ) from None
            raise NotebookUnavailableError(
                f"The notebook's page did not answer within {timeout:g} s (closed, or its "
                "kernel connection was lost): nothing was read or changed."
            ) from None
        finally:
            with self._lock:
                self._waiting.pop(ask, None)
        problem = answer.get("error")
        if problem:
            raise NotebookUnavailableError(
                f"The notebook's page could not do it ({redact_secrets(str(problem))[:200]}): "
                "nothing was changed."
            )
        return answer

    async def _choose_page(self, timeout: float) -> None:
        """Say hello and take the first page that holds the run's cell (see the module)."""
        started = time.monotonic()
        old = self._channel is not None
        answer = await self._hello_once(min(OLD_CHANNEL_WAIT, timeout) if old else timeout)
        if answer is None and old:
            self.close()  # a page reloaded since has no model for it: a new one reaches it
            answer = await self._hello_once(max(0.5, timeout - (time.monotonic() - started)))
        if answer is None:
            raise NotebookUnavailableError(
                f"No page showing this notebook answered within {timeout:g} s (the notebook is "
                "not open in JupyterLab or Notebook 7, or its tab was closed, or the page "
                "cannot reach the notebook): nothing was read or changed."
            )
        page = answer.get("page")
        if not isinstance(page, str) or not page or len(page) > 100:
            raise NotebookUnavailableError(
                "The notebook's page answered without an id: nothing was changed."
            )
        self._page = page
        path = answer.get("path")
        if isinstance(path, str) and path:
            self.path = path[:500]
        self.collaborative = answer.get("rtc") is True

    async def _hello_once(self, timeout: float) -> dict[str, Any] | None:
        """Say hello; the page that ran the cell (the person's) if it answers, else the first
        page that held the cell, once :data:`OTHERS_WAIT` passed after it."""
        channel = self._open()
        future: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
        with self._lock:
            self._hello_ask = next(self._asks)
            self._hello = future
            self._heard_pages = []
            ask = self._hello_ask
        channel.send({"op": "hello", "ask": ask, "cell": self.cell_id, "client": self.client})
        deadline = time.monotonic() + timeout
        try:
            while True:
                left = deadline - time.monotonic()
                with self._lock:
                    first = self._heard_pages[0] if self._heard_pages else None
                    since = self._first_heard
                if first is not None:
                    left = min(left, since + OTHERS_WAIT - time.monotonic())
                if left <= 0:
                    return first
                try:
                    return await asyncio.wait_for(asyncio.wrap_future(future), left)
                except asyncio.TimeoutError:
                    continue
        finally:
            with self._lock:
                if self._hello is future:
                    self._hello = None

    def _open(self) -> PageChannel:
        if self._channel is None:
            channel = PageChannel()
            channel.on_msg(self._heard)
            self._channel = channel
        return self._channel

    def _heard(self, _widget: Any, content: Any, _buffers: Any) -> None:
        """A message from a page (on the kernel's thread, or a subshell's)."""
        if not isinstance(content, dict):
            return
        ask = content.get("ask")
        if content.get("op") == "here":
            with self._lock:
                future = self._hello if ask == self._hello_ask else None
                if future is None or future.done():
                    return
                if not self._heard_pages:
                    self._first_heard = time.monotonic()
                if len(self._heard_pages) < MAX_WAITING:
                    self._heard_pages.append(content)
            if content.get("ran") is True or not self.client:
                future.set_result(content)  # the person's own page (or any, when none ran it)
            return
        with self._lock:
            future = self._waiting.get(ask) if isinstance(ask, int) else None
        if future is None or future.done() or content.get("page") != self._page:
            return  # late, unknown, or from a page this kernel did not choose
        future.set_result(content)

    def close(self) -> None:
        """Close the channel (its pages forget it); a later request opens a new one."""
        channel, self._channel = self._channel, None
        self._page = None
        if channel is not None:
            try:
                channel.close()
            except Exception as exc:  # the kernel is going away
                log.debug("nbagent: closing the notebook channel: %s", exc)
