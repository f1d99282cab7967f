"""A run that makes many proposals keeps the cards of its latest ones; the rest fold into a line.

A run may propose up to ``NotebookLimits.max_proposals`` changes (more are refused before anyone
is asked), and a model that loops can fill the cell with cards. As ``%agent serve`` does for a
long session, the live view keeps the cards of the latest :data:`KEEP` proposals that ended
(a proposal still waiting for Accept or Reject is never folded), closes the older ones'
widgets, and one line, where the first of them was, counts them by outcome. The run's record
keeps every call: its saved output and ``%agent report`` show them all.
"""

from __future__ import annotations

import html
from collections import Counter
from typing import Any

from ..shown.render import close_widgets
from .proposal import words_for

__all__ = ["KEEP", "ProposalFold"]

#: Cards of ended proposals a live view keeps.
KEEP = 50


def _outcome(record: Any) -> str:
    if record.status == "denied":
        return "rejected"
    if record.is_error:
        return "refused"
    return "accepted"


class ProposalFold:
    """The folding of one run view's proposal cards (see the module)."""

    def __init__(self, view: Any) -> None:
        self.view = view
        self.counts: Counter[str] = Counter()
        self.line: Any = None

    def after(self) -> None:
        """A call ended: fold the oldest ended proposal cards past :data:`KEEP`."""
        view = self.view
        ended = [
            (call_id, card)
            for call_id, card in view.cards.items()
            if not card.record.open and words_for(card.record.name, card.record.title or "")
        ]
        extra = len(ended) - KEEP
        if extra <= 0:
            return
        import ipywidgets as widgets

        gone = ended[:extra]
        leaving = {id(card.widget) for _, card in gone}
        closing: list[Any] = []
        for call_id, card in gone:
            self.counts[_outcome(card.record)] += 1
            closing += card.all_widgets()
            view._streams = [s for s in view._streams if s is not card.arguments]
            del view.cards[call_id]
        if self.line is None:
            self.line = widgets.HTML(layout=view.shared.layout, style=view.shared.html_style)
            view._notes.append(self.line)
        children = list(view.body.children)
        first = next((i for i, w in enumerate(children) if id(w) in leaving), len(children))
        kept = [w for w in children if id(w) not in leaving and w is not self.line]
        kept.insert(min(first, len(kept)), self.line)
        view.body.children = tuple(kept)
        total = sum(self.counts.values())
        how = ", ".join(f"{n} {word}" for word, n in sorted(self.counts.items()))
        said = (
            f"{total:,} earlier proposals folded ({how}): the cell keeps the cards of the latest "
            f"{KEEP}; every call is in this run's saved output and %agent report"
        )
        self.line.value = f'<div style="font-size:0.85em;opacity:0.7">{html.escape(said)}</div>'
        close_widgets(closing, spare=(view.shared.layout, view.shared.html_style))
