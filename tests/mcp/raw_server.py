"""An MCP server written by hand over stdio, for what the SDK's own server never sends:
``python raw_server.py [NAME ...]``. It answers the handshake and lists one tool, ``babble``
(or tools of the names given, any names, repeats included); a call is answered only after
``count`` notifications that no client can validate."""

from __future__ import annotations

import json
import sys
from typing import Any


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request: dict[str, Any], result: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "id": request["id"], "result": result})


for line in sys.stdin:
    request = json.loads(line)
    method = request.get("method")
    if method == "initialize":
        answer(
            request,
            {
                "protocolVersion": request["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw", "version": "1"},
            },
        )
    elif method == "tools/list":
        schema = {"type": "object", "properties": {"count": {"type": "integer"}}}
        names = sys.argv[1:] or ["babble"]
        answer(request, {"tools": [{"name": name, "inputSchema": schema} for name in names]})
    elif method == "tools/call":
        for _ in range(request["params"]["arguments"]["count"]):
            send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "?"}})
        answer(request, {"content": [{"type": "text", "text": "babbled"}]})
    elif "id" in request and method is not None:
        answer(request, {})
