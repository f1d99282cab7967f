"""Retries, typed errors, timeouts, cancellation and connection hygiene, for every adapter."""

from __future__ import annotations

import asyncio
import email.utils
import logging
import pickle
import re
import time
import traceback
from typing import Any

import httpx2
import pytest

from nbagent import errors
from nbagent.generation import Finish, StreamError, StreamRetry, TextDelta

from . import wire
from .conftest import Reply, Server
from .helpers import ADAPTERS, HELLO, KEY, collect, on_transport

pytestmark = pytest.mark.parametrize("kind", ["openai", "anthropic", "responses"])


def ok_body(kind: str) -> bytes:
    texts = {"openai": wire.openai_text, "anthropic": wire.anthropic_text}
    return texts.get(kind, wire.responses_text)("ok")


def error_event(kind: str, message: bytes, etype: bytes) -> bytes:
    """A mid-stream error event in each API's own form."""
    if kind == "openai":
        return b'data: {"error": {"message": "' + message + b'", "type": "' + etype + b'"}}\n\n'
    if kind == "responses":
        return (
            b'event: error\ndata: {"type": "error", "code": "'
            + etype
            + b'", "message": "'
            + message
            + b'", "param": null, "sequence_number": 1}\n\n'
        )
    return (
        b'event: error\ndata: {"type": "error", "error": {"type": "' + etype + b'", '
        b'"message": "' + message + b'"}}\n\n'
    )


def make(kind: str, server: Server, **options: Any) -> Any:
    return ADAPTERS[kind](server, **options)


def error_body(kind: str, message: str, etype: str = "invalid_request_error") -> bytes:
    import json

    if kind in ("openai", "responses"):
        return json.dumps({"error": {"message": message, "type": etype, "code": None}}).encode()
    return json.dumps({"type": "error", "error": {"type": etype, "message": message}}).encode()


def json_reply(
    kind: str, status: int, message: str, etype: str = "invalid_request_error", **options: Any
) -> Reply:
    body = error_body(kind, message, etype)
    return Reply(body, status, content_type="application/json", **options)


def assert_no_key(error: BaseException) -> None:
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    assert KEY not in text and KEY not in repr(error) and KEY not in str(error)
    assert error.__cause__ is None and error.__context__ is None


# --- retries -------------------------------------------------------------------------------------


async def test_429_retry_after_seconds_then_success(kind: str, server: Server) -> None:
    server.queue(json_reply(kind, 429, "slow down", headers={"retry-after": "0.2"}))
    server.queue(Reply(ok_body(kind)))
    model = make(kind, server)
    start = time.monotonic()
    events = await collect(model)
    assert time.monotonic() - start >= 0.19  # honoured, not the 1 ms backoff
    # the retry is announced before it is sent (a run counts it against its budget)
    assert events[0] == StreamRetry(events[0].reason, 1, 0.2)  # type: ignore[union-attr]
    assert "HTTP 429: slow down" in events[0].reason  # type: ignore[union-attr]
    assert "\n" not in events[0].reason  # type: ignore[union-attr]
    assert events[1] == TextDelta("ok") and isinstance(events[-1], Finish)
    assert len(server.requests) == 2
    assert server.requests[0].body == server.requests[1].body
    await model.aclose()


@pytest.mark.parametrize(
    ("header", "value", "asked"),
    [
        ("retry-after", "121", r"121 s"),
        ("retry-after-ms", "90000", r"90 s"),
        ("retry-after", "in an hour", "an hour"),
    ],
)
async def test_retry_after_beyond_the_cap_is_raised_at_once(
    kind: str, server: Server, header: str, value: str, asked: str
) -> None:
    sent = time.time()
    if value == "in an hour":
        value = email.utils.formatdate(sent + 3600, usegmt=True)
    server.default = json_reply(kind, 429, "slow down", headers={header: value})
    model = make(kind, server, retry_after_cap=60, max_retries=3)
    with pytest.raises(errors.RateLimitError) as raised:
        await collect(model)
    message = str(raised.value)
    assert len(server.requests) == 1  # neither waited the cap nor retried
    assert "slow down" in message and "HTTP 429" in message
    if asked == "an hour":
        # an HTTP date: the wait is that date less the time it was read, in whole seconds, so
        # as many seconds fewer as went by before the reply (several on a loaded machine)
        found = re.search(r"asked to wait (\d+) s before trying again", message)
        assert found, message
        assert 3600 - (time.time() - sent) - 2 <= int(found.group(1)) <= 3600, message
    else:
        assert re.search(f"asked to wait {asked} before trying again", message), message
    assert "retry_after_cap (60 s)" in message and "did not wait" in message
    assert raised.value.status == 429
    assert_no_key(raised.value)
    await model.aclose()


async def test_retry_after_within_the_cap_is_waited_then_retried(kind: str, server: Server) -> None:
    server.queue(json_reply(kind, 429, "slow down", headers={"retry-after": "0.05"}))
    server.queue(Reply(ok_body(kind)))
    model = make(kind, server, retry_after_cap=0.05)
    events = await collect(model)
    assert isinstance(events[0], StreamRetry) and events[1] == TextDelta("ok")
    assert len(server.requests) == 2
    await model.aclose()


async def test_garbage_retry_after_is_ignored(kind: str, server: Server) -> None:
    for value in ("soon", "-5", "nan", "Thu, 99 Foo 20x"):
        server.queue(json_reply(kind, 429, "slow down", headers={"retry-after": value}))
    server.queue(Reply(ok_body(kind)))
    model = make(kind, server, max_retries=4, backoff_base=0.001)
    events = await collect(model)
    # each wait is the (tiny) exponential backoff, at most 0.001 s × 2**4, none read from the
    # header (not measured by the clock: a busy machine is slow whatever it waits)
    delays = [e.delay for e in events if isinstance(e, StreamRetry)]
    assert len(delays) == 4 and all(0 < delay <= 0.016 for delay in delays), delays
    assert len(server.requests) == 5
    await model.aclose()


@pytest.mark.parametrize("status", [408, 409, 500, 502, 503, 529])
async def test_retryable_status_then_success(kind: str, server: Server, status: int) -> None:
    server.queue(json_reply(kind, status, "hiccup", etype="api_error"), Reply(ok_body(kind)))
    model = make(kind, server)
    events = await collect(model)
    assert [e.attempt for e in events if isinstance(e, StreamRetry)] == [1]
    assert isinstance(events[0], StreamRetry) and f"HTTP {status}" in events[0].reason
    assert events[1] == TextDelta("ok")
    assert len(server.requests) == 2
    await model.aclose()


async def test_attempts_are_bounded(kind: str, server: Server, caplog: Any) -> None:
    server.default = json_reply(kind, 503, "unavailable", etype="overloaded_error")
    model = make(kind, server, max_retries=2)
    with (
        caplog.at_level(logging.INFO, logger="nbagent.providers"),
        pytest.raises(errors.ServerError) as raised,
    ):
        await collect(model)
    assert len(server.requests) == 3
    assert raised.value.status == 503 and raised.value.retryable
    assert "unavailable" in str(raised.value) and "try again later" in str(raised.value)
    assert len([r for r in caplog.records if "retrying" in r.getMessage()]) == 2
    assert_no_key(raised.value)
    await model.aclose()


async def test_x_should_retry_false_is_obeyed(kind: str, server: Server) -> None:
    server.default = json_reply(kind, 500, "no", headers={"x-should-retry": "false"})
    model = make(kind, server)
    with pytest.raises(errors.ServerError):
        await collect(model)
    assert len(server.requests) == 1
    await model.aclose()


@pytest.mark.parametrize(
    ("status", "error_type", "advice"),
    [
        (400, errors.BadRequestError, "fix the request"),
        (401, errors.AuthenticationError, "KEY (or NBAGENT_API_KEY)"),
        (403, errors.PermissionDeniedError, "may not use this model"),
        (404, errors.NotFoundError, "check the model name"),
        (422, errors.BadRequestError, "check the request"),
    ],
)
async def test_client_errors_are_typed_and_never_retried(
    kind: str, server: Server, status: int, error_type: type, advice: str
) -> None:
    # the server echoes the key, as some proxies do: it must not reach the message
    server.default = json_reply(kind, status, f"Incorrect API key provided: {KEY}")
    model = make(kind, server)
    with pytest.raises(error_type) as raised:
        await collect(model)
    error = raised.value
    assert len(server.requests) == 1
    assert error.status == status and not error.retryable
    assert f"HTTP {status}" in str(error) and advice in str(error)
    assert "Incorrect API key provided: ***" in str(error)
    assert_no_key(error)
    assert KEY not in repr(model)
    await model.aclose()


async def test_plain_text_error_body(kind: str, server: Server) -> None:
    server.default = Reply(b"upstream exploded", 400, content_type="text/plain")
    model = make(kind, server)
    with pytest.raises(errors.BadRequestError, match="upstream exploded"):
        await collect(model)
    await model.aclose()


async def test_connection_refused_after_bounded_attempts(
    kind: str, free_port: int, caplog: Any
) -> None:
    model = ADAPTERS[kind](_Nowhere(free_port), max_retries=2)
    with (
        caplog.at_level(logging.INFO, logger="nbagent.providers"),
        pytest.raises(errors.ProviderConnectionError) as raised,
    ):
        await collect(model)
    message = str(raised.value)
    assert f"127.0.0.1:{free_port}" in message and "server is running" in message
    assert "after 3 attempts" in message
    assert len([r for r in caplog.records if "retrying" in r.getMessage()]) == 2
    assert_no_key(raised.value)
    assert all(KEY not in r.getMessage() for r in caplog.records)
    await model.aclose()


async def test_one_attempt_is_said_in_the_singular(kind: str, free_port: int) -> None:
    model = ADAPTERS[kind](_Nowhere(free_port), max_retries=0)
    with pytest.raises(errors.ProviderConnectionError) as raised:
        await collect(model)
    assert "after 1 attempt)" in str(raised.value)  # not "after 1 attempts"
    await model.aclose()


class _Nowhere:
    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"


# --- timeouts -------------------------------------------------------------------------------------


async def test_no_response_in_time_raises_a_timeout(kind: str, server: Server) -> None:
    # the reply would come, late: the client must give up on it after its own 0.1 s each time
    server.default = Reply(ok_body(kind), before_headers=60.0)
    model = make(kind, server, timeout=0.1, max_retries=1)
    with pytest.raises(errors.ProviderTimeoutError, match=r"no response within 0\.1 s") as raised:
        await collect(model)
    assert len(server.requests) == 2  # retried once
    # both requests were given up by the client, neither answered (the server waits 60 s)
    await server.wait_all_closed()
    assert server.abandoned == 2
    assert_no_key(raised.value)
    await model.aclose()


async def test_a_stalled_stream_becomes_a_stream_error(kind: str, server: Server) -> None:
    body = ok_body(kind)
    server.queue(Reply([body[: len(body) // 2]], end="hang"))
    model = make(kind, server, timeout=0.15, max_retries=0)
    events = await collect(model)
    assert isinstance(events[-1], StreamError)
    assert "stalled" in str(events[-1].error) and "0.15 s" in str(events[-1].error)
    await model.aclose()
    await server.wait_all_closed()


async def test_a_stalled_stream_is_asked_for_again(kind: str, server: Server) -> None:
    body = ok_body(kind)
    first_event_end = body.index(b"\n\n", body.index(b'"ok"')) + 2
    server.queue(Reply([body[:first_event_end]], end="hang"), Reply(ok_body(kind)))
    model = make(kind, server, timeout=0.15, max_retries=1)
    events = await collect(model)
    await model.aclose()
    retries = [e for e in events if isinstance(e, StreamRetry)]
    assert len(retries) == 1 and "stalled" in retries[0].reason
    assert events[0] == TextDelta("ok") and events[-2:][0] == TextDelta("ok")
    assert isinstance(events[-1], Finish)
    await server.wait_all_closed()


async def test_connect_timeout_is_configurable_and_mapped(kind: str) -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectTimeout("timed out", request=request)

    model = on_transport(kind, httpx2.MockTransport(handler), connect_timeout=0.25, max_retries=0)
    with pytest.raises(errors.ProviderTimeoutError, match=r"longer than 0.25 s") as raised:
        await collect(model)
    assert "connect_timeout" in str(raised.value)
    client = model._get_client()
    assert (client.timeout.connect, client.timeout.read) == (0.25, 600.0)
    await model.aclose()


# --- cancellation and connection hygiene ------------------------------------------------------


async def test_cancelling_the_consumer_closes_the_connection_promptly(
    kind: str, server: Server
) -> None:
    body = ok_body(kind)
    first_event_end = body.index(b"\n\n", body.index(b'"ok"')) + 2
    server.queue(Reply([body[:first_event_end]], end="hang"))
    model = make(kind, server)
    got_first = asyncio.Event()

    async def consume() -> None:
        async for _ in model.stream(HELLO):
            got_first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(got_first.wait(), 2)
    assert server.open == 1
    cancelled_at = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    closed_at = await server.wait_all_closed(timeout=1.0)
    assert closed_at - cancelled_at < 0.5
    await model.aclose()


async def test_closing_the_stream_early_closes_the_connection(kind: str, server: Server) -> None:
    body = ok_body(kind)
    server.queue(Reply([body[: body.index(b"\n\n", body.index(b'"ok"')) + 2]], end="hang"))
    model = make(kind, server)
    stream = model.stream(HELLO)
    async for _ in stream:  # type: ignore[attr-defined]
        break
    await stream.aclose()  # type: ignore[attr-defined]
    await server.wait_all_closed(timeout=1.0)
    await model.aclose()


async def test_cancel_while_waiting_for_a_retry(kind: str, server: Server) -> None:
    server.default = json_reply(kind, 429, "wait", headers={"retry-after": "30"})
    model = make(kind, server, retry_after_cap=30)
    task = asyncio.create_task(collect(model))
    for _ in range(1000):  # the first attempt arrives (a busy machine may take a while)
        if server.requests:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.1)  # it is answered 429; the retry waits 30 s
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(server.requests) == 1
    await model.aclose()
    await server.wait_all_closed()


async def test_pool_has_no_busy_connection_after_runs(kind: str, server: Server) -> None:
    model = make(kind, server, max_retries=0)
    for reply in (
        Reply(ok_body(kind)),
        Reply([ok_body(kind)[:40]], end="drop"),
        Reply(ok_body(kind)),
    ):
        server.queue(reply)
        await collect(model)
    pool = model._get_client()._transport._pool
    assert all(c.is_idle() or c.is_closed() for c in pool.connections)
    assert server.open <= 1  # the kept-alive one, idle
    await model.aclose()
    await server.wait_all_closed(timeout=1.0)
    assert server.open == 0


async def test_adapter_repr_and_events_never_show_the_key(kind: str, server: Server) -> None:
    server.queue(Reply(error_event(kind, b"bad key " + KEY.encode(), b"authentication_error")))
    model = make(kind, server)
    events = await collect(model)
    assert isinstance(events[-1], StreamError)
    assert KEY not in repr(events) and KEY not in str(events[-1].error)
    assert KEY not in repr(model) and "***" in repr(model)
    assert KEY not in repr(vars(model))
    with pytest.raises(TypeError):
        pickle.dumps(model)
    await model.aclose()


def test_one_adapter_across_event_loops(kind: str) -> None:
    """A notebook runs each cell's agent on a new loop: the adapter must follow (not crash)."""
    import threading

    loop = asyncio.new_event_loop()
    server = Server()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(5)
    try:
        model = make(kind, server)
        for _ in range(3):
            server.queue(Reply(ok_body(kind)))
            events = asyncio.run(collect(model))
            assert events[0] == TextDelta("ok") and isinstance(events[-1], Finish)
        assert len(server.requests) == 3
        assert server.connections == 3  # a fresh client (and connection) per loop
        # each loop's shutdown closed its client: no idle connection outlived its loop
        asyncio.run_coroutine_threadsafe(server.wait_all_closed(2.0), loop).result(5)
    finally:
        asyncio.run_coroutine_threadsafe(server.close(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


# --- keys and headers that cannot be sent -------------------------------------------------------


async def test_a_key_read_from_a_file_with_its_newline_works(kind: str, server: Server) -> None:
    server.queue(Reply(ok_body(kind)))
    model = make(kind, server, api_key=KEY + "\n")
    assert (await collect(model))[0] == TextDelta("ok")
    sent = server.requests[0].headers
    assert sent.get("authorization", sent.get("x-api-key")) in (f"Bearer {KEY}", KEY)
    await model.aclose()


async def test_an_unsendable_header_says_so_and_never_shows_its_value(
    kind: str, server: Server
) -> None:
    model = make(kind, server)
    model.extra_headers["x-forwarded-key"] = KEY + "\nx"  # set behind the adapter's back
    with pytest.raises(errors.ConfigurationError, match="could not be sent") as raised:
        await collect(model)
    assert "could not reach" not in str(raised.value)
    assert_no_key(raised.value)
    assert server.requests == []  # nothing went out, nothing was retried
    await model.aclose()


async def test_credentials_a_server_echoes_are_redacted_in_errors(
    kind: str, server: Server
) -> None:
    other = "sk-proj-Zq81" + "x" * 40  # not our key, but shaped like one
    echo = f"bad auth header Authorization: Bearer {other} from https://bob:pw123@proxy"
    server.default = json_reply(kind, 401, echo)
    model = make(kind, server)
    with pytest.raises(errors.AuthenticationError) as raised:
        await collect(model)
    message = str(raised.value)
    assert other not in message and "pw123" not in message
    assert "Authorization: ***" in message and "https://***@proxy" in message
    await model.aclose()
    server.default = None
    server.queue(Reply(error_event(kind, b"leaked " + other.encode(), b"x")))
    model = make(kind, server)
    events = await collect(model)
    assert isinstance(events[-1], StreamError)
    assert other not in str(events[-1].error) and "leaked ***" in str(events[-1].error)
    await model.aclose()


async def test_a_json_error_under_status_200_is_reported_not_retried(
    kind: str, server: Server
) -> None:
    # Some OpenAI-compatible gateways answer 200 with a JSON error body instead of a stream.
    body = b'{"error": {"message": "model \\"nope\\" not found", "type": "invalid_request_error"}}'
    server.default = Reply(body, content_type="application/json")
    model = make(kind, server)
    events = await collect(model)
    await model.aclose()
    assert len(server.requests) == 1
    assert len(events) == 1 and isinstance(events[0], StreamError)
    message = str(events[0].error)
    assert 'model "nope" not found' in message and "invalid_request_error" in message


async def test_a_whole_json_document_instead_of_a_stream_says_so(kind: str, server: Server) -> None:
    body = (
        b'{"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"index": 0, '
        b'"message": {"role": "assistant", "content": "Hello"}, "finish_reason": "stop"}]}'
    )
    server.default = Reply(body, content_type="application/json")
    model = make(kind, server)
    events = await collect(model)
    await model.aclose()
    assert len(server.requests) == 1
    assert len(events) == 1 and isinstance(events[0], StreamError)
    assert "not an event stream" in str(events[0].error)


async def test_a_web_page_instead_of_a_stream_points_at_the_base_url(
    kind: str, server: Server
) -> None:
    page = b"<!DOCTYPE html><html><head><title>Sign in</title></head><body>...</body></html>"
    server.default = Reply(page, content_type="text/html; charset=utf-8")
    model = make(kind, server)
    events = await collect(model)
    await model.aclose()
    assert len(server.requests) == 1
    assert len(events) == 1 and isinstance(events[0], StreamError)
    message = str(events[0].error)
    assert "web page" in message and "base URL" in message
