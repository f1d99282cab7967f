"""MCP servers' tools as nbagent Tools, through the official ``mcp`` SDK (``nbagent[mcp]``).

::

    from nbagent import Agent, mcp_server

    with mcp_server("everything", ["npx", "-y", "@modelcontextprotocol/server-everything"]) as srv:
        agent = Agent("openai:gpt-4.1-mini", srv.tools, approver=...)
        agent.run_sync("echo 'hello'")

Each server tool becomes a :class:`~nbagent.Tool` named ``SERVER__tool`` (see
:func:`tool_name`), whose input schema went through the same strict compile as any tool
(draft-07 schemas translated where exact: :mod:`nbagent.mcp._dialect`); a tool that cannot be
registered is listed in :attr:`MCPServer.rejected` with the reason, and the others register.
MCP tools need approval by default. :attr:`MCPServer.tools` follows the server's
``list_changed`` notifications. A server reached by URL that asks for authorization is signed
in to with OAuth 2.1 (:class:`OAuth`, through the SDK's client auth); its tokens stay in
memory. Nothing here starts a server unless asked to.

May import (docs/architecture.md): the ground, :mod:`nbagent.schema` and the vocabulary only;
what it needs of the person (a sign-in presenter) a front end hands it.
"""

from __future__ import annotations

from ._limits import MCPLimits
from ._oauth import OAuth
from ._servers import MCPServer, close_all, close_servers, mcp_server, tool_name

__all__ = [
    "MCPLimits",
    "MCPServer",
    "OAuth",
    "close_all",
    "close_servers",
    "mcp_server",
    "tool_name",
]
