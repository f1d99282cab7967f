"""Streaming throughput: 20,000 SSE chunks from a loopback server, through each contender.

The server (``_sse_server.py``, a separate process) streams 10,000 text deltas and 10,000
tool-argument deltas, in OpenAI ``chat.completion.chunk`` form, in Anthropic Messages form and
in OpenAI Responses form. Contenders, one HTTP connection each, kept alive across rounds, all on
one event loop:

* nbagent's adapters: ``OpenAIChat`` / ``AnthropicMessages`` / ``OpenAIResponses``, consuming
  ``adapter.stream(request)`` (which also assembles the tool call and maps the finish reason);
* raw: ``httpx2`` ``aiter_lines()`` + ``json.loads`` of every ``data:`` line (the floor);
* the official SDKs streaming the same response: ``openai`` (``chat.completions.create(
  stream=True)`` and ``responses.create(stream=True)``) and ``anthropic``
  (``messages.create(stream=True)``), iterating their typed events (their lightest streaming
  path: no accumulation helper).

Goal: each adapter within 1.3x of raw, and faster than its SDK.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import (
    NotInstalled,
    Section,
    compare,
    describe_import_error,
    fmt,
    main,
    median_of,
    median_ratio,
)

CHUNKS = 20_000  # --quick: 5,000 (the per-chunk cost barely depends on the length)
MIN_MEASURE_SECONDS = 0.25  # one measurement repeats whole streams until this much was timed
HERE = Path(__file__).resolve().parent
TOOL_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
PROMPT = "Stream a long answer, then record it."
RESPONSES_DELTAS = frozenset(
    {"response.output_text.delta", "response.function_call_arguments.delta"}
)


class Loopback:
    """The server process and the event loop every contender runs on."""

    def __init__(self) -> None:
        self.closers: list[Callable[[], Any]] = []
        self.process = subprocess.Popen(
            [sys.executable, str(HERE / "_sse_server.py"), str(CHUNKS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("PORT "):
            self.close()
            raise RuntimeError(f"the loopback server did not start: {line!r}")
        self.base = f"http://127.0.0.1:{int(line.split()[1])}"
        self.loop = asyncio.new_event_loop()

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        for closer in self.closers:
            try:
                self.run(closer())
            except Exception as exc:  # closing is best effort; the measurements are done
                print(f"closing a client failed: {exc!r}", file=sys.stderr)
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if not self.loop.is_closed():
            self.loop.close()


def _timed(server: Loopback, stream_once: Callable[[], Any]) -> Callable[[], float]:
    """Warm up (connection, imports), then measure seconds per chunk of one full stream."""

    async def once() -> float:
        streams, elapsed = 0, 0.0
        while streams == 0 or elapsed < MIN_MEASURE_SECONDS:
            started = time.perf_counter()
            count = await stream_once()
            elapsed += time.perf_counter() - started
            streams += 1
            if count != CHUNKS:
                raise RuntimeError(f"counted {count} content chunks, expected {CHUNKS}")
        return elapsed / (streams * CHUNKS)

    server.run(once())
    return lambda: server.run(once())


# --- nbagent adapters ------------------------------------------------------------------------


def nbagent_setup(server: Loopback, flavour: str) -> Callable[[], float]:
    from nbagent.generation import Request, TextDelta, ToolCallReceived, ToolInputDelta
    from nbagent.messages import UserMessage
    from nbagent.tools import Definition

    try:
        if flavour == "openai":
            from nbagent.providers.openai import OpenAIChat

            adapter: Any = OpenAIChat("bench-model", api_key="dummy", base_url=server.base + "/v1")
        elif flavour == "responses":
            from nbagent.providers.responses import OpenAIResponses

            adapter = OpenAIResponses("bench-model", api_key="dummy", base_url=server.base + "/v1")
        else:
            from nbagent.providers.anthropic import AnthropicMessages

            adapter = AnthropicMessages("bench-model", api_key="dummy", base_url=server.base)
    except ImportError as exc:
        raise NotInstalled(f"nbagent's {flavour} adapter is not importable: {exc}") from None
    server.closers.append(adapter.aclose)
    from nbagent.content import TextPart

    request = Request(
        messages=(UserMessage((TextPart(PROMPT),)),),
        model="bench-model",
        tools=(Definition(name="record", description="Record text.", input_schema=TOOL_SCHEMA),),
    )

    async def stream_once() -> int:
        count, call = 0, None
        async for event in adapter.stream(request):
            if isinstance(event, (TextDelta, ToolInputDelta)):
                count += 1
            elif isinstance(event, ToolCallReceived):
                call = event.call
        if call is None or len(json.loads(call.arguments)["text"]) != 5 * (CHUNKS // 2 - 2):
            raise RuntimeError("the adapter did not assemble the tool call")
        # The adapter delivers the first argument fragment with the call's start.
        return count

    return _timed(server, stream_once)


# --- raw httpx2 -----------------------------------------------------------------------------


def raw_setup(server: Loopback, flavour: str) -> Callable[[], float]:
    try:
        import httpx2
    except ImportError as exc:
        raise describe_import_error("httpx2", exc) from None
    client = httpx2.AsyncClient(timeout=60)
    server.closers.append(client.aclose)
    if flavour == "openai":
        url = server.base + "/v1/chat/completions"
        body = {"model": "bench-model", "stream": True, "messages": [{"role": "user"}]}
    elif flavour == "responses":
        url = server.base + "/v1/responses"
        body = {"model": "bench-model", "stream": True, "input": "hi"}
    else:
        url = server.base + "/v1/messages"
        body = {"model": "bench-model", "stream": True, "max_tokens": 1024, "messages": []}
    content = json.dumps(body).encode()
    headers = {"content-type": "application/json", "accept": "text/event-stream"}

    async def stream_once() -> int:
        count = 0
        async with client.stream("POST", url, content=content, headers=headers) as response:
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    continue  # read to the end, so the connection is reused like the others'
                chunk = json.loads(data)
                if flavour == "openai":
                    choices = chunk.get("choices")
                    if choices:
                        delta = choices[0]["delta"]
                        if delta.get("content") or delta.get("tool_calls"):
                            count += 1
                elif flavour == "responses":
                    if chunk["type"] in RESPONSES_DELTAS:
                        count += 1
                elif chunk["type"] == "content_block_delta":
                    count += 1
        return count

    return _timed(server, stream_once)


# --- official SDKs ----------------------------------------------------------------------------


def openai_sdk_setup(server: Loopback) -> Callable[[], float]:
    try:
        from openai import AsyncOpenAI
    except ImportError as exc:
        raise describe_import_error("openai", exc) from None
    client = AsyncOpenAI(base_url=server.base + "/v1", api_key="dummy", max_retries=0)
    server.closers.append(client.close)
    tools: Any = [
        {
            "type": "function",
            "function": {
                "name": "record",
                "description": "Record text.",
                "parameters": TOOL_SCHEMA,
            },
        }
    ]

    async def stream_once() -> int:
        count = 0
        stream = await client.chat.completions.create(
            model="bench-model",
            messages=[{"role": "user", "content": PROMPT}],
            tools=tools,
            stream=True,
            stream_options={"include_usage": True},
        )
        async for chunk in stream:
            if chunk.choices:
                delta = chunk.choices[0].delta
                if delta.content or delta.tool_calls:
                    count += 1
        return count

    return _timed(server, stream_once)


def openai_responses_sdk_setup(server: Loopback) -> Callable[[], float]:
    try:
        from openai import AsyncOpenAI
    except ImportError as exc:
        raise describe_import_error("openai", exc) from None
    client = AsyncOpenAI(base_url=server.base + "/v1", api_key="dummy", max_retries=0)
    server.closers.append(client.close)
    tools: Any = [
        {
            "type": "function",
            "name": "record",
            "description": "Record text.",
            "parameters": TOOL_SCHEMA,
            "strict": False,
        }
    ]

    async def stream_once() -> int:
        count = 0
        stream = await client.responses.create(
            model="bench-model", input=PROMPT, tools=tools, store=False, stream=True
        )
        async for event in stream:
            if event.type in RESPONSES_DELTAS:
                count += 1
        return count

    return _timed(server, stream_once)


def anthropic_sdk_setup(server: Loopback) -> Callable[[], float]:
    try:
        from anthropic import AsyncAnthropic
    except ImportError as exc:
        raise describe_import_error("anthropic", exc) from None
    client = AsyncAnthropic(base_url=server.base, api_key="dummy", max_retries=0)
    server.closers.append(client.close)
    tools: Any = [{"name": "record", "description": "Record text.", "input_schema": TOOL_SCHEMA}]

    async def stream_once() -> int:
        count = 0
        stream = await client.messages.create(
            model="bench-model",
            max_tokens=1024,
            messages=[{"role": "user", "content": PROMPT}],
            tools=tools,
            stream=True,
        )
        async for event in stream:
            if event.type == "content_block_delta":
                count += 1
        return count

    return _timed(server, stream_once)


# --- the section ------------------------------------------------------------------------------


ADAPTER_NAMES = {
    "openai": "nbagent OpenAIChat",
    "anthropic": "nbagent AnthropicMessages",
    "responses": "nbagent OpenAIResponses",
}


def build(quick: bool) -> Section:
    global CHUNKS, MIN_MEASURE_SECONDS
    if quick:
        CHUNKS, MIN_MEASURE_SECONDS = 5_000, 0.1
    section = Section(
        "streaming", f"2. Streaming: {CHUNKS:,} SSE chunks from a loopback server, per chunk"
    )
    rounds = 3 if quick else 7
    server = Loopback()
    try:
        for flavour, sdk_name, sdk_setup in (
            ("openai", "openai SDK", openai_sdk_setup),
            ("anthropic", "anthropic SDK", anthropic_sdk_setup),
            ("responses", "openai SDK (Responses)", openai_responses_sdk_setup),
        ):
            adapter = ADAPTER_NAMES[flavour]
            compare(
                section,
                f"{flavour} SSE",
                {
                    adapter: lambda f=flavour: nbagent_setup(server, f),
                    "raw httpx2 + json.loads": lambda f=flavour: raw_setup(server, f),
                    sdk_name: lambda s=sdk_setup: s(server),
                },
                rounds=rounds,
                reference="raw httpx2 + json.loads",
            )
            for name in (adapter, "raw httpx2 + json.loads", sdk_name):
                row = section.row(f"{flavour} SSE", name)
                value = median_of(row)
                if row is not None and value:
                    row.extra = f"{1 / value:,.0f} chunks/s"
            ratio = median_ratio(section.row(f"{flavour} SSE", adapter))
            section.goal(
                f"{adapter} within 1.3x of raw httpx2",
                None if ratio is None else ratio <= 1.3,
                f"{fmt(ratio, 2)}x raw",
            )
            sdk = median_ratio(section.row(f"{flavour} SSE", sdk_name))
            section.goal(
                f"{adapter} faster than the {sdk_name}",
                None if ratio is None or sdk is None else ratio < sdk,
                f"adapter {fmt(ratio, 2)}x raw, SDK {fmt(sdk, 2)}x raw",
            )
    finally:
        server.close()
    return section


if __name__ == "__main__":
    main(build)
