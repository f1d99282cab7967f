"""OpenAI Responses streams over a real socket: whole, split at every byte, faults, retries,
incomplete and failed responses, unknown events, reasoning items, and servers that leave
events out."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nbagent import errors
from nbagent.generation import (
    Finish,
    Generator,
    ReasoningDelta,
    Request,
    StreamError,
    StreamEvent,
    StreamRetry,
    TextDelta,
    ToolCallReceived,
    ToolInputDelta,
    ToolInputEnd,
    ToolInputStart,
    Usage,
    generate,
)
from nbagent.messages import ReasoningPart, user
from nbagent.providers._responses_items import read_reasoning_signature, reasoning_signature
from nbagent.tools import Definition, ToolCall

from .conftest import Reply, Server
from .helpers import HELLO, KEY, answer_of, chunked_transport, collect, on_transport, responses
from .wire import RS_ENCRYPTED, ResponsesTurn, responses_sse, responses_text, rs_usage

MODEL = "gpt-5-mini"  # the adapter's model: reasoning items are recorded under it
RS_ID = "rs_68af4030baa48193b0b43b4c2a176a1a"
MSG_ID = "msg_68af403f3c1c8193b5b2c43e"


def full_turn() -> ResponsesTurn:
    """Reasoning (two summary parts), multi-byte text, then two parallel calls."""
    turn = ResponsesTurn()
    turn.reasoning(["The user wants ", "the weather."], ["Two calls."])
    turn.message("héllo", " 🌍")
    turn.call("call_a", "get_weather", '{"ci', 'ty": "Zürich"}')
    turn.call("call_b", "now", "{}")
    return turn.completed(rs_usage(82, 17, cached=64))


REASONING_ITEM = {
    "id": RS_ID,
    "type": "reasoning",
    "summary": [
        {"type": "summary_text", "text": "The user wants the weather."},
        {"type": "summary_text", "text": "Two calls."},
    ],
    "encrypted_content": RS_ENCRYPTED,
}
FULL_EVENTS: list[StreamEvent] = [
    ReasoningDelta("The user wants "),
    ReasoningDelta("the weather."),
    ReasoningDelta("\n\nTwo calls."),
    ReasoningDelta(
        signature=reasoning_signature(MODEL, REASONING_ITEM, {"type": "message", "id": MSG_ID})
    ),
    TextDelta("héllo"),
    TextDelta(" 🌍"),
    ToolInputStart("call_a", "get_weather"),
    ToolInputDelta("call_a", '{"ci'),
    ToolInputDelta("call_a", 'ty": "Zürich"}'),
    ToolInputEnd("call_a"),
    ToolCallReceived(ToolCall("call_a", "get_weather", '{"city": "Zürich"}')),
    ToolInputStart("call_b", "now"),
    ToolInputDelta("call_b", "{}"),
    ToolInputEnd("call_b"),
    ToolCallReceived(ToolCall("call_b", "now", "{}")),
    Finish("tool_calls", Usage(82, 17, 64), "completed"),
]


def short_turn() -> ResponsesTurn:
    """A short turn for the every-byte tests: multi-byte text and one call in two fragments."""
    turn = ResponsesTurn()
    turn.message("héllo 🌍", item_id="msg_1")
    turn.call("c1", "f", '{"q": "é', '🌍"}')
    return turn.completed(rs_usage(3, 4))


SHORT_EVENTS: list[StreamEvent] = [
    TextDelta("héllo 🌍"),
    ToolInputStart("c1", "f"),
    ToolInputDelta("c1", '{"q": "é'),
    ToolInputDelta("c1", '🌍"}'),
    ToolInputEnd("c1"),
    ToolCallReceived(ToolCall("c1", "f", '{"q": "é🌍"}')),
    Finish("tool_calls", Usage(3, 4), "completed"),
]


#: Events the every-byte tests leave out for length (each is tested whole elsewhere).
REPEATS = ("response.in_progress", "response.content_part.", "response.output_text.done")


def compact(turn: ResponsesTurn) -> bytes:
    """The turn without the repeats, response objects cut to what matters, JSON without spaces:
    about a third of the bytes, for the every-byte loops."""
    out = []
    for name, data in turn.events:
        if name.startswith(REPEATS):
            continue
        if "response" in data:
            response = data["response"]
            kept = ("status", "output", "usage", "error", "incomplete_details")
            cut = {"id": "resp_1", **{k: response[k] for k in kept if k in response}}
            data = {**data, "response": cut}
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        out.append(f"event: {name}\ndata: {text}\n\n")
    return "".join(out).encode()


async def test_whole_turn_events_answer_and_request(server: Server) -> None:
    server.queue(Reply(full_turn().body()))
    model = responses(server)
    assert await collect(model) == FULL_EVENTS
    sent = server.requests[0]
    assert (sent.method, sent.path) == ("POST", "/v1/responses")
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    body = sent.json
    assert body["stream"] is True and body["store"] is False
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["input"] == [{"role": "user", "content": "hi"}]

    server.queue(Reply(full_turn().body()))
    answer = await generate(model, HELLO)
    assert answer.ok and answer.text == "héllo 🌍"
    assert [c.input for c in answer.tool_calls()] == [{"city": "Zürich"}, {}]
    assert answer.usage == Usage(82, 17, 64)
    reasoning = answer.message().content[0]
    assert isinstance(reasoning, ReasoningPart)
    assert reasoning.text == "The user wants the weather.\n\nTwo calls."
    payload = read_reasoning_signature(reasoning.signature)
    assert payload is not None and payload["item"] == REASONING_ITEM
    assert payload["next"] == {"type": "message", "id": MSG_ID} and payload["model"] == MODEL
    await model.aclose()


async def test_split_at_every_byte_over_the_socket(server: Server) -> None:
    body = compact(short_turn())
    model = responses(server)
    for at in range(1, len(body)):
        server.queue(Reply([body[:at], body[at:]]))
        assert await collect(model) == SHORT_EVENTS, f"split at byte {at}"
    assert server.connections == 1  # one kept-alive connection served them all
    await model.aclose()


@pytest.mark.parametrize("eol", ["\r\n", "\r"])
async def test_split_at_every_byte_with_cr_line_ends(eol: str) -> None:
    turn = short_turn()
    body = compact(turn).replace(b"\n", eol.encode())
    for at in range(1, len(body)):
        model = on_transport("responses", chunked_transport([body[:at], body[at:]]))
        assert await collect(model) == SHORT_EVENTS, f"split at byte {at}"


async def test_the_whole_verbose_stream_one_byte_at_a_time(server: Server) -> None:
    body = full_turn().body()
    server.queue(Reply([body[i : i + 1] for i in range(len(body))]))
    model = responses(server)
    assert await collect(model) == FULL_EVENTS
    await model.aclose()


async def test_unknown_events_and_item_types_are_ignored(server: Server) -> None:
    turn = short_turn()
    extra = [
        ("response.some_future_event.delta", {"type": "response.some_future_event.delta"}),
        (
            "response.output_item.added",
            {"type": "response.output_item.added", "output_index": 9, "item": {"type": "memo"}},
        ),
        ("response.output_text.annotation.added", {"annotation": {"type": "url_citation"}}),
    ]
    events: list[Any] = list(turn.events)
    events[4:4] = [(name, {"type": name, **data}) for name, data in extra]
    server.queue(Reply(responses_sse(events)))
    model = responses(server)
    assert await collect(model) == SHORT_EVENTS
    await model.aclose()


# --- how a response ends --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reason", "finish", "status"),
    [
        ("max_output_tokens", "length", "length"),
        ("content_filter", "content_filter", "failed"),
        ("max_messages", "other", "failed"),
    ],
)
async def test_an_incomplete_response_never_hands_out_its_calls(
    server: Server, reason: str, finish: str, status: str
) -> None:
    turn = ResponsesTurn()
    turn.message("Let me")
    turn.call("c1", "rm", '{"path": "/"}')  # looks complete; the response is not
    server.queue(Reply(turn.incomplete(reason).body()))
    model = responses(server)
    events = await collect(model)
    assert events[-1] == Finish(finish, Usage(82, 17), reason)  # type: ignore[arg-type]
    answer = answer_of(events)
    assert answer.status == status
    with pytest.raises(errors.AnswerIncompleteError, match=reason):
        answer.tool_calls()
    assert answer.message().tool_calls == ()  # nothing in the history waits for an answer
    assert answer.text == "Let me"
    await model.aclose()


async def test_drop_after_completed_loses_nothing(server: Server) -> None:
    server.queue(Reply([responses_text("ok")], end="drop"))
    model = responses(server)
    assert await collect(model) == [TextDelta("ok"), Finish("stop", Usage(82, 17), "completed")]
    await model.aclose()


PARTIAL_TURN = ResponsesTurn()
PARTIAL_TURN.message("hé")
PARTIAL_TURN.call("c", "rm", '{"path": "/')
PARTIAL = PARTIAL_TURN.body()
PARTIAL = PARTIAL[: PARTIAL.index(b"event: response.function_call_arguments.done")]


def failed_event(code: str, message: str) -> bytes:
    failed = ResponsesTurn()
    failed.failed(code, message)
    return responses_sse(failed.events[-1:])


FAULTS = [
    pytest.param([PARTIAL[:-9]], "drop", "dropped mid-response", True, id="drop"),
    pytest.param([PARTIAL], "finish", "ended before response.completed", True, id="eof"),
    pytest.param(
        [
            PARTIAL + b'event: error\ndata: {"type": "error", "code": "server_error", '
            b'"message": "The server had an error", "param": null, "sequence_number": 9}\n\n'
        ],
        "finish",
        "error mid-stream: (server_error) The server had an error",
        True,
        id="error-event",
    ),
    pytest.param(
        [
            PARTIAL + b'event: error\ndata: {"type": "error", "code": "invalid_prompt", '
            b'"message": "Invalid prompt", "param": null, "sequence_number": 9}\n\n'
        ],
        "finish",
        "error mid-stream: (invalid_prompt) Invalid prompt",
        False,
        id="error-event-final",
    ),
    pytest.param(
        [PARTIAL + failed_event("server_error", "The model crashed.")],
        "finish",
        "the response failed: (server_error) The model crashed.",
        True,
        id="failed",
    ),
    pytest.param(
        [PARTIAL + failed_event("rate_limit_exceeded", "Slow down.")],
        "finish",
        "the response failed: (rate_limit_exceeded) Slow down.",
        True,
        id="failed-rate-limit",
    ),
    pytest.param(
        [PARTIAL + failed_event("invalid_prompt", "Flagged.")],
        "finish",
        "the response failed: (invalid_prompt) Flagged.",
        False,
        id="failed-final",
    ),
    pytest.param(
        [PARTIAL + b'event: response.output_text.delta\ndata: {"type": "resp\n\n'],
        "finish",
        "not valid JSON",
        False,
        id="bad-json",
    ),
    pytest.param(
        [PARTIAL + b"data: [1, 2]\n\n"], "finish", "unexpected shape", False, id="not-an-object"
    ),
    pytest.param(
        [PARTIAL + b'data: {"type": "response.output_text.delta", "delta": 5}\n\n'],
        "finish",
        "should be a string, not int",
        False,
        id="wrong-type",
    ),
    pytest.param(
        [PARTIAL + b'data: {"type": "response.completed", "response": [1]}\n\n'],
        "finish",
        "a response should be an object",
        False,
        id="bad-response",
    ),
]


async def fails(model: Generator, message: str) -> list[StreamEvent]:
    events = await collect(model)
    assert isinstance(events[-1], StreamError), events
    error = events[-1].error
    assert isinstance(error, errors.StreamError)
    assert message in str(error), str(error)
    assert not any(isinstance(e, Finish) for e in events)
    assert not any(isinstance(e, ToolCallReceived) for e in events)
    return events


@pytest.mark.parametrize(("body", "end", "message", "retryable"), FAULTS)
async def test_faults(
    server: Server, body: list[bytes], end: str, message: str, retryable: bool
) -> None:
    server.queue(Reply(body, end=end))  # type: ignore[arg-type]
    model = responses(server, max_retries=0)  # no retries left: every fault is final
    events = await fails(model, message)
    assert events[0] == TextDelta("hé")
    assert ToolInputStart("c", "rm") in events  # shown while it streamed, never handed out
    answer = answer_of(events)
    assert answer.status == "failed"
    with pytest.raises(errors.AnswerIncompleteError):
        answer.tool_calls()
    await model.aclose()
    await server.wait_all_closed()


@pytest.mark.parametrize(("body", "end", "message", "retryable"), FAULTS)
async def test_faults_after_output_are_retried_when_transient(
    server: Server, body: list[bytes], end: str, message: str, retryable: bool
) -> None:
    """A transient fault after output began: StreamRetry, then the new answer from its start."""
    server.queue(Reply(body, end=end), Reply(responses_text("again")))  # type: ignore[arg-type]
    model = responses(server, max_retries=1)
    events = await collect(model)
    await model.aclose()
    if not retryable:
        assert isinstance(events[-1], StreamError) and message in str(events[-1].error)
        assert len(server.requests) == 1 and not any(isinstance(e, StreamRetry) for e in events)
        return
    retry = next(e for e in events if isinstance(e, StreamRetry))
    assert message in retry.reason and retry.attempt == 1 and retry.delay >= 0
    assert events[0] == TextDelta("hé")
    after = events[events.index(retry) + 1 :]
    assert after == [TextDelta("again"), Finish("stop", Usage(82, 17), "completed")]
    assert len(server.requests) == 2 and server.requests[0].body == server.requests[1].body
    answer = answer_of(events)
    assert answer.ok and answer.text == "again" and answer.tool_calls() == ()


async def test_a_cut_before_any_output_is_retried_and_announced(server: Server) -> None:
    head = responses_text("ok")
    head = head[: head.index(b"event: response.output_item.added")]
    server.queue(Reply([head], end="drop"), Reply(responses_text("ok")))
    model = responses(server)
    events = await collect(model)
    await model.aclose()
    assert isinstance(events[0], StreamRetry) and events[0].attempt == 1
    assert events[1:] == [TextDelta("ok"), Finish("stop", Usage(82, 17), "completed")]
    assert len(server.requests) == 2


# --- servers that leave events out ----------------------------------------------------------------


def without(turn: ResponsesTurn, *kinds: str) -> bytes:
    return responses_sse([(n, d) for n, d in turn.events if not n.startswith(kinds)])


@pytest.mark.parametrize(
    ("left_out", "carried"),
    [
        pytest.param(
            (
                "response.output_text.delta",
                "response.function_call_arguments.delta",
                "response.reasoning_summary_text.delta",
            ),
            True,
            id="no-deltas",
        ),
        pytest.param(("response.output_item.added",), True, id="no-added-events"),
        pytest.param(
            ("response.output_item.done", "response.function_call_arguments.done"),
            False,  # the reasoning item is only final in its done event: shown, not carried
            id="no-done-events",
        ),
        pytest.param(
            (
                "response.output_",
                "response.function_call_",
                "response.content_part",
                "response.reasoning_",
            ),
            True,
            id="only-the-final-response",
        ),
    ],
)
async def test_a_server_that_leaves_events_out_gives_the_same_answer(
    server: Server, left_out: tuple[str, ...], carried: bool
) -> None:
    server.queue(Reply(full_turn().body()), Reply(without(full_turn(), *left_out)))
    model = responses(server)
    expected = answer_of(await collect(model))
    answer = answer_of(await collect(model))
    await model.aclose()
    assert answer.ok and answer.text == expected.text == "héllo 🌍"
    assert answer.tool_calls() == expected.tool_calls()
    assert len(answer.tool_calls()) == 2
    kinds = [type(p).__name__ for p in answer.message().content]
    assert kinds == ["ReasoningPart", "TextPart", "ToolCall", "ToolCall"]
    reasoning = answer.message().content[0]
    assert isinstance(reasoning, ReasoningPart)
    assert reasoning.text == "The user wants the weather.\n\nTwo calls."
    payload = read_reasoning_signature(reasoning.signature)
    if carried:
        assert answer.message() == expected.message()
        assert payload is not None and payload["item"]["encrypted_content"] == RS_ENCRYPTED
    else:
        assert payload is None


# --- reasoning, provider-run calls, strict calls, invalid bytes ---------------------------------


async def test_reasoning_items_are_closed_in_order_each_naming_what_followed(
    server: Server,
) -> None:
    turn = ResponsesTurn()
    first = turn.reasoning(["Plan."], item_id="rs_1")
    second = turn.reasoning([], item_id="rs_2")  # no summary at all
    turn.call("call_x", "f", "{}", item_id="fc_x")
    last = turn.reasoning(["Done."], item_id="rs_3")  # nothing follows it
    server.queue(Reply(turn.completed().body()))
    model = responses(server)
    answer = answer_of(await collect(model))
    await model.aclose()
    parts = answer.message().content
    assert [type(p).__name__ for p in parts] == [
        "ReasoningPart",
        "ReasoningPart",
        "ToolCall",
        "ReasoningPart",
    ]
    payloads = [
        read_reasoning_signature(p.signature) for p in parts if isinstance(p, ReasoningPart)
    ]
    assert [p["item"] for p in payloads[:2]] == [first, second]  # type: ignore[index]
    assert payloads[0]["next"] == {"type": "reasoning", "id": "rs_2"}  # type: ignore[index]
    assert payloads[1]["next"] == {  # type: ignore[index]
        "type": "function_call",
        "id": "fc_x",
        "call_id": "call_x",
    }
    assert payloads[2] is None  # nothing followed: it can never be sent back, so it is unusable
    signature = parts[3].signature  # type: ignore[union-attr]
    assert signature is not None and json.loads(signature.split(":", 1)[1])["item"] == last
    assert [p.text for p in parts if isinstance(p, ReasoningPart)] == ["Plan.", "", "Done."]


async def test_a_provider_run_call_is_shown_never_handed_out(server: Server) -> None:
    turn = ResponsesTurn()
    search = {
        "id": "ws_68af4030",
        "type": "web_search_call",
        "status": "completed",
        "action": {"type": "search", "query": "weather Zürich"},
    }
    turn.add("response.output_item.added", output_index=0, item={**search, "status": "in_progress"})
    turn.add("response.web_search_call.searching", output_index=0, item_id="ws_68af4030")
    turn.add("response.output_item.done", output_index=0, item=search)
    turn.output.append(search)
    turn.message("Sunny.")
    server.queue(Reply(turn.completed().body()))
    model = responses(server)
    events = await collect(model)
    await model.aclose()
    assert events[:3] == [
        ToolInputStart("ws_68af4030", "web_search", True),
        ToolInputEnd("ws_68af4030"),
        ToolCallReceived(
            ToolCall(
                "ws_68af4030", "web_search", '{"type": "search", "query": "weather Zürich"}', True
            )
        ),
    ]
    assert events[-1] == Finish("stop", Usage(82, 17), "completed")
    answer = answer_of(events)
    assert answer.ok and answer.tool_calls() == () and answer.text == "Sunny."


@pytest.mark.parametrize(
    ("item", "message"),
    [
        (
            {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_1", "name": "grammar"},
            "a custom_tool_call item ('grammar') that nbagent cannot answer: only function tools",
        ),
        (
            {"type": "mcp_approval_request", "id": "mcpr_1", "server_label": "deepwiki"},
            "set require_approval to 'never'",
        ),
    ],
)
async def test_a_call_only_the_client_could_answer_fails_the_answer_clearly(
    server: Server, item: dict[str, Any], message: str
) -> None:
    turn = ResponsesTurn()
    turn.message("Let me")
    turn.add("response.output_item.added", output_index=1, item=item)
    turn.add("response.output_item.done", output_index=1, item=item)
    server.queue(Reply(turn.completed().body()))
    model = responses(server)
    events = await collect(model)
    await model.aclose()
    assert isinstance(events[-1], StreamError) and message in str(events[-1].error)
    assert not any(isinstance(e, (Finish, ToolCallReceived, StreamRetry)) for e in events)
    assert len(server.requests) == 1  # not transient: never asked again


async def test_strict_nulls_are_removed_from_the_call(server: Server) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "units": {"type": "string"}},
        "required": ["city"],
    }
    turn = ResponsesTurn()
    turn.call("c", "w", '{"city": "Bern", "units": null}')
    server.queue(Reply(turn.completed().body()))
    model = responses(server)
    strict = Definition(name="w", input_schema=schema, strict=True)
    events = await collect(model, Request([user("hi")], tools=(strict,)))
    await model.aclose()
    received = [e.call for e in events if isinstance(e, ToolCallReceived)]
    assert received == [ToolCall("c", "w", '{"city": "Bern"}')]


def damaged_body() -> bytes:
    """Text with a bad byte, a call whose arguments hold one, and a clean sibling call."""
    turn = ResponsesTurn()
    turn.message("caf#!")
    turn.call("a", "f", '{"q": "#', 'x"}')
    turn.call("b", "f", '{"q": "é"}')
    turn.completed()
    # the bad byte only in the deltas and the done events of the stream, as a server would
    body = compact(turn)
    return body.replace(b"#", b"\xe9")


async def test_invalid_utf8_is_replaced_and_damaged_calls_are_marked(server: Server) -> None:
    body = damaged_body()
    model = responses(server)
    for pieces in ([body], *([body[:at], body[at:]] for at in range(1, len(body), 7))):
        server.queue(Reply(pieces))
        answer = answer_of(await collect(model))
        assert answer.ok and answer.text == "caf\ufffd!"
        bad, good = answer.tool_calls()
        assert bad.id == "a" and bad.arguments.startswith("(not run: the provider sent these")
        with pytest.raises(errors.ArgumentsError):
            bad.input  # noqa: B018 - not JSON: the loop answers it with an error
        assert good == ToolCall("b", "f", '{"q": "é"}')
    await model.aclose()


def with_rotating_ids(turn: ResponsesTurn) -> bytes:
    """The turn as a proxy that gives every event a fresh item id sends it (GitHub Copilot's
    Responses endpoint does): only ``output_index`` still ties an item's events together."""
    fresh = iter(range(1_000_000))
    events = []
    for name, data in turn.events:
        data = json.loads(json.dumps(data))
        if "item_id" in data:
            data["item_id"] = f"rot_{next(fresh)}"
        if isinstance(data.get("item"), dict):
            data["item"]["id"] = f"rot_{next(fresh)}"
        for item in (data.get("response") or {}).get("output") or ():
            item["id"] = f"rot_{next(fresh)}"
        events.append((name, data))
    return responses_sse(events)


async def test_items_whose_id_changes_from_event_to_event_are_read_once(server: Server) -> None:
    server.queue(Reply(full_turn().body()), Reply(with_rotating_ids(full_turn())))
    model = responses(server)
    expected = answer_of(await collect(model))
    answer = answer_of(await collect(model))
    await model.aclose()
    assert answer.ok and answer.text == expected.text == "héllo 🌍"
    assert answer.tool_calls() == expected.tool_calls()
    kinds = [type(p).__name__ for p in answer.message().content]
    assert kinds == ["ReasoningPart", "TextPart", "ToolCall", "ToolCall"]
    reasoning = answer.message().content[0]
    assert isinstance(reasoning, ReasoningPart)
    assert reasoning.text == "The user wants the weather.\n\nTwo calls."
    payload = read_reasoning_signature(reasoning.signature)
    assert payload is not None and payload["item"]["encrypted_content"] == RS_ENCRYPTED


async def test_a_call_whose_arguments_never_complete_is_never_run(server: Server) -> None:
    # Its deltas stop short of the end; no done event comes; the final response lists the call
    # as incomplete (its arguments so far happen to be valid JSON) or leaves it out.
    cut = ResponsesTurn()
    cut.call("c1", "rm", '{"path": "/"}')  # then the rest of its arguments never came
    cut.call("c2", "rm", '{"path": "/"}')
    cut.events = [
        (n, d)
        for n, d in cut.events
        if not (n.endswith(".done") and "fc_c1" in (d.get("item_id"), d.get("item", {}).get("id")))
    ]
    cut.output[0] = {**cut.output[0], "status": "incomplete"}
    server.queue(Reply(cut.completed().body()))
    model = responses(server)
    answer = answer_of(await collect(model))
    await model.aclose()
    calls = {call.id: call for call in answer.tool_calls()}
    assert calls["c1"].arguments.startswith("(not run: ")
    assert "incomplete" in calls["c1"].arguments
    assert calls["c2"].arguments == '{"path": "/"}'  # its sibling, complete, is unaffected
