"""What a person sees of results, and model text made safe for Markdown and HTML."""

from __future__ import annotations

import base64
import io
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent.content import error_result, text_and_image_result, to_tool_result
from nbagent.notebook.saved.static import run_markdown, run_plain
from nbagent.notebook.shown.render import (
    code_span,
    fenced,
    result_outputs,
    safe_markdown,
    shorten,
    table_html,
)
from nbagent.notebook.shown.transcript import Transcript

ATTACKS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[click](javascript:alert(1))",
    "[click](JaVaScRiPt :alert(1))",
    "[x]: javascript:alert(1)\n\n[x]",
    "<a href='javascript:alert(1)'>a</a>",
    "![p](data:text/html;base64,PHNjcmlwdD4=)",
    "&lt;script&gt;alert(1)&lt;/script&gt;",
    "[a](&#106;avascript:alert(1))",
    "<svg><animate onbegin=alert(1) attributeName=x dur=1s>",
]


def harmful(html: str) -> bool:
    lowered = html.lower()
    return bool(
        "<script" in lowered
        or "<svg" in lowered
        or "<a href='" in lowered
        or re.search(r"<[a-z][^>]*\son\w+\s*=", lowered)  # an event handler attribute
        or re.search(r"(href|src)\s*=\s*[\"']?\s*(javascript|data|vbscript):", lowered)
    )


@pytest.mark.parametrize("attack", ATTACKS)
def test_safe_markdown_renders_no_markup_and_no_script_url(attack: str) -> None:
    mistune = pytest.importorskip("mistune")
    # like JupyterLab's renderer for trusted output: raw HTML passes through
    render = mistune.create_markdown(escape=False)
    text = f"Text before {attack} and after."
    safe = safe_markdown(text)
    assert not harmful(render(safe))
    # whatever a renderer does with URLs, none of these schemes survives as a scheme
    assert not re.search(r"(?i)(javascript|vbscript|data)\s*:", safe)
    if attack.startswith("<"):
        assert harmful(render(text)), "the attack should work without safe_markdown"


def _browser_scheme(href: str) -> str | None:
    """The scheme a browser takes from an ``href`` attribute's text (WHATWG URL parsing: the
    attribute's character references decoded, leading and trailing C0 controls and spaces
    dropped, tabs and line breaks removed anywhere), or None for a relative address."""
    import html as html_module

    url = html_module.unescape(href).strip("".join(map(chr, range(33))))
    url = re.sub(r"[\t\n\r]", "", url)
    found = re.match(r"([A-Za-z][A-Za-z0-9+.\-]*):", url)
    return found.group(1).lower() if found else None


def _rendered_hrefs(markdown: str) -> list[str]:
    """Every link a viewer of a saved notebook could click: nbconvert's Markdown renderer
    (``jupyter nbconvert --to html``) and a CommonMark one allowing HTML (a trusted output)."""
    from markdown_it import MarkdownIt
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    pages = [
        markdown2html_mistune(markdown),
        MarkdownIt("commonmark", {"html": True}).render(markdown),
    ]
    return [h for page in pages for h in re.findall(r"""href\s*=\s*["']([^"']*)""", page)]


#: Ways to write a link whose scheme is not http(s) or mailto, live in the renderers as they
#: are: each broke through a list of forbidden schemes (a backslash-escaped colon, a character
#: reference, schemes nobody listed).
LIVE_BYPASSES = [
    "[a](javascript\\:alert(1))",
    "[a](javascript&colon;alert(1))",
    "[a](javascript&#58;alert(1))",
    "[a](javascript&#x3A;alert(1))",
    "[a](java&#115;cript:alert(1))",
    "[a](ms-msdt:/id%20PCWDiagnostic)",
    "[a](intent://x#Intent;scheme=evil;end)",
    "[a](blob:https://x/y)",
    "[a](vscode://file/etc/passwd)",
    "[a]: search-ms:query=x\n\n[a]",
]
#: Harmless as they are, but nbconvert decodes a link's character references twice, so once
#: ``&`` was escaped as ``&amp;`` the tab came back and a browser dropped it.
ESCAPED_BYPASSES = ["[a](jav&#x09;ascript:alert(1))", "[a](jav&Tab;ascript:alert(1))"]


@pytest.mark.parametrize("attack", LIVE_BYPASSES + ESCAPED_BYPASSES)
def test_no_link_but_http_and_mailto_survives_in_saved_markdown(attack: str) -> None:
    if attack in LIVE_BYPASSES:
        live = {_browser_scheme(h) for h in _rendered_hrefs(attack)} - {None}
        assert live - {"http", "https", "mailto"}, "the attack should work without safe_markdown"
    schemes = {_browser_scheme(h) for h in _rendered_hrefs(safe_markdown(f"see {attack} now"))}
    assert schemes <= {None}, schemes


def test_http_and_mailto_links_stay_links() -> None:
    text = "[docs](https://example.com/a) [plain](HTTP://x.org) [me](mailto:a@b.org)"
    hrefs = _rendered_hrefs(safe_markdown(text))
    assert {"https://example.com/a", "HTTP://x.org", "mailto:a@b.org"} <= set(hrefs), hrefs


_NOISE = st.sampled_from(["", "\t", "\n", "\\", "&#x09;", "&Tab;", "&NewLine;", " "])


@settings(max_examples=300, deadline=None)
@given(
    scheme=st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyzJS+.-"), min_size=1, max_size=12),
    noise=st.lists(_NOISE, min_size=1, max_size=4),
    colon=st.sampled_from([":", "\\:", "&colon;", "&#58;", "&#x3a;", "&#0058;", "&amp;colon;"]),
    form=st.sampled_from(
        ["[a]({})", "[a](<{}>)", "[a][r]\n\n[r]: {}", "<{}>", "{}", '[a]({} "t")', "[a]({}\n)"]
    ),
    body=st.sampled_from(["alert(1)", "", " ", "\t", " alert(1)", "\talert(1)", "\nalert(1)"]),
)
def test_any_scheme_written_any_way_is_broken(
    scheme: str, noise: list[str], colon: str, form: str, body: str
) -> None:
    head = scheme if scheme[0].isalpha() else "x" + scheme
    pairs = zip(noise * len(head), head[1:], strict=False)
    spelled = head[0] + "".join(n + c for n, c in pairs) + colon
    markdown = safe_markdown(form.format(spelled + body))
    for href in _rendered_hrefs(markdown):
        assert _browser_scheme(href) in (None, "http", "https", "mailto"), (spelled, href)


def test_prose_keeps_its_colons_as_written() -> None:
    # a colon that prose goes on after is no URL: saved text stays searchable and copyable
    for prose in ("denied by policy: nobody can approve", "Error: file not found", "a,b: c"):
        assert safe_markdown(prose) == prose
    assert "\u200b" in safe_markdown("see javascript:\n") + safe_markdown("[a](javascript: )")


def test_safe_markdown_keeps_markdown_and_code_as_written() -> None:
    text = (
        "# Title\n\n**bold** and `a < b && c` and\n\n```python\nif a < b:\n    x = '<tag>'\n```\n"
    )
    safe = safe_markdown(text)
    assert "# Title" in safe and "**bold**" in safe
    assert "`a < b && c`" in safe  # code spans show their text literally
    assert "if a < b:\n    x = '<tag>'" in safe  # so do fenced blocks
    assert "> quoted" in safe_markdown("> quoted")


def test_code_span_and_fence_survive_backticks() -> None:
    assert code_span("a`b") == "``a`b``"
    assert code_span("`x`") == "`` `x` ``"
    block = fenced("```\ninner\n```")
    assert block.startswith("````\n") and block.endswith("\n````")


def test_shorten_says_how_much_was_left_out() -> None:
    assert shorten("abc", 10) == "abc"
    assert shorten("a" * 30, 10).endswith("(20 more characters not shown)")


def test_dataframe_table_is_escaped_and_bounded() -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"<b>col</b>": [f"<i>{i}</i>" for i in range(80)]})
    html = table_html(frame)
    assert html is not None
    assert "<b>col</b>" not in html and "&lt;b&gt;col&lt;/b&gt;" in html
    assert "&lt;i&gt;0&lt;/i&gt;" in html and "&lt;i&gt;79&lt;/i&gt;" not in html
    assert "80 rows × 1 columns" in html
    assert table_html(pd.Series([1, 2], name="n")) is not None
    assert table_html("not a table") is None


def test_results_for_a_person() -> None:
    from PIL import Image

    picture = result_outputs(to_tool_result(Image.new("RGB", (5, 3), "red")))
    assert picture[0]["data"]["text/plain"] == "[image 5×3, image/png]"
    png = base64.b64decode(picture[0]["data"]["image/png"])
    assert Image.open(io.BytesIO(png)).size == (5, 3)

    both = result_outputs(text_and_image_result("caption", Image.new("L", (2, 2))))
    assert [next(iter(o["data"])) for o in both] == ["text/plain", "image/png"]

    error = result_outputs(error_result("it broke"))
    assert error == [{"output_type": "stream", "name": "stderr", "text": "it broke"}]

    plain = result_outputs(to_tool_result("<b>not html</b>"))
    assert plain[0]["data"] == {"text/plain": "<b>not html</b>"}

    class Note:
        def _repr_markdown_(self) -> str:
            return "**hi** <script>x</script>"

    note = result_outputs(to_tool_result(Note()))
    assert note[0]["data"]["text/markdown"] == "**hi** &lt;script>x&lt;/script>"


def test_figure_results_show_as_images() -> None:
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(1, 1))
    axes.plot([0, 1], [1, 0])
    outputs = result_outputs(to_tool_result(figure))
    plt.close(figure)
    assert any("image/png" in o["data"] for o in outputs)


def test_transcript_forms_hold_no_raw_markup() -> None:
    from nbagent.events import AssistantTextDelta, RunStarted

    transcript = Transcript()
    transcript.handle(RunStarted("run-1", "<b>hi</b>", "m"))
    transcript.handle(AssistantTextDelta(1, "<script>x</script> `<ok>`"))
    transcript.end("finished")
    markdown = run_markdown(transcript)
    assert "<b>" not in markdown and "<script>" not in markdown
    assert "`<ok>`" in markdown
    assert "<script>x</script>" in run_plain(transcript)
    assert transcript.to_metadata()["text"] == "<script>x</script> `<ok>`"


def test_the_browser_side_never_parses_html() -> None:
    from pathlib import Path

    import nbagent.notebook

    scripts = sorted(Path(nbagent.notebook.__file__).parent.rglob("*.js"))
    assert len(scripts) >= 7, scripts  # each beside the module that sends it
    for script in scripts:
        source = script.read_text()
        for api in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
            assert api not in source, f"{script.name} uses {api}"


def test_streamed_text_and_reasoning_join_per_step_in_order() -> None:
    from nbagent.events import AssistantTextDelta, ReasoningTextDelta

    transcript = Transcript()
    for event in [
        ReasoningTextDelta(1, "Think"),
        ReasoningTextDelta(1, "ing."),
        AssistantTextDelta(1, "Hel"),
        AssistantTextDelta(1, "lo"),
        AssistantTextDelta(2, "Next "),
        AssistantTextDelta(2, "step."),
    ]:
        transcript.handle(event)
    texts = transcript.text_blocks()
    assert [(b.step, b.text) for b in texts] == [(1, "Hello"), (2, "Next step.")]
    assert texts[0].text == "Hello"  # reading twice gives the same text
    transcript.handle(AssistantTextDelta(2, " More."))  # and a piece after a read still joins
    assert transcript.text_blocks()[-1].text == "Next step. More."
    reasoning = [b for b in transcript.blocks if type(b).__name__ == "ReasoningRecord"]
    assert [b.text for b in reasoning] == ["Thinking."]
    assert "Thinking." in run_plain(transcript)


def _contrast(color: str, background: str) -> float:
    def luminance(hex_color: str) -> float:
        channels = [int(hex_color.lstrip("#")[i : i + 2], 16) / 255 for i in (0, 2, 4)]
        r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    high, low = sorted((luminance(color), luminance(background)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_status_colors_are_readable_in_light_and_dark_themes() -> None:
    # the same colours are used whatever the theme (a saved run cannot know it): on white and
    # on JupyterLab Dark's page (#111) alike, every status stays readable (denied was 2.7:1
    # and running 3.3:1 on dark, waiting 3.1:1 on white)
    from nbagent.notebook.shown.render import STATUS_COLORS

    for status, color in STATUS_COLORS.items():
        for page in ("#ffffff", "#111111"):
            assert _contrast(color, page) >= 4.0, (status, color, page)


def test_an_error_result_is_shown_on_the_themes_error_background() -> None:
    # red text on the grey code background was 1.8:1 in JupyterLab Dark: the text keeps the
    # theme's colour and the box takes the theme's error background, as Jupyter's stderr does
    from nbagent.notebook.saved.static import _result_html

    html = _result_html(error_result("the run was cancelled"))
    assert "the run was cancelled" in html
    assert "background:var(--jp-rendermime-error-background," in html
    assert "color:#" not in html


def test_dollar_signs_stay_text_in_markdown_and_html() -> None:
    """MathJax would typeset ``$5 and $10`` as TeX: Markdown gets no bare dollar, and every
    HTML or Markdown bundle a person sees sits in a block MathJax skips."""
    from nbagent.notebook.shown.render import NO_MATH_CLASS, no_math, no_math_outputs

    assert "$" not in safe_markdown("costs $5 and $10, `$ok`").replace("`$ok`", "")
    assert "`$ok`" in safe_markdown("costs $5 and `$ok`")  # code spans stay literal
    bundle = no_math({"text/html": "<p>$5</p>", "text/markdown": "x", "text/plain": "$5"})
    assert bundle["text/html"].startswith(f'<div class="{NO_MATH_CLASS}">')
    assert bundle["text/markdown"].startswith(f'<div class="{NO_MATH_CLASS}">\n\n')
    assert bundle["text/plain"] == "$5"
    shown = no_math_outputs(result_outputs(to_tool_result("costs $5 and $10")))
    assert all(
        "data" not in o or "text/html" not in o["data"] or NO_MATH_CLASS in o["data"]["text/html"]
        for o in shown
    )


def test_a_table_of_text_reads_from_the_left_and_numbers_from_the_right() -> None:
    from nbagent.content import Table
    from nbagent.notebook.shown.render import rows_html

    page = rows_html(Table(("name", "rows"), (("sales <b>", 12), ("by_region", 4))))
    cells = re.findall(r"<t[hd]([^>]*)>([^<]*)</t[hd]>", page)
    assert cells[0] == (' style="text-align:left"', "name") and cells[1] == ("", "rows")
    assert (' style="text-align:left"', "sales &lt;b&gt;") in cells and ("", "12") in cells


#: What a person or a file may write that Markdown would read as markup.
LITERAL = [
    "openai:gpt-4.1-*",
    "anthropic:claude-*-latest and *both*",
    "a `code` span and ``two``",
    "my_tool_name and __init__",
    "- not a list",
    "+ nor this",
    "1. nor an ordered one",
    "12) nor this",
    "# not a heading",
    "title\n=====\nand\n---",
    "    not code",
    "> not a quote",
    "a | b | c",
    "~~not struck~~",
    "[not a link](http://x) ![nor an image](http://y)",
    "<b>not bold</b> &amp; &#58; $x$ \\escaped",
    "[x]: javascript:alert(1)",
]


@pytest.mark.parametrize("text", LITERAL)
def test_md_text_shows_exactly_what_was_written(text: str) -> None:
    import html as html_module

    from markdown_it import MarkdownIt

    from nbagent.notebook.shown.render import md_text

    renderers = [MarkdownIt("commonmark").render, MarkdownIt("gfm-like", {"linkify": False}).render]
    mistune = pytest.importorskip("mistune")
    renderers.append(mistune.create_markdown(escape=False, plugins=["strikethrough", "table"]))
    for render in renderers:
        rendered = str(render(md_text(text)))
        tags = set(re.findall(r"</?([a-z0-9]+)", rendered))
        assert tags <= {"p"}, (text, rendered)  # no emphasis, code, link, list, heading …
        shown = html_module.unescape(re.sub(r"</?p>", "", rendered)).strip()
        expected = "\n".join(line.strip() for line in text.split("\n"))
        assert shown.replace("\xa0", "") == expected.strip(), (text, rendered)


def test_a_refusal_names_its_rule_as_code_and_shows_the_teachers_words_as_written() -> None:
    from markdown_it import MarkdownIt

    from nbagent.course.refusal import sentence_markdown
    from nbagent.course.runs_report import _sentence_html

    sentence = (
        "AI is off here: exam_1 is *yours* `alone` (rule `notebooks[1].ai = false` in "
        "../nbagent-course.toml); nothing was sent."
    )
    rendered = MarkdownIt("commonmark").render(sentence_markdown(sentence))
    assert "<code>notebooks[1].ai = false</code>" in rendered
    assert "exam_1 is *yours* `alone`" in rendered and "<em>" not in rendered
    page = _sentence_html(sentence)
    assert "<code>notebooks[1].ai = false</code>" in page and "`notebooks" not in page
    assert "exam_1 is *yours* `alone`" in page
