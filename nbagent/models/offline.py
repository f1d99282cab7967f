"""OfflineModel: the default when no provider is configured. It is not an LLM and says so.

It calls the tools the prompt names (by name, by the short name after an MCP server's
``server__`` prefix, or by title; a short name or title only when one tool has it), with
arguments built from each tool's schema and the values quoted in the prompt, then answers from
their results. Enough to show the
whole loop — streaming, cards, approvals, results — with no key and no network. Given the
notebook tools, it reads the notebook, fixes a name Python suggests a correction for, explains
a cell from its syntax, adds a quoted cell (see :mod:`._notebook`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

from ..generation import Request, StreamEvent
from ..messages import AssistantMessage, ToolMessage, UserMessage
from ..schema import normalize_schema
from ._examples import PromptValues, example_for
from ._notebook import NOTEBOOK_TOOLS, notebook_turn
from .scripted import Call, Text, Turn, play_turn

__all__ = ["OFFLINE_LABEL", "OfflineModel"]

OFFLINE_LABEL = "[offline model]"


class OfflineModel:
    """A deterministic stand-in for an LLM, labelled as offline in every answer."""

    def __init__(self, *, chunk_delay: float = 0.0, model: str = "offline") -> None:
        self.model = model
        self.chunk_delay = chunk_delay
        self.requests: list[Request] = []

    def __repr__(self) -> str:
        return "OfflineModel()  # no LLM: calls the tools your prompt names"

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        async for event in play_turn(self.decide(request), chunk_delay=self.chunk_delay):
            yield event

    def decide(self, request: Request) -> Turn:
        """The turn this model plays for ``request``."""
        messages = list(request.messages)
        last_user = max(
            (i for i, m in enumerate(messages) if isinstance(m, UserMessage)), default=-1
        )
        since_user = messages[last_user + 1 :]
        prompt = messages[last_user].text if last_user >= 0 else ""  # type: ignore[union-attr]
        if request.options.tool_choice != "none":
            named = {t.name for t in _named_in(prompt, list(request.tools))}
            if not named - set(NOTEBOOK_TOOLS):  # the notebook tools: see ._notebook
                planned = notebook_turn(prompt, since_user, request.tools)
                if planned is not None:
                    return planned
        if any(isinstance(m, ToolMessage) for m in since_user):
            return self._summarize(since_user)
        choice = request.options.tool_choice
        tools = list(request.tools)
        if choice == "none":
            tools = []
        chosen = _named_in(prompt, tools)
        forced = getattr(choice, "name", None)
        if forced:
            chosen = [t for t in tools if t.name == forced]
        elif choice == "required" and not chosen and tools:
            chosen = tools[:1]
        if not chosen:
            return Turn(Text(self._no_tool_text(prompt, tools), chunks=_words(prompt)))
        calls = []
        for definition in chosen:
            values = PromptValues.parse(prompt)
            schema = normalize_schema(definition.input_schema)
            args = example_for(schema, values)
            calls.append(Call(definition.name, args, chunks=3))
        names = ", ".join(c.name for c in calls)
        intro = f"{OFFLINE_LABEL} Calling {names} with arguments taken from your prompt."
        return Turn(Text(intro, chunks=4), *calls)

    def _summarize(self, since_user: list[Any]) -> Turn:
        calls = {
            c.id: c for m in since_user if isinstance(m, AssistantMessage) for c in m.tool_calls
        }
        lines = [f"{OFFLINE_LABEL} Here is what the tools returned:"]
        for message in since_user:
            if not isinstance(message, ToolMessage):
                continue
            for result in message.results:
                call = calls.get(result.call_id)
                args = call.arguments if call else "{}"
                text = result.text.strip() or "(an image or no text)"
                if len(text) > 600:
                    text = text[:600] + " …"
                verb = "failed" if result.is_error else "returned"
                lines.append(f"- `{result.name}({_short(args)})` {verb}: {text}")
        lines.append("(This is the offline stand-in, not an LLM: set a model to get real answers.)")
        text = "\n".join(lines)
        return Turn(Text(text, chunks=max(1, len(text) // 12)))

    @staticmethod
    def _no_tool_text(prompt: str, tools: list[Any]) -> str:
        names = ", ".join(t.name for t in tools) or "none registered"
        return (
            f"{OFFLINE_LABEL} I am the offline stand-in, not an LLM, so I cannot answer "
            f"free-form questions. Name a tool in your prompt (available: {names}) and I will "
            "call it with arguments from your prompt (quote string values). To use a real "
            "model, pass -m openai:gpt-4.1-mini (or set NBAGENT_MODEL) and an API key."
        )


def _named_in(prompt: str, tools: list[Any]) -> list[Any]:
    """The tools ``prompt`` names: by name, or by a short name or title no other tool shares
    (``Echo`` names ``everything__echo`` unless another server has an ``echo`` too, or a
    tool of that very name exists)."""
    lowered = prompt.lower()
    full = Counter(t.name.lower() for t in tools)
    short = Counter(_short_name(t.name) for t in tools if _short_name(t.name))
    titles = Counter(t.title.lower() for t in tools if t.title)
    chosen = []
    for tool in tools:
        candidates = _spellings(tool.name.lower())
        name = _short_name(tool.name)
        if name and short[name] == 1 and full[name] == 0:
            candidates |= _spellings(name)
        if tool.title and titles[tool.title.lower()] == 1:
            candidates.add(tool.title.lower())
        if any(re.search(rf"(?<!\w){re.escape(c)}(?!\w)", lowered) for c in candidates if c):
            chosen.append(tool)
    return chosen


def _short_name(name: str) -> str:
    """The tool's own name after an MCP server's ``server__`` prefix ("" when it has none)."""
    _, sep, rest = name.partition("__")
    return rest.lower() if sep and rest else ""


def _spellings(name: str) -> set[str]:
    return {name, name.replace("_", " "), name.replace("-", " ")}


def _short(arguments: str) -> str:
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return arguments[:80]
    if isinstance(value, dict):
        return ", ".join(f"{k}={json.dumps(v)[:40]}" for k, v in value.items())
    return arguments[:80]


def _words(text: str) -> int:
    return max(4, len(text.split()))
