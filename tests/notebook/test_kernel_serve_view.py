"""The serving card in a real kernel, with nbagent's own MCP client calling the served tools:
its header says what is served, where and to whom (never the token), its footer counts the
served calls by outcome (no model tokens), its request view shows what the client asked and
what went back, live and in the finished output (escaped, secrets hidden), and the line with
the token leaves the cell when a client connects, on "Hide the line", or when serving ends,
so that a saved notebook never holds it.
"""

from __future__ import annotations

import html
import json
import re
import textwrap

import nbformat
import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs the extra)")

from .kernel import Kernel
from .test_kernel_serve import WIDGET_MIME, Background, start_serving, stop_serving

SECRET = "sk-abcdefghijklmnopqrstuvwxyz0123456789"


def _card_html(kernel: Kernel, since: int, words: str) -> str:
    found = [t for t in kernel.html_texts(since) if words in t]
    return found[-1] if found else ""


def test_header_footer_and_request_view_live_and_after_stop(kernel: Kernel) -> None:
    kernel.execute(
        textwrap.dedent(
            """
            @tool
            def broken(x: int) -> str:
                \"\"\"Always fails.\"\"\"
                raise RuntimeError(f"broken on {x}")

            @tool(needs_approval=True)
            def touch(name: str) -> str:
                \"\"\"Touch a file (it only says so).\"\"\"
                return f"touched {name}"
            """
        )
    )
    kernel.execute("%agent allow touch")
    since = kernel.mark()
    url, headers, serving = start_serving(kernel)
    token = headers["Authorization"].split()[1]
    asked = f"<script>{SECRET}</script>.txt"
    try:
        approved = Background(url, headers, "delete_file", {"path": asked})
        approve = kernel.wait_for(lambda: kernel.buttons("Approve", enabled=True, since=since))
        kernel.click(approve[0])
        kernel.wait_for(approved.done, what="the approved call")
        later = kernel.mark()
        denied = Background(url, headers, "delete_file", {"path": "keep.txt"})
        deny = kernel.wait_for(lambda: kernel.buttons("Deny", enabled=True, since=later))
        reason = kernel.wait_for(lambda: kernel.widget_ids("TextModel", since=later))
        kernel.type_into(reason[-1], "not <b>that</b> one")
        kernel.click(deny[0])
        kernel.wait_for(denied.done, what="the denied call")
        by_rule = Background(url, headers, "touch", {"name": "t.txt"})
        kernel.wait_for(by_rule.done, what="the call a rule allowed")
        failed = Background(url, headers, "broken", {"x": 7})
        kernel.wait_for(failed.done, what="the failing call")
        assert failed.result.is_error and by_rule.result.text == "touched t.txt"

        # live: the header says what, where and by whom; never the token
        header = kernel.wait_for(
            lambda: _card_html(kernel, since, "Serving over MCP at"), what="the header"
        )
        assert url in header and "used by nbagent" in header
        assert "delete_file" in header and "touch" in header
        assert "You:" not in header and "an MCP client" not in header
        # the footer: the calls by outcome, no model tokens, kept current
        footer = kernel.wait_for(  # (a tick may have shown the last call still running)
            lambda: (
                _card_html(kernel, since, "4 calls: ").count("waiting") == 0
                and _card_html(kernel, since, "4 calls: ")
            ),
            what="the footer's four calls, ended",
        )
        assert "1 approved" in footer and "1 denied" in footer and "1 by a rule" in footer
        assert "1 failed" in footer and "serving" in footer
        assert "token" not in footer and "step" not in footer
        # the request view: each call as asked and answered, escaped
        accordion = kernel.widget_ids("AccordionModel", since=since)
        assert accordion, "no request view in the serving card"
        assert "What the client asked and got (4 calls)" in kernel.widgets[accordion[0]]["titles"]

        def answered() -> list[str]:
            texts = kernel.html_texts(since)
            found = [t for t in texts if "what the client asked" in t and "no answer yet" not in t]
            return found if len(found) == 4 else []

        views = kernel.wait_for(answered, what="the four calls in the request view, answered")
        first = next(v for v in views if "#1 · delete_file" in v)
        assert "tools/call" in first and "nbagent" in first  # the request, and which client
        assert "&quot;isError&quot;: false" in first and "deleted" in first  # what went back
        assert "<script" not in first and html.escape("<script>") in first
        assert SECRET not in first
        second = next(v for v in views if "#2 · delete_file" in v)
        assert "denied" in second and "&quot;isError&quot;: true" in second
        assert html.escape("not <b>that</b> one") in second and "<b>that</b>" not in second
        assert "by a rule" in next(v for v in views if "· touch ·" in v)
        assert "broken on 7" in next(v for v in views if "· broken ·" in v)
        for text in kernel.html_texts(since):
            assert token not in text  # the shown-once line is no widget's state either
    finally:
        stop_serving(kernel)

    # finished: the same header, footer and request view, as text that needs no widget
    outputs = kernel.cell_outputs(serving)
    assert not [o for o in outputs if WIDGET_MIME in o.get("data", {})]
    saved = json.dumps(outputs)
    assert token not in saved and SECRET not in saved
    shown = "".join(o["data"].get("text/html", "") for o in outputs if "data" in o)
    plain = kernel.cell_text(serving)
    # a record of what happened: where, from when to when, why it ended, to whom, the calls
    assert re.search(
        rf"Served over MCP at {re.escape(url)} from \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d to "
        r"\d\d:\d\d:\d\d \(stopped with %agent serve stop\) · tools: ",
        plain,
    ), plain
    assert "used by nbagent" in plain and "approval was as in a run" in plain
    assert re.search(
        r"4 calls: 1 approved, 1 denied, 1 by a rule, 1 without asking; 1 failed · served for ",
        plain,
    ), plain
    for present in ("Serving over MCP", "serves at", "asked as in a run", "now ended"):
        assert present not in plain, present
    assert "tokens" not in plain and "0 steps" not in plain
    assert "What the client asked and got (4 calls)" in shown
    assert shown.count("what the client asked</b>") == 4
    assert "<script" not in shown and html.escape("<script>") in shown
    assert html.escape("not <b>that</b> one") in shown


def _secret_lines(kernel: Kernel, since: int) -> list[str]:
    """The comm ids of the shown-once lines (SecretLine widgets: a placeholder as state)."""
    return kernel.wait_for(
        lambda: [
            c for c, s in list(kernel.widgets.items())[since:] if "placeholder" in s and "_esm" in s
        ],
        what="the lines with the token",
    )


def _ask(kernel: Kernel, comm_id: str) -> None:
    """What the line's script sends when its view is shown."""
    kernel.send_comm(comm_id, {"method": "custom", "content": {"event": "ready"}})


def _line_widget(kernel: Kernel, since: int) -> tuple[str, str]:
    """The comm id of the shown-once line and the token it holds, sent to the page as a message
    when the page asks (never widget state)."""
    comm_id = _secret_lines(kernel, since)[0]
    _ask(kernel, comm_id)
    (text,) = kernel.wait_for(lambda: kernel.customs.get(comm_id), what="the line, sent")
    assert "claude mcp add" in text["text"]
    token = re.search(r"Bearer ([A-Za-z0-9_-]{20,})", text["text"])
    assert token is not None
    return comm_id, token.group(1)


def _saved(kernel: Kernel, msg_id: str) -> str:
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("%agent serve")
    cell.outputs = [nbformat.from_dict(o) for o in kernel.cell_outputs(msg_id)]
    nb.cells.append(cell)
    nbformat.validate(nb)
    return str(nbformat.writes(nb))


@pytest.mark.parametrize("how", ["a client connects", "Hide the line", "the Stop button"])
def test_the_line_with_the_token_leaves_the_cell(kernel: Kernel, how: str) -> None:
    kernel.execute(  # the tool a client calls (whichever test of the module ran before)
        "@tool(needs_approval=True)\ndef delete_file(path: str) -> str:\n"
        "    '''Delete a file (it only says so).'''\n    return f'deleted {path}'"
    )
    since = kernel.mark()
    serving = kernel.submit("%agent serve")
    kernel.finish(serving)  # no other cell runs after it: that would clear the line too
    comm_id, token = _line_widget(kernel, since)
    # shown on the page, yet in no widget's state: a notebook saved now, with its widget state
    # too, holds no token
    assert token not in json.dumps(kernel.widgets)
    assert token not in _saved(kernel, serving)
    url = kernel.wait_for(lambda: _card_html(kernel, since, "Serving over MCP at"))
    url = html.unescape(re.search(r"http://127\.0\.0\.1:\d+/mcp", url).group(0))  # type: ignore[union-attr]
    try:
        if how == "a client connects":
            client = Background(url, {"Authorization": f"Bearer {token}"}, "delete_file", {})
            kernel.wait_for(client.done, what="the refused call")  # path is missing
            assert client.error is None and client.result.is_error, client.error
        elif how == "Hide the line":
            kernel.click(kernel.buttons("Hide the line", since=since)[0])
        else:
            kernel.click(kernel.buttons("Stop", since=since)[0])
        kernel.wait_for(lambda: comm_id in kernel.closed, what="the line's widget to close")
        sent = len(kernel.customs[comm_id])
        _ask(kernel, comm_id)  # a view asking afterwards gets nothing
        kernel.drain(0.3)
        assert len(kernel.customs[comm_id]) == sent
        assert token not in json.dumps(kernel.widgets)
        text = kernel.wait_for(
            lambda: (
                "with its token, was shown here once" in kernel.cell_text(serving)
                and len(  # the serving card's at most: the line's output is text now
                    [o for o in kernel.cell_outputs(serving) if WIDGET_MIME in o.get("data", {})]
                )
                <= 1
            ),
            what="the line's output to become text",
        )
        assert text
        assert token not in _saved(kernel, serving)
    finally:
        if how != "the Stop button":
            stop_serving(kernel)
    if how == "the Stop button":
        kernel.wait_for(lambda: "Served over MCP" in kernel.cell_text(serving), what="the end")
        assert "stopped with the Stop button" in kernel.cell_text(serving)
    saved = _saved(kernel, serving)
    assert token not in saved and WIDGET_MIME not in saved
