"""Replay: a Generator that plays a recording back, checking each request against it first."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from .. import errors
from .._digest import digest as _hash
from ..errors import RecordingError, ReplayDivergedError
from ..generation import (
    Finish,
    Generator,
    ProviderToolResultReceived,
    ReasoningDelta,
    Request,
    StreamError,
    StreamEvent,
    TextDelta,
    ToolCallReceived,
    ToolInputDelta,
    ToolInputEnd,
    ToolInputStart,
    Usage,
)
from ..messages import Message, ProviderToolResult, message_to_dict
from ..tools import ToolCall
from ._format import MessageHashes, Recording, Step, check_event, fingerprint

__all__ = ["Pace", "ReplayGenerator", "replay"]

#: How a replay streams: as fast as it can, at a steady readable rate, or with the recorded timing.
Pace = Literal["instant", "readable", "recorded"]
#: Characters per second of the "readable" pace, and the size of one streamed piece.
READABLE_RATE = 600.0
_PIECE = 24
#: The longest wait between two replayed pieces, whatever was recorded.
_MAX_GAP = 2.0


# --- replay ------------------------------------------------------------------------------------


class ReplayGenerator:
    """A Generator that plays a :class:`Recording` back, step by step (see the module docs).

    ``pace`` sets how text streams; ``fallback`` (a live Generator) takes over from the first
    diverging step instead of failing. :attr:`diverged` holds the first divergence; without a
    fallback every later request fails with it too (a helper's run that diverged fails its
    caller's next request with what the helper met, naming the call and its new result).
    """

    def __init__(
        self,
        recording: Recording,
        *,
        pace: Pace = "instant",
        fallback: Generator | None = None,
        model: str | None = None,
    ) -> None:
        self.recording = recording
        self.pace: Pace = pace
        self.fallback = fallback
        self.model = model if model is not None else f"replay of {recording.model or 'a model'}"
        self.position = 0
        self.diverged: ReplayDivergedError | None = None
        self._hashes = MessageHashes()
        for number, step in enumerate(recording.steps, 1):  # refused now, not mid-run
            _check_step(step, f"{recording.source}, step {number}")

    def __repr__(self) -> str:
        return (
            f"ReplayGenerator({self.recording.source!r}: step {self.position} of "
            f"{len(self.recording.steps)})"
        )

    @property
    def repeat_guard(self) -> bool:
        """Whether the run may add the repeat guard's notes: not when replaying a recording
        made before them (its requests have none, and the replay would diverge at once)."""
        return self.recording.repeat_guard

    def native_answers(self, schema: Any) -> tuple[bool, str]:
        """A typed run replays as it was recorded: natively when a recorded step asked for
        this very schema through the API's structured output, else with the answer tool."""
        wanted = _hash(dict(schema))
        if any(step.request.get("answer_format") == wanted for step in self.recording.steps):
            return True, "as recorded (the API's structured output)"
        return False, "the recording asked for no structured output in this schema"

    @property
    def finished(self) -> bool:
        """Every recorded step was played."""
        return self.position >= len(self.recording.steps)

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        if self.diverged is not None and self.fallback is not None:
            async for event in self.fallback.stream(self._for_fallback(request)):
                yield event
            return
        number = self.position + 1
        if self.diverged is not None and self.fallback is None:
            # once departed, every later request is past the point where the two agree: a
            # helper that diverged leaves the replay at its own step, and comparing its
            # caller's next request with that step would name a false difference (tools
            # "not registered now"); the first divergence is the one that says what changed
            raise self.diverged
        try:
            self._check(request, number)
        except ReplayDivergedError as exc:
            self.diverged = exc
            if self.fallback is None:
                raise
            async for event in self.fallback.stream(self._for_fallback(request)):
                yield event
            return
        self.position = number
        async for event in self._play(_items(self.recording.steps[number - 1])):
            yield event

    def _for_fallback(self, request: Request) -> Request:
        """``request`` as the live model is to get it: the loop names the model it was given
        (this replay, ``replay of …``), which is no model a provider knows; the fallback's own
        name goes instead."""
        return dataclasses.replace(request, model=str(getattr(self.fallback, "model", "") or ""))

    def _check(self, request: Request, number: int) -> None:
        source = self.recording.source
        if number > len(self.recording.steps):
            raise ReplayDivergedError(
                f"replay of {source} diverged at step {number}: the recording has only "
                f"{len(self.recording.steps)} step(s), and the run asked the model again",
                step=number,
                difference="more requests than recorded",
            )
        recorded = self.recording.steps[number - 1].request
        current = fingerprint(request, self._hashes)
        difference = _difference(recorded, current, request)
        if difference:
            raise ReplayDivergedError(
                f"replay of {source} diverged at step {number}: {difference}",
                step=number,
                difference=difference,
            )

    def unplayed(self, request: Request) -> str | None:
        """How a run that ended with recorded steps left departed from its recording, in
        words; None when every step was played (or the replay diverged already). ``request``
        is the one the run would have sent next. A run can end early without asking the model
        again (a tool that now ends the run, a tighter limit), so no request is ever compared:
        only this check sees that departure, and names the first difference it finds."""
        if self.diverged is not None or self.finished:
            return None
        number = self.position + 1
        total = len(self.recording.steps)
        recorded = self.recording.steps[number - 1].request
        difference = _difference(recorded, fingerprint(request, self._hashes), request)
        return (
            f"replay of {self.recording.source} diverged after step {self.position}: the run "
            f"ended, but the recording asks the model again (step {number} of {total}): "
            + (
                difference
                or "the conversation is the recorded one, so the run stopped for another reason "
                "(a tool that now ends the run, a step or token limit)"
            )
        )

    async def _play(
        self, items: Iterator[tuple[float, StreamEvent | BaseException]]
    ) -> AsyncIterator[StreamEvent]:
        previous = 0.0
        for at, item in items:
            if isinstance(item, BaseException):
                raise item
            if self.pace == "recorded":
                gap = min(_MAX_GAP, max(0.0, at - previous))
                if gap:
                    await asyncio.sleep(gap)
                previous = max(previous, at)
            elif self.pace == "readable" and isinstance(item, (TextDelta, ToolInputDelta)):
                size = len(item.text if isinstance(item, TextDelta) else item.delta)
                await asyncio.sleep(size / READABLE_RATE)
            yield item


def replay(
    recording: Recording | str | Path,
    *,
    pace: Pace = "instant",
    fallback: Generator | None = None,
) -> ReplayGenerator:
    """A Generator that replays ``recording`` (a :class:`Recording` or a file's path)."""
    if not isinstance(recording, Recording):
        recording = Recording.load(recording)
    return ReplayGenerator(recording, pace=pace, fallback=fallback)


def _pieces(text: str, at: float, duration: float) -> Iterator[tuple[float, str]]:
    """A coalesced text split again into pieces spread over its recorded duration, one piece
    at a time: a 100 MB text is millions of pieces, and only the one being played exists."""
    count = -(-len(text) // _PIECE)
    step = duration / count if count else 0.0
    for n in range(count):
        yield at + step * (n + 1), text[n * _PIECE : (n + 1) * _PIECE]


def _check_step(step: Step, where: str) -> None:
    """Refuse a step that could not have come from a stream before anything plays: each event
    as the file reader checks it (a Recording may also be built in code), and an ending."""
    if not isinstance(step.events, list):
        raise RecordingError(f"{where} has no list of events")
    for index, event in enumerate(step.events):
        check_event(event, f"{where}, event {index + 1}")
    if not any(event["type"] in _ENDINGS for event in step.events):
        raise RecordingError(
            f"{where} ends without a finish, an error or a raise (truncated or edited?): "
            "nothing of it is replayed"
        )


_ENDINGS = ("finish", "error", "raise")


def _items(step: Step) -> Iterator[tuple[float, StreamEvent | BaseException]]:
    """The stream events of one step, made as they are played (:func:`_check_step` checked the
    step first), so a replay holds no more than the recording itself and the piece at hand."""
    received: list[tuple[float, StreamEvent]] = []
    for event in step.events:
        kind = event["type"]
        at = float(event.get("t", 0)) / 1000
        duration = float(event.get("d", 0)) / 1000
        if kind == "text":
            for t, piece in _pieces(event["text"], at, duration):
                yield t, TextDelta(piece)
        elif kind == "reasoning":
            text = str(event.get("text") or "")
            yield at, ReasoningDelta(text, event.get("signature"), event.get("redacted"))
        elif kind == "call":
            call_id, name = event["id"], event["name"]
            executed = bool(event.get("provider_executed", False))
            yield at, ToolInputStart(call_id, name, executed)
            args = event["arguments"]
            for t, piece in _pieces(args, at, duration):
                yield t, ToolInputDelta(call_id, piece)
            yield at + duration, ToolInputEnd(call_id)
            if event.get("complete", True):
                final = event.get("final", args)
                text = final if isinstance(final, str) else args
                call = ToolCall(call_id, name, text, executed, raw=event.get("raw"))
                received.append((at + duration, ToolCallReceived(call)))
        elif kind == "provider_result":
            result = ProviderToolResult(
                event["call_id"],
                event["name"],
                event.get("content"),
                bool(event.get("is_error", False)),
                event.get("raw"),
            )
            yield at, ProviderToolResultReceived(result)
        elif kind == "finish":
            yield from received
            received = []
            usage = event.get("usage") or {}
            yield (
                at,
                Finish(
                    event["reason"],
                    Usage(
                        usage.get("input_tokens", 0),
                        usage.get("output_tokens", 0),
                        usage.get("cache_read_tokens", 0),
                        usage.get("cache_write_tokens", 0),
                    ),
                    event.get("raw_reason"),
                ),
            )
        elif kind == "error":
            yield from received
            received = []
            yield at, StreamError(errors.StreamError(event["message"]))
        elif kind == "raise":
            yield at, _raised(str(event.get("error", "")), event["message"])
    yield from received


def _raised(name: str, message: str) -> BaseException:
    """The error a recorded ``raise`` names, as a generator could have raised it: an nbagent
    error that is not the loop's own (an AgentError wraps a run, a RecordingError is replay's)
    and that builds from a message alone; anything else (a hand edit) is a GenerationError."""
    error_type = getattr(errors, name, None)
    if (
        isinstance(error_type, type)
        and issubclass(error_type, errors.NbagentError)
        and not issubclass(error_type, (errors.AgentError, errors.RecordingError))
    ):
        try:
            made = error_type(message)
        except Exception:  # a class whose constructor wants more than a message
            made = None
        if isinstance(made, errors.NbagentError):
            return made
    return errors.GenerationError(message)


def _difference(recorded: Mapping[str, Any], current: Mapping[str, Any], request: Request) -> str:
    """The first thing that differs between two fingerprints, in words; "" when none does."""
    tools_then = recorded.get("tools") or {}
    tools_now = current.get("tools") or {}
    if not isinstance(tools_then, Mapping):
        tools_then = {}
    removed = sorted(set(tools_then) - set(tools_now))
    added = sorted(set(tools_now) - set(tools_then))
    if removed or added:
        parts = []
        if removed:
            parts.append(f"tool(s) {', '.join(removed)} were recorded but are not registered now")
        if added:
            parts.append(f"tool(s) {', '.join(added)} are registered now but were not recorded")
        return "; ".join(parts)
    changed = sorted(name for name in tools_now if tools_then.get(name) != tools_now[name])
    if changed:
        return (
            f"the definition (description or schema) of tool(s) {', '.join(changed)} differs "
            "from the recording"
        )
    if recorded.get("tool_choice") != current.get("tool_choice"):
        return (
            f"the tool choice is {current.get('tool_choice')!r}, recorded "
            f"{recorded.get('tool_choice')!r}"
        )
    if recorded.get("answer_format") != current.get("answer_format"):
        return "the typed answer's format (output=) differs from the recording"
    if recorded.get("instructions") != current.get("instructions"):
        return "the instructions differ from the recording"
    if recorded.get("options") not in (None, current.get("options")):
        return "the generation options (max tokens, temperature, stop …) differ from the recording"
    then: Sequence[str] = recorded.get("messages") or []
    now: Sequence[str] = current.get("messages") or []
    for index, (a, b) in enumerate(zip(then, now, strict=False)):
        if a != b:
            now_message = _describe(request.messages[index])
            return f"message {index + 1} of the conversation differs: now {now_message}"
    if len(then) != len(now):
        if len(now) > len(then):
            extra = request.messages[len(then)]
            return f"the conversation has more messages than recorded: {_describe(extra)}"
        return f"the conversation has {len(now)} messages, the recording {len(then)}"
    return ""


def _describe(message: Message) -> str:
    """A message in a few words, for a divergence message."""
    data = message_to_dict(message)
    role = data.get("role")
    if role == "tool":
        results = data.get("results", [])
        described = []
        for result in results[:3]:
            parts = result.get("content", [])
            text = "".join(p.get("text", "") for p in parts if p.get("type") == "text")
            described.append(
                f"the result of {result.get('name')} ({result.get('call_id')}): {text[:80]!r}"
            )
        return "; ".join(described) or "tool results"
    text = "".join(p.get("text", "") for p in data.get("content", []) if p.get("type") == "text")
    calls = [p.get("name") for p in data.get("content", []) if p.get("type") == "tool_call"]
    words = f"a {role} message {text[:80]!r}"
    if calls:
        words += f" calling {', '.join(str(c) for c in calls)}"
    return words
