"""The conversation a recording ended with, checked against what the model was sent.

A recording made by the notebook keeps, beside its steps, the conversation when the run ended
(``Recording.history``). The steps hold a hash of every message each request sent, so the
history is checked against them: each message the last request sent must hash as recorded,
and what follows must be the model's last answer as the recording holds it (its text and its
calls), then at most the results of those calls. (The last request is the conversation's own:
a helper's requests, recorded in the same file, begin with the helper's task.) A history that
departs anywhere is refused, naming the message: a continued conversation sends exactly what
the model had seen.

A run the kernel's shutdown ended while calls waited for approval ends with those calls and no
results: they are :attr:`Conversation.pending`, to be offered again, never run by themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import RecordingError
from ..messages import AssistantMessage, Message, ToolMessage, message_from_dict
from ..tools import ToolCall
from ._format import Recording, _message_hash

__all__ = ["Conversation", "conversation_of"]


@dataclass(frozen=True)
class Conversation:
    """A recording's conversation: its messages, and the calls that were left waiting (the
    last message's calls that have no result; empty when the run ended as runs do)."""

    messages: tuple[Message, ...]
    pending: tuple[ToolCall, ...] = ()

    @property
    def asked(self) -> tuple[Message, ...]:
        """The messages the last request sent: with pending calls, the conversation before the
        answer that made them (asked again, that answer is replayed from the recording)."""
        return self.messages[:-1] if self.pending else self.messages


def conversation_of(recording: Recording, *, max_messages: int) -> Conversation:
    """The checked conversation ``recording`` ended with (see the module); RecordingError in
    one sentence naming what is missing or departs."""
    source = recording.source or "the recording"
    if recording.history is None:
        raise RecordingError(
            f"{source} does not keep the conversation it ended with (a cassette, or a "
            "recording of an older nbagent), so there is nothing to continue from"
        )
    if len(recording.history) > max_messages:
        raise RecordingError(
            f"{source} ends with a conversation of {len(recording.history):,} messages; at "
            f"most {max_messages:,} are continued (ConversationLimits.max_messages)"
        )
    if not recording.steps:
        raise RecordingError(f"{source} holds no model request to check its conversation by")
    messages: list[Message] = []
    for number, data in enumerate(recording.history, start=1):
        try:
            messages.append(message_from_dict(data))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise RecordingError(
                f"{source}: message {number} of its conversation is not one nbagent writes "
                f"({type(exc).__name__}: {str(exc)[:80]})"
            ) from None
    hashes = [_message_hash(m) for m in messages]
    # the conversation's own last request: a helper's (another agent's run inside a call)
    # is recorded in the same file, and begins with its own task, not this conversation
    ours = [
        step
        for step in recording.steps
        if (step.request.get("messages") or [None])[0] == (hashes[0] if hashes else None)
    ]
    last = ours[-1] if ours else recording.steps[-1]
    sent = last.request.get("messages") or []
    if len(messages) < len(sent):
        raise RecordingError(
            f"{source}: its conversation holds {len(messages)} messages, fewer than the "
            f"{len(sent)} its last request sent (the conversation was cut)"
        )
    for number, (found, digest) in enumerate(zip(hashes, sent, strict=False), start=1):
        if found != digest:
            raise RecordingError(
                f"{source}: message {number} of its conversation is not the one the model "
                "was sent (the recording was edited)"
            )
    tail = messages[len(sent) :]
    if not tail:
        raise RecordingError(f"{source}: its conversation lacks the model's last answer")
    answer = tail[0]
    if not isinstance(answer, AssistantMessage) or not _answer_matches(answer, last.events):
        raise RecordingError(
            f"{source}: message {len(sent) + 1} of its conversation is not the model's last "
            "answer as the recording holds it (the recording was edited)"
        )
    calls = answer.tool_calls
    rest = tail[1:]
    if not rest:
        return Conversation(tuple(messages), calls)
    results = rest[0]
    answered = (
        isinstance(results, ToolMessage)
        and len(rest) == 1
        and [r.call_id for r in results.results] == [c.id for c in calls]
    )
    if not answered:
        raise RecordingError(
            f"{source}: its conversation goes on after the model's last answer with "
            "something other than that answer's results (the recording was edited)"
        )
    return Conversation(tuple(messages))


def _answer_matches(answer: AssistantMessage, events: list[dict[str, object]]) -> bool:
    """The answer holds the text and the calls the recorded events of its step hold."""
    text = "".join(str(e.get("text", "")) for e in events if e.get("type") == "text")
    calls = [str(e.get("id")) for e in events if e.get("type") == "call"]
    made = [p.id for p in answer.content if isinstance(p, ToolCall)]
    return answer.text == text and made == calls
