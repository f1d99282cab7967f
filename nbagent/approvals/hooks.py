"""Before-tool and after-tool hooks: code of yours that sees every call the agent runs.

A **before** hook is called with the call and its (validated) arguments before anyone is asked
to approve it. It returns None to leave the call alone, new arguments to run instead (they are
checked against the tool's schema like a person's edit, the person approves what will really
run, and the model reads that they changed), or :func:`veto` to refuse the call with a reason
the model reads. An **after** hook is called with the call, the arguments it ran with and its
result; it returns None, or what the *model* reads instead (anything a tool may return). The
person still sees the tool's own result, and what the model read.

Hooks may be sync (run on a thread of their own) or async, and each gets
``Agent.hook_timeout`` seconds. A hook that raises or hangs never lets its call through: a
before hook that fails refuses the call, an after hook that fails withholds the result from the
model (the person still sees it). Both say why.

::

    agent = Agent(model, tools)

    @agent.before_tool
    def stay_in_data(call, arguments):
        if not arguments.get("path", "").startswith("data/"):
            return {**arguments, "path": "data/" + arguments["path"].lstrip("/")}
        return None

    @agent.after_tool
    def hide_emails(call, arguments, result):
        return EMAIL.sub("[email]", result.text)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Union

from ..content import ToolResult
from ..tools import ToolCall

__all__ = ["AfterToolHook", "BeforeToolHook", "Veto", "veto"]


@dataclass(frozen=True)
class Veto:
    """A before hook's refusal; ``reason`` reaches the model."""

    reason: str


def veto(reason: str) -> Veto:
    """Refuse this call (return it from a before-tool hook); the model reads ``reason``."""
    return Veto(str(reason))


BeforeResult = Union[None, Mapping[str, Any], Veto]
#: ``hook(call, arguments)`` → None, new arguments, or :func:`veto` (or an awaitable of one).
BeforeToolHook = Callable[[ToolCall, dict[str, Any]], Union[BeforeResult, Awaitable[BeforeResult]]]
#: ``hook(call, arguments, result)`` → None, or what the model reads instead (or an awaitable).
AfterToolHook = Callable[[ToolCall, dict[str, Any], ToolResult], Any]
