"""The saved output of a run that used helpers (``agent.as_tool``) keeps each helper's own run
inside the call that ran it: its text, its own calls and their results, folded in a
``<details>`` in the sanitized HTML, quoted in the Markdown, indented in the plain text."""

from __future__ import annotations

import nbformat

from nbagent import Agent, tool
from nbagent.models import Call, ScriptedModel, Turn
from nbagent.notebook.saved.static import run_outputs, run_plain
from nbagent.notebook.shown.transcript import Transcript


@tool
def weather(city: str) -> str:
    """Today's weather in a city."""
    return f"{city}: rain <b>9 °C</b>"


def _planner(inner_text: str) -> Agent:
    researcher = Agent(
        ScriptedModel([Turn(Call("weather", {"city": "Oslo"})), inner_text], model="researcher"),
        [weather],
    )
    checker = Agent(ScriptedModel(["looks right"], model="checker"))
    writer = Agent(
        ScriptedModel([Turn(Call("check", {"prompt": "is it right?"})), "written"], model="writer"),
        [checker.as_tool(name="check", description="Checks a text.")],
    )
    return Agent(
        ScriptedModel(
            [
                Turn(Call("research", {"prompt": "Oslo weather?"})),
                Turn(Call("write", {"prompt": "advice"})),
                "Take a raincoat.",
            ],
            model="planner",
        ),
        [
            researcher.as_tool(name="research", description="Looks facts up."),
            writer.as_tool(name="write", description="Writes."),
        ],
    )


async def _transcript(agent: Agent, prompt: str) -> Transcript:
    transcript = Transcript()
    async for event in agent.stream(prompt):
        transcript.handle(event)
    return transcript


async def test_the_saved_run_keeps_each_helpers_run_inside_its_call() -> None:
    transcript = await _transcript(_planner("Oslo: <script>alert(1)</script> rain"), "Pack?")
    assert transcript.stop_reason == "finished"
    research = next(r for r in transcript.calls.values() if r.name == "research")
    (inner,) = transcript.helpers[research.call_id]
    assert [r.name for r in inner.calls.values()] == ["weather"]  # the helper's own call
    assert inner.stop_reason == "finished" and inner.model == "researcher"

    bundles = run_outputs(transcript, inline_images=True)
    html = "".join(data["text/html"] for data, _ in bundles)
    assert html.count('<details open class="nbagent-nested">') == 3  # research, write, check
    assert "research: its own run" in html and "check: its own run" in html
    # the helper's call and its result are inside the research card's section, before write's
    start = html.index("research: its own run")
    assert start < html.index("⚙ weather") < html.index("write: its own run")
    assert "Oslo: rain &lt;b&gt;9 °C&lt;/b&gt;" in html  # tool text stays text
    assert "<script>" not in html and "&lt;script&gt;" in html  # model text stays text
    # a helper of a helper: check's run is inside write's section
    write_at = html.index("write: its own run")
    assert write_at < html.index("check: its own run") < html.index("Take a raincoat.")

    plain = run_plain(transcript)
    lines = plain.splitlines()
    assert "  ┆ research: its own run" in lines
    assert any(line.startswith("    [tool] weather") for line in lines)  # indented under it
    assert any(line.startswith("      ┆ check: its own run") for line in lines)  # twice in
    assert "      → Oslo: rain <b>9 °C</b>" in lines  # its result, under its call

    markdown = "".join(data["text/markdown"] for data, _ in bundles)
    assert "> *research: its own run*" in markdown and ">" in markdown

    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                "%agent Pack?",
                outputs=[
                    nbformat.v4.new_output("display_data", data=data, metadata=meta)
                    for data, meta in bundles
                ],
            )
        ]
    )
    nbformat.validate(nbformat.reads(nbformat.writes(notebook), as_version=4))


async def test_the_request_view_shows_the_helpers_requests_under_the_call() -> None:
    transcript = await _transcript(_planner("Oslo: rain"), "Pack?")
    bundles = run_outputs(transcript, inline_images=True)
    html = "".join(data["text/html"] for data, _ in bundles)
    view = html[html.index("What the model saw, step by step (3 requests)") :]
    # step 1's answer called research: its two requests are under step 1, before step 2
    at = view.index("research: its own requests (2 requests)")
    assert view.index("step 1 ·") < at < view.index("step 2 ·")
    assert view.index("write: its own requests (2 requests)") > view.index("step 2 ·")
    # the writer's helper's request, under the writer's
    assert view.index("check: its own requests (1 request)") > view.index("write: its own")
    assert "researcher" in view and "checker" in view  # each helper's model, by its name
    # shown once: the helper's card section holds no request view of its own
    assert html.count("its own requests") == 3
    assert html.count("What the model saw") == 1


async def test_a_failing_helper_is_kept_with_its_error() -> None:
    failing = Agent(ScriptedModel([], model="empty"))
    planner = Agent(
        ScriptedModel([Turn(Call("ask", {"prompt": "x"})), "went on"], model="planner"),
        [failing.as_tool(name="ask", description="Asks.")],
    )
    transcript = await _transcript(planner, "go")
    assert transcript.stop_reason == "finished"
    (inner,) = next(iter(transcript.helpers.values()))
    assert inner.stop_reason == "failed" and inner.error
    plain = run_plain(transcript)
    assert "  ┆ ask: its own run" in plain
    assert "    Error: " in plain  # the helper's error, indented under the call
    assert "went on" in plain
