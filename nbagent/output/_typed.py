"""One typed run's answer: how it is asked for, checked, sent back when it does not fit."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from ..content import TextPart
from ..errors import ArgumentsError, OutputInvalidError, OutputTypeError
from ..generation import AnswerFormat
from ..messages import AssistantMessage, UserMessage
from ..tools import ToolCall, parse_call_arguments, validate_tools
from ._spec import ANSWER_TOOL, OutputSpec, output_spec

if TYPE_CHECKING:
    from .._history import CheckedCall
    from ..content import ToolResult
    from ..generation import Generator
    from ..limits import Limits
    from ..messages import Message, ToolResultPart
    from ..tools import Tool

__all__ = ["DEFAULT_TRIES", "TypedAnswer", "answer_route", "typed_answer"]

#: Answers that do not fit before a typed run fails (the first try included).
DEFAULT_TRIES = 3
#: How much of a rejected answer the error keeps (the whole of it is in the history).
_KEPT = 2_000

AnswerMode = Literal["native", "tool"]


class TypedAnswer:
    """What a typed run needs: the wanted output, how it is asked for (``mode``, and ``how`` in
    words, for ``%agent config`` and the request view), the answer found and the tries used."""

    def __init__(self, spec: OutputSpec, mode: AnswerMode, how: str, tries: int) -> None:
        self.spec = spec
        self.mode: AnswerMode = mode
        self.how = how
        self.tries = tries
        self.failed = 0
        self.found = False
        self.value: Any = None
        self.json: Any = None
        self.compiled = validate_tools([spec.tool()])[ANSWER_TOOL]
        self.tool: Tool | None = spec.tool() if mode == "tool" else None
        self.format = AnswerFormat(spec.schema) if mode == "native" else None

    def instructions(self, base: str | None) -> str | None:
        """The run's instructions: the final-answer tool's use said, when there is one."""
        if self.mode != "tool":
            return base
        return f"{base}\n\n{self.spec.instruction}" if base else self.spec.instruction

    def accept_text(self, messages: list[Message], limits: Limits) -> bool:
        """A turn ended without calls: True when it is the answer; False when a note why it is
        not was added for the model (another try); raises once the tries are used up."""
        last = messages[-1] if messages else None
        text = last.text if isinstance(last, AssistantMessage) else ""
        if self.mode == "tool":
            problem = f"no answer was given: the answer is given by calling {ANSWER_TOOL}"
            note = (
                f"You did not give your answer. Call the tool {ANSWER_TOOL} with it: that is the "
                "only way to answer."
            )
            return self._retry(messages, text, problem, note)
        size = _utf8_size(text, limits.max_argument_bytes)
        if size > limits.max_argument_bytes:
            # refused unparsed, as a call's oversized arguments are, and not kept: the retry
            # would send it back whole, and so would every later request of the conversation
            problem = (
                f"the answer is {size:,} bytes, more than the limit of "
                f"{limits.max_argument_bytes:,} (Limits.max_argument_bytes)"
            )
            if isinstance(last, AssistantMessage):
                kept = tuple(p for p in last.content if not isinstance(p, TextPart))
                stand_in = TextPart(f"(an answer of {size:,} bytes, over the limit: not kept)")
                messages[-1] = AssistantMessage((*kept, stand_in))
            note = (
                f"Your answer was not accepted: {problem}. Answer again with only the JSON value "
                "that matches the schema, shorter."
            )
            return self._retry(messages, text[:_KEPT], problem, note)
        try:
            value = parse_call_arguments(ToolCall("answer", "answer", text), limits)
            if not isinstance(value, Mapping):
                raise ArgumentsError("the answer is not a JSON object")
            self.compiled.validate(value)
            self._keep(value)
        except ArgumentsError as exc:
            note = (
                f"Your answer was not accepted: {exc}\nAnswer again with only the JSON value "
                "that matches the schema."
            )
            return self._retry(messages, text, str(exc), note)
        except Exception as exc:  # the schema allowed what the type does not
            note = f"Your answer was not accepted: {exc}\nAnswer again."
            return self._retry(messages, text, str(exc), note)
        return True

    def accept_calls(
        self, checked: list[CheckedCall], results: list[tuple[ToolResultPart, ToolResult]]
    ) -> bool:
        """After a batch of calls: True when one was a valid answer (the run ends); counts a
        try for each answer call that did not fit (its error result is the model's note)."""
        inputs = {c.call.id: c for c in checked}
        problems = []
        for part, result in results:
            if part.name != ANSWER_TOOL:
                continue
            call = inputs.get(part.call_id)
            if not part.is_error and call is not None:
                try:
                    self._keep(call.input)
                except Exception as exc:
                    problems.append((call.call.arguments, str(exc)))
                    continue
                return True
            problems.append((call.call.arguments if call else "", _text(result)))
        for arguments, problem in problems:
            self.failed += 1
            if self.failed >= self.tries:
                raise self._failure(arguments, problem)
        return False

    def _keep(self, value: Any) -> None:
        data = value["value"] if self.spec.wrapped else value
        decoded = self.spec.decode(data)
        self.found, self.json, self.value = True, data, decoded

    def _retry(self, messages: list[Message], text: str, problem: str, note: str) -> bool:
        self.failed += 1
        if self.failed >= self.tries:
            raise self._failure(text, problem)
        messages.append(UserMessage((TextPart(note),)))
        return False

    def _failure(self, text: str, problem: str) -> OutputInvalidError:
        first = problem.strip().splitlines()[0] if problem.strip() else "it did not fit"
        tries = "try" if self.tries == 1 else "tries"
        return OutputInvalidError(
            f"the model did not answer in the asked form in {self.tries} {tries} ({first})",
            answer=text[:_KEPT],
            problems=problem[:_KEPT],
        )


def typed_answer(
    output: Any,
    generator: Generator,
    tools: Mapping[str, Any],
    *,
    tries: int = DEFAULT_TRIES,
    mode: str = "auto",
) -> TypedAnswer:
    """A typed run's answer for ``output`` with this model: the API's own strict structured
    output where it has one for the schema (``mode="auto"``), else the final-answer tool
    (``mode="tool"`` always uses the tool). Raises OutputTypeError before any request."""
    if isinstance(tries, bool) or not isinstance(tries, int) or tries < 1:
        raise OutputTypeError(f"output_tries must be a whole number of at least 1, not {tries!r}")
    if mode not in ("auto", "tool", "native"):
        raise OutputTypeError(f"output_mode must be 'auto', 'native' or 'tool', not {mode!r}")
    spec = output if isinstance(output, OutputSpec) else output_spec(output)
    native = getattr(generator, "native_answers", None)
    name = type(generator).__name__
    if callable(native):
        able, said = native(spec.schema)
        if not (isinstance(able, bool) and isinstance(said, str)):
            able, said = False, f"{name}.native_answers answered something else"
    else:
        able, said = False, f"{name} has no native structured output"
    if mode == "native" and not able:
        raise OutputTypeError(f"output_mode='native' cannot be used here: {said}")
    if able and mode != "tool":
        return TypedAnswer(spec, "native", f"native: {said}", tries)
    if ANSWER_TOOL in tools:
        raise OutputTypeError(
            f"the agent has a tool named {ANSWER_TOOL!r}, which a typed answer needs for "
            "itself: rename the tool"
        )
    why = "" if mode == "tool" else f" ({said})"
    return TypedAnswer(spec, "tool", f"the {ANSWER_TOOL} tool{why}", tries)


def answer_route(generator: Generator) -> str:
    """How typed answers (``output=``) go with this model, in words (for ``%agent config``)."""
    probe = {
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    native = getattr(generator, "native_answers", None)
    if callable(native):
        try:
            able, said = native(probe)
        except Exception as exc:
            able, said = False, f"asking the model failed: {type(exc).__name__}"
        if able is True:
            return (
                f"native: {said}, for a type whose schema strict mode takes as it is; "
                f"otherwise the {ANSWER_TOOL} tool"
            )
        return f"the {ANSWER_TOOL} tool ({said})"
    return f"the {ANSWER_TOOL} tool (this model has no native structured output)"


def _utf8_size(text: str, limit: int) -> int:
    """The UTF-8 size of ``text`` (a text of at most ``limit // 4`` characters is counted as
    that: it cannot be over the limit, and encoding a large answer just to measure it is not
    free)."""
    if len(text) <= limit // 4:
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def _text(result: ToolResult) -> str:
    return "".join(p.text for p in result.content if isinstance(p, TextPart))
