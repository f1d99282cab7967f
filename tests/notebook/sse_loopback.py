"""A loopback HTTP server that answers each POST with the next recorded SSE body (a provider's
real stream) and keeps the JSON bodies it received: the model server of the record/replay and
the restart tests. It serves from construction; ``close()`` or leaving ``with`` stops it."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterable
from typing import Any


class SSELoopback:
    """An answer per POST from ``bodies`` (500 once they run out); ``requests``: what came."""

    def __init__(self, bodies: Iterable[bytes] = ()) -> None:
        self.bodies = list(bodies)
        self.requests: list[dict[str, Any]] = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                owner.requests.append(json.loads(self.rfile.read(length)))
                body = owner.bodies.pop(0) if owner.bodies else b""
                self.send_response(200 if body else 500)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> SSELoopback:
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.close()
