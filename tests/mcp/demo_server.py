"""An MCP server written with the official SDK, for the tests: ``python demo_server.py stdio``
or ``python demo_server.py http PORT``.

Its tools cover what a client must handle: text, structured output, an image, a tool error, a
20 MB answer, a call that never ends, a crash, a changing tool list, progress, and input
schemas a strict client has to translate or refuse (listed by ``list_tools``, so the client
sees exactly what a real server sends).
"""

from __future__ import annotations

import io
import os
import sys
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image

DRAFT_07 = "http://json-schema.org/draft-07/schema#"

#: Input schemas sent instead of the ones the SDK derives from the functions.
SCHEMAS: dict[str, dict[str, Any]] = {
    "pair": {
        "$schema": DRAFT_07,
        "type": "object",
        "properties": {
            "pair": {
                "type": "array",
                "items": [{"type": "string"}, {"type": "integer"}],
                "additionalItems": False,
            },
            "note": {"type": "string"},
        },
        "dependencies": {"note": ["pair"]},
        "required": ["pair"],
    },
    "ref_sibling": {
        "$schema": DRAFT_07,
        "type": "object",
        "definitions": {"word": {"type": "string"}},
        "properties": {"word": {"$ref": "#/definitions/word", "maxLength": 3}},
    },
    "remote_ref": {
        "type": "object",
        "properties": {"where": {"$ref": "https://example.com/schemas/where.json"}},
    },
    "old_draft": {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "properties": {},
    },
}


def _nested(depth: int) -> dict[str, Any]:
    """An object schema with an object property nested ``depth`` levels down."""
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


if os.environ.get("DEMO_DEEP_SCHEMA"):  # a listing too deeply nested to parse
    SCHEMAS["add"] = _nested(int(os.environ["DEMO_DEEP_SCHEMA"]))


class DemoServer(MCPServer):
    async def list_tools(self) -> Any:
        listed = await super().list_tools()
        return [
            tool.model_copy(update={"input_schema": SCHEMAS[tool.name]})
            if tool.name in SCHEMAS
            else tool
            for tool in listed
        ]


server = DemoServer("demo", version="1.0")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return f"echo: {text}"


@server.tool()
def picture() -> Image:
    """A small red square."""
    from PIL import Image as PILImage

    buffer = io.BytesIO()
    PILImage.new("RGB", (8, 8), "red").save(buffer, format="PNG")
    return Image(data=buffer.getvalue(), format="png")


@server.tool()
def fail(message: str) -> str:
    """Always fails with the message."""
    raise ToolError(message)


@server.tool()
def big(size: int) -> str:
    """Return `size` characters."""
    return "x" * size


@server.tool()
async def hang() -> str:
    """Never returns."""
    await anyio.sleep(3600)
    return "woke up"


@server.tool()
def crash() -> str:
    """Ends the server process at once."""
    sys.stderr.write("demo server: crashing on purpose\n")
    sys.stderr.flush()
    os._exit(3)


@server.tool()
def touch(path: str) -> str:
    """Create an empty file (a side effect a test can see)."""
    with open(path, "a"):
        pass
    return f"touched {path}"


@server.tool()
def environment(name: str) -> str:
    """The value of an environment variable, or '(unset)'."""
    return os.environ.get(name, "(unset)")


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool `extra` and tell the client the list changed."""

    def extra(word: str) -> str:
        """Added at run time."""
        return word.upper()

    server.add_tool(extra, name="extra")
    await ctx.notify_tools_changed()  # 2026-07-28 sessions (subscriptions/listen)
    try:
        await ctx.session.send_tool_list_changed()  # earlier sessions
    except Exception:
        pass
    return "grown"


@server.tool()
async def count(steps: int, ctx: Context) -> str:
    """Count to `steps`, reporting progress."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step} of {steps}")
    return f"counted to {steps}"


@server.tool()
def pair(pair: list[Any], note: str = "") -> str:
    """Takes a draft-07 tuple."""
    return f"{pair[0]}={pair[1]}{' ' + note if note else ''}"


@server.tool()
def ref_sibling(word: str = "") -> str:
    """Its draft-07 schema has `maxLength` beside `$ref`."""
    return word


@server.tool()
def remote_ref(where: str = "") -> str:
    """Its schema refers to another document."""
    return where


@server.tool()
def old_draft() -> str:
    """Its schema says draft-04."""
    return "old"


#: Set by the tool `drop_listening`: every listening stream then ends abruptly.
_DROPS: dict[str, anyio.Event] = {}


def _dropped_on_request() -> None:
    """Every listening stream ends with an error (not the graceful close) when the tool
    `drop_listening` asks: how a client sees a stream that broke off."""
    from mcp.shared.exceptions import MCPError

    low = server._lowlevel_server
    entry = low.get_request_handler("subscriptions/listen")
    assert entry is not None, "this SDK serves no subscriptions/listen"

    async def listen(ctx: Any, params: Any) -> Any:
        drop = _DROPS.setdefault("drop", anyio.Event())
        answer: list[Any] = []
        async with anyio.create_task_group() as group:

            async def serve() -> None:
                answer.append(await entry.handler(ctx, params))
                group.cancel_scope.cancel()

            group.start_soon(serve)
            await drop.wait()
            group.cancel_scope.cancel()
        if answer:
            return answer[0]
        raise MCPError(-32603, "the listening stream broke off (on purpose)")

    low.add_request_handler("subscriptions/listen", entry.params_type, listen)


_dropped_on_request()


@server.tool()
def drop_listening() -> str:
    """End every listening stream abruptly, then add the tool `late` without telling anyone
    (a change made while nobody listened)."""

    def late() -> str:
        """Added while the listening stream was down."""
        return "late"

    drop = _DROPS.pop("drop", None)
    if drop is not None:
        drop.set()
    server.add_tool(late, name="late")
    return "dropped"


def _grow_when_listened_to() -> None:
    """``DEMO_GROW_ON_LISTEN``: the tool list changes when a client asks to listen, before the
    server acknowledges (a change made while nobody listened, so never told: a client that
    listed its tools before it listened misses it for good)."""
    low = server._lowlevel_server
    entry = low.get_request_handler("subscriptions/listen")
    assert entry is not None, "this SDK serves no subscriptions/listen"

    def extra(word: str) -> str:
        """Added while nobody listened."""
        return word.upper()

    async def listen(ctx: Any, params: Any) -> Any:
        if server._tool_manager.get_tool("extra") is None:
            server.add_tool(extra, name="extra")
        return await entry.handler(ctx, params)

    low.add_request_handler("subscriptions/listen", entry.params_type, listen)


if os.environ.get("DEMO_GROW_ON_LISTEN"):
    _grow_when_listened_to()


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        if "--noisy" in sys.argv:
            print("demo server: this line is not JSON-RPC", flush=True)
        server.run("stdio")
