"""The wanted output of a run: a JSON Schema or Python type, compiled, and its value decoded.

Used by typed runs (``agent.run(prompt, output=T)``, see :mod:`nbagent.output`) and by
``agent.map(output=T)`` alike. The schema is compiled by the same strict Draft 2020-12
compiler as every tool, so a bad one fails before any run. Where the answer is not asked of
the API's own structured output, the run gets one more tool, ``final_answer``, whose input
schema is the wanted output: the model answers by calling it, the loop validates the
arguments like any call (a call that does not fit goes back to the model as an error), and
the call ends the run; this works with every provider and the offline models alike. A Python
type is turned into its schema, and the validated value is decoded back into it (a dataclass
instance, a TypedDict, an ``int`` …), without coercion.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Mapping
from typing import Any

from ..content import error_result, text_result
from ..errors import OutputTypeError
from ..messages import AssistantMessage, ToolMessage
from ..schema._pydantic import is_pydantic_model
from ..tools import Tool, ToolContext, validate_tools

__all__ = ["ANSWER_TOOL", "OutputSpec", "output_spec", "to_json"]

ANSWER_TOOL = "final_answer"
_DESCRIPTION = (
    "Give your final answer. Call this exactly once, when you are done, with the answer as the "
    "arguments; nothing else you write counts as the answer."
)
_INSTRUCTION = (
    f"When you have the answer, call the tool {ANSWER_TOOL} with it (that is the only way to "
    "answer)."
)


@dataclasses.dataclass(frozen=True)
class OutputSpec:
    """The wanted output: the answer tool's schema, and how its arguments become the value."""

    schema: dict[str, Any]
    wrapped: bool  # the value is the "value" property of the arguments (non-object outputs)
    target: Any = None  # a Python type to decode into, or None (plain JSON)

    def tool(self) -> Tool:
        return Tool(
            name=ANSWER_TOOL,
            description=_DESCRIPTION,
            input_schema=self.schema,
            execute=_record_answer,
        )

    @property
    def instruction(self) -> str:
        return _INSTRUCTION

    def extract(self, messages: Any) -> tuple[bool, Any]:
        """The validated arguments of the run's last successful answer call, as JSON."""
        calls: dict[str, Any] = {}
        found: tuple[bool, Any] = (False, None)
        for message in messages:
            if isinstance(message, AssistantMessage):
                for call in message.tool_calls:
                    if call.name == ANSWER_TOOL:
                        calls[call.id] = call
            elif isinstance(message, ToolMessage):
                for part in message.results:
                    answered = calls.get(part.call_id)
                    if answered is not None and not part.is_error:
                        value = answered.input
                        found = (True, value["value"] if self.wrapped else value)
        return found

    def decode(self, value: Any) -> Any:
        """The JSON value as the wanted Python type (unchanged for a JSON Schema)."""
        if self.target is None:
            return value
        if is_pydantic_model(self.target):  # its own validation, on JSON the schema passed
            return self.target.model_validate_json(json.dumps(value))
        from ..schema._hints import decode_arguments_as

        return decode_arguments_as(value, self.target)


def _record_answer(context: ToolContext) -> Any:
    if not isinstance(context.input, Mapping):  # pragma: no cover - the loop validated it
        return error_result("the answer must be a JSON object")
    return text_result("Answer recorded.", terminate=True)


def output_spec(output: Any, *, error: type[Exception] = OutputTypeError) -> OutputSpec:
    """An OutputSpec from a JSON Schema (a mapping) or a Python type; checked now: a type
    that has no schema, or a schema no value can satisfy, raises ``error`` naming why (a
    schema that breaks the strict policy raises :class:`~nbagent.errors.SchemaError`)."""
    if isinstance(output, Mapping):
        schema = dict(output)
        target = None
    elif is_pydantic_model(output):
        try:
            schema = dict(output.model_json_schema())
        except Exception as exc:  # the model's own schema generation failed
            raise error(f"output={output!r} has no JSON Schema: {exc}") from None
        target = output
    else:
        from ..schema._signature import function_schema

        def answer(value: Any) -> None:
            """The answer."""

        answer.__annotations__ = {"value": output, "return": None}
        try:
            made = function_schema(answer)
        except Exception as exc:
            why = str(exc).replace(f"{answer.__qualname__}: parameter 'value'", "the output")
            why = why.replace("pass schema= to @tool", "pass a JSON Schema as output=")
            raise error(f"output={output!r} cannot be an answer type: {why}") from None
        schema = dict(made.schema["properties"]["value"])
        if "$defs" in made.schema:
            schema["$defs"] = made.schema["$defs"]
        target = output
    if schema.get("type") == "object" and "$ref" not in schema:
        spec = OutputSpec(schema, False, target)
    else:
        inner = {k: v for k, v in schema.items() if k != "$defs"}
        wrapped: dict[str, Any] = {
            "type": "object",
            "properties": {"value": inner},
            "required": ["value"],
            "additionalProperties": False,
        }
        if "$defs" in schema:
            wrapped["$defs"] = schema["$defs"]
        spec = OutputSpec(wrapped, True, target)
    validate_tools([spec.tool()])  # the strict compile: a bad schema fails here, naming where
    from ..schema import normalize_schema
    from ..schema._satisfiable import unsatisfiable

    dead = unsatisfiable(normalize_schema(spec.schema))
    if dead:
        pointer, why = max(dead, key=lambda found: len(found[0]))  # the cause, not its echo
        where = pointer.replace("/properties/value", "", 1) if spec.wrapped else pointer
        raise error(
            f"output={_shown(output)} can never be satisfied: at {where or '(root)'}, {why}"
        )
    return spec


def _shown(output: Any) -> str:
    text = repr(output)
    return text if len(text) <= 80 else text[:77] + "..."


def to_json(value: Any) -> Any:
    """A decoded output back as JSON data (dataclasses as objects, enums as their values,
    pydantic models as their JSON dump)."""
    if is_pydantic_model(type(value)):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return to_json(value.value)
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_json(v) for v in value]
    return value
