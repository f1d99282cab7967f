"""A long ``%agent serve`` session in a real kernel stays bounded: after hundreds of calls (a
rule approves them, nbagent's own MCP client makes them) the serving cell keeps the cards of
the latest calls and one line that counts the earlier ones by outcome; the folded cards'
widgets are closed, a call still waiting for the person is never folded, the footer counts
every call, and the finished output is bounded the same way. Its timeline speaks of served
calls (no steps, no model lane), live and in the saved output.
"""

from __future__ import annotations

import base64
import json
import re
import textwrap
import threading
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs the extra)")

from nbagent import mcp_server
from nbagent.notebook.serving.servedrequests import CARDS

from ..mcp.conftest import by_name, call
from .kernel import Kernel
from .test_kernel_serve import WIDGET_MIME, Background, start_serving, stop_serving

CALLS = 300
#: Collects what the front end logs as failed (a call goes on when its card fails).
FAILURES = textwrap.dedent(
    """
    import logging as _logging

    _front_end_failures = []

    class _Failures(_logging.Handler):
        def emit(self, record):
            _front_end_failures.append(record.getMessage())

    _logging.getLogger("nbagent").addHandler(_Failures(_logging.ERROR))
    """
)


class Many:
    """``count`` calls of one tool from one client session, on a thread."""

    def __init__(self, url: str, headers: dict[str, str], name: str, count: int) -> None:
        self.results: list[Any] = []
        self.error: BaseException | None = None

        def go() -> None:
            try:
                with mcp_server("nb", url=url, headers=headers) as client:
                    found = by_name(client, f"nb__{name}")
                    for n in range(count):
                        self.results.append(call(found, {"name": f"f{n}.txt"}))
            except BaseException as exc:
                self.error = exc

        self.thread = threading.Thread(target=go, daemon=True)
        self.thread.start()

    def done(self) -> bool:
        return not self.thread.is_alive()


def _live(kernel: Kernel, since: int) -> list[str]:
    """The widgets made since ``since`` that are still open (each is a comm)."""
    return [c for c in list(kernel.widgets)[since:] if c not in kernel.closed]


def _footer(kernel: Kernel, since: int) -> str:
    found = [t for t in kernel.html_texts(since) if " calls: " in t and "serving ·" in t]
    return found[-1] if found else ""


def _svg(html_text: str) -> str:
    found = re.search(r'data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"', html_text)
    assert found is not None, "no timeline in the output"
    return base64.b64decode(found.group(1)).decode()


def test_a_long_session_keeps_its_latest_cards_and_counts_the_rest(kernel: Kernel) -> None:
    kernel.execute(
        textwrap.dedent(
            """
            @tool(needs_approval=True)
            def touch(name: str) -> str:
                \"\"\"Touch a file (it only says so).\"\"\"
                return f"touched {name}"
            """
        )
    )
    kernel.execute("%agent allow touch")
    kernel.execute(FAILURES)
    since = kernel.mark()
    url, headers, serving = start_serving(kernel)
    try:
        # the first call waits for the person all along: it must never be folded
        waiting = Background(url, headers, "delete_file", {"path": "keep.txt"})
        approve = kernel.wait_for(
            lambda: kernel.buttons("Approve", enabled=True, since=since), what="the waiting card"
        )
        early = Many(url, headers, "touch", CARDS + 20)
        kernel.wait_for(early.done, timeout=120, what="the first calls")
        assert early.error is None, early.error
        kernel.wait_for(
            lambda: f"{CARDS + 21} calls: " in _footer(kernel, since), what="the early footer"
        )
        kernel.drain(0.3)
        live_early = len(_live(kernel, since))
        rest = Many(url, headers, "touch", CALLS - CARDS - 20)
        kernel.wait_for(rest.done, timeout=300, what="the rest of the calls")
        assert rest.error is None, rest.error
        assert all(r.text.startswith("touched") for r in early.results + rest.results)
        footer = kernel.wait_for(  # once the last call's end is counted too
            lambda: (
                f"{CALLS + 1} calls: {CALLS} by a rule" in _footer(kernel, since)
                and _footer(kernel, since)
            ),
            what="the footer counting every call",
        )
        assert f"{CALLS} by a rule" in footer and "1 waiting" in footer, footer
        kernel.drain(0.3)
        # bounded: 230 more calls left the number of open widgets where it was
        live = _live(kernel, since)
        assert len(live) <= live_early + 2, (len(live), live_early)
        made = list(kernel.widgets)[since:]
        closed = [c for c in made if c in kernel.closed]
        # the front end never failed (a closed shared layout once broke every later card)
        assert kernel.eval("_front_end_failures") == []
        assert (
            kernel.eval("len(nbagent.serve().view.cards)") == CARDS
        )  # (the waiting one among them)
        assert kernel.eval("len(nbagent.serve().view.transcript.calls)") == CARDS
        assert len(closed) > 3 * (CALLS - CARDS)  # the folded cards' widgets were closed
        # the waiting call's card is still there, its buttons alive
        assert approve[0] in live and approve[0] not in kernel.closed
        line = kernel.wait_for(
            lambda: [t for t in kernel.html_texts(since) if "earlier calls folded" in t],
            what="the folded line",
        )
        folded = CALLS + 1 - CARDS
        assert f"{folded:,} earlier calls folded ({folded:,} by a rule)" in line[-1], line[-1]
        # the timeline, live: calls, no steps, no model lane
        summary = kernel.eval("nbagent.serve().calls.timeline().summary()")
        assert summary.startswith(f"timeline: {CALLS + 1:,} served calls"), summary
        assert "step" not in summary
        svg = kernel.eval("nbagent.serve().calls.timeline().svg()")
        assert ">model<" not in svg and ">calls" in svg and "step" not in svg
        kernel.click(approve[0])
        kernel.wait_for(waiting.done, what="the waiting call, approved")
        assert waiting.result.text == "deleted keep.txt"
        kernel.wait_for(
            lambda: (
                "1 approved" in _footer(kernel, since) and "waiting" not in _footer(kernel, since)
            ),
            what="the footer after the approval",
        )
    finally:
        stop_serving(kernel)

    outputs = kernel.cell_outputs(serving)
    assert not [o for o in outputs if WIDGET_MIME in o.get("data", {})]
    plain = kernel.cell_text(serving)
    assert f"{CALLS + 1} calls: 1 approved, {CALLS} by a rule · served for" in plain, plain
    assert "earlier calls folded" in plain
    shown = "".join(o["data"].get("text/html", "") for o in outputs if "data" in o)
    record = next(o["metadata"]["nbagent"] for o in outputs if "nbagent" in o.get("metadata", {}))
    assert len(record["calls"]) <= CARDS  # the transcript's calls: the latest only
    assert record["provenance"]["calls_total"] == CALLS + 1
    listed = record["provenance"]["calls"]
    assert (listed[0]["tool"], listed[0]["decision"]) == ("delete_file", "approved")
    assert {c["decision"] for c in listed[1:]} == {"rule"}  # folded calls kept their decisions
    saved = len(json.dumps(outputs))
    cards_shown = len(re.findall(r"touched f\d+\.txt", plain))
    assert cards_shown <= CARDS + 1, cards_shown
    # the timeline, saved: calls, no steps, no model lane
    picture = _svg(shown)
    assert ">model<" not in picture and f"{CALLS + 1:,} served calls" in picture
    assert "step" not in picture
    assert f"timeline: {CALLS + 1:,} served calls" in shown
    # measured: ~0.3 MB for these 301 calls (50 cards, 100 requests listed, 200 in the record)
    assert saved < 1_000_000, saved


def test_a_long_session_without_widgets_keeps_its_latest_calls_too(kernel: Kernel) -> None:
    """A kernel whose front end has no widgets (nbclient, a plain kernel client) serves with
    ``--approve auto``: its transcript folds as the live view's does."""
    kernel.execute(
        textwrap.dedent(
            """
            @tool
            def touch(name: str) -> str:
                \"\"\"Touch a file (it only says so).\"\"\"
                return f"touched {name}"

            import os as _os
            _os.environ["NBAGENT_MODE"] = "headless"
            """
        )
    )
    try:
        url, headers, serving = start_serving(kernel, "--approve auto")
        try:
            many = Many(url, headers, "touch", CARDS + 40)
            kernel.wait_for(many.done, timeout=300, what="the calls")
            assert many.error is None, many.error
            assert len(many.results) == CARDS + 40
            kept = kernel.eval("len(nbagent.serve().view.transcript.calls)")
            assert kept <= CARDS, kept
        finally:
            # without widgets the cards are shown when serving ends: in the stopping cell
            stopping = kernel.submit("%agent serve stop")
            kernel.finish(stopping)
    finally:
        kernel.execute('_os.environ.pop("NBAGENT_MODE", None)')
    outputs = kernel.cell_outputs(serving) + kernel.cell_outputs(stopping)
    assert not [o for o in outputs if WIDGET_MIME in o.get("data", {})]
    plain = kernel.cell_text(serving) + kernel.cell_text(stopping)
    assert f"{CARDS + 40} calls" in plain and "earlier calls folded" in plain, plain[-2000:]
    assert plain.count("touched f") <= CARDS, plain.count("touched f")
    assert f"touched f{CARDS + 39}" in plain  # the newest call's card is kept
