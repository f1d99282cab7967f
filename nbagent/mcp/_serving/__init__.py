"""nbagent's own MCP server (``%agent serve``, ``nbagent.serve()``): the tool server over
Streamable HTTP (:mod:`.server`), its HTTP transport with the bounds on slow and flooding
connections (:mod:`.http`), the token and Host/Origin checks (:mod:`.guard`), and a tool
result as MCP content (:mod:`.content`).

May import (docs/architecture.md): what :mod:`nbagent.mcp` may.
"""
