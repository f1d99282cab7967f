"""An ACP agent for the tests, written with the SDK's agent side (``acp.run_agent``) and run as
a subprocess over stdio, as a real agent is.

What it does in a turn is read from the prompt's first word:

- ``chat``: a thought, a plan, three message chunks, the plan completed, ``end_turn``.
- ``tool``: a tool call (kind ``execute``, raw input ``{"command": "ls"}``), a permission
  request with the four ACP options; on an allow it runs (in progress, its output, completed)
  and says "ran"; on a reject or a cancel it reports the call failed and says "denied".
- ``edit``: an ``edit`` call with a diff, completed without asking.
- ``ghost``: asks permission for a call it never reported, then ends its turn without it.
- ``remember``: says the previous prompt of this session (the conversation goes on).
- ``crash``: a chunk, then the process exits with code 3 in the middle of the turn.
- ``malformed``: writes lines that are no JSON-RPC, then says "still here".
- ``big``: writes one line of 200,000 bytes, then says "after big".
- ``flood``: sends 500 message chunks.
- ``wait``: waits for ``session/cancel`` and ends its turn ``cancelled``.
- ``stubborn``: ignores ``session/cancel`` and never ends its turn.
- ``stderr``: writes a line to stderr, then exits with code 2 before answering.
"""

from __future__ import annotations

import asyncio
import os
import select
import sys
import uuid
from typing import Any

from acp import (
    PROTOCOL_VERSION,
    Agent,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    plan_entry,
    run_agent,
    start_tool_call,
    text_block,
    tool_content,
    tool_diff_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_plan,
    update_tool_call,
)
from acp.interfaces import Client
from acp.schema import AgentCapabilities, Implementation, PermissionOption

OPTIONS = [
    PermissionOption(option_id="yes", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="always", name="Always allow", kind="allow_always"),
    PermissionOption(option_id="no", name="Reject", kind="reject_once"),
    PermissionOption(option_id="never", name="Always reject", kind="reject_always"),
]


def raw(data: bytes) -> None:
    """Write ``data`` to stdout whole, past the SDK (which made the pipe non-blocking)."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(1, view) :]
        except BlockingIOError:
            select.select([], [1], [])


class ScriptedAgent(Agent):
    def __init__(self) -> None:
        self._conn: Client
        self._previous: dict[str, str] = {}
        self._cancelled: dict[str, asyncio.Event] = {}

    def on_connect(self, conn: Client) -> None:
        self._conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        if os.environ.get("SCRIPTED_AGENT_START") == "stderr":
            print("scripted agent: no credentials here", file=sys.stderr, flush=True)
            os._exit(2)
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(),
            agent_info=Implementation(name="scripted-agent", version="1.0"),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        return NewSessionResponse(session_id=uuid.uuid4().hex)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self._cancelled.setdefault(session_id, asyncio.Event()).set()

    async def _say(self, session_id: str, text: str) -> None:
        await self._conn.session_update(session_id, update_agent_message_text(text))

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        text = " ".join(getattr(block, "text", "") for block in prompt).strip()
        word = text.split(None, 1)[0] if text else ""
        previous = self._previous.get(session_id, "")
        self._previous[session_id] = text
        self._cancelled[session_id] = cancelled = asyncio.Event()
        say = self._say
        send = self._conn.session_update
        if word == "chat":
            await send(session_id, update_agent_thought_text("thinking about it"))
            await send(
                session_id,
                update_plan(
                    [plan_entry("read the question"), plan_entry("answer", priority="low")]
                ),
            )
            for chunk in ("Hello", ", ", "notebook!"):
                await say(session_id, chunk)
            await send(
                session_id,
                update_plan(
                    [
                        plan_entry("read the question", status="completed"),
                        plan_entry("answer", priority="low", status="completed"),
                    ]
                ),
            )
        elif word == "tool":
            await send(
                session_id,
                start_tool_call(
                    "call-1",
                    "Run ls",
                    kind="execute",
                    status="pending",
                    raw_input={"command": "ls"},
                ),
            )
            answer = await self._conn.request_permission(
                session_id=session_id,
                tool_call=update_tool_call("call-1", title="Run ls"),
                options=OPTIONS,
            )
            outcome = answer.outcome
            chosen = getattr(outcome, "option_id", None)
            if chosen in ("yes", "always"):
                await send(session_id, update_tool_call("call-1", status="in_progress"))
                await send(
                    session_id,
                    update_tool_call(
                        "call-1",
                        status="completed",
                        content=[tool_content(text_block("a.txt\nb.txt"))],
                    ),
                )
                await say(session_id, f"ran ({chosen})")
            else:
                await send(session_id, update_tool_call("call-1", status="failed"))
                await say(session_id, f"denied ({chosen or outcome.outcome})")
                if outcome.outcome == "cancelled":
                    return PromptResponse(stop_reason="cancelled")
        elif word == "edit":
            await send(
                session_id,
                start_tool_call(
                    "edit-1",
                    "Edit notes.txt",
                    kind="edit",
                    status="in_progress",
                    content=[tool_diff_content("notes.txt", "one\nthree\n", "one\ntwo\n")],
                ),
            )
            await send(session_id, update_tool_call("edit-1", status="completed"))
            await say(session_id, "edited")
        elif word == "ghost":
            answer = await self._conn.request_permission(
                session_id=session_id,
                tool_call=update_tool_call(
                    "ghost-1", title="Delete everything", kind="delete", raw_input={"path": "/"}
                ),
                options=OPTIONS,
            )
            await say(session_id, f"asked ({getattr(answer.outcome, 'option_id', 'cancelled')})")
        elif word == "remember":
            await say(session_id, f"you said: {previous}")
        elif word == "crash":
            await say(session_id, "about to crash")
            await asyncio.sleep(0.05)
            print("scripted agent: crashing on purpose", file=sys.stderr, flush=True)
            os._exit(3)
        elif word == "malformed":
            for line in (b"not json at all\n", b"[1, 2, 3]\n", b'{"jsonrpc": "2.0"}\n'):
                raw(line)
            await send(session_id, update_agent_message_text("still here"))
        elif word == "big":
            raw(b'{"jsonrpc":"2.0","method":"session/update","params":"' + b"x" * 200_000 + b'"}\n')
            await say(session_id, "after big")
        elif word == "flood":
            for index in range(500):
                await say(session_id, f"{index} ")
        elif word == "wait":
            await say(session_id, "waiting")
            await cancelled.wait()
            return PromptResponse(stop_reason="cancelled")
        elif word == "stubborn":
            await say(session_id, "not stopping")
            await asyncio.Event().wait()
        else:
            await say(session_id, f"echo: {text}")
        return PromptResponse(stop_reason="end_turn")


async def main() -> None:
    await run_agent(ScriptedAgent())


if __name__ == "__main__":
    asyncio.run(main())
