"""Reading a Responses stream: typed ``response.*`` events → StreamEvents.

The rules (which events count, how a response ends, reasoning items, invalid UTF-8) are
described in :mod:`nbagent.providers.responses`, whose adapter is the only user of this parser.
What an output item holds and carries into the next request is read by
:mod:`._responses_items`.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from ..generation import (
    Finish,
    FinishReason,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallReceived,
    ToolInputDelta,
    ToolInputEnd,
    ToolInputStart,
    Usage,
)
from ..tools import ToolCall
from ._failures import StreamFailure
from ._responses_items import (
    ITEM_KEY,
    executed_name,
    item_fields,
    message_text,
    reasoning_signature,
    reasoning_text,
)
from ._shared import DAMAGED_ARGUMENTS, INCOMPLETE_ARGUMENTS, damaged, retryable_error, text_of
from ._sse import loads
from ._strict import drop_added_nulls

__all__ = ["ResponseEventParser"]

log = logging.getLogger("nbagent.providers")

_NO_ITEM = object()

_INCOMPLETE: dict[str, FinishReason] = {
    "max_output_tokens": "length",
    "content_filter": "content_filter",
}

#: Events that carry nothing nbagent needs (their content also arrives in the events it reads).
_QUIET = frozenset(
    {
        "response.created",
        "response.in_progress",
        "response.queued",
        "response.content_part.added",
        "response.content_part.done",
        "response.output_text.done",
        "response.output_text.annotation.added",
        "response.refusal.done",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_part.done",
        "response.reasoning_summary_text.done",
        "response.reasoning_text.done",
    }
)


# --- the parser ---------------------------------------------------------------------------------


class _Call:
    """A function call as far as it has arrived."""

    __slots__ = (
        "args",
        "call_id",
        "damaged",
        "fields",
        "final",
        "item_id",
        "name",
        "received",
        "started",
    )

    def __init__(self, item_id: str, call_id: str, name: str) -> None:
        self.fields: dict[str, Any] = {}  # the item's own fields that go back with it
        self.item_id = item_id
        self.call_id = call_id
        self.name = name
        self.args: list[str] = []
        self.final: str | None = None  # the arguments as the done event states them
        self.started = False
        self.received = False
        self.damaged = False  # some of its bytes were invalid UTF-8


class _Reasoning:
    """A reasoning item: its text so far, and the item itself once done."""

    __slots__ = ("item", "key", "part", "texted")

    def __init__(self, key: str) -> None:
        self.key = key
        self.item: dict[str, Any] | None = None
        self.part: Any = None  # which summary / content part the last text belonged to
        self.texted = False


class ResponseEventParser:
    """Responses stream events → StreamEvents; ``model`` is recorded with reasoning items."""

    __slots__ = (
        "_calls",
        "_function_calls",
        "_handlers",
        "_id_keys",
        "_index_keys",
        "_items",
        "_lossy",
        "_messages",
        "_model",
        "_provider",
        "_reason",
        "_reasoning",
        "_status",
        "_strict",
        "_text_item",
        "_texted",
        "_unknown",
        "_usage",
        "out",
    )

    def __init__(
        self, provider: str, strict: dict[str, Mapping[str, Any] | None], model: str
    ) -> None:
        self.out: list[StreamEvent] = []
        self._provider = provider
        self._strict = strict
        self._model = model
        self._calls: dict[str, _Call] = {}  # by item key (see _item_key)
        self._items: dict[str, bool] = {}  # item key -> done
        self._index_keys: dict[int, str] = {}  # output_index -> item key
        self._id_keys: dict[str, str] = {}  # item id -> item key
        self._reasoning: _Reasoning | None = None  # the latest reasoning item, until followed
        self._texted: set[str] = set()  # keys of the messages whose text streamed
        self._messages: dict[str, dict[str, Any]] = {}  # message key -> the raw of its text
        self._text_item: Any = _NO_ITEM  # the item of the latest text delta
        self._function_calls = 0
        self._status: str | None = None  # "completed" or "incomplete"
        self._reason: str | None = None
        self._usage = Usage()
        self._unknown: set[str] = set()
        self._lossy = False  # the current event had invalid UTF-8
        self._handlers: dict[str, Callable[[dict[str, Any]], bool]] = {
            "response.output_text.delta": self._text,
            "response.function_call_arguments.delta": self._arguments,
            "response.refusal.delta": self._text,
            "response.reasoning_summary_text.delta": self._reasoning_text,
            "response.reasoning_text.delta": self._reasoning_text,
            "response.function_call_arguments.done": self._arguments_done,
            "response.output_item.added": self._added,
            "response.output_item.done": self._done,
            "response.completed": self._completed,
            "response.incomplete": self._completed,
            "response.failed": self._failed,
            "error": self._error,
        }

    def event(self, name: bytes, data: bytes) -> bool:
        payload, self._lossy = loads(data)
        if payload.__class__ is not dict:
            raise TypeError(f"an event should be a JSON object, not {type(payload).__name__}")
        kind = payload.get("type")
        if kind.__class__ is not str:
            if kind is not None or not name:
                raise TypeError(f"an event's type should be a string, not {type(kind).__name__}")
            kind = payload["type"] = name.decode("utf-8", "replace")  # named by the SSE field
        handler = self._handlers.get(kind)
        if handler is not None:
            return handler(payload)
        if kind not in _QUIET and kind not in self._unknown:
            self._unknown.add(kind)  # forward compatible: a new event type is not an error
            log.debug("%s: ignored an event of unknown type %r", self._provider, kind[:100])
        return False

    # --- deltas ----------------------------------------------------------------------------

    def _text(self, payload: dict[str, Any]) -> bool:
        delta = payload["delta"]
        if delta.__class__ is not str:
            delta = text_of(delta, f"the delta of {payload['type']}")
        if delta:
            item_id = payload.get("item_id")
            key = self._item_key(item_id, payload.get("output_index"))
            if key != self._text_item or self._reasoning is not None:
                self._text_item = key
                self._texted.add(key)
                if self._reasoning is not None:  # the message's added event never came
                    self._follow({"type": "message", "id": item_id})
            self.out.append(TextDelta(delta, self._message_raw(key)))
        return False

    def _message_raw(self, key: str, item: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The ``raw`` of a message's text: one dict per message, so that two messages stay
        two parts; ``item`` (its added or done event) fills in the fields that go back."""
        raw = self._messages.get(key)
        if raw is None:
            raw = self._messages[key] = {ITEM_KEY: {}}
        if item is not None:
            raw[ITEM_KEY].update(item_fields(item, "message"))
        return raw

    def _arguments(self, payload: dict[str, Any]) -> bool:
        fragment = payload["delta"]
        if fragment.__class__ is not str:
            fragment = text_of(fragment, "a function call's arguments delta")
        if fragment:
            call = self._call_for(payload)
            if self._reasoning is not None:  # the call's added event never came
                self._follow({"type": "function_call", "id": call.item_id, "call_id": None})
            if self._lossy:
                call.damaged |= damaged(fragment, True)
            call.args.append(fragment)
            if call.started:
                self.out.append(ToolInputDelta(call.call_id, fragment))
        return False

    def _arguments_done(self, payload: dict[str, Any]) -> bool:
        call = self._call_for(payload)
        call.final = text_of(payload.get("arguments"), "a function call's arguments")
        if self._lossy:
            call.damaged |= damaged(call.final, True)
        return False

    def _reasoning_text(self, payload: dict[str, Any]) -> bool:
        delta = text_of(payload.get("delta"), f"the delta of {payload['type']}")
        key = self._item_key(payload.get("item_id"), payload.get("output_index"))
        reasoning = self._reasoning
        if reasoning is None or reasoning.key != key:  # its added event never came
            self._follow({"type": "reasoning", "id": payload.get("item_id")})
            reasoning = self._reasoning = _Reasoning(key)
            self._items[key] = False
        part = (payload["type"], payload.get("summary_index", payload.get("content_index")))
        if delta:
            if reasoning.texted and part != reasoning.part:
                delta = "\n\n" + delta  # a new summary part: keep the parts apart
            reasoning.part = part
            reasoning.texted = True
            self.out.append(ReasoningDelta(delta))
        return False

    # --- output items ----------------------------------------------------------------------

    def _added(self, payload: dict[str, Any]) -> bool:
        item = payload["item"]
        if not isinstance(item, Mapping):
            raise TypeError(f"an output item should be an object, not {type(item).__name__}")
        self._add(item, self._item_key(item.get("id"), payload.get("output_index"), item=True))
        return False

    def _done(self, payload: dict[str, Any]) -> bool:
        item = payload["item"]
        if not isinstance(item, Mapping):
            raise TypeError(f"an output item should be an object, not {type(item).__name__}")
        key = self._item_key(item.get("id"), payload.get("output_index"), item=True)
        if key not in self._items:
            self._add(item, key)  # its added event never came
        self._finish(item, key)
        return False

    def _add(self, item: Mapping[str, Any], key: str) -> None:
        kind = text_of(item.get("type"), "an output item's type")
        self._items[key] = False
        reasoning = self._reasoning
        if kind == "reasoning" and reasoning is not None and reasoning.key == key:
            return  # its deltas came first: this is the item they belong to
        self._follow(item)
        if kind == "message":
            self._message_raw(key, item)  # its text streams as deltas
        elif kind == "function_call":
            call = self._calls.get(key)
            if call is None:
                item_id = item.get("id")
                real_id = item_id if isinstance(item_id, str) and item_id else key
                call = self._calls[key] = _Call(real_id, "", "")
            call.fields.update(item_fields(item, "function_call"))
            call.name = call.name or text_of(item.get("name"), "a function call's name")
            call.call_id = call.call_id or text_of(item.get("call_id"), "a function call's call_id")
            initial = text_of(item.get("arguments"), "a function call's arguments")
            if initial and not call.args:
                call.args.append(initial)
            if call.name and call.call_id:
                self._start(call)
        elif kind == "reasoning":
            self._reasoning = _Reasoning(key)
        elif item.get("call_id") or kind == "mcp_approval_request":
            self._refuse(item, kind)
        elif kind.endswith("_call"):  # web_search_call, mcp_call …: the provider runs these
            call_id = text_of(item.get("id"), "an output item's id") or key
            self.out.append(ToolInputStart(call_id, executed_name(item, kind), True))
        elif kind not in self._unknown:
            self._unknown.add(kind)
            log.debug("%s: ignored an output item of unknown type %r", self._provider, kind[:100])

    def _refuse(self, item: Mapping[str, Any], kind: str) -> None:
        """An item only the client could answer, for a tool that is not a function tool."""
        name = item.get("name") or item.get("server_label")
        named = f" ({name[:100]!r})" if isinstance(name, str) and name else ""
        if kind == "mcp_approval_request":
            fix = "set require_approval to 'never' in the MCP tool's spec"
        else:
            fix = (
                "only function tools run here: remove the tool spec that led to it from "
                "provider_options['tool'] (custom, computer, shell, apply_patch … tools are run "
                "by the client)"
            )
        raise StreamFailure(
            f"{self._provider} sent a {kind[:100]} item{named} that nbagent cannot answer: "
            f"{fix}; the answer is incomplete"
        )

    def _finish(self, item: Mapping[str, Any], key: str) -> None:
        if self._items.get(key):
            return  # already finished (the final response repeats every item)
        self._items[key] = True
        kind = item.get("type")
        if kind == "message":
            raw = self._message_raw(key, item)  # the done item is the final word
            if key not in self._texted:  # a server that sends the text only with the item
                text = message_text(item)
                if text:
                    self._texted.add(key)
                    self._text_item = key
                    self.out.append(TextDelta(text, raw))
        elif kind == "function_call":
            self._receive(self._calls[key], item)
        elif kind == "reasoning":
            self._finish_reasoning(item, key)
        elif isinstance(kind, str) and kind.endswith("_call"):
            call_id = text_of(item.get("id"), "an output item's id") or key
            arguments = item.get("arguments")
            if not isinstance(arguments, str):
                arguments = json.dumps(item.get("action") or {}, ensure_ascii=False)
            marker = {"type": kind, "id": call_id}  # not the item: it may hold a whole image
            self.out.append(ToolInputEnd(call_id))
            call = ToolCall(call_id, executed_name(item, kind), arguments, True, marker)
            self.out.append(ToolCallReceived(call))

    def _finish_reasoning(self, item: Mapping[str, Any], key: str) -> None:
        reasoning = self._reasoning
        if reasoning is None or reasoning.key != key:
            # Its part was closed when the next item began, before this (late) done event:
            # the text is shown, the item cannot be carried any more.
            return
        if not reasoning.texted:  # no deltas came: show the summary the item holds
            text = reasoning_text(item)
            if text:
                reasoning.texted = True
                self.out.append(ReasoningDelta(text))
        reasoning.item = {k: v for k, v in item.items() if k != "status"}

    def _follow(self, follower: Mapping[str, Any] | None) -> None:
        """The reasoning item before ``follower`` is over: close its part, naming what follows.

        Its part is closed with the signature before anything of the follower streams, so the
        history keeps reasoning and what came of it in order.
        """
        reasoning = self._reasoning
        if reasoning is None:
            return
        self._reasoning = None
        if reasoning.item is None and not reasoning.texted:
            return  # nothing to show and nothing to send back
        described = None
        if follower is not None:
            described = {
                "type": follower.get("type"),
                "id": follower.get("id"),
            }
            if follower.get("type") == "function_call":
                described["call_id"] = follower.get("call_id")
            if isinstance(follower.get("phase"), str):
                described["phase"] = follower["phase"]
        signature = reasoning_signature(self._model, reasoning.item, described)
        self.out.append(ReasoningDelta(signature=signature))

    # --- which item an event is about -------------------------------------------------------

    def _item_key(self, item_id: Any, index: Any, *, item: bool = False) -> str:
        """The key of the output item an event is about: by a known id, else by ``output_index``.

        Some servers give every event of one item a fresh id (GitHub Copilot's Responses
        endpoint): ``output_index`` then ties the events together. A known id comes first
        because the final response's ``output`` may leave items out, so its positions are not
        always output indexes. Ids are remembered from item events (``item``) and for new items
        only, so deltas with rotating ids cost no memory.
        """
        has_index = isinstance(index, int) and not isinstance(index, bool)
        has_id = isinstance(item_id, str) and bool(item_id)
        key = self._id_keys.get(item_id) if has_id else None
        if key is None and has_index:
            key = self._index_keys.get(index)
        new = key is None
        if key is None:
            key = f"#{index}" if has_index or not has_id else item_id
        if has_index:
            self._index_keys.setdefault(index, key)
        if has_id and (new or item):
            self._id_keys.setdefault(item_id, key)
        return key

    # --- function calls --------------------------------------------------------------------

    def _call_for(self, payload: Mapping[str, Any]) -> _Call:
        item_id = payload.get("item_id")
        key = self._item_key(item_id, payload.get("output_index"))
        call = self._calls.get(key)
        if call is None:  # arguments before the call's added event: it is named at its done
            real_id = item_id if isinstance(item_id, str) and item_id else key
            call = self._calls[key] = _Call(real_id, "", "")
            self._items[key] = False
        return call

    def _start(self, call: _Call) -> None:
        call.started = True
        self.out.append(ToolInputStart(call.call_id, call.name))
        if call.args:
            self.out.append(ToolInputDelta(call.call_id, "".join(call.args)))

    def _receive(self, call: _Call, item: Mapping[str, Any]) -> None:
        call.fields.update(item_fields(item, "function_call"))
        call.name = call.name or text_of(item.get("name"), "a function call's name")
        call.call_id = call.call_id or (
            text_of(item.get("call_id"), "a function call's call_id")
            or f"call_{uuid.uuid4().hex[:24]}"
        )
        final = item.get("arguments")
        if final is not None:
            call.final = text_of(final, "a function call's arguments")
            if self._lossy:
                call.damaged |= damaged(call.final, True)
        if not call.started:
            self._start(call)
        streamed = "".join(call.args)
        arguments = call.final if call.final is not None else streamed
        if arguments and not streamed:
            self.out.append(ToolInputDelta(call.call_id, arguments))
        if call.damaged:
            arguments = DAMAGED_ARGUMENTS + arguments
        elif item.get("status") == "incomplete":  # its arguments may have stopped short
            arguments = INCOMPLETE_ARGUMENTS + arguments
        elif not arguments.strip():
            arguments = "{}"
        elif call.name in self._strict:
            arguments = drop_added_nulls(arguments, self._strict[call.name])
        call.received = True
        self._function_calls += 1
        self.out.append(ToolInputEnd(call.call_id))
        raw = {ITEM_KEY: dict(call.fields)} if call.fields else None
        self.out.append(ToolCallReceived(ToolCall(call.call_id, call.name, arguments, False, raw)))

    # --- how the response ends ---------------------------------------------------------------

    def _completed(self, payload: dict[str, Any]) -> bool:
        """``response.completed`` or ``response.incomplete``: the last event."""
        response = payload["response"]
        if not isinstance(response, Mapping):
            raise TypeError(f"a response should be an object, not {type(response).__name__}")
        output = response.get("output")
        if output is None:
            output = []  # a server that leaves the output out: the events held everything
        elif not isinstance(output, list):
            raise TypeError(f"a response's output should be a list, not {type(output).__name__}")
        for index, item in enumerate(output):  # items whose events a server left out
            if isinstance(item, Mapping):
                key = self._item_key(item.get("id"), index, item=True)
                if not self._items.get(key):
                    if key not in self._items:
                        self._add(item, key)
                    self._finish(item, key)
        for call in self._calls.values():  # a call that never got its done event
            if not call.received and call.call_id and call.name:
                self._receive(call, {})
        self._follow(None)
        self._usage = _usage(response.get("usage"))
        if payload["type"] == "response.incomplete":
            details = response.get("incomplete_details")
            reason = details.get("reason") if isinstance(details, Mapping) else None
            self._reason = text_of(reason, "incomplete_details.reason") or "incomplete"
            self._status = "incomplete"
        else:
            self._status = "completed"
        return True

    def _failed(self, payload: dict[str, Any]) -> bool:
        response = payload.get("response")
        error = response.get("error") if isinstance(response, Mapping) else None
        detail = _describe(error) or "no details"
        raise StreamFailure(
            f"{self._provider} reported that the response failed: {detail}; the answer is "
            "incomplete",
            retryable=retryable_error(error),
        )

    def _error(self, payload: dict[str, Any]) -> bool:
        error = payload.get("error")
        if not isinstance(error, Mapping):
            error = payload  # the documented shape: code and message beside the type
        raise StreamFailure(
            f"{self._provider} reported an error mid-stream: {_describe(error) or 'no details'}",
            retryable=retryable_error(error),
        )

    def finished(self) -> bool:
        return self._status is not None

    def end(self) -> None:
        if self._status is None:
            raise StreamFailure(
                f"the {self._provider} stream ended before response.completed; the answer is "
                "incomplete",
                retryable=True,
            )
        if self._status == "completed":
            reason: FinishReason = "tool_calls" if self._function_calls else "stop"
            self.out.append(Finish(reason, self._usage, "completed"))
        else:
            raw = self._reason or "incomplete"
            self.out.append(Finish(_INCOMPLETE.get(raw, "other"), self._usage, raw))


def _count(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return 0


def _usage(usage: Any) -> Usage:
    if not isinstance(usage, Mapping):
        return Usage()
    details = usage.get("input_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    return Usage(
        _count(usage.get("input_tokens")), _count(usage.get("output_tokens")), _count(cached)
    )


def _describe(error: Any) -> str:
    """``(code) message`` of an error object, bounded."""
    if not isinstance(error, Mapping):
        return str(error)[:500] if error else ""
    message = error.get("message")
    message = message if isinstance(message, str) else json.dumps(error, default=str)[:300]
    kind = error.get("code") or error.get("type")
    if isinstance(kind, (str, int)) and not isinstance(kind, bool) and kind != "error":
        return f"({kind}) {message}"[:500]
    return message[:500]
