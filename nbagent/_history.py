"""What enters the conversation history: valid for every provider, whatever a model or tool sent.

The history is re-sent on every later turn, so one bad value in it would break every later
request ("a poisoned conversation"). Everything passes through here on its way in:

* calls: arguments that are not strict JSON or exceed a limit are kept as ``{}`` (their error
  result says why), a name no tool can have is replaced by one every provider accepts (and the
  call refused), and calls beyond the per-turn limit are refused;
* text from the model and from tools: lone surrogates (which no UTF-8 request can carry)
  become U+FFFD;
* tool results: text beyond the limit is cut, extra images left out, each with a marker;
* prompts: every image is decode-checked.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import Any

from .content import ImagePart, Part, TextPart, ToolResult, checked_image
from .errors import AgentError, ArgumentsError, ImageError
from .limits import Limits
from .messages import AssistantMessage, Message, ReasoningPart, ToolMessage, UserMessage
from .redact import redact_secrets
from .tools import ToolCall, parse_call_arguments

__all__ = [
    "CheckedCall",
    "check_calls",
    "checked_history",
    "clean_text",
    "history_message",
    "prompt_for_history",
    "result_for_model",
]

_SURROGATE = re.compile("[\ud800-\udfff]")
#: What every provider accepts as a function name (and every registered tool's name matches).
_VALID_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_INVALID_CHARS = re.compile(r"[^A-Za-z0-9_-]")
STAND_IN = "{}"


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (the text itself when it has none)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


@dataclass(frozen=True)
class CheckedCall:
    """One call of a finished answer, ready to be handled.

    ``call`` is the call as the history keeps it (its arguments replaced by ``{}`` when they
    could not be kept); ``input`` the parsed arguments (None when ``problem`` is set);
    ``problem`` the error result the model reads instead of running the call.
    """

    call: ToolCall
    input: Any = None
    problem: str | None = None


def check_calls(
    calls: tuple[ToolCall, ...], limits: Limits, tools: Collection[str]
) -> list[CheckedCall]:
    """Parse every call strictly within ``limits``; refuse the calls beyond the per-turn cap,
    and calls whose name no tool can have (``tools`` are the names offered)."""
    checked: list[CheckedCall] = []
    cap = limits.max_calls_per_turn
    for index, call in enumerate(calls):
        safe = _safe_name(call)
        if safe.name != call.name:
            available = ", ".join(sorted(tools)) or "none"
            checked.append(
                CheckedCall(
                    _bounded(safe, limits),
                    problem=(
                        f"Unknown tool {_shown(call.name)} (a tool name has 1-64 letters, digits, "
                        f"'_' or '-'; this conversation shows it as {safe.name!r}), nothing was "
                        f"run. Available tools: {available}."
                    ),
                )
            )
            continue
        if index >= cap:  # kept as sent when valid: the model may make it again later
            checked.append(
                CheckedCall(
                    _bounded(safe, limits),
                    problem=(
                        f"This call to {_shown(call.name)} was not run: the answer asked for "
                        f"{len(calls)} tool calls, more than the limit of {cap} per turn, and "
                        f"only the first {cap} were handled. Make the remaining calls in a "
                        "later turn."
                    ),
                )
            )
            continue
        try:
            value = parse_call_arguments(safe, limits)
        except ArgumentsError as exc:
            checked.append(
                CheckedCall(
                    replace(safe, arguments=STAND_IN),
                    problem=(
                        f"Invalid arguments for {_shown(call.name)}, nothing was run; fix them "
                        f"and call again. (They could not be kept as sent, so this conversation "
                        f"shows them as {STAND_IN}.)\n{exc}"
                    ),
                )
            )
            continue
        checked.append(CheckedCall(safe, value))
    return checked


def _bounded(call: ToolCall, limits: Limits) -> ToolCall:
    """``call`` itself, or with ``{}`` for arguments the history cannot keep."""
    try:
        parse_call_arguments(call, limits)
    except ArgumentsError:
        return replace(call, arguments=STAND_IN)
    return call


def _safe_name(call: ToolCall) -> ToolCall:
    """``call`` itself when its name could be a tool's; else renamed to a name every provider
    accepts (invalid characters become ``_``, at most 64 of them)."""
    if _VALID_NAME.fullmatch(call.name):
        return call
    name = _INVALID_CHARS.sub("_", call.name[:64]) or "unknown_tool"
    return replace(call, name=name)


def _shown(name: str) -> str:
    return repr(name if len(name) <= 64 else name[:61] + "...")


def history_message(
    message: AssistantMessage, checked: list[CheckedCall], limits: Limits
) -> AssistantMessage:
    """The assistant message as the history keeps it: checked calls, clean text.

    Calls the loop does not run (provider-executed ones) get the same argument checks.
    """
    by_id = {c.call.id: c.call for c in checked}
    parts: list[Any] = []
    for part in message.content:
        if isinstance(part, ToolCall):
            kept = by_id.get(part.id)
            if kept is None:
                kept = _bounded(_safe_name(part), limits)
            parts.append(kept)
        elif isinstance(part, TextPart):
            parts.append(replace(part, text=clean_text(part.text)))  # raw stays with it
        elif isinstance(part, ReasoningPart):
            parts.append(replace(part, text=clean_text(part.text)))
        else:  # a provider's own result block: sent back verbatim
            parts.append(part)
    return AssistantMessage(tuple(parts))


def result_for_model(result: ToolResult, limits: Limits) -> ToolResult:
    """``result`` as the model may read it: clean text, cut beyond the limits, with markers.

    An error's text has its credential-shaped parts hidden (:func:`~nbagent.redact.redact_secrets`):
    an exception's message or a server's error often quotes a header or a key by accident,
    and an error result is shown to people and saved as it is sent. (A successful result is
    what the tool meant to return, and goes as it is.)
    """
    budget = limits.max_result_chars
    images = limits.max_result_images
    parts: list[Part] = []
    cut = dropped = 0
    changed = False
    for part in result.content:
        if isinstance(part, TextPart):
            text = clean_text(part.text)
            if result.is_error:
                hidden = redact_secrets(text)
                text = text if hidden == text else hidden
            if len(text) > budget:
                cut += len(text) - budget
                text = text[:budget]
            budget -= len(text)
            if text is not part.text:
                changed = True
                if text:
                    parts.append(TextPart(text))
            else:
                parts.append(part)
        elif isinstance(part, ImagePart) and images > 0:
            images -= 1
            parts.append(part)
        else:
            dropped += 1
            changed = True
    if cut:
        parts.append(
            TextPart(
                f"[... {cut:,} more characters were cut: a tool result may send at most "
                f"{limits.max_result_chars:,} characters to the model]"
            )
        )
    if dropped:
        parts.append(
            TextPart(
                f"[{dropped} more image{'s' if dropped > 1 else ''} left out: a tool result may "
                f"send at most {limits.max_result_images} images to the model]"
            )
        )
    if not changed:
        return result
    return ToolResult(tuple(parts), result.is_error, result.terminate, result.value)


def prompt_for_history(message: UserMessage, what: str = "the prompt") -> UserMessage:
    """The prompt with clean text and decode-checked images (raises :class:`ImageError`, naming
    ``what`` the message is)."""
    parts: list[Part] = []
    for index, part in enumerate(message.content):
        if isinstance(part, TextPart):
            parts.append(TextPart(clean_text(part.text)))
        elif isinstance(part, ImagePart):
            try:
                parts.append(checked_image(part))
            except ImageError as exc:
                raise ImageError(f"{what}'s image (part {index}) is not usable: {exc}") from None
        else:
            raise AgentError(
                f"a prompt holds text and images only; part {index} is a {type(part).__name__}"
            )
    if all(new == old for new, old in zip(parts, message.content, strict=True)):
        return message
    return UserMessage(tuple(parts))


def checked_history(messages: list[Message]) -> list[Message]:
    """A conversation given to an Agent, its images decode-checked (raises ImageError)."""
    out: list[Message] = []
    for number, message in enumerate(messages):
        what = f"message {number} of the conversation"
        if isinstance(message, UserMessage):
            message = prompt_for_history(message, what)
        elif isinstance(message, ToolMessage):
            results = []
            for result in message.results:
                try:
                    content = tuple(
                        checked_image(p) if isinstance(p, ImagePart) else p for p in result.content
                    )
                except ImageError as exc:
                    raise ImageError(
                        f"{what}: the image in the result of call {result.call_id} is not "
                        f"usable: {exc}"
                    ) from None
                results.append(replace(result, content=content))
            message = ToolMessage(tuple(results))
        out.append(message)
    return out
