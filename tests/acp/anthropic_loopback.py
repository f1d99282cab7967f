"""A loopback Anthropic Messages server for a real agent (Claude Code over ACP): it streams the
real protocol's events. The main turn (a request that offers the ``Bash`` tool) first asks to
run ``COMMAND`` with Bash; once the request carries that call's result, it answers with the
result's text. Every other request (a title, a quota check …) gets a short text answer."""

from __future__ import annotations

import http.server
import json
import threading
from typing import Any

from ..providers import wire

COMMAND = "echo made-by-claude > made.txt"


def tool_result(body: dict[str, Any]) -> str | None:
    """The text of the last tool result in the request, or None."""
    for message in reversed(body.get("messages", [])):
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            continue
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                inner = block.get("content")
                if isinstance(inner, list):
                    inner = " ".join(str(p.get("text", "")) for p in inner if isinstance(p, dict))
                return f"{'error: ' if block.get('is_error') else ''}{inner or ''}"
        return None
    return None


def _bash_call() -> bytes:
    arguments = json.dumps({"command": COMMAND, "description": "Write made.txt"})
    return wire.anthropic_sse(
        [
            wire.an_message_start(),
            wire.an_block_start(
                0, {"type": "tool_use", "id": "toolu_acp_1", "name": "Bash", "input": {}}
            ),
            wire.an_json(0, arguments[:20]),
            wire.an_json(0, arguments[20:]),
            wire.an_block_stop(0),
            wire.an_message_delta("tool_use", 20),
            wire.MESSAGE_STOP,
        ]
    )


class AnthropicLoopback:
    """A threaded HTTP server on 127.0.0.1 (``url``: the base URL to give the agent)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                owner.requests.append(body)
                tools = {t.get("name") for t in body.get("tools", []) if isinstance(t, dict)}
                if not body.get("stream"):
                    data = json.dumps(
                        {
                            "id": "msg_loop",
                            "type": "message",
                            "role": "assistant",
                            "model": body.get("model", "claude"),
                            "content": [{"type": "text", "text": "ok"}],
                            "stop_reason": "end_turn",
                            "stop_sequence": None,
                            "usage": {"input_tokens": 1, "output_tokens": 1},
                        }
                    ).encode()
                    kind = "application/json"
                else:
                    result = tool_result(body)
                    if "Bash" in tools and result is None:
                        data = _bash_call()
                    elif "Bash" in tools:
                        data = wire.anthropic_text(f"the command said: {result}")
                    else:
                        data = wire.anthropic_text("ok")
                    kind = "text/event-stream"
                self.send_response(200)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self.send_response(404)
                self.end_headers()

            def log_message(self, *_args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> AnthropicLoopback:
        self.thread.start()
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
