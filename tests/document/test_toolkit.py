"""The notebook tools over a notebook held in memory: reading, proposals, conflicts, bounds, undo.

The page (JupyterLab, Notebook 7) applies changes with the same rules as
:class:`~nbagent.document.NotebookDocument` (``notebook/editing/page.js`` mirrors
``memory.apply_to_cells``): the kernel tests answer the page's messages with it, and the
browser tests prove the page itself.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from nbagent import Agent
from nbagent.approvals.approval import ApprovalRequest, AutoApprove, CallbackApprover, Decision
from nbagent.content import Shown
from nbagent.document import NotebookDocument, NotebookLimits, notebook_tools
from nbagent.document.record import read_edit_record, source_digest
from nbagent.events import ApprovalRequested, ToolFinished, ToolPreviewed
from nbagent.models import Call, ScriptedModel, Turn

from ..conftest import assert_history_valid

SECRET = "sk-test-SECRET-4f9c2e7d1a00112233"


def _notebook(*cells: tuple[str, str, str], error: str | None = None) -> dict[str, Any]:
    made = []
    for number, (cell_id, kind, source) in enumerate(cells, start=1):
        cell: dict[str, Any] = {"id": cell_id, "cell_type": kind, "metadata": {}, "source": source}
        if kind == "code":
            cell["execution_count"] = number
            cell["outputs"] = []
        made.append(cell)
    if error is not None:
        for cell in made:
            if cell["id"] == error:
                cell["outputs"] = [
                    {
                        "output_type": "error",
                        "ename": "NameError",
                        "evalue": "name 'totl' is not defined",
                        "traceback": [
                            "\x1b[31m---------------------------------------------------------\x1b[0m",
                            "\x1b[31mNameError\x1b[0m: name 'totl' is not defined. "
                            "Did you mean: 'total'?",
                        ],
                    }
                ]
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": made}


def _doc() -> NotebookDocument:
    return NotebookDocument(
        _notebook(
            ("first", "code", "total = 3"),
            ("broken", "code", "print(totl)"),
            ("notes", "markdown", "# Notes"),
            error="broken",
        ),
        name="t.ipynb",
    )


def _run(
    doc: NotebookDocument, *turns: Any, approver: Any = None, limits: NotebookLimits | None = None
) -> tuple[Any, list[Any], Any]:
    kit = notebook_tools(doc, limits=limits)
    agent = Agent(ScriptedModel([*turns, "done"]), list(kit), approver=approver or AutoApprove())
    kit.attach(agent)
    events: list[Any] = []
    agent.observe(lambda _run, event: events.append(event))
    result = agent.run_sync("go")
    assert_history_valid(agent.messages)
    return kit, events, result


def _results(events: list[Any]) -> dict[str, Any]:
    return {e.call.id: e.result for e in events if isinstance(e, ToolFinished)}


def _by_name(events: list[Any], name: str) -> list[Any]:
    return [e.result for e in events if isinstance(e, ToolFinished) and e.call.name == name]


READ = Turn(Call("read_notebook", {}))


def test_the_model_reads_ids_types_sources_outputs_and_the_newest_error() -> None:
    _, events, _ = _run(_doc(), READ)
    [read] = _by_name(events, "read_notebook")
    text = read.text
    assert "[cell 1] id=first · code · In [1]" in text
    assert "[cell 3] id=notes · markdown" in text
    assert "The newest error is in cell 2 (id broken, code)" in text
    assert "Did you mean: 'total'?" in text
    assert "\x1b[" not in text  # the traceback's colours are gone


def test_an_accepted_edit_lands_with_its_record_and_a_rejected_one_does_not() -> None:
    doc = _doc()
    asked: list[ApprovalRequest] = []

    def decide(request: ApprovalRequest) -> Decision:
        asked.append(request)
        if request.input["cell_id"] == "broken":
            return Decision(True, by="person")
        return Decision(False, "keep my notes as they are", by="person")

    _, events, _ = _run(
        doc,
        READ,
        Turn(
            Call("edit_cell", {"cell_id": "broken", "source": "print(total)"}),
            Call("edit_cell", {"cell_id": "notes", "source": "# Other notes"}),
        ),
        approver=CallbackApprover(decide),
    )
    assert len(asked) == 2
    sources = {c["id"]: c["source"] for c in doc.cells}
    assert sources == {"first": "total = 3", "broken": "print(total)", "notes": "# Notes"}
    [entry] = read_edit_record(doc.cells[1]["metadata"]["nbagent_edit"])
    assert (entry.action, entry.tool, entry.accepted) == ("edited", "edit_cell", "as proposed")
    assert entry.source_digest == source_digest("print(total)")
    assert "nbagent_edit" not in doc.cells[2]["metadata"]
    rejected = [r for r in _by_name(events, "edit_cell") if r.is_error]
    assert "keep my notes as they are" in rejected[0].text


def test_the_preview_is_a_per_cell_diff_shown_as_text() -> None:
    doc = _doc()
    html = "<script>alert(1)</script>\n# **bold**"

    async def decide(request: ApprovalRequest) -> Decision:
        assert request.previews is not None
        await request.previews.wait()  # as a person would: look first
        return Decision(True, by="person")

    _, events, _ = _run(
        doc,
        READ,
        Turn(Call("edit_cell", {"cell_id": "notes", "source": html})),
        approver=CallbackApprover(decide),
    )
    [previewed] = [e for e in events if isinstance(e, ToolPreviewed)]
    pieces = previewed.result.value
    diff = next(p for p in pieces if p.kind == "code" and p.language == "diff")
    assert "-# Notes" in diff.value and "+<script>alert(1)</script>" in diff.value
    assert all(isinstance(p, Shown) and p.kind in ("text", "code") for p in pieces)


def test_the_persons_edit_wins_over_a_proposal_made_before_it() -> None:
    doc = _doc()

    def decide(request: ApprovalRequest) -> Decision:
        doc.cells[1]["source"] = "print(total)  # fixed it myself"  # the person, meanwhile
        return Decision(True, by="person")

    _, events, _ = _run(
        doc,
        READ,
        Turn(Call("edit_cell", {"cell_id": "broken", "source": "print(total)"})),
        approver=CallbackApprover(decide),
    )
    assert doc.cells[1]["source"] == "print(total)  # fixed it myself"
    [result] = _by_name(events, "edit_cell")
    assert result.is_error
    assert "changed after you read it" in result.text and "# fixed it myself" in result.text
    shown = next(p for p in result.value if p.kind == "code")
    assert "-print(total)  # fixed it myself" in shown.value and "+print(total)" in shown.value


@pytest.mark.parametrize(
    ("call", "said"),
    [
        (Call("edit_cell", {"cell_id": "nope", "source": "x"}), "There is no cell nope"),
        (Call("delete_cell", {"cell_id": "nope"}), "There is no cell nope"),
        (Call("move_cell", {"cell_id": "first", "after_cell_id": "nope"}), "no cell nope to put"),
        (Call("insert_cell", {"source": "x", "before_cell_id": "nope"}), "no cell nope to put"),
        (
            Call(
                "insert_cell", {"source": "x", "after_cell_id": "first", "before_cell_id": "notes"}
            ),
            "not both",
        ),
    ],
)
def test_a_proposal_about_a_cell_that_is_not_there_is_refused_before_anyone_is_asked(
    call: Call, said: str
) -> None:
    doc = _doc()
    before = doc.to_notebook()
    _, events, _ = _run(doc, READ, Turn(call), approver=CallbackApprover(lambda r: True))
    assert not [e for e in events if isinstance(e, ApprovalRequested)]
    [result] = _by_name(events, call.name)
    assert result.is_error and said in result.text
    assert doc.to_notebook() == before


def test_a_cell_deleted_since_it_was_read_is_said_so() -> None:
    doc = _doc()
    kit = notebook_tools(doc)
    asyncio.run(_read_all(kit))
    del doc.cells[1]
    agent = Agent(
        ScriptedModel([Turn(Call("edit_cell", {"cell_id": "broken", "source": "x"})), "ok"]),
        list(kit),
        approver=AutoApprove(),
    )
    result = agent.run_sync("go")
    text = result.messages[2].results[0].text
    assert "not in the notebook any more" in text and "deleted" in text


async def _read_all(kit: Any) -> None:
    tool = kit[0]
    from nbagent.tools import ToolCall, ToolContext

    await tool.execute(ToolContext(ToolCall("c0", "read_notebook"), {}, tool))


def test_a_cell_the_model_never_read_or_read_in_part_is_not_edited() -> None:
    long = "x = 1\n" * 2_000
    doc = NotebookDocument(_notebook(("a", "code", "print(1)"), ("b", "code", long)))
    limits = NotebookLimits(max_overview_chars=100)
    _, events, _ = _run(
        doc,
        Turn(Call("edit_cell", {"cell_id": "a", "source": "print(2)"})),
        READ,
        Turn(Call("edit_cell", {"cell_id": "b", "source": "x = 2"})),
        limits=limits,
    )
    first, second = _by_name(events, "edit_cell")
    assert "You have not read cell 1" in first.text
    assert "You saw only part of cell 2" in second.text and "read_cell b" in second.text
    assert [c["source"] for c in doc.cells] == ["print(1)", long]


def test_a_secret_is_hidden_from_the_model_and_its_cell_is_not_rewritten() -> None:
    doc = NotebookDocument(_notebook(("k", "code", f'key = "{SECRET}"\nprint(key)')))
    doc.cells[0]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": SECRET}]
    _, events, result = _run(
        doc, READ, Turn(Call("edit_cell", {"cell_id": "k", "source": 'key = "***"'}))
    )
    [read] = _by_name(events, "read_notebook")
    assert SECRET not in read.text and "you may not edit it" in read.text
    [edit] = _by_name(events, "edit_cell")
    assert edit.is_error and "key or token" in edit.text
    assert SECRET in doc.cells[0]["source"]
    assert SECRET not in str(result.messages)


def test_a_source_past_the_bound_is_refused_by_the_schema() -> None:
    doc = _doc()
    limits = NotebookLimits(max_source_chars=1_000)
    _, events, _ = _run(
        doc,
        READ,
        Turn(Call("edit_cell", {"cell_id": "broken", "source": "x" * 5_000})),
        limits=limits,
    )
    [result] = _by_name(events, "edit_cell")
    assert result.is_error and "nothing was run" in result.text
    assert doc.cells[1]["source"] == "print(totl)"


def test_proposals_past_the_runs_bound_are_refused_without_asking() -> None:
    doc = NotebookDocument(_notebook(*((f"c{n}", "code", f"x = {n}") for n in range(12))))
    asked: list[Any] = []
    deletes = [Call("delete_cell", {"cell_id": f"c{n}"}) for n in range(12)]
    _, events, _ = _run(
        doc,
        READ,
        Turn(*deletes),
        approver=CallbackApprover(lambda r: asked.append(r) or True),
        limits=NotebookLimits(max_proposals=5),
    )
    results = _by_name(events, "delete_cell")
    assert len(asked) == 5
    assert sum(1 for r in results if not r.is_error) == 5
    refused = [r for r in results if r.is_error]
    assert len(refused) == 7 and all("the most one run may make" in r.text for r in refused)
    assert len(doc.cells) == 7


def test_deleting_every_cell_spares_the_cell_the_run_is_in() -> None:
    doc = _doc()
    kit = notebook_tools(doc)
    kit.use(doc, protected="notes")
    agent = Agent(
        ScriptedModel(
            [
                READ,
                Turn(*(Call("delete_cell", {"cell_id": c}) for c in ("first", "broken", "notes"))),
                "ok",
            ]
        ),
        list(kit),
        approver=AutoApprove(),
    )
    result = agent.run_sync("delete every cell")
    texts = [r.text for m in result.messages for r in getattr(m, "results", ())]
    assert any("is the cell this run is in" in t for t in texts)
    assert [c["id"] for c in doc.cells] == ["notes"]


def test_undo_takes_back_a_runs_edits_and_keeps_what_the_person_changed_since() -> None:
    doc = _doc()
    kit, _, _ = _run(
        doc,
        READ,
        Turn(
            Call("edit_cell", {"cell_id": "broken", "source": "print(total)"}),
            Call("insert_cell", {"source": "total * 2", "after_cell_id": "broken"}),
        ),
        Turn(
            Call("delete_cell", {"cell_id": "notes"}),
            Call("move_cell", {"cell_id": "first", "after_cell_id": "broken"}),
        ),
    )
    assert [c["source"] for c in doc.cells] == ["print(total)", "total = 3", "total * 2"]
    doc.cells[2]["source"] = "total * 3"  # the person changes the new cell
    report = asyncio.run(kit.undo())
    assert [c["source"] for c in doc.cells] == ["total = 3", "print(totl)", "total * 3", "# Notes"]
    text = "\n".join(report.lines())
    assert len(report.undone) == 3 and len(report.kept) == 1
    assert "changed since" in text
    again = asyncio.run(kit.undo())
    assert not again  # nothing left to take back


def test_an_edited_acceptance_is_recorded_as_edited_and_the_model_reads_what_landed() -> None:
    doc = _doc()

    def decide(request: ApprovalRequest) -> Decision:
        return Decision(
            True, by="person", arguments={**request.input, "source": "print(total)  # mine"}
        )

    _, events, _ = _run(
        doc,
        READ,
        Turn(Call("edit_cell", {"cell_id": "broken", "source": "print(total)"})),
        approver=CallbackApprover(decide),
    )
    assert doc.cells[1]["source"] == "print(total)  # mine"
    [entry] = read_edit_record(doc.cells[1]["metadata"]["nbagent_edit"])
    assert entry.accepted == "edited"
    [result] = _by_name(events, "edit_cell")
    assert "# mine" in result.text


def test_reading_500_cells_stays_within_what_the_model_may_be_sent() -> None:
    cells = [(f"c{n}", "code", f"value_{n} = {n}\n" * 30) for n in range(500)]
    doc = NotebookDocument(_notebook(*cells))
    limits = NotebookLimits()
    _, events, _ = _run(doc, READ)
    [read] = _by_name(events, "read_notebook")
    assert len(read.text) <= limits.max_read_chars
    assert "[cell 1] id=c0" in read.text and "read_notebook with start=" in read.text
    assert read.text.count("```python") >= 20  # whole cells first, then the listing


def test_a_recorded_run_replays_offline_as_the_same_proposals(tmp_path: Any) -> None:
    from nbagent.recording import Recording, record, replay

    def proposals(generator: Any, doc: NotebookDocument) -> tuple[list[Any], list[str]]:
        asked: list[Any] = []

        def decide(request: ApprovalRequest) -> Decision:
            asked.append((request.tool_name, request.input))
            accept = request.tool_name == "edit_cell"
            return Decision(accept, None if accept else "not this one", by="person")

        kit = notebook_tools(doc)
        agent = Agent(generator, list(kit), approver=CallbackApprover(decide))
        kit.attach(agent)
        agent.run_sync("fix the error")
        return asked, [c["source"] for c in doc.cells]

    turns = [
        READ,
        Turn(Call("edit_cell", {"cell_id": "broken", "source": "print(total)"})),
        Turn(Call("insert_cell", {"source": "total * 2", "after_cell_id": "broken"})),
        "Fixed.",
    ]
    recorder = record(ScriptedModel(turns))
    first = proposals(recorder, _doc())
    path = tmp_path / "run.json"
    recorder.recording.save(path)
    again = proposals(replay(Recording.load(path)), _doc())  # no model: the recording plays
    assert again == first
    assert [name for name, _ in first[0]] == ["edit_cell", "insert_cell"]
    assert first[1] == ["total = 3", "print(total)", "# Notes"]


def test_a_10_mb_source_is_refused_in_one_sentence_and_nothing_changes() -> None:
    doc = _doc()
    before = doc.to_notebook()
    huge = "x = 1\n" * (10 * 1024 * 1024 // 6)
    _, events, _ = _run(doc, READ, Turn(Call("edit_cell", {"cell_id": "broken", "source": huge})))
    [refused] = _by_name(events, "edit_cell")
    assert refused.is_error and "nothing was run" in refused.text.lower()
    assert len(refused.text) < 2_000  # said, not echoed back
    assert doc.to_notebook() == before


@pytest.mark.parametrize("shared", [True, False], ids=["one-toolkit", "two-toolkits"])
def test_two_runs_proposing_edits_to_one_cell_never_overwrite_each_other(shared: bool) -> None:
    """A run's card waits while another run (a second %agent run, a served client) edits the
    same cell and lands first: accepting the first then says so and lands nothing."""
    doc = _doc()
    first_kit = notebook_tools(doc)
    second_kit = first_kit if shared else notebook_tools(doc)
    second = Agent(
        ScriptedModel(
            [READ, Turn(Call("edit_cell", {"cell_id": "broken", "source": "print(3)"})), "ok"]
        ),
        list(second_kit),
        approver=AutoApprove(),
    )
    second_kit.attach(second)

    async def decide(request: ApprovalRequest) -> Decision:
        await second.run("fix it too")  # lands while this card waits
        return Decision(True, by="person")

    first = Agent(
        ScriptedModel(
            [READ, Turn(Call("edit_cell", {"cell_id": "broken", "source": "print(total)"})), "ok"]
        ),
        list(first_kit),
        approver=CallbackApprover(decide),
    )
    first_kit.attach(first)
    events: list[Any] = []
    first.observe(lambda _run, event: events.append(event))
    first.run_sync("fix it")
    assert_history_valid(first.messages)
    assert_history_valid(second.messages)
    assert doc.cells[1]["source"] == "print(3)"  # the second run's edit, kept
    [result] = _by_name(events, "edit_cell")
    assert result.is_error and "changed after you read it" in result.text
    assert "print(3)" in result.text  # the model reads the cell as it is now
    entries = read_edit_record(doc.cells[1]["metadata"]["nbagent_edit"])
    assert len(entries) == 1  # only what landed is recorded


def test_rules_accept_and_reject_proposals_like_any_call_and_the_record_says_by_a_rule() -> None:
    from nbagent import RuleApprover, parse_rule

    doc = _doc()
    asked: list[Any] = []
    approver = RuleApprover(
        [parse_rule("allow edit_cell cell_id=broken"), parse_rule("deny delete_cell")],
        fallback=CallbackApprover(lambda r: asked.append(r.tool_name) or False),
    )
    _, events, _ = _run(
        doc,
        READ,
        Turn(
            Call("edit_cell", {"cell_id": "broken", "source": "print(total)"}),
            Call("delete_cell", {"cell_id": "notes"}),
            Call("edit_cell", {"cell_id": "first", "source": "total = 4"}),
        ),
        approver=approver,
    )
    assert [c["source"] for c in doc.cells] == ["total = 3", "print(total)", "# Notes"]
    assert asked == ["edit_cell"]  # only the edit no rule is about reached a person
    [entry] = read_edit_record(doc.cells[1]["metadata"]["nbagent_edit"])
    assert entry.accepted == "by a rule"
    denied = _by_name(events, "delete_cell")[0]
    assert denied.is_error and "rule" in denied.text
