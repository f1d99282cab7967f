"""What a tool gives back, and images a person sends: checked, bounded, never sent broken."""

from __future__ import annotations

import asyncio
import io
import threading
import time
from typing import Any

import pytest
from PIL import Image

from nbagent import (
    Agent,
    ImageError,
    ImagePart,
    Limits,
    Tool,
    ToolContext,
    ToolResult,
    image_part,
    user,
)
from nbagent.events import ToolFinished
from nbagent.messages import ToolMessage, ToolResultPart
from nbagent.models import Call, ScriptedModel, Turn

from .conftest import assert_history_valid


def png(width: int = 8, height: int = 6) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), "blue").save(buffer, format="PNG")
    return buffer.getvalue()


def returning(value: Any) -> Tool:
    def run(ctx: ToolContext) -> Any:
        if isinstance(value, BaseException):
            raise value
        return value

    return Tool(name="t", input_schema={"type": "object"}, execute=run)


async def result_of(value: Any, **agent_options: Any) -> tuple[ToolResultPart, ToolFinished]:
    model = ScriptedModel([Turn(Call("t", {})), "ok"])
    agent = Agent(model, [returning(value)], **agent_options)
    events = [e async for e in agent.stream("go")]
    assert_history_valid(agent.messages)
    [message] = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    [finished] = [e for e in events if isinstance(e, ToolFinished)]
    return message.results[0], finished


async def test_a_hand_built_image_that_does_not_decode_never_reaches_the_model() -> None:
    part, finished = await result_of(ToolResult((ImagePart(b"not a png", "image/png"),)))
    assert part.is_error and "unusable result" in part.text and "does not decode" in part.text
    assert not any(isinstance(p, ImagePart) for p in part.content)
    assert finished.status == "error"


async def test_bytes_that_are_no_image_give_the_same_error_text_in_every_run() -> None:
    first, _ = await result_of(b"plain text, not an image")
    second, _ = await result_of(b"plain text, not an image")
    assert first.is_error and "does not decode" in first.text
    assert first.text == second.text  # a replay compares results: no memory address in it
    assert " at 0x" not in first.text


class _Thing:
    pass


async def test_an_error_naming_an_object_reads_the_same_in_every_run() -> None:
    failing = ValueError(f"cannot use {_Thing()!r}")
    first, _ = await result_of(failing)
    assert first.is_error and "cannot use <tests.test_results._Thing object>" in first.text
    assert " at 0x" not in first.text


async def test_a_hand_built_valid_image_is_sent() -> None:
    data = png()
    part, _ = await result_of(ToolResult((ImagePart(data, "image/png", 8, 6),)))
    assert not part.is_error and part.content == (ImagePart(data, "image/png", 8, 6),)


async def test_a_huge_result_is_cut_with_a_marker() -> None:
    part, finished = await result_of("R" * 20_000_000)
    assert part.text.startswith("R" * 100_000)
    assert "19,900,000 more characters were cut" in part.text
    assert len(part.text) < 100_300
    assert finished.result.text == part.text  # the event shows what the model reads
    assert finished.result.value == "R" * 20_000_000  # the person still has the whole value


async def test_the_result_limit_is_configurable_and_covers_errors() -> None:
    part, _ = await result_of(ValueError("E" * 5000), limits=Limits(max_result_chars=1000))
    assert part.is_error and "more characters were cut" in part.text
    assert len(part.text) < 1200


async def test_extra_images_are_left_out_with_a_marker() -> None:
    images = tuple(image_part(png(4 + i, 4)) for i in range(5))
    part, _ = await result_of(ToolResult(images), limits=Limits(max_result_images=2))
    kept = [p for p in part.content if isinstance(p, ImagePart)]
    assert [p.width for p in kept] == [4, 5]
    assert "3 more images left out" in part.text


async def test_a_prompt_image_that_does_not_decode_is_a_clear_error() -> None:
    model = ScriptedModel(["never"])
    agent = Agent(model)
    with pytest.raises(ImageError, match="prompt's image"):
        await agent.run(user("what is this?", ImagePart(b"junk", "image/png")))
    assert agent.messages == [] and model.requests == [] and not agent._running
    assert (await agent.run(user("and this?", image_part(png())))).text == "never"


def test_images_in_a_given_conversation_are_checked() -> None:
    with pytest.raises(ImageError):
        Agent(ScriptedModel([]), messages=[user("look", ImagePart(b"\x89PNG junk", "image/png"))])


class _SlowText:
    """A returned value whose ``str()`` blocks until released (user code run on conversion)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def __str__(self) -> str:
        self.release.wait(10)
        return "slow"

    __repr__ = __str__


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_turning_a_result_into_text_is_bounded_by_the_timeout_and_never_blocks_the_loop(
    kind: str,
) -> None:
    slow = _SlowText()

    def run(ctx: ToolContext) -> Any:
        return slow

    async def run_async(ctx: ToolContext) -> Any:
        return slow

    tool = Tool(
        name="t",
        input_schema={"type": "object"},
        execute=run if kind == "sync" else run_async,
        timeout=0.3,
    )
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.02)
            ticks += 1

    ticker = asyncio.ensure_future(tick())
    model = ScriptedModel([Turn(Call("t", {})), "ok"])
    agent = Agent(model, [tool])
    started = time.monotonic()
    try:
        await asyncio.wait_for(agent.run("go"), 5)
    finally:
        slow.release.set()
        ticker.cancel()
    assert time.monotonic() - started < 3
    assert ticks >= 5  # the loop kept running while str() was stuck
    assert_history_valid(agent.messages)
    [message] = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert message.results[0].is_error and "within 0.3 s" in message.results[0].text


def test_only_builtin_values_are_converted_on_the_loop() -> None:
    """A value whose conversion runs no user code skips the thread hop (a thread per call
    tripled the loop's cost per step); anything that could run user code does not."""
    from nbagent.loop._execution import _plain

    class Loud(str):
        def __str__(self) -> str:
            raise AssertionError("user code ran")

    assert _plain("ok") and _plain(3) and _plain(None) and _plain(2.5) and _plain(True)
    assert _plain({"a": [1, "b", None], "c": {"d": 1.0}}) and _plain((1, 2))
    assert not _plain(Loud("x")) and not _plain(["ok", Loud("x")]) and not _plain({"k": Loud()})
    assert not _plain({1: "non-string key"}) and not _plain(b"bytes") and not _plain(object())
    assert not _plain(list(range(10_000)))  # large: converted off the loop
