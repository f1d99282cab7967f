"""Answer: how streamed reasoning pieces become reasoning parts.

Its cost per piece (once quadratic) is measured in benchmarks/bench_long_stream.py."""

from __future__ import annotations

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
