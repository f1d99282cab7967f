"""The agent loop through the Responses adapter against the loopback server: a multi-step run
with reasoning carried across turns, a parallel batch, a denied call and an image result; an
incomplete or failed response runs nothing; a transient failure is asked for again."""

from __future__ import annotations

from typing import Any

import pytest

from nbagent.agent import Agent
from nbagent.approvals.approval import ScriptedApprover, deny
from nbagent.events import StepRetried
from nbagent.generation import Request
from nbagent.messages import AssistantMessage, ReasoningPart, messages_from_json, messages_to_json
from nbagent.providers.responses import OpenAIResponses

from . import wire
from .conftest import Reply, Server
from .helpers import FAST, KEY, responses
from .test_agent_e2e import FINAL, PNG_B64, TURNS, make_tools

DATA_URL = f"data:image/png;base64,{PNG_B64}"
PROMPT = "Weather in Zürich and Bern? Delete /tmp/x. Plot it."


def first_turn() -> bytes:
    turn = wire.ResponsesTurn()
    turn.reasoning(["Weather first, ", "then the rest."], item_id="rs_1", encrypted="enc-1")
    turn.message("Let me look", " at that.", item_id="msg_1")
    for call_id, name, args in TURNS[0]:  # a parallel batch of three
        turn.call(call_id, name, args[: len(args) // 2], args[len(args) // 2 :])
    return turn.completed(wire.rs_usage(100, 10)).body()


def second_turn() -> bytes:
    turn = wire.ResponsesTurn()
    turn.reasoning(["Now Bern."], item_id="rs_2", encrypted="enc-2")
    (call_id, name, args) = TURNS[1][0]
    turn.call(call_id, name, args, item_id="fc_2")
    return turn.completed(wire.rs_usage(100, 10)).body()


def final_turn() -> bytes:
    turn = wire.ResponsesTurn()
    turn.message(FINAL[:10], FINAL[10:], item_id="msg_3")
    return turn.completed(wire.rs_usage(100, 10)).body()


def reasoning_item(item_id: str, text: str, encrypted: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": text}],
        "encrypted_content": encrypted,
    }


async def test_multi_step_run_carries_reasoning_and_answers_every_call(
    server: Server, history_valid: Any
) -> None:
    server.queue(Reply(first_turn()), Reply(second_turn()), Reply(final_turn()))
    ran: list[str] = []
    approver = ScriptedApprover({"delete_file": deny("not today")})
    model = responses(server)
    agent = Agent(model=model, tools=make_tools(ran), approver=approver, instructions="Be brief.")
    result = await agent.run(PROMPT)
    await model.aclose()

    assert result.stop_reason == "finished", result.error
    assert result.text.endswith(FINAL)
    assert sorted(ran) == ["get_weather:Bern", "get_weather:Zürich", "plot"]  # never deleted
    assert [r.tool_name for r in approver.requests] == ["delete_file"]
    assert result.steps == 3 and result.usage.output_tokens == 30
    history_valid(agent.messages)
    first = agent.messages[1]
    assert isinstance(first, AssistantMessage) and isinstance(first.content[0], ReasoningPart)
    assert first.content[0].text == "Weather first, then the rest."

    second, third = server.requests[1].json, server.requests[2].json
    assert second["instructions"] == "Be brief." and second["store"] is False
    assert second["include"] == ["reasoning.encrypted_content"]
    assert [t["name"] for t in second["tools"]] == ["get_weather", "delete_file", "plot"]
    assert all(t["strict"] is False for t in second["tools"])
    batch = [
        {"type": "function_call", "call_id": c, "name": n, "arguments": a} for c, n, a in TURNS[0]
    ]
    assert second["input"][:6] == [
        {"role": "user", "content": PROMPT},
        reasoning_item("rs_1", "Weather first, then the rest.", "enc-1"),  # verbatim
        {
            "type": "message",
            "id": "msg_1",  # the item the reasoning came before, under its own id
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Let me look at that.", "annotations": []}],
        },
        *batch,
    ]
    outputs = {i["call_id"]: i["output"] for i in second["input"][6:]}
    assert list(outputs) == ["c_weather", "c_delete", "c_plot"]  # each call answered once
    assert outputs["c_weather"] == "Sunny in Zürich"
    assert outputs["c_delete"].startswith("Error: ") and "not today" in outputs["c_delete"]
    assert outputs["c_plot"] == [{"type": "input_image", "image_url": DATA_URL}]
    assert third["input"][:9] == second["input"]
    assert third["input"][9:] == [
        reasoning_item("rs_2", "Now Bern.", "enc-2"),
        {
            "type": "function_call",
            "id": "fc_2",
            "call_id": "c_weather2",
            "name": "get_weather",
            "arguments": '{"city": "Bern"}',
        },
        {"type": "function_call_output", "call_id": "c_weather2", "output": "Sunny in Bern"},
    ]
    await server.wait_all_closed()


async def test_another_model_gets_the_conversation_without_the_reasoning(
    server: Server, history_valid: Any
) -> None:
    server.queue(Reply(first_turn()), Reply(final_turn()), Reply(final_turn()))
    model = responses(server)
    agent = Agent(model, make_tools([]), approver=ScriptedApprover({"delete_file": deny("no")}))
    await agent.run(PROMPT)
    await model.aclose()
    other = OpenAIResponses("o3", api_key=KEY, base_url=server.url + "/v1", **FAST)
    result = await Agent(other, make_tools([]), messages=agent.messages).run("And now?")
    await other.aclose()
    assert result.stop_reason == "finished", result.error
    history_valid(agent.messages)
    sent = server.requests[2].json["input"]
    assert all(i.get("type") != "reasoning" and "id" not in i for i in sent)
    assert sent[1] == {"role": "assistant", "content": "Let me look at that."}


@pytest.mark.parametrize(
    ("reason", "stop"), [("max_output_tokens", "length"), ("content_filter", "failed")]
)
async def test_an_incomplete_response_runs_nothing(
    server: Server, history_valid: Any, reason: str, stop: str
) -> None:
    turn = wire.ResponsesTurn()
    turn.message("Let me look at that.")
    for call_id, name, args in TURNS[0]:
        turn.call(call_id, name, args)  # complete-looking calls of an incomplete response
    server.queue(Reply(turn.incomplete(reason).body()))
    ran: list[str] = []
    model = responses(server)
    agent = Agent(model, make_tools(ran))
    result = await agent.run(PROMPT, raise_on_error=False)
    await model.aclose()
    assert result.stop_reason == stop
    if stop == "failed":
        assert reason in str(result.error)
    assert ran == []
    history_valid(agent.messages)
    assert all(not m.tool_calls for m in agent.messages if isinstance(m, AssistantMessage))
    assert len(server.requests) == 1


async def test_a_failed_response_runs_nothing_and_says_why(
    server: Server, history_valid: Any
) -> None:
    turn = wire.ResponsesTurn()
    turn.call(*TURNS[0][0])
    server.queue(Reply(turn.failed("invalid_prompt", "Your prompt was flagged.").body()))
    ran: list[str] = []
    model = responses(server)
    agent = Agent(model, make_tools(ran))
    result = await agent.run(PROMPT, raise_on_error=False)
    await model.aclose()
    assert result.stop_reason == "failed" and ran == []
    assert "the response failed: (invalid_prompt) Your prompt was flagged." in str(result.error)
    history_valid(agent.messages)


async def test_a_transient_failure_mid_batch_is_asked_again_and_runs_each_call_once(
    server: Server, history_valid: Any
) -> None:
    broken = wire.ResponsesTurn()
    broken.reasoning(["Weather first."], item_id="rs_x", encrypted="enc-x")
    broken.message("Let me look", " at that.")
    broken.call(*TURNS[0][0])
    server.queue(
        Reply(broken.failed("server_error", "The model crashed.").body()),
        Reply(first_turn()),
        Reply(final_turn()),
    )
    ran: list[str] = []
    model = responses(server, max_retries=1)
    agent = Agent(model, make_tools(ran), approver=ScriptedApprover({"delete_file": deny("no")}))
    run = agent.start(PROMPT)
    seen = [event async for event in run.events()]
    result = await run.result()
    await model.aclose()
    assert result.stop_reason == "finished", result.error
    assert sorted(ran) == ["get_weather:Zürich", "plot"]  # once each, from the new answer
    retried = [e for e in seen if isinstance(e, StepRetried)]
    assert len(retried) == 1 and "(server_error) The model crashed." in retried[0].reason
    history_valid(agent.messages)
    sent = server.requests[2].json["input"]
    assert [i["id"] for i in sent if i.get("type") == "reasoning"] == ["rs_1"]  # not the void one
    assert len(server.requests) == 3


# --- every item goes back with the fields the API needs to accept it again ------------------------


def searched_call_turn(reasoning: bool) -> bytes:
    """gpt-5.4+ with hosted tool search: it loads a namespace, then calls a function in it."""
    turn = wire.ResponsesTurn()
    if reasoning:
        turn.reasoning(["Search the CRM tools."], item_id="rs_ts", encrypted="enc-ts")
    turn.tool_search("open orders", "crm", ["get_weather"])
    if reasoning:
        turn.reasoning(["Now call it."], item_id="rs_fc", encrypted="enc-fc")
    turn.call("c_ns", "get_weather", '{"city": "Bern"}', item_id="fc_ns", namespace="crm")
    return turn.completed().body()


@pytest.mark.parametrize("reasoning", [False, True])
async def test_a_call_after_a_tool_search_goes_back_with_its_namespace(
    server: Server, history_valid: Any, reasoning: bool
) -> None:
    """The live API answers a function_call without its namespace with HTTP 400 "Missing
    namespace for function_call"."""
    server.queue(Reply(searched_call_turn(reasoning)), Reply(final_turn()))
    ran: list[str] = []
    model = responses(server)
    agent = Agent(model=model, tools=make_tools(ran))
    result = await agent.run("Open orders?")
    await model.aclose()
    assert result.stop_reason == "finished", result.error
    assert ran == ["get_weather:Bern"]
    history_valid(agent.messages)
    sent = server.requests[1].json["input"]
    (call,) = [i for i in sent if i.get("type") == "function_call"]
    assert call["namespace"] == "crm" and call["call_id"] == "c_ns"
    assert call["name"] == "get_weather" and call["arguments"] == '{"city": "Bern"}'
    assert ("id" in call) is reasoning  # paired with the reasoning before it, by id
    (output,) = [i for i in sent if i.get("type") == "function_call_output"]
    assert output["namespace"] == "crm" and output["call_id"] == "c_ns"
    assert output["output"] == "Sunny in Bern"
    # provider-run items are not sent back (nor their output-only fields)
    assert not any(str(i.get("type", "")).startswith("tool_search") for i in sent)
    assert not any("created_by" in i for i in sent)
    # and the history keeps it: a conversation saved and loaded goes back the same way
    again = OpenAIResponses("gpt-5-mini", api_key=KEY, base_url=server.url + "/v1", **FAST)
    restored = messages_from_json(messages_to_json(agent.messages))
    body = again.build_body(Request(restored))
    assert [i for i in body["input"] if i.get("type") == "function_call"] == [call]
    await again.aclose()


def phased_turn(reasoning: bool) -> bytes:
    turn = wire.ResponsesTurn()
    if reasoning:
        turn.reasoning(["Check, then answer."], item_id="rs_p", encrypted="enc-p")
    turn.message("I'll check the forecast.", item_id="msg_c", phase="commentary")
    turn.message("It will be ", "sunny.", item_id="msg_f", phase="final_answer")
    return turn.completed().body()


@pytest.mark.parametrize("reasoning", [False, True])
async def test_messages_with_a_phase_go_back_as_they_came(
    server: Server, history_valid: Any, reasoning: bool
) -> None:
    """Two messages (commentary, then the final answer) are two items with their phases: they
    went back as one message, the texts joined without a separator and the phase lost."""
    server.queue(Reply(phased_turn(reasoning)), Reply(final_turn()))
    model = responses(server)
    agent = Agent(model=model, tools=make_tools([]))
    await agent.run("Weather?")
    result = await agent.run("Thanks!")
    await model.aclose()
    assert result.stop_reason == "finished", result.error
    history_valid(agent.messages)
    sent = server.requests[1].json["input"]
    said = [i for i in sent if i.get("role") == "assistant"]
    assert [i["phase"] for i in said] == ["commentary", "final_answer"]
    texts = [
        i["content"] if isinstance(i["content"], str) else i["content"][0]["text"] for i in said
    ]
    assert texts == ["I'll check the forecast.", "It will be sunny."]
    if reasoning:  # the reasoning goes back beside the message it came before, by id
        kinds = [i.get("type") for i in sent[1:4]]
        assert kinds == ["reasoning", "message", None]
        assert said[0]["id"] == "msg_c" and "id" not in said[1]
    else:
        assert all("id" not in i for i in said)
