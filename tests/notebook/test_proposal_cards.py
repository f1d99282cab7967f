"""Proposal cards in the run view, in-process on a recording comm: their words, Accept all while
several wait, and a run with many proposals folding the oldest ended cards into one line."""

from __future__ import annotations

from typing import Any

from nbagent.approvals.approval import ApprovalRequest, InteractiveApprover
from nbagent.content import error_result, text_result
from nbagent.document._descriptions import TITLES
from nbagent.events import ApprovalRequested, ToolCallReady, ToolCallStarted, ToolFinished
from nbagent.notebook.live.fold import KEEP
from nbagent.notebook.live.view import RunView
from nbagent.tools import ToolCall

from .conftest import Wire


def _call(view: RunView, n: int, *, error: bool = False) -> None:
    call = ToolCall(f"c{n}", "delete_cell", f'{{"cell_id": "x{n}"}}')
    view.handle(ToolCallStarted(1, call.id, call.name, TITLES["delete_cell"]))
    view.handle(ToolCallReady(1, call, {"cell_id": f"x{n}"}))
    result = error_result("refused") if error else text_result("Deleted")
    view.handle(ToolFinished(call, result, "error" if error else "done", 0.01))


def test_a_run_with_many_proposals_keeps_the_latest_cards_and_counts_the_rest(wire: Wire) -> None:
    view = RunView("delete every cell", clock=wire.clock)
    for n in range(KEEP + 30):
        _call(view, n, error=n % 2 == 1)
    assert len(view.cards) == KEEP
    line = view.proposals.line
    assert line is not None and line in view.body.children
    assert "30 earlier proposals folded (15 accepted, 15 refused)" in line.value
    assert "c0" not in view.cards and f"c{KEEP + 29}" in view.cards
    view.close()
    view.dispose()


def test_proposal_bars_read_accept_reject_and_offer_accept_all_while_several_wait(
    wire: Wire,
) -> None:
    approver = InteractiveApprover()
    view = RunView("fix it", approver=approver, clock=wire.clock)
    requests: list[ApprovalRequest] = []
    for n in range(3):
        call = ToolCall(f"c{n}", "edit_cell", "{}")
        view.handle(ToolCallStarted(1, call.id, call.name, TITLES["edit_cell"]))
        view.handle(ToolCallReady(1, call, {"cell_id": f"x{n}", "source": "y"}))
        request = ApprovalRequest(call, {"cell_id": f"x{n}", "source": "y"}, run_id="run-1")
        requests.append(request)
        view.handle(ApprovalRequested(request))
    bars: list[Any] = [view.cards[f"c{n}"].approval for n in range(3)]
    assert [b.approve.description for b in bars] == ["Accept"] * 3
    assert bars[0].deny.description == "Reject" and bars[0].always.description == "Always accept"
    assert all(b.accept_all.layout.display is None for b in bars)
    assert bars[0].accept_all.description == "Accept all (3)"
    decided: list[Any] = []
    for bar in bars:
        bar._decide = lambda decision, bar=bar: decided.append(decision) or True
    bars[1].accept_all.click()
    assert len(decided) == 3 and all(d.approved and d.by == "person" for d in decided)
    assert all(b.closed for b in bars)
    view.close()
    view.dispose()
