"""A debugger or a profiler still works after the agent's snippets ran (and after one was
interrupted, and after a read of an object was stopped): in a fresh interpreter, since a hang
there must fail the test, not stall the run."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import asyncio, cProfile, sys
    from nbagent import Agent, AutoApprove, kernel_tools
    from nbagent.models import Call, ScriptedModel, Turn

    kit = kernel_tools({})
    turns = [Turn(Call("run_python", {"code": "x = 1"})), "done"]
    Agent(ScriptedModel(turns), list(kit), approver=AutoApprove()).run_sync("go")

    async def stopped():  # a snippet stopped while it runs, as Stop does
        call = Turn(Call("run_python", {"code": "import time\\nwhile True: time.sleep(0.01)"}))
        run = Agent(ScriptedModel([call, "done"]), list(kit), approver=AutoApprove()).start("go")
        async for event in run.events():
            if type(event).__name__ == "ToolCallStarted":
                await asyncio.sleep(0.3)
                run.cancel()
        await run.result()

    asyncio.run(stopped())

    from nbagent._ground.guard import Reader, Unreadable

    def spin():  # a repr that never returns, stopped by the Reader's time limit
        while True:
            pass

    with Reader(0.2) as reader:
        try:
            reader.call("a repr", spin)
        except Unreadable:
            pass
    traced = []

    def tracer(frame, event, arg):
        traced.append(event)
        return tracer

    def work():
        return sum(range(10))

    sys.settrace(tracer)
    work()
    sys.settrace(None)
    cProfile.run("work()", "/dev/null")
    print("traced", len(traced) > 0, [s.status for s in kit.snippets()])
    """
)


def test_settrace_and_cprofile_work_after_snippets_ran_and_one_and_a_read_were_stopped() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "traced True ['done', 'interrupted']", done.stdout
