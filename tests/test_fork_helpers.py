"""A fork at an outer step of a run that used helpers (``agent.as_tool``): the fork starts from
the outer conversation as the model saw it at that step, so the helpers' answers before it are
there as the call results they were (no helper runs again for them), and a call the forked run
makes runs its helper afresh, in a conversation of its own."""

from __future__ import annotations

from nbagent import Agent, tool
from nbagent.inspection.fork import compare
from nbagent.messages import ToolMessage
from nbagent.models import Call, ScriptedModel, Turn


def _planner(looked_up: list[str]) -> Agent:
    @tool
    def weather(city: str) -> str:
        """Today's weather in a city."""
        looked_up.append(city)
        return f"{city}: rain"

    researcher = Agent(
        ScriptedModel(
            [Turn(Call("weather", {"city": "Oslo"})), "Oslo: rain today"] * 3, model="researcher"
        ),
        [weather],
    )
    writer = Agent(ScriptedModel(["Take a raincoat."] * 3, model="writer"))
    return Agent(
        ScriptedModel(
            [
                Turn(Call("research", {"prompt": "Oslo?"})),
                Turn(Call("write", {"prompt": "advice from: Oslo: rain today"})),
                "Take a raincoat, says the writer.",
            ],
            model="planner",
        ),
        [
            researcher.as_tool(name="research", description="Looks facts up."),
            writer.as_tool(name="write", description="Writes."),
        ],
    )


def _results(messages: list) -> list[tuple[str, str]]:
    return [(r.name, r.text) for m in messages if isinstance(m, ToolMessage) for r in m.results]


def test_a_fork_after_a_helper_keeps_its_answer_and_runs_the_next_helper_afresh() -> None:
    looked_up: list[str] = []
    planner = _planner(looked_up)
    first = planner.run_sync("What should I pack for Oslo?")
    assert first.stop_reason == "finished" and first.steps == 3
    assert looked_up == ["Oslo"]

    other = ScriptedModel(
        [Turn(Call("write", {"prompt": "a haiku from: Oslo: rain today"})), "A haiku, then."],
        model="another planner",
    )
    fork = first.fork(2, model=other)  # the model's view at step 2: research has answered
    assert _results(fork.messages) == [("research", "Oslo: rain today")]
    again = fork.run_sync(None)
    assert again.stop_reason == "finished", again.error
    assert again.text == "A haiku, then."
    # research was not run again for the fork (its answer is the history's); write ran afresh
    assert looked_up == ["Oslo"]
    assert _results(fork.messages) == [
        ("research", "Oslo: rain today"),
        ("write", "Take a raincoat."),
    ]
    assert len(again.exchanges) == 2  # the fork's own requests: the outer loop's only
    # the original is as it was, and the two runs part where the fork began
    assert _results(planner.messages)[-1] == ("write", "Take a raincoat.")
    assert "they first differ at step 2" in compare(first, again).why


def test_a_fork_at_the_step_that_called_a_helper_runs_it_again() -> None:
    looked_up: list[str] = []
    first = _planner(looked_up).run_sync("What should I pack for Oslo?")
    planner_again = ScriptedModel(  # the planner's turns once more (a scripted model plays once)
        [
            Turn(Call("research", {"prompt": "Oslo?"})),
            Turn(Call("write", {"prompt": "advice"})),
            "Take a raincoat.",
        ],
        model="planner",
    )
    fork = first.fork(1, model=planner_again)  # before research was called
    assert _results(fork.messages) == []
    again = fork.run_sync(None)
    assert again.stop_reason == "finished", again.error
    assert looked_up == ["Oslo", "Oslo"]  # the helper's own tool ran once more, for the fork
    assert [name for name, _ in _results(fork.messages)] == ["research", "write"]
