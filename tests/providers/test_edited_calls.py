"""An edited call, as each API receives it on the next request: the model's call as it sent it,
and a result that says the arguments were changed and what they became (a hook's rewrite too).
Both APIs must accept it: the call is answered exactly once, by its id, with text."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nbagent.agent import Agent
from nbagent.approvals.approval import ScriptedApprover, approve
from nbagent.tools import ToolCall, tool

from .conftest import Reply, Server
from .helpers import ADAPTERS
from .test_agent_e2e import TURN_BUILDERS

PROPOSED = '{"path": "/tmp/report.txt"}'
EDITED = {"path": "data/report.txt"}


def make_tool(ran: list[str]) -> Any:
    @tool(needs_approval=True)
    def write_file(path: str) -> str:
        """Write a file."""
        ran.append(path)
        return f"wrote {path}"

    return write_file


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_the_next_request_shows_the_edit(
    kind: str, server: Server, history_valid: Any
) -> None:
    build = TURN_BUILDERS[kind]
    server.queue(Reply(build([("c_write", "write_file", PROPOSED)])), Reply(build([], "Saved.")))
    ran: list[str] = []
    model = ADAPTERS[kind](server)
    approver = ScriptedApprover([approve(arguments=EDITED)])
    agent = Agent(model=model, tools=[make_tool(ran)], approver=approver)
    result = await agent.run("Save the report")
    await model.aclose()
    assert result.stop_reason == "finished", result.error
    assert ran == ["data/report.txt"]
    history_valid(agent.messages)

    body = server.requests[1].json
    note = (
        "[Note: the arguments of this call were changed before it ran (by the person who "
        f"approved it). It ran with these arguments, not the ones you sent: {json.dumps(EDITED)}]"
    )
    if kind == "openai":
        call_message, result_message = body["messages"][1], body["messages"][2]
        assert call_message["tool_calls"] == [
            {
                "id": "c_write",
                "type": "function",
                "function": {"name": "write_file", "arguments": PROPOSED},
            }
        ]
        assert result_message == {
            "role": "tool",
            "tool_call_id": "c_write",
            "content": f"{note}\nwrote data/report.txt",
        }
    else:
        call_message, result_message = body["messages"][1], body["messages"][2]
        assert call_message["content"] == [
            {
                "type": "tool_use",
                "id": "c_write",
                "name": "write_file",
                "input": {"path": "/tmp/report.txt"},
            }
        ]
        assert result_message == {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "c_write",
                    "content": f"{note}\nwrote data/report.txt",
                }
            ],
        }


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_hook_rewrite_and_a_veto_as_received(kind: str, server: Server) -> None:
    build = TURN_BUILDERS[kind]
    calls = [("c_ok", "write_file", PROPOSED), ("c_no", "write_file", '{"path": "/etc/x"}')]
    server.queue(Reply(build(calls)), Reply(build([], "Done.")))
    ran: list[str] = []
    model = ADAPTERS[kind](server)

    def guard(call: ToolCall, arguments: dict[str, Any]) -> Any:
        from nbagent.approvals.hooks import veto

        if arguments["path"].startswith("/etc"):
            return veto("system files are off limits")
        return {"path": "data/" + arguments["path"].rsplit("/", 1)[-1]}

    agent = Agent(
        model=model, tools=[make_tool(ran)], approver=ScriptedApprover([True]), before_tool=[guard]
    )
    await agent.run("go")
    await model.aclose()
    assert ran == ["data/report.txt"]
    body = server.requests[1].json
    if kind == "openai":
        results = {m["tool_call_id"]: m["content"] for m in body["messages"][2:4]}
        assert results["c_no"].startswith("Error: This call to write_file was not run: vetoed")
    else:
        blocks = body["messages"][2]["content"]
        results = {b["tool_use_id"]: b["content"] for b in blocks}
        assert [b.get("is_error") for b in blocks] == [None, True]
    assert "system files are off limits" in results["c_no"]
    assert "(by the before-tool hook guard)" in results["c_ok"]
    assert results["c_ok"].endswith("wrote data/report.txt")
