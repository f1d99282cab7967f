"""ApprovalBar: Approve, Deny (with a reason the model reads) and Always allow, for one call.

A click hands one :class:`~nbagent.approval.Decision` to ``decide`` (the approver's thread-safe
``resolve``). The first click wins: the bar disables itself, and later clicks — a double click,
a click that arrives after the run ended — do nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from ..approval import ApprovalRequest, Decision

__all__ = ["ApprovalBar"]


class ApprovalBar:
    """Buttons for one approval request; ``decide`` returns True when the decision counted."""

    def __init__(self, request: ApprovalRequest, decide: Callable[[Decision], bool]) -> None:
        self.request = request
        self._decide = decide
        self._lock = threading.Lock()
        self.decision: Decision | None = None
        self.closed = False
        name = request.call.name
        self.approve = widgets.Button(
            description="Approve",
            layout=widgets.Layout(width="auto", min_width="fit-content"),
            button_style="success",
            icon="check",
            tooltip=f"Run this call to {name}",
        )
        self.deny = widgets.Button(
            description="Deny",
            layout=widgets.Layout(width="auto", min_width="fit-content"),
            button_style="danger",
            icon="times",
            tooltip="Do not run it; the model reads the reason",
        )
        self.reason = widgets.Text(
            placeholder="Reason for the model (optional)",
            layout=widgets.Layout(
                width="auto", min_width="12em", flex="1 1 12em", max_width="24em"
            ),
        )
        self.always = widgets.Button(
            description="Always allow",
            layout=widgets.Layout(width="auto", min_width="fit-content"),
            icon="check-double",
            tooltip=f"Approve, and run {name} without asking for the rest of this session",
        )
        self.approve.on_click(self._on_approve)
        self.deny.on_click(self._on_deny)
        self.always.on_click(self._on_always)
        self.widget = widgets.HBox(
            [self.approve, self.deny, self.reason, self.always],
            layout=widgets.Layout(flex_flow="row wrap", gap="4px"),
        )

    def _on_approve(self, _button: Any) -> None:
        self.click(Decision(True, None, by="person"))

    def _on_deny(self, _button: Any) -> None:
        reason = self.reason.value.strip() or None
        self.click(Decision(False, reason, by="person"))

    def _on_always(self, _button: Any) -> None:
        self.click(Decision(True, None, always=True, by="person"))

    def click(self, decision: Decision) -> bool:
        """Give ``decision`` unless one was given already or the bar is closed."""
        with self._lock:
            if self.closed or self.decision is not None:
                return False
            self.decision = decision
        accepted = self._decide(decision)
        self.close(hide=True)
        return accepted

    def all_widgets(self) -> list[widgets.Widget]:
        """Every widget of the bar."""
        return [self.widget, self.approve, self.deny, self.reason, self.always]

    def close(self, *, hide: bool = False) -> None:
        """Disable every control (after a decision, or when the run ended); ``hide`` folds the
        bar away once the card's header says what was decided."""
        with self._lock:
            self.closed = True
        for control in (self.approve, self.deny, self.reason, self.always):
            control.disabled = True
        if hide:
            self.widget.layout.display = "none"
