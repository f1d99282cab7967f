"""A helper agent's run inside the card of the call that runs it (``agent.as_tool``).

Each helper run (a :class:`~nbagent.events.HelperEvent`'s ``run_id``) gets a view of its own,
made like the caller's, in a collapsible section at the foot of the calling card: its text,
its calls and their cards, and its approvals (Approve / Deny in the nested card, answered by
the same approver). A helper of a helper nests once more, inside its own caller's view. The
nested views are driven and closed with the caller's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from ...events import HelperEvent

__all__ = ["NestedRuns"]


class NestedRuns:
    """The helper runs of one view, by run id; ``make(prompt)`` builds a view for one."""

    def __init__(self, make: Callable[[str], Any], card_of: Callable[[str], Any]) -> None:
        self._make = make
        self._card_of = card_of
        self.views: dict[str, Any] = {}
        self._boxes: list[widgets.Widget] = []

    def handle(self, event: HelperEvent) -> None:
        view = self.views.get(event.run_id)
        if view is None:
            card = self._card_of(event.call_id)
            if card is None:
                return
            view = self._make(f"(asked by the call to {event.tool_name})")
            view.stop.layout.display = "none"  # the caller's Stop stops it
            box = widgets.Accordion(children=[view.widget], selected_index=0)
            box.set_title(0, f"{event.tool_name}: its own run")
            box.add_class("nbagent-nested")
            card._add(box)
            self._boxes.append(box)
            self.views[event.run_id] = view
        view.handle(event.event)

    def tick(self) -> None:
        for view in self.views.values():
            if not view.finished:
                view.tick()

    def close(self) -> None:
        for view in self.views.values():
            view.close()

    def dispose(self) -> None:
        for view in self.views.values():
            view.dispose()
        for box in self._boxes:
            box.layout.close()  # its own layout model, made with it
            box.close()
