"""OpenAI Responses API (``POST /responses``), streamed: ``openai-responses:MODEL``.

How nbagent's conversation maps onto the API:

* ``Request.instructions`` → ``instructions``.
* A user message → an input message: ``content`` as a string (one text part) or a list of
  ``input_text`` and ``input_image`` parts (images as ``data:`` URLs).
* An assistant message → output items in the order the model produced them: reasoning items,
  each message the model wrote as an ``assistant`` message of its own, each call as a
  ``function_call`` item (``call_id``, ``name``, the arguments as text). Every other field the
  API gave a message or function_call item goes back with it as it came (a message's
  ``phase``, ``commentary`` or ``final_answer``; a call's ``namespace`` after a server-side
  ``tool_search_call``, its ``caller``; fields the API adds later), carried in the part's
  ``raw``; a ``function_call_output`` carries its call's ``namespace`` and ``caller``. Calls
  the provider ran itself (``web_search_call``, ``tool_search_call`` …) are not sent back: the
  answer that used them is.
* Tool results → one ``function_call_output`` item per result, in call order: ``output`` is the
  text, or, when the result holds images, a list of ``input_text`` and ``input_image`` parts in
  the result's order. A result whose ``is_error`` is set is prefixed ``Error:`` (the API has no
  error flag).
* Tools → ``{"type": "function", "name", "description", "parameters", "strict"}``, ``strict``
  always sent (the API treats a function without it as strict): ``strict=True`` rewrites the
  schema with :func:`~nbagent.providers.strict_schema` and removes the nulls that rewrite makes
  the model send; input examples are folded into the description (the API has no field for
  them); ``provider_options["openai"]`` is merged into the tool; a provider-executed tool sends
  ``provider_options["tool"]`` verbatim (``{"type": "web_search"}``).
* ``tool_choice``: ``"auto"``, ``"none"``, ``"required"`` or ``{"type": "function", "name"}``;
  ``parallel_tool_calls``, ``max_tokens`` → ``max_output_tokens``, ``temperature``, ``top_p``.
  The API has no stop sequences: ``Options.stop`` raises a ConfigurationError before any
  request.

Reasoning, carried across turns. ``store`` is false by default: OpenAI keeps nothing of the
conversation (the privacy-friendly choice, and the one that works under Zero Data Retention),
so the whole history is sent each turn. Reasoning items then travel encrypted: the request
asks for ``include: ["reasoning.encrypted_content"]`` when the model reasons (``o1``, ``o3``,
``o4-mini``, ``gpt-5`` … but not ``gpt-5-chat``, also behind a host's prefix such as
``openai/``, ``azure/`` or Bedrock's ``openai.`` and ``us.openai.``, with any suffix;
``encrypted_reasoning=True``/``False`` decides for other names, such as an Azure deployment's),
since non-reasoning models answer 400 to it. Each reasoning item,
as ``response.output_item.done`` gives it, becomes a
:class:`~nbagent.messages.ReasoningPart` whose ``text`` is the summary (ask for one with
``reasoning={"summary": "auto"}``) and whose ``signature`` carries the item, the model and the
item that followed it. It is sent back verbatim, with the following message or call under its
own item id, because the API accepts a reasoning item only beside that item; it is left out
(with no item ids, which the API then does not try to pair) when the next request is for
another model, when it has no encrypted content and ``store`` is false, when what followed it
did not make it into the history (a call of an answer that failed, a provider-run call), and
for reasoning of any other provider. With ``store=True`` items are kept by OpenAI and sent
back by id.

Streaming: ``response.output_item.added`` / ``.done`` frame each output item (message,
function_call, reasoning, or a provider-run ``*_call``); ``response.output_text.delta`` and
``response.refusal.delta`` are text, ``response.function_call_arguments.delta`` a call's
arguments (``.done`` and the item's own ``arguments`` are the final word),
``response.reasoning_summary_text.delta`` and ``response.reasoning_text.delta`` reasoning.
Events of any other type (the API adds new ones) are ignored. An item only the client could
answer for a tool that is not a function tool (anything else carrying a ``call_id``:
``custom_tool_call``, ``computer_call``, ``shell_call`` …; and ``mcp_approval_request``) ends
the answer with a clear ``StreamError``: nbagent runs function tools only. A server that
leaves out the deltas, or the item events, still works: text, calls and reasoning are taken
from the items, or from the final response's ``output``.

How a response ends:

* ``response.completed``: complete; ``"tool_calls"`` when it holds function calls, else
  ``"stop"`` (a drop after it loses nothing);
* ``response.incomplete``: the answer is not complete and none of its calls run:
  ``max_output_tokens`` → ``"length"``, ``content_filter`` → ``"content_filter"``, any other
  reason → ``"other"`` (``raw_reason`` is the API's reason);
* ``response.failed`` and ``error`` events: a :class:`~nbagent.errors.StreamError` quoting
  the code and message, retried when the code says it is transient (``server_error``,
  ``rate_limit_exceeded`` …; see :mod:`nbagent.providers._http`);
* the body ending before one of these: a cut stream, retried.

Text with invalid UTF-8 keeps going with U+FFFD in place of each bad byte. A call whose own
arguments held invalid bytes is passed on with arguments that are not JSON (prefixed
``(not run: …)``), so the loop answers it with an error the model reads; its clean siblings
run. So is a call the final response itself marks ``"status": "incomplete"`` (its arguments
may have stopped short, even where what came is valid JSON). Any field of an unexpected type
ends the response with a clear ``StreamError``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import httpx2

from ..content import ImagePart, TextPart
from ..errors import ConfigurationError
from ..generation import NamedToolChoice, Request
from ..messages import (
    AssistantMessage,
    Message,
    ReasoningPart,
    ToolMessage,
    ToolResultPart,
    UserMessage,
)
from ..schema import normalize_schema
from ..tools import Definition, ToolCall
from ._answers import native_problem, responses_text_format
from ._http import HTTPGenerator
from ._responses_items import carried_fields, read_reasoning_signature
from ._responses_stream import ResponseEventParser
from ._shared import b64, description_with_examples, provider_tool_spec
from ._sse import DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_RESPONSE_BYTES
from ._strict import strict_schema

__all__ = ["OpenAIResponses", "responses_input"]

#: Model names that reason (and accept ``include: ["reasoning.encrypted_content"]``), matched
#: at the start of the bare name (see :func:`bare_model_name`).
_REASONING_MODELS = re.compile(r"(o\d|gpt-5(?!(\.\d+)?-chat)|codex-|gpt-oss)")
#: What a host puts before a model's own name: a route (``openai/``, ``azure/``), a fine-tune
#: mark (``ft:``), and dotted labels of letters only (Bedrock's ``openai.``, its cross-region
#: ``us.openai.``). A model's own name starts with a letter followed by a digit or a hyphen
#: before any dot (``gpt-5.6``, ``o3``), so no label of it is taken for a prefix.
_HOST_PREFIX = re.compile(r"^(?:ft:)?(?:[a-z][a-z_]*\.)*")


def bare_model_name(model: str) -> str:
    """``model`` without what a host or gateway adds before it (lower case): ``openai/o3``,
    ``openai.gpt-5.6-luna`` and ``us.openai.gpt-oss-120b-1:0`` are ``o3``, ``gpt-5.6-luna`` and
    ``gpt-oss-120b-1:0``. What follows the name (a date, ``-v1:0``) is kept: names are matched
    at their start."""
    name = model.strip().rsplit("/", 1)[-1].lower()
    bare = _HOST_PREFIX.sub("", name, count=1)
    return bare or name


class OpenAIResponses(HTTPGenerator):
    """A model behind OpenAI's Responses API (``POST {base_url}/responses``).

    ``store`` asks OpenAI to keep the response (default False: nothing is kept, the history
    is sent whole each turn). ``encrypted_reasoning`` asks for reasoning items in encrypted
    form so they can be sent back with ``store=False`` (None: when the model name is a
    reasoning model's). ``reasoning`` is sent as the body's ``reasoning`` object, e.g.
    ``{"effort": "low", "summary": "auto"}``. See the module docs for how the conversation
    maps onto the API, and :class:`HTTPGenerator` for timeouts, retries, limits,
    ``client``/``transport`` injection and ``aclose()``.
    """

    provider = "OpenAI"
    tool_rules: ClassVar[str] = "openai"  # function tools follow Chat Completions' rules
    key_env = "OPENAI_API_KEY"
    vendor: ClassVar[str] = "openai"
    default_base_url: ClassVar[str] = "https://api.openai.com/v1"

    def __init__(
        self,
        model: str = "",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        store: bool = False,
        encrypted_reasoning: bool | None = None,
        reasoning: Mapping[str, Any] | None = None,
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
        self.store = store
        self.encrypted_reasoning = encrypted_reasoning
        self.reasoning = dict(reasoning) if reasoning is not None else None

    def asks_for_encrypted_reasoning(self, model: str | None = None) -> bool:
        """Whether a request for ``model`` (default: this adapter's) asks for encrypted
        reasoning (see the module docs)."""
        if self.store:
            return False
        if self.encrypted_reasoning is not None:
            return self.encrypted_reasoning
        return bool(_REASONING_MODELS.match(bare_model_name(model or self.model)))

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        if self._key:
            headers["authorization"] = "Bearer " + self._key.reveal()
        headers.update(self.extra_headers)
        return headers

    def _prepare(
        self, request: Request
    ) -> tuple[str, dict[str, Any], Callable[[], ResponseEventParser]]:
        body = self.build_body(request)
        model = body["model"]
        strict = {
            d.name: d.input_schema for d in request.tools if d.strict and not d.provider_executed
        }

        def parser() -> ResponseEventParser:
            return ResponseEventParser(self.provider, strict, model)

        return "/responses", body, parser

    def native_answers(self, schema: Mapping[str, Any]) -> tuple[bool, str]:
        """Whether a typed answer in ``schema`` can go through the API's strict text.format:
        (True, how), or (False, why not: the run then uses the final-answer tool)."""
        why = native_problem(schema)
        if why is not None:
            return False, f"{why}, so not text.format json_schema (strict)"
        return True, "text.format json_schema (strict)"

    def build_body(self, request: Request) -> dict[str, Any]:
        """The JSON body for ``request`` (public for inspection and tests)."""
        options = request.options
        if options.stop:
            raise ConfigurationError(
                "the OpenAI Responses API has no stop sequences: leave Options.stop empty, or "
                "use the Chat Completions adapter (openai:MODEL) for them"
            )
        model = request.model or self.model
        body: dict[str, Any] = {
            "model": model,
            "input": responses_input(request.messages, model=model, store=self.store),
            "stream": True,
            "store": self.store,
        }
        if request.instructions:
            body["instructions"] = request.instructions
        if self.asks_for_encrypted_reasoning(model):
            body["include"] = ["reasoning.encrypted_content"]
        if self.reasoning is not None:
            body["reasoning"] = dict(self.reasoning)
        if request.tools:
            body["tools"] = [_tool(d) for d in request.tools]
            choice = options.tool_choice
            if isinstance(choice, NamedToolChoice):
                body["tool_choice"] = {"type": "function", "name": choice.name}
            else:
                body["tool_choice"] = choice
            if options.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = options.parallel_tool_calls
        if options.max_tokens is not None:
            body["max_output_tokens"] = options.max_tokens
        if options.temperature is not None:
            body["temperature"] = options.temperature
        if options.top_p is not None:
            body["top_p"] = options.top_p
        if request.answer_format is not None:
            body["text"] = responses_text_format(request.answer_format)
        body.update(options.extra)
        return body


# --- request building ------------------------------------------------------------------------


def _tool(definition: Definition) -> dict[str, Any]:
    if definition.provider_executed:
        return provider_tool_spec(definition)
    schema = normalize_schema(definition.input_schema)
    tool: dict[str, Any] = {
        "type": "function",
        "name": definition.name,
        "description": description_with_examples(definition),
        "parameters": schema,
        "strict": False,
    }
    if definition.strict:
        tool["parameters"] = strict_schema(schema, tool=definition.name)
        tool["strict"] = True
    extra = definition.provider_options.get("openai")
    if isinstance(extra, Mapping):
        tool.update(extra)
    return tool


def _image(part: ImagePart) -> dict[str, Any]:
    return {"type": "input_image", "image_url": f"data:{part.mime_type};base64,{b64(part.data)}"}


def _user_content(parts: Sequence[Any]) -> str | list[dict[str, Any]]:
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return parts[0].text
    content: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            content.append({"type": "input_text", "text": part.text})
        elif isinstance(part, ImagePart):
            content.append(_image(part))
        else:
            raise TypeError(f"a user message cannot hold a {type(part).__name__}")
    return content


def _returned_reasoning(parts: Sequence[Any], model: str, store: bool) -> dict[int, dict[str, Any]]:
    """Which reasoning parts go back (by position): each only beside the item that followed it.

    Walked backwards, so a reasoning item followed by another knows whether that one goes.
    """
    kept: dict[int, dict[str, Any]] = {}
    for index in range(len(parts) - 1, -1, -1):
        part = parts[index]
        if not isinstance(part, ReasoningPart):
            continue
        payload = read_reasoning_signature(part.signature)
        if payload is None or payload["model"] != model:
            continue
        item, follower = payload["item"], payload["next"]
        if not store and not item.get("encrypted_content"):
            continue  # without the encrypted content it could only be looked up by id
        after = parts[index + 1] if index + 1 < len(parts) else None
        kind = follower["type"]
        if kind == "message":
            fits = isinstance(after, TextPart) and bool(after.text)
        elif kind == "function_call":
            fits = (
                isinstance(after, ToolCall)
                and not after.provider_executed
                and after.id == follower.get("call_id")
            )
        elif kind == "reasoning":
            fits = index + 1 in kept and kept[index + 1]["item"]["id"] == follower.get("id")
        else:
            fits = False
        if fits and isinstance(follower.get("id"), str):
            kept[index] = payload
    return kept


def _assistant_items(message: AssistantMessage, model: str, store: bool) -> list[dict[str, Any]]:
    parts = message.content
    kept = _returned_reasoning(parts, model, store)
    items: list[dict[str, Any]] = []
    paired: dict[str, Any] | None = None  # what the reasoning item just sent needs next
    for index, part in enumerate(parts):
        follower, paired = paired, None
        if isinstance(part, ReasoningPart):
            payload = kept.get(index)
            if payload is not None:
                items.append(dict(payload["item"]))
                paired = payload["next"]
        elif isinstance(part, TextPart):
            if not part.text:
                continue
            fields = carried_fields(part.raw, "message")  # phase …: the API needs it again
            if follower is not None:
                if isinstance(follower.get("phase"), str):
                    fields.setdefault("phase", follower["phase"])
                item: dict[str, Any] = {
                    **fields,
                    "type": "message",
                    "id": follower["id"],
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": part.text, "annotations": []}],
                }
                items.append(item)
            else:
                items.append({**fields, "role": "assistant", "content": part.text})
        elif isinstance(part, ToolCall) and not part.provider_executed:
            call: dict[str, Any] = {
                **carried_fields(part.raw, "function_call"),  # namespace, caller …
                "type": "function_call",
                "call_id": part.id,
                "name": part.name,
                "arguments": part.arguments or "{}",
            }
            if follower is not None:
                call["id"] = follower["id"]
            items.append(call)
        # provider-run calls and results are not sent back: the answer that used them is
    return items


#: Fields of a function_call that its function_call_output carries too (the API's schema for
#: the output item has them: which namespace the tool is in, and who called it).
_OUTPUT_SHARES = ("namespace", "caller")


def _output(result: ToolResultPart) -> str | list[dict[str, Any]]:
    """A tool result as ``function_call_output.output``: text, or parts when it has images."""
    text = result.text
    prefix = "Error: " if result.is_error and not text.lower().startswith("error") else ""
    if not any(isinstance(p, ImagePart) for p in result.content):
        return prefix + text
    content: list[dict[str, Any]] = []
    for part in result.content:
        if isinstance(part, TextPart):
            content.append({"type": "input_text", "text": prefix + part.text})
            prefix = ""
        elif isinstance(part, ImagePart):
            content.append(_image(part))
    if prefix:
        content.insert(0, {"type": "input_text", "text": prefix.strip()})
    return content


def responses_input(
    messages: Sequence[Message], *, model: str = "", store: bool = False
) -> list[dict[str, Any]]:
    """nbagent messages as Responses input items (see the module docs for the mapping).

    ``model`` is the model of the request: reasoning items made by another are left out.
    """
    items: list[dict[str, Any]] = []
    calls: dict[str, dict[str, Any]] = {}  # call id -> the fields its output shares with it
    for message in messages:
        if isinstance(message, UserMessage):
            if message.content:
                items.append({"role": "user", "content": _user_content(message.content)})
        elif isinstance(message, AssistantMessage):
            items.extend(_assistant_items(message, model, store))
            for call in message.tool_calls:
                fields = carried_fields(call.raw, "function_call")
                calls[call.id] = {k: fields[k] for k in _OUTPUT_SHARES if k in fields}
        elif isinstance(message, ToolMessage):
            for result in message.results:
                items.append(
                    {
                        **calls.get(result.call_id, {}),
                        "type": "function_call_output",
                        "call_id": result.call_id,
                        "output": _output(result),
                    }
                )
        else:
            raise TypeError(f"not a message: {type(message).__name__}")
    return items
