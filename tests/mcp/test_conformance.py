"""The MCP conformance suite: the installed suite is the pinned one, every scenario it lists is
played (by one of the ``test_conformance*.py`` modules) or listed as not applying, and the
scenarios of the protocol's exchanges (initialize, tool calls, SSE retry, headers, schemas).
What is played and how it is judged: :mod:`tests.mcp.conformance_suite`."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from .conformance_client import NOT_PLAYED, PLANS
from .conftest import NO_SDK

pytest.importorskip("mcp", reason=NO_SDK)

from .conformance_suite import (
    PARTS,
    PLAYED,
    REFUSES,
    SUITE_VERSION,
    listed_scenarios,
    play,
    run_suite,
    runs,
)


def test_the_installed_suite_is_the_pinned_version() -> None:
    version = run_suite("--version", timeout=60)
    assert version.stdout.strip() == SUITE_VERSION, version.stdout + version.stderr


def test_every_scenario_of_the_suite_is_played_or_listed_as_not_applying() -> None:
    listed = listed_scenarios()
    accounted = [*PLAYED, *NOT_PLAYED]
    assert len(accounted) == len(set(accounted)), "a scenario is in two lists"
    assert sorted(listed) == sorted(accounted), (
        f"new in the suite: {sorted(set(listed) - set(accounted))}; "
        f"gone from it: {sorted(set(accounted) - set(listed))}"
    )
    for name, versions in PLAYED.items():
        tags = tuple(v for v in listed[name] if v != "extension") or ("extension",)
        assert versions == tags, f"{name} is played in {tags}, not {versions}"
    assert set(PLAYED) == set(PLANS), "a played scenario has no plan in the client, or the reverse"
    assert set(REFUSES) <= set(PLAYED)
    parted = list(itertools.chain.from_iterable(PARTS.values()))
    assert sorted(parted) == sorted(PLAYED), "a played scenario is in no part, or in two"


@pytest.mark.parametrize(("scenario", "version"), runs("exchanges"))
def test_the_suite_passes_nbagent_on(scenario: str, version: str, tmp_path: Path) -> None:
    play(scenario, version, tmp_path)
