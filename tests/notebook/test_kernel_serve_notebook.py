"""``%agent serve --notebook`` driven by a third-party MCP client, the Inspector's CLI: it reads
the notebook open in the page (simulated as ``page.js`` answers: tests/notebook/notebookpage.py)
and proposes an edit, which is a card in the serving cell with its diff; the person accepts
it there, and only then does the cell change, and the client get the result.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs the extra)")

from .kernel import Kernel
from .notebookpage import FakePage, code_cell, serve_pages, submit_in_cell
from .test_kernel_serve import inspector, stop_serving

SERVING = "serving"


def _serve(
    kernel: Kernel, page: FakePage, source: str = "%agent serve --notebook"
) -> tuple[str, dict[str, str]]:
    cell = submit_in_cell(kernel, source, SERVING)
    serve_pages([page], lambda: not kernel.running(cell), what="serving to start")
    out = kernel.execute(
        "import json as _json\n_s = nbagent.serve()\n"
        "print(_json.dumps({'url': _s.url, 'token': _s.token}))"
    )
    found = json.loads(next(m for m in out if m["msg_type"] == "stream")["content"]["text"])
    return found["url"], {"Authorization": f"Bearer {found['token']}"}


def _answered(page: FakePage, process: Any) -> dict[str, Any]:
    serve_pages([page], lambda: process.poll() is not None, what="the inspector to answer")
    out, err = process.communicate(timeout=30)
    assert out.strip(), err  # an isError result is printed too (the CLI then exits with 5)
    return dict(json.loads(out))


def test_the_inspector_reads_the_notebook_and_an_edit_waits_for_accept(kernel: Kernel) -> None:
    since = kernel.mark()
    page = FakePage(kernel, [code_cell("calc", "x = 6 * 9"), code_cell(SERVING, "")])
    url, headers = _serve(kernel, page)
    try:
        read = _answered(page, inspector(url, headers, "read_notebook"))
        assert read["isError"] is False
        assert "[cell 1] id=calc · code" in read["content"][0]["text"]
        process = inspector(url, headers, "edit_cell", cell_id="calc", source="x = 6 * 7")
        accept = serve_pages(
            [page], lambda: kernel.buttons("Accept", enabled=True, since=since), what="Accept"
        )
        assert process.poll() is None  # it waits for the person
        assert page.cells[0]["source"] == "x = 6 * 9"  # nothing landed yet
        kernel.click(accept[0])
        edited = _answered(page, process)
        assert edited["isError"] is False, edited
        assert (
            "Edited cell 1 (id calc); the person accepted it as proposed"
            in edited["content"][0]["text"]
        )
        assert page.cells[0]["source"] == "x = 6 * 7"
        record = page.cells[0]["metadata"]["nbagent_edit"]["edits"][-1]
        assert record["run_id"].startswith("serve-") and record["accepted"] == "as proposed"
    finally:
        stop_serving(kernel)


def test_a_proposal_about_a_missing_cell_is_refused_to_the_client_without_a_card(
    kernel: Kernel,
) -> None:
    since = kernel.mark()
    page = FakePage(kernel, [code_cell("calc", "x = 1"), code_cell(SERVING, "")])
    url, headers = _serve(kernel, page, "_served = nbagent.serve(notebook=True)")  # from Python
    try:
        assert "read_notebook" in kernel.eval("_served.tool_names()")
        result = _answered(page, inspector(url, headers, "delete_cell", cell_id="nope"))
        assert result["isError"] is True
        assert "There is no cell nope in this notebook" in result["content"][0]["text"]
        assert not kernel.buttons("Accept", since=since)
        assert page.cells[0]["source"] == "x = 1"
    finally:
        stop_serving(kernel)
