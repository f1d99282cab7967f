"""A plain terminal front end: ``python -m nbagent``. It only consumes events, like every front end.

Runs the offline model by default (``--model`` for a real one), with a few demo tools, and asks
for approvals at a prompt.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from typing import TextIO

from .agent import Agent
from .approval import ApprovalRequest, CallbackApprover, Decision, approval_policy
from .events import (
    AgentEvent,
    ApprovalRequested,
    ApprovalResolved,
    AssistantTextDelta,
    RunCancelled,
    RunFailed,
    RunFinished,
    StepFinished,
    ToolCallReady,
    ToolFinished,
    ToolProgress,
)
from .tools import Tool, tool

__all__ = ["main", "render_event"]


def demo_tools() -> list[Tool]:
    """Two small tools to try the loop with: one safe, one that asks first."""

    @tool
    def add(a: float, b: float) -> str:
        """Add two numbers.

        Args:
            a: The first number.
            b: The second number.
        """
        return f"{a} + {b} = {a + b}"

    @tool(needs_approval=True)
    def delete_file(path: str) -> str:
        """Pretend to delete a file (nothing is deleted).

        Args:
            path: The file to delete.
        """
        return f"(pretend) deleted {path}"

    return [add, delete_file]


def render_event(event: AgentEvent, out: TextIO) -> None:
    """Write one event as plain text."""
    if isinstance(event, AssistantTextDelta):
        out.write(event.text)
    elif isinstance(event, ToolCallReady):
        out.write(f"\n→ {event.call.name}({event.call.arguments})\n")
    elif isinstance(event, ApprovalResolved):
        verdict = "approved" if event.decision.approved else "denied"
        reason = f": {event.decision.reason}" if event.decision.reason else ""
        out.write(f"  [{verdict}{reason}]\n")
    elif isinstance(event, ToolProgress):
        out.write(f"  … {event.update.text}\n")
    elif isinstance(event, ToolFinished):
        text = event.result.text.replace("\n", "\n    ")
        out.write(f"  ← {event.status}: {text}\n")
    elif isinstance(event, StepFinished):
        pass
    elif isinstance(event, RunFinished):
        r = event.result
        out.write(f"\n[{r.stop_reason}; {r.steps} steps; {r.usage.total_tokens} tokens]\n")
    elif isinstance(event, RunFailed):
        out.write(f"\n[failed: {event.error}]\n")
    elif isinstance(event, RunCancelled):
        out.write("\n[cancelled]\n")
    out.flush()


def _ask(request: ApprovalRequest) -> Decision:
    print(f"\nApprove {request.tool_name}({request.call.arguments})? [y/N/reason] ", end="")
    sys.stdout.flush()
    answer = sys.stdin.readline().strip()
    if answer.lower() in ("y", "yes"):
        return Decision(True, by="terminal")
    return Decision(False, answer if answer.lower() not in ("", "n", "no") else None, by="terminal")


async def _chat(agent: Agent, prompts: Sequence[str], out: TextIO) -> int:
    interactive = not prompts
    status = 0
    while True:
        if interactive:
            out.write("\nyou> ")
            out.flush()
            line = await asyncio.to_thread(sys.stdin.readline)
            if not line:
                return status
            prompt = line.strip()
            if not prompt:
                continue
        else:
            if not prompts:
                return status
            prompt, prompts = prompts[0], prompts[1:]
        async for event in agent.stream(prompt):
            if isinstance(event, ApprovalRequested):
                continue
            render_event(event, out)
            if isinstance(event, RunFailed):
                status = 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m nbagent`` / ``nbagent``."""
    parser = argparse.ArgumentParser(prog="nbagent", description=__doc__)
    parser.add_argument("prompt", nargs="*", help="prompts to run in order (none: interactive)")
    parser.add_argument("-m", "--model", default=None, help="e.g. openai:gpt-4.1-mini, offline")
    parser.add_argument("--approve", choices=["ask", "auto", "deny"], default="ask")
    parser.add_argument("--max-steps", type=int, default=10)
    args = parser.parse_args(argv)
    approver = CallbackApprover(_ask) if args.approve == "ask" else approval_policy(args.approve)
    agent = Agent(args.model, demo_tools(), approver=approver, max_steps=args.max_steps)
    try:
        return asyncio.run(_chat(agent, list(args.prompt), sys.stdout))
    except KeyboardInterrupt:
        return 130
