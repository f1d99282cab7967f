"""A typed answer fills in field by field in the live card, in a real kernel against the
loopback OpenAI server: natively (``response_format`` json_schema: the answer's text) and
through the final-answer tool (the call's arguments). The server holds the answer half sent
while the test looks at the card; then the validated value replaces what streamed."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from nbagent.output import ANSWER_TOOL

from ..course.gateway import Gateway
from ..providers import wire
from .kernel import Kernel
from .test_kernel_approval import wait_ended

SETUP = """
import dataclasses
import nbagent.notebook
from nbagent.providers.openai import OpenAIChat

@dataclasses.dataclass
class Person:
    name: str
    city: str
    age: int

@dataclasses.dataclass
class Loose:
    name: str
    city: str
    age: int = 0  # optional, not nullable: strict mode cannot take it, the answer tool can

session = nbagent.notebook.current_session()
session.set_model(OpenAIChat("gpt-4.1-mini", api_key="sk-test-0123456789", base_url={url!r}))
"""


@pytest.fixture(scope="module")
def gateway() -> Iterator[Gateway]:
    with Gateway() as server:
        yield server


@pytest.fixture
def ready(kernel: Kernel, gateway: Gateway) -> Kernel:
    kernel.execute(textwrap.dedent(SETUP.format(url=gateway.url)))
    return kernel


def held_run(
    kernel: Kernel, gateway: Gateway, line: str, head: list[Any], tail: list[Any]
) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    """Run ``line`` while the server sends ``head`` and holds ``tail`` back; check the answer
    block half filled in (then released) and at the end; return the run's record, every value
    the block took, and the request body sent."""
    gate = gateway.held_sse(wire.openai_sse(head, done=False), wire.openai_sse(tail))
    since = kernel.mark()
    cell = kernel.submit(line)
    try:
        half = half_shown(kernel, since)
    finally:
        gate.set()
    record = wait_ended(kernel, cell)
    (values,) = answer_states(kernel, since).values()  # one block, filled in then replaced
    raw = [kernel.stream_text(comm_id) for comm_id in kernel.streams(since)]
    assert not any('"name"' in text for text in raw)  # fields filled in, not JSON text
    assert ">Be<" in half and ">age<" not in half and "Ann <b>" not in half  # escaped
    assert "filling in" not in values[-1] and ">Bern<" in values[-1]
    return record, values, gateway.requests[-1]


def answer_states(kernel: Kernel, since: int) -> dict[str, list[str]]:
    """Every value each answer block of the run took, in order (from the iopub messages)."""
    ids = {
        comm_id
        for comm_id, state in list(kernel.widgets.items())[since:]
        if state.get("_model_name") == "HTMLModel"
    }
    seen: dict[str, list[str]] = {}
    for msg in kernel.iopub:
        content = msg["content"]
        comm_id = content.get("comm_id")
        if comm_id not in ids or msg["msg_type"] not in ("comm_open", "comm_msg"):
            continue
        data = content.get("data", {})
        value = data.get("state", {}).get("value")
        if isinstance(value, str) and "Answer" in value:
            seen.setdefault(comm_id, []).append(value)
    return seen


def half_shown(kernel: Kernel, since: int) -> str:
    """Wait for the answer block to show the first fields and not the last; return it."""

    def check() -> str | None:
        for values in answer_states(kernel, since).values():
            last = values[-1]
            if "filling in" in last and "Ann &lt;b&gt;" in last and ">city<" in last:
                return last
        return None

    return str(kernel.wait_for(check, what="the answer half filled in"))


def test_a_native_answer_fills_in_then_the_validated_value_replaces_it(
    ready: Kernel, gateway: Gateway
) -> None:
    kernel = ready
    head = [
        wire.oa_chunk({"role": "assistant", "content": "", "refusal": None}),
        wire.oa_chunk({"content": '{"name": "Ann <b>", "ci'}),
        wire.oa_chunk({"content": 'ty": "Be'}),
    ]
    tail = [
        wire.oa_chunk({"content": 'rn", "age": 31}'}),
        wire.oa_chunk({}, "stop"),
        wire.oa_usage(),
    ]
    line = "%agent --new --output Person -o p Who is Ann?"
    record, values, body = held_run(kernel, gateway, line, head, tail)
    assert record["stop_reason"] == "finished"
    assert kernel.eval("p.output == Person('Ann <b>', 'Bern', 31)") is True
    assert body["response_format"]["type"] == "json_schema"  # the native route, on the wire
    assert ">31<" in values[-1]


def test_the_final_answer_tools_arguments_fill_in_the_same_way(
    ready: Kernel, gateway: Gateway
) -> None:
    kernel = ready
    call = wire.oa_call
    head = [
        wire.oa_chunk({"role": "assistant", "content": None}),
        wire.oa_chunk({"tool_calls": [call(0, "call_1", ANSWER_TOOL)]}),
        wire.oa_chunk({"tool_calls": [call(0, args='{"name": "Ann <b>", ')]}),
        wire.oa_chunk({"tool_calls": [call(0, args='"city": "Be')]}),
    ]
    tail = [
        wire.oa_chunk({"tool_calls": [call(0, args='rn", "age": 7}')]}),
        wire.oa_chunk({}, "tool_calls"),
        wire.oa_usage(),
    ]
    line = "%agent --new --output Loose -o bo Who is Ann?"
    record, values, body = held_run(kernel, gateway, line, head, tail)
    assert record["stop_reason"] == "terminated"
    assert kernel.eval("bo.output == Loose('Ann <b>', 'Bern', 7)") is True
    assert [t["function"]["name"] for t in body["tools"]] == [ANSWER_TOOL]
    assert ">7<" in values[-1]
