"""``%agent --notebook`` in a real kernel: the page simulated as its script answers (notebookpage).

Each test runs on the current ipykernel and on 6.29 (the ``kernel`` fixture): on 7.4 the cell
awaits its run and the page's answers reach it while it waits; on 6.29 a run that asks goes on
in the background. Clicks are sent as the browser sends them. The page is simulated (a kernel
test has no browser): tests/browser/test_notebook_edits.py drives the real one.
"""

from __future__ import annotations

import textwrap
from typing import Any

from .kernel import Kernel
from .notebookpage import FakePage, code_cell, markdown_cell, serve_pages, submit_in_cell
from .test_kernel_approval import in_cell, run_record

ASK = "ask"


def _setup(kernel: Kernel, turns: str, *, timeout: float = 3.0) -> int:
    kernel.execute(
        "from nbagent.models import ScriptedModel, Call, Turn\n"
        "from nbagent.document import NotebookLimits\n"
        "from nbagent.notebook.editing.tools import toolkit as _notebook_kit\n"
        "_session = nbagent.notebook.current_session()\n"
        f"_session.set_model(ScriptedModel({textwrap.dedent(turns).strip()}))\n"
        f"_notebook_kit(_session).limits = NotebookLimits(page_timeout={timeout})\n"
    )
    in_cell(kernel)
    return kernel.mark()


def _cells() -> list[dict[str, Any]]:
    return [
        code_cell("first", "total = 3"),
        code_cell(
            "broken",
            "print(totl)",
            outputs=[
                {
                    "output_type": "error",
                    "ename": "NameError",
                    "evalue": "name 'totl' is not defined",
                    "traceback": ["NameError: name 'totl' is not defined. Did you mean: 'total'?"],
                }
            ],
            execution_count=2,
        ),
        markdown_cell("notes", "# Notes"),
        code_cell(ASK, "%agent --notebook fix the error above"),
    ]


def _ended(pages: list[FakePage], msg_id: str) -> dict[str, Any]:
    kernel = pages[0].kernel
    return dict(
        serve_pages(
            pages,
            lambda: not kernel.running(msg_id) and run_record(kernel, msg_id),
            what="the run's end",
        )
    )


def _button(pages: list[FakePage], label: str, since: int) -> str:
    kernel = pages[0].kernel
    found = serve_pages(pages, lambda: kernel.buttons(label, enabled=True, since=since), what=label)
    return str(found[0])


def test_read_propose_accept_one_reject_one_and_undo(kernel: Kernel) -> None:
    since = _setup(
        kernel,
        """[
            Turn(Call('read_notebook', {})),
            Turn(Call('edit_cell', {'cell_id': 'broken', 'source': 'print(total)'})),
            Turn(Call('insert_cell', {'source': '<b>done</b>', 'cell_type': 'markdown',
                                      'after_cell_id': 'broken'})),
            'Fixed it.',
        ]""",
    )
    page = FakePage(kernel, _cells())
    cell = submit_in_cell(kernel, "%agent --new --notebook fix the error above", ASK)
    kernel.click(_button([page], "Accept", since))
    serve_pages([page], lambda: page.cells[1]["source"] == "print(total)", what="the edit")
    rejects = serve_pages(
        [page], lambda: kernel.buttons("Reject", enabled=True, since=since), what="Reject"
    )

    def reasons() -> list[str]:  # the second bar's box, once its words arrived
        found = [
            c
            for c in kernel.widget_ids("TextModel", since=since)
            if kernel.widgets[c].get("placeholder", "").startswith("Why not")
        ]
        return found if len(found) == 2 else []

    kernel.type_into(
        serve_pages([page], reasons, what="the reason box")[-1], "no HTML in my notebook"
    )
    kernel.click(rejects[-1])
    record = _ended([page], cell)
    assert record["stop_reason"] == "finished"
    assert page.sources() == [
        "total = 3",
        "print(total)",
        "# Notes",
        "%agent --notebook fix the error above",
    ]
    entry = page.cells[1]["metadata"]["nbagent_edit"]["edits"][0]
    assert (entry["tool"], entry["accepted"]) == ("edit_cell", "as proposed")
    read = kernel.eval(
        "[m.results[0].text for m in _session.agent.messages if getattr(m, 'results', None)]"
    )
    assert "NameError" in read[0] and "no HTML in my notebook" in read[2]
    # undo: the run's edits as one step of the page's undo history
    undo = submit_in_cell(kernel, "%agent undo", "undo-cell")
    serve_pages([page], lambda: not kernel.running(undo), what="the undo")
    serve_pages([page], lambda: "taken back" in kernel.cell_text(undo), what="the undo's report")
    assert page.cells[1]["source"] == "print(totl)"
    assert any(r.get("together") for r in page.requests if r["op"] == "apply")


def test_the_persons_edit_made_while_the_card_waits_wins(kernel: Kernel) -> None:
    since = _setup(
        kernel,
        """[
            Turn(Call('read_notebook', {})),
            Turn(Call('edit_cell', {'cell_id': 'broken', 'source': 'print(total)'})),
            'ok',
        ]""",
    )
    page = FakePage(kernel, _cells())
    cell = submit_in_cell(kernel, "%agent --new --notebook fix it", ASK)
    accept = _button([page], "Accept", since)
    page.cells[1]["source"] = "print(total)  # mine"  # the person types in the cell
    kernel.click(accept)
    _ended([page], cell)
    assert page.cells[1]["source"] == "print(total)  # mine"
    said = kernel.eval(
        "[m.results[0].text for m in _session.agent.messages if getattr(m, 'results', None)][-1]"
    )
    assert "changed after you read it" in said and "# mine" in said


def test_a_notebook_no_page_shows_is_refused_in_one_sentence(kernel: Kernel) -> None:
    _setup(kernel, "[Turn(Call('read_notebook', {})), 'ok']", timeout=0.5)
    page = FakePage(kernel, _cells())
    page.silent = True  # the tab was closed
    cell = submit_in_cell(kernel, "%agent --new --notebook --approve auto read it", ASK)
    _ended([page], cell)
    said = kernel.eval(
        "[m.results[0].text for m in _session.agent.messages if getattr(m, 'results', None)][-1]"
    )
    assert said.startswith("No page showing this notebook answered within 0.5 s")
    assert "nothing was read or changed" in said


def test_a_proposal_accepted_after_its_tab_was_closed_lands_nowhere_and_says_so(
    kernel: Kernel,
) -> None:
    since = _setup(
        kernel,
        """[
            Turn(Call('read_notebook', {})),
            Turn(Call('edit_cell', {'cell_id': 'broken', 'source': 'print(total)'})),
            'ok',
        ]""",
        timeout=0.5,
    )
    page = FakePage(kernel, _cells())
    cell = submit_in_cell(kernel, "%agent --new --notebook fix it", ASK)
    accept = _button([page], "Accept", since)
    page.silent = True  # the person closed the notebook's tab while the card waited
    kernel.click(accept)
    record = _ended([page], cell)
    assert record["stop_reason"] == "finished"
    assert page.cells[1]["source"] == "print(totl)"
    said = kernel.eval(
        "[m.results[0].text for m in _session.agent.messages if getattr(m, 'results', None)][-1]"
    )
    assert said.startswith("The notebook's page did not answer within 0.5 s")
    assert "nothing was read or changed" in said


def test_the_page_that_ran_the_cell_is_chosen_and_an_edit_lands_once(kernel: Kernel) -> None:
    _setup(
        kernel,
        """[
            Turn(Call('read_notebook', {})),
            Turn(Call('edit_cell', {'cell_id': 'broken', 'source': 'print(total)'})),
            'ok',
        ]""",
    )
    other = FakePage(kernel, [code_cell("elsewhere", "x = 1")], path="other.ipynb")
    first, second = FakePage(kernel, _cells()), FakePage(kernel, _cells())  # two tabs
    first.ran = False  # it answers first, but the person ran the cell in the second tab
    cell = submit_in_cell(kernel, "%agent --new --notebook --approve auto fix it", ASK)
    _ended([other, first, second], cell)
    assert second.cells[1]["source"] == "print(total)" and second.applied >= 1
    assert first.cells[1]["source"] == "print(totl)" and not first.requests  # never twice
    assert not other.requests and other.sources() == ["x = 1"]


def test_run_cell_runs_through_the_kernel_toolkit_and_fills_the_cells_outputs(
    kernel: Kernel,
) -> None:
    _setup(
        kernel,
        """[
            Turn(Call('read_notebook', {})),
            Turn(Call('run_cell', {'cell_id': 'calc'})),
            'ok',
        ]""",
    )
    source = (
        "from IPython.display import Markdown, display\n"
        "made_by_cell = 6 * 7\nprint('made', made_by_cell)\ndisplay(Markdown('**bold**'))"
    )
    cells = [code_cell("calc", source), code_cell(ASK, "")]
    page = FakePage(kernel, cells)
    cell = submit_in_cell(kernel, "%agent --new --notebook --approve auto run it", ASK)
    _ended([page], cell)
    assert kernel.eval("made_by_cell") == 42
    outputs = page.cells[0]["outputs"]
    assert outputs[0]["output_type"] == "stream" and outputs[0]["text"] == "made 42\n"
    assert outputs[0]["metadata"]["nbagent"]["ran_by"]
    assert outputs[1]["output_type"] == "display_data"
    assert outputs[1]["data"]["text/markdown"] == "**bold**"
    assert page.cells[0]["execution_count"] is None
    undo = submit_in_cell(kernel, "%agent undo", "undo-cell")
    serve_pages(
        [page], lambda: not kernel.running(undo) and not page.cells[0]["outputs"], what="undo"
    )
    assert kernel.eval("'made_by_cell' in globals()") is False


def test_headless_runs_refuse_the_notebook_tools_at_once(kernel: Kernel) -> None:
    _setup(kernel, "[Turn(Call('read_notebook', {})), 'ok']", timeout=30)
    out = kernel.execute(
        "import os\nos.environ['NBAGENT_MODE'] = 'headless'\n"
        "try:\n    r = %agent --new --notebook --approve auto read it\n"
        "finally:\n    del os.environ['NBAGENT_MODE']\n"
        "print(r.messages[2].results[0].text)",
        timeout=20,
    )
    text = "".join(m["content"].get("text", "") for m in out if m["msg_type"] == "stream")
    assert "No page can show this notebook here" in text and "NBAGENT_MODE=headless" in text
