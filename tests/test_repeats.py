"""The repeat guard on offline models: what counts as a repeat, the note the model reads, the
fold events, the pause (Go on / Stop through the approver), rules, and the headless stop."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import pytest

from nbagent import Agent, AutoApprove, DenyAll, Limits, ScriptedApprover, tool
from nbagent.approvals.approval import InteractiveApprover
from nbagent.approvals.rules import ApprovalRule, RuleApprover, RuleError, RuleSet, parse_rule
from nbagent.content import TextPart, ToolResult, image_part
from nbagent.events import StepPaused, StepResumed, ToolCallRepeated, ToolFinished
from nbagent.inspection.stepping import Resume, next_step, run_to_end, stop_run
from nbagent.messages import ToolMessage
from nbagent.models import Call, ScriptedModel, Turn
from nbagent.recording import record, replay

from .conftest import assert_history_valid

NOTE = "you have now made this exact call"


def _looper(ran: list[str]) -> Any:
    @tool
    def list_variables() -> str:
        """The variables in the namespace."""
        ran.append("list")
        return "df: DataFrame (3 rows)"

    return list_variables


def _same_calls(count: int, name: str = "list_variables", args: Any = None) -> ScriptedModel:
    turns: list[Any] = [Turn(Call(name, args or {}, id=f"c{i}")) for i in range(count)]
    return ScriptedModel([*turns, "The columns are a and b."])


def _results(messages: Any) -> list[str]:
    return [r.text for m in messages if isinstance(m, ToolMessage) for r in m.results]


async def _collect(agent: Agent, prompt: str = "What are the columns of df?") -> list[Any]:
    return [event async for event in agent.stream(prompt)]


def test_a_model_that_repeats_itself_is_told_then_stopped_where_nobody_can_answer() -> None:
    ran: list[str] = []
    agent = Agent(_same_calls(20), [_looper(ran)], approver=AutoApprove())
    events = asyncio.run(_collect(agent))
    result = events[-1].result
    assert result.stop_reason == "repeated_call"
    assert result.steps == 4 and ran == ["list"] * 3  # the fourth was not run
    assert_history_valid(agent.messages)
    texts = _results(agent.messages)
    assert NOTE not in texts[0]
    assert f"{NOTE} (list_variables with the same arguments) 2 times" in texts[1]
    assert "3 times" in texts[2] and "Making it again stops the run" in texts[2]
    assert texts[3].startswith("This call was not run, and the run was stopped")
    assert "nobody could be asked" in texts[3]
    # the person sees the tool's own result; the model read it with the note
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert finished[1].original is not None and NOTE not in finished[1].original.text
    assert NOTE in finished[1].result.text and finished[3].status == "denied"
    folds = [e for e in events if isinstance(e, ToolCallRepeated)]
    assert [(f.call_id, f.first_call_id, f.times) for f in folds] == [
        ("c1", "c0", 2),
        ("c2", "c0", 3),
    ]
    assert not [e for e in events if isinstance(e, StepPaused)]  # nobody to ask


def test_deny_all_and_a_script_without_a_resume_stop_too() -> None:
    for approver in (DenyAll(), ScriptedApprover()):
        agent = Agent(_same_calls(20), [_looper([])], approver=approver)
        result = agent.run_sync("cols?")
        assert result.stop_reason == "repeated_call" and result.steps == 4
        assert_history_valid(agent.messages)
        if isinstance(approver, ScriptedApprover):  # it was asked, and had no answer scripted
            (pause,) = approver.paused
            assert pause.kind == "repeat" and pause.repeats == 3
            assert [c.id for c in pause.calls] == ["c3"]


def test_arguments_count_as_canonical_json_and_other_arguments_are_progress() -> None:
    ran: list[str] = []

    @tool
    def lookup(a: int, b: int) -> str:
        """Look up."""
        ran.append(f"{a}{b}")
        return "same answer"

    # the same arguments in another key order are the same call
    turns = [
        Turn(Call("lookup", {"a": 1, "b": 2}, id="c0")),
        Turn(Call("lookup", {"b": 2, "a": 1}, id="c1")),
    ]
    agent = Agent(ScriptedModel([*turns, "ok"]), [lookup], approver=AutoApprove())
    agent.run_sync("go")
    assert NOTE in _results(agent.messages)[1]

    # other arguments each time: never a repeat, however alike the answers
    ran.clear()
    turns = [Turn(Call("lookup", {"a": i, "b": 0}, id=f"d{i}")) for i in range(8)]
    agent = Agent(ScriptedModel([*turns, "ok"]), [lookup], approver=AutoApprove())
    result = agent.run_sync("go")
    assert result.stop_reason == "finished" and len(ran) == 8
    assert not [t for t in _results(agent.messages) if NOTE in t]


def test_a_result_that_changes_is_progress_and_a_poll_is_counted_from_its_last_change() -> None:
    answers = iter(["queued", "running", "running", "done", "done", "done", "done", "done"])

    @tool
    def poll(job: str) -> str:
        """The state of a job."""
        return next(answers)

    turns = [Turn(Call("poll", {"job": "j1"}, id=f"p{i}")) for i in range(8)]
    agent = Agent(ScriptedModel([*turns, "ok"]), [poll], approver=AutoApprove())
    result = agent.run_sync("wait for j1")
    texts = _results(agent.messages)
    assert [NOTE in t for t in texts[:4]] == [False, False, True, False]  # running ×2, done
    assert "2 times" in texts[2]
    # done, done, done: then the fourth "done" is not asked for
    assert result.stop_reason == "repeated_call" and len(texts) == 7
    assert texts[-1].startswith("This call was not run")


def test_progress_anywhere_starts_every_count_afresh_and_loops_of_two_are_caught() -> None:
    @tool
    def look() -> str:
        """Look."""
        return "nothing new"

    @tool
    def read(page: int) -> str:
        """Read a page."""
        return f"page {page}"

    # look, read 1, look, read 2 …: the run reads on between the looks
    turns: list[Any] = []
    for page in range(6):
        turns += [Turn(Call("look", {}, id=f"l{page}")), Turn(Call("read", {"page": page}))]
    agent = Agent(ScriptedModel([*turns, "ok"]), [look, read], approver=AutoApprove())
    result = agent.run_sync("go", max_steps=30)
    assert result.stop_reason == "finished"
    assert not [t for t in _results(agent.messages) if NOTE in t]

    # look, read 1, look, read 1 …: nothing changes, and the pair is caught
    turns = []
    for round_ in range(10):
        turns += [
            Turn(Call("look", {}, id=f"l{round_}")),
            Turn(Call("read", {"page": 1}, id=f"r{round_}")),
        ]
    agent = Agent(ScriptedModel([*turns, "ok"]), [look, read], approver=AutoApprove())
    events = asyncio.run(_collect(agent, "go"))
    assert events[-1].result.stop_reason == "repeated_call"
    folds = [
        (e.call_id, e.first_call_id, e.times) for e in events if isinstance(e, ToolCallRepeated)
    ]
    # the first read was the last progress (it counts 1); the first look after it counts 1
    assert folds[:2] == [("r1", "r0", 2), ("l2", "l1", 2)]
    assert_history_valid(agent.messages)


def test_images_and_errors_are_part_of_the_result() -> None:
    red, blue = (image_part(_png(c)) for c in ((255, 0, 0), (0, 0, 255)))
    images = itertools.cycle([red, blue])

    @tool
    def snapshot() -> ToolResult:
        """A picture."""
        return ToolResult((next(images),))

    agent = Agent(_same_calls(6, "snapshot"), [snapshot], approver=AutoApprove())
    assert agent.run_sync("go").stop_reason == "finished"  # each picture differs from the last

    flips = itertools.cycle([True, False])

    @tool
    def flaky() -> ToolResult:
        """Fails every other time, with the same words."""
        return ToolResult((TextPart("same words"),), next(flips))

    agent = Agent(_same_calls(6, "flaky"), [flaky], approver=AutoApprove())
    assert agent.run_sync("go").stop_reason == "finished"


def test_a_call_that_fails_again_is_a_repeat_whatever_its_error_says() -> None:
    """SmolLM2 sent run_python the same unrunnable code twenty times: each SyntaxError named
    the step it ran at, so no two results were alike, and the loop went to the step limit."""
    steps = itertools.count(1)

    @tool
    def run_code(code: str) -> str:
        """Run code."""
        raise SyntaxError(f"invalid syntax (<run step {next(steps)}>, line 1)")

    agent = Agent(_same_calls(20, "run_code", {"code": "x y"}), [run_code])
    agent.approver = AutoApprove()
    result = agent.run_sync("go")
    assert result.stop_reason == "repeated_call" and result.steps == 4
    texts = _results(agent.messages)
    assert "step 1" in texts[0] and "step 2" in texts[1]  # the errors' words differ
    assert "2 times, and it failed each time" in texts[1]
    assert "run_code with these arguments failed 3 times in a row" in texts[3]
    # a success after the failures is progress
    outcomes = iter([False, False, True, True, False, True])

    @tool
    def fetch(url: str) -> str:
        """Fetch."""
        if not next(outcomes):
            raise ConnectionError("refused")
        return "the page"

    agent = Agent(_same_calls(6, "fetch", {"url": "u"}), [fetch], approver=AutoApprove())
    result = agent.run_sync("go")
    texts = _results(agent.messages)
    assert [NOTE in t for t in texts] == [False, True, False, True, False, False]
    assert result.stop_reason == "finished"


def _png(color: tuple[int, int, int]) -> bytes:
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (4, 4), color).save(out, "PNG")
    return out.getvalue()


def test_go_on_allows_as_many_again_and_stop_ends_the_run_with_its_reason() -> None:
    ran: list[str] = []
    approver = ScriptedApprover(pauses=[next_step(), stop_run()])
    agent = Agent(_same_calls(20), [_looper(ran)], approver=approver)
    events = asyncio.run(_collect(agent))
    result = events[-1].result
    assert [p.repeats for p in approver.paused] == [3, 6]
    assert result.stop_reason == "repeated_call" and len(ran) == 6
    assert "the person stopped it" in _results(agent.messages)[-1]
    resumed = [(e.action, e.kind) for e in events if isinstance(e, StepResumed)]
    assert resumed == [("next", "repeat"), ("stop", "repeat")]
    assert_history_valid(agent.messages)


def test_run_lets_the_tool_repeat_for_the_rest_of_the_run() -> None:
    approver = ScriptedApprover(pauses=[run_to_end()])
    agent = Agent(_same_calls(8), [_looper([])], approver=approver)
    result = agent.run_sync("cols?")
    assert result.stop_reason == "finished" and len(approver.paused) == 1
    assert "8 times" in _results(agent.messages)[-1]  # the model is still told


def test_an_allow_repeats_rule_goes_on_without_asking_and_says_so() -> None:
    ran: list[str] = []
    tool_ = _looper(ran)
    rules = RuleApprover(fallback=AutoApprove(), tools=[tool_])
    rules.allow_repeats("list_variables")
    agent = Agent(_same_calls(6), [tool_], approver=rules)
    events = asyncio.run(_collect(agent))
    assert events[-1].result.stop_reason == "finished" and len(ran) == 6
    resumed = [e for e in events if isinstance(e, StepResumed)]
    assert resumed and resumed[0].edits == ("allowed by the rule `allow repeats list_variables`",)
    assert not [e for e in events if isinstance(e, StepPaused)]


def test_a_rule_about_some_arguments_allows_only_those() -> None:
    @tool
    def status(job: str) -> str:
        """A job's status."""
        return "running"

    rules = RuleApprover(fallback=AutoApprove(), tools=[status])
    rules.rules.add(parse_rule("allow repeats status job=build-*"))
    agent = Agent(_same_calls(6, "status", {"job": "build-7"}), [status], approver=rules)
    assert agent.run_sync("go").stop_reason == "finished"
    agent = Agent(_same_calls(6, "status", {"job": "deploy"}), [status], approver=rules)
    assert agent.run_sync("go").stop_reason == "repeated_call"


def test_going_on_to_the_end_through_rules_keeps_a_rule_for_the_session() -> None:
    person = InteractiveApprover()
    rules = RuleApprover(RuleSet(), fallback=person)

    async def main() -> Any:
        agent = Agent(_same_calls(6), [_looper([])], approver=rules)
        run = agent.start("cols?")
        async for event in run.events():
            if isinstance(event, StepPaused):
                assert person.resume(event.pause.id, run_to_end(by="person"))
        return await run.result()

    assert asyncio.run(main()).stop_reason == "finished"
    assert [r.text for r in rules.rules] == ["allow repeats list_variables"]


def test_nobody_answering_within_the_approval_timeout_stops_the_run() -> None:
    agent = Agent(
        _same_calls(8), [_looper([])], approver=InteractiveApprover(), approval_timeout=0.2
    )
    result = agent.run_sync("cols?")
    assert result.stop_reason == "repeated_call"
    assert "nobody answered within 0.2 s" in _results(agent.messages)[-1]


def test_an_approver_whose_pause_fails_or_answers_nonsense_stops_the_run() -> None:
    class Broken(AutoApprove):
        def __init__(self, answer: Any) -> None:
            self.answer = answer

        async def pause(self, _pause: Any) -> Any:
            if isinstance(self.answer, Exception):
                raise self.answer
            return self.answer

    for answer, said in (
        (RuntimeError("boom"), "the approver failed: RuntimeError: boom"),
        ("yes", "the answer was refused"),
        (Resume("next", instructions="x"), "the answer was refused"),
    ):
        agent = Agent(_same_calls(8), [_looper([])], approver=Broken(answer))
        result = agent.run_sync("cols?")
        assert result.stop_reason == "repeated_call", answer
        assert said in _results(agent.messages)[-1]
        assert_history_valid(agent.messages)


def test_max_repeats_sets_the_bound_and_none_turns_the_guard_off() -> None:
    ran: list[str] = []
    agent = Agent(
        _same_calls(20), [_looper(ran)], approver=AutoApprove(), limits=Limits(max_repeats=1)
    )
    assert agent.run_sync("cols?").stop_reason == "repeated_call" and ran == ["list"]
    ran.clear()
    agent = Agent(
        _same_calls(20), [_looper(ran)], approver=AutoApprove(), limits=Limits(max_repeats=None)
    )
    result = agent.run_sync("cols?")
    assert result.stop_reason == "max_steps" and len(ran) == 20
    assert not [t for t in _results(agent.messages) if NOTE in t]
    for bad in (0, -1, True, 2.5):
        with pytest.raises(ValueError, match="max_repeats"):
            Limits(max_repeats=bad)  # type: ignore[arg-type]


def test_repeated_calls_in_one_answer_are_counted_too() -> None:
    ran: list[str] = []
    calls = [Call("list_variables", {}, id=f"b{i}") for i in range(4)]
    agent = Agent(ScriptedModel([Turn(*calls), Turn(*calls[:1]), "ok"]), [_looper(ran)])
    agent.approver = AutoApprove()
    result = agent.run_sync("cols?")
    # the four of the batch ran (the count was 0 when they began); the next is not run
    assert len(ran) == 4 and result.stop_reason == "repeated_call"
    assert_history_valid(agent.messages)


def test_allow_repeats_is_read_written_and_kept_apart_from_a_tool_named_repeats() -> None:
    rule = parse_rule("allow repeats list_variables")
    assert (rule.effect, rule.tool, rule.text) == ("repeat", "list_variables", rule.text)
    assert rule.text == "allow repeats list_variables"
    assert parse_rule(rule.text) == rule
    assert parse_rule("allow repeats").tool == "repeats"  # a tool that is named so
    named = parse_rule("allow repeats mode=fast")
    assert (named.effect, named.tool, named.where) == ("allow", "repeats", (("mode", "fast"),))
    assert parse_rule("allow repeats poll job=j*").where == (("job", "j*"),)
    with pytest.raises(RuleError):
        ApprovalRule("sometimes", "x")  # type: ignore[arg-type]
    # an allow-repeats rule decides no call
    rules = RuleSet([rule])
    assert rules.decide("list_variables", {}) is None and not rules.allows_tool("list_variables")


def test_a_replay_of_a_run_that_stopped_on_repeats_replays_the_same(tmp_path: Path) -> None:
    recorder = record(_same_calls(20))
    first = Agent(recorder, [_looper([])], approver=AutoApprove()).run_sync("cols?")
    assert first.stop_reason == "repeated_call"
    path = recorder.recording.save(tmp_path / "repeats.json")
    ran: list[str] = []
    agent = Agent(replay(path), [_looper(ran)], approver=AutoApprove())
    second = agent.run_sync("cols?")
    assert second.stop_reason == "repeated_call" and second.steps == first.steps
    assert second.messages == first.messages and ran == ["list"] * 3


def test_a_batch_row_that_stopped_on_repeats_is_failed_saying_why() -> None:
    agent = Agent(_same_calls(20), [_looper([])])
    table = agent.map_sync(["What are the columns of df?"], approver="auto", progress=None)
    row = table.iloc[0]
    assert row["status"] == "failed" and row["stop_reason"] == "repeated_call"
    assert "repeated the same call without progress" in row["error"]


def test_a_recording_made_before_the_guard_replays_as_it_was_recorded(tmp_path: Path) -> None:
    """A file without ``repeat_guard`` (every lesson recorded before the guard) holds requests
    without notes: replayed with the notes, it diverged at the first repeat."""
    recorder = record(_same_calls(5))
    agent = Agent(recorder, [_looper([])], approver=AutoApprove(), limits=Limits(max_repeats=None))
    first = agent.run_sync("cols?")  # a loop of five, recorded by a loop without the guard
    assert first.stop_reason == "finished" and first.steps == 6
    text = recorder.recording.to_json().replace('  "repeat_guard": true,\n', "")
    path = tmp_path / "older.json"
    path.write_text(text, encoding="utf-8")
    ran: list[str] = []
    again = Agent(replay(path), [_looper(ran)], approver=AutoApprove()).run_sync("cols?")
    assert again.stop_reason == "finished" and again.messages == first.messages
    assert len(ran) == 5
    # a recording that has the guard replays with it (and a file says so)
    assert '"repeat_guard": true' in recorder.recording.to_json()
