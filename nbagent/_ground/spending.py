"""A budget as one account for a whole run tree: every model request reserves, then settles.

A :class:`~nbagent.limits.Budget` is a value (what may be spent); an :class:`Account` is that
budget being spent. A run, its helpers (``agent.as_tool``, nested as deep as they go), the rows
of an ``Agent.map`` and the calls of a served session all spend from one account, whichever
thread or task they run on: before a request is sent it *reserves* what it is expected to cost
(one request; its tokens and dollars as estimated by the loop), and the request goes only if
every account above it has that much left (when only what requests in flight hold keeps it
from fitting, it waits for them: their answers may cost less than they hold); once answered
it *settles* (the estimate is replaced by what the answer reported). A request that failed or
was cancelled settles too, for what it reported (usually nothing but the request itself,
which was sent and may be billed), and one never sent is released, so a reservation never
outlives its request. Two helpers running in parallel therefore cannot both
spend the same remainder: the second one's request finds the first one's reservation held.

Accounts nest: a run with a budget of its own under a caller that has one spends from both
(``Account(budget, parent)``), and is stopped by whichever is spent first. One lock guards every
account (the work under it is a few additions), so runs on several threads (``run_sync`` in a
thread pool, a map's rows) share them safely. An account lives in one process: across processes
(``Agent.map`` on a Dask cluster) the map hands each row a slice of what is left and settles the
slice from what the row reports (see :mod:`nbagent.batch._dask`).

The account runs spend from is the *ambient* one (:func:`spending_account`, a context variable):
each run sets its own for its task and the tools it runs, so a run started inside a tool (a
helper, or any ``agent.run`` there) spends from its caller's account.

How a caller hands one to runs, and how it is spent (the whole interface):

* a :class:`~nbagent.limits.Budget` goes where it always went (``Agent(budget=...)``,
  ``agent.run(..., budget=...)``, ``Agent.map(budget=...)``, ``ServedCalls(budget=...)``):
  each makes an :class:`Account` of it under the ambient one;
* an account that outlives one run (a kernel session's, a notebook's) is made once,
  ``Account(budget, parent, label="the session's budget")``, and handed to every run started
  inside ``with spending(account): ...`` (or ``token = spend_from(account)``): those runs,
  ``run_sync`` too (it copies the context), and their helpers reserve from it and every
  account above it;
* whoever sends a request: ``got = account.reserve(tokens, usd, model=...)`` before it (``usd``
  None: no known price), which gives a :class:`Reservation`, a :class:`BudgetRefusal` (its
  ``sentence`` says why, whole) or a :class:`Waiting` (``await got``, then reserve again);
  then exactly one of ``got.settle(tokens, usd)`` once it was sent (answered, failed or
  cancelled: what it reported) or ``got.release()`` when it never was;
* ``account.refusal()`` says whether anything more can be sent at all, ``account.left()``
  what is left (what is held counts as spent), and ``spent_*`` / ``held_*`` what the account
  has spent and holds.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..limits import Budget

__all__ = [
    "Account",
    "BudgetRefusal",
    "Reservation",
    "Waiting",
    "spend_from",
    "spending",
    "spending_account",
]

#: Guards every account: a reservation checks and holds along a chain of accounts at once.
_LOCK = threading.Lock()

_AMBIENT: contextvars.ContextVar[Account | None] = contextvars.ContextVar(
    "nbagent_spending", default=None
)


def spending_account() -> Account | None:
    """The account runs started here spend from (None: no budget bounds them)."""
    return _AMBIENT.get()


def spend_from(account: Account | None) -> contextvars.Token[Account | None]:
    """Make ``account`` the ambient one in this context (a run's task, a map's, a served
    call's); returns the token that undoes it."""
    return _AMBIENT.set(account)


@contextmanager
def spending(account: Account | None) -> Iterator[Account | None]:
    """Every run started inside the block spends from ``account`` (and what is above it):
    how an account that outlives one run (a session's, a notebook's) is handed to runs."""
    token = _AMBIENT.set(account)
    try:
        yield account
    finally:
        _AMBIENT.reset(token)


@dataclass(frozen=True)
class BudgetRefusal:
    """Why a request was not sent: ``sentence`` says it to a person, whole."""

    sentence: str


class Account:
    """A :class:`~nbagent.limits.Budget` being spent, by every request under it (see the module
    docs). ``label`` names it in a refusal ("the run's budget", "the map's budget")."""

    def __init__(
        self, budget: Budget, parent: Account | None = None, *, label: str = "the run's budget"
    ) -> None:
        self.budget = budget
        self.parent = parent
        self.label = label
        self.spent_tokens = 0
        self.spent_requests = 0
        self.spent_usd = 0.0
        self.held_tokens = 0
        self.held_requests = 0
        self.held_usd = 0.0

    def __repr__(self) -> str:
        return (
            f"Account({self.label}: {self.spent_requests} requests, {self.spent_tokens} tokens, "
            f"${self.spent_usd:.6f} spent; {self.held_requests} in flight)"
        )

    def chain(self) -> list[Account]:
        """This account and every one above it, nearest first."""
        found: list[Account] = []
        account: Account | None = self
        while account is not None and len(found) < 64:
            found.append(account)
            account = account.parent
        return found

    @property
    def counts_tokens(self) -> bool:
        """Whether this account or one above it bounds tokens (estimates are needed)."""
        return any(a.budget.tokens is not None for a in self.chain())

    @property
    def counts_usd(self) -> bool:
        """Whether this account or one above it bounds dollars (a price is needed)."""
        return any(a.budget.usd is not None for a in self.chain())

    def reserve(
        self,
        tokens: int = 0,
        usd: float | None = 0.0,
        *,
        model: str = "the model",
        unpriced: str = "",
    ) -> Reservation | BudgetRefusal | Waiting:
        """Hold one request, ``tokens`` and ``usd`` (the request's estimate; ``usd=None``: the
        model's price is unknown) in this account and every one above it; or say why not; or,
        when only what requests in flight hold keeps it from fitting, a :class:`Waiting` to
        await before asking again (their answers may cost less than they hold). ``unpriced``
        ends the sentence refusing an unknown price (what installs the price table, when it
        is not there)."""
        with _LOCK:
            chain = self.chain()
            wait = False
            for account in chain:
                verdict = account._verdict(tokens, usd, model, unpriced)
                if isinstance(verdict, str):
                    return BudgetRefusal(verdict)
                wait = wait or verdict
            if wait:
                return Waiting()
            for account in chain:
                account.held_requests += 1
                account.held_tokens += tokens
                account.held_usd += usd or 0.0
            return Reservation(chain, tokens, usd or 0.0)

    def refusal(self) -> str | None:
        """Why nothing more can be sent from this account, whatever the requests in flight
        turn out to cost (None: a request still may be, now or once they are answered)."""
        with _LOCK:
            for account in self.chain():
                verdict = account._verdict(0, 0.0, "")
                if isinstance(verdict, str):
                    return verdict
        return None

    def left(self) -> Budget | None:
        """What may still be spent from here (what is held counts as spent), the least over
        the chain; None when nothing is left in some unit."""
        with _LOCK:
            return self._left()

    def _left(self) -> Budget | None:
        tokens: int | None = None
        requests: int | None = None
        usd: float | None = None
        for account in self.chain():
            bound = account.budget
            if bound.tokens is not None:
                have = bound.tokens - account.spent_tokens - account.held_tokens
                tokens = have if tokens is None else min(tokens, have)
            if bound.requests is not None:
                have = bound.requests - account.spent_requests - account.held_requests
                requests = have if requests is None else min(requests, have)
            if bound.usd is not None:
                more = bound.usd - account.spent_usd - account.held_usd
                usd = more if usd is None else min(usd, more)
        if (
            (tokens is not None and tokens < 1)
            or (requests is not None and requests < 1)
            or (usd is not None and usd <= 0)
        ):
            return None
        return Budget(tokens=tokens, requests=requests, usd=usd)

    def share(self, parts: int) -> tuple[Budget, Reservation] | None:
        """One of ``parts`` equal shares of what is left, held here as one reservation, for
        runs in another process (a Dask worker) to spend as an account of their own; None
        when a share would hold nothing in some bounded unit."""
        with _LOCK:
            left = self._left()
            if left is None:
                return None
            # no more shares than there are requests (and tokens) to give: each holds one
            parts = max(1, min(parts, left.requests or parts, left.tokens or parts))
            tokens = left.tokens // parts if left.tokens is not None else None
            requests = left.requests // parts if left.requests is not None else None
            usd = left.usd / parts if left.usd is not None else None
            if (tokens is not None and tokens < 1) or (requests is not None and requests < 1):
                return None
            chain = self.chain()
            held = Reservation(chain, tokens or 0, usd or 0.0, requests or 0)
            for account in chain:
                account.held_requests += requests or 0
                account.held_tokens += tokens or 0
                account.held_usd += usd or 0.0
        return Budget(tokens=tokens, requests=requests, usd=usd), held

    def _unhold(self, held: Reservation) -> None:
        self.held_requests -= held._requests
        self.held_tokens -= held._tokens
        self.held_usd -= held._usd

    def _verdict(
        self, tokens: int, usd: float | None, model: str, unpriced: str = ""
    ) -> str | bool:
        """A request of this size here: the sentence refusing it, True to wait for the
        requests in flight, False when it fits. A request in flight is sure to count, so the
        request bound never waits; its tokens and dollars may settle lower than held."""
        bound = self.budget
        label = self.label
        flying = self.held_requests
        also = f" ({flying} still being answered)" if flying else ""
        if bound.requests is not None and self.spent_requests + flying + 1 > bound.requests:
            return (
                f"{_cap(label)} of {bound.requests:,} request(s) is spent: "
                f"{self.spent_requests + flying:,} were sent{also}, helpers included; "
                "nothing more is sent."
            )
        wait = False
        if bound.tokens is not None:
            spent = self.spent_tokens
            if spent >= bound.tokens:
                return (
                    f"{_cap(label)} of {bound.tokens:,} tokens is spent: {spent:,} were used, "
                    "helpers included; nothing more is sent."
                )
            if spent + tokens > bound.tokens:
                return (
                    f"{_cap(label)} of {bound.tokens:,} tokens cannot pay for the next request: "
                    f"it is expected to use about {tokens:,} (its input so far, and "
                    f"Options.max_tokens if set), and {bound.tokens - spent:,} are left; "
                    "nothing more is sent."
                )
            wait = spent + self.held_tokens + tokens > bound.tokens
        if bound.usd is not None:
            if usd is None:
                return (
                    f"The price of {model} is unknown, so {label} of "
                    f"{_dollars(bound.usd)} cannot be kept: nothing was sent (a price is "
                    "never guessed)." + (f" {unpriced}" if unpriced else "")
                )
            spent_usd = self.spent_usd
            if spent_usd >= bound.usd:
                return (
                    f"{_cap(label)} of {_dollars(bound.usd)} is spent: {_dollars(spent_usd)} "
                    "was used, helpers included; nothing more is sent."
                )
            if spent_usd + usd > bound.usd:
                return (
                    f"{_cap(label)} of {_dollars(bound.usd)} cannot pay for the next request: "
                    f"it is expected to cost about {_dollars(usd)}, and "
                    f"{_dollars(bound.usd - spent_usd)} is left; nothing more is sent."
                )
            wait = wait or spent_usd + self.held_usd + usd > bound.usd
        return wait


class Waiting:
    """A request that must wait for the requests in flight: ``await waiting`` returns once one
    of them settled (or was released), in any account; then reserve again."""

    __slots__ = ("_future", "_loop")

    def __init__(self) -> None:
        import asyncio

        self._loop = asyncio.get_running_loop()
        self._future: Any = self._loop.create_future()
        _WAITERS.append(self)

    def _wake(self) -> None:
        def done() -> None:
            if not self._future.done():
                self._future.set_result(None)

        try:
            self._loop.call_soon_threadsafe(done)
        except RuntimeError:  # its loop closed: nobody waits any more
            pass

    def __await__(self) -> Any:
        return self._future.__await__()


#: Requests waiting for one in flight to settle (woken, and forgotten, at every settlement).
_WAITERS: list[Waiting] = []


def _wake_all() -> None:
    waiting = list(_WAITERS)
    _WAITERS.clear()
    for waiter in waiting:
        waiter._wake()


class Reservation:
    """What one request (or a share handed to another process) holds until it is settled:
    settle or release it once (a second time is a no-op)."""

    __slots__ = ("_chain", "_open", "_requests", "_tokens", "_usd")

    def __init__(self, chain: list[Account], tokens: int, usd: float, requests: int = 1) -> None:
        self._chain = chain
        self._requests = requests
        self._tokens = tokens
        self._usd = usd
        self._open = True

    def settle(self, tokens: int = 0, usd: float = 0.0, requests: int | None = None) -> None:
        """The request was sent and answered (or failed, or was cancelled): what it holds is
        released, and the request with ``tokens`` and ``usd`` (what its answer reported) is
        spent, in every account of the chain. A share settles with what its row spent
        (``requests``)."""
        with _LOCK:
            if not self._open:
                return
            self._open = False
            sent = self._requests if requests is None else requests
            for account in self._chain:
                account._unhold(self)
                account.spent_requests += max(0, sent)
                account.spent_tokens += max(0, tokens)
                account.spent_usd += max(0.0, usd)
            _wake_all()

    def settle_whole(self) -> None:
        """Settle as if everything held was spent: a share whose row never said what it spent
        (its worker died) is counted in full."""
        self.settle(self._tokens, self._usd, self._requests)

    def release(self) -> None:
        """The request was never sent: what it holds is released, and nothing is spent."""
        with _LOCK:
            if not self._open:
                return
            self._open = False
            for account in self._chain:
                account._unhold(self)
            _wake_all()

    @property
    def open(self) -> bool:
        return self._open


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _dollars(value: float) -> str:
    if value >= 0.01:
        return f"${value:,.4f}".rstrip("0").rstrip(".")
    return "$" + (f"{value:.6f}".rstrip("0").rstrip(".") if value >= 5e-7 else "0.000000")
