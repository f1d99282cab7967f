"""The run over time, budgets that end a run cleanly, and observers that never break a run."""

from __future__ import annotations

import asyncio
import base64
import logging
import re
from typing import Any

import pytest

from nbagent import Agent, AutoApprove, Budget, approve, tool
from nbagent.generation import Usage
from nbagent.models import Call, ScriptedModel, Text, Turn

from .conftest import assert_history_valid


@tool
async def slow(n: int) -> str:
    """Sleep n twentieths of a second."""
    await asyncio.sleep(0.02 * n)
    return f"slept {n}"


def test_concurrent_calls_are_side_by_side_and_later_ones_reuse_lanes() -> None:
    model = ScriptedModel(
        [
            Turn(
                Text("go"), Call("slow", {"n": 1}), Call("slow", {"n": 4}), Call("slow", {"n": 2})
            ),
            Turn(Call("slow", {"n": 1})),
            "done",
        ]
    )
    result = Agent(model, [slow], approver=AutoApprove()).run_sync("x")
    timeline = result.timeline()
    tools = [s for s in timeline.spans if s.kind == "tool"]
    assert len(tools) == 4
    first_batch = tools[:3]
    assert sorted(s.lane for s in first_batch) == [1, 2, 3]  # ran at the same time
    for a in first_batch:
        for b in first_batch:
            if a is not b:
                assert a.start < b.end and b.start < a.end  # they overlap
    assert tools[3].lane == 1  # the second batch reuses the first free lane
    models = [s for s in timeline.spans if s.kind == "model"]
    assert [s.label for s in models] == ["step 1", "step 2", "step 3"]
    assert timeline.lanes == 4 and timeline.steps == 3 and timeline.stop_reason == "finished"
    assert all(s.end <= timeline.total + 1e-9 for s in timeline.spans)
    svg = timeline.svg()
    assert svg.startswith("<svg") and svg.count("<rect") >= 7
    assert timeline._repr_mimebundle_()["image/svg+xml"] == svg


def test_waiting_for_a_person_is_its_own_bar_and_names_are_escaped() -> None:
    @tool(name="drop-table_x", needs_approval=True)
    def dangerous() -> str:
        """Careful."""
        return "done"

    async def late_yes(request: Any) -> Any:
        await asyncio.sleep(0.05)
        return approve()

    from nbagent import CallbackApprover

    model = ScriptedModel([Turn(Call("drop-table_x")), "ok"])
    result = Agent(model, [dangerous], approver=CallbackApprover(late_yes)).run_sync("x")
    timeline = result.timeline()
    wait = next(s for s in timeline.spans if s.kind == "approval")
    work = next(s for s in timeline.spans if s.kind == "tool")
    assert wait.lane == work.lane and wait.end <= work.start + 1e-6
    assert wait.duration >= 0.04 and wait.status == "approved"
    assert "waiting for a person" in timeline.summary()
    assert "waiting for you" in timeline.svg()


def test_a_decision_no_person_made_is_not_drawn_as_waiting_for_a_person() -> None:
    # `%agent --approve auto` in the first lesson drew an orange "waiting for you" bar next to
    # a card that said "approved by policy (auto)"
    from nbagent import RuleApprover, ScriptedApprover

    @tool(needs_approval=True)
    def water(room: str) -> str:
        """Water a room."""
        return f"watered {room}"

    rules = RuleApprover(fallback=ScriptedApprover([approve(always=True)]))
    rules.deny("water", room="attic")
    approvers = [AutoApprove(), rules, ScriptedApprover([True])]
    for approver in approvers:
        model = ScriptedModel([Turn(Call("water", {"room": "attic"})), "ok"])
        result = Agent(model, [water], approver=approver).run_sync("x")
        timeline = result.timeline()
        assert [s for s in timeline.spans if s.kind == "approval"] == [], approver
        assert "waiting for a person" not in timeline.summary()
        assert "waiting for you" not in timeline.svg()  # not even in the legend


def test_a_standing_policy_is_no_wait_for_a_person() -> None:
    # A headless notebook run denied by policy showed "0 ms waiting for a person" and a
    # picture for a one-call run: nobody waited, so there is no waiting bar and no picture
    from nbagent import DenyAll

    @tool(needs_approval=True)
    def delete_file(path: str) -> str:
        """Pretend."""
        return "deleted"

    for approver in (AutoApprove(), DenyAll()):
        model = ScriptedModel([Turn(Call("delete_file", {"path": "a"})), "ok"])
        timeline = Agent(model, [delete_file], approver=approver).run_sync("x").timeline()
        assert not [s for s in timeline.spans if s.kind == "approval"]
        assert "waiting" not in timeline.summary()
    model = ScriptedModel([Turn(Call("delete_file", {"path": "a"})), "ok"])
    ran = Agent(model, [delete_file], approver=AutoApprove()).run_sync("x").timeline()
    assert ", 1 tool call, " in ran.summary()  # one call, not "1 tool calls"


def test_the_picture_shrinks_to_a_narrow_output() -> None:
    # JupyterLab shows image/svg+xml as an <img> with no max-width, so a 720 px picture ran
    # past a narrow notebook's edge; the HTML form (preferred by Lab, Notebook 7, nbconvert and
    # VS Code) is the same SVG as an image that never grows wider than its output
    from nbagent.timeline import Span, Timeline

    timeline = Timeline(spans=(Span("tool", "<b>x</b>", 0.0, 1.0, 1),), total=1.0, steps=1, lanes=2)
    bundle = timeline._repr_mimebundle_()
    page = bundle["text/html"]
    assert page.startswith("<img ") and "max-width:100%" in page and "height:auto" in page
    match = re.search(r'src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"', page)
    assert match and base64.b64decode(match.group(1)).decode() == bundle["image/svg+xml"]
    assert "<b>" not in page  # the alt text is escaped too
    assert timeline.summary() in bundle["text/plain"]


def test_a_serving_timeline_has_call_lanes_only_and_keeps_the_latest_bars() -> None:
    from nbagent.events import ToolFinished, ToolStarted
    from nbagent.loop._timing import TimelineBuilder
    from nbagent.tools import ToolCall, ToolResult

    now = [0.0]
    builder = TimelineBuilder(clock=lambda: now[0], keep=10)
    for n in range(40):  # two at a time: two lanes of calls
        first, second = ToolCall(f"a{n}", "touch", "{}"), ToolCall(f"b{n}", "touch", "{}")
        builder.add(ToolStarted(first, {}))
        builder.add(ToolStarted(second, {}))
        now[0] += 0.1
        builder.add(ToolFinished(first, ToolResult("ok"), "done", 0.1))
        builder.add(ToolFinished(second, ToolResult("ok"), "done", 0.1))
    served = builder.build("serving", calls=80)
    assert len(served.spans) <= 20  # bounded, the latest kept
    assert served.spans[-1].start == pytest.approx(3.9)
    assert served.lanes == 2 and {s.lane for s in served.spans} == {0, 1}
    svg = served.svg()
    assert ">calls 1<" in svg and ">calls 2<" in svg and ">model<" not in svg
    assert "80 served calls" in svg and "step" not in svg
    assert served.summary() == "timeline: 80 served calls, 4.0 s"
    run = builder.build("done")  # the same bars as a run's: the model's lane first
    assert run.lanes == 3 and ">model<" in run.svg() and run.calls is None


def test_a_budget_ends_the_run_before_a_request_it_cannot_pay_for() -> None:
    turns = [Turn(Call("slow", {"n": 0}), usage=Usage(60, 40)) for _ in range(5)] + ["done"]
    agent = Agent(ScriptedModel(turns), [slow], approver=AutoApprove(), budget=Budget(tokens=250))
    result = agent.run_sync("spend")
    assert result.stop_reason == "budget"
    # reserved before each request: the third, expected to use about as much as the second
    # (100), does not fit in the 50 left, so it is never sent
    assert result.steps == 2 and result.usage.total_tokens == 200
    assert "expected to use about 100" in result.stop_detail
    assert_history_valid(agent.messages)  # every call of the last step was answered
    by_requests = Agent(ScriptedModel(turns), [slow], approver=AutoApprove())
    limited = by_requests.run_sync("spend", budget=Budget(requests=2))
    assert limited.stop_reason == "budget" and limited.steps == 2
    assert by_requests.run_sync("again", budget=Budget(requests=9)).stop_reason == "finished"
    with pytest.raises(ValueError, match=r"Budget\.tokens"):
        Budget(tokens=0)


def test_an_observer_sees_every_event_and_cannot_break_the_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[tuple[str, str]] = []
    agent = Agent(
        ScriptedModel([Turn(Call("slow", {"n": 0})), "done"]), [slow], approver=AutoApprove()
    )
    stop = agent.observe(lambda run_id, event: seen.append((run_id, type(event).__name__)))

    def broken(run_id: str, event: Any) -> None:
        raise RuntimeError("observer bug")

    agent.observe(broken)
    with caplog.at_level(logging.ERROR, logger="nbagent"):
        result = agent.run_sync("x")
    assert result.stop_reason == "finished"
    names = [name for _, name in seen]
    assert names[0] == "RunStarted" and names[-1] == "RunFinished" and "ToolFinished" in names
    assert len({run_id for run_id, _ in seen}) == 1
    assert "observer" in caplog.text
    stop()
    agent.observers.remove(broken)
    before = len(seen)
    agent.generator = ScriptedModel(["again"])
    agent.run_sync("y")
    assert len(seen) == before
