"""A loopback model server for the course tests: answers each POST with the next queued reply
(an SSE answer, or a gateway's JSON error) and counts every request that reached it. A held
reply (:meth:`Gateway.held_sse`) sends its first part, then waits for the test to let the rest
go, so a test can look at what a client shows of half an answer."""

from __future__ import annotations

import http.server
import json
import threading
from typing import Any

#: How long a held reply waits for its release before it sends the rest anyway (seconds).
HOLD_LIMIT = 60.0


class Gateway:
    """A threaded HTTP server on 127.0.0.1; ``replies`` are ``(status, content type, body)``."""

    def __init__(self) -> None:
        self.replies: list[tuple[int, str, bytes]] = []
        self.holds: dict[int, tuple[threading.Event, bytes]] = {}  # by reply number
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                owner.requests.append(json.loads(self.rfile.read(length) or b"{}"))
                owner.headers.append({k.lower(): v for k, v in self.headers.items()})
                status, kind, body = (
                    owner.replies.pop(0) if owner.replies else (500, "text/plain", b"no reply")
                )
                gate, rest = owner.holds.pop(len(owner.requests) - 1, (None, b""))
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(body) + len(rest)))
                self.end_headers()
                self.wfile.write(body)
                if gate is not None:
                    self.wfile.flush()
                    gate.wait(HOLD_LIMIT)
                    self.wfile.write(rest)

            def log_message(self, *_args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def sse(self, body: bytes) -> None:
        self.replies.append((200, "text/event-stream", body))

    def held_sse(self, first: bytes, rest: bytes) -> threading.Event:
        """An SSE answer whose ``rest`` is sent once the returned event is set."""
        gate = threading.Event()
        self.holds[len(self.requests) + len(self.replies)] = (gate, rest)
        self.sse(first)
        return gate

    def error(self, status: int, body: dict[str, Any]) -> None:
        self.replies.append((status, "application/json", json.dumps(body).encode()))

    def __enter__(self) -> Gateway:
        self.thread.start()
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
