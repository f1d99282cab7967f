"""Anthropic Messages streams over a real socket: whole, split, slow, server tools and faults."""

from __future__ import annotations

import time

import pytest

from nbagent import errors
from nbagent.generation import (
    Finish,
    ProviderToolResultReceived,
    ReasoningDelta,
    StreamError,
    StreamRetry,
    TextDelta,
    ToolCallReceived,
    ToolInputDelta,
    ToolInputEnd,
    ToolInputStart,
    Usage,
    generate,
)
from nbagent.messages import ProviderToolResult, ReasoningPart
from nbagent.tools import ToolCall

from . import wire
from .conftest import Reply, Server
from .helpers import HELLO, KEY, answer_of, anthropic, chunked_transport, collect, on_transport
from .wire import (
    MESSAGE_STOP,
    PING,
    an_block_start,
    an_block_stop,
    an_json,
    an_message_delta,
    an_message_start,
    an_text,
    anthropic_sse,
)

SHORT = [
    ("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 3}}}),
    an_block_start(0, {"type": "text", "text": ""}),
    an_text(0, "héllo 🌍"),
    an_block_stop(0),
    an_block_start(1, {"type": "tool_use", "id": "t1", "name": "f", "input": {}}),
    an_json(1, '{"q": "é'),
    an_json(1, '🌍"}'),
    an_block_stop(1),
    (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 4},
        },
    ),
    MESSAGE_STOP,
]
SHORT_EVENTS = [
    TextDelta("héllo 🌍"),
    ToolInputStart("t1", "f"),
    ToolInputDelta("t1", '{"q": "é'),
    ToolInputDelta("t1", '🌍"}'),
    ToolInputEnd("t1"),
    ToolCallReceived(ToolCall("t1", "f", '{"q": "é🌍"}')),
    Finish("tool_calls", Usage(3, 4), "tool_use"),
]


async def test_whole_turn_events_answer_and_request(server: Server) -> None:
    server.queue(Reply(anthropic_sse(wire.ANTHROPIC_TURN)))
    model = anthropic(server)
    assert await collect(model) == wire.ANTHROPIC_TURN_EVENTS
    sent = server.requests[0]
    assert (sent.method, sent.path) == ("POST", "/v1/messages")
    assert sent.headers["x-api-key"] == KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers

    server.queue(Reply(anthropic_sse(wire.ANTHROPIC_TURN)))
    answer = await generate(model, HELLO)
    assert answer.ok and answer.text == "héllo 🌍"
    assert answer.message().content[0] == ReasoningPart(
        "The user wants the weather.", "EqQBCgIYAhIM1gbcDa9GJwZA"
    )
    assert [c.input for c in answer.tool_calls()] == [{"city": "Zürich"}, {}]
    await model.aclose()


async def test_split_at_every_byte_over_the_socket(server: Server) -> None:
    body = anthropic_sse(SHORT)
    model = anthropic(server)
    for at in range(1, len(body)):
        server.queue(Reply([body[:at], body[at:]]))
        assert await collect(model) == SHORT_EVENTS, f"split at byte {at}"
    assert server.connections == 1
    await model.aclose()


async def test_split_at_every_byte_with_crlf() -> None:
    body = anthropic_sse(SHORT, eol="\r\n")
    for at in range(1, len(body)):
        model = on_transport("anthropic", chunked_transport([body[:at], body[at:]]))
        assert await collect(model) == SHORT_EVENTS, f"split at byte {at}"


async def test_slow_stream_arrives_incrementally(server: Server) -> None:
    events = [
        an_message_start(),
        an_block_start(0, {"type": "text", "text": ""}),
        *[an_text(0, f"w{i} ") for i in range(5)],
        an_block_stop(0),
        an_message_delta("end_turn"),
        MESSAGE_STOP,
    ]
    server.queue(Reply([anthropic_sse([e]) for e in events], delay=0.05))
    model = anthropic(server)
    arrivals = []
    start = time.monotonic()
    async for event in model.stream(HELLO):
        arrivals.append((time.monotonic() - start, event))
    assert arrivals[-1][1] == Finish("stop", Usage(472, 89), "end_turn")
    assert arrivals[-1][0] - arrivals[0][0] > 0.25  # the first word came long before the end
    await model.aclose()


async def test_pings_comments_and_unknown_events_are_ignored(server: Server) -> None:
    body = anthropic_sse(
        [
            PING,
            SHORT[0],
            ": keep-alive\n\n",
            PING,
            *SHORT[1:4],
            ("future_event", {"type": "future_event", "x": 1}),
            an_block_start(9, {"type": "future_block"}),
            an_block_stop(9),
            *SHORT[4:],
        ]
    )
    server.queue(Reply(body))
    model = anthropic(server)
    assert await collect(model) == SHORT_EVENTS
    await model.aclose()


async def test_server_tools_and_redacted_thinking(server: Server) -> None:
    result_content = [
        {
            "type": "web_search_result",
            "url": "https://example.org/zurich",
            "title": "Zürich weather",
            "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5LTQ1NGUtODgxNC1kNjNjNTk1ZWI3Y",
            "page_age": "April 30, 2025",
        }
    ]
    server.queue(
        Reply(
            anthropic_sse(
                [
                    an_message_start(),
                    an_block_start(0, {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}),
                    an_block_stop(0),
                    an_block_start(
                        1,
                        {
                            "type": "server_tool_use",
                            "id": "srvtoolu_1",
                            "name": "web_search",
                            "input": {},
                        },
                    ),
                    an_json(1, '{"query": "weather Zürich"}'),
                    an_block_stop(1),
                    an_block_start(
                        2,
                        {
                            "type": "web_search_tool_result",
                            "tool_use_id": "srvtoolu_1",
                            "content": result_content,
                        },
                    ),
                    an_block_stop(2),
                    an_block_start(3, {"type": "text", "text": ""}),
                    an_text(3, "Sunny."),
                    an_block_stop(3),
                    an_message_delta("end_turn"),
                    MESSAGE_STOP,
                ]
            )
        )
    )
    model = anthropic(server)
    events = await collect(model)
    call = ToolCall(
        "srvtoolu_1", "web_search", '{"query": "weather Zürich"}', provider_executed=True
    )
    result = ProviderToolResult("srvtoolu_1", "web_search", result_content)
    assert events == [
        ReasoningDelta(redacted="EmwKAhgBEgy3va3pzix"),
        ToolInputStart("srvtoolu_1", "web_search", provider_executed=True),
        ToolInputDelta("srvtoolu_1", '{"query": "weather Zürich"}'),
        ToolInputEnd("srvtoolu_1"),
        ToolCallReceived(call),
        ProviderToolResultReceived(result),
        TextDelta("Sunny."),
        Finish("stop", Usage(472, 89), "end_turn"),  # provider-run calls are not the loop's
    ]
    answer = answer_of(events)
    assert answer.ok and answer.tool_calls() == ()
    assert answer.message().content == (
        ReasoningPart("", None, "EmwKAhgBEgy3va3pzix"),
        call,
        result,
        answer.message().content[3],
    )
    await model.aclose()


async def test_web_search_error_result_is_marked(server: Server) -> None:
    error = {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"}
    server.queue(
        Reply(
            anthropic_sse(
                [
                    an_message_start(),
                    an_block_start(
                        0, {"type": "web_search_tool_result", "tool_use_id": "s", "content": error}
                    ),
                    an_block_stop(0),
                    an_message_delta("end_turn"),
                    MESSAGE_STOP,
                ]
            )
        )
    )
    model = anthropic(server)
    events = await collect(model)
    assert events[0] == ProviderToolResultReceived(
        ProviderToolResult("s", "web_search", error, True)
    )
    await model.aclose()


@pytest.mark.parametrize(
    ("stop_reason", "reason"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("refusal", "content_filter"),
        ("pause_turn", "pause"),
        ("model_context_window_exceeded", "length"),
    ],
)
async def test_stop_reasons(server: Server, stop_reason: str, reason: str) -> None:
    server.queue(Reply(wire.anthropic_text("ok", stop_reason)))
    model = anthropic(server)
    events = await collect(model)
    assert events[-1] == Finish(reason, Usage(472, 5), stop_reason)  # type: ignore[arg-type]
    await model.aclose()


# --- faults -------------------------------------------------------------------------------------

PARTIAL = anthropic_sse(
    [
        an_message_start(),
        an_block_start(0, {"type": "text", "text": ""}),
        an_text(0, "hé"),
        an_block_stop(0),
        an_block_start(1, {"type": "tool_use", "id": "t", "name": "rm", "input": {}}),
        an_json(1, '{"path": "/'),
    ]
)
OVERLOADED = (
    b'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", '
    b'"message": "Overloaded"}}\n\n'
)


def error_event(etype: str, message: str) -> bytes:
    return anthropic_sse(
        [("error", {"type": "error", "error": {"type": etype, "message": message}})]
    )


FAULTS = [
    pytest.param([PARTIAL[:-7]], "drop", "dropped mid-response", True, id="drop"),
    pytest.param([PARTIAL], "finish", "without a stop reason", True, id="eof-no-stop"),
    pytest.param(
        [PARTIAL + anthropic_sse([MESSAGE_STOP])],
        "finish",
        "without a stop reason",
        False,
        id="message-stop-without-reason",
    ),
    pytest.param(
        [PARTIAL + OVERLOADED],
        "finish",
        "overloaded_error mid-stream: Overloaded",
        True,
        id="overloaded",
    ),
    *[
        pytest.param(
            [PARTIAL + error_event(etype, "try later")],
            "finish",
            f"{etype} mid-stream: try later",
            True,
            id=etype,
        )
        for etype in ("api_error", "rate_limit_error", "timeout_error")
    ],
    pytest.param(
        [PARTIAL + error_event("invalid_request_error", "prompt is too long")],
        "finish",
        "invalid_request_error mid-stream: prompt is too long",
        False,
        id="invalid_request_error",
    ),
    pytest.param(
        [PARTIAL + b"event: content_block_delta\ndata: {oops\n\n"],
        "finish",
        "not valid JSON",
        False,
        id="json",
    ),
    pytest.param(
        [PARTIAL + b"event: x\ndata: \xc3\x28\n\n"], "finish", "not valid JSON", False, id="utf8"
    ),
    pytest.param(
        [PARTIAL + b'event: content_block_delta\ndata: {"type": "content_block_delta"}\n\n'],
        "finish",
        "unexpected shape",
        False,
        id="shape",
    ),
]


@pytest.mark.parametrize(("body", "end", "message", "retryable"), FAULTS)
async def test_faults(
    server: Server, body: list[bytes], end: str, message: str, retryable: bool
) -> None:
    server.queue(Reply(body, end=end))  # type: ignore[arg-type]
    model = anthropic(server, max_retries=0)  # no retries left: every fault is final
    events = await collect(model)
    assert events[0] == TextDelta("hé")
    assert isinstance(events[-1], StreamError), events
    assert isinstance(events[-1].error, errors.StreamError)
    assert message in str(events[-1].error)
    assert not any(isinstance(e, (Finish, ToolCallReceived)) for e in events)
    answer = answer_of(events)
    assert answer.status == "failed" and answer.partial_tool_calls == ()
    with pytest.raises(errors.AnswerIncompleteError):
        answer.tool_calls()
    await model.aclose()
    await server.wait_all_closed()


@pytest.mark.parametrize(("body", "end", "message", "retryable"), FAULTS)
async def test_faults_after_output_are_retried_when_transient(
    server: Server, body: list[bytes], end: str, message: str, retryable: bool
) -> None:
    """A transient fault after output began: StreamRetry, then the new answer from its start."""
    server.queue(Reply(body, end=end), Reply(wire.anthropic_text("again")))  # type: ignore[arg-type]
    model = anthropic(server, max_retries=1)
    events = await collect(model)
    await model.aclose()
    if not retryable:
        assert isinstance(events[-1], StreamError) and message in str(events[-1].error)
        assert len(server.requests) == 1 and not any(isinstance(e, StreamRetry) for e in events)
        return
    retry = next(e for e in events if isinstance(e, StreamRetry))
    assert message in retry.reason and retry.attempt == 1
    after = events[events.index(retry) + 1 :]
    assert after == [TextDelta("again"), Finish("stop", Usage(472, 5), "end_turn")]
    assert len(server.requests) == 2
    answer = answer_of(events)
    assert answer.ok and answer.text == "again" and answer.tool_calls() == ()


async def test_overloaded_retries_run_out_then_the_error_is_final(server: Server) -> None:
    server.default = Reply(PARTIAL + OVERLOADED)
    model = anthropic(server, max_retries=2)
    events = await collect(model)
    await model.aclose()
    assert len(server.requests) == 3
    assert [e.attempt for e in events if isinstance(e, StreamRetry)] == [1, 2]
    assert isinstance(events[-1], StreamError)
    assert "overloaded_error mid-stream" in str(events[-1].error)
    assert answer_of(events).status == "failed"


async def test_error_event_after_a_complete_call_still_fails_the_answer(server: Server) -> None:
    body = PARTIAL + anthropic_sse([an_json(1, '"}'), an_block_stop(1)]) + OVERLOADED
    server.queue(Reply(body))
    model = anthropic(server, max_retries=0)
    events = await collect(model)
    assert ToolCallReceived(ToolCall("t", "rm", '{"path": "/"}')) in events
    answer = answer_of(events)
    assert answer.status == "failed"
    with pytest.raises(errors.AnswerIncompleteError):
        answer.tool_calls()
    await model.aclose()


# --- a stream that holds more than one message ---------------------------------------------------


def thinking_then_call(signature: str, call_id: str, args: list[str]) -> list[tuple[str, dict]]:
    events: list[tuple[str, dict]] = [
        an_block_start(0, {"type": "thinking", "thinking": ""}),
        wire.an_delta(0, {"type": "thinking_delta", "thinking": f"Thinking for {call_id}."}),
        wire.an_delta(0, {"type": "signature_delta", "signature": signature}),
        an_block_stop(0),
        an_block_start(1, {"type": "tool_use", "id": call_id, "name": "f", "input": {}}),
    ]
    events += [an_json(1, fragment) for fragment in args]
    return events


async def test_a_second_message_spliced_into_the_stream_is_retried_not_merged(
    server: Server,
) -> None:
    # A gateway that retried upstream mid-response and spliced the new message into the same
    # stream: the first message's signed thinking and its half call must not join the second.
    end = [an_block_stop(1), an_message_delta("tool_use", 65), MESSAGE_STOP]
    spliced = anthropic_sse(
        [
            an_message_start(17),
            *thinking_then_call("sig-first", "toolu_first", ['{"q": "Sp']),
            an_message_start(17),
            *thinking_then_call("sig-second", "toolu_2", ['{"q": 1}']),
            *end,
        ]
    )
    clean = anthropic_sse(
        [an_message_start(17), *thinking_then_call("sig-clean", "toolu_c", ['{"q": 2}']), *end]
    )
    server.queue(Reply(spliced), Reply(clean))
    model = anthropic(server)
    events = await collect(model)
    await model.aclose()
    assert sum(isinstance(e, StreamRetry) for e in events) == 1
    assert len(server.requests) == 2
    answer = answer_of(events)
    assert answer.ok
    assert answer.message().content == (
        ReasoningPart("Thinking for toolu_c.", "sig-clean"),
        ToolCall("toolu_c", "f", '{"q": 2}'),
    )


async def test_a_repeated_message_start_before_any_content_is_harmless(server: Server) -> None:
    body = anthropic_sse(
        [
            an_message_start(17),
            an_message_start(17),
            an_block_start(0, {"type": "text", "text": ""}),
            an_text(0, "Hello"),
            an_block_stop(0),
            an_message_delta("end_turn", 5),
            MESSAGE_STOP,
        ]
    )
    server.queue(Reply(body))
    model = anthropic(server)
    events = await collect(model)
    await model.aclose()
    assert events == [TextDelta("Hello"), Finish("stop", Usage(17, 5), "end_turn")]
