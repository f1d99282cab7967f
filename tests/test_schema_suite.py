"""The official JSON-Schema-Test-Suite (Draft 2020-12), every group, under the strict policy.

Expectations per group are in ``tests/schema_suite_report.py`` (also runnable for figures).
"""

from __future__ import annotations

import importlib.util
import socket
import sys
import urllib.request
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest


def _load_report() -> ModuleType:
    # Loaded by path so it works whatever pytest's import mode and whether `tests` is a package.
    name = "nbagent_schema_suite_report"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(
        name, Path(__file__).with_name("schema_suite_report.py")
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


report = _load_report()

try:
    GROUPS: list[Any] = report.load_groups()
    MISSING = ""
except FileNotFoundError as exc:
    GROUPS, MISSING = [], str(exc)


def test_suite_is_present() -> None:
    assert not MISSING, MISSING
    files = {group.file for group in GROUPS}
    assert any("/" not in file for file in files), "no top-level suite files"
    assert any(file.startswith("optional/") and file.count("/") == 1 for file in files)
    assert any(file.startswith("optional/format/") for file in files)


@pytest.mark.parametrize("group", GROUPS, ids=[f"{g.id} {g.description}" for g in GROUPS])
def test_group(group: Any) -> None:
    outcome = report.evaluate_group(group)
    assert not outcome.problems, "\n".join(outcome.problems)


def test_deviation_table_names_real_groups() -> None:
    assert not MISSING, MISSING
    known = {(group.file, group.description) for group in GROUPS}
    stale = [key for key in report.DEVIATIONS if key not in known]
    assert not stale, f"DEVIATIONS names groups the suite does not have: {stale}"


def test_whole_suite_figures_and_no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run everything once more with the network cut, and print the figures."""
    assert not MISSING, MISSING
    attempts: list[object] = []

    def refuse(*args: object, **kwargs: object) -> None:
        attempts.append(args)
        raise AssertionError(f"network access attempted: {args!r}")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)

    outcomes = [report.evaluate_group(group) for group in GROUPS]
    rejected = sum(o.rejected for o in outcomes)
    passed = sum(o.passed for o in outcomes)
    annotation = sum(o.annotation for o in outcomes)
    deviated = sum(o.deviated for o in outcomes)
    broken = [f"{o.group.id}: {p}" for o in outcomes for p in o.problems]
    print(
        f"\nsuite: {len(outcomes)} groups, {rejected} rejected by policy; tests: {passed} agree, "
        f"{annotation} format annotations, {deviated} documented deviations, {len(broken)} broken"
    )
    assert attempts == []
    assert not broken, "\n".join(broken)
    # The policy must bite (remote refs, $id …) and most of the suite must run.
    assert rejected > 0
    assert passed > sum(len(o.group.tests) for o in outcomes) // 2
