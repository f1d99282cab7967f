"""A stdio transport for the MCP SDK's client session, with a bound on every buffer.

The SDK's own ``stdio_client`` holds a message of any size and joins its pieces in time that
grows with the square of its length (measured here: 35 s of CPU for one 40 MB line the server
wrote in 0.8 s), and sends the server's stderr to the kernel's, where ipykernel shows it in
whichever cell runs next. This transport frames the same newline-delimited JSON-RPC, parsed
by the SDK's own message model, with:

* ``max_message_bytes``: a longer line is skipped as it streams in (never held); when it was
  the answer to a call (its head or tail names the id, as every SDK writes them), that call
  is answered with an error saying so, and the connection goes on.
* the server's stderr kept as a bounded tail (:class:`ProcessRecord`), shown when it fails.
* the process started in a session of its own and stopped with its whole group: stdin closed,
  then SIGTERM, then SIGKILL, each after a grace period, and always reaped.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from anyio.abc import Process
    from mcp.client._transport import TransportStreams

    from ._listing import ListingScreen

__all__ = ["ProcessRecord", "stdio_transport"]

#: Seconds a server has to exit after its stdin closes, then after SIGTERM.
EXIT_GRACE = 2.0
_STDERR_KEEP = 8_192
_EDGE = 256
# Where a response's id sits: first (`{"jsonrpc":"2.0","id":7,"result":…`, Python SDK) or last
# (`{"result":…,"jsonrpc":"2.0","id":7}`, TypeScript SDK).
_ID = rb'("(?:[^"\\]|\\.){0,100}"|-?\d{1,18})'
_HEAD = re.compile(
    rb'^\s*\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*' + _ID + rb'\s*,\s*"(?:result|error)"'
)
_RESULT_FIRST = re.compile(rb'^\s*\{\s*"(?:result|error)"\s*:')
_TAIL = re.compile(rb'"id"\s*:\s*' + _ID + rb"\s*\}\s*$")


class ProcessRecord:
    """A server process: its id, how it ended, and the last kilobytes it wrote to stderr."""

    def __init__(self) -> None:
        self._data = bytearray()
        self.pid: int | None = None
        self.returncode: int | None = None
        self.stopping = False  # nbagent began to stop it
        self.ended_alone = False  # it ended before nbagent began to stop it

    def feed(self, chunk: bytes) -> None:
        self._data += chunk
        if len(self._data) > _STDERR_KEEP:
            del self._data[: len(self._data) - _STDERR_KEEP]

    def tail(self, lines: int = 12) -> str:
        """The last ``lines`` lines, decoded leniently, secrets redacted."""
        from ..redact import redact_secrets

        text = self._data.decode("utf-8", "replace").strip()
        return redact_secrets("\n".join(text.splitlines()[-lines:]))


def _response_id(head: bytes, tail: bytes) -> Any:
    """The id of the JSON-RPC response whose first and last bytes these are, or None."""
    import json

    found = _HEAD.match(head)
    if found is None and _RESULT_FIRST.match(head):
        found = _TAIL.search(tail)
    if found is None:
        return None
    try:
        return json.loads(found.group(1))
    except ValueError:
        return None


def _too_large(request_id: Any, limit: int) -> Any:
    """The error response that answers a call whose real answer was too large to read."""
    from ._limits import too_large

    return _answered_with(request_id, too_large(limit))


def _answered_with(request_id: Any, message: str) -> Any:
    """An error response for ``request_id`` in place of an answer that cannot be used."""
    import mcp_types
    from mcp.shared.message import SessionMessage

    error = mcp_types.JSONRPCError(
        jsonrpc="2.0",
        id=request_id,
        error=mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message=message),
    )
    return SessionMessage(error)


def _parse(line: bytes) -> Any:
    import mcp_types
    from mcp.shared.message import SessionMessage

    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        return exc


def _readable(line: bytes, screen: ListingScreen | None = None) -> Any:
    """The message on ``line``; an answer that cannot be parsed (nested too deeply, not valid
    for its request) becomes an error answer to its request, which would otherwise wait for its
    timeout; anything else unreadable goes to the session as the exception it is. An answer to
    ``tools/list`` goes through ``screen`` first, so that one bad tool costs only itself."""
    import mcp_types

    parsed = _parse(line)
    if isinstance(parsed, Exception):
        request_id = _response_id(line[:_EDGE], line[-_EDGE:])
        if request_id is None:
            return parsed
        if screen is not None and screen.answers(request_id):
            screened = screen.screen_bytes(line)
            again = _parse(screened) if screened is not None else parsed
            if not isinstance(again, Exception):
                return again
        reason = _first_error(parsed)
        return _answered_with(
            request_id, f"the server's answer could not be read (not valid JSON-RPC: {reason})"
        )
    message = parsed.message
    if (
        screen is not None
        and isinstance(message, mcp_types.JSONRPCResponse)
        and screen.answers(message.id)
    ):
        result = screen.screen_result(message.result)
        if result is not None:
            message.result = result
    return parsed


def _first_error(exc: Exception) -> str:
    """The first thing pydantic found wrong (its type, its message), else the exception."""
    errors = getattr(exc, "errors", None)
    try:
        first = errors()[0] if callable(errors) else None
    except Exception:  # not pydantic's: say what it is
        first = None
    if isinstance(first, dict) and first.get("msg"):
        return f"{first.get('type', 'error')}: {first['msg']}"[:300]
    return f"{type(exc).__name__}: {exc}"[:300]


class _Lines:
    """Splits a byte stream into lines of at most ``limit`` bytes, in linear time."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.buffer = bytearray()
        self.skipping = False  # inside a line that is too long: keep only its edges
        self.head = b""
        self.tail = b""

    def feed(self, chunk: bytes) -> list[bytes | tuple[bytes, bytes]]:
        """Whole lines, and (head, tail) for each line that was too long."""
        out: list[bytes | tuple[bytes, bytes]] = []
        start = 0
        while True:
            newline = chunk.find(b"\n", start)
            piece = chunk[start:] if newline < 0 else chunk[start:newline]
            if self.skipping:
                if len(self.head) < _EDGE:
                    self.head += piece[: _EDGE - len(self.head)]
                self.tail = (self.tail + piece)[-_EDGE:]
            else:
                self.buffer += piece
                if len(self.buffer) > self.limit:
                    self.skipping = True
                    self.head = bytes(self.buffer[:_EDGE])
                    self.tail = bytes(self.buffer[-_EDGE:])
                    self.buffer.clear()
            if newline < 0:
                return out
            if self.skipping:
                out.append((self.head, self.tail))
                self.skipping = False
            elif self.buffer.strip():
                out.append(bytes(self.buffer))
            self.buffer.clear()
            start = newline + 1


@contextlib.asynccontextmanager
async def stdio_transport(
    command: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | None,
    max_message_bytes: int,
    record: ProcessRecord,
    on_exit: Callable[[], None] = lambda: None,
    screen: ListingScreen | None = None,
) -> AsyncIterator[TransportStreams]:
    """Start ``command`` and yield the SDK's (read, write) streams for its stdio; the answers
    to ``tools/list`` go through ``screen``."""
    from mcp.shared.message import SessionMessage

    process = await anyio.open_process(
        list(command),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env),
        cwd=cwd,
        start_new_session=True,
    )
    record.pid = process.pid
    read_in, read_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_in, write_out = anyio.create_memory_object_stream[SessionMessage](0)

    stderr_done = anyio.Event()

    async def read_stdout() -> None:
        assert process.stdout is not None
        lines = _Lines(max_message_bytes)
        try:
            async for chunk in process.stdout:
                for line in lines.feed(chunk):
                    if isinstance(line, tuple):
                        request_id = _response_id(*line)
                        if request_id is None:
                            continue  # not an answer to anyone: skipped
                        await read_in.send(_too_large(request_id, max_message_bytes))
                    else:
                        await read_in.send(_readable(line, screen))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass
        await ended()

    async def ended() -> None:
        """The connection is over (output ended, or input can no longer be written): learn how
        the process ended (and its last words) before the session hears of it, so that the
        calls it fails can say why."""
        with anyio.CancelScope(shield=True):
            if await _wait_exit(process, EXIT_GRACE):
                with anyio.move_on_after(0.5):
                    await stderr_done.wait()
        record.returncode = process.returncode
        record.ended_alone = not record.stopping
        on_exit()
        await read_in.aclose()

    async def read_stderr() -> None:
        assert process.stderr is not None
        try:
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                async for chunk in process.stderr:
                    record.feed(chunk)
        finally:
            stderr_done.set()

    async def write_stdin() -> None:
        assert process.stdin is not None
        try:
            async with write_out:
                async for message in write_out:
                    if screen is not None:
                        screen.sent(message.message)
                    text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send(text.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await ended()  # the session sees the connection end, not a silent hang

    async with anyio.create_task_group() as group:
        group.start_soon(read_stdout)
        group.start_soon(read_stderr)
        group.start_soon(write_stdin)
        try:
            yield read_out, write_in
        finally:
            record.stopping = True
            with anyio.CancelScope(shield=True):
                await _stop(process)
                record.returncode = process.returncode
                for stream in (read_out, write_in, read_in, write_out):
                    await stream.aclose()
            group.cancel_scope.cancel()


async def _wait_exit(process: Process, seconds: float) -> bool:
    """Whether the process ended within ``seconds`` (polled: ``wait()`` also waits for pipes
    a grandchild may hold open)."""
    with anyio.move_on_after(seconds):
        while process.returncode is None:  # noqa: ASYNC110 - nothing signals the reaping
            await anyio.sleep(0.02)
    return process.returncode is not None


async def _stop(process: Process) -> None:
    """Close stdin, then SIGTERM the process group, then SIGKILL it; each after a grace."""
    if process.stdin is not None:
        with contextlib.suppress(Exception):
            await process.stdin.aclose()
    if await _wait_exit(process, EXIT_GRACE):
        _signal_group(process.pid, signal.SIGTERM)  # the server's own children, if any
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        _signal_group(process.pid, sig)
        if await _wait_exit(process, EXIT_GRACE):
            break
    if sig == signal.SIGTERM:
        _signal_group(process.pid, signal.SIGKILL)  # children that outlived their parent


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        os.killpg(pid, sig)
