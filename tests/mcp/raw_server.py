"""An MCP server written by hand over stdio, for what the SDK's own server never sends:
``python raw_server.py [NAME ...]``. It answers the handshake and lists one tool, ``babble``
(or tools of the names given, any names, repeats included); a call is answered only after
``count`` notifications that no client can validate. A call to a tool named ``vanish`` closes
the server's input, says so on stderr, waits for the file named by ``RAW_SERVER_GO`` and exits
with code 3 without answering."""

from __future__ import annotations

import json
import os
import sys
import time
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
    elif method == "tools/call" and request["params"]["name"] == "vanish":
        os.close(0)  # writes to this server now fail (a broken pipe) while it still runs
        sys.stderr.write("raw server: vanishing\n")
        sys.stderr.flush()
        deadline = time.monotonic() + 30
        while not os.path.exists(os.environ["RAW_SERVER_GO"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        os._exit(3)
    elif method == "tools/call":
        for _ in range(request["params"]["arguments"]["count"]):
            send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "?"}})
        answer(request, {"content": [{"type": "text", "text": "babbled"}]})
    elif "id" in request and method is not None:
        answer(request, {})
