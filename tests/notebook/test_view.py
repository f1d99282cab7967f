"""The run view in-process, on a recording comm: traffic, order, clicks (no kernel needed)."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from nbagent.approvals.approval import ApprovalRequest, Decision, InteractiveApprover
from nbagent.content import ToolResult, text_result
from nbagent.events import (
    AgentEvent,
    ApprovalRequested,
    ApprovalResolved,
    AssistantTextDelta,
    RunCancelled,
    RunFinished,
    RunResult,
    RunStarted,
    StepFinished,
    StepStarted,
    ToolArgumentsDelta,
    ToolCallReady,
    ToolCallStarted,
    ToolFinished,
    ToolStarted,
)
from nbagent.generation import Usage
from nbagent.notebook.live.stream import GrowingRedaction, TextStream, utf16_len
from nbagent.notebook.live.view import RunView
from nbagent.redact import redact_secrets
from nbagent.tools import ToolCall

from .conftest import Wire

TOKENS = 20_000


def tokens(count: int, seed: int = 7) -> list[str]:
    """Model-like tokens: words of 1-9 letters, spaces, punctuation and paragraph breaks."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(1, 9)))
        out.append(f" {word}" if i % 120 else "\n\n" + word)
    return out


def result(stop: str = "finished") -> RunResult:
    return RunResult("", (), 1, Usage(10, 20), stop)  # type: ignore[arg-type]


def play(view: RunView, wire: Wire, events: list[AgentEvent], step: float) -> None:
    """Feed events ``step`` seconds apart, ticking every 0.1 s as the runner's ticker does."""
    next_tick = wire.now + 0.1
    for event in events:
        wire.now += step
        while wire.now >= next_tick:
            view.tick()
            next_tick += 0.1
        view.handle(event)


def stream_ids(wire: Wire, since: int) -> list[str]:
    return [
        cid
        for _, kind, cid, data in wire.messages[since:]
        if kind == "open" and data["state"].get("_anywidget_id", "").endswith("TextStream")
    ]


@pytest.mark.parametrize(("per_second", "label"), [(200, "fast"), (40, "slow")])
def test_a_20000_token_stream_stays_under_30_messages_a_second_and_3x_bytes(
    wire: Wire, per_second: int, label: str
) -> None:
    words = tokens(TOKENS)
    text = "".join(words)
    view = RunView("write a lot", clock=wire.clock)
    start = len(wire.messages)
    events: list[AgentEvent] = [RunStarted("run-x", "write a lot", "m"), StepStarted(1)]
    events += [AssistantTextDelta(1, w) for w in words]
    events += [StepFinished(1, Usage(10, TOKENS), "stop", 0), RunFinished(result())]
    play(view, wire, events, 1.0 / per_second)

    busiest = wire.busiest_second(start)
    sent = wire.total_bytes(start)
    size = len(text.encode())
    print(f"\n{label}: {busiest} messages in the busiest second, bytes/text = {sent / size:.2f}")
    assert busiest <= 30
    assert sent <= 3 * size
    (stream,) = stream_ids(wire, start)
    assert wire.text(stream) == text  # every token arrived, in order, once


def test_naive_value_updates_are_what_the_view_avoids(wire: Wire) -> None:
    """The measurement behind the design: per-token ``.value`` grows quadratically."""
    import ipywidgets as widgets

    words = tokens(2_000)
    label = widgets.HTML()
    start = len(wire.messages)
    for word in words:
        label.value += word
    naive = wire.total_bytes(start)

    view = RunView("", clock=wire.clock)
    start = len(wire.messages)
    play(view, wire, [AssistantTextDelta(1, w) for w in words], 0.005)
    view.close("finished")
    ours = wire.total_bytes(start)
    assert naive > 50 * ours


def test_arguments_stream_linearly(wire: Wire) -> None:
    body = "".join(tokens(5_000))
    raw = '{"text": "' + body.replace("\n", "\\n") + '"}'
    pieces = [raw[i : i + 4] for i in range(0, len(raw), 4)]
    view = RunView("", clock=wire.clock)
    start = len(wire.messages)
    call = ToolCall("c1", "write", raw)
    events: list[AgentEvent] = [ToolCallStarted(1, "c1", "write")]
    events += [ToolArgumentsDelta("c1", "write", p, "") for p in pieces]
    events += [ToolCallReady(1, call, {"text": body})]
    play(view, wire, events, 0.005)
    assert wire.busiest_second(start) <= 30
    assert wire.total_bytes(start) <= 3 * len(raw)
    card = view.cards["c1"]
    assert card.arguments.text == raw  # long: kept as streamed, not sent a second time
    assert wire.text(card.arguments.model_id) == raw


def test_short_arguments_are_shown_indented_once_complete(wire: Wire) -> None:
    view = RunView("", clock=wire.clock)
    raw = '{"city": "Paris", "days": 3}'
    view.handle(ToolCallStarted(1, "c2", "forecast"))
    for i in range(0, len(raw), 3):
        view.handle(ToolArgumentsDelta("c2", "forecast", raw[i : i + 3], raw[: i + 3]))
    view.handle(ToolCallReady(1, ToolCall("c2", "forecast", raw), {"city": "Paris", "days": 3}))
    stream = view.cards["c2"].arguments
    assert stream.text == '{\n  "city": "Paris",\n  "days": 3\n}'
    assert wire.text(stream.model_id) == stream.text


def test_text_and_cards_appear_in_event_order(wire: Wire) -> None:
    view = RunView("q", clock=wire.clock)
    call = ToolCall("c1", "look", "{}")
    for event in [
        RunStarted("r", "q", "m"),
        StepStarted(1),
        AssistantTextDelta(1, "Before "),
        AssistantTextDelta(1, "the call."),
        ToolCallStarted(1, "c1", "look"),
        ToolCallReady(1, call, {}),
        ToolStarted(call),
        ToolFinished(call, text_result("seen"), "done", 0.2),
        StepFinished(1, Usage(), "tool_calls", 1),
        StepStarted(2),
        AssistantTextDelta(2, "After."),
        RunFinished(result()),
    ]:
        view.handle(event)
    kinds = [type(child).__name__ for child in view.body.children]
    assert kinds == ["TextStream", "VBox", "TextStream"]
    first, _, last = view.body.children
    assert first.text == "Before the call." and last.text == "After."
    assert not first.streaming and not last.streaming
    assert "done" in view.cards["c1"].header.value


def approval_view(wire: Wire) -> tuple[RunView, InteractiveApprover, list[Decision], ToolCall]:
    approver = InteractiveApprover()
    given: list[Decision] = []
    original = approver.resolve

    def resolve(call_id: str, decision: Decision, *, fingerprint: str | None = None) -> bool:
        given.append(decision)
        return original(call_id, decision, fingerprint=fingerprint)

    approver.resolve = resolve  # type: ignore[method-assign]
    view = RunView("q", approver=approver, clock=wire.clock)
    call = ToolCall("c9", "delete", '{"path": "x"}')
    view.handle(ToolCallStarted(1, "c9", "delete"))
    view.handle(ToolCallReady(1, call, {"path": "x"}))
    view.handle(ApprovalRequested(ApprovalRequest.for_call(call, {"path": "x"})))
    return view, approver, given, call


def click(wire: Wire, widget: Any) -> None:
    wire.comms[widget.model_id].deliver({"method": "custom", "content": {"event": "click"}})


def test_one_decision_per_bar_however_many_clicks(wire: Wire) -> None:
    view, _, given, _ = approval_view(wire)
    bar = view.cards["c9"].approval
    assert bar is not None
    bar.reason.value = "not that one"
    click(wire, bar.deny)
    click(wire, bar.deny)
    click(wire, bar.approve)
    assert given == [Decision(False, "not that one", by="person")]
    assert all(w.disabled for w in (bar.approve, bar.deny, bar.always, bar.reason))
    assert wire.state(bar.approve.model_id)["disabled"] is True


def test_a_click_after_the_run_ended_does_nothing(wire: Wire) -> None:
    view, _, given, _ = approval_view(wire)
    view.handle(RunCancelled(result("cancelled")))
    bar = view.cards["c9"].approval
    assert bar is not None and bar.approve.disabled and view.stop.disabled
    click(wire, bar.approve)
    click(wire, view.stop)
    assert given == []
    assert "cancelled" in view.cards["c9"].header.value


def test_decisions_and_progress_show_on_the_card(wire: Wire) -> None:
    view, _, _, call = approval_view(wire)
    wire.now += 2.0  # the person took two seconds: that is not the tool's time
    view.handle(ApprovalResolved("c9", Decision(True, None, always=True, by="person")))
    view.handle(ToolStarted(call))
    header = view.cards["c9"].header.value
    assert "approved by you (always allow this tool)" in header and "running" in header
    wire.now += 1.5
    view.handle(ToolFinished(call, ToolResult(()), "done", 3.5))
    assert (
        "approved by you (always allow this tool) after 2.0 s · done in 1.5 s"
        in view.cards["c9"].header.value
    )


def test_stop_button_calls_stop_once(wire: Wire) -> None:
    stops: list[int] = []
    view = RunView("q", on_stop=lambda: stops.append(1), clock=wire.clock)
    click(wire, view.stop)
    click(wire, view.stop)
    assert stops == [1]
    assert view.stop.disabled


def test_stream_resync_sends_the_whole_text(wire: Wire) -> None:
    stream = TextStream()
    stream.append("héllo 👋 ")
    stream.flush()
    stream.append("world")
    stream.flush()
    start = len(wire.messages)
    wire.comms[stream.model_id].deliver({"method": "custom", "content": {"event": "resync"}})
    (update,) = [d for _, _, cid, d in wire.messages[start:] if cid == stream.model_id]
    assert update["method"] == "update" and update["state"] == {"value": "héllo 👋 world"}
    # offsets count UTF-16 units, as the browser's string.length does
    offsets = [d["content"][0] for _, _, _, d in wire.messages if d.get("method") == "custom"]
    assert offsets == [0, utf16_len("héllo 👋 ")] and utf16_len("👋") == 2


def test_the_first_words_are_sent_at_once_the_rest_at_a_bounded_rate(wire: Wire) -> None:
    """A person waits for the first words: they must not wait for a batch to fill."""
    view = RunView("q", clock=wire.clock)
    view.handle(StepStarted(1))
    before = len(wire.messages)
    view.handle(AssistantTextDelta(1, "Hi"))  # 2 characters, no time has passed
    sent = [m for m in wire.messages[before:] if m[1] == "msg"]
    assert any(isinstance(d, dict) and d.get("method") == "custom" for _, _, _, d in sent)
    after_first = len(wire.messages)
    view.handle(AssistantTextDelta(1, " there"))
    assert len(wire.messages) == after_first  # later deltas wait for the interval
    wire.now += 1.0
    view.tick()
    assert len(wire.messages) > after_first


@pytest.mark.parametrize(
    "secret",
    ["sk-proj-Zq81mN4vT0xR7pL2wK9s", "Bearer 9f8e7d6c5b4a39281706", "AKIAIOSFODNN7EXAMPL1"],
)
def test_a_key_streamed_in_pieces_never_leaves_the_kernel(wire: Wire, secret: str) -> None:
    """Each piece alone is no key; sent as they come, the browser would hold most of one."""
    stream = TextStream()
    start = len(wire.messages)
    text = f"The header is {secret} and that is all."
    for at in range(0, len(text), 3):
        stream.append(text[at : at + 3])
        stream.flush()
    stream.finish()
    traffic = json.dumps([d for _, _, _, d in wire.messages[start:]])
    key = secret.split()[-1]
    pieces = [key[i : i + 6] for i in range(0, len(key) - 5)]
    assert not [p for p in pieces if p in traffic]
    assert wire.text(stream.model_id) == stream.shown
    assert stream.shown.startswith("The header is ") and stream.shown.endswith(" and that is all.")
    assert stream.text == text  # the kernel side keeps what came


def test_a_long_run_without_spaces_is_sent_exactly(wire: Wire) -> None:
    """Minified JSON or base64 in a call's arguments (its cost per send, once quadratic, is
    measured in benchmarks/bench_long_stream.py)."""
    stream = TextStream()
    piece = "x" * 40_000 + " "
    for _ in range(10):
        stream.append(piece)
        stream.flush()
    stream.finish()
    assert wire.text(stream.model_id) == piece * 10


_SECRETS = [
    "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5q",
    "Authorization: Bearer tok3n-" + "Zx9" * 6,
    "authorization = 'Basic dXNlcjpwYXNzd29yZDEyMw=='",
    '"api_key": "k3y-' + "Q1w2E3r4" * 3 + '"',
    "https://alice:s3cr3t-pa55@example.com/v1",
    "ghp_" + "A1b2C3d4E5f6G7h8I9j0" * 2,
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlLXNpZ25hdHVyZQ",
]
_WORDS = ["the", "model", "said", "{", "}", ",", '"x":', "\n", "ok;", "[1, 2]", "<b>", "\t", "é🌍"]


@pytest.mark.parametrize("seed", range(16))
def test_growing_redaction_shows_what_redacting_the_whole_text_shows(seed: int) -> None:
    """Each send re-reads only the new text and a window before it; what it shows must equal
    redacting everything so far, at every send, keys arriving in any pieces, and what it says
    is new must be exactly what was added to what it shows."""
    rng = random.Random(seed)
    parts: list[str] = []
    while sum(map(len, parts)) < 20_000:  # past the window and the set-aside threshold
        parts.append(f" {rng.choice(_SECRETS)} " if rng.random() < 0.08 else rng.choice(_WORDS))
        parts.append(rng.choice([" ", "", "\n", "  "]))
    text = "".join(parts)
    redaction = GrowingRedaction()
    at = 0
    while at < len(text) or redaction.pending:
        size = rng.choice([1, 2, 3, 7, 40, 300])
        redaction.append(text[at : at + size])
        at += size
        if rng.random() < 0.6 or at >= len(text):
            before = redaction.shown
            chunk, whole = redaction.advance(everything=at >= len(text) or rng.random() < 0.1)
            shown = redaction.shown
            assert shown == redact_secrets(text[: min(at, len(text)) - redaction.pending])
            assert chunk == shown if whole else before + chunk == shown
    assert redaction.text == text and shown == redact_secrets(text)
    for hidden in ("Op5q", "Zx9Zx9", "dXNlcjpw", "Q1w2E3r4", "s3cr3t", "I9j0", "c2lnbmF0"):
        assert hidden not in shown
