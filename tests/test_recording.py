"""Record a run, save it, load it, replay it through the same loop: same text, same calls, the
tools run for real; divergence is named; broken recordings are refused before anything runs."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from nbagent import Agent, AutoApprove, tool
from nbagent.errors import RecordingError, ReplayDivergedError
from nbagent.generation import (
    Finish,
    ProviderToolResultReceived,
    ReasoningDelta,
    TextDelta,
    ToolCallReceived,
    ToolInputDelta,
    ToolInputStart,
)
from nbagent.messages import ProviderToolResult
from nbagent.models import Call, FunctionModel, ScriptedModel, Text, Turn
from nbagent.recording import Recording, cassette, record, replay
from nbagent.tools import ToolCall

from .conftest import assert_history_valid


def weather_tool(log: list[str], answer: str = "sunny") -> Any:
    @tool
    def weather(city: str) -> str:
        """Current weather for a city."""
        log.append(city)
        return f"{city}: {answer}"

    return weather


def script() -> ScriptedModel:
    return ScriptedModel(
        [
            Turn(
                Text("Checking the weather. " * 20, chunks=40),
                Call("weather", {"city": "Oslo"}, chunks=9),
            ),
            Turn(Text("It is sunny in Oslo.", chunks=5)),
        ]
    )


def recorded_run(log: list[str] | None = None) -> tuple[Recording, Any]:
    recorder = record(script())
    agent = Agent(recorder, [weather_tool(log if log is not None else [])], approver=AutoApprove())
    result = _run_collecting(agent)
    assert result.stop_reason == "finished"
    return recorder.recording, result


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any socket connection fails: a replay must not need one."""

    def refuse(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("a replay tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)


def test_a_replay_is_the_run_again_with_the_tools_run_for_real(
    tmp_path: Path, no_network: None
) -> None:
    recording, first = recorded_run()
    path = recording.save(tmp_path / "run.json")
    ran: list[str] = []
    agent = Agent(replay(path), [weather_tool(ran)], approver=AutoApprove())
    events = asyncio.run(_events(agent, "Weather in Oslo?"))
    second = agent.messages
    assert ran == ["Oslo"]  # executed for real, not read from the file
    assert [type(m) for m in first.messages] == [type(m) for m in second]
    assert first.messages == tuple(second)
    assert first.text == "It is sunny in Oslo."
    assert_history_valid(second)
    # it streamed: text and arguments in pieces, as the view shows them
    names = [type(e).__name__ for e in events]
    assert names.count("AssistantTextDelta") > 5 and names.count("ToolArgumentsDelta") >= 1
    started = next(e for e in events if type(e).__name__ == "RunStarted")
    assert started.model.startswith("replay of ScriptedModel")


async def _events(agent: Agent, prompt: str) -> list[Any]:
    return [event async for event in agent.stream(prompt)]


def test_the_file_is_versioned_stable_json_with_coalesced_events(tmp_path: Path) -> None:
    recording, _ = recorded_run()
    text = recording.to_json()
    data = json.loads(text)
    assert data["format"] == "nbagent-recording" and data["version"] == 1
    assert recording.to_json() == text  # the same recording always writes the same file
    assert Recording.from_json(text).to_json() == text  # and reads back to it
    first = data["steps"][0]["events"]
    assert [e["type"] for e in first] == ["text", "call", "finish"]  # 40 + 9 fragments → 2
    assert first[1]["arguments"] == '{"city": "Oslo"}'
    # one event per line: a diff shows what changed
    lines = text.splitlines()
    assert any(line.strip().startswith('{"type": "call"') for line in lines)
    assert set(data["steps"][0]["request"]) == {
        "tools",
        "tool_choice",
        "instructions",
        "options",
        "messages",
    }


def test_a_recording_made_in_code_names_its_prompt_for_people() -> None:
    # The file's "prompt" is for people (and `%agent recording` lists it), but record() used
    # in a script left it empty: only the notebook filled it in
    key = "sk-proj-" + "A1b2C3d4" * 6
    recorder = record(script())
    agent = Agent(recorder, [weather_tool([])], approver=AutoApprove())
    agent.run_sync(f"Weather in Oslo? (my key is {key})")
    data = json.loads(recorder.recording.to_json())
    assert data["prompt"].startswith("Weather in Oslo?") and key not in data["prompt"]
    named = record(script())
    named.recording.prompt = "set by hand"  # a prompt given is kept
    Agent(named, [weather_tool([])], approver=AutoApprove()).run_sync("Weather in Oslo?")
    assert named.recording.prompt == "set by hand"


def test_a_recording_holds_no_secret() -> None:
    key = "sk-proj-" + "A1b2C3d4" * 6

    async def leaky(request: Any) -> Any:
        yield TextDelta(f"your key is {key}, keep it safe")
        yield Finish("stop")

    recorder = record(FunctionModel(leaky))
    _run_collecting(Agent(recorder), "what is my key?")
    text = recorder.recording.to_json()
    assert key not in text and "***" in text


def test_a_run_whose_output_was_redacted_still_replays() -> None:
    """The file keeps ``***`` for credential-shaped model output, so the replayed conversation
    holds ``***`` where the live one held the text: the next step must still match."""
    ran: list[str] = []

    @tool
    def run_code(code: str) -> str:
        """Pretend to run code."""
        ran.append(code)
        return "ran it"

    def model() -> ScriptedModel:
        text = 'Use OpenAI(api_key=os.environ["K"]) with "Authorization: Bearer abc123456789". '
        code = "headers = {'x-api-key': 'abcdef123456'}"
        return ScriptedModel([Turn(Text(text), Call("run_code", {"code": code})), Turn(Text("ok"))])

    recorder = record(model())
    live = Agent(recorder, [run_code], approver=AutoApprove()).run_sync("write code")
    text = recorder.recording.to_json()
    assert "abc123456789" not in text and "abcdef123456" not in text
    agent = Agent(replay(Recording.from_json(text)), [run_code], approver=AutoApprove())
    again = _run_collecting(agent, "write code")
    assert again.stop_reason == "finished" and again.text == live.text == "ok"
    assert ran[1] == "headers = {'x-api-key': '***'}"  # the tool ran on what the file holds


def test_reasoning_is_coalesced_per_block_and_holds_no_secret() -> None:
    key = "sk-ant-api03-" + "Zz9Yy8Xx" * 6

    async def thinking(request: Any) -> Any:
        for piece in ["Let ", "me ", "think ", "here."]:
            yield ReasoningDelta(piece)
        yield ReasoningDelta(signature="sig-1")  # closes the signed block
        yield ReasoningDelta("Second ")
        yield ReasoningDelta(f"thought: {key}.")
        yield TextDelta("Answer")
        yield ReasoningDelta("After text.")
        yield Finish("stop")

    recorder = record(FunctionModel(thinking))
    _run_collecting(Agent(recorder), "think")
    events = recorder.recording.steps[0].events
    reasoning = [e for e in events if e["type"] == "reasoning"]
    assert [e["text"] for e in reasoning] == [
        "Let me think here.",
        "Second thought: ***.",
        "After text.",
    ]
    assert reasoning[0]["signature"] == "sig-1" and "signature" not in reasoning[1]
    assert [e["type"] for e in events] == ["reasoning", "reasoning", "text", "reasoning", "finish"]
    assert key not in recorder.recording.to_json()


def test_signed_reasoning_holds_no_secret_and_still_replays() -> None:
    """Signed reasoning (Anthropic's thinking, a Responses item carried in the signature) is
    model output like any other: a key repeated in it is not written, and the run replays."""
    key = "sk-ant-api03-" + "Zz9Yy8Xx" * 6
    ran: list[str] = []

    async def thinking(request: Any) -> Any:
        if len(request.messages) == 1:
            yield ReasoningDelta(f"The user gave {key}; ")
            yield ReasoningDelta(signature="EqQBCkYIBxgCKkB" + "a" * 40)
            item = {"summary": f"key {key}", "encrypted_content": "gAAAAB"}
            yield ReasoningDelta("summary", signature=json.dumps({"item": item}))
            yield ToolCallReceived(ToolCall("c1", "weather", '{"city": "Oslo"}'))
            yield Finish("tool_calls")
        else:
            yield TextDelta("done")
            yield Finish("stop")

    recorder = record(FunctionModel(thinking))
    _run_collecting(Agent(recorder, [weather_tool([])], approver=AutoApprove()), "think")
    text = recorder.recording.to_json()
    assert key not in text and "EqQBCkYIBxgCKkB" in text  # a signature without a key stays
    agent = Agent(replay(Recording.from_json(text)), [weather_tool(ran)], approver=AutoApprove())
    again = _run_collecting(agent, "think")
    assert again.stop_reason == "finished" and again.text == "done" and ran == ["Oslo"]


def test_a_recording_holds_no_secret_from_server_side_tools_or_raw_blocks() -> None:
    key = "sk-proj-" + "A1b2C3d4" * 6
    page = {"type": "web_search_result", "text": f"leaked: {key}", "meta": [f"Bearer {key}"]}

    async def leaky(request: Any) -> Any:
        yield ReasoningDelta(f"the page says {key}")
        call = ToolCall("s1", "web_search", "{}", True, raw={"input": {"q": key}})
        yield ToolCallReceived(call)
        yield ProviderToolResultReceived(
            ProviderToolResult("s1", "web_search", [page], raw={"content": [page]})
        )
        yield TextDelta("done")
        yield Finish("stop")

    recorder = record(FunctionModel(leaky))
    _run_collecting(Agent(recorder), "search")
    text = recorder.recording.to_json()
    assert key not in text and "***" in text


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ("schema", "the definition (description or schema) of tool(s) weather differs"),
        ("removed", "tool(s) weather were recorded but are not registered now"),
        ("result", "message 3 of the conversation differs: now the result of weather"),
        ("added", "tool(s) extra are registered now but were not recorded"),
    ],
)
def test_divergence_names_the_step_and_what_differed(
    tmp_path: Path, change: str, words: str
) -> None:
    recording, _ = recorded_run()
    path = recording.save(tmp_path / "run.json")
    ran: list[str] = []
    tools = [weather_tool(ran)]
    if change == "schema":

        @tool
        def weather(city: str, days: int = 1) -> str:  # one more parameter
            """Current weather for a city."""
            ran.append(city)
            return f"{city}: sunny"

        tools = [weather]
    elif change == "removed":
        tools = []
    elif change == "result":
        tools = [weather_tool(ran, answer="rainy")]
    elif change == "added":

        @tool
        def extra() -> str:
            """Something else."""
            return "x"

        tools.append(extra)
    result = _run_collecting(Agent(replay(path), tools, approver=AutoApprove()))
    assert result.stop_reason == "failed"
    error = result.error
    assert isinstance(error, ReplayDivergedError)
    step = 2 if change == "result" else 1
    assert error.step == step
    assert f"diverged at step {step}" in str(error) and words in str(error)
    assert str(path) in str(error)
    if change in ("schema", "removed", "added"):
        assert ran == []  # the first request already differed: nothing ran


def _run_collecting(agent: Agent, prompt: str = "Weather in Oslo?") -> Any:
    """Run to the end and return the RunResult, failed or not (no exception either way)."""

    async def go() -> Any:
        run = agent.start(prompt)
        run.discard_events()
        return await run.result()

    return asyncio.run(go())


async def test_a_helper_whose_result_changed_diverges_naming_the_call_and_its_new_result() -> None:
    """The helper's own request differs (its tool's result changed): the helper fails with
    that divergence, and so does its caller's next request, with the same words; never a
    comparison of the caller's request with the helper's recorded step."""
    from nbagent.generation import Request
    from nbagent.messages import ToolMessage
    from nbagent.recording import RecordingGenerator, ReplayGenerator

    said = ["3 km"]

    @tool
    def length(river: str) -> str:
        """How long a river is."""
        return f"{river}: {said[0]}"

    def asking(tool_name: str, arguments: dict[str, str], then: str) -> FunctionModel:
        def decide(request: Request) -> Any:
            last = request.messages[-1]
            if isinstance(last, ToolMessage):
                return f"{then} {last.results[0].text}"
            return Turn(Call(tool_name, arguments))

        return FunctionModel(decide)

    helper = Agent(asking("length", {"river": "Rhine"}, "it is"), [length])
    recorder = RecordingGenerator(asking("research", {"prompt": "Rhine"}, "so"), Recording())
    first = await Agent(recorder, [helper.as_tool(name="research", description="x")]).run("go")
    assert first.text == "so it is Rhine: 3 km"
    said[0] = "1,233 km"  # the helper's tool now answers otherwise
    replayer = ReplayGenerator(Recording.from_json(recorder.recording.to_json()))
    offline = Agent(FunctionModel(lambda request: "never asked"), [length])
    again = Agent(replayer, [offline.as_tool(name="research", description="x")])
    result = await again.run("go", raise_on_error=False)
    assert result.stop_reason == "failed" and isinstance(result.error, ReplayDivergedError)
    message = str(result.error)
    assert "not registered now" not in message, message
    assert "the result of length" in message and "Rhine: 1,233 km" in message, message


def test_a_live_fallback_takes_over_at_the_divergence() -> None:
    recording, _ = recorded_run()
    live = ScriptedModel(["It rains in Oslo, says the live model."])
    replayer = replay(recording, fallback=live)
    result = _run_collecting(
        Agent(replayer, [weather_tool([], answer="rainy")], approver=AutoApprove())
    )
    assert result.stop_reason == "finished"
    assert result.text == "It rains in Oslo, says the live model."
    assert replayer.diverged is not None and replayer.diverged.step == 2
    assert len(live.requests) == 1


def _bad(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bad.json"
    path.write_text(text)
    return path


def test_broken_recordings_are_refused_before_anything_runs(tmp_path: Path) -> None:
    recording, _ = recorded_run()
    good = recording.to_json()
    data = json.loads(good)
    first = data["steps"][0]["events"]

    def events(replaced: list[Any]) -> str:
        return json.dumps({**data, "steps": [{**data["steps"][0], "events": replaced}]})

    cases: dict[str, str] = {
        "not valid JSON": good[: len(good) // 2],  # truncated
        "not an nbagent recording": json.dumps({"steps": []}),
        "newer nbagent": json.dumps({**data, "version": 99}),
        "not a known event": json.dumps(
            {**data, "steps": [{**data["steps"][0], "events": [{"type": "explode"}]}]}
        ),
        "needs a string 'arguments'": json.dumps(
            {
                **data,
                "steps": [
                    {
                        **data["steps"][0],
                        "events": [{"type": "call", "id": "c", "name": "weather", "arguments": 5}],
                    }
                ],
            }
        ),
        "ends without a finish": json.dumps(
            {**data, "steps": [{**data["steps"][0], "events": data["steps"][0]["events"][:2]}]}
        ),
        "not valid JSON.*recursion": json.dumps({**data, "steps": []}).replace(
            '"steps": []', '"steps": ' + "[" * 100_000 + "]" * 100_000
        ),
        "no valid format version": json.dumps({**data, "version": True}),
        "nothing after its finish": events([*first, first[-1]]),
        "'t' must be a non-negative number": events([{**first[0], "t": -5}, *first[1:]]),
        "at t: Infinity is not a JSON number": events(
            [{**first[0], "t": float("inf")}, *first[1:]]
        ),
        "'complete' must be true or false": events(
            [{**e, "complete": "no"} if e["type"] == "call" else e for e in first]
        ),
        "'provider_executed' must be true or false": events(
            [{**e, "provider_executed": "false"} if e["type"] == "call" else e for e in first]
        ),
        "'signature' must be a string": events(
            [{"type": "reasoning", "text": "x", "signature": {"a": 1}}, *first]
        ),
    }
    for words, text in cases.items():
        path = _bad(tmp_path, text)
        ran: list[str] = []
        with pytest.raises(RecordingError, match=words) as caught:
            replay(path)  # every step is checked when the replay is made
        assert str(path) in str(caught.value)
        assert ran == []


def test_a_stopped_run_is_recorded_as_stopped_and_replays_so() -> None:
    async def slow(request: Any) -> Any:
        yield TextDelta("thinking about it")
        await asyncio.sleep(30)
        yield Finish("stop")

    recorder = record(FunctionModel(slow))
    agent = Agent(recorder)

    async def go() -> None:
        run = agent.start("hi")
        async for event in run.events():
            if type(event).__name__ == "AssistantTextDelta":
                run.cancel()
        await run.result()

    asyncio.run(go())
    events = recorder.recording.steps[0].events
    assert events[-1]["type"] == "error" and "stopped" in events[-1]["message"]
    replayed = Agent(replay(Recording.from_json(recorder.recording.to_json())))
    result = _run_collecting(replayed, "hi")
    assert result.stop_reason == "failed" and "stopped here" in str(result.error)


def test_calls_that_never_completed_are_replayed_but_never_run() -> None:
    async def broken(request: Any) -> Any:
        yield ToolInputStart("c1", "weather")
        yield ToolInputDelta("c1", '{"city": "Os')
        yield Finish("length")

    recorder = record(FunctionModel(broken))
    _run_collecting(Agent(recorder, [weather_tool([])]))
    ran: list[str] = []
    result = _run_collecting(
        Agent(replay(Recording.from_json(recorder.recording.to_json())), [weather_tool(ran)])
    )
    assert result.stop_reason == "length" and ran == []


def test_provider_cleaned_arguments_are_kept() -> None:
    async def cleaned(request: Any) -> Any:
        if len(request.messages) > 1:
            yield TextDelta("done")
            yield Finish("stop")
            return
        yield ToolInputStart("c1", "weather")
        yield ToolInputDelta("c1", '{"city": "Oslo", "extra": null}')
        yield ToolCallReceived(ToolCall("c1", "weather", '{"city": "Oslo"}'))
        yield Finish("tool_calls")

    recorder = record(FunctionModel(cleaned))
    _run_collecting(Agent(recorder, [weather_tool([])], approver=AutoApprove()))
    ran: list[str] = []
    replayed = Agent(replay(recorder.recording), [weather_tool(ran)], approver=AutoApprove())
    result = _run_collecting(replayed)
    assert result.stop_reason == "finished" and ran == ["Oslo"]


def test_paces_wait_as_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    recording, _ = recorded_run()
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float, *args: Any) -> None:
        waits.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr("nbagent.recording._replay.asyncio.sleep", sleep)
    for pace in ("instant", "readable"):
        waits.clear()
        _run_collecting(
            Agent(replay(recording, pace=pace), [weather_tool([])], approver=AutoApprove())
        )
        total = sum(waits)
        if pace == "instant":
            assert total == 0
        else:  # about 440 characters at 600 characters a second
            assert 0.5 < total < 1.5, total


def test_a_cassette_records_once_then_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NBAGENT_RECORD", raising=False)
    path = tmp_path / "cassettes" / "weather.json"
    made: list[int] = []

    def live() -> Any:
        made.append(1)
        return script()

    for _ in range(2):
        with cassette(path, live) as model:
            result = _run_collecting(Agent(model, [weather_tool([])], approver=AutoApprove()))
            assert result.text == "It is sunny in Oslo."
    assert made == [1] and path.exists()  # recorded the first time only
    monkeypatch.setenv("NBAGENT_RECORD", "1")
    with cassette(path, live) as model:
        _run_collecting(Agent(model, [weather_tool([])], approver=AutoApprove()))
    assert made == [1, 1]
    monkeypatch.setenv("NBAGENT_RECORD", "0")
    with pytest.raises(RecordingError, match="no recording"), cassette(tmp_path / "x.json", live):
        pass


def test_saving_never_writes_through_a_planted_file_and_writers_do_not_collide(
    tmp_path: Path,
) -> None:
    """A recordings folder comes from git or a shared drive: a symlink planted where a
    temporary file might go is not followed, and two writers of one file both succeed."""
    import os
    import threading

    folder = tmp_path / "nbagent-recordings"
    folder.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    os.symlink(victim, folder / ".run.json.tmp")
    Recording(prompt="p").save(folder / "run.json")
    assert victim.read_text() == "precious"
    assert Recording.load(folder / "run.json").prompt == "p"

    failures: list[BaseException] = []

    def write(number: int) -> None:
        try:
            for _ in range(30):
                Recording(prompt=str(number) * 5000).save(folder / "shared.json")
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert len(set(Recording.load(folder / "shared.json").prompt)) == 1  # one writer's, whole
    assert sorted(p.name for p in folder.iterdir()) == [".run.json.tmp", "run.json", "shared.json"]


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="needs FIFOs")
def test_a_recording_that_is_no_regular_file_or_too_big_is_refused_at_once(
    tmp_path: Path,
) -> None:
    """A FIFO would block the kernel on open (nobody writes it); a huge file would fill its
    memory. Both are refused with a RecordingError before anything is read."""
    import os
    import threading

    from nbagent.recording._format import MAX_BYTES

    os.mkfifo(tmp_path / "fifo.json")
    seen: list[BaseException] = []

    def load() -> None:
        try:
            Recording.load(tmp_path / "fifo.json")
        except BaseException as exc:
            seen.append(exc)

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "loading a FIFO blocked"
    assert isinstance(seen[0], RecordingError) and "not a regular file" in str(seen[0])
    with open(tmp_path / "huge.json", "wb") as file:
        file.truncate(MAX_BYTES + 1)  # sparse: no disk, no time
    with pytest.raises(RecordingError, match="larger than"):
        Recording.load(tmp_path / "huge.json")


def test_a_recorded_raise_replays_only_as_an_error_a_model_could_raise() -> None:
    recording, _ = recorded_run()
    data = json.loads(recording.to_json())
    for name in (
        "RunFailedError",
        "ReplayDivergedError",
        "KeyboardInterrupt",
        "AuthenticationError",
    ):
        data["steps"][1]["events"] = [{"type": "raise", "error": name, "message": "boom"}]
        loaded = Recording.from_json(json.dumps(data))
        result = _run_collecting(Agent(replay(loaded), [weather_tool([])]))
        assert result.stop_reason == "failed" and str(result.error) == "boom"
        expected = "AuthenticationError" if name == "AuthenticationError" else "GenerationError"
        assert type(result.error).__name__ == expected


@pytest.mark.parametrize(
    ("model", "named"),
    [
        ("/home/teacher/models/tiny.gguf", "Scripted:tiny.gguf"),
        ("~/models/tiny.gguf", "Scripted:tiny.gguf"),
        ("C:\\Users\\teacher\\tiny.gguf", "Scripted:tiny.gguf"),
        ("meta-llama/Llama-3.1-8B", "Scripted:meta-llama/Llama-3.1-8B"),
    ],
)
def test_a_model_given_as_a_file_is_recorded_by_its_name_only(model: str, named: str) -> None:
    class Scripted(ScriptedModel):
        pass

    generator = Scripted(["hi"])
    generator.model = model  # as LocalChat names a model given by its path
    recorder = record(generator)
    assert recorder.recording.model == named


def test_a_run_that_ends_before_its_recording_says_how_it_departed() -> None:
    """The tool now ends the run (terminate): the loop never asks the model again, so no
    request is compared. ``unplayed`` names the departure; a full replay has none."""
    from nbagent.content import text_result
    from nbagent.generation import Request

    def weather(ends: bool, answer: str = "sunny") -> Any:
        @tool
        def weather(city: str) -> Any:
            """Current weather for a city."""
            return text_result(f"{city}: {answer}", terminate=ends)

        return weather

    recording, _ = recorded_run()

    def replayed(tool_: Any) -> tuple[Any, str | None]:
        generator = replay(Recording.from_json(recording.to_json()))
        agent = Agent(generator, [tool_], approver=AutoApprove())
        result = _run_collecting(agent)
        request = Request(
            messages=tuple(agent.messages), tools=(tool_.definition,), options=agent.options
        )
        return result, generator.unplayed(request)

    result, departed = replayed(weather(ends=False))
    assert result.stop_reason == "finished" and departed is None
    result, departed = replayed(weather(ends=True))
    assert result.stop_reason == "terminated"
    assert departed is not None and "diverged after step 1" in departed
    assert "the recording asks the model again (step 2 of 2)" in departed
    assert "another reason (a tool that now ends the run" in departed
    result, departed = replayed(weather(ends=True, answer="rain"))
    assert departed is not None and "message 3 of the conversation differs" in departed
    assert "Oslo: rain" in departed


def test_a_key_twice_in_a_recording_is_refused_naming_the_key_and_the_event(
    tmp_path: Path,
) -> None:
    """A person reading ``"name": "weather", "name": "forget"`` sees one tool; Python's json
    keeps the last, so the replay ran the other. The file is read as strictly as a model's
    arguments, wherever the key sits: an event, a request, the header, a provider's raw block."""
    ran: list[str] = []

    @tool
    def forget(city: str) -> str:
        """Forget everything about a city."""
        ran.append(f"forgot {city}")
        return "forgotten"

    recorder = record(script())
    agent = Agent(recorder, [weather_tool(ran), forget], approver=AutoApprove())
    assert _run_collecting(agent).stop_reason == "finished"
    good = recorder.recording.to_json()
    ran.clear()
    call = '"name": "weather", "arguments"'
    assert good.count(call) == 1
    cases = {
        "event 2 (a call event): the key 'name' appears twice": good.replace(
            call, '"name": "weather", "name": "forget", "arguments"'
        ),
        "event 3 (a finish event), at usage: the key 'output_tokens' appears twice": good.replace(
            '"output_tokens": 114}', '"output_tokens": 114, "output_tokens": 1}'
        ),
        "step 2's request: the key 'messages_from' appears twice": good.replace(
            '"messages_from": 1}', '"messages_from": 1, "messages_from": 0}'
        ),
        "(its header): the key 'model' appears twice": good.replace(
            '"prompt":', '"model": "someone else", "prompt":'
        ),
        "event 2 (a call event), at raw/input: the key 'city' appears twice": good.replace(
            call,
            '"name": "weather", "raw": {"input": {"city": "Oslo", "city": "Rome"}}, "arguments"',
        ),
        "event 2 (a call event), at raw/n: NaN is not a JSON number": good.replace(
            call, '"name": "weather", "raw": {"n": NaN}, "arguments"'
        ),
        "event 1 (a text event), at text: a string holds a lone surrogate": good.replace(
            '"text": "It is', '"text": "\\ud800It is'
        ),
    }
    for words, text in cases.items():
        assert text != good, words
        path = _bad(tmp_path, text)
        with pytest.raises(RecordingError) as caught:
            _run_collecting(Agent(replay(path), [weather_tool(ran), forget]))
        assert words in str(caught.value)
        assert str(path) in str(caught.value)
        assert ran == [], words
    # the good file still replays, running the tool it names
    result = _run_collecting(
        Agent(replay(_bad(tmp_path, good)), [weather_tool(ran), forget], approver=AutoApprove())
    )
    assert result.stop_reason == "finished" and ran == ["Oslo"]


def test_a_recorded_call_whose_arguments_hold_a_key_twice_is_refused_as_live() -> None:
    """Arguments are kept in a recording as the model streamed them (a JSON string): a replay
    hands them to the loop, which refuses a key given twice there exactly as in a live run."""
    ran: list[str] = []
    recording, _ = recorded_run()
    text = recording.to_json().replace(
        '"arguments": "{\\"city\\": \\"Oslo\\"}"',
        '"arguments": "{\\"city\\": \\"Oslo\\", \\"city\\": \\"Rome\\"}"',
    )
    assert text != recording.to_json()
    agent = Agent(replay(Recording.from_json(text)), [weather_tool(ran)], approver=AutoApprove())
    result = _run_collecting(agent)
    assert isinstance(result.error, ReplayDivergedError)  # the refusal is the new tool result
    assert ran == []
    results = agent.messages[2].results  # type: ignore[union-attr]
    assert results[0].is_error and "'city' appears twice" in results[0].text


def test_a_recording_of_one_huge_text_replays_within_a_small_multiple_of_its_size(
    tmp_path: Path,
) -> None:
    """Replay made every 24-character piece of every step up front (a TextDelta, a tuple and a
    str each: ~15x the file), reading the file asked for a buffer as big as the limit, and the
    answer kept each piece as its own str. Measured with tracemalloc over loading the file and
    running the whole replay; the run holds the text three times (the recording, the answer's
    pieces and the message), so 4.5x leaves room and catches any of those coming back."""
    import tracemalloc

    recorder = record(ScriptedModel([Turn(Text("x"))]))
    asyncio.run(Agent(recorder).run("hi"))
    data = json.loads(recorder.recording.to_json())
    size = 4 * 2**20
    data["steps"][0]["events"][0]["text"] = ("abcdefghij" * (size // 10 + 1))[:size]
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(data))
    file_size = path.stat().st_size
    del data

    async def replayed() -> tuple[Any, int]:
        tracemalloc.start()
        try:
            result = await Agent(replay(path)).run("hi")
            return result, tracemalloc.get_traced_memory()[1]
        finally:  # measured inside: asyncio.run's own ending may repr the result (3.11)
            tracemalloc.stop()

    result, peak = asyncio.run(replayed())
    assert result.stop_reason == "finished" and len(result.text) == size
    assert peak < 4.5 * file_size, f"{peak / file_size:.1f}x the file"
