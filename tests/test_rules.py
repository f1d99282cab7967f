"""Approval rules: the text people write, what it matches (never more), and how a RuleApprover
applies them before asking anyone."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from nbagent import Agent, ScriptedApprover, tool
from nbagent.approvals.approval import ApprovalRequest, AutoApprove, Decision
from nbagent.approvals.rules import ApprovalRule, RuleApprover, RuleError, RuleSet, parse_rule
from nbagent.events import ApprovalResolved
from nbagent.models import Call, ScriptedModel, Turn
from nbagent.tools import ToolCall


@tool(needs_approval=True)
def write_file(path: str, content: str = "", overwrite: bool = False, size: int = 0) -> str:
    """Write a file."""
    return f"wrote {path}"


@tool(needs_approval=True)
def tag(labels: list[str]) -> str:
    """Tag something."""
    return "tagged"


def request(arguments: dict[str, Any], name: str = "write_file") -> ApprovalRequest:
    return ApprovalRequest.for_call(ToolCall("c1", name, "{}"), arguments)


@pytest.mark.parametrize(
    ("pattern", "value", "hit"),
    [
        ("data/*", "data/a.csv", True),
        ("data/*", "data/sub/a.csv", False),  # * stays in one folder
        ("data/**", "data/sub/a.csv", True),
        ("data/*", "data/../secrets.txt", False),  # never walks out of data/
        ("data/**", "data/../../etc/passwd", False),
        ("data/**", "data/x/../../etc", False),
        ("data/*", "data\\..\\secrets", False),  # nor with Windows separators
        ("data/*", "other/data/a.csv", False),  # the whole value must match
        ("data/*", "data/a\nb", False),  # wildcards never match control characters
        ("data/**", "data/a\x85b", False),  # C1 ones included (NEL breaks a line)
        ("*.csv", "a.csv", True),
        ("*.csv", "dir/a.csv", False),
        ("report-?.txt", "report-1.txt", True),
        ("report-?.txt", "report-12.txt", False),
        ("[abc]", "a", False),  # brackets are literal: a rule is never broader than written
        ("[abc]", "[abc]", False),  # as a glob the value names a, b or c too: asked
        ("data/..", "data/..", True),  # a pattern that spells ".." out may match it
    ],
)
def test_glob_on_a_string_argument(pattern: str, value: str, hit: bool) -> None:
    rule = ApprovalRule("allow", "write_file", (("path", pattern),))
    assert rule.matches("write_file", {"path": value}) is hit


def test_deny_patterns_also_match_the_normalized_path() -> None:
    rule = ApprovalRule("deny", "write_file", (("path", "secrets/**"),))
    assert rule.matches("write_file", {"path": "secrets/key"})
    assert rule.matches("write_file", {"path": "data/../secrets/key"})
    assert rule.matches("write_file", {"path": "./secrets/key"})
    assert not rule.matches("write_file", {"path": "data/secrets.txt"})


def test_literals_for_numbers_and_booleans_are_typed() -> None:
    rule = parse_rule("allow write_file overwrite=false size=3")
    assert rule.matches("write_file", {"path": "x", "overwrite": False, "size": 3})
    assert rule.matches("write_file", {"path": "x", "overwrite": False, "size": 3.0})
    assert not rule.matches("write_file", {"overwrite": 0, "size": 3})  # 0 is not false
    assert not rule.matches("write_file", {"overwrite": False, "size": True})  # true is not 1
    assert not rule.matches("write_file", {"overwrite": False})  # every named argument needed
    assert not rule.matches("other_tool", {"overwrite": False, "size": 3})


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_a_number_pattern_no_argument_can_equal_is_refused(literal: str) -> None:
    with pytest.raises(RuleError, match="not a string: write a JSON value"):
        parse_rule(f"deny write_file size={literal}").check(write_file)
    with pytest.raises(RuleError, match="can never be"):
        RuleApprover().deny("write_file", size=float(literal))


def test_parse_and_text_round_trip() -> None:
    rule = parse_rule('allow write_file path="my data/*" overwrite=true')
    assert rule.where == (("path", "my data/*"), ("overwrite", "true"))
    assert parse_rule(rule.text) == rule
    assert parse_rule("deny write_file").text == "deny write_file"
    for bad in (
        "",
        "allow",
        "permit write_file",
        "allow write_file path",
        "allow a/b",
        "allow x =",
    ):
        with pytest.raises(RuleError):
            parse_rule(bad)
    with pytest.raises(RuleError, match="twice"):
        parse_rule("allow write_file path=a path=b")


def test_rules_are_checked_against_the_tool_schema() -> None:
    parse_rule("allow write_file path=data/* overwrite=false").check(write_file)
    with pytest.raises(RuleError, match="has no argument 'pth'"):
        parse_rule("allow write_file pth=data/*").check(write_file)
    with pytest.raises(RuleError, match="only string, number, boolean"):
        parse_rule("allow tag labels=x").check(tag)
    with pytest.raises(RuleError, match="not a string"):
        parse_rule("allow write_file size=big").check(write_file)
    with pytest.raises(RuleError, match="can never be"):
        parse_rule("allow write_file size=true").check(write_file)
    with pytest.raises(RuleError, match="no tool named"):
        RuleSet(tools=lambda: {"write_file": write_file}).add(parse_rule("allow rm"))


def test_deny_wins_and_no_rule_means_no_decision() -> None:
    rules = RuleSet(
        [
            parse_rule("allow write_file path=data/**"),
            parse_rule("deny write_file path=data/private/**"),
        ]
    )
    assert rules.decide("write_file", {"path": "data/a"}) == Decision(
        True, "allow write_file path=data/**", by="rule"
    )
    denied = rules.decide("write_file", {"path": "data/private/k"})
    assert denied is not None and not denied.approved
    assert denied.reason == "deny write_file path=data/private/**"
    assert rules.decide("write_file", {"path": "elsewhere"}) is None
    assert rules.decide("tag", {"labels": []}) is None


def test_a_predicate_that_raises_denies_saying_why() -> None:
    def is_small(arguments: Any) -> bool:
        raise ValueError("no size given")

    approver = RuleApprover(fallback=AutoApprove())
    approver.allow("write_file", when=is_small)
    decision = approver.known_decision(request({"path": "a"}))
    assert decision is not None and not decision.approved
    assert "is_small" in (decision.reason or "") and "no size given" in (decision.reason or "")


def test_numbering_removal_and_duplicates() -> None:
    rules = RuleSet()
    first = rules.add(parse_rule("allow write_file path=a"))
    assert rules.add(parse_rule("allow write_file path=a")) == first  # kept once
    second = rules.add(parse_rule("deny tag"))
    assert [n for n, _ in rules.numbered()] == [first, second]
    assert [r.text for r in rules.remove(first)] == ["allow write_file path=a"]
    assert rules.remove("tag") and len(rules) == 0
    small = RuleSet(limit=1)
    small.add(parse_rule("deny tag"))
    with pytest.raises(RuleError, match="at most 1"):
        small.add(parse_rule("deny write_file"))


def test_rule_approver_from_python_checks_tools_and_values() -> None:
    approver = RuleApprover(tools=[write_file])
    approver.allow(write_file, path="data/*", overwrite=False)
    assert approver.rules.numbered()[0][1].text == "allow write_file path=data/* overwrite=false"
    with pytest.raises(RuleError):
        approver.allow("write_file", nope="x")
    with pytest.raises(RuleError, match="glob string"):
        approver.deny("write_file", path=["a"])
    legacy = RuleApprover({"write_file": "allow", "tag": "ask"})
    assert [r.text for r in legacy.rules] == ["allow write_file"]


async def test_the_loop_applies_rules_before_asking() -> None:
    model = ScriptedModel(
        [
            Turn(
                Call("write_file", {"path": "data/a.csv"}, id="c1"),
                Call("write_file", {"path": "data/../x"}, id="c2"),
                Call("write_file", {"path": "etc/passwd"}, id="c3"),
            ),
            "done",
        ]
    )
    asked = ScriptedApprover([Decision(False, "no", by="person")] * 2)
    approver = RuleApprover(fallback=asked)
    approver.allow("write_file", path="data/*")
    approver.deny("write_file", path="etc/**")
    agent = Agent(model, [write_file], approver=approver)
    events = [e async for e in agent.stream("go")]
    decisions = {e.call_id: e.decision for e in events if isinstance(e, ApprovalResolved)}
    assert decisions["c1"].approved and decisions["c1"].by == "rule"
    assert decisions["c1"].reason == "allow write_file path=data/*"
    assert [r.call.id for r in asked.requests] == ["c2"]  # only the call no rule is about
    assert not decisions["c3"].approved and decisions["c3"].reason == "deny write_file path=etc/**"
    results = {r.call_id: r.text for r in agent.messages[-2].results}  # type: ignore[union-attr]
    assert results["c1"] == "wrote data/a.csv"
    assert "deny write_file path=etc/**" in results["c3"]


async def test_always_allow_from_the_fallback_becomes_a_removable_rule() -> None:
    model = ScriptedModel(
        [
            Turn(Call("write_file", {"path": "a"})),
            "one",
            Turn(Call("write_file", {"path": "b"})),
            "two",
        ]
    )
    asked = ScriptedApprover([Decision(True, always=True, by="person")])
    approver = RuleApprover(fallback=asked)
    agent = Agent(model, [write_file], approver=approver)
    await agent.run("first")
    await agent.run("second")
    assert len(asked.requests) == 1
    assert [r.text for r in approver.rules] == ["allow write_file"]
    assert approver.rules.remove("write_file")
    assert approver.known_decision(request({"path": "c"})) is None


async def test_an_always_allow_that_cannot_become_a_rule_still_approves(
    caplog: pytest.LogCaptureFixture,
) -> None:
    full = RuleSet(limit=1)
    full.add(parse_rule("deny tag"))
    approver = RuleApprover(full, fallback=ScriptedApprover([Decision(True, always=True)]))
    decision = await approver.decide(request({"path": "a"}))
    assert decision.approved
    assert [r.text for r in full] == ["deny tag"]
    assert "could not keep 'allow write_file' as a rule: at most 1 rules" in caplog.text


@pytest.mark.parametrize(
    ("pattern", "value"),
    [
        ("secrets/**", "secrets/a\tb"),  # a deny pattern's wildcards match control characters
        ("secrets/*", "secrets/a\nb"),
        ("/secrets/**", "//secrets/k"),  # doubled slashes, leading or not
        ("secrets/*", "secrets//k"),
        ("secrets/*", "secrets\\k"),
        ("secrets/*", "secrets/k/"),
        ("secrets/*", "./secrets/./k"),
        ("secrets/*", "x/../secrets/k"),
        ("secrets/caf\u00e9", "secrets/cafe\u0301"),  # decomposed accent (one file on macOS)
        ("secrets/cafe\u0301", "secrets/caf\u00e9"),
    ],
)
def test_a_deny_pattern_matches_every_spelling_of_a_path(pattern: str, value: str) -> None:
    rule = ApprovalRule("deny", "write_file", (("path", pattern),))
    assert rule.matches("write_file", {"path": value})
    assert not rule.matches("write_file", {"path": "data/" + value})


@pytest.mark.parametrize("pattern", ["secrets/**", "secrets/*", "./secrets/**"])
@pytest.mark.parametrize("value", ["secrets", "secrets/", "./secrets", "x/../secrets", "secrets\\"])
def test_a_deny_pattern_on_a_folders_contents_denies_the_folder_itself(
    pattern: str, value: str
) -> None:
    rule = ApprovalRule("deny", "delete_path", (("path", pattern),))
    assert rule.matches("delete_path", {"path": value})  # deleting the folder deletes them all
    assert not rule.matches("delete_path", {"path": "secrets-old"})
    assert not rule.matches("delete_path", {"path": "data"})
    allow = ApprovalRule("allow", "delete_path", (("path", "data/**"),))
    assert not allow.matches("delete_path", {"path": "data"})  # an allow stays as written


def test_a_deny_pattern_matches_absolute_relative_and_home_spellings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here, home = tmp_path / "work", tmp_path / "home"
    here.mkdir()
    monkeypatch.chdir(here)
    monkeypatch.setenv("HOME", str(home))
    relative = ApprovalRule("deny", "write_file", (("path", "secrets/**"),))
    assert relative.matches("write_file", {"path": f"{here}/secrets/k"})
    assert relative.matches("write_file", {"path": f"{here}/data/../secrets/k"})
    assert not relative.matches("write_file", {"path": f"{tmp_path}/secrets/k"})  # elsewhere
    absolute = ApprovalRule("deny", "write_file", (("path", f"{here}/secrets/**"),))
    assert absolute.matches("write_file", {"path": "secrets/k"})
    assert not absolute.matches("write_file", {"path": "data/k"})
    dotfiles = ApprovalRule("deny", "write_file", (("path", f"{home}/.ssh/**"),))
    assert dotfiles.matches("write_file", {"path": "~/.ssh/id_rsa"})
    allow = ApprovalRule("allow", "write_file", (("path", "data/*"),))
    assert not allow.matches("write_file", {"path": f"{here}/data/a"})  # allow stays as written


def test_a_deny_pattern_matches_inside_arrays_and_objects() -> None:
    rule = ApprovalRule("deny", "write_file", (("path", "secrets/**"),))
    assert rule.matches("write_file", {"path": ["ok.txt", "secrets/k"]})
    assert rule.matches("write_file", {"path": {"to": "secrets/k"}})
    assert not rule.matches("write_file", {"path": ["ok.txt"]})
    allow = ApprovalRule("allow", "write_file", (("path", "data/**"),))
    assert not allow.matches("write_file", {"path": ["data/a"]})  # an allow stays as written


@tool
def delete_file(path: str) -> str:
    """Delete a file (needs no approval)."""
    return f"deleted {path}"


async def test_a_deny_rule_holds_for_a_tool_that_needs_no_approval() -> None:
    model = ScriptedModel(
        [Turn(Call("delete_file", {"path": "a"}, id="c1")), "done"],
    )
    approver = RuleApprover(fallback=AutoApprove())
    approver.deny("delete_file")
    agent = Agent(model, [delete_file], approver=approver)
    events = [e async for e in agent.stream("go")]
    decisions = [e.decision for e in events if isinstance(e, ApprovalResolved)]
    assert [d.reason for d in decisions] == ["deny delete_file"]
    results = agent.messages[-2].results  # type: ignore[union-attr]
    assert "the rule `deny delete_file` denies it" in results[0].text
    assert results[0].is_error


async def test_a_deny_rule_holds_over_a_persons_edit() -> None:
    model = ScriptedModel([Turn(Call("write_file", {"path": "data/a"}, id="c1")), "done"])
    asked = ScriptedApprover([Decision(True, arguments={"path": "secrets/k"}, by="person")])
    approver = RuleApprover(fallback=asked)
    approver.deny("write_file", path="secrets/**")
    agent = Agent(model, [write_file], approver=approver)
    await agent.run("go")
    results = agent.messages[-2].results  # type: ignore[union-attr]
    assert "deny write_file path=secrets/**" in results[0].text
    assert results[0].is_error


async def test_a_predicate_that_hangs_denies_its_call_and_never_holds_the_loop() -> None:
    release = threading.Event()

    def stuck(arguments: Any) -> bool:
        release.wait(10)
        return True

    approver = RuleApprover(fallback=AutoApprove())
    approver.allow("write_file", when=stuck)
    model = ScriptedModel([Turn(Call("write_file", {"path": "a"})), "done"])
    agent = Agent(model, [write_file], approver=approver, hook_timeout=0.3)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.02)
            ticks += 1

    ticker = asyncio.ensure_future(tick())
    try:
        await asyncio.wait_for(agent.run("go"), 5)
    finally:
        release.set()
        ticker.cancel()
    assert ticks >= 5
    results = agent.messages[-2].results  # type: ignore[union-attr]
    assert results[0].is_error and "did not finish within 0.3 s" in results[0].text


def test_a_deny_pattern_follows_symbolic_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A link to the protected folder (or into it, walked back out with ``..``) reaches the same
    files: the deny holds through it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "secrets" / "sub").mkdir(parents=True)
    (tmp_path / "keys").symlink_to(tmp_path / "secrets")
    (tmp_path / "deep").symlink_to(tmp_path / "secrets" / "sub")
    (tmp_path / "data").mkdir()
    rule = ApprovalRule("deny", "write_file", (("path", "secrets/**"),))
    assert rule.matches("write_file", {"path": "keys/k"})
    assert rule.matches("write_file", {"path": f"{tmp_path}/keys/k"})
    assert rule.matches("write_file", {"path": "keys"})  # the folder itself, by its link
    assert rule.matches("write_file", {"path": "deep/../k"})  # the system reads it as secrets/k
    assert not rule.matches("write_file", {"path": "data/k"})
    assert not rule.matches("write_file", {"path": "deep-not/k"})
    # a protected folder that is itself a link protects where it leads
    (tmp_path / "store").mkdir()
    (tmp_path / "vault").symlink_to(tmp_path / "store")
    vault = ApprovalRule("deny", "write_file", (("path", "vault/**"),))
    assert vault.matches("write_file", {"path": "store/k"})
    assert vault.matches("write_file", {"path": f"{tmp_path}/store/k"})
    assert not vault.matches("write_file", {"path": "data/k"})


def test_an_allow_pattern_does_not_reach_through_a_link_out_of_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "data" / "real").mkdir(parents=True)
    (tmp_path / "data" / "out").symlink_to(outside)
    (tmp_path / "data" / "in").symlink_to(tmp_path / "data" / "real")
    (tmp_path / "data" / "loop").symlink_to("loop")  # a link to itself: unreadable, still text
    rule = ApprovalRule("allow", "write_file", (("path", "data/**"),))
    assert rule.matches("write_file", {"path": "data/a.txt"})
    assert rule.matches("write_file", {"path": "data/in/a.txt"})  # a link that stays inside
    assert not rule.matches("write_file", {"path": "data/out/a.txt"})  # leads outside
    assert not rule.matches("write_file", {"path": "data/out"})
    assert rule.matches("write_file", {"path": "data/loop"})
    top = ApprovalRule("allow", "write_file", (("path", "*.txt"),))
    (tmp_path / "notes.txt").symlink_to(outside / "x.txt")
    assert top.matches("write_file", {"path": "plain.txt"})
    assert not top.matches("write_file", {"path": "notes.txt"})
    anything = ApprovalRule("allow", "write_file", (("path", "**"),))
    assert anything.matches("write_file", {"path": "notes.txt"})  # "**" covers every place


def test_a_working_folder_reached_through_a_link_changes_no_decision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tools often run in a folder reached through a link (/home -> /data/home): every path is
    then "through a link", and rules must read the same as in the real folder."""
    real = tmp_path / "real"
    (real / "data").mkdir(parents=True)
    (real / "secrets").mkdir()
    (tmp_path / "linked").symlink_to(real)
    monkeypatch.chdir(tmp_path / "linked")
    monkeypatch.setenv("PWD", str(tmp_path / "linked"))
    allow = ApprovalRule("allow", "write_file", (("path", "data/**"),))
    assert allow.matches("write_file", {"path": "data/a.txt"})
    deny = ApprovalRule("deny", "write_file", (("path", "secrets/**"),))
    assert deny.matches("write_file", {"path": f"{tmp_path}/linked/secrets/k"})
    assert deny.matches("write_file", {"path": f"{real}/secrets/k"})
    assert not deny.matches("write_file", {"path": "data/k"})


def test_deny_patterns_ignore_case_where_the_filesystem_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On macOS and Windows ``Secrets/K`` is ``secrets/k``. No case-blind filesystem can be
    mounted here, so the probe's answer is replaced; the probe itself is tested below."""
    import nbagent.approvals._paths as paths

    monkeypatch.chdir(tmp_path)
    rule = ApprovalRule("deny", "write_file", (("path", "secrets/**"),))
    allow = ApprovalRule("allow", "write_file", (("path", "data/*"),))
    assert not rule.matches("write_file", {"path": "Secrets/K"})  # this filesystem keeps case
    monkeypatch.setattr(paths, "case_blind", lambda: True)
    assert rule.matches("write_file", {"path": "Secrets/K"})
    assert rule.matches("write_file", {"path": "SECRETS"})
    assert not allow.matches("write_file", {"path": "DATA/a"})  # an allow stays as written


def test_the_case_probe_reads_the_real_filesystem(tmp_path: Path) -> None:
    import nbagent.approvals._paths as paths

    folder = tmp_path / "Probe"
    folder.mkdir()
    (tmp_path / "pROBE").mkdir()  # a different folder on a filesystem that keeps case
    assert paths._ignores_case(str(folder)) is False
    assert paths._ignores_case("/") is False  # nothing to swap
