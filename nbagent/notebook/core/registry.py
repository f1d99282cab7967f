"""How things become the session's tools: a Tool, a plain function, or a Definition with the
function that runs it (:func:`as_tool`), which of them a cell defined, and how a registration's
problems are shown."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import fields
from typing import Any, Protocol

from ...redact import redact_secrets
from ...tools import Definition, Tool, ToolContext, tool


class Registers(Protocol):
    """What the toolkit rules need of the session: its tools by name, and registering more
    (a Protocol: the session imports this module)."""

    @property
    def tools(self) -> Mapping[str, Tool]: ...

    def register(self, *items: Any, function: Callable[..., Any] | None = None) -> list[Tool]: ...


__all__ = ["as_tool", "defined_in_notebook", "offered", "show_problems", "withheld"]


def show_problems(messages: Iterable[str]) -> None:
    """Registration problems (a tool a provider cannot take, a scan that failed), shown in the
    cell that caused them, credential-shaped text hidden."""
    for message in messages:
        print(f"nbagent: {redact_secrets(message)}", file=sys.stderr)


def as_tool(item: Any, function: Callable[..., Any] | None = None) -> Tool:
    """A Tool from a Tool, a plain function, or a Definition plus the function that runs it."""
    if isinstance(item, Tool):
        if function is not None:
            raise TypeError("function= goes with a Definition, not with a Tool")
        return item
    if isinstance(item, Definition):
        if function is None:
            raise TypeError(f"Definition {item.name!r} needs function= to run it")
        fn = function
        values = {f.name: getattr(item, f.name) for f in fields(Definition)}
        if inspect.iscoroutinefunction(fn):

            async def execute_async(context: ToolContext) -> Any:
                return await fn(**dict(context.input))

            return Tool(**values, execute=execute_async, function=fn)

        def execute(context: ToolContext) -> Any:
            return fn(**dict(context.input))

        return Tool(**values, execute=execute, function=fn)
    if callable(item):
        if function is not None:
            raise TypeError("function= goes with a Definition")
        return tool(item)
    raise TypeError(
        f"cannot register a {type(item).__name__}: pass a Tool (@nbagent.tool), a function, "
        "or a Definition with function="
    )


def defined_in_notebook(value: Tool) -> bool:
    """Whether a tool was defined in a cell (its function is ``__main__``'s), so the scan may
    drop it once its variable is gone."""
    if getattr(value, "__module__", None) == "__main__":
        return True
    for attr in ("function", "execute"):
        if getattr(getattr(value, attr, None), "__module__", None) == "__main__":
            return True
    return False


def offered(session: Registers, kit: Iterable[Tool], tools: list[str] | None) -> list[str] | None:
    """The tools of a run that opts in to a toolkit (``--kernel``, ``--notebook``): its tools
    registered in the session where they are not yet, and added to the run's own list (None:
    every registered tool, the kit's with them)."""
    kit = list(kit)
    missing = [t for t in kit if session.tools.get(t.name) is not t]
    if missing:
        session.register(*missing)
    if tools is None:
        return None
    return [*tools, *(t.name for t in kit if t.name not in tools)]


def withheld(
    session: Registers, made: Iterable[Tool] | None, tools: list[str] | None
) -> list[str] | None:
    """The tools of a run that does not opt in to a toolkit made earlier: every tool it would
    have but the kit's (a person's own tool of the same name stays)."""
    names = {t.name for t in made if session.tools.get(t.name) is t} if made is not None else set()
    if not names:
        return tools
    chosen = tools if tools is not None else list(session.tools)
    return [name for name in chosen if name not in names]
