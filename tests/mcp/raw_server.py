"""An MCP server written by hand over stdio, for what the SDK's own server never sends:
``python raw_server.py [NAME ...]``. It answers the handshake and lists one tool, ``babble``
(or tools of the names given, any names, repeats included); a call is answered only after
``count`` notifications that no client can validate. A call to a tool named ``vanish`` closes
the server's input, says so on stderr, waits for the file named by ``RAW_SERVER_GO`` and exits
with code 3 without answering.

``RAW_SERVER_TOOLS`` names a file whose bytes are sent, exactly as they are, as the listing's
``tools`` array (so a test can list what no JSON library would write: tools nested thousands
of levels deep, a ``NaN``, a malformed entry); several files (joined by ``os.pathsep``) are
the listing's pages, in order, each but the last with a ``nextCursor`` to the next.
``RAW_SERVER_MODERN=1`` makes it a 2026-07-28 server (it answers ``server/discover``). A
call to ``burst`` sends ``count`` tool-list change notifications, the listing gaining the tool
``vN`` with the N-th, and answers once all are written; ``listings`` answers with how many
times the tool list was asked for; ``invalid`` and ``mismatch`` answer with results no client
can take, ``deep`` with one nested 300 levels (see ``ANSWERS``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

MODERN = "2026-07-28"
SCHEMA = {"type": "object", "properties": {"count": {"type": "integer"}}}


#: Results no client can take as they are: content of an unknown type, and structured content
#: its output schema refuses (list ``mismatch`` with ``{"n": {"type": "integer"}}`` required).
def _nested(levels: int) -> Any:
    value: Any = []
    for _ in range(levels):
        value = [value]
    return value


ANSWERS: dict[str, Any] = {
    "invalid": {"content": [{"type": "video", "data": "AAAA"}, {"type": "text"}]},
    "mismatch": {"content": [{"type": "text", "text": "five"}], "structuredContent": {"n": "five"}},
    # nested past the SDK's JSON parser (about 200 levels)
    "deep": {"content": [], "structuredContent": {"a": _nested(300)}},
}


class State:
    """What the server has been asked, and the version of its tool list."""

    def __init__(self, names: list[str]) -> None:
        self.names = names or ["babble"]
        self.version = 0
        self.listings = 0


def send(message: dict[str, Any] | bytes) -> None:
    data = message if isinstance(message, bytes) else json.dumps(message).encode()
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.buffer.flush()


def answer(request: dict[str, Any], result: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "id": request["id"], "result": result})


def tools_bytes(state: State, cursor: Any = None) -> tuple[bytes, str | None]:
    """The ``tools`` array of the page ``cursor`` names, as JSON text (a file's bytes, or the
    names), and the cursor of the next page."""
    paths = os.environ.get("RAW_SERVER_TOOLS")
    if paths:
        pages = paths.split(os.pathsep)
        page = int(cursor) if isinstance(cursor, str) and cursor.isdigit() else 0
        with open(pages[min(page, len(pages) - 1)], "rb") as file:
            return file.read(), str(page + 1) if page + 1 < len(pages) else None
    names = [*state.names, *([f"v{state.version}"] if state.version else [])]
    return json.dumps([{"name": name, "inputSchema": SCHEMA} for name in names]).encode(), None


def listing(request_id: Any, state: State, cursor: Any = None) -> bytes:
    """The whole answer to ``tools/list`` (of the page ``cursor`` names), built around the
    tools' bytes."""
    state.listings += 1
    head = json.dumps({"jsonrpc": "2.0", "id": request_id})[:-1].encode()
    extra = b""
    if os.environ.get("RAW_SERVER_MODERN"):  # what 2026-07-28 asks of every listing
        extra = b'"cacheScope": "private", "ttlMs": 0, "resultType": "complete", '
    tools, following = tools_bytes(state, cursor)
    if following is not None:
        extra += b'"nextCursor": ' + json.dumps(following).encode() + b", "
    return head + b', "result": {' + extra + b'"tools": ' + tools + b"}}"


def handshake(request: dict[str, Any]) -> dict[str, Any] | None:
    """The result for ``initialize`` / ``server/discover``, or None for other methods."""
    method = request.get("method")
    info = {"name": "raw", "version": "1"}
    if method == "initialize":
        version = request["params"]["protocolVersion"]
        return {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info}
    if method == "server/discover" and os.environ.get("RAW_SERVER_MODERN"):
        return {
            "supportedVersions": [MODERN],
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": info,
            "resultType": "complete",
        }
    return None


def main() -> None:
    state = State(sys.argv[1:])
    for line in sys.stdin:
        request = json.loads(line)
        method = request.get("method")
        params = request.get("params") or {}
        started = handshake(request)
        if started is not None:
            answer(request, started)
        elif method == "tools/list":
            send(listing(request["id"], state, params.get("cursor")))
        elif method == "tools/call" and params["name"] == "vanish":
            os.close(0)  # writes to this server now fail (a broken pipe) while it still runs
            sys.stderr.write("raw server: vanishing\n")
            sys.stderr.flush()
            deadline = time.monotonic() + 30
            while not os.path.exists(os.environ["RAW_SERVER_GO"]) and time.monotonic() < deadline:
                time.sleep(0.05)
            os._exit(3)
        elif method == "tools/call" and params["name"] == "burst":
            for _ in range(params["arguments"]["count"]):
                state.version += 1
                send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            answer(request, {"content": [{"type": "text", "text": "burst"}]})
        elif method == "tools/call" and params["name"] == "listings":
            answer(request, {"content": [{"type": "text", "text": str(state.listings)}]})
        elif method == "tools/call" and params["name"] in ANSWERS:
            answer(request, ANSWERS[params["name"]])
        elif method == "tools/call":
            for _ in range(params.get("arguments", {}).get("count", 0)):
                bad = {"level": "?"}  # no client can validate it
                send({"jsonrpc": "2.0", "method": "notifications/message", "params": bad})
            answer(request, {"content": [{"type": "text", "text": "babbled"}]})
        elif "id" in request and method is not None:
            answer(request, {})


if __name__ == "__main__":
    main()
