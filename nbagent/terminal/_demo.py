"""The tools the terminal offers when no ``--tools`` is given: enough to try every part of it."""

from __future__ import annotations

from ..tools import Tool, ToolContext, tool

__all__ = ["demo_tools"]


def demo_tools() -> list[Tool]:
    """Three small tools: one safe, one that asks first, one slow that reports progress."""

    @tool
    def add(a: float, b: float) -> str:
        """Add two numbers.

        Args:
            a: The first number.
            b: The second number.
        """
        return f"{a} + {b} = {a + b}"

    @tool(needs_approval=True)
    def delete_file(path: str) -> str:
        """Pretend to delete a file (nothing is deleted).

        Args:
            path: The file to delete.
        """
        return f"(pretend) deleted {path}"

    @tool
    async def countdown(seconds: int, context: ToolContext) -> str:
        """Count down, reporting progress each second (try Ctrl-C while it runs).

        Args:
            seconds: How long to count, 1 to 60.
        """
        import asyncio

        total = max(1, min(int(seconds), 60))
        for left in range(total, 0, -1):
            context.update(f"{left} s left")
            await asyncio.sleep(1)
        return f"counted down from {total}"

    return [add, delete_file, countdown]
