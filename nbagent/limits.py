"""Limits on what a model may send and what a tool may give back, with sane defaults.

Everything a model sends is untrusted and every tool result goes back to the model: each has a
bound, so that one bad turn can neither exhaust memory nor be kept in the history and re-sent
on every later turn. Set them per agent:
``Agent(model, tools, limits=Limits(max_calls_per_turn=8))``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["Budget", "ConversationLimits", "ExternalAgentLimits", "Limits"]


@dataclass(frozen=True)
class Limits:
    """Bounds the loop applies to model output and tool results (see docs/concepts/limits.md).

    ``max_argument_bytes``: the UTF-8 size of one call's arguments, checked before parsing. A
    larger call is not run; its arguments are kept in the history as ``{}`` and its error
    result names the size.
    ``max_argument_depth``: how deeply arrays and objects may nest in one call's arguments.
    ``max_calls_per_turn``: calls handled from one model answer; the rest are answered with an
    error saying why, and never start.
    ``max_result_chars``: characters of text a tool result may send to the model; the rest is
    cut, and a marker says how much.
    ``max_result_images``: images one tool result may send to the model; extra ones are left out
    with a marker.
    ``event_backlog``: unread events a run keeps one by one; beyond that, consecutive text and
    argument deltas of one stream are merged (nothing is lost) and a call's progress updates
    replace each other, so a slow reader costs memory in proportion to the text, not to the
    number of fragments.
    ``max_repeats``: how many times in a row one call (the same tool with the same arguments)
    may return the same result before the run asks whether to make it again: a person is
    asked to Go on or Stop; where nobody can answer, the call is not run and the run ends with
    ``stop_reason="repeated_call"``. From the second time on, the model reads a note saying
    so with the result. None turns the guard off (see :mod:`nbagent.loop._repeats`).
    """

    max_argument_bytes: int = 1_048_576
    max_argument_depth: int = 64
    max_calls_per_turn: int = 32
    max_result_chars: int = 100_000
    max_result_images: int = 8
    event_backlog: int = 1_000
    max_repeats: int | None = 3

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if value is None and item.name in _OPTIONAL:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Limits.{item.name} must be a positive integer, not {value!r}")


#: Limits that None turns off.
_OPTIONAL = frozenset({"max_repeats"})


@dataclass(frozen=True)
class Budget:
    """What a run may spend, its helpers and the runs its tools start included: ``tokens``
    (input + output, summed over its model requests), ``requests`` (model requests) and
    ``usd`` (dollars, priced from the maintained table of :mod:`nbagent._prices`; the ``prices``
    extra). ``None`` leaves a bound off.

    ``requests`` counts every request sent, not only the steps: a retry (after an overloaded or
    rate-limited answer, a dropped connection, an answer that broke off mid-stream) is a
    request too, since a provider may bill it. A budget bounds what is paid for.

    A budget is a value; the run spends it as one account for its whole tree
    (:mod:`nbagent._ground.spending`): before each model request, retries included, the request
    reserves what it is expected to cost (one request; its input so far plus
    ``Options.max_tokens`` in tokens and dollars), and it is sent only if that fits in what is
    left; once answered, what it reported is settled. A run that cannot pay for its next
    request stops there with ``stop_reason="budget"`` and ``stop_detail`` saying why (a retry
    it cannot pay for is not sent), every call answered and the history valid, instead of an
    alert after the fact. One answer can still go beyond its estimate (its size is only known
    once it arrived): bound that with ``Options(max_tokens=...)``.

    A request on a model with no known price cannot keep a ``usd`` bound: it is not sent, as a
    spent budget's is (a price is never guessed).
    """

    tokens: int | None = None
    requests: int | None = None
    usd: float | None = None

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if value is None:
                continue
            if item.name == "usd":
                if (
                    isinstance(value, bool)
                    or not isinstance(value, (int, float))
                    or not (0 < value < float("inf"))
                ):
                    raise ValueError(f"Budget.usd must be a positive number or None, not {value!r}")
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Budget.{item.name} must be a positive integer or None")


@dataclass(frozen=True)
class ConversationLimits:
    """Bounds on a conversation read back from a saved notebook (``%agent --continue``).

    ``max_messages``: messages a continued conversation may hold; a longer one is refused,
    saying so, rather than cut (a cut history is not what the model had seen).
    ``max_bytes``: the size of the recording it is read from.
    """

    max_messages: int = 2_000
    max_bytes: int = 64 * 2**20

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"ConversationLimits.{item.name} must be a positive integer, not {value!r}"
                )


@dataclass(frozen=True)
class ExternalAgentLimits:
    """Bounds on an external agent spoken to over ACP (see :mod:`nbagent.acp`): every byte it
    writes is untrusted.

    ``max_message_bytes``: one JSON-RPC message (one line); a longer one is skipped unread
    and counts as malformed. ``max_malformed``: lines that are not JSON-RPC (or not ACP) the
    agent may send before it is stopped as broken. ``max_updates_per_turn``: session updates
    one prompt may bring; past it the turn is cancelled and fails, saying so.
    ``max_turn_chars``: characters of message, thought and tool text one turn may stream.
    ``start_timeout``: seconds to start and answer ``initialize`` and ``session/new`` (npx may
    be slow). ``cancel_grace``: seconds an agent has to end a cancelled turn before it is
    killed. ``stderr_tail``: bytes of its stderr kept to explain a failure.
    """

    max_message_bytes: int = 8 * 1024 * 1024
    max_malformed: int = 20
    max_updates_per_turn: int = 20_000
    max_turn_chars: int = 4_000_000
    start_timeout: float = 60.0
    cancel_grace: float = 5.0
    stderr_tail: int = 4096

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(
                    f"ExternalAgentLimits.{item.name} must be a positive number, not {value!r}"
                )
