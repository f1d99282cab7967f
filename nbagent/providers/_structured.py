"""Tool calls through structured output, for servers whose model has no native tool calling.

Some models (small local ones, whose chat template has no tools) make a server drop ``tools``
silently. Their servers can still constrain what the model writes to a JSON Schema
(llama.cpp's grammar, vLLM's guided decoding, Ollama's ``format``). In this mode the request
carries no ``tools``: it asks, through ``response_format: {"type": "json_schema"}``, for one
JSON object that is either a call or a reply::

    {"tool": "weather", "arguments": {"city": "Paris"}}     one branch per tool: the name is
                                                             fixed, the arguments are its schema
    {"reply": "It is sunny."}                                the plain answer (unless a call
                                                             is required)

and a system message tells the model which tools there are. The history goes back as plain
messages: an assistant turn's call as that same JSON object, the tool results as one user
message (``Result of weather: …``), since such a template has no tool roles either.

The answer is read as it streams (:class:`StructuredParser`): ``tool`` starts a call
(:class:`~nbagent.generation.ToolInputStart`), the raw text of ``arguments`` streams as
:class:`~nbagent.generation.ToolInputDelta` fragments, and ``reply`` streams as text, so a
front end shows the same thing as for a native call. The call is handed on
(:class:`~nbagent.generation.ToolCallReceived`) only when the response ends, and the loop then
validates it against the tool's schema and asks for approval like any other call: a
constraint the server ignored, or a model that chose the wrong tool, is caught there. A call
the response ended in the middle of (max tokens, a stop sequence) is never run: its arguments
are marked ``(not run: …)``. A response that is not such an object (a server that ignored
``response_format``) is passed on as text.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

from ..errors import ConfigurationError
from ..generation import (
    Finish,
    NamedToolChoice,
    Request,
    StreamEvent,
    TextDelta,
    ToolCallReceived,
    ToolInputDelta,
    ToolInputEnd,
    ToolInputStart,
)
from ..schema import normalize_schema
from ..tools import Definition, ToolCall
from ._http import StreamParser
from ._shared import description_with_examples, input_object

__all__ = [
    "INCOMPLETE_CALL",
    "TOOL_CALL_MODES",
    "ToolCallMode",
    "StructuredParser",
    "structured_body",
    "tool_union_schema",
]

#: How an adapter asks for tool calls: the API's own ``tools``, or structured output.
ToolCallMode = Literal["native", "structured"]
TOOL_CALL_MODES: tuple[ToolCallMode, ...] = ("native", "structured")

#: Put before the arguments of a call the response ended in the middle of: not JSON, so the
#: loop never runs it, and the model reads why.
INCOMPLETE_CALL = "(not run: the answer ended before this call's arguments were complete) "

_NAME_KEYS = ("tool", "name")
_ARGS_KEY = "arguments"
_REPLY_KEY = "reply"


# --- the request -------------------------------------------------------------------------------


def _rebase_refs(schema: Any, base: str) -> Any:
    """``schema`` with every same-document ``$ref``/``$dynamicRef`` pointing below ``base``.

    A tool's schema is nested inside the union, so its ``#/$defs/X`` must become
    ``#/<where it now is>/$defs/X`` to keep meaning what it meant.
    """
    if isinstance(schema, Mapping):
        out: dict[str, Any] = {}
        for key, value in schema.items():
            if key in ("$ref", "$dynamicRef") and isinstance(value, str) and value.startswith("#"):
                out[key] = base + value[1:]
            elif key == "$schema":
                continue  # only allowed at the root
            else:
                out[key] = _rebase_refs(value, base)
        return out
    if isinstance(schema, list):
        return [_rebase_refs(item, base) for item in schema]
    return schema


def _call_branch(definition: Definition, pointer: str) -> dict[str, Any]:
    arguments = normalize_schema(definition.input_schema)
    return {
        "type": "object",
        "properties": {
            "tool": {"const": definition.name},
            _ARGS_KEY: _rebase_refs(arguments, pointer + "/properties/" + _ARGS_KEY),
        },
        "required": ["tool", _ARGS_KEY],
        "additionalProperties": False,
    }


_REPLY_BRANCH: dict[str, Any] = {
    "type": "object",
    "properties": {_REPLY_KEY: {"type": "string"}},
    "required": [_REPLY_KEY],
    "additionalProperties": False,
}


def _offered(request: Request) -> tuple[list[Definition], bool]:
    """The tools the model may call in this request, and whether it may reply instead."""
    choice = request.options.tool_choice
    tools = [d for d in request.tools if not d.provider_executed]
    executed = [d.name for d in request.tools if d.provider_executed]
    if executed:
        raise ConfigurationError(
            f"tool {executed[0]!r} is run by the provider, which a structured-output tool "
            "call cannot ask for: leave it out, or use tool_calls='native'"
        )
    if choice == "none" or not tools:
        return [], True
    if isinstance(choice, NamedToolChoice):
        named = [d for d in tools if d.name == choice.name]
        if not named:
            raise ConfigurationError(f"tool_choice names {choice.name!r}, which is not offered")
        return named, False
    return tools, choice != "required"


def tool_union_schema(tools: Sequence[Definition], *, reply: bool) -> dict[str, Any]:
    """The JSON Schema of one answer: a call of one of ``tools``, or (``reply``) a reply."""
    if len(tools) == 1 and not reply:
        return _call_branch(tools[0], "#")
    branches = [_call_branch(d, f"#/oneOf/{i}") for i, d in enumerate(tools)]
    if reply:
        branches.append(_REPLY_BRANCH)
    return {"oneOf": branches}


def _tools_prompt(tools: Sequence[Definition], reply: bool) -> str:
    lines = [
        "You can call tools. Answer with one JSON object: "
        '{"tool": "<tool name>", "arguments": {...}} to call a tool'
        + (', or {"reply": "<your answer>"} to answer the user directly.' if reply else "."),
        "Call a tool when the user asks for something a tool does; after a tool's result, "
        "use it in your reply.",
        "Tools:",
    ]
    for definition in tools:
        schema = normalize_schema(definition.input_schema)
        description = description_with_examples(definition).strip() or "(no description)"
        lines.append(
            f"- {definition.name}: {description} Arguments (JSON Schema): "
            + json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
        )
    return "\n".join(lines)


def _plain_history(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat messages without tool roles: calls as the JSON the model writes, results as text."""
    names: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for item in messages:
        role = item.get("role")
        if role == "assistant" and item.get("tool_calls"):
            lines = [item["content"]] if item.get("content") else []
            for call in item["tool_calls"]:
                function = call.get("function", {})
                names[call.get("id", "")] = function.get("name", "")
                lines.append(
                    json.dumps(
                        {
                            "tool": function.get("name", ""),
                            _ARGS_KEY: input_object(function.get("arguments", "")),
                        },
                        ensure_ascii=False,
                    )
                )
            out.append({"role": "assistant", "content": "\n".join(lines)})
        elif role == "assistant":
            out.append({"role": "assistant", "content": item.get("content") or ""})
        elif role == "tool":
            name = names.get(item.get("tool_call_id", ""), "") or "the tool"
            out.append({"role": "user", "content": f"Result of {name}: {item.get('content', '')}"})
        else:
            out.append(dict(item))
    return _merge_users(out)


def _merge_users(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive user messages as one (many templates want roles to alternate)."""
    out: list[dict[str, Any]] = []
    for item in messages:
        last = out[-1] if out else None
        if last is None or item["role"] != "user" or last["role"] != "user":
            out.append(item)
            continue
        a, b = last["content"], item["content"]
        if isinstance(a, str) and isinstance(b, str):
            last["content"] = f"{a}\n\n{b}"
        else:
            parts = [{"type": "text", "text": a}] if isinstance(a, str) else list(a)
            parts += [{"type": "text", "text": b}] if isinstance(b, str) else list(b)
            last["content"] = parts
    return out


def structured_body(body: dict[str, Any], request: Request) -> dict[str, Any]:
    """A Chat Completions ``body`` rewritten for structured tool calls (see the module docs)."""
    tools, reply = _offered(request)
    native = ("tools", "tool_choice", "parallel_tool_calls")
    out = {k: v for k, v in body.items() if k not in native}
    messages = _plain_history(list(body.get("messages", ())))
    if tools:
        if "response_format" in out:
            raise ConfigurationError(
                "Options.extra sets response_format, which structured tool calls use for the "
                "calls themselves: remove it, or offer no tools in this request"
            )
        prompt = _tools_prompt(tools, reply)
        if messages and messages[0].get("role") == "system":
            messages[0] = {"role": "system", "content": f"{prompt}\n\n{messages[0]['content']}"}
        else:
            messages.insert(0, {"role": "system", "content": prompt})
        out["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": "tool_call_or_reply" if reply else "tool_call",
                "schema": tool_union_schema(tools, reply=reply),
                "strict": True,
            },
        }
    out["messages"] = messages
    return out


# --- the answer --------------------------------------------------------------------------------


class _String:
    """Decodes a JSON string's body as it arrives (escapes may be split across chunks)."""

    __slots__ = ("_escape", "_high", "done")

    def __init__(self) -> None:
        self._escape = ""  # an escape sequence begun, not yet complete
        self._high = ""  # a \\uD8xx waiting for its low surrogate
        self.done = False

    def feed(self, char: str) -> str:
        """Decoded text for ``char`` ("" while an escape is incomplete); sets ``done``."""
        if self._escape:
            self._escape += char
            if self._escape[1] == "u" and len(self._escape) < 6:
                return ""
            escape, self._escape = self._escape, ""
            try:
                text = json.loads(f'"{self._high}{escape}"')
            except ValueError:
                text = "\ufffd"
            self._high = ""
            if len(text) == 1 and "\ud800" <= text <= "\udbff":
                self._high = escape
                return ""
            return str(text)
        if char == "\\":
            self._escape = char
            return ""
        pending = "\ufffd" if self._high else ""
        self._high = ""
        if char == '"':
            self.done = True
            return pending
        return pending + char


class _Value:
    """Finds where a raw JSON value ends, one character at a time."""

    __slots__ = ("_depth", "_escape", "_in_string", "_scalar", "done")

    def __init__(self) -> None:
        self._depth = 0
        self._in_string = False
        self._escape = False
        self._scalar = False
        self.done = False

    def feed(self, char: str) -> bool:
        """True if ``char`` belongs to the value (a scalar ends at the character after it)."""
        if self._in_string:
            if self._escape:
                self._escape = False
            elif char == "\\":
                self._escape = True
            elif char == '"':
                self._in_string = False
                self.done = self._depth == 0
            return True
        if self._scalar:
            if char in ",}] \t\r\n":
                self.done = True
                return False
            return True
        if char == '"':
            self._in_string = True
        elif char in "{[":
            self._depth += 1
        elif char in "}]":
            self._depth -= 1
            self.done = self._depth <= 0
        elif not char.isspace() and self._depth == 0:
            self._scalar = True
        return True


class StructuredParser:
    """Reads a structured answer (see the module docs) from another parser's text.

    Wraps the Chat Completions parser: its text deltas are the JSON object, which becomes a
    call (start, argument deltas, end, the call) or reply text; every other event passes on.
    """

    __slots__ = (
        "_args",
        "_args_done",
        "_call_id",
        "_delta_at",
        "_inner",
        "_key",
        "_name",
        "_name_done",
        "_raw",
        "_reply_started",
        "_state",
        "_string",
        "_value",
        "out",
    )

    def __init__(self, inner: StreamParser) -> None:
        self.out: list[StreamEvent] = []
        self._inner = inner
        self._raw: list[str] = []  # the whole answer text, for a fallback to plain text
        self._state = "start"
        self._key: list[str] = []
        self._string: _String | None = None
        self._value: _Value | None = None
        self._name: list[str] = []
        self._name_done = False
        self._args: list[str] = []
        self._args_done = False
        self._call_id = ""
        self._reply_started = False
        self._delta_at: int | None = None  # where this piece's argument delta is in out

    # --- StreamParser --------------------------------------------------------------------------

    def event(self, name: bytes, data: bytes) -> bool:
        try:
            return self._inner.event(name, data)
        finally:
            self._take()

    def finished(self) -> bool:
        return self._inner.finished()

    def end(self) -> None:
        try:
            self._inner.end()
        finally:
            self._take()

    # --- reading ---------------------------------------------------------------------------

    def _take(self) -> None:
        inner = self._inner.out
        if not inner:
            return
        events = list(inner)
        inner.clear()
        for event in events:
            if isinstance(event, TextDelta):
                self._text(event.text)
            elif isinstance(event, Finish):
                self._finish(event)
            else:
                self.out.append(event)

    def _text(self, text: str) -> None:
        if self._state == "text":
            self.out.append(TextDelta(text))
            return
        self._raw.append(text)
        self._delta_at = None
        for char in text:
            self._char(char)
        self._delta_at = None
        if self._state == "text":  # not an object: everything so far was plain text
            self.out.append(TextDelta("".join(self._raw)))
            self._raw.clear()

    def _char(self, char: str) -> None:
        state = self._state
        if state == "start":
            if char == "{":
                self._state = "key?"
            elif not char.isspace():
                self._state = "text"
        elif state == "key?":
            if char == '"':
                self._state, self._string, self._key = "key", _String(), []
            elif char == "}":
                self._state = "done"
        elif state == "key":
            assert self._string is not None
            self._key.append(self._string.feed(char))
            if self._string.done:
                self._state = ":"
        elif state == ":":
            if char == ":":
                self._state = "value?"
        elif state == "value?":
            if not char.isspace():
                self._begin_value(char)
        elif state == "name":
            assert self._string is not None
            self._name.append(self._string.feed(char))
            if self._string.done:
                self._name_done = True
                self._state = "key?"
                self._start_call()
        elif state == "reply":
            assert self._string is not None
            piece = self._string.feed(char)
            if piece:
                self.out.append(TextDelta(piece))
            if self._string.done:
                self._state = "key?"
        elif state in ("args", "skip"):
            assert self._value is not None
            inside = self._value.feed(char)
            if inside and state == "args":
                self._argument(char)
            if self._value.done:
                self._args_done = self._args_done or state == "args"
                self._state = "key?"
                if not inside:  # the character after a number, true, false or null
                    self._char(char)

    def _begin_value(self, char: str) -> None:
        key = "".join(self._key)
        if key in _NAME_KEYS and char == '"' and not self._name_done and not self._name:
            self._state, self._string = "name", _String()
        elif key == _REPLY_KEY and char == '"':
            self._state, self._string = "reply", _String()
            self._reply_started = True
        else:
            self._state = "args" if key == _ARGS_KEY and not self._args else "skip"
            self._value = _Value()
            self._char(char)

    def _argument(self, char: str) -> None:
        self._args.append(char)
        if not self._call_id:
            return  # arguments before the name: sent on when the call starts
        if self._delta_at is not None:  # one delta per streamed piece, as a native call has
            last = self.out[self._delta_at]
            assert isinstance(last, ToolInputDelta)
            self.out[self._delta_at] = ToolInputDelta(self._call_id, last.delta + char)
        else:
            self._delta_at = len(self.out)
            self.out.append(ToolInputDelta(self._call_id, char))

    def _start_call(self) -> None:
        self._call_id = f"call_{uuid.uuid4().hex[:24]}"
        self.out.append(ToolInputStart(self._call_id, "".join(self._name)))
        if self._args:  # arguments that came before the name
            self.out.append(ToolInputDelta(self._call_id, "".join(self._args)))

    def _finish(self, finish: Finish) -> None:
        complete = self._state == "done" or (self._state == "start" and not self._raw)
        if self._call_id:
            arguments = "".join(self._args) if self._args else "{}"
            if not (complete and (self._args_done or not self._args)):
                arguments = INCOMPLETE_CALL + arguments
            self.out.append(ToolInputEnd(self._call_id))
            self.out.append(
                ToolCallReceived(ToolCall(self._call_id, "".join(self._name), arguments))
            )
            if finish.reason == "stop":
                finish = replace(finish, reason="tool_calls")
        elif not self._reply_started and self._raw and self._state != "text":
            # an object that is neither a call nor a reply: pass it on as it was written
            self.out.append(TextDelta("".join(self._raw)))
        self._raw.clear()
        self.out.append(finish)
