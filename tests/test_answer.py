"""Answer: how streamed reasoning pieces become reasoning parts, and at what cost."""

from __future__ import annotations

import time

from nbagent.content import TextPart
from nbagent.generation import Answer, Finish, ReasoningDelta, TextDelta, ToolCallReceived
from nbagent.messages import ReasoningPart
from nbagent.tools import ToolCall


def test_reasoning_pieces_form_parts_closed_by_a_signature_or_by_what_follows() -> None:
    answer = Answer()
    for event in [
        ReasoningDelta("Think "),
        ReasoningDelta("hard."),
        ReasoningDelta(signature="sig-1"),
        ReasoningDelta("More."),
        TextDelta("Hi"),
        ReasoningDelta("After text."),
        ToolCallReceived(ToolCall("c", "f", "{}")),
        ReasoningDelta(redacted="opaque"),
        Finish("tool_calls"),
    ]:
        answer.add(event)
    assert answer.message().content == (
        ReasoningPart("Think hard.", "sig-1"),
        ReasoningPart("More."),
        TextPart("Hi"),
        ReasoningPart("After text."),
        ToolCall("c", "f", "{}"),
        ReasoningPart("", redacted="opaque"),
    )


def test_reading_the_message_mid_stream_does_not_split_the_open_part() -> None:
    answer = Answer()
    answer.add(ReasoningDelta("One "))
    assert answer.message().content == (ReasoningPart("One "),)
    answer.add(ReasoningDelta("two."))
    answer.add(ReasoningDelta(signature="s"))
    assert answer.message().content == (ReasoningPart("One two.", "s"),)


def test_a_long_reasoning_stream_costs_linear_time() -> None:
    # Rebuilding the part for each piece took ~2.6 s for 80,000 pieces and grew quadratically.
    answer = Answer()
    start = time.perf_counter()
    for _ in range(300_000):
        answer.add(ReasoningDelta("abcd"))
    answer.add(ReasoningDelta(signature="s"))
    assert time.perf_counter() - start < 3.0
    (part,) = answer.message().content
    assert isinstance(part, ReasoningPart) and len(part.text) == 1_200_000
