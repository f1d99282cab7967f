"""ApprovalBar: Approve, Deny (with a reason the model reads), Always allow and Edit, for one call.

A click hands one :class:`~nbagent.approvals.approval.Decision` to ``decide`` (the approver's
thread-safe ``resolve``). With the edit form open, Approve and Always allow carry the edited
arguments — after checking them against the tool's schema: an edit that does not fit says why inline
and nothing is decided, so the person can fix it. The first decision that counts wins: the bar
disables itself, and later clicks — a double click, a click after Stop, a click that arrives
after the run ended — do nothing but say so. When the tool has a preview, **Preview edit** (shown
while editing) checks the edit the same way and, if it fits, asks the loop to preview it.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from ...approvals.approval import ApprovalRequest, Decision
from ...errors import ArgumentsError
from ..shown.render import STATUS_COLORS
from .edit_form import EditForm, FormError

__all__ = ["ApprovalBar"]


def _auto() -> widgets.Layout:
    # one Layout per button: the run view closes each widget's layout with it
    return widgets.Layout(width="auto", min_width="fit-content")


class ApprovalBar:
    """Buttons for one approval request; ``decide`` returns True when the decision counted."""

    def __init__(
        self,
        request: ApprovalRequest,
        decide: Callable[[Decision], bool],
        on_edit: Callable[[], None] | None = None,
        on_preview_edit: Callable[[int, Any], None] | None = None,
        words: Any = None,
        accept_all: Callable[[], int] | None = None,
    ) -> None:
        #: The labels (``.editing.card.Words``; None: Approve / Deny / Always allow).
        self.words = words
        self.request = request
        self._decide = decide
        self._on_edit_shown = on_edit  # told when the edit form opens or closes
        self._on_preview_edit = on_preview_edit  # told (revision, arguments) of each edit preview
        self._lock = threading.Lock()
        self.decision: Decision | None = None
        self.closed = False
        self.form: EditForm | None = None
        name = request.call.name
        self.approve = widgets.Button(
            description="Approve",
            layout=_auto(),
            button_style="success",
            icon="check",
            tooltip=f"Run this call to {name}",
        )
        self.deny = widgets.Button(
            description="Deny",
            layout=_auto(),
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
            layout=_auto(),
            icon="check-double",
            tooltip=f"Approve, and run {name} without asking for the rest of this session "
            "(a rule you can remove: %agent rules)",
        )
        if words is not None:  # a notebook proposal reads as a review (see .editing.card)
            self.approve.description, self.approve.tooltip = words.approve, words.approve_tip
            self.deny.description, self.deny.tooltip = words.deny, words.deny_tip
            self.always.description, self.always.tooltip = words.always, words.always_tip
            self.reason.placeholder = words.reason
        #: Accept all (a notebook proposal's bar, shown while others wait too).
        self.accept_all = widgets.Button(
            description="Accept all",
            layout=widgets.Layout(width="auto", min_width="fit-content", display="none"),
            icon="check-double",
            button_style="success",
            tooltip="Accept every proposal of this run that waits now, as proposed",
        )
        if accept_all is not None:
            self.accept_all.on_click(lambda _button: accept_all())
        self.edit = widgets.Button(
            description="Edit",
            layout=_auto(),
            icon="pencil",
            tooltip="Change the arguments before approving",
        )
        self.preview_edit = widgets.Button(
            description="Preview edit",
            layout=widgets.Layout(width="auto", min_width="fit-content", display="none"),
            icon="eye",
            tooltip="Show what the call would do with your edited arguments (nothing runs)",
        )
        self.notice = widgets.HTML(value="", layout=widgets.Layout(display="none"))
        self.preview_edit.on_click(self._on_preview_edit_click)
        self.approve.on_click(self._on_approve)
        self.deny.on_click(self._on_deny)
        self.always.on_click(self._on_always)
        self.edit.on_click(self._on_edit)
        self.buttons = widgets.HBox(
            [
                self.approve,
                self.deny,
                self.reason,
                self.always,
                self.accept_all,
                self.edit,
                self.preview_edit,
            ],
            layout=widgets.Layout(flex_flow="row wrap"),  # buttons keep their margins
        )
        self.widget = widgets.VBox([self.buttons, self.notice])
        self.widget.add_class("nbagent-approval")

    # --- clicks -----------------------------------------------------------------------------

    def _on_approve(self, _button: Any) -> None:
        self._approve(always=False)

    def _on_always(self, _button: Any) -> None:
        self._approve(always=True)

    def _on_deny(self, _button: Any) -> None:
        reason = self.reason.value.strip() or None
        self.click(Decision(False, reason, by="person"))

    def _on_edit(self, _button: Any) -> None:
        if self.closed:
            return
        if self.form is None:
            self.form = EditForm(self.request.schema, self.request.input)
            self.widget.children = (self.buttons, self.form.widget, self.notice)
            self.edit.description = "Cancel edit"
            self.edit.icon = "undo"
        else:
            shown = self.form.widget.layout.display != "none"
            self.form.widget.layout.display = "none" if shown else None
            self.edit.description = "Edit" if shown else "Cancel edit"
            self.edit.icon = "pencil" if shown else "undo"
        if self.request.previews is not None and self._on_preview_edit is not None:
            self.preview_edit.layout.display = None if self._editing() else "none"
        if self._on_edit_shown is not None:
            self._on_edit_shown()

    def editing(self) -> bool:
        """Whether the edit form is open (Approve then carries its arguments)."""
        return self._editing()

    def _editing(self) -> bool:
        return self.form is not None and self.form.widget.layout.display != "none"

    def _checked_edit(self, check: Callable[[Any], Any]) -> tuple[bool, Any]:
        """``check(the form's value)``, or (False, None) after showing why it does not fit."""
        assert self.form is not None
        try:
            value = check(self.form.value())
        except FormError as exc:
            self.form.show_error([str(exc)])
            return False, None
        except ArgumentsError as exc:
            lines = [f"{where or '/'}: {what}" for where, what in exc.violations]
            self.form.show_error(lines or [str(exc)])
            return False, None
        self.form.show_error([])
        return True, value

    def _approve(self, *, always: bool) -> None:
        arguments = None
        if self._editing():
            ok, arguments = self._checked_edit(self.request.check_arguments)
            if not ok:
                return
        self.click(Decision(True, None, always=always, by="person", arguments=arguments))

    def _on_preview_edit_click(self, _button: Any) -> None:
        """Preview the edit as it stands, once it passes the checks an approval would make."""
        previews = self.request.previews
        if self.closed or previews is None or not self._editing():
            return
        ok, checked = self._checked_edit(self.request.check_arguments)
        if not ok:
            return  # nothing is previewed for arguments that would be refused
        revision = previews.ask(checked)
        if revision is None:
            self._say("This call was already answered: there is nothing left to preview.")
            return
        if self._on_preview_edit is not None:
            self._on_preview_edit(revision, checked)

    def click(self, decision: Decision) -> bool:
        """Give ``decision`` unless one was given already or the bar is closed."""
        with self._lock:
            if self.closed or self.decision is not None:
                late = self.closed and self.decision is None
                if late:
                    self._say(
                        "This call was already answered (the run stopped or ended): "
                        "nothing was run for this click."
                    )
                return False
            self.decision = decision
        accepted = self._decide(decision)
        if not accepted:
            self._say(
                "Too late: this call was already answered (the run stopped or ended), "
                "so nothing was run for this click."
            )
            self.close()
            return False
        self.close(hide=True)
        return True

    def _say(self, text: str) -> None:
        style = f"color:{STATUS_COLORS['denied']};font-size:0.9em"
        self.notice.value = f'<span style="{style}">{html.escape(text)}</span>'
        self.notice.layout.display = None

    # --- the end ----------------------------------------------------------------------------

    def all_widgets(self) -> list[widgets.Widget]:
        """Every widget of the bar."""
        made = [
            self.widget,
            self.buttons,
            self.notice,
            self.approve,
            self.deny,
            self.reason,
            self.always,
            self.edit,
            self.preview_edit,
            self.accept_all,
        ]
        if self.form is not None:
            made += self.form.all_widgets()
        return made

    def close(self, *, hide: bool = False) -> None:
        """Disable every control (after a decision, or when the run ended); ``hide`` folds the
        bar away once the card's header says what was decided."""
        with self._lock:
            self.closed = True
        controls = (
            self.approve,
            self.deny,
            self.reason,
            self.always,
            self.accept_all,
            self.edit,
            self.preview_edit,
        )
        for control in controls:
            control.disabled = True
        if self.form is not None:
            self.form.disable()
        if hide:
            self.widget.layout.display = "none"
