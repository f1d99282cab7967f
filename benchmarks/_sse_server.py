"""A loopback HTTP/1.1 server (stdlib asyncio) that streams protocol-accurate SSE, fast.

Run as a separate process (so its CPU does not compete with the client's event loop):
``python benchmarks/_sse_server.py CHUNKS``. It prints ``PORT <n>`` once listening, and serves
until killed or until its stdin closes.

* ``POST .../chat/completions``: an OpenAI ``chat.completion.chunk`` stream: CHUNKS/2 text deltas,
  then one tool call whose JSON arguments arrive in CHUNKS/2 fragments, the finish chunk, a usage
  chunk and ``data: [DONE]``.
* ``POST .../messages``: an Anthropic Messages stream with the same content (``text_delta`` and
  ``input_json_delta`` events between the block start/stop events, ``message_delta``,
  ``message_stop``).
* ``POST .../responses``: an OpenAI Responses stream with the same content
  (``response.created``, then a message item whose text arrives in
  ``response.output_text.delta`` events, a function_call item whose arguments arrive in
  ``response.function_call_arguments.delta`` events, each item framed by
  ``response.output_item.added``/``.done``, and ``response.completed`` holding the whole
  response, as the API sends it).

Every SSE event is one HTTP chunk (``Transfer-Encoding: chunked``), as the real services send
them; the whole response is built once and written in one go, so the server costs ~nothing.

``python benchmarks/_sse_server.py agent`` plays a two-step agent instead (``bench_batch.py``):
a Chat Completions request with no ``tool`` message gets a call of the tool ``lookup``, one with
a tool result gets a short text answer; a request with ``"stream": true`` gets SSE, one without
gets the whole ``chat.completion`` JSON (what SDKs send from their non-streaming ``run``).
"""

from __future__ import annotations

import asyncio
import json
import sys

WORDS = ["alpha ", "beta ", "gamma ", "delta ", "epsilon ", "zeta ", "eta ", "theta "]


def _fragments(half: int) -> list[str]:
    """``half`` fragments that join into the JSON object ``{"text": "..."}``."""
    inner = [f"w{i % 1000:03d} " for i in range(half - 2)]
    return ['{"text": "', *inner, '"}']


def _http(events: list[bytes]) -> bytes:
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
        b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    framed = [b"%x\r\n%s\r\n" % (len(event), event) for event in events]
    return head + b"".join(framed) + b"0\r\n\r\n"


def _dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def openai_body(chunks: int) -> bytes:
    half = chunks // 2
    base = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "bench-model",
        "system_fingerprint": "fp_bench",
    }

    def chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return f"data: {_dumps({**base, 'choices': [choice]})}\n\n".encode()

    events = [chunk({"role": "assistant", "content": WORDS[0]})]
    events += [chunk({"content": WORDS[i % len(WORDS)]}) for i in range(1, half)]
    args = _fragments(half)
    first = {"index": 0, "id": "call_bench", "type": "function"}
    events.append(
        chunk({"tool_calls": [{**first, "function": {"name": "record", "arguments": args[0]}}]})
    )
    events += [
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
        for piece in args[1:]
    ]
    events.append(chunk({}, "tool_calls"))
    usage = {"prompt_tokens": 12, "completion_tokens": chunks, "total_tokens": chunks + 12}
    events.append(f"data: {_dumps({**base, 'choices': [], 'usage': usage})}\n\n".encode())
    events.append(b"data: [DONE]\n\n")
    return _http(events)


def anthropic_body(chunks: int) -> bytes:
    half = chunks // 2

    def event(name: str, data: dict[str, object]) -> bytes:
        return f"event: {name}\ndata: {_dumps({'type': name, **data})}\n\n".encode()

    message = {
        "id": "msg_bench",
        "type": "message",
        "role": "assistant",
        "model": "bench-model",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 1},
    }
    events = [
        event("message_start", {"message": message}),
        event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
    ]
    events += [
        event(
            "content_block_delta",
            {"index": 0, "delta": {"type": "text_delta", "text": WORDS[i % len(WORDS)]}},
        )
        for i in range(half)
    ]
    events.append(event("content_block_stop", {"index": 0}))
    tool = {"type": "tool_use", "id": "toolu_bench", "name": "record", "input": {}}
    events.append(event("content_block_start", {"index": 1, "content_block": tool}))
    events += [
        event(
            "content_block_delta",
            {"index": 1, "delta": {"type": "input_json_delta", "partial_json": piece}},
        )
        for piece in _fragments(half)
    ]
    events.append(event("content_block_stop", {"index": 1}))
    events.append(
        event(
            "message_delta",
            {
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": chunks},
            },
        )
    )
    events.append(event("message_stop", {}))
    return _http(events)


def responses_body(chunks: int) -> bytes:
    half = chunks // 2
    sequence = iter(range(10 * chunks))

    def event(name: str, **data: object) -> bytes:
        payload = {"type": name, "sequence_number": next(sequence), **data}
        return f"event: {name}\ndata: {_dumps(payload)}\n\n".encode()

    def response(status: str, output: list[object], usage: object = None) -> dict[str, object]:
        return {
            "id": "resp_bench",
            "object": "response",
            "created_at": 1700000000,
            "status": status,
            "error": None,
            "incomplete_details": None,
            "model": "bench-model",
            "output": output,
            "parallel_tool_calls": True,
            "store": False,
            "tool_choice": "auto",
            "tools": [],
            "usage": usage,
        }

    text = "".join(WORDS[i % len(WORDS)] for i in range(half))
    message = {"id": "msg_bench", "type": "message", "role": "assistant", "status": "completed"}
    part = {"type": "output_text", "annotations": [], "logprobs": []}
    fragments = _fragments(half)
    call = {
        "id": "fc_bench",
        "type": "function_call",
        "call_id": "call_bench",
        "name": "record",
        "arguments": "".join(fragments),
        "status": "completed",
    }
    done_message = {**message, "content": [{**part, "text": text}]}
    ids = {"item_id": "msg_bench", "output_index": 0, "content_index": 0}
    events = [
        event("response.created", response=response("in_progress", [])),
        event("response.in_progress", response=response("in_progress", [])),
        event(
            "response.output_item.added",
            output_index=0,
            item={**message, "status": "in_progress", "content": []},
        ),
        event("response.content_part.added", **ids, part={**part, "text": ""}),
    ]
    events += [
        event("response.output_text.delta", **ids, delta=WORDS[i % len(WORDS)], logprobs=[])
        for i in range(half)
    ]
    events += [
        event("response.output_text.done", **ids, text=text, logprobs=[]),
        event("response.content_part.done", **ids, part={**part, "text": text}),
        event("response.output_item.done", output_index=0, item=done_message),
        event(
            "response.output_item.added",
            output_index=1,
            item={**call, "arguments": "", "status": "in_progress"},
        ),
    ]
    events += [
        event(
            "response.function_call_arguments.delta",
            item_id="fc_bench",
            output_index=1,
            delta=piece,
        )
        for piece in fragments
    ]
    usage = {
        "input_tokens": 12,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": chunks,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": chunks + 12,
    }
    events += [
        event(
            "response.function_call_arguments.done",
            item_id="fc_bench",
            output_index=1,
            arguments=call["arguments"],
        ),
        event("response.output_item.done", output_index=1, item=call),
        event("response.completed", response=response("completed", [done_message, call], usage)),
    ]
    return _http(events)


def _json_http(value: object) -> bytes:
    body = _dumps(value).encode()
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
    return head % len(body) + body


def agent_bodies() -> dict[tuple[bool, bool], bytes]:
    """(answered a tool, streamed) -> the response: a call of ``lookup``, or the final text."""
    base = {"id": "chatcmpl-b", "created": 1700000000, "model": "bench-model"}
    usage = {"prompt_tokens": 20, "completion_tokens": 8, "total_tokens": 28}
    call = {"index": 0, "id": "call_1", "type": "function"}
    pieces = ['{"query', '": "pri', 'ces"}']
    text = ["All ", "looked ", "up: ", "done."]

    def chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        data = {**base, "object": "chat.completion.chunk", "choices": [choice]}
        return f"data: {_dumps(data)}\n\n".encode()

    last = {**base, "object": "chat.completion.chunk", "choices": [], "usage": usage}
    tail = [f"data: {_dumps(last)}\n\n".encode(), b"data: [DONE]\n\n"]
    calling = [chunk({"role": "assistant", "content": None})]
    calling.append(
        chunk({"tool_calls": [{**call, "function": {"name": "lookup", "arguments": ""}}]})
    )
    calling += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in pieces]
    calling += [chunk({}, "tool_calls"), *tail]
    answering = [chunk({"role": "assistant", "content": ""})]
    answering += [chunk({"content": piece}) for piece in text]
    answering += [chunk({}, "stop"), *tail]

    def whole(message: dict[str, object], finish: str) -> bytes:
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
        return _json_http(
            {**base, "object": "chat.completion", "choices": [choice], "usage": usage}
        )

    function = {"name": "lookup", "arguments": "".join(pieces)}
    return {
        (False, True): _http(calling),
        (True, True): _http(answering),
        (False, False): whole(
            {"role": "assistant", "content": None, "tool_calls": [{**call, "function": function}]},
            "tool_calls",
        ),
        (True, False): whole({"role": "assistant", "content": "".join(text)}, "stop"),
    }


async def serve(chunks: int, agent: bool = False) -> None:
    bodies = (
        {}
        if agent
        else {
            "openai": openai_body(chunks),
            "anthropic": anthropic_body(chunks),
            "responses": responses_body(chunks),
        }
    )
    played = agent_bodies()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1]
                length = 0
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                body = await reader.readexactly(length) if length else b""
                if agent and "chat/completions" in path:
                    answered = b'"role":"tool"' in body or b'"role": "tool"' in body
                    streamed = b'"stream":true' in body or b'"stream": true' in body
                    writer.write(played[(answered, streamed)])
                elif "chat/completions" in path:
                    writer.write(bodies["openai"])
                elif path.endswith("/responses"):
                    writer.write(bodies["responses"])
                elif "messages" in path:
                    writer.write(bodies["anthropic"])
                else:
                    writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.CancelledError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    print(f"PORT {port}", flush=True)
    loop = asyncio.get_running_loop()
    # Stop when the parent closes our stdin (it exited or is done with us).
    await loop.run_in_executor(None, sys.stdin.read)
    server.close()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "agent":
        asyncio.run(serve(0, agent=True))
    else:
        asyncio.run(serve(int(sys.argv[1]) if len(sys.argv) > 1 else 20000))
