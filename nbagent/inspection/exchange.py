"""What the model saw and what it said: one :class:`Exchange` per model request of a run.

A run keeps, for each model turn, the :class:`~nbagent.generation.Request` exactly as the loop
handed it to the model's adapter (instructions, every message, the tools' definitions, the tool
choice and the options) and what came back (text, reasoning where the provider sent it, calls,
why it ended, tokens). ``result.exchanges[k]`` (and ``run.exchanges`` while the run goes on) hold
them; a step whose calls ran helper agents (``agent.as_tool``) holds their runs too,
``result.exchanges[k].helpers[call_id]`` (a :class:`~nbagent.events.RunResult` with exchanges
of its own, and so on down); :meth:`Exchange.body` gives the JSON the adapter sends for it,
for adapters that say (``build_body``). Nothing is stored twice: a request holds the very
message objects of the conversation.

Keys are not in here (a request carries no credentials); front ends still hide credential-shaped
text in whatever of it they show, as everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..generation import FinishReason, Request, Usage
from ..messages import AssistantMessage, Message

__all__ = ["Exchange", "exchange_of", "new_messages"]


@dataclass(frozen=True)
class Exchange:
    """One model request of a run and its answer.

    ``step`` is the run's model turn (1, 2, …); ``request`` exactly what the model's adapter was
    given; ``answer`` what came back as the history keeps it (text, reasoning, calls; for an
    answer that broke off, the text that had arrived and no calls); ``finish`` why it ended
    (None when it did not finish); ``status`` "complete", "length" or "failed"; ``retries`` how
    many times the request was sent again (each is a request: see ``Budget``); ``model`` the
    model that answered, and ``edited`` what a person changed at a step-mode pause before it
    was sent (see :mod:`nbagent.inspection.stepping`). ``helpers`` holds, by call id, the run
    of each helper agent (``agent.as_tool``) that one of this answer's calls started, as its
    :class:`~nbagent.events.RunResult` (its own ``exchanges`` hold its requests, its helpers'
    under its calls); it fills in as those calls end, and a stopped helper is there as it
    stopped.
    """

    step: int
    request: Request
    answer: AssistantMessage
    finish: FinishReason | None
    usage: Usage
    status: str
    model: str = ""
    retries: int = 0
    seconds: float = 0.0
    error: BaseException | None = field(default=None, compare=False)
    edited: tuple[str, ...] = ()
    #: By call id, the helper's :class:`~nbagent.events.RunResult` (named by what it is, not
    #: its class: the events room sits above this one).
    helpers: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def body(self, generator: Any) -> dict[str, Any]:
        """The JSON body ``generator`` sends for this request (its ``build_body``), e.g. to see
        the messages in the provider's own form. Raises TypeError for a generator that does not
        say (the offline and scripted models)."""
        build = getattr(generator, "build_body", None)
        if not callable(build):
            raise TypeError(f"{type(generator).__name__} does not say what body it sends")
        body: dict[str, Any] = build(self.request)
        return body


def new_messages(exchanges: tuple[Exchange, ...] | list[Exchange], index: int) -> list[Message]:
    """The messages of exchange ``index``'s request that the one before did not hold: what the
    model saw that was new at that step (the whole request for the first)."""
    current = list(exchanges[index].request.messages)
    if index == 0:
        return current
    before = exchanges[index - 1].request.messages
    size = len(before)
    if len(current) >= size and all(a is b for a, b in zip(current[:size], before, strict=False)):
        return current[size:]
    return current


def exchange_of(exchanges: tuple[Exchange, ...], step: int, run: str) -> Exchange:
    """The exchange of model turn ``step`` (1-based), or a ValueError naming the steps there are."""
    if isinstance(step, bool) or not isinstance(step, int):
        raise TypeError(f"a step is a number (1, 2, …), not {type(step).__name__}")
    for exchange in exchanges:
        if exchange.step == step:
            return exchange
    there = f"steps 1 to {len(exchanges)}" if exchanges else "no model request at all"
    raise ValueError(f"{run} has no step {step}: it has {there}")
