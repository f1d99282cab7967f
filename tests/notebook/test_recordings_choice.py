"""How a notebook run gets its model: live, recorded, or replayed (in-process, no kernel)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from nbagent import Agent, AutoApprove, tool
from nbagent.errors import RecordingError
from nbagent.models import Call, ScriptedModel, Turn
from nbagent.notebook.core.recordings import RecordingStore, choose, model_configured
from nbagent.recording import RecordingGenerator, ReplayGenerator


@tool
def weather(city: str) -> str:
    """Current weather."""
    return f"{city}: sunny"


def teacher_model() -> ScriptedModel:
    return ScriptedModel([Turn("Looking.", Call("weather", {"city": "Oslo"})), "Sunny in Oslo."])


def run(agent: Agent, prompt: str, choice: Any) -> Any:
    own = agent.generator
    if choice.generator is not None:
        agent.generator = choice.generator

    async def go() -> Any:
        handle = agent.start(prompt)
        handle.discard_events()
        return await handle.result()

    try:
        result = asyncio.run(go())
    finally:
        agent.generator = own
    return result, choice.finish(result)


def test_the_choice_follows_the_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NBAGENT_MODEL", raising=False)
    monkeypatch.delenv("NBAGENT_RECORDINGS", raising=False)
    store = RecordingStore()
    assert store.folder == tmp_path / "nbagent-recordings"
    prompt = "Weather in Oslo?"

    # a model set from Python (a stand-in), no flag: it runs as it is, nothing saved
    agent = Agent(teacher_model(), [weather], approver=AutoApprove())
    choice = choose(agent, prompt, None, "auto", store, "instant", configured=False)
    assert choice.generator is None

    # a model set: recorded afresh
    choice = choose(agent, prompt, None, "auto", store, "instant", configured=True)
    assert isinstance(choice.generator, RecordingGenerator)
    result, saved = run(agent, prompt, choice)
    assert result.text == "Sunny in Oslo." and saved is not None
    assert Path(saved).parent.name == "nbagent-recordings" and not Path(saved).is_absolute()

    # a fresh conversation, no model set (the offline stand-in): the recording replays
    student = Agent("offline", [weather], approver=AutoApprove())
    choice = choose(student, prompt, None, "auto", store, "instant", configured=False)
    assert isinstance(choice.generator, ReplayGenerator)
    assert choice.generator.model.startswith("replay of ScriptedModel")
    result, saved = run(student, prompt, choice)
    assert result.text == "Sunny in Oslo." and saved is None

    # --live never replays; --replay of a prompt nobody recorded says so
    assert choose(student, prompt, None, "live", store, "instant", True).generator is None
    # a stand-in set from Python is not replaced by a recording unless asked
    stand_in = Agent(ScriptedModel(["live"]), [weather], approver=AutoApprove())
    assert choose(stand_in, prompt, None, "auto", store, "instant", False).generator is None
    asked = choose(stand_in, prompt, None, "replay", store, "instant", False)
    assert isinstance(asked.generator, ReplayGenerator)
    with pytest.raises(RecordingError, match=r"no recording of 'Weather in Paris\?'"):
        choose(student, "Weather in Paris?", None, "replay", store, "instant", False)


def test_replay_with_a_model_goes_on_live_and_records_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = RecordingStore(tmp_path / "recs")
    prompt = "Weather in Oslo?"
    teacher = Agent(teacher_model(), [weather], approver=AutoApprove())
    run(teacher, prompt, choose(teacher, prompt, None, "record", store, "instant", False))
    assert len(list(store.folder.glob("*.json"))) == 1

    @tool(name="weather")
    def changed(city: str) -> str:
        """Current weather."""
        return f"{city}: snow"

    live = ScriptedModel(["Snow in Oslo, the live model says."])
    student = Agent(live, [changed], approver=AutoApprove())
    choice = choose(student, prompt, None, "replay", store, "instant", configured=True)
    result, saved = run(student, prompt, choice)
    assert result.text == "Snow in Oslo, the live model says."
    assert saved is not None and len(live.requests) == 1
    again = Agent("offline", [changed], approver=AutoApprove())
    replayed, _ = run(again, prompt, choose(again, prompt, None, "auto", store, "instant", False))
    assert replayed.text == "Snow in Oslo, the live model says."  # the new recording


def test_a_changed_schema_explains_itself_when_asked_to_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = RecordingStore()
    prompt = "Weather in Oslo?"
    teacher = Agent(teacher_model(), [weather], approver=AutoApprove())
    run(teacher, prompt, choose(teacher, prompt, None, "record", store, "instant", False))

    @tool(name="weather")
    def wider(city: str, days: int = 1) -> str:
        """Current weather."""
        return city

    student = Agent("offline", [wider], approver=AutoApprove())
    with pytest.raises(RecordingError, match=r"definition .* of tool\(s\) weather differs"):
        choose(student, prompt, None, "replay", store, "instant", configured=False)


def test_which_models_count_as_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NBAGENT_MODEL", raising=False)
    assert not model_configured(None)
    assert not model_configured("offline")
    assert not model_configured(ScriptedModel([]))  # a stand-in set from Python
    assert model_configured("openai:gpt-4.1-mini")
    monkeypatch.setenv("NBAGENT_MODEL", "anthropic:claude-sonnet-4-5")
    assert model_configured(None)


def test_a_recorded_prompt_that_departs_is_refused_not_run_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = RecordingStore()
    prompt = "Weather in Oslo?"
    teacher = Agent(teacher_model(), [weather], approver=AutoApprove())
    run(teacher, prompt, choose(teacher, prompt, None, "record", store, "instant", False))

    @tool(name="weather")
    def wider(city: str, days: int = 1) -> str:
        """Current weather."""
        return city

    student = Agent("offline", [wider], approver=AutoApprove())
    with pytest.raises(RecordingError, match=r"definition .* of tool\(s\) weather differs"):
        choose(student, prompt, None, "auto", store, "instant", configured=False)
    # a prompt nobody recorded (even one whose file name would look alike) runs offline
    for other in ("Weather in Oslo", "Weather in Paris?"):
        assert choose(student, other, None, "auto", store, "instant", False).generator is None


def test_a_second_run_all_in_the_same_kernel_says_to_restart_or_start_anew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lesson replays where the conversation began; run again in the same kernel, the
    session's conversation holds the first pass too, so the replay cannot be used: say why
    and what to do (not "run the cells in order", which the person just did)."""
    monkeypatch.chdir(tmp_path)
    store = RecordingStore()
    prompt = "Weather in Oslo?"
    teacher = Agent(teacher_model(), [weather], approver=AutoApprove())
    run(teacher, prompt, choose(teacher, prompt, None, "record", store, "instant", False))

    student = Agent("offline", [weather], approver=AutoApprove())
    first, _ = run(student, prompt, choose(student, prompt, None, "auto", store, "instant", False))
    assert first.text == "Sunny in Oslo."  # the first pass replays
    with pytest.raises(RecordingError) as raised:
        choose(student, prompt, None, "auto", store, "instant", configured=False)
    said = str(raised.value)
    assert "conversation that began at this cell" in said
    assert "holds 4 earlier messages" in said
    assert "Restart Kernel and Run All Cells" in said and "--new" in said
    # with a new conversation (what --new does) it replays again
    student.reset()
    again, _ = run(student, prompt, choose(student, prompt, None, "auto", store, "instant", False))
    assert again.text == "Sunny in Oslo."
