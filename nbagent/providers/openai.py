"""OpenAI Chat Completions, streamed, and every server that speaks it (Ollama, llama.cpp, vLLM …).

How nbagent's conversation maps onto the API:

* ``Request.instructions`` → a leading ``system`` message.
* A user message → ``content`` as a string (one text part) or a list of ``text`` and
  ``image_url`` parts (images as ``data:`` URLs).
* An assistant message → ``content`` (its text, or null) and ``tool_calls``. Provider-executed
  parts are not sent back. Reasoning goes back as ``reasoning_content`` only to servers that
  want it (DeepSeek's thinking mode answers 400 without it on tool-call turns): set
  ``reasoning_content=True``/``False`` to decide; by default (None) it is sent when the base
  URL is ``api.deepseek.com`` or once this adapter has received ``reasoning_content`` from its
  server, and never to ``api.openai.com`` (which rejects unknown message fields). When sent,
  every assistant turn with tool calls carries it, ``""`` if it had no reasoning.
* ``reasoning_details`` (OpenRouter; it answers 400 on a Gemini 3 tool-call turn that comes
  back without them) are collected from the stream, their streamed pieces merged, kept in a
  reasoning part and sent back on the assistant message, only to the host they came from.
* A call's ``extra_content`` (Gemini's OpenAI-compatible endpoint puts the thought signature
  there, and answers 400 when a call comes back without it) is kept with the call and sent
  back with it, only to the host it came from.
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
* ``tool_calls="structured"`` (for models without native tool calling): no ``tools`` are sent;
  the calls go through ``response_format`` JSON Schema output instead, and the history is sent
  without tool roles (see :mod:`nbagent.providers._structured`).

Streaming: ``stream_options.include_usage`` asks for the usage chunk (Groq's older
``x_groq.usage`` is read when there is no ``usage``). Tool calls are assembled by
``index`` and ``id``, tolerating servers that reuse an index for another call, change a
call's id after its first fragment, or send a call's tail at another index (see
``ChunkParser._call_for``). Quirks tolerated: SSE
comments, keep-alives and empty ``data:`` lines, CRLF, no usage chunk, no ``[DONE]``,
empty-string arguments (sent on as ``{}``), ``finish_reason: "stop"`` on a turn with calls
(reported as ``"tool_calls"``), ``reasoning_content``/``reasoning`` deltas (as reasoning),
``delta.content`` as a list of typed parts (Mistral: ``text`` parts are text, ``thinking``
parts are reasoning, other part types are ignored), and ``null`` for any optional field.

How a response ends:

* a finish reason: the answer is complete (a drop after it loses nothing). Other servers'
  words are understood, in any case: ``eos_token``, ``stop_sequence`` and ``end_turn`` are
  ``"stop"``, ``max_tokens`` is ``"length"``, ``tool_use`` is ``"tool_calls"``; an unknown
  one is ``"other"``;
* ``[DONE]`` without a finish reason (some routers): complete — ``"tool_calls"`` if it holds
  calls, else ``"stop"`` (``raw_reason`` None) — provided every call's arguments parse as JSON;
  a call cut short makes it a retryable failure;
* the body ending with neither: a cut stream, a retryable failure;
* an ``error`` object: a failure, retryable when its type or code says it is transient
  (see :mod:`nbagent.providers._http`).

Text with invalid UTF-8 keeps going with U+FFFD in place of each bad byte. A call whose own
arguments held invalid bytes is passed on with arguments that are not JSON (prefixed
``(not run: …)``), so the loop answers it with an error the model reads instead of running it
with altered arguments; its clean siblings run. Any other field of an unexpected type ends the
response with a clear :class:`~nbagent.errors.StreamError`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import httpx2

from ..content import ImagePart, TextPart
from ..errors import ConfigurationError
from ..generation import NamedToolChoice, Request
from ..messages import AssistantMessage, Message, ReasoningPart, ToolMessage, UserMessage
from ..schema import normalize_schema
from ..tools import Definition, ToolCall
from ._answers import chat_response_format, native_problem
from ._chat_stream import ChunkParser, reasoning_details
from ._http import HTTPGenerator, StreamParser
from ._keys import host_of
from ._shared import b64, description_with_examples, provider_tool_spec
from ._sse import DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_RESPONSE_BYTES
from ._strict import strict_schema
from ._structured import TOOL_CALL_MODES, StructuredParser, ToolCallMode, structured_body

__all__ = ["OpenAIChat", "strict_schema"]


class OpenAIChat(HTTPGenerator):
    """A model behind the Chat Completions API (OpenAI or any compatible server).

    ``api_key`` may be None for servers that need none (Ollama). ``max_tokens_field`` is the
    body field ``Options.max_tokens`` goes to: OpenAI's ``max_completion_tokens`` by default,
    ``"max_tokens"`` for servers that only know the older name. ``reasoning_content`` says
    whether reasoning is sent back in that field (None: decide as the module docs say). See
    :class:`HTTPGenerator` for timeouts, retries, limits, ``client``/``transport`` injection
    and ``aclose()``. ``tool_calls``: ``"native"`` (the API's ``tools``) or ``"structured"``
    (JSON-Schema-constrained output, for models whose server drops ``tools``).
    """

    provider = "OpenAI"
    key_env = "OPENAI_API_KEY"
    #: Which provider preflight rules apply to tools sent here (see ``_preflight``).
    tool_rules: ClassVar[str] = "openai"
    vendor: ClassVar[str] = "openai"
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
        reasoning_content: bool | None = None,
        tool_calls: ToolCallMode = "native",
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
            max_event_bytes=max_event_bytes,
            max_response_bytes=max_response_bytes,
            headers=headers,
        )
        if reasoning_content and host_of(self.base_url) == "api.openai.com":
            raise ConfigurationError(
                "reasoning_content=True would send a field api.openai.com rejects: leave it "
                "unset for OpenAI"
            )
        if tool_calls not in TOOL_CALL_MODES:
            raise ConfigurationError(
                f"tool_calls must be 'native' or 'structured', not {tool_calls!r}"
            )
        self.tool_calls: ToolCallMode = tool_calls
        self.max_tokens_field = max_tokens_field
        self.include_usage = include_usage
        self.reasoning_content = reasoning_content
        self._server_sends_reasoning_content = False

    def sends_reasoning_content(self) -> bool:
        """Whether assistant turns carry ``reasoning_content`` in the next request."""
        if self.reasoning_content is not None:
            return self.reasoning_content
        host = host_of(self.base_url)
        if host == "api.openai.com":
            return False
        return host == "api.deepseek.com" or self._server_sends_reasoning_content

    def _learn_reasoning_content(self) -> None:
        self._server_sends_reasoning_content = True

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        if self._key:
            headers["authorization"] = "Bearer " + self._key.reveal()
        headers.update(self.extra_headers)
        return headers

    def _prepare(self, request: Request) -> tuple[str, dict[str, Any], Callable[[], StreamParser]]:
        body = self.build_body(request)
        strict = {
            d.name: d.input_schema for d in request.tools if d.strict and not d.provider_executed
        }

        origin = host_of(self.base_url)

        def parser() -> ChunkParser:
            return ChunkParser(self.provider, strict, self._learn_reasoning_content, origin)

        if self.tool_calls == "structured":
            return "/chat/completions", body, lambda: StructuredParser(parser())
        return "/chat/completions", body, parser

    def native_answers(self, schema: Mapping[str, Any]) -> tuple[bool, str]:
        """Whether a typed answer in ``schema`` can go through the API's strict response_format:
        (True, how), or (False, why not: the run then uses the final-answer tool)."""
        if self.tool_calls == "structured":
            return False, "tool_calls='structured' uses response_format for the calls"
        why = native_problem(schema)
        if why is not None:
            return False, f"{why}, so not response_format json_schema (strict)"
        return True, "response_format json_schema (strict)"

    def build_body(self, request: Request) -> dict[str, Any]:
        """The JSON body for ``request`` (public for inspection and tests)."""
        options = request.options
        body: dict[str, Any] = {
            "model": request.model or self.model,
            "messages": chat_messages(
                request.messages,
                request.instructions,
                reasoning_content=self.sends_reasoning_content(),
                origin=host_of(self.base_url),
            ),
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
        if request.answer_format is not None:
            body["response_format"] = chat_response_format(request.answer_format)
        body.update(options.extra)
        if self.tool_calls == "structured":
            return structured_body(body, request)
        return body


# --- request building ------------------------------------------------------------------------


def _tool(definition: Definition) -> dict[str, Any]:
    if definition.provider_executed:
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


def chat_messages(
    messages: Sequence[Message],
    instructions: str | None,
    *,
    reasoning_content: bool = False,
    origin: str | None = None,
) -> list[dict[str, Any]]:
    """nbagent messages as Chat Completions messages (see the module docs for the mapping).

    ``reasoning_content``: send each assistant turn's reasoning back in that field (always on
    a turn with tool calls, ``""`` when it had none). ``origin``: the host the request goes to;
    a call's ``extra_content`` is sent back only to the host it came from.
    """
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
            if reasoning_content:
                reasoning = "".join(p.text for p in message.content if isinstance(p, ReasoningPart))
                if reasoning or calls:
                    item["reasoning_content"] = reasoning
            if calls:
                item["tool_calls"] = [_call_item(c, origin) for c in calls]
            details = [
                detail
                for part in message.content
                if isinstance(part, ReasoningPart)
                for detail in reasoning_details(part.signature, origin) or ()
            ]
            if details:
                item["reasoning_details"] = details
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


def _call_item(call: ToolCall, origin: str | None) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments or "{}"},
    }
    raw = call.raw
    if isinstance(raw, Mapping) and origin is not None and raw.get("origin") == origin:
        extra = raw.get("extra_content")
        if isinstance(extra, Mapping):
            item["extra_content"] = dict(extra)
    return item


def _user_part(part: Any) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        return _image_url(part)
    raise TypeError(f"a user message cannot hold a {type(part).__name__}")
