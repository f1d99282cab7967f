"""An agent's ``session/request_permission`` answered by nbagent's approver, with the agent's
own options.

The request becomes the :class:`~nbagent.approvals.approval.ApprovalRequest` of its call (the
card the agent reported, or one made from what the request itself says), so the session's
rules answer it where they match (a deny rule first, then an allow rule or an "always"), and
otherwise the person does, on the approval bar. The decision then picks one of the options the
agent offered: an approval "always" its ``allow_always`` option, an approval its
``allow_once``, a denial its ``reject_once`` (or ``reject_always``). An approval for which the
agent offers no matching option is answered with a rejection, and the card says so: nbagent
never grants more than the person did. An ACP agent runs its call as it asked it, so edited
arguments cannot be approved: the edit form refuses them, and an approval that carries them
anyway is sent as a rejection.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ..approvals.approval import (
    ApprovalBinding,
    ApprovalRequest,
    Approver,
    Decision,
    arguments_hash,
)
from ..errors import ArgumentsError
from ..tools import ToolCall

__all__ = ["chosen_option", "decided_without_asking", "request_for"]


EDIT_REFUSED = (
    "an external agent runs its call as it asked it: its arguments cannot be edited here "
    "(deny it, and say what you want in the next prompt)"
)


def request_for(call: ToolCall, arguments: Any, title: str | None, run_id: str) -> ApprovalRequest:
    """The approval request of ``call`` (its ``arguments``: the agent's raw input)."""

    def unchanged(edited: Any) -> Any:
        if _same(edited, arguments):
            return arguments
        raise ArgumentsError(EDIT_REFUSED)

    return ApprovalRequest.for_call(call, arguments, title, run_id=run_id, checker=unchanged)


def _same(a: Any, b: Any) -> bool:
    try:
        return arguments_hash(a) == arguments_hash(b)
    except (TypeError, ValueError):
        return False


def decided_without_asking(approver: Approver, request: ApprovalRequest) -> Decision | None:
    """The decision a rule gives for ``request`` without asking anyone (a deny rule first, as
    the loop asks), or None."""
    for name in ("forbidden", "known_decision"):
        ask = getattr(approver, name, None)
        if callable(ask):
            decision = ask(request)
            if isinstance(decision, Decision):
                return decision
    return None


def bound(decision: Decision, request: ApprovalRequest) -> Decision:
    """``decision`` tied to the run, the call and its arguments (as the loop's are)."""
    try:
        digest = arguments_hash(request.input)
    except (TypeError, ValueError):
        digest = arguments_hash(request.call.arguments)
    binding = ApprovalBinding(request.run_id, request.call.id, digest)
    return dataclasses.replace(decision, binding=binding)


def chosen_option(
    decision: Decision, options: Sequence[Any], request: ApprovalRequest | None = None
) -> tuple[str | None, str]:
    """The id of the agent's option that says ``decision`` (None: answer "cancelled"), and a
    note for the person when it is not what they chose."""
    by_kind: dict[str, str] = {}
    for option in options:
        by_kind.setdefault(str(getattr(option, "kind", "")), str(option.option_id))
    edited = (
        decision.approved
        and decision.arguments is not None
        and request is not None
        and not _same(decision.arguments, request.input)
    )
    if edited:
        for kind in ("reject_once", "reject_always"):
            if kind in by_kind:
                return by_kind[kind], EDIT_REFUSED
        return None, EDIT_REFUSED
    if decision.approved:
        wanted = ("allow_always", "allow_once") if decision.always else ("allow_once",)
        for kind in wanted:
            if kind in by_kind:
                return by_kind[kind], ""
        refused = "the agent offered no way to allow this call only once, so it was refused"
        for kind in ("reject_once", "reject_always"):
            if kind in by_kind:
                return by_kind[kind], refused
        return None, refused
    for kind in ("reject_once", "reject_always"):
        if kind in by_kind:
            return by_kind[kind], ""
    return None, ""
