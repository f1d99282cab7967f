"""Each request's history is a snapshot that never changes, and costs no copy of the history.

``HistorySnapshot`` stands where a tuple stood (``Request.messages``): it must compare, hash,
index, slice and print as that tuple did. ``HistoryLog`` must notice every change the loop makes
to the history (appends, a step-mode edit of the last message) and every list it is handed anew.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from nbagent import Agent, Tool
from nbagent.loop._snapshots import HistoryLog, HistorySnapshot
from nbagent.messages import Message, user
from nbagent.models import Call, ScriptedModel, Turn


def history(n: int) -> list[Message]:
    return [user(f"m{i}") for i in range(n)]


def test_a_snapshot_behaves_as_the_tuple_it_replaces() -> None:
    messages = history(5)
    snap = HistoryLog().snapshot(messages)
    as_tuple = tuple(messages)
    assert isinstance(snap, HistorySnapshot)
    assert snap == as_tuple and as_tuple == snap
    assert (snap != as_tuple) is False  # __ne__ follows __eq__
    assert hash(snap) == hash(as_tuple)
    assert snap != messages  # a tuple is never equal to a list, and neither is a snapshot
    assert len(snap) == 5 and list(snap) == messages and list(reversed(snap)) == messages[::-1]
    assert snap[0] is messages[0] and snap[-1] is messages[-1] and snap[-5] is messages[0]
    assert snap[1:3] == as_tuple[1:3] and isinstance(snap[1:3], tuple)
    assert snap[::-2] == as_tuple[::-2]
    with pytest.raises(IndexError):
        snap[5]
    with pytest.raises(IndexError):
        snap[-6]
    assert repr(snap) == repr(as_tuple)
    assert snap + (messages[0],) == (*as_tuple, messages[0])  # noqa: RUF005 (tuple's +)
    assert (messages[0],) + snap == (messages[0], *as_tuple)  # noqa: RUF005
    assert messages[2] in snap and snap.index(messages[3]) == 3
    assert pickle.loads(pickle.dumps(snap)) == as_tuple


def test_snapshots_never_change_as_the_history_grows() -> None:
    messages = history(2)
    log = HistoryLog()
    first = log.snapshot(messages)
    messages.append(user("later"))
    second = log.snapshot(messages)
    assert len(first) == 2 and len(second) == 3
    assert first == tuple(messages[:2]) and second == tuple(messages)
    assert first != second
    walked = []
    for message in first:  # the log grows while a reader walks an older snapshot
        walked.append(message)
        messages.append(user("more"))
        log.snapshot(messages)
    assert walked == messages[:2]
    assert second._log is first._log  # appends share the one log: no copy per request


@pytest.mark.parametrize(
    "change",
    [
        lambda m: m.__setitem__(-1, user("edited")),  # a step-mode edit of the results
        lambda m: m.pop(),
        lambda m: (m.pop(), m.append(user("other"))),
        lambda m: m.clear(),
    ],
    ids=["last replaced", "shortened", "last swapped", "cleared"],
)
def test_a_change_other_than_an_append_starts_a_new_log(change: Any) -> None:
    messages = history(4)
    log = HistoryLog()
    before = log.snapshot(messages)
    kept = tuple(messages)
    change(messages)
    after = log.snapshot(messages)
    assert after == tuple(messages)
    assert before == kept  # the older request still holds what it sent


def test_a_new_list_starts_a_new_log() -> None:
    log = HistoryLog()
    first = log.snapshot(history(3))
    other = [user("x")]
    assert log.snapshot(other) == (other[0],)
    assert len(first) == 3


async def test_each_request_of_a_run_holds_the_history_as_it_was_sent() -> None:
    async def noop(ctx: Any) -> str:
        return "ok"

    tool = Tool(name="noop", input_schema={"type": "object", "properties": {}}, execute=noop)
    steps = 30
    model = ScriptedModel([*(Turn(Call("noop", {"i": i})) for i in range(steps)), "done"])
    agent = Agent(model, [tool], max_steps=steps + 1)
    result = await agent.run("go")
    assert result.text == "done"
    assert len(model.requests) == steps + 1
    for index, request in enumerate(model.requests):
        # the prompt, then an answer and its results per step before this one
        assert request.messages == tuple(agent.messages[: 1 + 2 * index])
        assert result.exchanges[index].request.messages == request.messages
    model.add("again")
    again = await agent.run("and again")  # a second run on the same history
    assert again.exchanges[0].request.messages == tuple(agent.messages[:-1])
    assert model.requests[0].messages == (agent.messages[0],)  # the first run's, unchanged
