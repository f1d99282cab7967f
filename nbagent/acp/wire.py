"""The agent's stdio as JSON-RPC messages, bounded: one line is one message, of at most
``max_message_bytes``; what is not JSON-RPC counts as malformed, and an agent that sends more
than ``max_malformed`` such lines is stopped as broken.

The SDK's own framing keeps reading a line however long it is (a 100 MB update is held whole)
and logs every bad line to the root logger, which in a kernel prints into the cell. This
transport is handed to the SDK's connection instead (it takes any ``acp`` transport).
``session/update`` notifications are validated and handed on here, in the order they came,
rather than one task each: a flood of them costs one validation each and nothing else.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..limits import ExternalAgentLimits

if TYPE_CHECKING:
    from acp.schema import SessionNotification

__all__ = ["BoundedWire", "StderrTail"]


class StderrTail:
    """The last ``size`` bytes an agent wrote to stderr (read all along, so that a chatty agent
    never blocks on a full pipe), to explain a failure."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._data = bytearray()

    def feed(self, chunk: bytes) -> None:
        self._data += chunk
        if len(self._data) > self.size:
            del self._data[: len(self._data) - self.size]

    async def drain(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            self.feed(chunk)

    def text(self) -> str:
        """The tail's last lines, as one line of text ("" when it wrote nothing)."""
        lines = self._data.decode("utf-8", "replace").strip().splitlines()
        return " | ".join(line.strip() for line in lines[-6:] if line.strip())


class BoundedWire:
    """An ``acp`` transport over the agent's stdout and stdin (see the module's docstring).

    ``on_update(notification)`` gets each valid ``session/update`` (on the connection's loop);
    ``on_broken(reason)`` once, when the agent broke the protocol past its bounds (the wire
    then reads as closed: the SDK's pending requests fail).
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        limits: ExternalAgentLimits,
        on_update: Callable[[SessionNotification], None],
        on_broken: Callable[[str], None],
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._limits = limits
        self._on_update = on_update
        self._on_broken = on_broken
        self.malformed = 0
        self.last_problem = ""
        self.broken = False
        self._lock = asyncio.Lock()

    async def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n"
        async with self._lock:  # one message a line, never two interleaved
            self._writer.write(data.encode("utf-8", "surrogatepass"))
            await self._writer.drain()

    async def close(self) -> None:
        try:
            self._writer.close()
        except (OSError, RuntimeError):  # the agent is gone already
            pass

    async def receive(self) -> dict[str, Any] | None:
        from acp.schema import SessionNotification
        from pydantic import ValidationError

        while not self.broken:
            line = await self._line()
            if line is None:
                return None
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except (ValueError, RecursionError):
                self._malformed("a line that is not JSON")
                continue
            if not isinstance(message, dict) or not (
                isinstance(message.get("method"), str) or "id" in message
            ):
                self._malformed("a JSON value that is no JSON-RPC message")
                continue
            if message.get("method") == "session/update" and "id" not in message:
                try:
                    update = SessionNotification.model_validate(message.get("params"))
                except ValidationError as exc:
                    self._malformed(f"a session/update ACP does not define ({_first(exc)})")
                    continue
                self._on_update(update)
                continue
            return message
        return None

    def _malformed(self, what: str) -> None:
        self.malformed += 1
        self.last_problem = what
        if self.malformed > self._limits.max_malformed and not self.broken:
            self.broken = True
            self._on_broken(
                f"it sent {self.malformed} malformed messages (the last: {what}); at most "
                f"{self._limits.max_malformed} are let go"
            )

    async def _line(self) -> bytes | None:
        """The next line (None at the end of the stream); a line longer than the limit is
        skipped as it arrives, never held."""
        try:
            return await self._reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:  # the last line, with no newline
            return exc.partial or None
        except asyncio.LimitOverrunError as exc:
            await self._reader.readexactly(exc.consumed)
        except (ConnectionError, OSError):
            return None
        while True:  # inside a line that is too long: drop what comes until its end
            try:
                await self._reader.readuntil(b"\n")
                break
            except asyncio.IncompleteReadError:
                return None
            except asyncio.LimitOverrunError as exc:
                await self._reader.readexactly(exc.consumed)
        self._malformed(f"a message of more than {self._limits.max_message_bytes} bytes")
        return b""


def _first(error: Any) -> str:
    try:
        problem = error.errors()[0]
        where = ".".join(str(p) for p in problem.get("loc", ()))
        return f"{where}: {problem.get('msg', '')}"[:200]
    except (IndexError, AttributeError, TypeError):
        return "invalid"
