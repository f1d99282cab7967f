"""The documentation says what the code does: examples run and print what the pages say, and the
defaults the pages quote are the code's. A page that drifts from the code fails here, not in a
newcomer's hands."""

from __future__ import annotations

import dataclasses
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _blocks(page: str, language: str) -> list[str]:
    text = (DOCS / page).read_text(encoding="utf-8")  # "../README.md" for the README
    return re.findall(rf"^```{language}\n(.*?)^```$", text, re.S | re.M)


def _run_script(code: str, tmp_path: Path) -> str:
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NBAGENT_", "OPENAI_"))}
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _table(page: str, first_cell: str, section: str = "") -> dict[str, str]:
    """Rows of the page's Markdown tables (under the heading ``section``, when given) whose first
    cell matches ``first_cell``: first cell -> second cell."""
    rows: dict[str, str] = {}
    text = (DOCS / page).read_text(encoding="utf-8")
    if section:
        text = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and re.fullmatch(first_cell, cells[0]):
            rows[cells[0]] = cells[1]
    return rows


def _number(text: str) -> float:
    """The first number of a table cell: '1,048,576 (1 MiB)' -> 1048576, '0.5 s, 8 s' -> 0.5."""
    match = re.search(r"\d[\d,]*(?:\.\d+)?", text)
    assert match, text
    return float(match.group(0).replace(",", ""))


def test_the_front_end_example_runs_and_plays_the_person(tmp_path: Path) -> None:
    (code,) = _blocks("howto/frontend.md", "python")
    out = _run_script(code, tmp_path)
    assert "asks: delete_file {'path': 'cache.tmp'}" in out
    assert "delete_file: done" in out and "stopped: finished" in out


def test_the_terminal_view_example_runs(tmp_path: Path) -> None:
    (code,) = _blocks("howto/terminal.md", "python")
    out = _run_script(code, tmp_path)
    assert "→ add(a=2.0, b=3.0)" in out and "[done · 2 steps" in out


def test_the_first_script_of_getting_started_runs(tmp_path: Path) -> None:
    (code,) = _blocks("getting-started.md", "python")
    out = _run_script(code, tmp_path)
    assert out.startswith("[offline model]")  # every offline answer says so
    assert "Sunny and 21 °C in Paris" in out


def test_every_limit_quoted_is_the_default() -> None:
    from nbagent import Limits, content, generation
    from nbagent.loop._execution import CANCEL_GRACE
    from nbagent.providers._sse import DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_RESPONSE_BYTES

    rows = _table("concepts/limits.md", r"`[^`]+`.*|grace period.*|HTTP adapters.*")
    defaults = {f.name: f.default for f in dataclasses.fields(Limits)}
    for name, value in defaults.items():
        assert _number(rows[f"`Limits.{name}`"]) == value, name
    assert _number(rows["`Agent(max_steps=...)`"]) == 20
    for name in ("IMAGE_MAX_SIDE", "IMAGE_MAX_BYTES", "IMAGE_MAX_PIXELS"):
        assert _number(rows[f"`content.{name}`"]) == getattr(content, name), name
    assert _number(rows["`generation.MAX_CALL_ID`"]) == generation.MAX_CALL_ID
    assert _number(rows["grace period after a stop request"]) == CANCEL_GRACE
    from nbagent._ground import formatting as _formatting

    bounds = rows["`nbagent._ground.formatting.FORMAT_TIMEOUT`, `FORMAT_CHARS`"]
    assert _number(bounds) == _formatting.FORMAT_TIMEOUT
    assert f"{_formatting.FORMAT_CHARS:,} characters" in bounds
    assert _number(rows["HTTP adapters' `max_event_bytes`"]) * 2**20 == DEFAULT_MAX_EVENT_BYTES
    assert _number(rows["HTTP adapters' `max_response_bytes`"]) * 2**20 == (
        DEFAULT_MAX_RESPONSE_BYTES
    )


def test_every_mcp_limit_quoted_is_the_default() -> None:
    from nbagent.mcp import MCPLimits, _loopback
    from nbagent.mcp._http import _ERROR_BODY

    rows = _table(
        "concepts/limits.md", r"`MCPLimits\.[a-z_]+`|an HTTP error.*|the sign-in .*", "MCP servers"
    )
    fields = dataclasses.fields(MCPLimits)
    assert {f"`MCPLimits.{f.name}`" for f in fields} <= set(rows), "a limit is missing"
    for field in fields:
        assert _number(rows[f"`MCPLimits.{field.name}`"]) == field.default, field.name
    assert _number(rows["an HTTP error's body"]) == _ERROR_BODY
    assert _number(rows["the sign-in redirect's request head"]) == _loopback.MAX_HEAD_BYTES
    assert _number(rows["the sign-in redirect's time to send its head"]) == _loopback.HEAD_TIMEOUT
    assert _number(rows["the sign-in redirect's connections at once"]) == _loopback.MAX_CONNECTIONS


def test_the_provider_settings_quoted_are_the_defaults() -> None:
    from nbagent.providers._http import HTTPGenerator

    rows = _table("howto/providers.md", r"`[a-z_]+`(, `[a-z_]+`)?", "Settings and limits")
    assert len(rows) == 8
    signature = inspect.signature(HTTPGenerator.__init__).parameters
    for cell, quoted in rows.items():
        names = re.findall(r"`([a-z_]+)`", cell)
        values = re.findall(r"\d+(?:\.\d+)?", quoted) or ["none"]
        for name, value in zip(names, values, strict=True):
            default = signature[name].default
            if name.endswith("_bytes"):
                assert float(value) * 2**20 == default, name
            elif value == "none":
                assert default is None, name
            else:
                assert float(value) == default, name


def test_the_batch_defaults_quoted_are_the_code_s() -> None:
    from nbagent.batch._batch import DEFAULT_CONCURRENCY, Batch

    rows = _table("howto/batch.md", r"`[a-z_]+`(, `[a-z_]+`)?", "Limits")
    signature = inspect.signature(Batch.__init__).parameters
    assert _number(rows["`concurrency`"]) == DEFAULT_CONCURRENCY
    assert rows["`timeout`"].startswith("None") and signature["timeout"].default is None
    retries, delay = re.findall(r"\d+", rows["`retries`, `retry_delay`"])
    assert (int(retries), float(delay)) == (
        signature["retries"].default,
        signature["retry_delay"].default,
    )
    assert _number(rows["`max_inputs`"]) == signature["max_inputs"].default


def test_the_batch_limits_quoted_are_the_code_s() -> None:
    from nbagent import batch

    howto = _table("howto/batch.md", r"[a-z ]+", "Limits")
    assert _number(howto["prompt length"]) == batch.MAX_PROMPT_CHARS
    assert _number(howto["format specs"]) == batch.MAX_FORMAT_CHARS
    rows = _table("concepts/limits.md", r"`(Agent\.map|batch\.)[^`]*`.*")
    assert _number(rows["`Agent.map(max_inputs=...)`, `batch.MAX_INPUTS`"]) == batch.MAX_INPUTS
    assert _number(rows["`batch.MAX_PROMPT_CHARS`"]) == batch.MAX_PROMPT_CHARS
    assert _number(rows["`batch.MAX_FORMAT_CHARS`"]) == batch.MAX_FORMAT_CHARS
    assert _number(rows["`batch.MAX_LINE_BYTES`"]) * 2**20 == batch.MAX_LINE_BYTES


def test_the_magic_s_forms_quoted_are_its_help() -> None:
    from nbagent.notebook.magics import HELP

    page = (DOCS / "api/notebook.md").read_text(encoding="utf-8")
    after = page.partition("print every option")[2]
    quoted = re.findall(r"```text\n(.*?)```", after, re.S)
    assert quoted
    help_lines = [line.strip() for line in HELP.splitlines()]
    for line in "".join(quoted).splitlines():
        assert line.strip() in help_lines, line


@pytest.mark.parametrize("page", sorted(p.name for p in (DOCS / "howto").glob("*.md")))
def test_links_between_pages_point_at_pages_that_exist(page: str) -> None:
    text = (DOCS / "howto" / page).read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#:]+\.(?:md|ipynb))(?:#[^)]*)?\)", text):
        assert (DOCS / "howto" / target).resolve().exists(), target


def test_the_events_table_names_every_event_and_its_fields() -> None:
    from typing import get_args

    from nbagent import events

    documented: dict[str, list[str]] = {}
    for first, second in _table("concepts/events.md", r"`[A-Z]\w+`.*").items():
        for name in re.findall(r"`(\w+)`", first):
            documented[name] = re.findall(r"`(\w+)`", second)
    for cls in get_args(events.AgentEvent):
        assert cls.__name__ in documented, f"{cls.__name__} is missing from the events table"
        said = set(documented[cls.__name__])
        fields = {  # dataclasses and hand-written events alike (keyword-only: internal)
            p.name
            for p in inspect.signature(cls).parameters.values()
            if p.kind is not p.KEYWORD_ONLY
        }
        assert fields <= said, f"{cls.__name__}: {fields - said} undocumented"
        if "error" not in fields:  # the last row shares `error` with RunFailed
            said.discard("error")
        assert all(hasattr(cls, f) or f in fields for f in said), cls.__name__


def test_api_pages_render_autodoc_through_rst() -> None:
    # A bare ```{automodule} block in MyST emitted its members as raw `.. py:method::` text:
    # the rules, hooks and MCP pages showed no API at all
    for page in sorted((DOCS / "api").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"^```\{auto\w+\}", text, re.M), page.name


def test_the_tool_returns_example_terminates(tmp_path: Path) -> None:
    (code,) = _blocks("concepts/schemas.md", "python")
    assert _run_script(code, tmp_path).strip() == "terminated"


def test_the_readme_s_script_adds(tmp_path: Path) -> None:
    script = next(b for b in _blocks("../README.md", "python") if "run_sync" in b)
    out = _run_script(script, tmp_path)
    assert out.startswith("[offline model]") and "returned: 5.0" in out


def test_the_conformance_tables_name_every_scenario_and_where_it_is_played() -> None:
    pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs it)")
    from tests.mcp.conformance_client import NOT_PLAYED
    from tests.mcp.conformance_suite import PLAYED

    played: dict[str, tuple[str, ...]] = {}
    not_played: set[str] = set()
    for first, second in _table("howto/mcp.md", "`.*", "The official conformance suite").items():
        leading = re.match(r"(?:`[^`]+`(?:, )?)+", first)
        assert leading, first
        for name in re.findall(r"`([^`]+)`", leading.group(0)):
            versions = tuple(v.strip() for v in second.split(","))
            if all(re.fullmatch(r"\d{4}-\d\d-\d\d|extension", v) for v in versions):
                played[name] = versions
            else:
                not_played.add(name)
    assert played == PLAYED
    assert not_played == set(NOT_PLAYED)


def test_the_kernel_limits_quoted_are_the_defaults() -> None:
    from nbagent import KernelLimits
    from nbagent._ground import guard as _guard

    rows = _table("howto/kernel.md", r"`KernelLimits\.[a-z_]+`|reads left running.*", "Limits")
    fields = dataclasses.fields(KernelLimits)
    assert {f"`KernelLimits.{f.name}`" for f in fields} <= set(rows), "a limit is missing"
    units = {"MiB": 2**20, "GiB": 2**30}
    for field in fields:
        quoted = rows[f"`KernelLimits.{field.name}`"]
        unit = re.match(r"[\d,.]+ (MiB|GiB)", quoted)
        scale = units[unit.group(1)] if unit else 1
        assert _number(quoted) * scale == field.default, field.name
    assert (
        _number(rows["reads left running (`nbagent._ground.guard.MAX_STUCK`)"]) == _guard.MAX_STUCK
    )
    summary = _table("concepts/limits.md", r"`KernelLimits\.read_timeout`, `copy_timeout`")
    quoted = re.findall(r"\d+(?:\.\d+)?", next(iter(summary.values())))[:2]
    assert [float(q) for q in quoted] == [KernelLimits.read_timeout, KernelLimits.copy_timeout]


def test_the_external_agent_limits_quoted_are_the_defaults() -> None:
    from nbagent.limits import ExternalAgentLimits

    rows = _table("howto/acp.md", r"`[a-z_]+`.*", "Bounds and failures")
    shown = {re.match(r"`([a-z_]+)`", k).group(1): v for k, v in rows.items()}  # type: ignore[union-attr]
    defaults = {f.name: f.default for f in dataclasses.fields(ExternalAgentLimits)}
    assert set(shown) == set(defaults) - {"stderr_tail"}
    for name, value in shown.items():
        scale = 2**20 if "MiB" in value else 1
        assert _number(value) * scale == defaults[name], name
