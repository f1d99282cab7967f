"""A result the SDK cannot take reaches the model as one sentence saying what was wrong, not
as pydantic's or jsonschema's report (dozens of lines, a URL, the whole input)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs the extra)")

from nbagent.mcp import MCPServer, mcp_server

from .conftest import RAW, by_name, call

OUTPUT = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MCPServer]:
    path = Path(tmp_path_factory.mktemp("errors")) / "tools.json"
    tools = [
        {"name": "invalid", "inputSchema": {"type": "object"}},
        {"name": "mismatch", "inputSchema": {"type": "object"}, "outputSchema": OUTPUT},
    ]
    path.write_text(json.dumps(tools))
    with mcp_server("raw", [sys.executable, RAW], env={"RAW_SERVER_TOOLS": str(path)}) as server:
        yield server


def test_a_result_that_is_not_valid_mcp_is_one_sentence(raw: MCPServer) -> None:
    result = call(by_name(raw, "raw__invalid"), {})
    assert result.is_error
    text = result.text
    assert text.startswith(
        "'invalid' on MCP server 'raw' answered with a result that is not valid MCP: at "
        "'content/0': it matches none of TextContent, ImageContent"
    ), text
    assert "'video'" in text and "more problem" in text, text
    assert "\n" not in text and len(text) < 400, text
    assert "pydantic" not in text and "For further information" not in text


def test_structured_content_its_schema_refuses_is_one_sentence(raw: MCPServer) -> None:
    result = call(by_name(raw, "raw__mismatch"), {})
    assert result.is_error
    assert result.text == (
        "'mismatch' on MCP server 'raw' answered with structured content its output schema "
        "does not allow: 'five' is not of type 'integer' (at $.n)"
    )
