"""OpenAI Chat Completions, streamed, and every server that speaks it (Ollama, llama.cpp, vLLM …).

How nbagent's conversation maps onto the API:

* ``Request.instructions`` → a leading ``system`` message.
* A user message → ``content`` as a string (one text part) or a list of ``text`` and
  ``image_url`` parts (images as ``data:`` URLs).
* An assistant message → ``content`` (its text, or null) and ``tool_calls``. Reasoning and
  provider-executed parts are not sent back (Chat Completions has no field for them).
* Tool results → one ``role: "tool"`` message per result, in call order. Chat Completions tool
  messages carry **text only**, so a result's images go in **one ``user`` message right after the
  batch's tool messages**: for each result with images, a text line
  ``Images from tool call <id> (<name>):`` followed by its ``image_url`` parts. A result whose
  ``is_error`` is set is prefixed ``Error:`` (the API has no error flag).
* Tools → ``{"type": "function", "function": {...}}``. Input examples are folded into the
  description (``Examples:`` and one JSON object per line): the API has no field for them.
  ``strict=True`` sends ``strict: true`` with the schema rewritten by :func:`strict_schema`
  (see :mod:`nbagent.providers._strict` for the visible changes); the nulls that rewrite makes
  the model send for optional properties are removed from the call's arguments again.
  ``provider_options["openai"]`` is merged into the function object; a provider-executed tool
  sends ``provider_options["tool"]`` verbatim.
* ``tool_choice``: ``"auto"``, ``"none"``, ``"required"`` or ``{"type": "function", ...}``.

Streaming: ``stream_options.include_usage`` asks for the usage chunk. Tool calls are assembled by
``index`` and, when a server reuses an index for another call, by ``id``. Quirks tolerated: SSE
comments and keep-alives, CRLF, no usage chunk, no ``[DONE]``, empty-string arguments (sent on
as ``{}``), ``finish_reason: "stop"`` on a turn with calls (reported as ``"tool_calls"``),
``reasoning_content``/``reasoning`` deltas (as reasoning) and an ``error`` object mid-stream.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import httpx2

from ..content import ImagePart, TextPart
from ..generation import (
    Finish,
    FinishReason,
    NamedToolChoice,
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
from ..messages import AssistantMessage, Message, ToolMessage, UserMessage
from ..schema import normalize_schema
from ..tools import Definition, ToolCall
from ._http import HTTPGenerator, StreamFailure
from ._shared import b64, description_with_examples, provider_tool_spec
from ._sse import loads
from ._strict import drop_added_nulls, strict_schema

__all__ = ["OpenAIChat", "strict_schema"]

_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "content_filter",
    "error": "error",
}


class OpenAIChat(HTTPGenerator):
    """A model behind the Chat Completions API (OpenAI or any compatible server).

    ``api_key`` may be None for servers that need none (Ollama). ``max_tokens_field`` is the
    body field ``Options.max_tokens`` goes to: OpenAI's ``max_completion_tokens`` by default,
    ``"max_tokens"`` for servers that only know the older name. See :class:`HTTPGenerator` for
    timeouts, retries, ``client``/``transport`` injection and ``aclose()``.
    """

    provider = "OpenAI"
    key_env = "OPENAI_API_KEY"
    default_base_url: ClassVar[str] = "https://api.openai.com/v1"

    def __init__(
        self,
        model: str = "",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens_field: str = "max_completion_tokens",
        include_usage: bool = True,
        provider_name: str | None = None,
        key_env: str | None = None,
        client: httpx2.AsyncClient | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
        max_retries: int = 2,
        backoff_base: float = 0.5,
        backoff_cap: float = 8.0,
        retry_after_cap: float = 60.0,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if provider_name:
            self.provider = provider_name
        if key_env is not None:
            self.key_env = key_env
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
            headers=headers,
        )
        self.max_tokens_field = max_tokens_field
        self.include_usage = include_usage

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        if self._key:
            headers["authorization"] = "Bearer " + self._key.reveal()
        headers.update(self.extra_headers)
        return headers

    def _prepare(self, request: Request) -> tuple[str, dict[str, Any], _ChunkParser]:
        body = self.build_body(request)
        strict = {
            d.name: d.input_schema
            for d in request.tools
            if d.strict and not getattr(d, "provider_executed", False)
        }
        return "/chat/completions", body, _ChunkParser(self.provider, strict)

    def build_body(self, request: Request) -> dict[str, Any]:
        """The JSON body for ``request`` (public for inspection and tests)."""
        options = request.options
        body: dict[str, Any] = {
            "model": request.model or self.model,
            "messages": chat_messages(request.messages, request.instructions),
            "stream": True,
        }
        if self.include_usage:
            body["stream_options"] = {"include_usage": True}
        if request.tools:
            body["tools"] = [_tool(d) for d in request.tools]
            choice = options.tool_choice
            if isinstance(choice, NamedToolChoice):
                body["tool_choice"] = {"type": "function", "function": {"name": choice.name}}
            else:
                body["tool_choice"] = choice
            if options.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = options.parallel_tool_calls
        if options.max_tokens is not None:
            body[self.max_tokens_field] = options.max_tokens
        if options.temperature is not None:
            body["temperature"] = options.temperature
        if options.top_p is not None:
            body["top_p"] = options.top_p
        if options.stop:
            body["stop"] = list(options.stop)
        body.update(options.extra)
        return body


# --- request building ------------------------------------------------------------------------


def _tool(definition: Definition) -> dict[str, Any]:
    if getattr(definition, "provider_executed", False):
        return provider_tool_spec(definition)
    schema = normalize_schema(definition.input_schema)
    function: dict[str, Any] = {
        "name": definition.name,
        "description": description_with_examples(definition),
        "parameters": schema,
    }
    if definition.strict:
        function["parameters"] = strict_schema(schema, tool=definition.name)
        function["strict"] = True
    extra = definition.provider_options.get("openai")
    if isinstance(extra, Mapping):
        function.update(extra)
    return {"type": "function", "function": function}


def _image_url(part: ImagePart) -> dict[str, Any]:
    return {
        "type": "image_url",
        "image_url": {"url": f"data:{part.mime_type};base64,{b64(part.data)}"},
    }


def chat_messages(messages: Sequence[Message], instructions: str | None) -> list[dict[str, Any]]:
    """nbagent messages as Chat Completions messages (see the module docs for the mapping)."""
    out: list[dict[str, Any]] = []
    if instructions:
        out.append({"role": "system", "content": instructions})
    for message in messages:
        if isinstance(message, UserMessage):
            parts = message.content
            if len(parts) == 1 and isinstance(parts[0], TextPart):
                out.append({"role": "user", "content": parts[0].text})
            else:
                out.append({"role": "user", "content": [_user_part(p) for p in parts]})
        elif isinstance(message, AssistantMessage):
            text = "".join(p.text for p in message.content if isinstance(p, TextPart))
            calls = message.tool_calls
            if not text and not calls:
                continue
            item: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                item["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments or "{}"},
                    }
                    for c in calls
                ]
            out.append(item)
        elif isinstance(message, ToolMessage):
            images: list[dict[str, Any]] = []
            for result in message.results:
                text = result.text
                pictures = [p for p in result.content if isinstance(p, ImagePart)]
                if result.is_error and not text.lower().startswith("error"):
                    text = f"Error: {text}"
                if not text and pictures:
                    text = "(the result is the image in the next message)"
                out.append({"role": "tool", "tool_call_id": result.call_id, "content": text})
                if pictures:
                    images.append(
                        {
                            "type": "text",
                            "text": f"Images from tool call {result.call_id} ({result.name}):",
                        }
                    )
                    images.extend(_image_url(p) for p in pictures)
            if images:
                out.append({"role": "user", "content": images})
    return out


def _user_part(part: Any) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        return _image_url(part)
    raise TypeError(f"a user message cannot hold a {type(part).__name__}")


# --- stream parsing --------------------------------------------------------------------------


class _Call:
    __slots__ = ("args", "id", "name", "started")

    def __init__(self, call_id: str, name: str) -> None:
        self.id = call_id
        self.name = name
        self.args: list[str] = []
        self.started = False


class _ChunkParser:
    """``chat.completion.chunk`` events → StreamEvents (first choice only)."""

    __slots__ = (
        "_by_index",
        "_calls",
        "_closed",
        "_provider",
        "_reason",
        "_strict",
        "_usage",
        "out",
    )

    def __init__(self, provider: str, strict: dict[str, Mapping[str, Any] | None]) -> None:
        self.out: list[StreamEvent] = []
        self._provider = provider
        self._strict = strict
        self._calls: list[_Call] = []
        self._by_index: dict[int, _Call] = {}
        self._reason: str | None = None
        self._usage: Usage | None = None
        self._closed = False

    def event(self, name: bytes, data: bytes) -> bool:
        if data == b"[DONE]":
            return True
        chunk = loads(data)
        if chunk.get("error"):
            raise StreamFailure(_error_message(self._provider, chunk["error"]))
        choices = chunk.get("choices")
        if choices and not choices[0].get("index"):  # the first choice only (n > 1 is ignored)
            choice = choices[0]
            delta = choice.get("delta")
            if delta:
                text = delta.get("content")
                if text:
                    self.out.append(TextDelta(text))
                calls = delta.get("tool_calls")
                if calls:
                    self._tool_deltas(calls)
                reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                if reasoning and isinstance(reasoning, str):
                    self.out.append(ReasoningDelta(reasoning))
                refusal = delta.get("refusal")
                if refusal:
                    self.out.append(TextDelta(refusal))
            reason = choice.get("finish_reason")
            if reason:
                self._reason = reason
                self._close_calls()
        usage = chunk.get("usage")
        if usage:
            details = usage.get("prompt_tokens_details") or {}
            self._usage = Usage(
                input_tokens=usage.get("prompt_tokens") or 0,
                output_tokens=usage.get("completion_tokens") or 0,
                cache_read_tokens=details.get("cached_tokens") or 0,
            )
        return False

    def _tool_deltas(self, items: list[dict[str, Any]]) -> None:
        out = self.out
        for position, item in enumerate(items):
            index = item.get("index", position)
            call_id = item.get("id")
            function = item.get("function") or {}
            call = self._by_index.get(index)
            if call is None or (call_id and call_id != call.id):
                # a new call; a server that puts every call at index 0 is told apart by id
                call = _Call(call_id or f"call_{uuid.uuid4().hex[:24]}", "")
                self._by_index[index] = call
                self._calls.append(call)
            if not call.name and function.get("name"):
                call.name = function["name"]
            args = function.get("arguments")
            if args is not None and not isinstance(args, str):
                args = json.dumps(args)  # a server that sends the object itself
            if call.started:
                if args:
                    call.args.append(args)
                    out.append(ToolInputDelta(call.id, args))
                continue
            if args:
                call.args.append(args)
            if call.name:
                self._start(call)

    def _start(self, call: _Call) -> None:
        call.started = True
        self.out.append(ToolInputStart(call.id, call.name))
        if call.args:
            self.out.append(ToolInputDelta(call.id, "".join(call.args)))

    def _close_calls(self) -> None:
        if self._closed:
            return
        self._closed = True
        out = self.out
        for call in self._calls:
            if not call.started:
                self._start(call)
            arguments = "".join(call.args)
            if not arguments.strip():
                arguments = "{}"
            elif call.name in self._strict:
                arguments = drop_added_nulls(arguments, self._strict[call.name])
            out.append(ToolInputEnd(call.id))
            out.append(ToolCallReceived(ToolCall(call.id, call.name, arguments)))

    def finished(self) -> bool:
        return self._reason is not None

    def end(self) -> None:
        raw = self._reason
        if raw is None:
            raise StreamFailure(
                f"the {self._provider} stream ended without a finish reason; the answer is "
                "incomplete"
            )
        self._close_calls()
        reason = _REASONS.get(raw, "other")
        if reason == "stop" and self._calls:
            reason = "tool_calls"
        elif reason == "tool_calls" and not self._calls:
            reason = "stop"
        self.out.append(Finish(reason, self._usage or Usage(), raw))


def _error_message(provider: str, error: Any) -> str:
    if isinstance(error, Mapping):
        message = error.get("message") or json.dumps(error)[:300]
        kind = error.get("type") or error.get("code")
        where = f" ({kind})" if kind else ""
        return f"{provider} reported an error mid-stream{where}: {message}"
    return f"{provider} reported an error mid-stream: {error}"
