"""The MCP conformance suite's auth scenarios of what the client checks before it trusts a
sign-in: the resource, the issuer and ``iss``, offline access, a moved authorization server.
How they are played and judged: :mod:`tests.mcp.conformance_suite`."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import NO_SDK

pytest.importorskip("mcp", reason=NO_SDK)

from .conformance_suite import play, runs


@pytest.mark.parametrize(("scenario", "version"), runs("auth_checks"))
def test_the_suite_passes_nbagent_on(scenario: str, version: str, tmp_path: Path) -> None:
    play(scenario, version, tmp_path)
