"""A tool's value is the person's code: the card reads it through the guard, once.

Whatever a DataFrame's cell, a ``_repr_markdown_``, a :class:`Shown` piece or a
:class:`Table` cell does (raise, spin, recurse, answer with megabytes), the card's outputs come
back: the text the model read, and an escaped stand-in naming the type and saying why. Real
kernels: test_kernel_hostile_values.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

import nbagent._ground.formatting
from nbagent.content import Shown, Table, error_result, text_result
from nbagent.notebook.shown.render import result_outputs, rows_html, table_html

QUICK = 0.3


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nbagent._ground.formatting, "FORMAT_TIMEOUT", QUICK)


class Counted:
    """Counts how often its code runs; ``how`` says what that code does."""

    def __init__(self, how: str) -> None:
        self.how = how
        self.runs = 0

    def __str__(self) -> str:
        self.runs += 1
        if self.how == "raise":
            raise ValueError("boom <b>bold</b>")
        if self.how == "spin":
            while True:
                pass
        if self.how == "recurse":
            return str(self)
        return "<i>x</i>" * 1_000_000


def _shown(outputs: list[dict[str, Any]]) -> str:
    return json.dumps(outputs, ensure_ascii=False)


@pytest.mark.parametrize("how", ["raise", "spin", "recurse", "huge"])
def test_a_frame_with_a_hostile_cell_shows_a_stand_in_and_the_models_text(how: str) -> None:
    pd = pytest.importorskip("pandas")
    cell = Counted(how)
    frame = pd.DataFrame({"<b>a</b>": [cell, 2]})
    result = text_result("a frame of two rows", value=frame)
    outputs = result_outputs(result)
    shown = _shown(outputs)
    assert "a frame of two rows" in shown
    pages = "".join(o["data"].get("text/html", "") for o in outputs)
    assert "<b>" not in pages and "<i>" not in pages  # HTML escaped (plain text is text)
    if how == "huge":  # read, each cell cut: a bounded table
        assert "&lt;i&gt;x&lt;/i&gt;" in shown and len(shown) < 10_000
    else:
        plain = outputs[0]["data"]["text/plain"]
        assert plain.startswith("<pandas.DataFrame: its own code, run to show it, ")
        said = {
            "raise": "raised ValueError: boom <b>bold</b>>",
            "spin": f"did not answer: it did not finish within {QUICK:g} s>",
            "recurse": "raised RecursionError: maximum recursion depth exceeded",
        }[how]
        assert said in plain
    runs = cell.runs
    assert result_outputs(result) == outputs  # the saved output reads it no more
    assert cell.runs == runs


def test_markdown_and_shown_pieces_and_table_cells_that_do_not_read() -> None:
    class Markdown:
        def _repr_markdown_(self) -> str:
            while True:
                pass

    outputs = result_outputs(text_result("said", value=Markdown()))
    assert outputs[0]["data"]["text/plain"].endswith(
        f"Markdown: its own code, run to show it, did not answer: it did not finish within "
        f"{QUICK:g} s>"
    )
    assert outputs[1]["data"] == {"text/plain": "said"}

    pieces = (
        Shown("text", Counted("raise"), label="<i>label</i>"),
        Shown("table", Table(("a",), ((Counted("spin"),),))),
        Shown("markdown", "**fine**"),
    )
    shown = result_outputs(text_result("pieces", value=pieces))
    assert shown[0]["data"]["text/plain"] == (
        "<i>label</i>: <tests.notebook.test_render_hostile.Counted: its __str__ raised "
        "ValueError: boom <b>bold</b>>"
    )
    assert "did not finish within" in shown[1]["data"]["text/plain"]
    assert shown[2]["data"]["text/markdown"] == "**fine**"
    assert "did not finish" in rows_html(Table(("a",), ((Counted("spin"),),)))
    page = table_html(Table(("<b>a</b>",), ((Counted("raise"),),)))
    assert page is not None and page.startswith("<p><code>&lt;nbagent.content.Table: ")
    assert "<b>" not in page


def test_an_error_result_holding_a_hostile_exception_is_its_text() -> None:
    class Evil(Exception):
        def __getattr__(self, name: str) -> Any:
            while True:
                pass

    outputs = result_outputs(error_result("it broke", value=Evil()))
    assert outputs == [{"output_type": "stream", "name": "stderr", "text": "it broke"}]
