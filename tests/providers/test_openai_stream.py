"""OpenAI Chat Completions streams over a real socket: whole, split, slow, quirks and faults."""

from __future__ import annotations

import time
from typing import Any

import pytest

from nbagent import errors
from nbagent._ground.textbuf import parse_partial_json
from nbagent.generation import (
    Finish,
    Generator,
    ReasoningDelta,
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
from nbagent.tools import ToolCall

from . import wire
from .conftest import Reply, Server
from .helpers import HELLO, KEY, answer_of, chunked_transport, collect, on_transport, openai
from .wire import oa_call, oa_chunk, oa_usage, openai_sse

#: A short turn for the every-byte tests: multi-byte text and one call in two fragments.
SHORT = [
    {"choices": [{"index": 0, "delta": {"content": "héllo 🌍"}, "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": [oa_call(0, "c1", "f", '{"q": "é')]}}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": [oa_call(0, args='🌍"}')]}}]},
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}},
]
SHORT_EVENTS = [
    TextDelta("héllo 🌍"),
    ToolInputStart("c1", "f"),
    ToolInputDelta("c1", '{"q": "é'),
    ToolInputDelta("c1", '🌍"}'),
    ToolInputEnd("c1"),
    ToolCallReceived(ToolCall("c1", "f", '{"q": "é🌍"}')),
    Finish("tool_calls", Usage(3, 4), "tool_calls"),
]


async def test_whole_turn_events_answer_and_request(server: Server) -> None:
    server.queue(Reply(openai_sse(wire.OPENAI_TURN)))
    model = openai(server)
    assert await collect(model) == wire.OPENAI_TURN_EVENTS
    sent = server.requests[0]
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.json["stream"] is True
    assert sent.json["stream_options"] == {"include_usage": True}

    server.queue(Reply(openai_sse(wire.OPENAI_TURN)))
    answer = await generate(model, HELLO)
    assert answer.ok and answer.text == "héllo 🌍"
    assert [c.input for c in answer.tool_calls()] == [{"city": "Zürich"}, {}]
    assert answer.usage == Usage(82, 17, 64)
    await model.aclose()


async def test_split_at_every_byte_over_the_socket(server: Server) -> None:
    body = openai_sse(SHORT)
    model = openai(server)
    for at in range(1, len(body)):
        server.queue(Reply([body[:at], body[at:]]))
        assert await collect(model) == SHORT_EVENTS, f"split at byte {at}"
    assert server.connections == 1  # one kept-alive connection served them all
    await model.aclose()


@pytest.mark.parametrize("eol", ["\r\n", "\r"])
async def test_split_at_every_byte_with_cr_line_ends(eol: str) -> None:
    body = openai_sse(SHORT, eol=eol)
    for at in range(1, len(body)):
        model = on_transport("openai", chunked_transport([body[:at], body[at:]]))
        assert await collect(model) == SHORT_EVENTS, f"split at byte {at}"


async def test_one_byte_at_a_time(server: Server) -> None:
    body = openai_sse(SHORT)
    server.queue(Reply([body[i : i + 1] for i in range(len(body))]))
    model = openai(server)
    assert await collect(model) == SHORT_EVENTS
    await model.aclose()


async def test_slow_stream_arrives_incrementally(server: Server) -> None:
    chunks = [oa_chunk({"content": f"w{i} "}) for i in range(6)] + [oa_chunk({}, "stop")]
    pieces = [openai_sse([c], done=False) for c in chunks] + [b"data: [DONE]\n\n"]
    server.queue(Reply(pieces, delay=0.05))
    model = openai(server)
    arrivals = []
    start = time.monotonic()
    async for event in model.stream(HELLO):
        arrivals.append((time.monotonic() - start, event))
    assert [e for _, e in arrivals][-1] == Finish("stop", Usage(), "stop")
    assert arrivals[-1][0] - arrivals[0][0] > 0.25  # the first word came long before the end
    await model.aclose()


# --- quirks of compatible servers ---------------------------------------------------------------


async def test_comments_keepalives_crlf_and_no_done(server: Server) -> None:
    body = (
        ": OPENROUTER PROCESSING\r\n\r\n:\r\n"
        + openai_sse(SHORT[:2], done=False, eol="\r\n").decode()
        + ": keep-alive\r\n\r\n"
        + openai_sse(SHORT[2:], done=False, eol="\r\n").decode()
    ).encode()
    server.queue(Reply(body))
    model = openai(server)
    assert await collect(model) == SHORT_EVENTS
    await model.aclose()


async def test_missing_usage_chunk_gives_zero_usage(server: Server) -> None:
    server.queue(Reply(openai_sse([oa_chunk({"content": "ok"}), oa_chunk({}, "stop")])))
    model = openai(server)
    assert await collect(model) == [TextDelta("ok"), Finish("stop", Usage(), "stop")]
    await model.aclose()


async def test_calls_sharing_one_index_are_told_apart_by_id(server: Server) -> None:
    # Ollama-style: every call complete in one chunk, all at index 0
    server.queue(
        Reply(
            openai_sse(
                [
                    oa_chunk({"tool_calls": [oa_call(0, "call_1", "a", '{"x": 1}')]}),
                    oa_chunk({"tool_calls": [oa_call(0, "call_2", "b", '{"y": 2}')]}),
                    oa_chunk({}, "tool_calls"),
                ]
            )
        )
    )
    model = openai(server)
    events = await collect(model)
    calls = [e.call for e in events if isinstance(e, ToolCallReceived)]
    assert calls == [ToolCall("call_1", "a", '{"x": 1}'), ToolCall("call_2", "b", '{"y": 2}')]
    await model.aclose()


async def test_empty_string_arguments_become_an_empty_object(server: Server) -> None:
    server.queue(
        Reply(
            openai_sse(
                [oa_chunk({"tool_calls": [oa_call(0, "c", "now", "")]}), oa_chunk({}, "tool_calls")]
            )
        )
    )
    model = openai(server)
    events = await collect(model)
    assert events == [
        ToolInputStart("c", "now"),
        ToolInputEnd("c"),
        ToolCallReceived(ToolCall("c", "now", "{}")),
        Finish("tool_calls", Usage(), "tool_calls"),
    ]
    await model.aclose()


async def test_finish_reason_stop_with_calls_is_reported_as_tool_calls(server: Server) -> None:
    server.queue(
        Reply(
            openai_sse(
                [
                    oa_chunk({"tool_calls": [oa_call(0, "c", "f", "{}")]}),
                    oa_chunk({}, "stop"),
                    oa_usage(),
                ]
            )
        )
    )
    model = openai(server)
    events = await collect(model)
    assert events[-1] == Finish("tool_calls", Usage(82, 17), "stop")
    await model.aclose()


async def test_several_calls_in_one_chunk_and_missing_ids(server: Server) -> None:
    server.queue(
        Reply(
            openai_sse(
                [
                    oa_chunk(
                        {"tool_calls": [oa_call(0, None, "a", "{"), oa_call(1, None, "b", "{")]}
                    ),
                    oa_chunk({"tool_calls": [oa_call(0, args="}"), oa_call(1, args="}")]}),
                    oa_chunk({}, "tool_calls"),
                ]
            )
        )
    )
    model = openai(server)
    events = await collect(model)
    calls = [e.call for e in events if isinstance(e, ToolCallReceived)]
    assert [(c.name, c.arguments) for c in calls] == [("a", "{}"), ("b", "{}")]
    assert calls[0].id != calls[1].id and all(c.id.startswith("call_") for c in calls)
    await model.aclose()


async def test_reasoning_and_refusal_deltas(server: Server) -> None:
    server.queue(
        Reply(
            openai_sse(
                [
                    oa_chunk({"reasoning_content": "thinking…"}),
                    oa_chunk({"reasoning": "more"}),
                    oa_chunk({"refusal": "I can't."}),
                    oa_chunk({}, "content_filter"),
                ]
            )
        )
    )
    model = openai(server)
    assert await collect(model) == [
        ReasoningDelta("thinking…"),
        ReasoningDelta("more"),
        TextDelta("I can't."),
        Finish("content_filter", Usage(), "content_filter"),
    ]
    await model.aclose()


@pytest.mark.parametrize("framing", ["length", "close"])
async def test_other_framings(server: Server, framing: str) -> None:
    server.queue(Reply(openai_sse(SHORT), framing=framing))  # type: ignore[arg-type]
    model = openai(server)
    assert await collect(model) == SHORT_EVENTS
    await model.aclose()


async def test_length_stop_keeps_partial_calls_out_of_reach(server: Server) -> None:
    server.queue(
        Reply(
            openai_sse(
                [
                    oa_chunk({"tool_calls": [oa_call(0, "c", "f", '{"a": "trunc')]}),
                    oa_chunk({}, "length"),
                ]
            )
        )
    )
    model = openai(server)
    answer = await generate(model, HELLO)
    assert answer.status == "length"
    with pytest.raises(errors.AnswerIncompleteError):
        answer.tool_calls()
    await model.aclose()


# --- faults: the answer is failed, its partial calls never executable ---------------------------

PARTIAL = openai_sse(
    [oa_chunk({"content": "hé"}), oa_chunk({"tool_calls": [oa_call(0, "c", "rm", '{"path": "/')]})],
    done=False,
)


async def fails(model: Generator, message: str) -> list[StreamEvent]:
    events = await collect(model)
    assert isinstance(events[-1], StreamError), events
    error = events[-1].error
    assert isinstance(error, errors.StreamError)
    assert message in str(error), str(error)
    assert not any(isinstance(e, Finish) for e in events)
    assert not any(isinstance(e, ToolCallReceived) for e in events)
    return events


FAULTS = [
    pytest.param([PARTIAL[:-9]], "drop", "dropped mid-response", True, id="drop"),
    pytest.param([PARTIAL], "finish", "without a finish reason", True, id="eof-no-finish"),
    pytest.param(
        [PARTIAL + b"data: [DONE]\n\n"],
        "finish",
        "ended with [DONE] but no finish reason, and the arguments of call 'rm' are incomplete",
        True,
        id="done-no-finish-cut-call",
    ),
    pytest.param(
        [
            PARTIAL + b'data: {"error": {"message": "The server had an error", '
            b'"type": "server_error"}}\n\n'
        ],
        "finish",
        "error mid-stream (server_error): The server had an error",
        True,
        id="error-object",
    ),
    pytest.param(
        [PARTIAL + b'data: {"error": {"message": "Upstream busy", "code": 502}}\n\n'],
        "finish",
        "error mid-stream (502): Upstream busy",
        True,
        id="error-object-5xx-code",
    ),
    pytest.param(
        [
            PARTIAL + b'data: {"error": {"message": "Invalid prompt", '
            b'"type": "invalid_request_error"}}\n\n'
        ],
        "finish",
        "error mid-stream (invalid_request_error): Invalid prompt",
        False,
        id="error-object-final",
    ),
    pytest.param(
        [PARTIAL + b'data: {"choices": [{"delta": {"conte\n\n'],
        "finish",
        "not valid JSON",
        False,
        id="bad-json",
    ),
    pytest.param(
        [PARTIAL + b"data: [1, 2]\n\n"], "finish", "unexpected shape", False, id="not-an-object"
    ),
]


@pytest.mark.parametrize(("body", "end", "message", "retryable"), FAULTS)
async def test_faults(
    server: Server, body: list[bytes], end: str, message: str, retryable: bool
) -> None:
    server.queue(Reply(body, end=end))  # type: ignore[arg-type]
    model = openai(server, max_retries=0)  # no retries left: every fault is final
    events = await fails(model, message)
    assert events[0] == TextDelta("hé")
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
    server.queue(Reply(body, end=end), Reply(wire.openai_text("again")))  # type: ignore[arg-type]
    model = openai(server, max_retries=1)
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
    assert after == [TextDelta("again"), Finish("stop", Usage(82, 17), "stop")]
    assert len(server.requests) == 2 and server.requests[0].body == server.requests[1].body
    answer = answer_of(events)
    assert answer.ok and answer.text == "again" and answer.tool_calls() == ()


async def test_mid_stream_retries_share_the_budget_and_then_fail(server: Server) -> None:
    cut = Reply([PARTIAL[:-9]], end="drop")
    server.queue(
        Reply(b'{"error": {"message": "busy"}}', 503, content_type="application/json"),
        cut,
        cut,
    )
    model = openai(server, max_retries=2)
    events = await collect(model)
    await model.aclose()
    # one retry before output (the 503), one after the first drop; the second drop is final
    assert len(server.requests) == 3
    assert [e.attempt for e in events if isinstance(e, StreamRetry)] == [1, 2]
    assert isinstance(events[-1], StreamError)
    assert "dropped mid-response" in str(events[-1].error)


async def test_a_failed_request_after_a_mid_stream_retry_is_an_event(server: Server) -> None:
    server.queue(
        Reply([PARTIAL[:-9]], end="drop"),
        Reply(b'{"error": {"message": "bad key"}}', 401, content_type="application/json"),
    )
    model = openai(server, max_retries=3)
    events = await collect(model)
    await model.aclose()
    assert isinstance(events[-2], StreamRetry)
    assert isinstance(events[-1], StreamError)
    assert isinstance(events[-1].error, errors.AuthenticationError)
    assert len(server.requests) == 2  # a 401 is never retried


async def test_a_cut_before_any_output_is_retried_and_announced(server: Server) -> None:
    server.queue(Reply([b": keep-alive\n\n"], end="drop"), Reply(wire.openai_text("ok")))
    model = openai(server)
    events = await collect(model)
    await model.aclose()
    assert isinstance(events[0], StreamRetry) and events[0].attempt == 1
    assert events[1:] == [TextDelta("ok"), Finish("stop", Usage(82, 17), "stop")]
    assert len(server.requests) == 2


async def test_done_without_a_finish_reason_completes_a_clean_answer(server: Server) -> None:
    calls = [
        oa_chunk({"content": "ok"}),
        oa_chunk({"tool_calls": [oa_call(0, "c", "f", '{"a": 1}')]}),
    ]
    server.queue(Reply(openai_sse(calls)), Reply(openai_sse(calls[:1])))
    model = openai(server)
    events = await collect(model)
    assert events[-1] == Finish("tool_calls", Usage(), None)
    assert answer_of(events).tool_calls() == (ToolCall("c", "f", '{"a": 1}'),)
    events = await collect(model)
    assert events == [TextDelta("ok"), Finish("stop", Usage(), None)]
    await model.aclose()


async def test_drop_after_the_finish_reason_loses_nothing(server: Server) -> None:
    body = openai_sse([oa_chunk({"content": "ok"}), oa_chunk({}, "stop")], done=False)
    server.queue(Reply([body], end="drop"))
    model = openai(server)
    assert await collect(model) == [TextDelta("ok"), Finish("stop", Usage(), "stop")]
    await model.aclose()


async def test_partial_arguments_parse_as_they_grow(server: Server) -> None:
    fragments = ['{"ci', 'ty": "Zü', 'rich", "days": [1', ", 2]}"]
    server.queue(
        Reply(
            openai_sse(
                [oa_chunk({"tool_calls": [oa_call(0, "c", "w")]})]
                + [oa_chunk({"tool_calls": [oa_call(0, args=f)]}) for f in fragments]
                + [oa_chunk({}, "tool_calls")]
            )
        )
    )
    model = openai(server)
    text = ""
    partials = []
    for event in await collect(model):
        if isinstance(event, ToolInputDelta):
            text += event.delta
            partials.append(parse_partial_json(text))
    assert partials == [
        {},
        {"city": "Zü"},
        {"city": "Zürich", "days": [1]},
        {"city": "Zürich", "days": [1, 2]},
    ]
    await model.aclose()


async def test_only_the_first_choice_is_read(server: Server) -> None:
    other = oa_chunk({"content": "second choice"})
    other["choices"][0]["index"] = 1
    server.queue(Reply(openai_sse([oa_chunk({"content": "first"}), other, oa_chunk({}, "stop")])))
    model = openai(server)
    assert await collect(model) == [TextDelta("first"), Finish("stop", Usage(), "stop")]
    await model.aclose()


def calls_of(chunks: list[Any]) -> list[tuple[str, str, str]]:
    return [
        (e.call.id, e.call.name, e.call.arguments)
        for e in chunks
        if isinstance(e, ToolCallReceived)
    ]


@pytest.mark.parametrize(
    ("chunks", "expected"),
    [
        pytest.param(
            # Poolside: the id of the first chunk is replaced by another in every later chunk
            [
                oa_call(0, "call_A", "exec", ""),
                oa_call(0, "call_B", None, '{"cmd":'),
                oa_call(0, "call_B", None, ' "ls"}'),
            ],
            [("call_A", "exec", '{"cmd": "ls"}')],
            id="id-changes-after-the-first-chunk",
        ),
        pytest.param(
            # a second call's head collides with the first call's index; its tail has its own
            [
                oa_call(0, "c1", "f", '{"a": 1}'),
                oa_call(0, "c2", "g", ""),
                oa_call(1, None, None, '{"b": 2}'),
            ],
            [("c1", "f", '{"a": 1}'), ("c2", "g", '{"b": 2}')],
            id="tail-at-an-index-never-announced",
        ),
        pytest.param(
            # the same call's fragments at different indexes, each naming its id
            [oa_call(0, "c1", "f", '{"a"'), oa_call(1, "c1", None, ": 1}")],
            [("c1", "f", '{"a": 1}')],
            id="one-id-at-several-indexes",
        ),
    ],
)
async def test_fragments_reach_their_call_when_index_or_id_is_unreliable(
    server: Server, chunks: list[dict[str, Any]], expected: list[tuple[str, str, str]]
) -> None:
    body = [oa_chunk({"tool_calls": [c]}) for c in chunks] + [oa_chunk({}, "tool_calls")]
    server.queue(Reply(openai_sse(body)))
    model = openai(server)
    events = await collect(model)
    await model.aclose()
    assert calls_of(events) == expected
    assert answer_of(events).ok


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("eos_token", "stop"),  # text-generation-inference, and servers built like it
        ("stop_sequence", "stop"),
        ("STOP", "stop"),
        ("end_turn", "stop"),  # gateways in front of Anthropic
        ("max_tokens", "length"),
        ("MAX_TOKENS", "length"),
        ("something_new", "other"),
    ],
)
async def test_other_servers_words_for_a_finish_reason(
    server: Server, raw: str, reason: str
) -> None:
    server.queue(Reply(openai_sse([oa_chunk({"content": "Hi"}), oa_chunk({}, raw)])))
    model = openai(server)
    events = await collect(model)
    await model.aclose()
    assert events == [TextDelta("Hi"), Finish(reason, Usage(), raw)]  # type: ignore[arg-type]
