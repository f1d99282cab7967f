"""Approval rules against values that name more than a plain glob match sees: a value cut where
the system stops reading it (a NUL, Windows' trailing dots and streams). Through the rules'
public API (the text rules of docs/howto/rules.md, RuleApprover and the loop)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nbagent import Agent, tool
from nbagent.approval import ApprovalRequest
from nbagent.models import Call, ScriptedModel, Turn
from nbagent.rules import RuleApprover, parse_rule
from nbagent.tools import ToolCall


@tool
def write_file(path: str) -> str:
    """Write a file (needs no approval: only the rules stand in the way)."""
    return f"wrote {path!r}"


@pytest.fixture(autouse=True)
def empty_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test runs in a folder of its own: glob values are looked up on disk."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def decide(rules: list[str], value: Any) -> str:
    """What the text rules make of a write_file call: 'denied', 'allowed' or 'asked'."""
    approver = RuleApprover([parse_rule(r) for r in rules], tools=[write_file])
    request = ApprovalRequest.for_call(ToolCall("c1", "write_file", "{}"), {"path": value})
    if approver.forbidden(request) is not None:
        return "denied"
    known = approver.known_decision(request)
    if known is None:
        return "asked"
    return "allowed" if known.approved else "denied"


# --- where the system cuts a value -------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "value"),
    [
        ("secrets/**", "secrets\x00/key"),  # C reads "secrets": the folder itself
        ("secrets/**", "secrets/key\x00.png"),
        ("secrets/**", "secrets/\x00"),
        ("secrets.txt", "secrets.txt\x00"),
        ("secrets.txt", "secrets.txt\x00.png"),
        ("secrets.txt", "./secrets.txt\x00/../x"),
        ("secrets.txt", "secrets.txt."),  # Windows drops trailing dots and spaces
        ("secrets.txt", "secrets.txt . "),
        ("secrets.txt", "secrets.txt::$DATA"),  # the file's content, as a stream
        ("secrets.txt", "secrets.txt:notes"),
        ("secrets/**", "secrets./key"),
        ("secrets/**", "secrets /key"),
    ],
)
def test_a_deny_rule_matches_a_value_where_the_system_cuts_it(pattern: str, value: str) -> None:
    assert decide([f"deny write_file path={pattern}"], value) == "denied"
    assert decide([f"deny write_file path={pattern}"], "data/" + value) != "denied"
    # and no allow rule lets a value through that C would cut
    assert decide(
        [f"allow write_file path={pattern}", "allow write_file path=**"], value + "\x00"
    ) == ("asked")


def test_a_cut_that_names_something_else_is_not_denied() -> None:
    assert decide(["deny write_file path=secrets.txt"], "notes\x00secrets.txt") == "asked"
    assert decide(["deny write_file path=secrets/**"], "data/a\x00secrets/k") == "asked"
    assert decide(["allow write_file path=data/**"], "data/a\x00/../../secrets") == "asked"


async def test_a_nul_cut_value_is_denied_in_a_run_for_a_tool_that_needs_no_approval() -> None:
    ran: list[str] = []

    @tool
    def remove(path: str) -> str:
        """Remove a file (needs no approval)."""
        ran.append(path)
        return "removed"

    model = ScriptedModel(
        [Turn(Call("remove", {"path": "secrets.txt\x00"}, id="c1")), "done"],
    )
    approver = RuleApprover(tools=[remove])
    approver.deny("remove", path="secrets.txt")
    agent = Agent(model, [remove], approver=approver)
    await agent.run("go")
    assert ran == []
    result = agent.messages[-2].results[0]  # type: ignore[union-attr]
    assert result.is_error and "deny remove path=secrets.txt" in result.text
