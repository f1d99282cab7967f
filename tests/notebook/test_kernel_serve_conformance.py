"""The official MCP conformance suite's **server** scenarios against ``%agent serve``'s path in
a real kernel (npm ``@modelcontextprotocol/conformance``, the version the client tests pin).

The suite's fixture tools are notebook tools (tests/mcp/serve_fixtures.py runs as a cell), and
the session serves them as ``%agent serve`` does, without a token (``ServeSettings(no_token=
True)``, loopback only): the suite's client cannot send one. Each scenario in :data:`PLAYED`
runs at every spec version the suite plays it in, and passes when no check fails or warns;
the scenarios that cannot apply are in :data:`NOT_PLAYED` with why, and every server scenario
of the pinned suite must be in exactly one of the two.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs the extra)")

from ..mcp.test_conformance import run_suite
from .kernel import Kernel

FIXTURES = Path(__file__).resolve().parents[1] / "mcp" / "serve_fixtures.py"
_DATED = ("2025-06-18", "2025-11-25")
_ALL = (*_DATED, "2026-07-28")

PLAYED: dict[str, tuple[str, ...]] = {
    "server-initialize": _DATED,
    "server-session-lifecycle": ("2025-03-26", *_DATED),
    "ping": _DATED,
    "tools-list": _ALL,
    "tools-call-simple-text": _ALL,
    "tools-call-image": _ALL,
    "tools-call-error": _ALL,
    "tools-call-with-progress": _ALL,
    "json-schema-2020-12": ("2025-11-25", "2026-07-28"),
    "dns-rebinding-protection": ("2025-11-25", "2026-07-28"),
    "http-header-validation": ("2026-07-28",),
    "server-sse-multiple-streams": ("2025-11-25", "2026-07-28"),
}

_CAPABILITY = "a notebook tool cannot ask the client for {} (nbagent's tools have no such API)"
NOT_PLAYED: dict[str, str] = {
    "server-stateless": "four of its checks need diagnostic tools that use the client's "
    "capabilities (elicitation, logging); its other 21 checks pass (run it by hand: "
    "docs/howto/serve.md)",
    "logging-set-level": "nbagent serves no logging capability",
    "completion-complete": "nbagent serves no prompts or resources to complete",
    "tools-call-audio": "nbagent results hold text and images, not audio",
    "tools-call-embedded-resource": "nbagent results hold text and images, not resources",
    "tools-call-mixed-content": "needs audio and an embedded resource in one result",
    "tools-call-with-logging": _CAPABILITY.format("log messages"),
    "tools-call-sampling": _CAPABILITY.format("sampling"),
    "tools-call-elicitation": _CAPABILITY.format("elicitation"),
    "elicitation-sep1034-defaults": _CAPABILITY.format("elicitation"),
    "elicitation-sep1330-enums": _CAPABILITY.format("elicitation"),
    "server-sse-polling": "needs a server that closes its SSE stream to make the client poll "
    "(an event store); a served call keeps its stream and sends progress instead",
    "caching": "nbagent's lists change as cells run: it declares no cache hints",
    "http-custom-header-server-validation": "needs tools with x-mcp-header arguments",
    "sep-2164-resource-not-found": "nbagent serves no resources",
    **dict.fromkeys(
        (
            "resources-list",
            "resources-read-text",
            "resources-read-binary",
            "resources-templates-read",
            "resources-subscribe",
            "resources-unsubscribe",
        ),
        "nbagent serves no resources",
    ),
    **dict.fromkeys(
        (
            "prompts-list",
            "prompts-get-simple",
            "prompts-get-with-args",
            "prompts-get-embedded-resource",
            "prompts-get-with-image",
        ),
        "nbagent serves no prompts",
    ),
    **{
        f"sep-2640-skills-{name}": "an extension for skills, which nbagent does not serve"
        for name in ("directory", "enumeration", "manifest")
    },
    **{
        f"tasks-{name}": "an extension for tasks, which nbagent does not serve"
        for name in (
            "lifecycle",
            "capability-negotiation",
            "wire-fields",
            "request-state-removal",
            "mrtr-input",
            "request-headers",
            "dispatch-and-envelope",
            "status-notifications",
            "required-task-error",
            "mrtr-composition",
        )
    },
    **{
        f"input-required-result-{name}": "needs tools that ask the client for input "
        "(elicitation, sampling, roots) mid-call; a served call asks the person instead"
        for name in (
            "basic-elicitation",
            "basic-sampling",
            "basic-list-roots",
            "request-state",
            "multiple-input-requests",
            "multi-round",
            "missing-input-response",
            "non-tool-request",
            "result-type",
            "unsupported-methods",
            "tampered-state",
            "capability-check",
            "ignore-extra-params",
            "validate-input",
        )
    },
}

_ESCAPES = re.compile(r"\x1b\[[0-9;]*m")


def test_every_server_scenario_is_played_or_listed_as_not_applying() -> None:
    listing = run_suite("list", "--server", timeout=60)
    assert listing.returncode == 0, listing.stderr
    found = re.findall(r"^\s*- (\S+) \[([^\]]*)\]", _ESCAPES.sub("", listing.stdout), re.M)
    listed = {name: tuple(tags.split(",")) for name, tags in found}
    assert listed
    accounted = [*PLAYED, *NOT_PLAYED]
    assert len(accounted) == len(set(accounted)), "a scenario is in both lists"
    assert sorted(listed) == sorted(accounted), (
        f"new in the suite: {sorted(set(listed) - set(accounted))}; "
        f"gone from it: {sorted(set(accounted) - set(listed))}"
    )
    for name, versions in PLAYED.items():
        assert versions == listed[name], f"{name} is played in {listed[name]}, not {versions}"


@pytest.fixture(scope="module")
def served_url(kernel: Kernel) -> Any:
    kernel.execute(FIXTURES.read_text())
    out = kernel.execute(
        "from nbagent.mcp._serving.server import ServeSettings as _Settings\n"
        "from nbagent.notebook.serving.serve import serve as _serve\n"
        "_conformance = _serve(nbagent.current_session(), "
        "settings=_Settings(no_token=True, progress_interval=1.0))\n"
        "print(_conformance.url)"
    )
    url = next(m for m in out if m["msg_type"] == "stream" and "http" in m["content"]["text"])
    yield url["content"]["text"].strip().splitlines()[-1].split()[-1]
    kernel.execute("%agent serve stop")


@pytest.mark.parametrize(
    ("scenario", "version"),
    [(name, version) for name, versions in PLAYED.items() for version in versions],
)
def test_the_suite_passes_the_served_notebook_on(
    served_url: str, scenario: str, version: str, tmp_path: Path
) -> None:
    result = run_suite(
        "server",
        "--url",
        served_url,
        "--scenario",
        scenario,
        "--spec-version",
        version,
        "-o",
        str(tmp_path),
        timeout=120,
    )
    said = _ESCAPES.sub("", result.stdout + result.stderr)
    written = list(tmp_path.glob("**/checks.json"))
    assert written, f"the suite wrote no verdict:\n{said[-4000:]}"
    checks: list[dict[str, Any]] = json.loads(written[0].read_text())
    bad = [c for c in checks if c["status"] in ("FAILURE", "WARNING")]
    assert not bad, "\n".join(f"{c['id']}: {c.get('errorMessage', '')}" for c in bad)
    assert any(c["status"] == "SUCCESS" for c in checks), f"the suite judged nothing:\n{said}"
