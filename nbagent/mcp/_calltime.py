"""How long one MCP tool call may take: a bound on silence that each progress notification
starts again, and a bound on the whole call.

The SDK's request timeout (``read_timeout_seconds``) is not moved by progress, so a call that
waits for a person (a served notebook sends "waiting" every few seconds) was cancelled at the
timeout however alive the server said it was. :class:`CallTime` is an anyio cancel scope whose
deadline :meth:`heard` moves on: ``MCPLimits.call_timeout`` after the latest word from the
server, never past ``MCPLimits.max_call_timeout`` after the start (the TypeScript SDK's
``resetTimeoutOnProgress`` with ``maxTotalTimeout``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._limits import MCPLimits
from ._reasons import short

if TYPE_CHECKING:
    from mcp.shared.dispatcher import ProgressFnT

    from ..tools import ToolContext

__all__ = ["CallTime"]


class CallTime:
    """One call's time bounds: enter :attr:`scope` around the call, call :meth:`heard` on each
    progress notification, and read :meth:`overran` when the scope was cancelled."""

    def __init__(self, limits: MCPLimits) -> None:
        import anyio

        self.limits = limits
        now = anyio.current_time()
        self.latest = now + limits.max_call_timeout
        self.scope: Any = anyio.CancelScope(deadline=min(now + limits.call_timeout, self.latest))

    def heard(self) -> None:
        """The server said something of this call: its silence counts from now."""
        import anyio

        self.scope.deadline = min(anyio.current_time() + self.limits.call_timeout, self.latest)

    def progress_to(self, context: ToolContext) -> ProgressFnT:
        """The SDK's progress callback for the call: the call's card hears it (its message,
        else how far it is), and the call's silence counts from then."""

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            self.heard()
            if message:
                context.update(short(message, 500))
            elif total:
                context.update(max(0.0, min(1.0, progress / total)))

        return progress

    @property
    def ran_out(self) -> bool:
        """Whether the call was cancelled by one of its bounds."""
        return bool(self.scope.cancelled_caught)

    def overran(self, label: str) -> str:
        """What a call cancelled by its bounds answers: which bound it was."""
        import anyio

        limits = self.limits
        if anyio.current_time() >= self.latest - 0.05:
            return (
                f"{label} was still working after {limits.max_call_timeout:g} s, the most one "
                "call may take; it was cancelled (MCPLimits.max_call_timeout)"
            )
        return (
            f"{label} did not answer within {limits.call_timeout:g} s and sent no progress "
            "meanwhile; the call was cancelled (MCPLimits.call_timeout)"
        )
