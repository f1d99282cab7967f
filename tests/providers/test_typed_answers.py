"""Typed answers (``output=``) over each provider's real structured-output wire format, against
the loopback server: Chat Completions ``response_format`` json_schema strict, the Responses
API's ``text.format``, Anthropic's ``output_config.format``; and the final-answer tool where
the schema cannot be asked of strict mode as it is."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Optional

import pytest

from nbagent.agent import Agent
from nbagent.errors import OutputInvalidError
from nbagent.output import ANSWER_TOOL

from . import wire
from .conftest import Reply, Server
from .helpers import anthropic, openai, responses


@dataclasses.dataclass
class Person:
    name: str
    age: int


@dataclasses.dataclass
class Loose:
    name: str
    nickname: str | None = None
    age: int = 0  # optional and not nullable: strict mode would make it nullable


PERSON_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
ANSWER = '{"name": "Ann", "age": 31}'


def chat_json(*pieces: str) -> bytes:
    return wire.openai_sse(
        [
            wire.oa_chunk({"role": "assistant", "content": "", "refusal": None}),
            *(wire.oa_chunk({"content": piece}) for piece in pieces),
            wire.oa_chunk({}, "stop"),
            wire.oa_usage(),
        ]
    )


def responses_json(*pieces: str) -> bytes:
    turn = wire.ResponsesTurn()
    turn.message(*pieces)
    return turn.completed().body()


def anthropic_json(*pieces: str) -> bytes:
    return wire.anthropic_sse(
        [
            wire.an_message_start(),
            wire.an_block_start(0, {"type": "text", "text": ""}),
            *(wire.an_text(0, piece) for piece in pieces),
            wire.an_block_stop(0),
            wire.an_message_delta("end_turn", 5),
            wire.MESSAGE_STOP,
        ]
    )


async def test_chat_completions_asks_for_strict_json_schema(
    server: Server, history_valid: Any
) -> None:
    server.queue(Reply(chat_json('{"name": "A', 'nn", "age"', ": 31}")))
    model = openai(server)
    agent = Agent(model)
    result = await agent.run("Ann is 31", output=Person)
    await model.aclose()
    assert result.output == Person("Ann", 31)
    body = server.requests[0].json
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": PERSON_SCHEMA, "strict": True},
    }
    assert "tools" not in body
    history_valid(agent.messages)


async def test_responses_asks_for_text_format(server: Server) -> None:
    server.queue(Reply(responses_json('{"name": "Ann",', ' "age": 31}')))
    model = responses(server)
    result = await Agent(model).run("Ann is 31", output=Person)
    await model.aclose()
    assert result.output == Person("Ann", 31)
    body = server.requests[0].json
    assert body["text"] == {
        "format": {"type": "json_schema", "name": "answer", "schema": PERSON_SCHEMA, "strict": True}
    }
    assert "tools" not in body


async def test_anthropic_asks_for_output_config_format(server: Server) -> None:
    server.queue(Reply(anthropic_json('{"name": "Ann", ', '"age": 31}')))
    model = anthropic(server)
    result = await Agent(model).run("Ann is 31", output=Person)
    await model.aclose()
    assert result.output == Person("Ann", 31)
    body = server.requests[0].json
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": PERSON_SCHEMA}}
    assert "tools" not in body and "tool_choice" not in body


@pytest.mark.parametrize(
    ("adapter", "reply"),
    [(openai, chat_json), (responses, responses_json), (anthropic, anthropic_json)],
)
async def test_an_answer_that_does_not_fit_is_sent_back_over_the_wire(
    server: Server, adapter: Any, reply: Any
) -> None:
    server.queue(Reply(reply('{"name": "Ann"}')), Reply(reply(ANSWER)))
    model = adapter(server)
    result = await Agent(model).run("Ann is 31", output=Person)
    await model.aclose()
    assert result.output == Person("Ann", 31) and result.steps == 2
    second = json.dumps(server.requests[1].json)
    assert "Your answer was not accepted" in second and "age" in second


async def test_a_schema_strict_mode_would_change_goes_through_the_final_answer_tool(
    server: Server,
) -> None:
    call = json.dumps({"name": "Ann", "nickname": None, "age": 31})
    server.queue(
        Reply(
            wire.openai_sse(
                [
                    wire.oa_chunk({"role": "assistant", "content": None}),
                    wire.oa_chunk({"tool_calls": [wire.oa_call(0, "call_1", ANSWER_TOOL)]}),
                    wire.oa_chunk({"tool_calls": [wire.oa_call(0, args=call[:10])]}),
                    wire.oa_chunk({"tool_calls": [wire.oa_call(0, args=call[10:])]}),
                    wire.oa_chunk({}, "tool_calls"),
                    wire.oa_usage(),
                ]
            )
        )
    )
    model = openai(server)
    result = await Agent(model).run("Ann is 31", output=Loose)
    await model.aclose()
    assert result.output == Loose("Ann", None, 31)
    body = server.requests[0].json
    assert "response_format" not in body
    assert [t["function"]["name"] for t in body["tools"]] == [ANSWER_TOOL]
    assert ANSWER_TOOL in body["messages"][0]["content"]  # the instruction, as a system message


async def test_output_mode_tool_uses_the_final_answer_tool_on_any_provider(server: Server) -> None:
    server.queue(
        Reply(
            wire.anthropic_sse(
                [
                    wire.an_message_start(),
                    wire.an_block_start(
                        0, {"type": "tool_use", "id": "toolu_1", "name": ANSWER_TOOL, "input": {}}
                    ),
                    wire.an_json(0, ANSWER[:8]),
                    wire.an_json(0, ANSWER[8:]),
                    wire.an_block_stop(0),
                    wire.an_message_delta("tool_use", 5),
                    wire.MESSAGE_STOP,
                ]
            )
        )
    )
    model = anthropic(server)
    result = await Agent(model).run("Ann is 31", output=Person, output_mode="tool")
    await model.aclose()
    assert result.output == Person("Ann", 31)
    body = server.requests[0].json
    assert "output_config" not in body and [t["name"] for t in body["tools"]] == [ANSWER_TOOL]


async def test_a_model_that_never_answers_in_the_form_fails_after_the_tries(
    server: Server,
) -> None:
    server.queue(Reply(chat_json("Sure! Ann is 31.")), Reply(chat_json("Ann, 31")))
    model = openai(server)
    result = await Agent(model).run(
        "Ann is 31", output=Person, output_tries=2, raise_on_error=False
    )
    await model.aclose()
    assert isinstance(result.error, OutputInvalidError)
    assert result.error.answer == "Ann, 31" and result.text == "Ann, 31"
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("adapter", "reply", "schema_at"),
    [
        (openai, chat_json, lambda body: body["response_format"]["json_schema"]["schema"]),
        (responses, responses_json, lambda body: body["text"]["format"]["schema"]),
        (anthropic, anthropic_json, lambda body: body["output_config"]["format"]["schema"]),
    ],
)
async def test_pydantic_models_inside_a_dataclass_answer_natively_as_instances(
    server: Server, adapter: Any, reply: Any, schema_at: Any
) -> None:
    pydantic = pytest.importorskip("pydantic", reason="pydantic is not installed")

    class Address(pydantic.BaseModel):
        city: str
        zip: int

    # made with real types: annotations in this module are strings, and Address is local
    fields = [("ship_to", list[Address]), ("bill_to", Optional[Address])]  # noqa: UP045
    Order = dataclasses.make_dataclass("Order", fields)

    server.queue(Reply(reply('{"ship_to": [{"city": "Bern", ', '"zip": 3000}], "bill_to": null}')))
    model = adapter(server)
    result = await Agent(model).run("the order", output=Order)
    await model.aclose()
    assert result.output == Order([Address(city="Bern", zip=3000)], None)
    assert isinstance(result.output.ship_to[0], Address)
    sent = json.dumps(schema_at(server.requests[0].json))
    assert '"city"' in sent and '"zip"' in sent  # pydantic's part of the schema, on the wire


async def test_an_oversized_native_answer_is_refused_like_oversized_arguments(
    server: Server,
) -> None:
    """A 10 MB answer text is over ``Limits.max_argument_bytes``: it is refused unparsed, and
    the retry's request carries a short stand-in for it, not the 10 MB again."""
    huge = '{"name": "' + "x" * 10_000_000 + '", "age": 1}'
    pieces = [huge[i : i + 1_000_000] for i in range(0, len(huge), 1_000_000)]
    server.queue(Reply(chat_json(*pieces)), Reply(chat_json(ANSWER)))
    model = openai(server)
    result = await Agent(model).run("who?", output=Person)
    await model.aclose()
    assert result.output == Person("Ann", 31)
    retry = server.requests[1]
    assert len(retry.body) < 20_000, f"the retry sent {len(retry.body):,} bytes"
    sent = [m.get("content") for m in retry.json["messages"]]
    assert any("10,000,022 bytes" in str(c) and "not kept" in str(c) for c in sent), sent
    assert any("max_argument_bytes" in str(c) for c in sent), sent


async def test_an_oversized_native_answer_stops_streaming_at_the_limit(server: Server) -> None:
    from nbagent.events import AssistantTextDelta
    from nbagent.limits import Limits

    huge = '{"name": "' + "x" * 300_000 + '", "age": 1}'
    pieces = [huge[i : i + 10_000] for i in range(0, len(huge), 10_000)]
    server.queue(Reply(chat_json(*pieces)), Reply(chat_json(ANSWER)))
    model = openai(server)
    agent = Agent(model, limits=Limits(max_argument_bytes=100_000))
    shown: list[str] = []
    async for event in agent.stream("who?", output=Person):
        if isinstance(event, AssistantTextDelta):
            shown.append(event.text)
    await model.aclose()
    text = "".join(shown)
    assert len(text) <= 100_000 + len(ANSWER), len(text)  # no more of it, as for arguments
    assert text.endswith(ANSWER)  # and the retry's answer streams as usual
