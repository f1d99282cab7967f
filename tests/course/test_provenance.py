"""The provenance record: what the notebook writes reads back, nbformat keeps it, and the strict
reader refuses what nbagent would not have written (a submitted notebook is untrusted)."""

from __future__ import annotations

import copy
from typing import Any

import nbformat
import pytest

from nbagent.course.provenance import (
    CallRecord,
    FollowUp,
    Provenance,
    ProvenanceError,
    SnippetRecord,
    StepRecord,
    follow_up_from_metadata,
    from_metadata,
    is_follow_up,
    sha256_digest,
)

SECRET = "sk-test-SECRET-4f9c2e7d1a"


def _record(**changes: Any) -> Provenance:
    values: dict[str, Any] = {
        "run_id": "run-3",
        "prompt": "sum the column",
        "model": "openai:gpt-4.1-mini",
        "provider": "openai",
        "mode": "live",
        "policy_digest": sha256_digest(b"[course]\n"),
        "policy_source": "nbagent-course.toml",
        "input_tokens": 120,
        "output_tokens": 30,
        "requests": 2,
        "cost_usd": 0.0012,
        "seconds": 1.25,
        "calls": (CallRecord("add", "approved", "done"), CallRecord("rm", "denied", "denied")),
        "snippets": (SnippetRecord("x = 1\n"),),
        "output_digest": sha256_digest("42"),
    }
    values.update(changes)
    return Provenance(**values)


def test_a_record_reads_back_as_written() -> None:
    record = _record()
    data = record.to_metadata()
    assert data["version"] == 1
    assert data["tokens"] == {"input": 120, "output": 30}
    assert data["calls"][1] == {"tool": "rm", "decision": "denied", "status": "denied"}
    back = from_metadata(data)
    assert back == _record(calls_total=2, snippets_total=1)


def test_nbformat_validates_a_saved_notebook_with_the_record(tmp_path: Any) -> None:
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("%agent sum the column")
    output = nbformat.v4.new_output(
        "display_data", data={"text/plain": "42"}, metadata={"nbagent": _record().to_metadata()}
    )
    cell.outputs = [output]
    cell.metadata["nbagent"] = _record().to_metadata()
    follow = nbformat.v4.new_code_cell("%agent cells")
    follow.outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={"text/plain": "cells"},
            metadata={
                "nbagent": FollowUp("cells", ("run-3",), sha256_digest("x = 1\n")).to_metadata()
            },
        )
    ]
    nb.cells = [cell, follow]
    path = tmp_path / "saved.ipynb"
    nbformat.write(nb, path)
    again = nbformat.read(path, as_version=4)
    nbformat.validate(again)
    assert from_metadata(again.cells[0].outputs[0].metadata["nbagent"]).run_id == "run-3"
    assert is_follow_up(again.cells[1].outputs[0].metadata["nbagent"])
    assert follow_up_from_metadata(again.cells[1].outputs[0].metadata["nbagent"]).runs == ("run-3",)


def test_no_secret_is_kept_and_every_value_is_bounded() -> None:
    record = _record(
        prompt=f"use {SECRET} and " + "x" * 5000,
        snippets=tuple(SnippetRecord(f"key = '{SECRET}'\n" + "y" * 9000) for _ in range(250)),
        calls=tuple(CallRecord("t" * 900, "auto", "done") for _ in range(300)),
        refused=f"refused {SECRET}",
    )
    data = record.to_metadata()
    assert SECRET not in repr(data)
    assert len(data["prompt"]) == 500
    assert len(data["calls"]) == 200 and data["calls_total"] == 300
    assert len(data["snippets"]) == 200 and data["snippets_total"] == 250
    assert all(len(s["code"]) <= 2000 for s in data["snippets"])
    assert all(len(c["tool"]) <= 200 for c in data["calls"])
    from_metadata(data)


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (lambda d: d.update(extra=1), ""),
        (lambda d: d.pop("model"), ""),
        (lambda d: d.update(version=2), "version"),
        (lambda d: d.update(version=True), "version"),
        (lambda d: d.update(mode="cloud"), "mode"),
        (lambda d: d.update(prompt="p" * 501), "prompt"),
        (lambda d: d.update(requests=-1), "requests"),
        (lambda d: d.update(requests=True), "requests"),
        (lambda d: d.update(cost_usd=float("nan")), "cost_usd"),
        (lambda d: d.update(seconds="1"), "seconds"),
        (lambda d: d.update(ai_off=0), "ai_off"),
        (lambda d: d.update(policy_digest="sha256:XYZ"), "policy_digest"),
        (lambda d: d.update(output_digest="md5:" + "0" * 64), "output_digest"),
        (lambda d: d["tokens"].update(cached=3), "tokens"),
        (lambda d: d["calls"][0].update(decision="maybe"), "calls[0].decision"),
        (lambda d: d.update(calls=[{"tool": "a"}]), "calls[0]"),
        (lambda d: d.update(calls=[d["calls"][0]] * 201), "calls"),
        (lambda d: d.update(calls_total=0), "calls_total"),
        (lambda d: d.update(snippets="x = 1"), "snippets"),
        (lambda d: d.update(tokens=[1, 2]), "tokens"),
    ],
)
def test_the_reader_refuses_what_nbagent_does_not_write(change: Any, key: str) -> None:
    data = copy.deepcopy(_record().to_metadata())
    change(data)
    with pytest.raises(ProvenanceError) as caught:
        from_metadata(data)
    assert caught.value.key == key
    assert str(caught.value).startswith("nbagent metadata:")


@pytest.mark.parametrize("value", [None, "run", 3, [], {"version": 1}])
def test_the_reader_refuses_what_is_not_a_record(value: object) -> None:
    with pytest.raises(ProvenanceError):
        from_metadata(value)
    with pytest.raises(ProvenanceError):
        follow_up_from_metadata(value)


def test_a_follow_up_is_strict_too() -> None:
    data = FollowUp("undone", ("run-1", "run-2")).to_metadata()
    assert data == {
        "version": 1,
        "action": "undone",
        "runs": ["run-1", "run-2"],
        "code_digest": None,
        "steps": [],
        "policy_digest": None,
    }
    with pytest.raises(ProvenanceError, match="action"):
        follow_up_from_metadata({**data, "action": "deleted"})
    with pytest.raises(ProvenanceError, match="runs"):
        follow_up_from_metadata({**data, "runs": "run-1"})


def test_a_cells_follow_up_keeps_each_step_and_the_policy() -> None:
    steps = (StepRecord("run-1", 1), StepRecord("run-1", 2, False, "undone"))
    policy = sha256_digest(b"[course]\n")
    record = FollowUp("cells", ("run-1",), sha256_digest("x = 1\n"), steps, policy)
    data = record.to_metadata()
    assert data["steps"][1] == {"run_id": "run-1", "step": 2, "kept": False, "left_out": "undone"}
    assert follow_up_from_metadata(data) == record
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1", metadata={"nbagent": data})]
    nbformat.validate(nb)
    with pytest.raises(ProvenanceError, match=r"steps\[0\]\.kept"):
        follow_up_from_metadata({**data, "steps": [{**data["steps"][0], "kept": "yes"}]})
    with pytest.raises(ProvenanceError, match=r"steps\[0\]"):
        follow_up_from_metadata({**data, "steps": [{**data["steps"][0], "code": "rm -rf /"}]})
    with pytest.raises(ProvenanceError, match="policy_digest"):
        follow_up_from_metadata({**data, "policy_digest": "md5:00"})
    with pytest.raises(ProvenanceError, match="steps"):
        follow_up_from_metadata({**data, "steps": [data["steps"][0]] * 201})


def test_a_refusal_names_its_rule_and_time_and_older_records_still_read() -> None:
    record = _record(refused="AI is off here.", ai_off=True, rule="ai", at="2026-03-02T14:05:09Z")
    data = record.to_metadata()
    assert (data["rule"], data["at"]) == ("ai", "2026-03-02T14:05:09Z")
    assert from_metadata(data).rule == "ai"
    for bad in ("yesterday", "2026-03-02 14:05:09", 1700000000):
        with pytest.raises(ProvenanceError, match="at"):
            from_metadata({**data, "at": bad})
    older = {k: v for k, v in data.items() if k not in ("rule", "at")}  # an earlier nbagent's
    assert from_metadata(older).rule is None and from_metadata(older).at is None
    older_follow_up = {"version": 1, "action": "undone", "runs": ["run-1"], "code_digest": None}
    assert follow_up_from_metadata(older_follow_up).steps == ()
