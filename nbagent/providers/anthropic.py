"""Anthropic Messages, streamed.

How nbagent's conversation maps onto the API:

* ``Request.instructions`` → ``system``.
* A user message → ``text`` and ``image`` (base64) blocks; empty text is left out (the API
  rejects empty text blocks).
* An assistant message → its blocks in order: ``text``; reasoning sent back verbatim
  (``thinking`` with its ``signature``, or ``redacted_thinking``; reasoning without either, as
  other providers produce, and OpenAI Responses reasoning items are dropped); ``tool_use``
  with the arguments as an object (arguments that are not a JSON object become ``{}``);
  provider-executed calls as the block they came from (``server_tool_use``, ``mcp_tool_use``
  with its ``server_name`` …, with the final input), or as ``server_tool_use`` when that block
  is unknown; and provider tool results as the ``<name>_tool_result`` block they came from
  (``web_search_tool_result``, ``mcp_tool_result`` …).
* Tool results → one ``user`` message of ``tool_result`` blocks (text and image blocks,
  ``is_error``). Consecutive messages of the same role are merged into one turn, tool results
  first, as the API requires.
* Tools → ``name``, ``description``, ``input_schema``, ``input_examples`` (the API's own field),
  ``strict: true`` when asked; ``provider_options["anthropic"]`` is merged in (``cache_control``
  …). A provider-executed tool sends ``provider_options["tool"]`` verbatim (for example
  ``{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}``).
* ``tool_choice``: auto → ``{"type": "auto"}``, none → ``{"type": "none"}``, required →
  ``{"type": "any"}``, named → ``{"type": "tool", "name": ...}``;
  ``parallel_tool_calls=False`` → ``disable_parallel_tool_use``.

Streaming: ``message_start`` (input usage), ``content_block_start`` (text, tool_use,
server_tool_use, mcp_tool_use, thinking, redacted_thinking, ``*_tool_result``),
``content_block_delta`` (``text_delta``, ``input_json_delta``, ``thinking_delta``,
``signature_delta``), ``content_block_stop``, ``message_delta`` (stop reason, cumulative
usage), ``message_stop``, ``ping``; other event and block types are ignored. Empty ``data:``
lines are skipped.

How a response fails: an ``error`` event mid-stream is a ``StreamError``, retried when its type
is transient (``overloaded_error``, ``api_error``, ``rate_limit_error``, ``timeout_error``; see
:mod:`nbagent.providers._http`); a body that ends before ``message_stop`` and the stop reason is
a cut stream, also retried; ``message_stop`` without a stop reason is a final failure. A
second ``message_start`` after content (a gateway splicing a retried response into the stream)
is retried too: the two messages are never merged. A repeated one before any content is
harmless.

Text with invalid UTF-8 keeps going with U+FFFD in place of each bad byte. A ``tool_use`` whose
own input held invalid bytes is passed on with arguments that are not JSON (prefixed
``(not run: …)``): the loop answers it with an error the model reads and runs its clean
siblings. A field of an unexpected type ends the response with a clear ``StreamError``.

A provider-executed call (``server_tool_use``, ``mcp_tool_use``) becomes a ``ToolCall`` with
``provider_executed=True`` and its block in ``raw``; the loop never runs it. A provider tool
result becomes ``ProviderToolResult(call_id=tool_use_id, name=<block type without
"_tool_result">, content=<the block's content>)``; ``is_error`` is set from the block's
``is_error`` or when the content is an ``*_error`` object. Usage: ``input_tokens`` counts every
input token (uncached, cache reads and cache writes); the cache parts are also given separately.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import httpx2

from ..content import ImagePart, TextPart
from ..generation import (
    Finish,
    FinishReason,
    NamedToolChoice,
    ProviderToolResultReceived,
    ReasoningDelta,
    Request,
    StreamEvent,
    TextDelta,
    ToolCallReceived,
    ToolInputDelta,
    ToolInputEnd,
    ToolInputStart,
    Usage,
)
from ..messages import (
    AssistantMessage,
    Message,
    ProviderToolResult,
    ReasoningPart,
    ToolMessage,
    UserMessage,
)
from ..schema import normalize_schema
from ..tools import Definition, ToolCall
from ._answers import anthropic_output_config, native_problem
from ._failures import StreamFailure
from ._http import HTTPGenerator
from ._shared import (
    DAMAGED_ARGUMENTS,
    FOREIGN_REASONING_MARKS,
    b64,
    damaged,
    input_object,
    provider_tool_spec,
    retryable_error,
    text_of,
)
from ._sse import DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_RESPONSE_BYTES, loads

__all__ = ["AnthropicMessages"]

API_VERSION = "2023-06-01"
_RESULT_SUFFIX = "_tool_result"
#: Blocks of calls the provider runs itself (the loop never does).
_EXECUTED_CALLS = ("server_tool_use", "mcp_tool_use")

#: Events that carry part of the message (after them, a new message_start is a splice).
_CONTENT_EVENTS = frozenset(
    {"content_block_start", "content_block_delta", "content_block_stop", "message_delta"}
)

_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
    "pause_turn": "pause",
}


class AnthropicMessages(HTTPGenerator):
    """A Claude model behind the Messages API.

    ``max_tokens`` is the default output limit (the API requires one; ``Options.max_tokens``
    overrides it). ``betas`` are sent as the ``anthropic-beta`` header. See
    :class:`HTTPGenerator` for timeouts, retries, ``client``/``transport`` and ``aclose()``.
    """

    provider = "Anthropic"
    key_env = "ANTHROPIC_API_KEY"
    #: Which provider preflight rules apply to tools sent here (see ``_preflight``).
    tool_rules: ClassVar[str] = "anthropic"
    vendor: ClassVar[str] = "anthropic"
    default_base_url: ClassVar[str] = "https://api.anthropic.com"

    def __init__(
        self,
        model: str = "",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens: int = 8192,
        betas: Sequence[str] = (),
        client: httpx2.AsyncClient | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
        max_retries: int = 2,
        backoff_base: float = 0.5,
        backoff_cap: float = 8.0,
        retry_after_cap: float = 60.0,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            model,
            api_key=api_key,
            base_url=base_url,
            client=client,
            transport=transport,
            timeout=timeout,
            connect_timeout=connect_timeout,
            max_retries=max_retries,
            backoff_base=backoff_base,
            backoff_cap=backoff_cap,
            retry_after_cap=retry_after_cap,
            max_event_bytes=max_event_bytes,
            max_response_bytes=max_response_bytes,
            headers=headers,
        )
        self.max_tokens = max_tokens
        self.betas = tuple(betas)

    def _headers(self) -> dict[str, str]:
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            "anthropic-version": API_VERSION,
        }
        if self._key:
            headers["x-api-key"] = self._key.reveal()
        if self.betas:
            headers["anthropic-beta"] = ",".join(self.betas)
        headers.update(self.extra_headers)
        return headers

    def _prepare(self, request: Request) -> tuple[str, dict[str, Any], Callable[[], _EventParser]]:
        path = "/messages" if self.base_url.endswith("/v1") else "/v1/messages"
        return path, self.build_body(request), lambda: _EventParser(self.provider)

    def history_problem(self, request: Request) -> str | None:
        """Why Anthropic would refuse ``request``'s history though each message is valid (a
        fork onto this model, or a step switched to it), or None.

        With extended thinking on (``thinking`` in ``Options.extra``), the last assistant turn
        whose tool calls are being answered must begin with a thinking block signed by
        Anthropic: a history from another model (or from Anthropic without thinking) lacks it.
        """
        thinking = request.options.extra.get("thinking")
        if not isinstance(thinking, Mapping) or thinking.get("type") in (None, "disabled"):
            return None
        messages = anthropic_messages(request.messages)
        if len(messages) < 2 or messages[-1].get("role") != "user":
            return None
        answered = messages[-1].get("content")
        if not (
            isinstance(answered, list)
            and any(isinstance(b, Mapping) and b.get("type") == "tool_result" for b in answered)
        ):
            return None
        last = messages[-2]
        blocks = last.get("content") if last.get("role") == "assistant" else None
        first = blocks[0] if isinstance(blocks, list) and blocks else None
        if isinstance(first, Mapping) and first.get("type") in ("thinking", "redacted_thinking"):
            return None
        return (
            "with thinking on, Anthropic needs the assistant turn whose tool calls are being "
            "answered to begin with its own signed thinking, and this history's does not (it "
            "came from another model, or ran without thinking): fork at a step that begins with "
            "a prompt, or turn thinking off for it"
        )

    def native_answers(self, schema: Mapping[str, Any]) -> tuple[bool, str]:
        """Whether a typed answer in ``schema`` can go through structured outputs:
        (True, how), or (False, why not: the run then uses the final-answer tool)."""
        why = native_problem(schema, anthropic=True)
        if why is not None:
            return False, f"{why}, so not output_config.format json_schema"
        return True, "output_config.format json_schema"

    def build_body(self, request: Request) -> dict[str, Any]:
        """The JSON body for ``request`` (public for inspection and tests)."""
        options = request.options
        body: dict[str, Any] = {
            "model": request.model or self.model,
            "max_tokens": options.max_tokens if options.max_tokens is not None else self.max_tokens,
            "messages": anthropic_messages(request.messages),
            "stream": True,
        }
        if request.instructions:
            body["system"] = request.instructions
        if request.tools:
            body["tools"] = [_tool(d) for d in request.tools]
            choice = options.tool_choice
            if isinstance(choice, NamedToolChoice):
                tool_choice: dict[str, Any] = {"type": "tool", "name": choice.name}
            else:
                tool_choice = {"type": {"required": "any"}.get(choice, choice)}
            if options.parallel_tool_calls is False and tool_choice["type"] != "none":
                tool_choice["disable_parallel_tool_use"] = True
            body["tool_choice"] = tool_choice
        if options.temperature is not None:
            body["temperature"] = options.temperature
        if options.top_p is not None:
            body["top_p"] = options.top_p
        if options.stop:
            body["stop_sequences"] = list(options.stop)
        if request.answer_format is not None:
            body["output_config"] = anthropic_output_config(request.answer_format)
        body.update(options.extra)
        return body


# --- request building ------------------------------------------------------------------------


def _tool(definition: Definition) -> dict[str, Any]:
    if definition.provider_executed:
        return provider_tool_spec(definition)
    tool: dict[str, Any] = {
        "name": definition.name,
        "description": definition.description,
        "input_schema": normalize_schema(definition.input_schema),
    }
    if definition.input_examples:
        tool["input_examples"] = [dict(e) for e in definition.input_examples]
    if definition.strict:
        tool["strict"] = True
    extra = definition.provider_options.get("anthropic")
    if isinstance(extra, Mapping):
        tool.update(extra)
    return tool


def _image(part: ImagePart) -> dict[str, Any]:
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": part.mime_type, "data": b64(part.data)},
    }


def _parts(parts: Sequence[Any]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            if part.text:
                blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            blocks.append(_image(part))
    return blocks


def _assistant_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.content:
        if isinstance(part, TextPart):
            if part.text:
                blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ReasoningPart):
            if part.redacted:
                blocks.append({"type": "redacted_thinking", "data": part.redacted})
            elif part.signature and not part.signature.startswith(FOREIGN_REASONING_MARKS):
                blocks.append(
                    {"type": "thinking", "thinking": part.text, "signature": part.signature}
                )
        elif (
            isinstance(part, ToolCall) and part.provider_executed and isinstance(part.raw, Mapping)
        ):
            # verbatim (mcp_tool_use needs its server_name back), with the input as streamed
            blocks.append({**part.raw, "input": input_object(part.arguments)})
        elif isinstance(part, ToolCall):
            blocks.append(
                {
                    "type": "server_tool_use" if part.provider_executed else "tool_use",
                    "id": part.id,
                    "name": part.name,
                    "input": input_object(part.arguments),
                }
            )
        elif isinstance(part, ProviderToolResult) and isinstance(part.raw, Mapping):
            blocks.append(dict(part.raw))  # verbatim: keeps fields nbagent does not model
        elif isinstance(part, ProviderToolResult):
            blocks.append(
                {
                    "type": part.name + _RESULT_SUFFIX,
                    "tool_use_id": part.call_id,
                    "content": part.content,
                }
            )
    return blocks


def _tool_results(message: ToolMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for result in message.results:
        has_image = any(isinstance(p, ImagePart) for p in result.content)
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": result.call_id,
            "content": _parts(result.content) if has_image else result.text,
        }
        if result.is_error:
            block["is_error"] = True
        blocks.append(block)
    return blocks


def anthropic_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """nbagent messages as Messages API turns (see the module docs for the mapping)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, UserMessage):
            role, blocks = "user", _parts(message.content)
        elif isinstance(message, AssistantMessage):
            role, blocks = "assistant", _assistant_blocks(message)
        elif isinstance(message, ToolMessage):
            role, blocks = "user", _tool_results(message)
        else:
            raise TypeError(f"not a message: {type(message).__name__}")
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


# --- stream parsing --------------------------------------------------------------------------


class _Block:
    __slots__ = ("args", "damaged", "id", "initial", "kind", "name", "raw")

    def __init__(self, kind: str, block: Mapping[str, Any], lossy: bool) -> None:
        self.kind = kind
        self.id = text_of(block.get("id"), "a tool block's id")
        self.name = text_of(block.get("name"), "a tool block's name")
        self.initial = block.get("input")
        self.raw = dict(block) if kind in _EXECUTED_CALLS else None
        self.args: list[str] = []
        self.damaged = lossy and damaged(json.dumps(block, ensure_ascii=False), lossy)


class _EventParser:
    """Messages stream events → StreamEvents."""

    __slots__ = (
        "_began",
        "_blocks",
        "_calls",
        "_lossy",
        "_message",
        "_provider",
        "_reason",
        "_stopped",
        "_usage",
        "out",
    )

    def __init__(self, provider: str) -> None:
        self.out: list[StreamEvent] = []
        self._provider = provider
        self._blocks: dict[int, _Block] = {}
        self._calls = 0  # calls the loop must answer (not provider-executed)
        self._reason: str | None = None
        self._usage: dict[str, int] = {}
        self._stopped = False  # message_stop arrived
        self._message = False  # message_start arrived
        self._began = False  # content or a stop reason arrived
        self._lossy = False  # the current event had invalid UTF-8

    def event(self, name: bytes, data: bytes) -> bool:
        payload, self._lossy = loads(data)
        if not isinstance(payload, dict):
            raise TypeError(f"an event should be a JSON object, not {type(payload).__name__}")
        kind = payload.get("type") or name.decode("utf-8", "replace")
        if kind in _CONTENT_EVENTS:
            self._began = True
        if kind == "content_block_delta":
            self._delta(payload["index"], payload["delta"])
        elif kind == "content_block_start":
            self._start(payload["index"], payload["content_block"])
        elif kind == "content_block_stop":
            self._stop(payload["index"])
        elif kind == "message_delta":
            reason = (payload.get("delta") or {}).get("stop_reason")
            if reason:
                self._reason = text_of(reason, "stop_reason")
            self._add_usage(payload.get("usage"))
        elif kind == "message_start":
            if self._message and self._began:
                # A second message in one stream (a gateway that retried upstream and spliced
                # the new response in): merged, its signed thinking and calls would corrupt
                # the history. Nothing ran; asking again gets one clean message.
                raise StreamFailure(
                    f"{self._provider} sent a second message in the middle of the first; the "
                    "answer is incomplete",
                    retryable=True,
                )
            self._message = True
            self._add_usage((payload.get("message") or {}).get("usage"))
        elif kind == "message_stop":
            self._stopped = True
            return True
        elif kind == "error":
            error = payload.get("error") or {}
            etype = error.get("type", "error") if isinstance(error, Mapping) else "error"
            message = error.get("message", "") if isinstance(error, Mapping) else error
            raise StreamFailure(
                f"{self._provider} reported {etype} mid-stream: {message}",
                retryable=retryable_error(error),
            )
        return False

    def _delta(self, index: Any, delta: Mapping[str, Any]) -> None:
        dtype = delta.get("type")
        if dtype == "text_delta":
            text = delta["text"]
            if text.__class__ is not str:
                text = text_of(text, "text_delta.text")
            if text:
                self.out.append(TextDelta(text))
        elif dtype == "input_json_delta":
            fragment = text_of(delta.get("partial_json"), "input_json_delta.partial_json")
            block = self._blocks.get(index)
            if fragment and block is not None:
                block.damaged |= damaged(fragment, self._lossy)
                block.args.append(fragment)
                self.out.append(ToolInputDelta(block.id, fragment))
        elif dtype == "thinking_delta":
            thinking = text_of(delta["thinking"], "thinking_delta.thinking")
            if thinking:
                self.out.append(ReasoningDelta(thinking))
        elif dtype == "signature_delta":
            signature = text_of(delta["signature"], "signature_delta.signature")
            self.out.append(ReasoningDelta(signature=signature))

    def _start(self, index: Any, block: Mapping[str, Any]) -> None:
        btype = text_of(block.get("type"), "a content block's type")
        if btype == "text":
            text = text_of(block.get("text"), "a text block's text")
            if text:
                self.out.append(TextDelta(text))
        elif btype == "tool_use" or btype in _EXECUTED_CALLS:
            item = _Block(btype, block, self._lossy)
            self._blocks[index] = item
            self.out.append(ToolInputStart(item.id, item.name, btype in _EXECUTED_CALLS))
        elif btype == "thinking":
            thinking = text_of(block.get("thinking"), "a thinking block's text")
            signature = text_of(block.get("signature"), "a thinking block's signature")
            if thinking or signature:
                self.out.append(ReasoningDelta(thinking, signature or None))
        elif btype == "redacted_thinking":
            data = text_of(block.get("data"), "a redacted_thinking block's data")
            self.out.append(ReasoningDelta(redacted=data))
        elif btype.endswith(_RESULT_SUFFIX):
            content = block.get("content")
            failed = bool(block.get("is_error")) or (
                isinstance(content, Mapping) and str(content.get("type", "")).endswith("_error")
            )
            result = ProviderToolResult(
                text_of(block.get("tool_use_id"), "a tool result's tool_use_id"),
                btype[: -len(_RESULT_SUFFIX)],
                content,
                failed,
                dict(block),
            )
            self.out.append(ProviderToolResultReceived(result))

    def _stop(self, index: Any) -> None:
        block = self._blocks.pop(index, None)
        if block is None:
            return
        arguments = "".join(block.args)
        if not arguments.strip():
            arguments = json.dumps(block.initial) if block.initial else "{}"
        if block.damaged:
            arguments = DAMAGED_ARGUMENTS + arguments
        executed = block.kind in _EXECUTED_CALLS
        if not executed:
            self._calls += 1
        self.out.append(ToolInputEnd(block.id))
        self.out.append(
            ToolCallReceived(ToolCall(block.id, block.name, arguments, executed, block.raw))
        )

    def _add_usage(self, usage: Mapping[str, Any] | None) -> None:
        if usage:
            for key, value in usage.items():
                if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                    self._usage[key] = value

    def finished(self) -> bool:
        return self._reason is not None

    def end(self) -> None:
        raw = self._reason
        if raw is None:
            raise StreamFailure(
                f"the {self._provider} stream ended without a stop reason; the answer is "
                "incomplete",
                retryable=not self._stopped,  # a cut, unlike a message_stop without a reason
            )
        reason = _REASONS.get(raw, "other")
        if reason == "stop" and self._calls:
            reason = "tool_calls"
        elif reason == "tool_calls" and not self._calls:
            reason = "stop"
        u = self._usage
        cache_read = u.get("cache_read_input_tokens", 0)
        cache_write = u.get("cache_creation_input_tokens", 0)
        usage = Usage(
            input_tokens=u.get("input_tokens", 0) + cache_read + cache_write,
            output_tokens=u.get("output_tokens", 0),
            cache_read_tokens=cache_read,
            cache_write_tokens=cache_write,
        )
        self.out.append(Finish(reason, usage, raw))
