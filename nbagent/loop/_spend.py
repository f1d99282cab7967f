"""What a run's next model request may spend: reserved from its account before it is sent,
settled once it is answered (see :mod:`nbagent._ground.spending`).

The account is the run's tree's (its own budget's, nested under its caller's, its map's or its
served session's). A request reserves one request and, where the tree counts them, an
estimate of its tokens and dollars: its input (the previous request of the run, its input and
output together, which the next one repeats; for a run's first request the characters of what
it sends, four to a token) plus ``Options.max_tokens`` when one is set. It is sent only when
every account above it has that much left, so parallel helpers cannot both spend the same
remainder; its answer then replaces the estimate with what was reported. A request whose model
has no known price is refused under a money budget, whatever else is left.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .._ground.spending import BudgetRefusal, Waiting
from .._prices import cost_usd, table_missing
from ..content import TextPart
from ..generation import Usage
from ..messages import AssistantMessage, ReasoningPart, ToolMessage, UserMessage
from ..tools import ToolCall

if TYPE_CHECKING:
    from ._loopstate import LoopState

__all__ = ["BudgetSpent", "release", "reserve", "settle"]

#: Characters to a token, for the estimate of a run's first request (a lower bound for code,
#: JSON and most languages other than English; the answer's own count replaces it).
CHARS_PER_TOKEN = 4


class BudgetSpent(Exception):
    """The run's account cannot pay for its next request (a retry, or a request to another
    model chosen at a step-mode pause): the stream is closed unsent. ``answer`` is what the
    turn streamed before; ``sentence`` says why."""

    def __init__(self, answer: Any, sentence: str) -> None:
        super().__init__(sentence)
        self.answer = answer
        self.sentence = sentence


async def reserve(run: LoopState, generator: Any) -> str | None:
    """Reserve the run's next request on ``generator`` from its account; None when it may be
    sent (or no budget bounds the run), else the sentence saying why not. Waits while only
    the requests in flight keep it from fitting."""
    account = run._account
    if account is None:
        return None
    release(run)  # a reservation never sent (a step-mode pause changed the model)
    tokens = given = out = 0
    usd: float | None = 0.0
    if account.counts_tokens or account.counts_usd:
        given = _input_estimate(run)
        out = run.options.max_tokens or 0
        tokens = given + out
    unpriced = ""
    if account.counts_usd:
        usd = cost_usd(generator, Usage(given, out))
        if usd is None:  # no table at all here: the refusal says what installs it
            unpriced = table_missing() or ""
    name = str(getattr(generator, "model", "") or type(generator).__name__)
    while True:
        got = account.reserve(
            tokens if account.counts_tokens else 0, usd, model=name, unpriced=unpriced
        )
        if isinstance(got, Waiting):
            await got
            continue
        if isinstance(got, BudgetRefusal):
            run._stop_detail = got.sentence
            return got.sentence
        run._reservation = got
        return None


def settle(run: LoopState, generator: Any, usage: Usage) -> None:
    """The request was sent: settle its reservation with what the answer reported (nothing,
    for one that failed or was cancelled before its usage came)."""
    held = run._reservation
    if held is None:
        return
    run._reservation = None
    usd = 0.0
    account = run._account
    if account is not None and account.counts_usd and usage.total_tokens:
        usd = cost_usd(generator, usage) or 0.0
    held.settle(usage.total_tokens, usd)


def release(run: LoopState) -> None:
    """A reservation whose request was never sent holds nothing any more, and counts nothing."""
    held = run._reservation
    run._reservation = None
    if held is not None:
        held.release()


def _input_estimate(run: LoopState) -> int:
    for exchange in reversed(run.exchanges):
        usage = exchange.usage
        if usage.total_tokens:
            return usage.input_tokens + usage.output_tokens
    agent = run.agent
    chars = len(agent.instructions or "")
    for definition in run.definitions:
        chars += len(definition.name) + len(definition.description or "")
        chars += len(str(definition.input_schema))
    chars += _chars(agent.messages)
    return chars // CHARS_PER_TOKEN


def _chars(messages: Iterable[Any]) -> int:
    total = 0
    for message in messages:
        if isinstance(message, (UserMessage, AssistantMessage)):
            for part in message.content:
                if isinstance(part, (TextPart, ReasoningPart)):
                    total += len(part.text)
                elif isinstance(part, ToolCall):
                    total += len(part.name) + len(part.arguments)
        elif isinstance(message, ToolMessage):
            for result in message.results:
                total += len(result.name)
                total += sum(len(p.text) for p in result.content if isinstance(p, TextPart))
    return total
