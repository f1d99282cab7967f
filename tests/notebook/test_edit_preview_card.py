"""Previewing an edit on the approval card, with clicks and typing as the browser sends them:
only edits that fit are previewed, the label names the arguments shown, an older edit's preview
never replaces a newer one, and a slow or failing edit preview never holds up Deny or Approve."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from nbagent import Agent, InteractiveApprover, tool
from nbagent.events import ToolPreviewed
from nbagent.models import Call, ScriptedModel, Turn
from nbagent.notebook.live.view import RunView

from .conftest import Wire
from .test_edit_card import click, find, send

SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string", "pattern": "^data/"}},
    "required": ["path"],
}


def model() -> ScriptedModel:
    return ScriptedModel([Turn(Call("write_file", {"path": "data/a.txt"}, id="c1")), "done"])


async def run_card(wire: Wire, preview: Any, act: Any, **agent_kw: Any) -> tuple[RunView, list]:
    """Run one call of write_file (with ``preview``) under a card; ``act`` sees every event."""
    ran: list[str] = []

    @tool(needs_approval=True, schema=SCHEMA, preview=preview)
    def write_file(path: str) -> str:
        """Write a file."""
        ran.append(path)
        return f"wrote {path}"

    asked = InteractiveApprover()
    agent = Agent(model(), [write_file], approver=asked, **agent_kw)
    view = RunView("q", approver=asked, clock=wire.clock)
    run = agent.start("go")
    async for event in run.events():
        view.handle(event)
        await act(view, event)
    await run.result()
    view.close()
    return view, ran


async def wait_until(check: Any, what: str) -> None:
    """Let the loop run until ``check()`` holds (patient: the machine may be busy)."""
    for _ in range(3000):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def test_preview_edit_shows_the_preview_of_the_edited_arguments(wire: Wire) -> None:
    since = len(wire.comms)
    previewed: list[str] = []

    def preview(arguments: Any) -> str:
        previewed.append(arguments["path"])
        return f"would overwrite {arguments['path']}"

    async def act(view: RunView, event: Any) -> None:
        if not isinstance(event, ToolPreviewed):
            return
        card = view.cards["c1"]
        bar = card.approval
        assert bar is not None and card.preview is not None and card.preview_label is not None
        if event.revision == 0:
            assert event.arguments == {"path": "data/a.txt"}
            assert bar.preview_edit.layout.display == "none"  # only while editing
            click(wire, bar.edit)
            assert bar.preview_edit.layout.display is None
            path = find(wire, since, "TextModel", value="data/a.txt")
            send(wire, path, "/etc/passwd")  # the schema refuses it: nothing is previewed
            click(wire, bar.preview_edit)
            assert bar.form is not None and "/path" in bar.form.error.value
            assert "Preview of your edit" not in card.preview_label.value
            send(wire, path, "data/b.txt")
            click(wire, bar.preview_edit)
            assert bar.form.error.value == ""
            label = card.preview_label.value
            assert "Preview of your edit {&quot;path&quot;: &quot;data/b.txt&quot;}" in label
            assert "computing" in label and card.preview.outputs == ()
        else:
            assert event.revision == 1 and event.arguments == {"path": "data/b.txt"}
            assert "would overwrite data/b.txt" in str(card.preview.outputs)
            label = card.preview_label.value
            assert "Preview of your edit {&quot;path&quot;: &quot;data/b.txt&quot;}" in label
            assert "nothing has run yet" in label
            click(wire, bar.edit)  # Cancel edit: the model's preview again
            assert "would overwrite data/a.txt" in str(card.preview.outputs)
            assert "Preview of your edit" not in card.preview_label.value
            click(wire, bar.edit)  # open again: the edit's preview is still there
            assert "would overwrite data/b.txt" in str(card.preview.outputs)
            click(wire, bar.approve)

    _view, ran = await run_card(wire, preview, act)
    assert previewed == ["data/a.txt", "data/b.txt"]  # never for the refused edit
    assert ran == ["data/b.txt"]


async def test_an_older_edit_finishing_late_never_replaces_a_newer_one(wire: Wire) -> None:
    since = len(wire.comms)
    slow_started, release, slow_ended = threading.Event(), threading.Event(), threading.Event()
    events: list[ToolPreviewed] = []

    def preview(arguments: Any) -> str:
        if arguments["path"] == "data/slow.txt":
            slow_started.set()
            release.wait(60)
            slow_ended.set()
        return f"would overwrite {arguments['path']}"

    async def act(view: RunView, event: Any) -> None:
        if not isinstance(event, ToolPreviewed):
            return
        events.append(event)
        card = view.cards["c1"]
        bar = card.approval
        assert bar is not None and card.preview is not None and card.preview_label is not None
        if event.revision == 0:
            click(wire, bar.edit)
            path = find(wire, since, "TextModel", value="data/a.txt")
            send(wire, path, "data/slow.txt")
            click(wire, bar.preview_edit)
            await asyncio.to_thread(slow_started.wait, 60)  # the older edit's preview runs
            send(wire, path, "data/fast.txt")
            click(wire, bar.preview_edit)
        elif event.revision == 2:
            assert "would overwrite data/fast.txt" in str(card.preview.outputs)
            release.set()  # now the older one ends: it must not be shown over the newer one
            await asyncio.to_thread(slow_ended.wait, 60)
            for _ in range(20):
                await asyncio.sleep(0.01)  # time for it to be (wrongly) reported
            path = find(wire, since, "TextModel", value="data/fast.txt")
            send(wire, path, "data/last.txt")
            click(wire, bar.preview_edit)
        else:
            assert event.revision == 3, "an older edit's preview was reported"
            assert "would overwrite data/last.txt" in str(card.preview.outputs)
            assert "data/last.txt" in card.preview_label.value
            click(wire, bar.deny)

    _view, ran = await run_card(wire, preview, act)
    assert ran == []
    assert [(e.revision, e.arguments["path"]) for e in events] == [
        (0, "data/a.txt"),
        (2, "data/fast.txt"),
        (3, "data/last.txt"),
    ]


async def test_a_hanging_or_failing_edit_preview_says_so_and_deny_still_works(wire: Wire) -> None:
    since = len(wire.comms)
    never = threading.Event()
    labels: list[str] = []

    def preview(arguments: Any) -> str:
        if arguments["path"] == "data/hang.txt":
            never.wait(60)
        if arguments["path"] == "data/boom.txt":
            raise RuntimeError("no such table")
        return f"would overwrite {arguments['path']}"

    async def act(view: RunView, event: Any) -> None:
        if not isinstance(event, ToolPreviewed):
            return
        card = view.cards["c1"]
        bar = card.approval
        assert bar is not None and card.preview_label is not None
        if event.revision == 0:
            click(wire, bar.edit)
            path = find(wire, since, "TextModel", value="data/a.txt")
            send(wire, path, "data/boom.txt")
            click(wire, bar.preview_edit)
        elif event.revision == 1:
            assert event.status == "error"
            labels.append(card.preview_label.value)
            assert "no such table" in str(card.preview.outputs)
            path = find(wire, since, "TextModel", value="data/boom.txt")
            send(wire, path, "data/hang.txt")
            click(wire, bar.preview_edit)
        else:
            assert event.revision == 2 and event.status == "timeout"
            labels.append(card.preview_label.value)
            send(wire, find(wire, since, "TextModel", value="data/hang.txt"), "data/c.txt")
            click(wire, bar.preview_edit)  # a third one, still computing when Deny is clicked
            click(wire, bar.deny)
            assert bar.closed and bar.preview_edit.disabled

    view, ran = await run_card(wire, preview, act, preview_timeout=0.5)
    never.set()
    assert ran == []
    assert "it failed" in labels[0] and "data/boom.txt" in labels[0]
    assert "did not finish in time" in labels[1] and "data/hang.txt" in labels[1]
    assert "denied" in view.cards["c1"].header.value
