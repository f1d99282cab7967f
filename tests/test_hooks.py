"""Before-tool and after-tool hooks: veto, rewrite (re-validated, approved as rewritten, told to
the model), rewrite the result the model reads, and fail safely when they raise or hang."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from nbagent import Agent, ScriptedApprover, approve, tool
from nbagent.approvals.hooks import veto
from nbagent.content import ToolResult
from nbagent.events import (
    ApprovalRequested,
    ToolArgumentsChanged,
    ToolFinished,
    ToolHookApplied,
    ToolStarted,
)
from nbagent.messages import ToolMessage
from nbagent.models import Call, ScriptedModel, Turn
from nbagent.tools import ToolCall

from .conftest import assert_history_valid

ran: list[Any] = []


@tool
def read_file(path: str) -> str:
    """Read a file."""
    ran.append(path)
    return f"contents of {path}: alice@example.com"


@tool(needs_approval=True)
def write_file(path: str) -> str:
    """Write a file."""
    ran.append(path)
    return f"wrote {path}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


def model_for(name: str, path: str) -> ScriptedModel:
    return ScriptedModel([Turn(Call(name, {"path": path}, id="c1")), "done"])


def sent_result(model: ScriptedModel) -> Any:
    message = model.requests[1].messages[-1]
    assert isinstance(message, ToolMessage)
    return message.results[0]


async def test_a_veto_refuses_the_call_with_its_reason() -> None:
    def no_etc(call: ToolCall, arguments: dict[str, Any]) -> Any:
        return veto("nothing under /etc") if arguments["path"].startswith("/etc") else None

    model = model_for("read_file", "/etc/passwd")
    agent = Agent(model, [read_file], before_tool=[no_etc])
    events = [e async for e in agent.stream("go")]
    assert ran == []
    applied = next(e for e in events if isinstance(e, ToolHookApplied))
    assert (applied.stage, applied.hook, applied.action) == ("before", "no_etc", "vetoed")
    finished = next(e for e in events if isinstance(e, ToolFinished))
    assert finished.status == "denied"
    assert "nothing under /etc" in sent_result(model).text
    assert_history_valid(agent.messages)


async def test_a_rewrite_is_checked_approved_as_rewritten_and_told() -> None:
    agent = Agent(model_for("write_file", "/notes.txt"), [write_file])

    @agent.before_tool
    async def into_data(call: ToolCall, arguments: dict[str, Any]) -> Any:
        await asyncio.sleep(0)
        return {"path": "data" + arguments["path"]}

    approver = ScriptedApprover([True])
    agent.approver = approver
    events = [e async for e in agent.stream("go")]
    assert ran == ["data/notes.txt"]
    assert approver.requests[0].input == {"path": "data/notes.txt"}  # the person sees what runs
    changed = next(e for e in events if isinstance(e, ToolArgumentsChanged))
    assert (changed.by, changed.previous, changed.arguments) == (
        "hook",
        {"path": "/notes.txt"},
        {"path": "data/notes.txt"},
    )
    assert changed.hook == "into_data"
    assert next(e for e in events if isinstance(e, ToolStarted)).input == {"path": "data/notes.txt"}
    text = sent_result(agent.generator).text  # type: ignore[arg-type]
    assert "before-tool hook" in text and "into_data" in text and "data/notes.txt" in text


async def test_a_hook_rewrite_and_a_person_edit_are_both_named() -> None:
    def into_data(call: ToolCall, arguments: dict[str, Any]) -> Any:
        return {"path": "data/" + arguments["path"]}

    model = model_for("write_file", "a.txt")
    approver = ScriptedApprover([approve(arguments={"path": "data/b.txt"})])
    agent = Agent(model, [write_file], approver=approver, before_tool=[into_data])
    await agent.run("go")
    assert ran == ["data/b.txt"]
    text = sent_result(model).text
    assert "by the before-tool hook" in text and "and then by the person who approved it" in text


@pytest.mark.parametrize(
    ("returned", "why"),
    [
        ({"path": 3}, "is not of type 'string'"),
        (["x"], "returns None, new arguments"),
        ({}, "required"),
    ],
)
async def test_a_rewrite_that_does_not_fit_is_refused(returned: Any, why: str) -> None:
    model = model_for("read_file", "a.txt")
    agent = Agent(model, [read_file], before_tool=[lambda call, args: returned])
    events = [e async for e in agent.stream("go")]
    assert ran == []
    failed = next(e for e in events if isinstance(e, ToolHookApplied))
    assert failed.action == "failed" and why in failed.detail
    assert why in sent_result(model).text


async def test_a_before_hook_that_raises_or_hangs_refuses_the_call() -> None:
    def broken(call: ToolCall, arguments: dict[str, Any]) -> Any:
        raise KeyboardInterrupt  # even this: it refuses the call, it does not stop the run

    release = threading.Event()

    def stuck(call: ToolCall, arguments: dict[str, Any]) -> Any:
        release.wait(5)
        return None

    for hook, why in (
        (broken, "raised KeyboardInterrupt"),
        (stuck, "did not finish within 0.05 s"),
    ):
        model = model_for("read_file", "a.txt")
        agent = Agent(model, [read_file], before_tool=[hook], hook_timeout=0.05)
        result = await agent.run("go")
        assert result.stop_reason == "finished"
        assert ran == []
        assert why in sent_result(model).text and "was not run" in sent_result(model).text
    release.set()


async def test_an_after_hook_rewrites_what_the_model_reads_only() -> None:
    def hide_emails(call: ToolCall, arguments: dict[str, Any], result: ToolResult) -> str:
        return result.text.replace("alice@example.com", "[email]")

    model = model_for("read_file", "a.txt")
    agent = Agent(model, [read_file], after_tool=[hide_emails])
    events = [e async for e in agent.stream("go")]
    assert sent_result(model).text == "contents of a.txt: [email]"
    finished = next(e for e in events if isinstance(e, ToolFinished))
    assert finished.result.text == "contents of a.txt: [email]"
    assert finished.original is not None
    assert finished.original.text == "contents of a.txt: alice@example.com"  # the person's
    applied = next(e for e in events if isinstance(e, ToolHookApplied))
    assert (applied.stage, applied.action) == ("after", "rewrote the result")


async def test_an_after_hook_that_fails_withholds_the_result_from_the_model() -> None:
    async def broken(call: ToolCall, arguments: dict[str, Any], result: ToolResult) -> Any:
        raise RuntimeError("redactor down")

    model = model_for("read_file", "a.txt")
    agent = Agent(model, [read_file], after_tool=[broken])
    events = [e async for e in agent.stream("go")]
    sent = sent_result(model)
    assert sent.is_error and "withheld" in sent.text and "redactor down" in sent.text
    assert "alice@example.com" not in sent.text
    finished = next(e for e in events if isinstance(e, ToolFinished))
    assert finished.original is not None and "alice@example.com" in finished.original.text


async def test_hooks_that_change_nothing_leave_no_trace() -> None:
    model = model_for("read_file", "a.txt")
    agent = Agent(
        model,
        [read_file],
        before_tool=[lambda call, args: dict(args)],
        after_tool=[lambda call, args, result: None],
    )
    events = [e async for e in agent.stream("go")]
    assert not [e for e in events if isinstance(e, (ToolArgumentsChanged, ToolHookApplied))]
    finished = next(e for e in events if isinstance(e, ToolFinished))
    assert finished.original is None and sent_result(model).text.startswith("contents of")


async def test_a_vetoed_call_is_never_offered_for_approval() -> None:
    approver = ScriptedApprover([True])
    agent = Agent(
        model_for("write_file", "x"),
        [write_file],
        approver=approver,
        before_tool=[lambda call, args: veto("read-only today")],
    )
    events = [e async for e in agent.stream("go")]
    assert approver.requests == [] and ran == []
    assert not [e for e in events if isinstance(e, ApprovalRequested)]


async def test_a_slow_sync_hook_does_not_block_the_loop() -> None:
    ticks: list[float] = []

    def slow(call: ToolCall, arguments: dict[str, Any]) -> Any:
        time.sleep(0.2)
        return None

    async def ticker() -> None:
        for _ in range(10):
            ticks.append(time.monotonic())
            await asyncio.sleep(0.01)

    agent = Agent(model_for("read_file", "a.txt"), [read_file], before_tool=[slow])
    tick = asyncio.ensure_future(ticker())
    await agent.run("go")
    await tick
    assert len(ticks) == 10  # the loop kept running while the hook slept on its thread


def test_hooks_must_be_functions_and_timeouts_positive() -> None:
    with pytest.raises(TypeError):
        Agent("offline", before_tool=["not a function"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="hook_timeout"):
        Agent("offline", hook_timeout=0)
    agent = Agent("offline")
    twin = agent.fork()
    twin.after_tool(lambda call, args, result: None)
    assert agent.after_tool_hooks == [] and len(twin.after_tool_hooks) == 1


async def test_a_secret_a_hook_adds_never_reaches_the_model_in_the_note() -> None:
    from nbagent.tools import tool as make_tool

    seen: list[str] = []

    @make_tool
    def fetch(url: str, token: str = "") -> str:
        """Fetch a page."""
        seen.append(token)
        return "page"

    secret = "sk-test-0123456789abcdefghijklmn"

    def sign(call: ToolCall, arguments: dict[str, Any]) -> Any:
        return {**arguments, "token": secret}

    model = ScriptedModel([Turn(Call("fetch", {"url": "https://x"}, id="c1")), "done"])
    agent = Agent(model, [fetch], before_tool=[sign])
    await agent.run("go")
    assert seen == [secret]  # the tool got it
    note = sent_result(model).text
    assert secret not in note and '"token": "***"' in note  # the model did not
