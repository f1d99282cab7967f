"""The course policy on the request path: every model request of this kernel is judged here.

The notebook's session installs one :class:`CourseGate` in :mod:`nbagent._gates` when it is
made, and the loop asks it before every model request it sends, whatever route led there:
``%agent`` and ``%%agent``, ``%agent map``'s rows, a fork, the model a person switches to at
a step-mode pause, a helper agent's run, a model set from Python
(``nbagent.current_session().set_model(...)``), an :class:`~nbagent.Agent` built in a cell. It
reads the policy in force (re-read when the file changed), judges the request with the same
:func:`~.coursegate.check` the magics ask before they plan a run, and refuses with a
:class:`~.coursegate.CourseRefusal` (one sentence naming the rule and the file; nothing is
sent). It also keeps the account the budgets are held to: each request is counted against the
kernel session and the notebook when it is let go (so parallel map rows cannot all take the
last request) and settled with its tokens and cost when its answer ended, and against its run
(a helper's requests count as its caller's).

A route that wants the totals of the requests made under it (``%agent map``, for its record)
opens a :func:`tally`: every request made in that context, in its tasks and its helpers', is
added to it.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ... import _gates
from ..._prices import cost_usd, usd_text
from ...course.policy import describe_value
from .coursegate import (
    Asked,
    CourseRefusal,
    approves_everything,
    check,
    check_price,
    current,
    refuse_live,
)
from .coursereach import reach_of
from .courserecord import Spent, count_request

if TYPE_CHECKING:
    from ...generation import Usage
    from ..core.session import Session

__all__ = ["CourseGate", "Tally", "govern", "tally"]

#: Runs (and helpers' callers) the gate remembers for the run budget, the newest first kept.
_KEEP_RUNS = 4096


@dataclass
class Tally:
    """What the requests made under one route spent: the runs that asked (a helper counts as
    its caller), tokens, requests, cost (``unpriced``: a request whose price is unknown), the
    models reached and how, and the first refusal."""

    runs: set[str] = field(default_factory=set)
    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    usd: float = 0.0
    unpriced: bool = False
    models: dict[str, None] = field(default_factory=dict)
    kinds: dict[str, None] = field(default_factory=dict)
    refused: CourseRefusal | None = None
    refusals: int = 0


_tally: contextvars.ContextVar[Tally | None] = contextvars.ContextVar(
    "nbagent_course_tally", default=None
)


@contextlib.contextmanager
def tally(found: Tally | None = None) -> Iterator[Tally]:
    """Count every request made in this context (and in the tasks it starts) in ``found`` (a
    new Tally by default)."""
    found = found if found is not None else Tally()
    token = _tally.set(found)
    try:
        yield found
    finally:
        _tally.reset(token)


class CourseGate:
    """The course policy's gate for one session (see the module)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._lock = threading.Lock()
        self._callers: OrderedDict[str, str] = OrderedDict()  # helper's run -> its caller's
        self._runs: OrderedDict[str, Spent] = OrderedDict()  # a run (with its helpers) spent

    def _root(self, asked: _gates.RequestAsked) -> str:
        """The run a request counts against: a helper's caller (its caller's, …)."""
        if asked.helper_of is not None:
            self._callers[asked.run_id] = asked.helper_of[0]
            while len(self._callers) > _KEEP_RUNS:
                self._callers.popitem(last=False)
        run = asked.run_id
        for _ in range(64):
            caller = self._callers.get(run)
            if caller is None:
                break
            run = caller
        return run

    def _offers_kernel_tools(self, asked: _gates.RequestAsked) -> bool:
        kit = self.session.kernel
        return kit is not None and any(asked.tools.get(t.name) is t for t in kit)

    def _offers_notebook_tools(self, asked: _gates.RequestAsked) -> bool:
        kit = self.session.notebook
        return kit is not None and any(asked.tools.get(t.name) is t for t in kit)

    def admit(self, asked: _gates.RequestAsked) -> None:
        session = self.session
        course = current(session.shell)
        reach = reach_of(asked.generator)
        counted = _tally.get()
        with self._lock:
            root = self._root(asked)
            try:
                if course.policy is not None or course.error is not None:
                    auto = approves_everything(asked.approver)
                    kernel = self._offers_kernel_tools(asked)
                    notebook = self._offers_notebook_tools(asked)
                    granted = check(
                        session, course, Asked(reach, auto, "", kernel, notebook=notebook)
                    )
                    if granted.replay_only and reach.may_reach_a_server:
                        raise refuse_live(course, reach)
                    if reach.may_reach_a_server:
                        check_price(course, asked.generator, reach.model or reach.named)
                    self._run_budget(course, root)
            except CourseRefusal as refusal:
                if counted is not None:
                    counted.refusals += 1
                    counted.refused = counted.refused or refusal
                raise
            count_request(session, course, None, 1, 0.0)  # taken now: settled when it ends
            self._spent(root).add(0, 1, 0.0)
            if counted is not None:
                counted.runs.add(root)
                counted.requests += 1
                counted.kinds[reach.kind] = None
                if reach.model:
                    counted.models[reach.model] = None

    def settle(self, asked: _gates.RequestAsked, usage: Usage, requests: int) -> None:
        session = self.session
        course = current(session.shell)
        usd = cost_usd(asked.generator, usage)
        retries = max(0, requests - 1)  # the request itself was counted when it was let go
        with self._lock:
            count_request(session, course, usage, retries, usd)
            self._spent(self._root(asked)).add(usage.total_tokens, retries, usd)
        counted = _tally.get()
        if counted is not None:
            counted.input_tokens += usage.input_tokens
            counted.output_tokens += usage.output_tokens
            counted.requests += retries
            if usd is None:
                counted.unpriced = True
            else:
                counted.usd += usd

    def _spent(self, root: str) -> Spent:
        spent = self._runs.get(root)
        if spent is None:
            spent = self._runs[root] = Spent()
            while len(self._runs) > _KEEP_RUNS:
                self._runs.popitem(last=False)
        else:
            self._runs.move_to_end(root)
        return spent

    def _run_budget(self, course: Any, root: str) -> None:
        """A run (with its helpers) that spent its ``budget.run`` asks no more: the loop's own
        budget stops an ``%agent`` run before this, gracefully; a map's row, a helper, an
        Agent of one's own meet it here."""
        limit = course.rules.budget("run")
        if limit.empty:
            return
        spent = self._runs.get(root) or Spent()
        for part in ("tokens", "requests", "usd"):
            bound = getattr(limit, part)
            used = getattr(spent, part)
            if bound is None or used < bound:
                continue
            shown = usd_text(used) if part == "usd" else f"{used:,} {part}"
            raise CourseRefusal(
                f"The run budget is spent: {root} used {shown} of {describe_value(bound)} "
                f"({course.where(f'budget.run.{part}')}); nothing was sent.",
                rule=f"budget.run.{part}",
            )


_installed: tuple[CourseGate, Any] | None = None
_install_lock = threading.Lock()


def govern(session: Session) -> CourseGate:
    """Put ``session``'s gate on the request path (in place of an earlier session's)."""
    global _installed
    gate = CourseGate(session)
    with _install_lock:
        if _installed is not None:
            _installed[1]()
        _installed = (gate, _gates.install(gate))
    return gate
