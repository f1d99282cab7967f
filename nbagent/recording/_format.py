"""The recording file: its parts, the request fingerprint, and reading and writing it."""

from __future__ import annotations

import json
import math
import operator
import os
import secrets
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._digest import definition_digest as _definition_hash
from .._digest import digest as _hash
from ..errors import RecordingError
from ..generation import NamedToolChoice, Request
from ..messages import Message, message_to_dict
from ..redact import redact_secrets
from ..schema._strict_json import StrictJSONError, strict_loads
from ..tools import Definition

__all__ = ["FORMAT", "VERSION", "Recording", "Step", "fingerprint"]

FORMAT = "nbagent-recording"
VERSION = 1

#: The largest recording file read (a run's model output; far above any real one).
MAX_BYTES = 256 * 2**20

_EVENT_TYPES = {"text", "reasoning", "call", "provider_result", "finish", "error", "raise"}


def _options_hash(options: Any) -> str:
    return _hash(
        {
            "max_tokens": options.max_tokens,
            "temperature": options.temperature,
            "top_p": options.top_p,
            "stop": list(options.stop),
            "parallel_tool_calls": options.parallel_tool_calls,
            "extra": dict(options.extra),
        }
    )


class MessageHashes:
    """Hashes of what a request is made of, each computed once: a run sends the same message,
    definition and options objects with every step, so each step hashes only what is new."""

    def __init__(self) -> None:
        self._known: dict[int, tuple[Any, str]] = {}
        self._last: tuple[Message, ...] = ()
        self._last_hashes: list[str] = []

    def _cached(self, value: Any, compute: Any) -> str:
        found = self._known.get(id(value))
        if found is not None and found[0] is value:
            return found[1]
        digest: str = compute(value)
        self._known[id(value)] = (value, digest)  # the strong reference keeps the id unique
        return digest

    def __call__(self, message: Message) -> str:
        return self._cached(message, _message_hash)

    def messages(self, messages: Sequence[Message]) -> list[str]:
        """Hashes of a request's messages. A run's history only grows, so when this request
        starts with the very objects of the one before, only the new ones are looked at."""
        messages = tuple(messages)
        last = self._last
        size = len(last)
        if size and len(messages) >= size and all(map(operator.is_, messages[:size], last)):
            hashes = [*self._last_hashes, *(self(m) for m in messages[size:])]
        else:
            hashes = [self(m) for m in messages]
        self._last, self._last_hashes = messages, hashes
        return list(hashes)

    def definition(self, definition: Definition) -> str:
        return self._cached(definition, _definition_hash)

    def options(self, options: Any) -> str:
        return self._cached(options, _options_hash)


def _message_hash(message: Message) -> str:
    """A message's hash, taken over the message as a replay rebuilds it: a recording keeps the
    model's output with credential-shaped text as ``***``, so the conversation a replay sends
    holds ``***`` where the recorded one held the text. Hashing both in that form (redaction
    leaves ``***`` as it is) keeps such a run replayable instead of diverging at its next step.
    A text part's ``raw`` (the provider's item, e.g. a Responses message's phase) is not
    recorded, so it is not hashed either."""
    data = redacted(message_to_dict(message))
    for part in data.get("content") or ():
        if isinstance(part, dict) and part.get("type") == "text":
            part.pop("raw", None)
    return f"{data.get('role', '?')}:{_hash(data)}"


def redacted(value: Any, depth: int = 0) -> Any:
    """``value`` (JSON-shaped) with every string's credential-shaped text replaced by ``***``."""
    if isinstance(value, str):
        return redact_secrets(value)
    if depth > 64:
        return value if value is None or isinstance(value, (bool, int, float)) else "***"
    if isinstance(value, dict):
        return {key: redacted(item, depth + 1) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redacted(item, depth + 1) for item in value]
    return value


def fingerprint(request: Request, hashes: MessageHashes | None = None) -> dict[str, Any]:
    """What identifies a request, as stored with each recorded step (hashes, no content)."""
    digest = hashes or MessageHashes()
    choice = request.options.tool_choice
    found = {
        "tools": {d.name: digest.definition(d) for d in request.tools},
        "tool_choice": {"name": choice.name} if isinstance(choice, NamedToolChoice) else choice,
        "instructions": _hash(request.instructions) if request.instructions else None,
        "options": digest.options(request.options),
        "messages": digest.messages(request.messages),
    }
    if request.answer_format is not None:  # a typed run's native answer (absent otherwise)
        found["answer_format"] = _hash(dict(request.answer_format.schema))
    return found


# --- the recording ---------------------------------------------------------------------------


@dataclass
class Step:
    """One model request: its fingerprint and the coalesced events the model streamed."""

    request: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Recording:
    """Every model request of one or more runs, in order (see the module docs)."""

    steps: list[Step] = field(default_factory=list)
    model: str = ""
    created: str = ""
    prompt: str = ""
    source: str = ""
    #: Recorded by a loop with the repeat guard (nbagent.loop._repeats), whose notes are in the
    #: requests. A file without it is older: it replays without the guard, as it was recorded.
    repeat_guard: bool = True
    #: The conversation when the run ended (messages as :func:`~nbagent.messages.message_to_dict`
    #: writes them, credential-shaped text as ``***``), so that a notebook whose kernel restarted
    #: can go on from it (:mod:`nbagent.recording._conversation`); None in a recording that
    #: does not keep it (a cassette, an older file).
    history: list[dict[str, Any]] | None = None

    def keep_history(self, messages: Sequence[Message]) -> None:
        """Keep ``messages`` as the conversation the recording ended with (see ``history``)."""
        self.history = [redacted(message_to_dict(m)) for m in messages]

    # --- files -----------------------------------------------------------------------------

    def to_json(self) -> str:
        """The file's text: sorted keys, one event per line (diffs read well)."""
        lines = ["{"]
        head = {
            "format": FORMAT,
            "version": VERSION,
            "created": self.created,
            "model": self.model,
            "prompt": self.prompt,
            "repeat_guard": self.repeat_guard,
        }
        for key, value in head.items():
            lines.append(f"  {json.dumps(key)}: {_dumps(value)},")
        lines.append('  "steps": [')
        previous: dict[str, Any] | None = None
        for index, step in enumerate(self.steps):
            lines.append("    {")
            lines.append(f'      "request": {_dumps(_compact(step.request, previous))},')
            previous = step.request
            lines.append('      "events": [')
            for number, event in enumerate(step.events):
                comma = "," if number < len(step.events) - 1 else ""
                lines.append(f"        {_dumps(event)}{comma}")
            lines.append("      ]")
            lines.append("    }" + ("," if index < len(self.steps) - 1 else ""))
        lines.append("  ]" + ("," if self.history is not None else ""))
        if self.history is not None:  # one message a line, as the events are
            lines.append('  "history": [')
            for number, message in enumerate(self.history):
                comma = "," if number < len(self.history) - 1 else ""
                lines.append(f"    {_dumps(message)}{comma}")
            lines.append("  ]")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def save(self, path: str | Path) -> Path:
        """Write the recording atomically: a crash never leaves half a file, and two writers
        (two kernels, two threads) never share a temporary file. The temporary file is created
        new (``O_EXCL``), so a file or symlink already there — a folder from git may hold one —
        is never written through."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        data = self.to_json().encode("utf-8")
        while True:
            temporary = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
            try:
                handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            except FileExistsError:
                continue
            break
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(data)
            os.replace(temporary, target)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
        return target

    @classmethod
    def from_json(cls, text: str, *, source: str = "recording") -> Recording:
        """Parse and check a recording; :class:`RecordingError` says what is wrong and where."""
        try:
            data = strict_loads(text)
        except StrictJSONError as exc:  # one text, one meaning: what a person reads is replayed
            why = f"{_place(source, exc.path, text)}: {exc}"
            if exc.key is not None:
                why += ", so a person reading the file and the replay could read different values"
            raise RecordingError(why) from None
        except (ValueError, RecursionError) as exc:  # RecursionError: nested past all reason
            raise RecordingError(f"{source} is not valid JSON (truncated?): {exc}") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise RecordingError(f"{source} is not an nbagent recording (no format {FORMAT!r})")
        version = data.get("version")
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise RecordingError(f"{source} has no valid format version")
        if version > VERSION:
            raise RecordingError(
                f"{source} was written by a newer nbagent (format version {version}; this one "
                f"reads version {VERSION}): upgrade nbagent to replay it"
            )
        steps = data.get("steps")
        if not isinstance(steps, list):
            raise RecordingError(f"{source} has no list of steps")
        parsed: list[Step] = []
        previous: dict[str, Any] | None = None
        for number, raw in enumerate(steps, start=1):
            where = f"{source}, step {number}"
            if not isinstance(raw, dict):
                raise RecordingError(f"{where} is not an object")
            request = _expand(raw.get("request"), previous, where)
            events = raw.get("events")
            previous = request
            if not isinstance(events, list):
                raise RecordingError(f"{where} has no list of events")
            ended = False
            for index, event in enumerate(events):
                check_event(event, f"{where}, event {index + 1}")
                if ended:
                    raise RecordingError(
                        f"{where}, event {index + 1}: a stream has nothing after its finish, "
                        "error or raise"
                    )
                ended = event["type"] in ("finish", "error", "raise")
            parsed.append(Step(request, events))
        history = data.get("history")
        if history is not None and (
            not isinstance(history, list) or not all(isinstance(m, dict) for m in history)
        ):
            raise RecordingError(f"{source}: its history must be a list of messages")
        return cls(
            parsed,
            str(data.get("model") or ""),
            str(data.get("created") or ""),
            str(data.get("prompt") or ""),
            source,
            data.get("repeat_guard") is True,
            history,
        )

    @classmethod
    def load(cls, path: str | Path, *, source: str | None = None) -> Recording:
        """Read a recording file (see :meth:`from_json`); ``source`` names it in messages
        (default: the path as given)."""
        target = Path(path)
        shown = str(target) if source is None else source
        try:
            # Not blocking on open, and only a regular file of bounded size: a recordings folder
            # may come from anywhere, and a FIFO or a link to /dev/zero would hang the kernel.
            handle = os.open(target, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
            with os.fdopen(handle, "rb") as file:
                info = os.fstat(file.fileno())
                if not stat.S_ISREG(info.st_mode):
                    raise RecordingError(f"the recording {shown} is not a regular file")
                # read() with a size allocates that size first: ask for what the file holds
                # (one byte more shows it grew), not for the limit
                expected = min(info.st_size, MAX_BYTES) + 1
                data = file.read(expected)
                if len(data) == expected:
                    data += file.read(MAX_BYTES + 1 - len(data))
            if len(data) > MAX_BYTES:
                raise RecordingError(
                    f"the recording {shown} is larger than {MAX_BYTES // 2**20} MiB: not read"
                )
            text = data.decode("utf-8")
            del data  # the text is parsed next: the bytes need not sit beside it
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise RecordingError(f"cannot read the recording {shown}: {reason}") from None
        return cls.from_json(text, source=shown)


def _place(source: str, path: tuple[str | int, ...], text: str) -> str:
    """Where in a recording a JSON problem sits, the way its other problems are named: the
    file, then the step, its request or event (with the event's type), then the way further in.
    Only on the error path: the text is read again, loosely, to tell the event's type."""
    where, rest = source, list(path)
    if len(rest) >= 2 and rest[0] == "steps" and isinstance(rest[1], int):
        step = rest[1]
        where += f", step {step + 1}"
        rest = rest[2:]
        if len(rest) >= 2 and rest[0] == "events" and isinstance(rest[1], int):
            where += f", event {rest[1] + 1}"
            kind = _event_type(text, step, rest[1])
            if kind:
                where += f" ({kind})"
            rest = rest[2:]
        elif rest and rest[0] == "request":
            where += "'s request"
            rest = rest[1:]
    elif not rest:
        where += " (its header)"
    if rest:
        where += ", at " + "/".join(str(part) for part in rest)
    return where


def _event_type(text: str, step: int, index: int) -> str:
    try:
        event = json.loads(text)["steps"][step]["events"][index]
    except (ValueError, RecursionError, LookupError, TypeError):
        return ""
    kind = event.get("type") if isinstance(event, dict) else None
    return f"a {kind} event" if isinstance(kind, str) and kind in _EVENT_TYPES else ""


_REQUEST_KEYS = ("tools", "tool_choice", "instructions", "options")


def _compact(request: dict[str, Any], previous: dict[str, Any] | None) -> dict[str, Any]:
    """A step's fingerprint as written: what did not change since the step before is left out,
    and the messages that step sent are not repeated (``messages_from``). Without this a run of
    many steps would write its whole history again with every step."""
    if previous is None:
        return request
    out = {k: v for k, v in request.items() if k != "messages" and previous.get(k) != v}
    if previous.get("answer_format") is not None and "answer_format" not in request:
        out["answer_format"] = None  # optional, so not carried on from the step before
    now, before = request.get("messages", []), previous.get("messages", [])
    if now[: len(before)] == before:
        out["messages_from"] = len(before)
        out["messages"] = now[len(before) :]
    else:
        out["messages"] = now
    return out


def _expand(raw: Any, previous: dict[str, Any] | None, where: str) -> dict[str, Any]:
    """The whole fingerprint of a step read from a file (see :func:`_compact`)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("messages"), list):
        raise RecordingError(f"{where} has no request fingerprint")
    if not all(isinstance(m, str) for m in raw["messages"]):
        raise RecordingError(f"{where}: the message hashes must be strings")
    request = {k: v for k, v in raw.items() if k != "messages_from"}
    start = raw.get("messages_from", 0)
    if previous is None:
        if start:
            raise RecordingError(f"{where}: the first step cannot continue another")
        missing = [k for k in _REQUEST_KEYS if k not in request]
        if missing:
            raise RecordingError(f"{where}: the request fingerprint lacks {missing}")
        return request
    before = previous["messages"]
    if isinstance(start, bool) or not isinstance(start, int) or not 0 <= start <= len(before):
        raise RecordingError(f"{where}: messages_from must count the step before's messages")
    for key in (*_REQUEST_KEYS, "answer_format"):
        request.setdefault(key, previous.get(key))
    request["messages"] = [*before[:start], *raw["messages"]]
    return request


#: Keys that come first in an event, so that a line reads "type, who, what …, when".
_FIRST = ("type", "id", "call_id", "name", "reason", "text", "arguments")


def _ordered(value: Any) -> Any:
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: (_FIRST.index(k) if k in _FIRST else len(_FIRST), k))
        return {k: _ordered(value[k]) for k in keys}
    if isinstance(value, list):
        return [_ordered(v) for v in value]
    return value


def _dumps(value: Any) -> str:
    """One value on one line, keys in a fixed order (a stable file, readable in a diff)."""
    return json.dumps(_ordered(value), ensure_ascii=False, separators=(", ", ": "))


#: Optional event fields with one meaning each: a hand edit that gives another type (the
#: string "false" for a flag, which is true in Python) is refused, never reinterpreted.
_OPTIONAL: tuple[tuple[str, type | tuple[type, ...], str], ...] = (
    ("complete", bool, "true or false"),
    ("provider_executed", bool, "true or false"),
    ("is_error", bool, "true or false"),
    ("final", str, "a string"),
    ("text", str, "a string"),
    ("signature", str, "a string"),
    ("redacted", str, "a string"),
    ("raw_reason", str, "a string"),
    ("error", str, "a string"),
)


def check_event(event: Any, where: str) -> None:
    """Refuse an event that could not have come from a stream (hand edits, truncation)."""
    if not isinstance(event, dict) or event.get("type") not in _EVENT_TYPES:
        raise RecordingError(f"{where}: not a known event ({str(event)[:80]})")
    kind = event["type"]
    strings = {
        "text": ("text",),
        "reasoning": (),
        "call": ("id", "name", "arguments"),
        "provider_result": ("call_id", "name"),
        "finish": ("reason",),
        "error": ("message",),
        "raise": ("message",),
    }[kind]
    for key in strings:
        if not isinstance(event.get(key), str):
            raise RecordingError(f"{where}: a {kind} event needs a string {key!r}")
    for key, types, named in _OPTIONAL:
        if key in event and event[key] is not None and not isinstance(event[key], types):
            raise RecordingError(f"{where}: {key!r} must be {named}, not {event[key]!r:.40}")
    if kind == "finish" and event["reason"] not in (
        "stop",
        "tool_calls",
        "pause",
        "length",
        "content_filter",
        "error",
        "other",
    ):
        raise RecordingError(f"{where}: unknown finish reason {event['reason']!r}")
    usage = event.get("usage")
    counts = usage.values() if isinstance(usage, dict) else [-1]
    if (
        kind == "finish"
        and usage is not None
        and not all(isinstance(v, int) and v >= 0 for v in counts)
    ):
        raise RecordingError(f"{where}: usage must hold non-negative integers")
    for key in ("t", "d"):
        value = event.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise RecordingError(f"{where}: {key!r} must be a non-negative number")
        if not (math.isfinite(value) and value >= 0):
            raise RecordingError(f"{where}: {key!r} must be a non-negative number")
