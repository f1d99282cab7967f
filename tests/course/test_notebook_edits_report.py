"""The class report counts the cells the agent's accepted proposals made or edited (their own
``nbagent_edit`` record, written by the notebook tools), those changed since, and flags a record
nbagent would not have written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nbagent import Agent
from nbagent.approvals.approval import AutoApprove
from nbagent.course import notebook_report, read_class
from nbagent.document import NotebookDocument, notebook_tools
from nbagent.models import Call, ScriptedModel, Turn


def _student(folder: Path, *, change_after: bool, tamper: bool) -> Path:
    doc = NotebookDocument(
        {
            "nbformat": 4,
            "nbformat_minor": 5,
            "metadata": {},
            "cells": [
                {"id": "a", "cell_type": "code", "metadata": {}, "source": "x = 1", "outputs": []},
                {
                    "id": "b",
                    "cell_type": "code",
                    "metadata": {},
                    "source": "prnt(x)",
                    "outputs": [],
                },
            ],
        }
    )
    kit = notebook_tools(doc)
    turns = [
        Turn(Call("read_notebook", {})),
        Turn(
            Call("edit_cell", {"cell_id": "b", "source": "print(x)"}),
            Call("insert_cell", {"source": "x * 2", "after_cell_id": "b"}),
        ),
        "done",
    ]
    agent = Agent(ScriptedModel(turns), list(kit), approver=AutoApprove())
    kit.attach(agent)
    agent.run_sync("fix it")
    if change_after:
        doc.cells[1]["source"] = "print(x)  # my own"
    if tamper:
        doc.cells[0]["metadata"]["nbagent_edit"] = {"version": 1, "edits": [{"action": "edited"}]}
    folder.mkdir(parents=True)
    return Path(doc.save(folder / "homework.ipynb"))


def test_the_report_counts_cells_the_agent_made_and_edited(tmp_path: Path) -> None:
    root = tmp_path / "submissions"
    _student(root / "ann", change_after=False, tamper=False)
    _student(root / "bob", change_after=True, tamper=True)
    rows: dict[str, Any] = {r.student: r for r in read_class([root])}
    ann, bob = rows["ann"], rows["bob"]
    assert (ann.notebook_inserted, ann.notebook_edited, ann.notebook_changed) == (1, 1, 0)
    assert (bob.notebook_inserted, bob.notebook_edited, bob.notebook_changed) == (1, 1, 1)
    assert "metadata_tampered" in bob.flag_list and not ann.flag_list
    report = notebook_report(root / "bob" / "homework.ipynb")
    assert "the agent's accepted proposals made 1 cell(s) and edited 1, 1 changed since" in str(
        report
    )
    saved = json.loads((root / "ann" / "homework.ipynb").read_text())
    entry = saved["cells"][1]["metadata"]["nbagent_edit"]["edits"][-1]
    assert entry["accepted"] == "by policy" and entry["tool"] == "edit_cell"
