"""What the model saw (exchanges), step mode (pauses, resumes, edits) and forks, in the loop
itself on offline models; provider histories after edits and forks: tests/providers/
test_step_and_fork.py."""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import pytest

from nbagent import Agent, AutoApprove, ScriptedApprover, tool
from nbagent.errors import AgentError, ProviderError
from nbagent.events import StepPaused, StepResumed, ToolFinished
from nbagent.generation import Finish, Options, Request, StreamRetry, TextDelta
from nbagent.inspection.fork import compare
from nbagent.inspection.stepping import REMOVED, Resume, next_step, run_to_end, stop_run
from nbagent.messages import (
    AssistantMessage,
    ReasoningPart,
    ToolMessage,
    messages_from_json,
    messages_to_json,
)
from nbagent.models import Call, FunctionModel, ScriptedModel, Text, Turn
from nbagent.models.scripted import Reasoning

from .conftest import assert_history_valid


@tool
def lookup(city: str) -> str:
    """The weather in a city."""
    return f"{city}: sunny"


@tool
def secret_lookup(city: str) -> str:
    """The weather, from a private source."""
    return f"{city}: 21 °C"


def _turns() -> list[Any]:
    return [
        Turn(Text("Looking.", chunks=2), Call("lookup", {"city": "Paris"}, id="c1")),
        Turn(Call("lookup", {"city": "Oslo"}, id="c2")),
        "Sunny in both.",
    ]


def test_each_step_keeps_what_the_model_saw_and_what_came_back() -> None:
    agent = Agent(ScriptedModel(_turns()), [lookup], instructions="Be brief.")
    result = agent.run_sync("Weather in Paris and Oslo?")
    steps = result.exchanges
    assert [e.step for e in steps] == [1, 2, 3] and result.exchange(2) is steps[1]
    first = steps[0]
    assert first.request.instructions == "Be brief."
    assert [d.name for d in first.request.tools] == ["lookup"]
    assert [type(m).__name__ for m in first.request.messages] == ["UserMessage"]
    assert first.answer.text == "Looking." and first.answer.tool_calls[0].id == "c1"
    assert first.finish == "tool_calls" and first.status == "complete"
    # the messages are the conversation's own objects: nothing stored twice
    assert steps[2].request.messages[0] is agent.messages[0]
    assert [type(m).__name__ for m in steps[2].request.messages] == [
        "UserMessage",
        "AssistantMessage",
        "ToolMessage",
        "AssistantMessage",
        "ToolMessage",
    ]
    assert steps[2].answer.text == "Sunny in both." and steps[2].finish == "stop"
    with pytest.raises(ValueError, match=r"run-[a-z0-9]+-\d+ has no step 4: it has steps 1 to 3"):
        result.exchange(4)
    # a result travels (Dask, a checkpoint) without its agent, its exchanges intact
    copied = pickle.loads(pickle.dumps(result))
    assert copied.agent is None and copied.exchanges[2].answer.text == "Sunny in both."


def test_reasoning_retries_and_a_failed_request_are_kept() -> None:
    agent = Agent(ScriptedModel([Turn(Reasoning("thinking it over"), "Done.")]))
    result = agent.run_sync("hi")
    assert isinstance(result.exchanges[0].answer.content[0], ReasoningPart)
    assert result.exchanges[0].answer.content[0].text == "thinking it over"

    def failing(request: Request) -> Any:
        raise ProviderError("the model went away")

    failed = Agent(FunctionModel(failing)).run_sync("hi", raise_on_error=False)
    (exchange,) = failed.exchanges
    assert exchange.status == "failed" and isinstance(exchange.error, ProviderError)

    async def retried(request: Request) -> Any:
        yield StreamRetry("the stream broke", 1, 0.0)
        yield TextDelta("fine")
        yield Finish("stop")

    again = Agent(FunctionModel(retried)).run_sync("hi")
    assert again.exchanges[0].retries == 1 and again.text == "fine"


def test_step_mode_pauses_before_each_request_and_each_batch() -> None:
    approver = ScriptedApprover(pauses=[next_step(), next_step(), run_to_end()])
    agent = Agent(ScriptedModel(_turns()), [lookup], approver=approver)
    events: list[Any] = []
    agent.observe(lambda _run, e: events.append(e))
    result = agent.run_sync("Weather?", step=True)
    assert result.stop_reason == "finished"
    assert [(p.kind, p.step) for p in approver.paused] == [
        ("request", 1),
        ("calls", 1),
        ("request", 2),  # then: run to the end, no more pauses
    ]
    first = approver.paused[0]
    assert first.request is not None and first.request.messages[-1].text == "Weather?"
    assert [c.name for c in approver.paused[1].calls] == ["lookup"]
    assert [r.call_id for r in approver.paused[2].results] == ["c1"]  # what it is about to read
    paused = [e for e in events if isinstance(e, StepPaused)]
    resumed = [e for e in events if isinstance(e, StepResumed)]
    assert len(paused) == len(resumed) == 3
    assert [r.action for r in resumed] == ["next", "next", "run"]
    assert [r.kind for r in resumed] == ["request", "calls", "request"]


def test_stop_at_a_pause_ends_the_run_with_every_call_answered() -> None:
    ran: list[str] = []

    @tool
    def record(city: str) -> str:
        """Record a city."""
        ran.append(city)
        return "ok"

    approver = ScriptedApprover(pauses=[next_step(), stop_run()])
    model = ScriptedModel([Turn(Call("record", {"city": "Rome"}, id="r1"))])
    agent = Agent(model, [record], approver=approver)
    result = agent.run_sync("go", step=True)
    assert result.stop_reason == "cancelled" and ran == []  # stopped before the batch ran
    assert_history_valid(agent.messages)
    last = agent.messages[-1]
    assert isinstance(last, ToolMessage) and "cancelled" in last.results[0].text
    # the agent goes on: the next run is a normal one
    model.add("after")
    assert agent.run_sync("again").text == "after"


def test_edits_at_a_pause_rewrite_or_remove_results_and_are_marked() -> None:
    model = ScriptedModel(
        [
            Turn(
                Call("lookup", {"city": "Paris"}, id="p"), Call("lookup", {"city": "Oslo"}, id="o")
            ),
            "ok",
        ]
    )
    approver = ScriptedApprover(
        pauses=[
            next_step(),
            next_step(),
            next_step(
                results={"p": "Paris: raining"}, remove=("o",), instructions="Answer in French."
            ),
        ]
    )
    agent = Agent(model, [lookup], approver=approver, instructions="Be brief.")
    result = agent.run_sync("Weather?", step=True)
    seen = model.requests[-1]
    assert seen.instructions == "Answer in French."  # this request only
    tool_message = seen.messages[-1]
    assert isinstance(tool_message, ToolMessage)
    paris, oslo = tool_message.results
    assert paris.text == "Paris: raining" and paris.edited
    assert oslo.text == REMOVED and oslo.edited
    assert agent.messages[-2] == tool_message  # the history holds the edit too
    assert agent.instructions == "Be brief."
    edits = result.exchanges[1].edited
    assert edits == (
        "rewrote the result of lookup (p)",
        "removed the result of lookup (o)",
        "instructions changed for this request",
    )
    assert_history_valid(agent.messages)
    # marked edited in what a recording or a saved conversation holds
    again = messages_from_json(messages_to_json(agent.messages))
    assert [r.edited for r in again[2].results] == [True, True]  # type: ignore[union-attr]


def test_switching_the_model_for_one_step() -> None:
    other = ScriptedModel(["From the other model."], model="other")
    approver = ScriptedApprover(pauses=[next_step(), next_step(), next_step(model=other)])
    agent = Agent(ScriptedModel(_turns()), [lookup], approver=approver)
    result = agent.run_sync("Weather?", step=True)
    assert result.exchanges[1].model == "other" and result.exchanges[1].answer.text == (
        "From the other model."
    )
    assert result.exchanges[1].edited == ("answered by other",)
    assert agent.generator is not other  # for that request only


@pytest.mark.parametrize(
    ("resume", "message"),
    [
        (next_step(results={"nope": "x"}), "no result of call 'nope' is about to be read"),
        (next_step(results={"c1": None}), "cannot be None: every call keeps its one result"),
        (next_step(results={"c1": "a"}, remove=("c1",)), "rewrite a result or remove it"),
        (Resume("sideways"), "unknown action"),  # type: ignore[arg-type]
        (next_step(instructions="x" * 200_001), "at most 200,000 are sent from a pause"),
    ],
)
def test_an_edit_that_would_break_the_history_is_refused_saying_why(
    resume: Resume, message: str
) -> None:
    approver = ScriptedApprover(pauses=[next_step(), next_step(), resume])
    agent = Agent(ScriptedModel(_turns()), [lookup], approver=approver)
    result = agent.run_sync("Weather?", step=True, raise_on_error=False)
    assert result.stop_reason == "failed" and message in str(result.error)
    assert_history_valid(agent.messages)  # nothing half-done
    assert not any(
        getattr(r, "edited", False) for m in agent.messages for r in getattr(m, "results", ())
    )


def test_an_edit_at_a_calls_pause_is_refused() -> None:
    approver = ScriptedApprover(pauses=[next_step(), next_step(instructions="no")])
    agent = Agent(ScriptedModel(_turns()), [lookup], approver=approver)
    result = agent.run_sync("Weather?", step=True, raise_on_error=False)
    assert "edits are made at a pause before a model request" in str(result.error)


def test_step_mode_needs_someone_to_click() -> None:
    agent = Agent(ScriptedModel(_turns()), [lookup], approver=AutoApprove())
    with pytest.raises(AgentError, match="step mode needs an approver that can pause"):
        agent.run_sync("Weather?", step=True)
    assert agent.messages == []  # nothing started


def test_fork_from_a_finished_run_at_any_step_leaves_the_original_untouched() -> None:
    agent = Agent(ScriptedModel(_turns()), [lookup])
    original = agent.run_sync("Weather in Paris and Oslo?")
    before = list(agent.messages)
    forked = original.fork(2, model=ScriptedModel(["Forked: only Paris."], model="fork"))
    assert [type(m).__name__ for m in forked.messages] == [
        "UserMessage",
        "AssistantMessage",
        "ToolMessage",
    ]
    again = forked.run_sync(None)  # step 2 asked again, of another model
    assert again.text == "Forked: only Paris."
    assert again.exchanges[0].request.messages[:3] == original.exchanges[1].request.messages
    assert agent.messages == before and original.exchanges[2].answer.text == "Sunny in both."
    assert forked.conversation_id != agent.conversation_id
    # a fork with a prompt: the conversation as of step 1, then the new prompt
    other = agent.fork(original, 1, model=ScriptedModel(["Rome is sunny."]))
    answered = other.run_sync("What about Rome?")
    assert answered.exchanges[0].request.messages[-1].text == "What about Rome?"
    assert_history_valid(other.messages)


def test_fork_from_a_live_run() -> None:
    async def go() -> Any:
        release = asyncio.Event()

        @tool
        async def slow(city: str) -> str:
            """Slow weather."""
            await release.wait()
            return "late"

        model = ScriptedModel([Turn(Call("slow", {"city": "Paris"})), "done"])
        agent = Agent(model, [slow])
        run = agent.start("weather")
        for _ in range(500):
            if run.exchanges:
                break
            await asyncio.sleep(0.01)
        twin = agent.fork(run, 1, model=ScriptedModel(["Asked again while it ran."]))
        answered = await twin.run(None)
        release.set()
        await run.result()
        return answered

    assert asyncio.run(go()).text == "Asked again while it ran."


@pytest.mark.parametrize(
    ("step", "message"), [(9, "has no step 9: it has steps 1 to 3"), (None, "at which step")]
)
def test_a_fork_at_a_step_that_does_not_exist_says_so(step: int | None, message: str) -> None:
    agent = Agent(ScriptedModel(_turns()), [lookup])
    result = agent.run_sync("Weather?")
    with pytest.raises(AgentError, match=message):
        agent.fork(result, step)


def test_a_fork_of_a_run_whose_tools_are_gone_says_what_to_do() -> None:
    agent = Agent(ScriptedModel(_turns()), [lookup])
    result = agent.run_sync("Weather?")
    agent.remove_tool("lookup")
    with pytest.raises(AgentError, match=r"tools this agent no longer has \(lookup\)"):
        agent.fork(result, 2)
    assert agent.fork(result, 2, tools=[secret_lookup]).tools.keys() == {"secret_lookup"}
    loaded = pickle.loads(pickle.dumps(result))
    with pytest.raises(AgentError, match="does not know its agent"):
        loaded.fork(2)


def test_compare_finds_where_a_fork_parts_from_its_original() -> None:
    agent = Agent(ScriptedModel(_turns()), [lookup])
    original = agent.run_sync("Weather?")
    fork = original.fork(3, model=ScriptedModel(["Cloudy in both."], model="fork"))
    forked = fork.run_sync(None)
    shown = compare(original, forked)
    assert shown.first_difference == 3
    assert "they first differ at step 3: they answered differently (scripted vs fork)" in shown.why
    assert shown.rows[0][2] is None and shown.rows[2][2] is not None  # the fork began at step 3
    text = str(shown)
    assert "Sunny in both." in text and "Cloudy in both." in text
    page = shown._repr_html_()
    assert "<script" not in page and "Cloudy in both." in page
    same = compare(original, original)
    assert same.first_difference is None and "the same way" in same.why
    # the steps before the fork are the original's, said so (not "no such step")
    assert "as " + shown.names[0] + " (before the fork)" in text
    assert "(before the fork)" in page and "no such step" not in page


def test_compare_aligns_a_fork_with_a_new_prompt_in_either_order() -> None:
    agent = Agent(ScriptedModel(_turns()), [lookup])
    original = agent.run_sync("Weather?")
    fork = original.fork(2, model=ScriptedModel(["Use the cache."], model="fork"))
    forked = fork.run_sync("Try it with the cache tool")
    for first, second in ((original, forked), (forked, original)):
        shown = compare(first, second)
        assert shown.first_difference == 2, shown.why
        assert "they first differ at step 2: they were asked different things" in shown.why
        assert [step for step, _, _ in shown.rows] == [1, 2, 3]
        fork_side = 2 if first is original else 1
        assert shown.rows[0][fork_side] is None and shown.rows[1][fork_side] is not None
        assert "Try it with the cache tool" in shown.rows[1][fork_side].asked
        assert shown.rows[2][fork_side] is None and "no such step" in str(shown)
    # a run that went on after another (the same conversation) is not taken for a fork
    going_on = Agent(ScriptedModel([*_turns(), "Rain tomorrow."]), [lookup])
    before = going_on.run_sync("Weather?")
    after = going_on.run_sync("And tomorrow?")
    shown = compare(before, after)
    assert shown.starts == (1, 1) and shown.first_difference == 1
    assert "before the fork" not in str(shown)


def test_options_and_tool_choice_are_in_the_request() -> None:
    options = Options(temperature=0.2, max_tokens=50)
    agent = Agent(ScriptedModel(["ok"]), [lookup], options=options)
    (exchange,) = agent.run_sync("hi").exchanges
    assert exchange.request.options.temperature == 0.2
    assert exchange.request.options.tool_choice == "auto"
    assert isinstance(exchange.answer, AssistantMessage)
    with pytest.raises(TypeError, match="does not say what body it sends"):
        exchange.body(agent.generator)


def test_a_tool_result_stays_the_tools_own_when_nobody_edits() -> None:
    finished: list[ToolFinished] = []
    agent = Agent(ScriptedModel(_turns()), [lookup], approver=ScriptedApprover(pauses=[]))
    agent.observe(lambda _r, e: finished.append(e) if isinstance(e, ToolFinished) else None)
    agent.run_sync("Weather?", step=True)  # the scripted approver runs it to the end at once
    assert all(not r.edited for m in agent.messages for r in getattr(m, "results", ()))
    assert [f.result.text for f in finished] == ["Paris: sunny", "Oslo: sunny"]


def test_compare_and_fork_say_which_argument_was_not_a_run(monkeypatch: pytest.MonkeyPatch) -> None:
    import nbagent.inspection.fork

    monkeypatch.setattr(nbagent.inspection.fork, "_lookup", None)  # no notebook session here
    agent = Agent(ScriptedModel(_turns()), [lookup])
    result = agent.run_sync("Weather?")
    with pytest.raises(AgentError, match="the second run is 'run-99', a name: outside a notebook"):
        compare(result, "run-99")
    with pytest.raises(AgentError, match=r"the first run is a int, not a run: give a RunResult"):
        compare(42, result)
    with pytest.raises(AgentError, match="the run to fork is a dict, not a run"):
        agent.fork({}, 1)
    runs = {"run-7": result}

    def find(name: str) -> Any:
        if name not in runs:
            raise ValueError(f"no run named {name!r} in this session; its runs are: run-7")
        return runs[name]

    monkeypatch.setattr(nbagent.inspection.fork, "_lookup", find)  # as the notebook sets it
    with pytest.raises(AgentError, match="the second run: no run named 'run-99' in this session"):
        compare(result, "run-99")
    assert compare("run-7", result).first_difference is None
    assert agent.fork("run-7", 1).messages[-1].text == "Weather?"


def test_a_fork_refuses_only_tools_its_history_calls() -> None:
    """A tool offered at the step but never called there is no reason to refuse a fork."""
    agent = Agent(ScriptedModel(_turns()), [lookup, secret_lookup])
    result = agent.run_sync("Weather?")
    agent.remove_tool("secret_lookup")  # offered, never called
    assert agent.fork(result, 2).messages
    agent.remove_tool("lookup")  # called at step 1: the history of step 2 holds its call
    with pytest.raises(AgentError, match=r"tools this agent no longer has \(lookup\)"):
        agent.fork(result, 2)
    assert agent.fork(result, 1).messages[-1].text == "Weather?"  # before any call
