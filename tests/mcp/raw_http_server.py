"""An MCP server written by hand over streamable HTTP, for what a well-behaved server never
sends: ``python raw_http_server.py PORT``. It speaks the same JSON-RPC as ``raw_server.py``
(and takes its ``RAW_SERVER_TOOLS`` / ``RAW_SERVER_MODERN``), answering each POST with one JSON
body, or with an event stream when ``RAW_HTTP_SSE=1``.

* A call to ``huge`` answers with a valid result holding ``size`` characters of text, written
  a megabyte at a time, with a ``Content-Length`` (or chunked, with ``"chunked": true``; as one
  event of a stream with ``RAW_HTTP_SSE=1``); a call
  to ``sent`` answers with how many bytes of the last ``huge`` answer got out before the client
  stopped reading (all of them when it read everything).
* ``RAW_HTTP_STATUS=401`` (or any status) answers every POST with that status and a plain-text
  body, as a server behind a login does.
* ``RAW_HTTP_GZIP=1`` answers every other call compressed (``Content-Encoding: gzip``) whatever
  the client asked for.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from raw_server import State, handshake, listing

STATE = State(["huge", "sent", "echo"])
SENT = {"bytes": 0}
_PIECE = 1024 * 1024


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def reply(
        self, status: int, body: bytes, kind: str = "application/json", **headers: str
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def answer(self, request_id: Any, result: dict[str, Any] | bytes) -> None:
        body = (
            result
            if isinstance(result, bytes)
            else json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()
        )
        if os.environ.get("RAW_HTTP_SSE"):
            self.reply(200, b"event: message\ndata: " + body + b"\n\n", "text/event-stream")
        else:
            self.reply(200, body, **{"Mcp-Session-Id": "raw-session"})

    def do_GET(self) -> None:
        self.reply(405, b"", "text/plain")

    def do_DELETE(self) -> None:
        self.reply(200, b"", "text/plain")

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        status = os.environ.get("RAW_HTTP_STATUS")
        if status:
            words = {"401": b"Unauthorized", "403": b"Forbidden"}.get(status, b"No")
            self.reply(int(status), words, "text/plain", WWW_Authenticate='Bearer realm="raw"')
            return
        if "id" not in request:  # a notification
            self.reply(202, b"", "text/plain")
            return
        method = request.get("method")
        params = request.get("params") or {}
        started = handshake(request)
        if started is not None:
            self.answer(request["id"], started)
        elif method == "server/discover":
            error = {"code": -32601, "message": "Method not found"}
            body = json.dumps({"jsonrpc": "2.0", "id": request["id"], "error": error}).encode()
            self.reply(200, body)
        elif method == "tools/list":
            self.answer(request["id"], listing(request["id"], STATE, params.get("cursor")))
        elif method == "tools/call" and params["name"] == "huge":
            self.huge(request["id"], params["arguments"])
        elif method == "tools/call" and params["name"] == "sent":
            self.answer(request["id"], {"content": [{"type": "text", "text": str(SENT["bytes"])}]})
        elif method == "tools/call" and os.environ.get("RAW_HTTP_GZIP"):
            content = {"content": [{"type": "text", "text": "x" * 100_000}]}
            body = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": content})
            self.reply(200, gzip.compress(body.encode()), Content_Encoding="gzip")
        elif method == "tools/call":
            text = f"ok: {params['name']}"
            self.answer(request["id"], {"content": [{"type": "text", "text": text}]})
        else:
            self.answer(request["id"], {})

    def huge(self, request_id: Any, arguments: dict[str, Any]) -> None:
        size = int(arguments["size"])
        head = json.dumps({"jsonrpc": "2.0", "id": request_id})[:-1].encode()
        head += b', "result": {"content": [{"type": "text", "text": "'
        tail = b'"}]}}'
        kind = "application/json"
        if os.environ.get("RAW_HTTP_SSE"):  # the same answer as one server-sent event
            head, tail, kind = b"event: message\ndata: " + head, tail + b"\n\n", "text/event-stream"
        chunked = bool(arguments.get("chunked"))
        SENT["bytes"] = 0
        self.send_response(200)
        self.send_header("Content-Type", kind)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(len(head) + size + len(tail)))
        self.end_headers()
        if not self.write(head, chunked):
            return
        left = size
        while left:
            piece = min(left, _PIECE)
            if not self.write(b"x" * piece, chunked):
                return
            left -= piece
        if self.write(tail, chunked) and chunked:
            self.write(b"", chunked)  # the last chunk

    def write(self, data: bytes, chunked: bool) -> bool:
        try:
            if chunked:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            else:
                self.wfile.write(data)
            self.wfile.flush()
        except OSError:  # the client stopped reading
            self.close_connection = True
            return False
        SENT["bytes"] += len(data)
        return True


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    server.daemon_threads = True
    server.serve_forever()
