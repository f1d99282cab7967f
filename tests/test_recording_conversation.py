"""The conversation a recording ends with, read back checked against what the model was sent
(what ``%agent --continue`` rebuilds after a kernel restart)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nbagent import Agent, tool
from nbagent.errors import RecordingError
from nbagent.messages import AssistantMessage, message_to_dict
from nbagent.models import Call, ScriptedModel, Turn
from nbagent.recording import Recording, Step, conversation_of, record


@tool
def weather(city: str) -> str:
    """Current weather for a city."""
    return f"{city}: sunny"


def _recorded(*prompts: str) -> tuple[Agent, Recording]:
    """A real run (two prompts: two runs of one conversation), recorded as the notebook does."""
    recorder = record(
        ScriptedModel([Turn("Checking.", Call("weather", {"city": "Bern"})), "Sunny.", "Yes."])
    )
    agent = Agent(recorder, [weather])
    for prompt in prompts:
        agent.run_sync(prompt)
    recording = Recording.from_json(_with_history(recorder.recording, agent), source="r.json")
    return agent, recording


def _with_history(recording: Recording, agent: Agent) -> str:
    recording.keep_history(agent.messages)
    return recording.to_json()


def _edited(recording: Recording, change: Any) -> Recording:
    data = json.loads(recording.to_json())
    change(data)
    return Recording.from_json(json.dumps(data), source="r.json")


def test_the_conversation_comes_back_as_the_run_left_it() -> None:
    agent, recording = _recorded("weather in Bern?", "and tomorrow?")
    found = conversation_of(recording, max_messages=100)
    assert [message_to_dict(m) for m in found.messages] == [
        message_to_dict(m) for m in agent.messages
    ]
    assert found.pending == () and found.asked == found.messages


def test_an_edited_message_is_refused_naming_it() -> None:
    _agent, recording = _recorded("weather in Bern?", "and tomorrow?")

    def prompt(data: dict[str, Any]) -> None:
        data["history"][0]["content"][0]["text"] = "weather in Paris?"

    with pytest.raises(RecordingError, match="message 1 of its conversation is not the one"):
        conversation_of(_edited(recording, prompt), max_messages=100)

    def answer(data: dict[str, Any]) -> None:
        data["history"][-1]["content"][0]["text"] = "Rainy."

    with pytest.raises(RecordingError, match="is not the model's last answer"):
        conversation_of(_edited(recording, answer), max_messages=100)

    def more(data: dict[str, Any]) -> None:
        data["history"].append({"role": "user", "content": [{"type": "text", "text": "hi"}]})

    with pytest.raises(RecordingError, match="goes on after the model's last answer"):
        conversation_of(_edited(recording, more), max_messages=100)

    def cut(data: dict[str, Any]) -> None:
        del data["history"][2:]

    with pytest.raises(RecordingError, match="fewer than the"):
        conversation_of(_edited(recording, cut), max_messages=100)

    def broken(data: dict[str, Any]) -> None:
        data["history"][1] = {"role": "assistant"}

    with pytest.raises(RecordingError, match="message 2 of its conversation is not one nbagent"):
        conversation_of(_edited(recording, broken), max_messages=100)


def test_a_long_conversation_is_bounded_and_says_so() -> None:
    _agent, recording = _recorded("weather in Bern?", "and tomorrow?")
    size = len(recording.history or [])
    with pytest.raises(RecordingError, match=f"{size} messages; at most {size - 1} are continued"):
        conversation_of(recording, max_messages=size - 1)
    assert len(conversation_of(recording, max_messages=size).messages) == size


def test_a_recording_without_its_conversation_has_nothing_to_continue() -> None:
    recorder = record(ScriptedModel(["Hi."]))
    Agent(recorder).run_sync("hello")
    with pytest.raises(RecordingError, match="does not keep the conversation"):
        conversation_of(recorder.recording, max_messages=100)


def test_calls_left_unanswered_are_pending() -> None:
    _agent, recording = _recorded("weather in Bern?")
    first = recording.steps[:1]
    history = (recording.history or [])[:2]  # the prompt, and the answer that made the call
    waiting = Recording(first, model=recording.model, history=history, source="w.json")
    found = conversation_of(waiting, max_messages=100)
    assert [c.name for c in found.pending] == ["weather"]
    assert len(found.asked) == 1 and isinstance(found.messages[-1], AssistantMessage)


def test_a_helper_s_request_recorded_last_is_not_taken_for_the_conversation_s() -> None:
    agent, recording = _recorded("weather in Bern?")
    helper = Step(
        {**recording.steps[-1].request, "messages": ["user:another-task"]},
        [{"type": "text", "text": "helped"}, {"type": "finish", "reason": "stop"}],
    )
    recording.steps.append(helper)  # another agent's run inside a call, in the same file
    found = conversation_of(recording, max_messages=100)
    assert len(found.messages) == len(agent.messages) and found.pending == ()
