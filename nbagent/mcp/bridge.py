"""A stdio bridge to a served notebook, for MCP clients that only start stdio servers.

::

    NBAGENT_SERVE_TOKEN=... python -m nbagent.mcp.bridge http://127.0.0.1:PORT/mcp

reads JSON-RPC messages, one a line, from stdin, sends each to the notebook's streamable HTTP
endpoint with the bearer token (from ``NBAGENT_SERVE_TOKEN``, never from the command line,
where other users of the machine could read it) and writes what comes back (the answer, and
the progress notifications before it) to stdout, one message a line. Requests go concurrently
(at most :data:`MAX_IN_FLIGHT` at once), so a call that waits for a person does not hold up a
``ping``. A line over :data:`MAX_LINE` bytes, or one that is not JSON, is answered with a
JSON-RPC error and never sent. What the bridge itself has to say goes to stderr.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any

__all__ = ["MAX_IN_FLIGHT", "MAX_LINE", "main", "run"]

#: Requests forwarded at once; more wait their turn.
MAX_IN_FLIGHT = 16
#: Longest message line read from stdin, in bytes.
MAX_LINE = 4 * 1024 * 1024
_ACCEPT = "application/json, text/event-stream"
_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"


class _Bridge:
    def __init__(self, url: str, token: str, out: IO[str]) -> None:
        import httpx2

        self.url = url
        self.token = token
        self.out = out
        self.lock = threading.Lock()
        self.session: str | None = None
        self.version: str | None = None
        self.http = httpx2.Client(timeout=httpx2.Timeout(30.0, read=None))

    def write(self, message: Any) -> None:
        text = json.dumps(message, separators=(",", ":"))
        with self.lock:
            self.out.write(text + "\n")
            self.out.flush()

    def error(self, ident: Any, code: int, text: str) -> None:
        self.write({"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": text}})

    def headers(self, message: Any) -> dict[str, str]:
        """The HTTP headers of one message: the token, and the era's own: a session and its
        version (2025), or each request's version, method and name (2026, from ``_meta``)."""
        from mcp.shared.inbound import NAME_BEARING_METHODS, encode_header_value

        found = {
            "Authorization": f"Bearer {self.token}",
            "Accept": _ACCEPT,
            "Content-Type": "application/json",
        }
        params = message.get("params") if isinstance(message, dict) else None
        meta = params.get("_meta") if isinstance(params, dict) else None
        modern = meta.get(_VERSION_KEY) if isinstance(meta, dict) else None
        if isinstance(modern, str):
            method = message.get("method")
            found["MCP-Protocol-Version"] = modern
            if isinstance(method, str):
                found["Mcp-Method"] = method
                key = NAME_BEARING_METHODS.get(method)
                name = params.get(key) if key and isinstance(params, dict) else None
                if isinstance(name, str):
                    found["Mcp-Name"] = encode_header_value(name)
            return found
        if self.session:
            found["Mcp-Session-Id"] = self.session
        if self.version:
            found["MCP-Protocol-Version"] = self.version
        return found

    def forward(self, message: Any) -> None:
        ident = message.get("id") if isinstance(message, dict) else None
        try:
            with self.http.stream(
                "POST", self.url, headers=self.headers(message), content=json.dumps(message)
            ) as answer:
                if answer.headers.get("mcp-session-id"):
                    self.session = answer.headers["mcp-session-id"]
                if answer.status_code == 202:
                    return  # a notification or a response: nothing comes back
                kind = answer.headers.get("content-type", "")
                if "text/event-stream" in kind:
                    for sent in _events(answer.iter_lines()):
                        self._seen(sent)
                        self.write(_with_id(sent, ident))
                    return
                body = answer.read()
                if answer.status_code >= 400 and not body.strip().startswith(b"{"):
                    reason = body.decode("utf-8", "replace")[:300]
                    self.error(ident, -32000, f"HTTP {answer.status_code}: {reason}")
                    return
                sent = json.loads(body)
                self._seen(sent)
                self.write(_with_id(sent, ident))
        except Exception as exc:  # the notebook went away, a broken answer: say so, go on
            if ident is not None:
                self.error(ident, -32000, f"the notebook did not answer: {type(exc).__name__}")
            print(f"nbagent bridge: {type(exc).__name__}: {exc}", file=sys.stderr)

    def _seen(self, message: Any) -> None:
        result = message.get("result") if isinstance(message, dict) else None
        if isinstance(result, dict) and isinstance(result.get("protocolVersion"), str):
            self.version = result["protocolVersion"]


def _with_id(message: Any, ident: Any) -> Any:
    """An error the server could not tie to its request (id null) answers the request sent."""
    if isinstance(message, dict) and "error" in message and message.get("id") is None:
        return {**message, "id": ident}
    return message


def _events(lines: Iterator[str]) -> Iterator[Any]:
    """The JSON messages of an SSE stream (its ``data:`` lines, joined per event)."""
    data: list[str] = []
    for line in lines:
        if line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif not line.strip() and data:
            text, data = "\n".join(data), []
            if text.strip():
                yield json.loads(text)
    if data and "".join(data).strip():
        yield json.loads("\n".join(data))


def run(url: str, token: str, stdin: IO[str], stdout: IO[str]) -> int:
    """Bridge ``stdin``/``stdout`` to ``url`` until stdin ends; the exit status."""
    bridge = _Bridge(url, token, stdout)
    with ThreadPoolExecutor(MAX_IN_FLIGHT, thread_name_prefix="nbagent-bridge") as pool:
        while True:
            line = stdin.readline(MAX_LINE + 1)
            if not line:
                break
            if len(line.encode()) > MAX_LINE:
                bridge.error(None, -32600, f"message over {MAX_LINE} bytes: not sent")
                while line and not line.endswith("\n"):  # skip the rest of it
                    line = stdin.readline(MAX_LINE)
                continue
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError:
                bridge.error(None, -32700, "not JSON: not sent")
                continue
            if isinstance(message, dict) and message.get("method") == "initialize":
                bridge.forward(message)  # the session id comes with its answer: wait for it
            else:
                pool.submit(bridge.forward, message)
    bridge.http.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m nbagent.mcp.bridge URL`` (the token in ``NBAGENT_SERVE_TOKEN``)."""
    args = sys.argv[1:] if argv is None else argv
    token = os.environ.get("NBAGENT_SERVE_TOKEN", "")
    if len(args) != 1 or not args[0].startswith(("http://", "https://")) or not token:
        print(
            "usage: NBAGENT_SERVE_TOKEN=TOKEN python -m nbagent.mcp.bridge "
            "http://127.0.0.1:PORT/mcp (the url and token %agent serve showed)",
            file=sys.stderr,
        )
        return 2
    return run(args[0], token, sys.stdin, sys.stdout)


if __name__ == "__main__":
    raise SystemExit(main())
