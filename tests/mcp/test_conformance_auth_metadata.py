"""The MCP conformance suite's auth scenarios of finding where to sign in: the protected
resource and authorization server metadata at each place the spec allows, and a client ID
metadata document. How they are played and judged: :mod:`tests.mcp.conformance_suite`."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import NO_SDK

pytest.importorskip("mcp", reason=NO_SDK)

from .conformance_suite import play, runs


@pytest.mark.parametrize(("scenario", "version"), runs("auth_metadata"))
def test_the_suite_passes_nbagent_on(scenario: str, version: str, tmp_path: Path) -> None:
    play(scenario, version, tmp_path)
