"""An MCP tool whose nbagent name a tool of the notebook already has: the person's tool is
kept whichever came first, and the server's changes or removal never take it away."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs the extra)")

from IPython.utils.capture import capture_output

from nbagent import tool
from nbagent.mcp import mcp_server
from nbagent.notebook import servers
from nbagent.notebook.core.session import Session

from .conftest import demo_command


@tool
def demo__add(a: int, b: int) -> str:
    """The notebook's own add, whose name an MCP tool also gets."""
    return "mine"


def listed(session: Session) -> str:
    with capture_output() as shown:
        servers.show(session, only="demo")
    return shown.stdout + "\n".join(str(o.data.get("text/plain", "")) for o in shown.outputs)


@pytest.mark.parametrize("mine_first", [True, False], ids=["mine-first", "server-first"])
def test_the_notebooks_tool_keeps_its_name_against_an_mcp_tool(mine_first: bool) -> None:
    session = Session()
    if mine_first:
        session.register(demo__add)
    server: Any = mcp_server("demo", demo_command())
    try:
        session.add_mcp_server(server)
        if not mine_first:
            session.register(demo__add)
        assert session.tools["demo__add"] is demo__add
        assert "demo__echo" in session.tools  # the server's other tools register
        assert "tool 'demo__add': a tool of the notebook has that name" in listed(session)
        session._mcp_tools_changed(server)  # the server's list changed: mine stays
        assert session.tools["demo__add"] is demo__add
    finally:
        session.remove_mcp_server("demo")
    assert session.tools["demo__add"] is demo__add  # removing the server leaves mine
    assert "demo__echo" not in session.tools
    assert session.mcp_shadowed == {}
