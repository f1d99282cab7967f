"""A notebook page, simulated: it answers the notebook channel's messages as ``page.js`` does.

A kernel test cannot run JupyterLab; this is the page's side of the protocol in Python, over an
nbformat notebook held here (``cells``): ``hello`` is answered only when the notebook holds the
run's cell, ``read`` and ``apply`` use the same rules as the page (``apply`` through
:func:`nbagent.document.memory.apply_to_cells`, which ``page.js`` mirrors). The browser tests
(tests/browser/test_notebook_edits*.py) are the proof that the real page does the same.
"""

from __future__ import annotations

import copy
import time
import uuid
from collections.abc import Callable
from typing import Any

from nbagent.document.cells import snapshot_of
from nbagent.document.changes import (
    Applied,
    Change,
    DeleteCell,
    EditCell,
    InsertCell,
    MoveCell,
    SetOutputs,
    StampCell,
)
from nbagent.document.limits import NotebookLimits
from nbagent.document.memory import apply_to_cells

from .kernel import Kernel


def code_cell(cell_id: str, source: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": cell_id,
        "cell_type": "code",
        "metadata": {},
        "source": source,
        "outputs": [],
        "execution_count": None,
        **extra,
    }


def markdown_cell(cell_id: str, source: str) -> dict[str, Any]:
    return {"id": cell_id, "cell_type": "markdown", "metadata": {}, "source": source}


def submit_in_cell(kernel: Kernel, code: str, cell_id: str) -> str:
    """Run ``code`` as the cell ``cell_id`` (JupyterLab sends the cell's id in the request's
    metadata); returns the message id, as :meth:`Kernel.submit` does."""
    content = {
        "code": code,
        "silent": False,
        "store_history": True,
        "user_expressions": {},
        "allow_stdin": True,
        "stop_on_error": True,
    }
    msg = kernel.kc.session.msg("execute_request", content, metadata={"cellId": cell_id})
    kernel.kc.shell_channel.send(msg)
    msg_id = str(msg["header"]["msg_id"])
    kernel._codes[msg_id] = ""  # never sent again (an aborted request stays aborted)
    return msg_id


def _change(wire: dict[str, Any]) -> Change:
    op = wire["op"]
    if op == "insert":
        cell = wire["cell"]
        return InsertCell(
            cell["id"],
            cell["cell_type"],
            cell["source"],
            wire.get("after"),
            wire.get("before"),
            cell.get("metadata") or {},
            tuple(cell.get("outputs") or ()),
            cell.get("execution_count"),
        )
    if op == "edit":
        return EditCell(wire["id"], wire["expected"], wire["source"], wire.get("cell_type"))
    if op == "delete":
        return DeleteCell(wire["id"], wire.get("expected"))
    if op == "move":
        return MoveCell(wire["id"], wire.get("after"), wire.get("before"))
    if op == "outputs":
        return SetOutputs(
            wire["id"], tuple(wire["outputs"]), wire.get("execution_count"), wire.get("mark")
        )
    assert op == "stamp", op
    return StampCell(wire["id"], wire["key"], wire.get("value"))


def _wire(applied: Applied) -> dict[str, Any]:
    made: dict[str, Any] = {"ok": applied.ok}
    for key in (
        "index",
        "problem",
        "source",
        "text",
        "removed",
        "after",
        "before",
        "old_type",
        "old_count",
    ):
        value = getattr(applied, key)
        if value not in (None, ""):
            made[key] = value
    if applied.cell_id is not None:
        made["id"] = applied.cell_id
    return made


class FakePage:
    """One page showing the kernel's notebook (see the module)."""

    def __init__(
        self, kernel: Kernel, cells: list[dict[str, Any]], path: str = "work.ipynb"
    ) -> None:
        self.kernel = kernel
        self.cells = cells
        self.path = path
        self.page = uuid.uuid4().hex
        #: A closed tab: it answers nothing.
        self.silent = False
        #: This page's kernel connection ran the cell (the person's page): it says so at hello.
        self.ran = True
        #: Called with each request before it is answered (a person editing meanwhile).
        self.before: Callable[[dict[str, Any]], None] | None = None
        self.requests: list[dict[str, Any]] = []
        self.applied = 0  # changes this page applied
        self._handled: dict[str, int] = {}

    def channels(self) -> list[str]:
        return [c for c, s in self.kernel.widgets.items() if s.get("nbagent_channel") == "notebook"]

    def answer(self) -> int:
        """Answer every request not answered yet; returns how many were answered."""
        count = 0
        for comm_id in self.channels():
            if comm_id in self.kernel.closed:
                continue
            sent = self.kernel.customs.get(comm_id, [])
            start = self._handled.get(comm_id, 0)
            self._handled[comm_id] = len(sent)
            for request in sent[start:]:
                if isinstance(request, dict) and self._answer(comm_id, request):
                    count += 1
        return count

    def _answer(self, comm_id: str, request: dict[str, Any]) -> bool:
        if self.silent:
            return False
        op = request.get("op")
        if op == "hello":
            cell = request.get("cell")
            if cell is not None and not any(c["id"] == cell for c in self.cells):
                return False  # not the kernel's notebook: a page like this never answers
            self._send(
                comm_id,
                {
                    "op": "here",
                    "ask": request["ask"],
                    "page": self.page,
                    "ran": self.ran and request.get("client") == self.kernel.kc.session.session,
                    "path": self.path,
                    "cells": len(self.cells),
                    "rtc": False,
                },
            )
            return True
        if request.get("page") != self.page:
            return False
        self.requests.append(request)
        if self.before is not None:
            self.before(request)
        if op == "read":
            limits = NotebookLimits(
                max_cells=request["max_cells"],
                max_output_chars=request["max_output"],
                max_outputs=request["max_outputs"],
            )
            held = {c["id"] for c in self.cells}
            cell = request.get("cell")
            answer = snapshot_of(
                self.cells,
                limits,
                request.get("ids"),
                max_source=request["max_source"],
                name=self.path,
                active=cell if cell in held else None,
                budget=request["budget"],
            )
        else:
            changes = [_change(w) for w in request["changes"]]
            results = apply_to_cells(
                self.cells, changes, NotebookLimits(max_cell_chars=request["max_source"])
            )
            self.applied += sum(1 for r in results if r.ok)
            answer = {"results": [_wire(r) for r in results]}
        self._send(
            comm_id, {"op": op, "ask": request["ask"], "page": self.page, **copy.deepcopy(answer)}
        )
        return True

    def _send(self, comm_id: str, content: dict[str, Any]) -> None:
        self.kernel.send_comm(comm_id, {"method": "custom", "content": content})

    def sources(self) -> list[str]:
        return [c["source"] for c in self.cells]


def serve_pages(
    pages: list[FakePage], until: Callable[[], Any], timeout: float = 60.0, what: str = ""
) -> Any:
    """Pump the kernel's messages, each page answering, until ``until()`` is truthy."""
    kernel = pages[0].kernel
    deadline = time.monotonic() + timeout
    while True:
        for page in pages:
            page.answer()
        value = until()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or until}")
        kernel.pump(0.02)
