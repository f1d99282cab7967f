"""A tool that takes code is shown as its code: decoded while it streams (CodeFeed), highlighted
in the browser and in the saved output, never run or rendered as HTML."""

from __future__ import annotations

import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent.content import TextPart, ToolResult
from nbagent.events import (
    AgentEvent,
    RunFinished,
    RunStarted,
    StepStarted,
    ToolArgumentsDelta,
    ToolCallReady,
    ToolCallStarted,
    ToolFinished,
)
from nbagent.notebook.live.view import RunView
from nbagent.notebook.saved.static import run_outputs
from nbagent.notebook.shown.codefeed import CodeFeed
from nbagent.notebook.shown.render import CODE_COLORS
from nbagent.tools import ToolCall

from .conftest import Wire
from .test_view import play, result

CODE = 'import pandas as pd\nprint("a \\"quoted\\" <b>word</b>")\n# é 😀 \u2028 end\n'


def _feed_all(feed: CodeFeed, text: str, cuts: list[int]) -> str:
    out, start = [], 0
    for cut in sorted(set(cuts)):
        out.append(feed.feed(text[start:cut]))
        start = cut
    out.append(feed.feed(text[start:]))
    return "".join(out)


@settings(max_examples=300, deadline=None)
@given(
    code=st.text(max_size=200),
    purpose=st.text(max_size=30),
    before=st.booleans(),
    ascii_only=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=40),
)
def test_the_code_comes_out_whole_however_the_arguments_are_cut(
    code: str, purpose: str, before: bool, ascii_only: bool, cuts: list[int]
) -> None:
    arguments = (
        {"purpose": purpose, "code": code} if before else {"code": code, "n": [1, {"code": 2}]}
    )
    text = json.dumps(arguments, ensure_ascii=ascii_only)
    feed = CodeFeed("code")
    assert _feed_all(feed, text, [c for c in cuts if c <= len(text)]) == code.encode(
        "utf-16", "surrogatepass"
    ).decode("utf-16", "replace")
    assert not feed.failed and feed.found


def test_arguments_it_cannot_follow_make_it_give_up() -> None:
    for text in ('{"code": "a", "code": "b"}', '["code"]', '{"code": "x\\q"}', '{"code" 1}'):
        feed = CodeFeed("code")
        feed.feed(text)
        assert feed.failed, text


def _code_run(view: RunView, wire: Wire, raw: str, value: dict[str, str]) -> list[AgentEvent]:
    call = ToolCall("c1", "run_python", raw)
    events: list[AgentEvent] = [
        RunStarted("run-1", "analyse", "m"),
        StepStarted(1),
        ToolCallStarted(1, "c1", "run_python", "Run Python", code_arguments={"code": "python"}),
    ]
    events += [
        ToolArgumentsDelta("c1", "run_python", raw[i : i + 5], "") for i in range(0, len(raw), 5)
    ]
    events += [ToolCallReady(1, call, value)]
    return events


def test_the_card_streams_the_code_not_its_json(wire: Wire) -> None:
    view = RunView("analyse", clock=wire.clock)
    arguments = {"code": CODE, "purpose": "load the data"}
    raw = json.dumps(arguments)
    start = len(wire.messages)
    play(view, wire, _code_run(view, wire, raw, arguments), 0.002)
    card = view.cards["c1"]
    assert card.arguments.text == CODE and card.arguments.language == "python"
    assert wire.text(card.arguments.model_id) == CODE  # the browser got the code, as code
    assert wire.busiest_second(start) <= 30
    assert card.details is not None and "load the data" in card.details.value
    assert "<b>word</b>" not in card.details.value


def test_a_code_argument_that_is_not_a_string_shows_the_json(wire: Wire) -> None:
    view = RunView("analyse", clock=wire.clock)
    raw = '{"code": 12}'
    play(view, wire, _code_run(view, wire, raw, {"code": 12}), 0.002)  # type: ignore[dict-item]
    card = view.cards["c1"]
    assert card.arguments.language == "" and "12" in card.arguments.text


def test_the_saved_card_shows_the_code_highlighted_and_escaped(wire: Wire) -> None:
    view = RunView("analyse", clock=wire.clock)
    arguments = {"code": CODE, "purpose": "load <the> data"}
    raw = json.dumps(arguments)
    events = _code_run(view, wire, raw, arguments)
    events += [
        ToolFinished(ToolCall("c1", "run_python", raw), ToolResult((TextPart("ok"),)), "done"),
        RunFinished(result()),
    ]
    play(view, wire, events, 0.002)
    bundles = run_outputs(view.transcript, inline_images=True)
    html = "".join(str(data.get("text/html", "")) for data, _ in bundles)
    markdown = "".join(str(data.get("text/markdown", "")) for data, _ in bundles)
    plain = "".join(str(data.get("text/plain", "")) for data, _ in bundles)
    assert f'<span style="color:{CODE_COLORS["Keyword"]}">import' in html
    assert "&lt;b&gt;word&lt;/b&gt;" in html and "<b>word</b>" not in html
    assert '\\"quoted' not in html  # the code as written, not JSON-escaped
    # the other arguments read as on the live card, one line each, not as JSON
    assert "<b>purpose:</b> load &lt;the&gt; data" in html
    assert '"purpose"' not in html
    assert "```python\nimport pandas as pd\n" in markdown
    assert '    print("a \\"quoted\\" <b>word</b>")' in plain


def test_code_colors_read_on_every_background_a_code_block_can_get() -> None:
    """The saved card's colors are inline hex (JupyterLab's sanitizer drops ``var()`` from an
    untrusted notebook), so they must read on the theme's editor background (#f5f5f5 light,
    #212121 dark) and on the page where the background was dropped (#fff, #111); the purple
    keywords were 2.6:1 on #212121. The live view (plain.js) uses the same colors."""
    from pathlib import Path

    from nbagent.notebook.shown.render import CODE_BACKGROUND, code_html

    from .test_render import _contrast

    for token, color in CODE_COLORS.items():
        for background in ("#ffffff", "#f5f5f5", "#111111", "#212121"):
            assert _contrast(color, background) >= 3.5, (token, color, background)
    html = code_html("import os  # why\n", "python")
    assert CODE_BACKGROUND in html
    # no background of its own: JupyterLab gives every <code> one, a band behind each line
    assert '<code style="background:none;padding:0">' in html
    script = (Path(__file__).parents[2] / "nbagent/notebook/live/plain.js").read_text()
    palette = script[script.index("const PY_COLORS") :]
    palette = palette[: palette.index("};")]
    assert set(re.findall(r"#[0-9a-f]{6}", palette)) <= set(CODE_COLORS.values())
    assert len(re.findall(r"#[0-9a-f]{6}", palette)) == 6


def test_a_snippets_labelled_pieces_get_no_bare_result_label(wire: Wire) -> None:
    """A snippet that printed nothing showed "Result" with nothing under it, then its
    "Namespace" table: its pieces say what they are (Out, Namespace …), live and saved."""
    from nbagent.content import Shown, Table

    view = RunView("analyse", clock=wire.clock)
    arguments = {"code": "x = 2"}
    raw = json.dumps(arguments)
    events = _code_run(view, wire, raw, arguments)
    table = Table(("name", "change", "before", "now"), (("x", "rebound", "1", "2"),))
    snippet = ToolResult(
        (TextPart("(no output)\nNamespace: x: 1 → 2."),),
        value=(Shown("table", table, "Namespace"),),
    )
    events += [ToolFinished(ToolCall("c1", "run_python", raw), snippet, "done")]
    events += [RunFinished(result())]
    play(view, wire, events, 0.002)
    assert view.cards["c1"].result_label is not None
    assert view.cards["c1"].result_label.value == ""  # live: no label above the pieces
    html = "".join(str(d.get("text/html", "")) for d, _ in run_outputs(view.transcript))
    assert "Namespace" in html and ">Result</div>" not in html  # saved: the same
    # a result without pieces of its own keeps its label
    plain = RunView("analyse", clock=wire.clock)
    events = _code_run(plain, wire, raw, arguments)
    done = ToolResult((TextPart("ok"),))
    events += [ToolFinished(ToolCall("c1", "run_python", raw), done, "done")]
    events += [RunFinished(result())]
    play(plain, wire, events, 0.002)
    assert "Result" in str(plain.cards["c1"].result_label.value)
    saved = "".join(str(d.get("text/html", "")) for d, _ in run_outputs(plain.transcript))
    assert ">Result</div>" in saved
