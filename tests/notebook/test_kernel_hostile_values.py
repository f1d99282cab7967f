"""Tools return the person's objects, in a real kernel: a DataFrame whose cell never finishes
its ``__str__``, something whose ``_repr_markdown_`` raises, pieces whose text recurses, a
prompt's ``{name}`` that spins, a typed answer whose field will not format. Each card (live and
saved) shows an escaped stand-in naming the type and saying why, the run ends, and the kernel
answers the next cell. (In-process: test_render_hostile.py.)"""

from __future__ import annotations

import json
import textwrap

from .kernel import Kernel
from .test_kernel_approval import run_record, setup_run, wait_ended

TOOLS = textwrap.dedent(
    """
    import nbagent._ground.formatting
    import pandas as pd
    from nbagent.content import Shown, text_result

    nbagent._ground.formatting.FORMAT_TIMEOUT = 0.5  # quick, for the test

    class Spin:
        def __str__(self):
            while True:
                pass

    class Boom:
        def __str__(self):
            raise ValueError("boom <b>bold</b>")

        def _repr_markdown_(self):
            raise ValueError("no markdown <script>x</script>")

    class Deep:
        def __str__(self):
            return str(self)

    @tool(to_model_output=lambda frame: "a frame of two rows")
    def frame() -> object:
        \"\"\"A frame.\"\"\"
        return pd.DataFrame({"<b>a</b>": [Spin(), 2]})

    @tool(to_model_output=lambda value: "some markdown")
    def markdown() -> object:
        \"\"\"Markdown.\"\"\"
        return Boom()

    @tool
    def pieces() -> object:
        \"\"\"Pieces.\"\"\"
        return text_result("pieces", value=(Shown("text", Deep(), label="<i>deep</i>"),))
    """
)

TURNS = "[Turn(Call('frame', {}), Call('markdown', {}), Call('pieces', {})), 'All shown.']"


def test_hostile_values_show_as_stand_ins_and_the_kernel_goes_on(kernel: Kernel) -> None:
    since = setup_run(kernel, TURNS, tools=TOOLS)
    cell = kernel.submit("%agent --new --approve auto show them")
    record = wait_ended(kernel, cell)
    assert record["stop_reason"] == "finished"
    live = json.dumps([kernel.widgets[c] for c in list(kernel.widgets)[since:]])
    page = kernel.cell_text(cell, "text/html")  # the saved output
    for shown in (live, page):
        assert (
            "DataFrame: its own code, run to show it, did not answer: it did not finish " in shown
        )
        assert "within 0.5 s" in shown
        assert "Boom: its own code, run to show it, raised ValueError: no markdown" in shown
        assert "Deep: its __str__ raised RecursionError" in shown
    assert "&lt;pandas.DataFrame: its own code" in page  # escaped
    assert "<b>a</b>" not in page and "<script>" not in page and "<b>bold" not in page
    assert "All shown." in kernel.cell_text(cell)
    assert kernel.eval("1 + 1") == 2  # the kernel answers
    assert kernel.eval("model.requests[1].messages[-1].results[0].text") == ("a frame of two rows")


def test_a_prompt_field_that_spins_is_refused_saying_why(kernel: Kernel) -> None:
    setup_run(kernel, "['never asked']", tools=TOOLS)
    kernel.execute("spinning = Spin()")
    cell = kernel.submit("%agent --new tell me about {spinning}")
    kernel.finish(cell, allow_errors=True)
    said = json.dumps(kernel.cell_outputs(cell)) + kernel.cell_text(cell)
    assert "{spinning} in the prompt could not be filled in" in said, said
    assert "did not finish within 0.5 s" in said
    assert run_record(kernel, cell) is None  # no run began
    assert kernel.eval("len(model.requests)") == 0
    assert kernel.eval("2 + 2") == 4
