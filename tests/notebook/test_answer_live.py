"""The live card's typed answer (:mod:`nbagent.notebook.live.answerlive`), in-process on a recording
comm: a rejected answer starts again, a list answer fills in as rows, text that is not JSON is
shown as it is, a key that is still arriving waits, a huge answer stops being parsed, and a run
that ends without a validated value says so."""

from __future__ import annotations

import dataclasses
from typing import Any

from nbagent import Agent
from nbagent.generation import Finish, Request, TextDelta, Usage
from nbagent.messages import UserMessage
from nbagent.models import FunctionModel
from nbagent.notebook.live import answerlive
from nbagent.notebook.live.answerlive import LiveAnswer
from nbagent.notebook.live.view import RunView

from .conftest import Wire


@dataclasses.dataclass
class City:
    name: str
    people: int


class Native(FunctionModel):
    def native_answers(self, schema: Any) -> tuple[bool, str]:
        return True, "test structured output"


def streaming(*answers: list[str]) -> Native:
    async def decide(request: Request) -> Any:
        asked = sum(isinstance(m, UserMessage) for m in request.messages)
        for piece in answers[min(asked, len(answers)) - 1]:
            yield TextDelta(piece)
        yield Finish("stop", Usage(1, 1))

    return Native(decide)


async def shown_while_running(agent: Agent, output: Any) -> tuple[RunView, list[str]]:
    view = RunView("q", interval=0)
    seen: list[str] = []
    async for event in agent.stream("q", output=output):
        view.handle(event)
        view.flush()
        if view.answer is not None and (not seen or seen[-1] != view.answer.value):
            seen.append(view.answer.value)
    return view, seen


async def test_a_rejected_answer_starts_again_and_the_valid_one_is_shown(wire: Wire) -> None:
    model = streaming(['{"name": "Bern", ', '"people": "many"}'], ['{"name": "Bern", "people": 1}'])
    view, seen = await shown_while_running(Agent(model), City)
    assert any(">many<" in value and "filling in" in value for value in seen)
    final = view.answer
    assert final is not None and ">1<" in final.value and "filling in" not in final.value
    assert "many" not in final.value  # the rejected answer is gone from the block
    assert sum(w is final for w in view.body.children) == 1


async def test_a_list_answer_fills_in_as_rows(wire: Wire) -> None:
    model = streaming(['{"value": [{"name": "Bern", "people": 1}, {"name": "Ge'])
    _, seen = await shown_while_running(Agent(model), list[City])
    assert any("<thead>" in v and ">Bern<" in v and ">Ge<" in v for v in seen)


def test_text_that_is_not_json_is_shown_escaped(wire: Wire) -> None:
    live = LiveAnswer(False)
    live.append("I cannot <script>answer</script> that. ")
    assert live.flush()
    assert "&lt;script&gt;" in live.value and "<script>" not in live.value


def test_a_key_still_arriving_waits_then_is_hidden(wire: Wire) -> None:
    live = LiveAnswer(False)
    live.append('{"note": "key sk-proj-Zq8')
    live.flush()
    assert "Zq8" not in live.value
    live.append('aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5bC7dE9f", "other": 1}')
    live.finish()
    assert "Zq8aB3" not in live.value and ">1<" in live.value


def test_a_huge_answer_stops_being_parsed_and_says_its_size(wire: Wire, monkeypatch: Any) -> None:
    monkeypatch.setattr(answerlive, "MAX_TEXT", 100)
    live = LiveAnswer(False)
    live.append('{"a": "' + "x" * 80)
    live.flush()
    live.append("y" * 80)
    assert live.flush()
    assert "shown once validated" in live.value and "yyy" not in live.value


async def test_a_run_that_ends_without_a_valid_value_says_so(wire: Wire) -> None:
    model = streaming(['{"name": "Bern", "people": "many"}'])
    view = RunView("q", interval=0)
    async for event in Agent(model).stream("q", output=City):
        view.handle(event)
    assert view.answer is not None
    assert "not validated" in view.answer.value and ">many<" in view.answer.value
