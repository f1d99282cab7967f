"""An MCP server written with the official SDK whose calls take their time: ``python
progress_server.py stdio`` or ``python progress_server.py http PORT``.

``tick`` reports progress every ``every`` seconds for ``seconds`` seconds, then answers; ``quiet``
waits ``seconds`` without a word; ``cancelled`` says how many of its calls the client cancelled.
"""

from __future__ import annotations

import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("progress")
_cancelled = [0]


@server.tool()
async def tick(seconds: float, every: float, ctx: Context) -> str:
    """Report progress every `every` seconds for `seconds`, then answer."""
    done = 0.0
    try:
        while done < seconds:
            await anyio.sleep(every)
            done += every
            await ctx.report_progress(done, seconds, f"{done:.1f} s of {seconds:g} s")
    except anyio.get_cancelled_exc_class():
        _cancelled[0] += 1
        raise
    return f"ticked for {seconds:g} s"


@server.tool()
async def quiet(seconds: float) -> str:
    """Wait `seconds` without a word, then answer."""
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        _cancelled[0] += 1
        raise
    return f"quiet for {seconds:g} s"


@server.tool()
def cancelled() -> int:
    """How many calls of this server the client cancelled so far."""
    return _cancelled[0]


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
