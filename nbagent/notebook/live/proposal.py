"""How a proposal's card reads: Accept / Reject / Edit, and Accept all, on the approval bar.

A proposal is a call that needs approval, with a preview (the per-cell diff): the card and its
bar are the ones every call gets (:mod:`..card`, :mod:`..approval_bar`), with the words of a
review (Accept, Reject, Always accept) and one more button while several proposals of a view
wait at once: **Accept all**, which accepts each of them as proposed, the way the person would
one by one. A rule (``%agent allow edit_cell``) accepts them as it accepts any call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...document._descriptions import TITLES
from ...document.toolkit import PROPOSALS

__all__ = ["PROPOSAL_WORDS", "Words", "accept_all", "show_accept_all", "words_for"]


@dataclass(frozen=True)
class Words:
    """The labels of an approval bar (and their tooltips)."""

    approve: str = "Approve"
    approve_tip: str = ""
    deny: str = "Deny"
    deny_tip: str = ""
    always: str = "Always allow"
    always_tip: str = ""
    reason: str = "Reason for the model (optional)"
    proposal: bool = False


PROPOSAL_WORDS = Words(
    approve="Accept",
    approve_tip="Apply this change to the notebook (it lands in the open notebook)",
    deny="Reject",
    deny_tip="Leave the notebook as it is; the agent reads your reason",
    always="Always accept",
    always_tip="Accept, and accept this tool's proposals without asking for the rest of this "
    "session (a rule you can remove: %agent rules)",
    reason="Why not? (the agent reads it)",
    proposal=True,
)


def words_for(name: str, title: str) -> Words | None:
    """The words of a call's bar when it is a notebook proposal (its tool's name and title are
    the notebook toolkit's), else None."""
    if name in PROPOSALS and title == TITLES.get(name):
        return PROPOSAL_WORDS
    return None


def accept_all(cards: Callable[[], Any]) -> Callable[[], int]:
    """What **Accept all** does in one view: accept, as proposed, every proposal whose bar is
    still open (``cards()``: the view's cards). Returns how many it accepted."""
    from ...approvals.approval import Decision

    def run() -> int:
        accepted = 0
        for card in list(cards()):
            bar = getattr(card, "approval", None)
            words = getattr(bar, "words", None)
            if bar is None or bar.closed or words is None or not words.proposal:
                continue
            if bar.decision is None and bar.click(Decision(True, None, by="person")):
                accepted += 1
        return accepted

    return run


def show_accept_all(cards: Any) -> None:
    """Show **Accept all (N)** on each open proposal bar of a view while two or more wait."""
    bars = [
        card.approval
        for card in cards
        if getattr(card, "approval", None) is not None
        and not card.approval.closed
        and card.approval.words is not None
        and card.approval.words.proposal
    ]
    for bar in bars:
        bar.accept_all.description = f"Accept all ({len(bars)})"
        bar.accept_all.layout.display = None if len(bars) > 1 else "none"
