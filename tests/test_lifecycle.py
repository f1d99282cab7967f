"""Lifecycle: what tools and approvers raise never escapes a run, tools that will not stop are
abandoned truthfully, every consumer gets its own input, and approvals can time out.

Cases where user code raises KeyboardInterrupt or SystemExit run in a subprocess: without the
fix they would take down the test session itself (as they took down Jupyter kernels)."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import threading
from typing import Any

import pytest

from nbagent import (
    Agent,
    ApprovalRequest,
    Decision,
    InteractiveApprover,
    ScriptedApprover,
    Tool,
    ToolContext,
)
from nbagent.events import (
    AbandonedCall,
    ApprovalRequested,
    ApprovalResolved,
    ToolCallReady,
    ToolFinished,
    abandoned_calls_shown,
)
from nbagent.messages import ToolMessage
from nbagent.models import Call, ScriptedModel, Turn

from .conftest import assert_history_valid

OBJ = {"type": "object"}

# --- 8. a tool's BaseException stops the run, cleanly -------------------------------------

SCRIPT = r"""
import asyncio, sys
from nbagent import Agent, Decision, RunFailedError, ScriptedApprover, Tool
from nbagent.models import Call, ScriptedModel, Turn

kind, mode = sys.argv[1], sys.argv[2]
raised = {"kbd": KeyboardInterrupt, "exit": SystemExit}[kind.split("-")[1]]

def boom_sync(ctx):
    raise raised("from the tool")

async def boom_async(ctx):
    await asyncio.sleep(0)
    raise raised("from the tool")

async def slow(ctx):
    await asyncio.sleep(30)

class Approver:
    def known_decision(self, request):
        if kind.startswith("known"):
            raise raised("from the rules")
        return None

    async def decide(self, request):
        raise raised("from the approver")

asks = kind.startswith(("decide", "known"))
boom = boom_sync if kind.startswith("sync") else boom_async
tools = [Tool(name="boom", execute=boom, needs_approval=asks), Tool(name="slow", execute=slow)]
calls = [Call("boom", {}, id="b")] + ([Call("slow", {}, id="s")] if mode == "batch" else [])
turns = [Turn(*calls)] + (["after"] if asks else []) + ["second"]
model = ScriptedModel(turns)
agent = Agent(model, tools, approver=Approver())

def report(outcome):
    calls = [c.id for m in agent.messages for c in getattr(m, "tool_calls", ())]
    results = [r.call_id for m in agent.messages for r in getattr(m, "results", ())]
    texts = [r.text for m in agent.messages for r in getattr(m, "results", ())]
    print(outcome, "valid" if calls == results else "INVALID", "idle" if not agent._running
          else "RUNNING", "|", " / ".join(texts), flush=True)

def outcome_of(exc):
    if isinstance(exc, RunFailedError):
        return f"{type(exc).__name__}({type(exc.error).__name__}: {exc.error})"
    frames = [f.name for f in __import__("traceback").extract_tb(exc.__traceback__)]
    where = "from-tool" if ("boom_sync" in frames or "boom_async" in frames) else "no-tool-frame"
    return f"raised {type(exc).__name__}({exc}) {where}"

def run_once(call):
    try:
        result = call()
        report("finished:" + result.text)
    except (RunFailedError, KeyboardInterrupt, SystemExit) as exc:
        report(outcome_of(exc))

if mode in ("script", "batch"):
    run_once(lambda: agent.run_sync("go"))
elif mode == "quiet":
    run_once(lambda: agent.run_sync("go", raise_on_error=False))
elif mode == "await":
    async def main():
        try:
            result = await agent.run("go")
            report("finished:" + result.text)
        except (RunFailedError, KeyboardInterrupt, SystemExit) as exc:
            report(outcome_of(exc))
    asyncio.run(main())
elif mode == "stream":
    async def main():
        seen = []
        try:
            async for event in agent.stream("go"):
                seen.append(type(event).__name__)
        except (KeyboardInterrupt, SystemExit) as exc:
            report(outcome_of(exc) + " after " + seen[-1])
    asyncio.run(main())
elif mode == "worker":
    async def cell():  # a foreground notebook cell: a loop already runs in this thread
        run_once(lambda: agent.run_sync("go"))
    asyncio.new_event_loop().run_until_complete(cell())
elif mode == "kernel":
    async def kernel():  # a background run on the kernel's own loop
        run = agent.start("go")
        async for event in run.events():
            pass
        result = await run.result()
        report(f"{result.stop_reason}:{type(result.error).__name__}")
    loop = asyncio.new_event_loop()
    loop.run_until_complete(kernel())
print("second run:", agent.run_sync("again").text, flush=True)
"""


def run_script(kind: str, mode: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, kind, mode], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    return done.stdout


@pytest.mark.parametrize("kind", ["sync-kbd", "async-kbd", "sync-exit", "async-exit"])
@pytest.mark.parametrize("mode", ["script", "worker", "quiet", "await"])
def test_a_tools_base_exception_is_reraised_after_the_history_is_repaired(
    kind: str, mode: str
) -> None:
    # Ctrl-C and sys.exit() in a tool mean what they mean in a script: the run stops, every
    # call is answered, the agent is idle, and then the tool's own exception (its own
    # traceback included) reaches the caller, even with raise_on_error=False.
    out = run_script(kind, mode)
    raised = "KeyboardInterrupt" if kind.endswith("kbd") else "SystemExit"
    first, second = out.splitlines()
    assert first.startswith(f"raised {raised}(from the tool) from-tool valid idle"), out
    assert f"boom raised {raised}: from the tool, which stops the whole run" in first
    assert second == "second run: second"


@pytest.mark.parametrize("kind", ["async-kbd", "sync-exit"])
def test_a_streamed_run_reraises_after_its_last_event(kind: str) -> None:
    out = run_script(kind, "stream")
    raised = "KeyboardInterrupt" if kind.endswith("kbd") else "SystemExit"
    first, second = out.splitlines()
    assert first.startswith(f"raised {raised}(from the tool) from-tool after RunFailed valid"), out
    assert second == "second run: second"


@pytest.mark.parametrize("kind", ["sync-kbd", "async-exit"])
def test_in_a_kernel_the_loop_survives(kind: str) -> None:
    out = run_script(kind, "kernel")
    first, second = out.splitlines()
    assert first.startswith("failed:RunAbortedError valid idle"), out
    assert second == "second run: second"


def test_siblings_are_answered_when_a_tool_stops_the_run() -> None:
    out = run_script("async-kbd", "batch")
    first = out.splitlines()[0]
    assert first.startswith("raised KeyboardInterrupt(from the tool)") and " valid idle " in first
    assert "the run was stopped: tool 'boom' raised KeyboardInterrupt" in first
    assert "before this call finished" in first  # the slow sibling's answer


@pytest.mark.parametrize(("kind", "where"), [("decide-kbd", "approver"), ("known-kbd", "rules")])
def test_an_approver_raising_keyboard_interrupt_only_denies_the_call(kind: str, where: str) -> None:
    out = run_script(kind, "script")
    first = out.splitlines()[0]
    assert first.startswith("finished:after valid idle"), out
    assert f"the approver failed: KeyboardInterrupt: from the {where}" in first


async def test_a_tool_raising_cancelled_error_by_itself_is_an_error_result() -> None:
    async def confused(ctx: ToolContext) -> str:
        raise asyncio.CancelledError

    model = ScriptedModel([Turn(Call("c", {}), Call("ok", {})), "after"])
    ok = Tool(name="ok", input_schema=OBJ, execute=lambda ctx: "fine")
    agent = Agent(model, [Tool(name="c", input_schema=OBJ, execute=confused), ok])
    events = [e async for e in agent.stream("go")]
    statuses = {e.call.name: e.status for e in events if isinstance(e, ToolFinished)}
    assert statuses == {"c": "error", "ok": "done"}
    results = next(m for m in agent.messages if isinstance(m, ToolMessage)).results
    assert "raised CancelledError by itself" in results[0].text
    assert agent.messages[-1].text == "after"  # type: ignore[union-attr]


ENDS_MID_RUN = """
import asyncio, sys
from nbagent import Agent, InteractiveApprover, tool
from nbagent.models import Call, ScriptedModel, Turn

@tool(needs_approval=sys.argv[1] == "approval")
async def slow() -> str:
    \"\"\"Take a while.\"\"\"
    await asyncio.sleep(10)
    return "late"

async def main():
    agent = Agent(ScriptedModel([Turn(Call("slow", {})), "ok"]), [slow],
                  approver=InteractiveApprover())
    agent.start("go")
    await asyncio.sleep(0.3)  # the tool runs, or its call waits for a person
    raise SystemExit("the script gives up")

try:
    asyncio.run(main())
except SystemExit as stop:
    print(stop)
"""


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Task.cancelling() is Python 3.11+")
@pytest.mark.parametrize("waiting_on", ["tool", "approval"])
def test_a_script_ending_mid_run_prints_no_stray_error(waiting_on: str) -> None:
    # asyncio.run cancels every task at its end; a tool's or an approver's task cancelled that
    # way was taken for user code raising CancelledError by itself, and asyncio printed
    # "unhandled exception during asyncio.run() shutdown ... ToolRaised: CancelledError"
    done = subprocess.run(
        [sys.executable, "-c", ENDS_MID_RUN, waiting_on], capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == "the script gives up"
    assert done.stderr == ""


# --- 9. tools that will not stop are abandoned, truthfully ---------------------------------


def ended_event(handle: AbandonedCall) -> threading.Event:
    ended = threading.Event()
    handle.add_done_callback(lambda h: ended.set())
    return ended


async def test_a_sync_tool_that_ignores_its_timeout_is_abandoned() -> None:
    release = threading.Event()

    def stubborn(ctx: ToolContext) -> str:
        release.wait(30)  # never looks at ctx.cancelled()
        return "late"

    tool = Tool(name="s", input_schema=OBJ, execute=stubborn, timeout=0.05)
    agent = Agent(ScriptedModel([Turn(Call("s", {})), "ok"]), [tool])
    events = [e async for e in agent.stream("go")]
    [finished] = [e for e in events if isinstance(e, ToolFinished)]
    assert finished.status == "timeout"
    assert "still running; its result will be ignored" in finished.result.text
    handle = finished.abandoned
    assert handle is not None and not handle.done()
    ended = ended_event(handle)
    release.set()
    assert await asyncio.to_thread(ended.wait, 30)
    assert handle.done()
    late: list[AbandonedCall] = []
    handle.add_done_callback(late.append)  # already ended: called at once
    assert late == [handle]


async def test_an_async_tool_that_swallows_cancellation_is_abandoned() -> None:
    release = asyncio.Event()

    async def stubborn(ctx: ToolContext) -> str:
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                continue
        return "late"

    tool = Tool(name="s", input_schema=OBJ, execute=stubborn, timeout=0.05)
    agent = Agent(ScriptedModel([Turn(Call("s", {})), "ok"]), [tool])
    events = [e async for e in agent.stream("go")]
    [finished] = [e for e in events if isinstance(e, ToolFinished)]
    handle = finished.abandoned
    assert handle is not None and not handle.done()
    ended = ended_event(handle)
    release.set()
    await asyncio.sleep(0.01)
    assert ended.is_set() and handle.done()


async def test_a_tool_that_stops_in_time_is_not_abandoned() -> None:
    async def polite(ctx: ToolContext) -> str:
        await asyncio.sleep(30)
        return "never"

    tool = Tool(name="p", input_schema=OBJ, execute=polite, timeout=0.05)
    events = [
        e async for e in Agent(ScriptedModel([Turn(Call("p", {})), "ok"]), [tool]).stream("go")
    ]
    [finished] = [e for e in events if isinstance(e, ToolFinished)]
    assert finished.abandoned is None and "was stopped" in finished.result.text


async def test_cancelling_a_run_reports_an_abandoned_function() -> None:
    release = threading.Event()
    began = threading.Event()

    def stubborn(ctx: ToolContext) -> str:
        began.set()
        release.wait(30)
        return "late"

    agent = Agent(ScriptedModel([Turn(Call("s", {}, id="c"))]), [Tool(name="s", execute=stubborn)])
    run = agent.start("go")
    finished = []
    async for event in run.events():
        if type(event).__name__ == "ToolStarted":
            await asyncio.to_thread(began.wait, 30)
            run.cancel()
        if isinstance(event, ToolFinished):
            finished.append(event)
    result = await run.result()
    assert result.stop_reason == "cancelled"
    [event] = finished
    assert event.status == "cancelled" and event.abandoned is not None
    [message] = [m for m in agent.messages if isinstance(m, ToolMessage)]
    assert "its function is still running and its result will be ignored" in message.results[0].text
    assert_history_valid(agent.messages)
    ended = ended_event(event.abandoned)
    release.set()
    assert await asyncio.to_thread(ended.wait, 30)


EXIT_SCRIPT = r"""
import asyncio, sys, threading
from nbagent import Agent, Tool
from nbagent.models import Call, ScriptedModel, Turn

def forever_sync(ctx):
    threading.Event().wait()

async def forever_async(ctx):
    while True:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            pass

execute = forever_sync if sys.argv[1] == "sync" else forever_async
agent = Agent(ScriptedModel([Turn(Call("f", {})), "ok"]),
              [Tool(name="f", execute=execute, timeout=0.1)])
result = agent.run_sync("go")
print(result.text, "|", result.messages[2].results[0].text, flush=True)
"""


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_run_sync_returns_and_the_interpreter_exits(kind: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", EXIT_SCRIPT, kind],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the process did not exit; printed {out!r}")
    assert proc.returncode == 0, err[-3000:]
    assert out.startswith("ok | f did not finish within 0.1 s"), out
    assert "still running; its result will be ignored" in out
    assert "is abandoned" in err  # logged
    assert "Exception ignored" not in err  # closing the abandoned coroutine raises nothing


# --- 10. every consumer gets its own input -------------------------------------------------


async def test_a_tool_mutating_its_input_changes_nothing_else() -> None:
    def rule(value: Any) -> bool:
        value["path"] = "rule was here"  # even the approval rule gets a copy
        return True

    def meddle(ctx: ToolContext) -> str:
        ctx.input["path"] = "/etc/passwd"
        ctx.input["tags"].append("evil")
        return "done"

    approver = ScriptedApprover([True])
    model = ScriptedModel([Turn(Call("m", {"path": "a.txt", "tags": ["x"]})), "ok"])
    tool = Tool(name="m", input_schema=OBJ, execute=meddle, needs_approval=rule)
    events = [e async for e in Agent(model, [tool], approver=approver).stream("go")]
    original = {"path": "a.txt", "tags": ["x"]}
    assert approver.requests[0].input == original
    [ready] = [e for e in events if isinstance(e, ToolCallReady)]
    assert ready.input == original
    [requested] = [e for e in events if isinstance(e, ApprovalRequested)]
    assert requested.request.input == original


# --- 11. approvals time out; a broken approver denies one call ----------------------------


async def test_an_unanswered_approval_times_out_and_the_run_goes_on() -> None:
    log: list[Any] = []

    async def run(ctx: ToolContext) -> str:
        log.append(ctx.input)
        return "ran"

    approver = InteractiveApprover()
    model = ScriptedModel([Turn(Call("t", {})), "went on"])
    tool = Tool(name="t", input_schema=OBJ, execute=run, needs_approval=True)
    agent = Agent(model, [tool], approver=approver, approval_timeout=0.05)
    events = [e async for e in agent.stream("go")]
    [resolved] = [e for e in events if isinstance(e, ApprovalResolved)]
    assert resolved.decision == Decision(False, "approval timed out after 0.05 s", by="timeout")
    assert log == [] and approver.pending() == []
    [message] = [m for m in agent.messages if isinstance(m, ToolMessage)]
    assert message.results[0].text == "This call to t was not run: approval timed out after 0.05 s"
    assert agent.messages[-1].text == "went on"  # type: ignore[union-attr]


def test_approval_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="approval_timeout"):
        Agent(ScriptedModel([]), approval_timeout=0)


class KnownRaises:
    def known_decision(self, request: ApprovalRequest) -> Decision | None:
        raise RuntimeError("rules file is corrupt")

    async def decide(self, request: ApprovalRequest) -> Decision:
        return Decision(True)


class DecideRaises:
    async def decide(self, request: ApprovalRequest) -> Decision:
        raise LookupError("no such person")


class DecideJunk:
    async def decide(self, request: ApprovalRequest) -> Any:
        return "yes please"


class DecideCancels:
    async def decide(self, request: ApprovalRequest) -> Decision:
        raise asyncio.CancelledError


@pytest.mark.parametrize(
    ("approver", "reason"),
    [
        (KnownRaises(), "the approver failed: RuntimeError: rules file is corrupt"),
        (DecideRaises(), "the approver failed: LookupError: no such person"),
        (DecideJunk(), "the approver returned a str, not a Decision"),
        (DecideCancels(), "the approver failed: CancelledError"),
    ],
)
async def test_a_broken_approver_denies_that_call_only(approver: Any, reason: str) -> None:
    log: list[Any] = []

    async def run(ctx: ToolContext) -> str:
        log.append(ctx.call.name)
        return "ran"

    guarded = Tool(name="guarded", input_schema=OBJ, execute=run, needs_approval=True)
    free = Tool(name="free", input_schema=OBJ, execute=run)
    model = ScriptedModel([Turn(Call("guarded", {}), Call("free", {})), "went on"])
    agent = Agent(model, [guarded, free], approver=approver)
    result = await agent.run("go")
    assert result.stop_reason == "finished" and log == ["free"]
    [message] = [m for m in agent.messages if isinstance(m, ToolMessage)]
    assert reason in message.results[0].text and message.results[0].is_error


def test_run_errors_survive_pickling() -> None:
    import pickle

    from nbagent import RunAbortedError

    error = RunAbortedError("tool 'x' raised SystemExit: 3", tool="x", raised=SystemExit(3))
    copy = pickle.loads(pickle.dumps(error))
    assert str(copy) == str(error) and copy.tool == "x" and copy.raised.args == (3,)


@pytest.mark.parametrize("shown", [False, True])
async def test_an_abandoned_call_is_logged_as_a_warning_unless_a_front_end_shows_it(
    shown: bool, caplog: pytest.LogCaptureFixture
) -> None:
    release = threading.Event()

    def stubborn(ctx: ToolContext) -> str:
        release.wait(30)
        return "late"

    tool = Tool(name="s", input_schema=OBJ, execute=stubborn, timeout=0.05)
    agent = Agent(ScriptedModel([Turn(Call("s", {})), "ok"]), [tool])
    caplog.set_level(logging.INFO, logger="nbagent")
    try:
        if shown:
            with abandoned_calls_shown():
                run = agent.start("go")
        else:
            run = agent.start("go")
        await run.result()
    finally:
        release.set()
    [record] = [r for r in caplog.records if "is abandoned" in r.getMessage()]
    assert record.levelno == (logging.INFO if shown else logging.WARNING)
