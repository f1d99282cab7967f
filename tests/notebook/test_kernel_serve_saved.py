"""What a notebook saved while ``%agent serve`` serves holds, in a real kernel: the serving
card carries a saved form (the page's script writes it into the file in place of the widget
output: tests/browser/test_jupyterlab_serve.py saves, reloads, restarts and shuts down in
JupyterLab) that is the card's static output as it stands, with the record so far and no
token, kept current as calls come; when serving ends it becomes the finished output, marked
as ended, so that a page reloaded meanwhile shows that too. The line with the token has one
as well, which never brings the line back.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs the extra)")

from .kernel import Kernel
from .test_kernel_serve import WIDGET_MIME, Background, start_serving, stop_serving

FORM = {"key", "view_id", "saved", "ended", "restore"}


def _forms(kernel: Kernel, since: int) -> dict[str, dict[str, Any]]:
    """The saved forms made since ``since``, by comm id (their synced state)."""
    return {
        comm: state for comm, state in list(kernel.widgets.items())[since:] if set(state) >= FORM
    }


def _shown_views(kernel: Kernel, msg_id: str) -> list[str]:
    """The widget models the cell's outputs show."""
    return [
        o["data"][WIDGET_MIME]["model_id"]
        for o in kernel.cell_outputs(msg_id)
        if WIDGET_MIME in o.get("data", {})
    ]


def test_a_notebook_saved_while_it_serves_holds_the_cards_static_form(kernel: Kernel) -> None:
    kernel.execute(
        textwrap.dedent(
            """
            @tool
            def add(a: int, b: int) -> int:
                \"\"\"Add two whole numbers.\"\"\"
                return a + b
            """
        )
    )
    since = kernel.mark()
    url, headers, serving = start_serving(kernel)
    token = headers["Authorization"].split()[1]
    try:
        [card_view] = _shown_views(kernel, serving)  # the line became text: a cell ran since
        forms = kernel.wait_for(lambda: len(_forms(kernel, since)) == 2 and _forms(kernel, since))
        by_view = {state["view_id"]: (comm, state) for comm, state in forms.items()}
        comm, _ = by_view.pop(card_view)
        [(line_comm, line)] = by_view.values()
        assert line["restore"] is False  # a reloaded page never shows the line again
        assert line["ended"] is True  # and one reloaded since shows the text it became
        assert "with its token, was shown here once" in line["saved"]["data"]["text/plain"]
        client = Background(url, headers, "add", {"a": 2, "b": 3})
        kernel.wait_for(client.done, what="the call")
        assert client.error is None and client.result.text == "5"

        def after_the_call() -> Any:
            # the client has its answer before the card's saved form is sent again (at most
            # 128 KB a second): a form sent while the call ran holds it as waiting
            saved = kernel.widgets[comm]["saved"]
            calls = saved["metadata"]["nbagent"]["provenance"]["calls"]
            return calls and calls[0]["status"] != "waiting" and saved

        saved = kernel.wait_for(after_the_call, what="the saved form to hold the ended call")
        plain = saved["data"]["text/plain"]
        assert plain.startswith(f"MCP: Was serving over MCP at {url} when this notebook was saved")
        assert "[tool] add" in plain and "1 call: 1 without asking" in plain
        assert "it went on after this notebook was saved" in plain
        assert "⚙ add" in saved["data"]["text/html"]
        mine = saved["metadata"]["nbagent"]
        assert mine["saved_live"] == kernel.widgets[comm]["key"]
        assert mine["provenance"]["mode"] == "served"
        assert mine["provenance"]["stop_reason"] == "serving"
        assert [c["tool"] for c in mine["provenance"]["calls"]] == ["add"]
        assert kernel.widgets[comm]["ended"] is False
        assert token not in json.dumps(kernel.widgets)
    finally:
        stop_serving(kernel)
    kernel.wait_for(lambda: kernel.widgets[comm]["ended"], what="the end")
    final = kernel.widgets[comm]["saved"]
    shown = kernel.cell_outputs(serving)
    finished = next(o for o in shown if "nbagent" in o.get("metadata", {}))
    assert final["data"] == finished["data"]  # what a reloaded page shows: the finished output
    assert final["metadata"] == finished["metadata"]
    assert "saved_live" not in final["metadata"]["nbagent"]
    assert final["metadata"]["nbagent"]["provenance"]["stop_reason"] == "stopped"
    assert final["data"]["text/plain"].startswith(f"MCP: Served over MCP at {url} from ")
    assert {comm, line_comm} <= kernel.closed  # and then the forms close with their outputs
    assert not _shown_views(kernel, serving)


def test_a_saved_form_is_sent_when_it_changed_and_bounded_in_size() -> None:
    from nbagent.notebook.live.savedform import MAX_SAVED, SavedForm

    form = SavedForm()
    try:
        assert form.keep({"text/plain": "a"}, {"nbagent": {"run_id": "serve-1"}})
        assert not form.keep({"text/plain": "a"}, {"nbagent": {"run_id": "serve-1"}})
        assert form.marked({"nbagent": {"run_id": "serve-1"}}) == {
            "nbagent": {"run_id": "serve-1", "saved_live": form.key}
        }
        huge = {"text/html": "<b>x</b>" * (MAX_SAVED // 8 + 1), "text/plain": "the record"}
        assert form.keep(huge, {}, {"text/plain": "the short form"})
        assert form.saved == {"data": {"text/plain": "the short form"}, "metadata": {}}
        assert form.keep(huge, {})  # no short form given: its text, cut
        assert form.saved["data"] == {"text/plain": "the record"}
        assert form.size <= MAX_SAVED
        form.end({"text/plain": "ended"}, {})
        assert form.ended and form.saved["data"] == {"text/plain": "ended"}
    finally:
        form.close()
