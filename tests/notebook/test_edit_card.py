"""The approval card in-process on a recording comm: the edit form built from a schema, edits and
clicks as the browser sends them, inline errors, previews, rules and hooks on the card, and the
static card that replaces it (no kernel needed; the kernel tests drive the same in a kernel)."""

from __future__ import annotations

from typing import Any

import pytest

from nbagent import Agent, InteractiveApprover, RuleApprover, RuleSet, tool
from nbagent.approvals.approval import ApprovalRequest, Decision
from nbagent.approvals.hooks import veto
from nbagent.approvals.rules import parse_rule
from nbagent.events import ApprovalRequested, ToolPreviewed
from nbagent.models import Call, ScriptedModel, Turn
from nbagent.notebook.live.edit_form import MAX_FIELDS, EditForm, FormError
from nbagent.notebook.live.view import RunView
from nbagent.notebook.saved.static import run_outputs
from nbagent.tools import ToolCall

from .conftest import Wire

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "count": {"type": "integer", "minimum": 1},
        "ratio": {"type": ["number", "null"]},
        "force": {"type": "boolean"},
        "mode": {"enum": ["append", "replace"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "owner": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "uid": {"type": "integer"}},
            "required": ["name"],
        },
        "extra": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
    },
    "required": ["path", "count"],
}
PROPOSED: dict[str, Any] = {
    "path": "a.txt",
    "count": 2,
    "ratio": None,
    "force": True,
    "mode": "replace",
    "tags": ["x", "y"],
    "owner": {"name": "ada"},
    "extra": 7,
}


def click(wire: Wire, widget: Any) -> None:
    wire.comms[widget.model_id].deliver({"method": "custom", "content": {"event": "click"}})


def send(wire: Wire, widget: Any, value: Any, key: str = "value") -> None:
    """What the browser sends when the person edits a widget (a drop-down sends its index)."""
    wire.comms[widget.model_id].deliver(
        {"method": "update", "state": {key: value}, "buffer_paths": []}
    )


def find(wire: Wire, since: int, model: str, **state: Any) -> Any:
    """The one widget (by comm id, as the browser knows it) whose state matches."""
    from ipywidgets import Widget

    found = [
        cid
        for cid in list(wire.comms)[since:]
        if wire.state(cid).get("_model_name") == model
        and all(wire.state(cid).get(k) == v for k, v in state.items())
    ]
    assert len(found) == 1, (model, state, found)
    return Widget.widgets[found[0]]


def test_the_form_is_built_from_the_schema_and_prefilled(wire: Wire) -> None:
    since = len(wire.comms)
    form = EditForm(SCHEMA, PROPOSED)
    assert form.value() == PROPOSED  # untouched, it reads back exactly what was proposed
    assert form.mode.value == "Form"
    path = find(wire, since, "TextModel", value="a.txt")
    count = find(wire, since, "TextModel", value="2")
    send(wire, path, "data/a.txt")
    send(wire, count, "5")
    drop = find(wire, since, "DropdownModel")
    send(wire, drop, 0, "index")  # "append"
    value = form.value()
    assert (value["path"], value["count"], value["mode"]) == ("data/a.txt", 5, "append")
    assert value["extra"] == 7  # anyOf of two types: a JSON box, prefilled
    send(wire, count, "five")
    with pytest.raises(FormError, match="/count: enter an integer"):
        form.value()


def test_arrays_add_and_remove_items_and_optional_fields_can_be_left_out(wire: Wire) -> None:
    since = len(wire.comms)
    form = EditForm(SCHEMA, {"path": "p", "count": 1})
    value = form.value()
    assert value == {"path": "p", "count": 1}  # optional fields not proposed stay out
    adds = [
        cid for cid in list(wire.comms)[since:] if wire.state(cid).get("description") == "Add item"
    ]
    from ipywidgets import Widget

    click(wire, Widget.widgets[adds[0]])
    click(wire, Widget.widgets[adds[0]])
    includes = [
        cid for cid in list(wire.comms)[since:] if wire.state(cid).get("description") == "include"
    ]
    assert len(includes) == 7  # ratio, force, mode, tags, owner, owner's uid, extra
    send(wire, Widget.widgets[includes[3]], True)  # include tags
    assert form.value()["tags"] == ["", ""]
    mode = find(wire, since, "DropdownModel")
    send(wire, mode, 1, "index")  # editing an optional field includes it
    assert form.value()["mode"] == "replace"


def test_json_mode_round_trips_and_a_big_schema_falls_back_to_json(wire: Wire) -> None:
    form = EditForm(SCHEMA, PROPOSED)
    form.mode.value = "JSON"
    assert form.raw is not None and form.value() == PROPOSED
    form.raw.value = '{"path": "b", "count": 3}'
    form.mode.value = "Form"
    assert form.value() == {"path": "b", "count": 3}
    big = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(MAX_FIELDS)}}
    wide = EditForm(big, {})
    assert wide.mode.value == "JSON" and wide.mode.disabled and wide.value() == {}
    extra = EditForm(SCHEMA, {**PROPOSED, "unlisted": 1})  # keys the schema does not list
    assert extra.mode.value == "JSON" and extra.value() == {**PROPOSED, "unlisted": 1}


@tool(needs_approval=True, preview=lambda args: f"would overwrite {args['path']} (3 lines)")
def write_file(path: str, count: int = 1) -> str:
    """Write a file."""
    written.append(path)
    return f"wrote {path}"


written: list[str] = []


async def run_with_view(
    wire: Wire, model: ScriptedModel, act: Any, **agent_kw: Any
) -> tuple[RunView, Any]:
    asked = InteractiveApprover(remember_always=False)
    rules = agent_kw.pop("rules", RuleSet())
    agent = Agent(model, [write_file], approver=RuleApprover(rules, fallback=asked), **agent_kw)
    view = RunView("q", approver=asked, clock=wire.clock)
    run = agent.start("go")
    async for event in run.events():
        view.handle(event)
        await act(view, event)
    result = await run.result()
    view.close()
    return view, result


async def test_edit_then_approve_in_the_card(wire: Wire) -> None:
    written.clear()
    since = len(wire.comms)
    model = ScriptedModel([Turn(Call("write_file", {"path": "a.txt"}, id="c1")), "done"])

    async def act(view: RunView, event: Any) -> None:
        if isinstance(event, ToolPreviewed):
            card = view.cards["c1"]
            assert card.preview is not None
            assert "would overwrite a.txt" in str(card.preview.outputs)
            bar = card.approval
            assert bar is not None
            assert card.preview_label is not None
            assert "nothing has run yet" in card.preview_label.value
            click(wire, bar.edit)
            # the preview was computed for the model's arguments: with the form open it says so
            assert "the model&#x27;s arguments would do, not your edit" in card.preview_label.value
            click(wire, bar.edit)  # Cancel edit
            assert "nothing has run yet" in card.preview_label.value
            click(wire, bar.edit)
            path = find(wire, since, "TextModel", value="a.txt")
            count = find(wire, since, "TextModel", value="1")
            send(wire, count, "0")
            send(wire, path, "data/a.txt")
            click(wire, bar.approve)  # count 0 is fine for the schema: it runs
            click(wire, bar.approve)  # a double click decides nothing more

    view, result = await run_with_view(wire, model, act)
    assert result.stop_reason == "finished"
    assert written == ["data/a.txt"]
    card = view.cards["c1"]
    assert "approved by you with your edit" in card.header.value
    # once it ran, the live card's preview no longer says that nothing has run
    assert card.preview_label is not None
    assert "nothing has run yet" not in card.preview_label.value
    assert "shown before it was approved" in card.preview_label.value
    assert (
        card.notes is not None and "/path" in card.notes.value and "data/a.txt" in card.notes.value
    )
    html = run_outputs(view.transcript)[0][0]["text/html"]
    assert "Proposed by the model" in html and "Ran with" in html
    assert "by you: /path &quot;a.txt&quot; → &quot;data/a.txt&quot;" in html
    assert "would overwrite a.txt" in html  # the preview is kept in the saved card
    assert "Preview of the model&#x27;s arguments, not your edit" in html  # not of what ran
    assert "What the model read instead" in html
    record = view.transcript.to_metadata()["calls"][0]
    assert record["proposed_arguments"] == {"path": "a.txt"}
    assert record["executed_arguments"] == {"path": "data/a.txt", "count": 0}
    assert record["binding"]["call_id"] == "c1" and len(record["binding"]["arguments_sha256"]) == 64


async def test_an_edit_the_schema_refuses_is_explained_inline_and_can_be_fixed(wire: Wire) -> None:
    written.clear()
    since = len(wire.comms)
    strict = {"type": "object", "properties": {"path": {"type": "string", "pattern": "^data/"}}}

    @tool(needs_approval=True, schema=strict)
    def write_file(path: str) -> str:
        """Write a file."""
        written.append(path)
        return "ok"

    asked = InteractiveApprover()
    model = ScriptedModel([Turn(Call("write_file", {"path": "data/a"}, id="c1")), "done"])
    agent = Agent(model, [write_file], approver=asked)
    view = RunView("q", approver=asked, clock=wire.clock)
    run = agent.start("go")
    async for event in run.events():
        view.handle(event)
        if isinstance(event, ApprovalRequested):
            bar = view.cards["c1"].approval
            assert bar is not None
            click(wire, bar.edit)
            path = find(wire, since, "TextModel", value="data/a")
            send(wire, path, "/etc/passwd")
            click(wire, bar.approve)
            assert bar.form is not None and "does not match" in bar.form.error.value
            assert "/path" in bar.form.error.value and not bar.closed  # nothing decided
            send(wire, path, "data/b")
            click(wire, bar.approve)
            assert bar.closed and bar.form.error.value == ""
    await run.result()
    assert written == ["data/b"]


async def test_rules_and_hooks_show_on_the_card_and_in_the_saved_output(wire: Wire) -> None:
    written.clear()
    rules = RuleSet([parse_rule("allow write_file path=data/*")])

    def into_data(call: ToolCall, arguments: dict[str, Any]) -> Any:
        if arguments["path"].startswith("/"):
            return veto("absolute paths are not allowed")
        return {**arguments, "path": "data/" + arguments["path"]}

    model = ScriptedModel(
        [
            Turn(
                Call("write_file", {"path": "a.txt"}, id="c1"),
                Call("write_file", {"path": "/x"}, id="c2"),
            ),
            "done",
        ]
    )

    async def act(view: RunView, event: Any) -> None:
        return None

    view, _ = await run_with_view(wire, model, act, rules=rules, before_tool=[into_data])
    assert written == ["data/a.txt"]
    first, second = view.cards["c1"], view.cards["c2"]
    assert "allowed by rule: allow write_file path=data/*" in first.header.value
    assert first.notes is not None and "by hook into_data: /path" in first.notes.value
    assert (
        second.notes is not None and "vetoed: absolute paths are not allowed" in second.notes.value
    )
    saved = run_outputs(view.transcript)[0][0]
    assert "allowed by rule: allow write_file path=data/*" in saved["text/html"]
    assert "before-tool hook into_data vetoed" in saved["text/markdown"]
    assert "changed by hook into_data: /path" in saved["text/plain"]


def test_a_late_click_says_it_was_too_late(wire: Wire) -> None:
    call = ToolCall("c9", "delete", '{"path": "x"}')
    view = RunView("q", approver=InteractiveApprover(), clock=wire.clock)
    from nbagent.events import ToolCallReady, ToolCallStarted

    view.handle(ToolCallStarted(1, "c9", "delete"))
    view.handle(ToolCallReady(1, call, {"path": "x"}))
    view.handle(ApprovalRequested(ApprovalRequest.for_call(call, {"path": "x"}, timeout=60)))
    card = view.cards["c9"]
    assert "(answered “approval timed out” after 1 min 0 s)" in card.header.value
    bar = card.approval
    assert bar is not None
    click(wire, bar.approve)  # nobody is waiting for it (the approver has no such request)
    assert "Too late" in bar.notice.value and bar.closed
    assert bar.decision == Decision(True, None, by="person")


def test_a_new_card_after_an_earlier_view_was_closed(wire: Wire) -> None:
    """Closing a finished run's widgets closes their layouts: none may be shared with later ones."""
    for call_id in ("c1", "c2"):
        call = ToolCall(call_id, "write_file", '{"path": "a"}')
        view = RunView("q", approver=InteractiveApprover(), clock=wire.clock)
        from nbagent.events import ToolCallReady, ToolCallStarted

        view.handle(ToolCallStarted(1, call_id, "write_file"))
        view.handle(ToolCallReady(1, call, {"path": "a"}))
        request = ApprovalRequest.for_call(call, {"path": "a"}, schema=SCHEMA, preview=True)
        view.handle(ApprovalRequested(request))
        bar = view.cards[call_id].approval
        assert bar is not None
        click(wire, bar.edit)  # the form's widgets too
        view.close()
        view.dispose()


async def test_what_a_hook_adds_is_redacted_on_the_card_and_in_the_saved_record(wire: Wire) -> None:
    secret = "sk-test-0123456789abcdefghijklmn"

    def sign(call: ToolCall, arguments: dict[str, Any]) -> Any:
        return {**arguments, "path": f"data/{secret}"}

    model = ScriptedModel([Turn(Call("write_file", {"path": "a.txt"}, id="c1")), "done"])

    async def act(view: RunView, event: Any) -> None:
        if isinstance(event, ApprovalRequested):
            bar = view.cards["c1"].approval
            assert bar is not None
            click(wire, bar.approve)

    view, _ = await run_with_view(wire, model, act, before_tool=[sign])
    card = view.cards["c1"]
    assert card.notes is not None and secret not in card.notes.value and "***" in card.notes.value
    record = view.transcript.to_metadata()
    assert (
        secret not in str(record) and record["calls"][0]["executed_arguments"]["path"] == "data/***"
    )
    assert all(secret not in str(b[0]) for b in run_outputs(view.transcript))


async def test_what_an_after_hook_did_is_listed_after_the_call_ran(wire: Wire) -> None:
    model = ScriptedModel([Turn(Call("write_file", {"path": "data/a"}, id="c1")), "done"])
    rules = RuleSet([parse_rule("allow write_file")])

    async def act(view: RunView, event: Any) -> None:
        return None

    view, _ = await run_with_view(
        wire, model, act, rules=rules, after_tool=[lambda call, args, result: "short"]
    )
    notes = view.cards["c1"].notes
    assert notes is not None and "Before it ran" not in notes.value
    assert "After it ran:" in notes.value
    assert "after-tool hook &lt;lambda&gt; rewrote" in notes.value
    html = run_outputs(view.transcript)[0][0]["text/html"]
    after = html.index("After it ran")
    assert "Before it ran" not in html and html.index("after-tool hook") > after
    assert html.index("Result") < after  # below the tool's own result
