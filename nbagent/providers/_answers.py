"""Typed answers through an API's own structured output: when it can be asked, and the body.

A typed run (``agent.run(prompt, output=T)``, see :mod:`nbagent.output`) asks each adapter's
``native_answers(schema)`` whether its API can constrain the answer to the schema *strictly*.
It can when the schema is one strict mode accepts as it is: every keyword supported, every
object closed, no optional property (strict mode would make it nullable, and the answer would
then carry nulls the schema does not allow; such a schema goes through the final-answer tool
instead, whose arguments the adapters already undo that for), and within every limit the
vendor documents (sizes, nesting, recursion, keywords: :mod:`._native_limits`), which the API
would otherwise answer with a 400. The answer then streams as
plain JSON text, which the loop parses and validates like a call's arguments.

The wire shapes:

* Chat Completions: ``response_format: {"type": "json_schema", "json_schema": {"name",
  "schema", "strict": true}}``;
* Responses: ``text: {"format": {"type": "json_schema", "name", "schema", "strict": true}}``;
* Anthropic Messages: ``output_config: {"format": {"type": "json_schema", "schema"}}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..generation import AnswerFormat
from ..schema import normalize_schema
from ._native_limits import anthropic_problem, openai_problem
from ._strict import strict_problems, strict_schema

__all__ = [
    "anthropic_output_config",
    "chat_response_format",
    "native_problem",
    "responses_text_format",
]


def native_problem(schema: Mapping[str, Any], *, anthropic: bool = False) -> str | None:
    """Why ``schema`` cannot be asked of the API's strict structured output (None: it can):
    what strict mode cannot express, an optional property, or a limit the vendor documents
    (:mod:`._native_limits`), measured on the schema as it would be sent."""
    problems = strict_problems(schema)
    if problems:
        pointer, reason = problems[0]
        return f"{reason} at {pointer or '/'}"
    optional = _optional_property(normalize_schema(schema), "", 0)
    if optional is not None:
        return f"the optional property {optional} would become nullable in strict mode"
    wire = strict_schema(schema)
    return anthropic_problem(wire) if anthropic else openai_problem(wire)


def chat_response_format(answer: AnswerFormat) -> dict[str, Any]:
    return {
        "type": "json_schema",
        "json_schema": {"name": answer.name, "schema": _wire(answer), "strict": True},
    }


def responses_text_format(answer: AnswerFormat) -> dict[str, Any]:
    return {
        "format": {
            "type": "json_schema",
            "name": answer.name,
            "schema": _wire(answer),
            "strict": True,
        }
    }


def anthropic_output_config(answer: AnswerFormat) -> dict[str, Any]:
    return {"format": {"type": "json_schema", "schema": _wire(answer)}}


def _wire(answer: AnswerFormat) -> dict[str, Any]:
    return strict_schema(answer.schema, tool=answer.name)


def _optional_property(node: Any, pointer: str, depth: int) -> str | None:
    """The pointer of a property that may be left out (and does not allow null), if any."""
    if depth > 64:
        return None
    if isinstance(node, list):
        for index, item in enumerate(node):
            found = _optional_property(item, f"{pointer}/{index}", depth + 1)
            if found is not None:
                return found
        return None
    if not isinstance(node, dict):
        return None
    properties = node.get("properties")
    if isinstance(properties, dict):
        required = set(node.get("required", ()))
        for name, sub in properties.items():
            if name not in required and not _allows_null(sub):
                return f"{pointer}/properties/{name}"
    for key, sub in node.items():
        if isinstance(sub, (dict, list)):
            found = _optional_property(sub, f"{pointer}/{key}", depth + 1)
            if found is not None:
                return found
    return None


def _allows_null(node: Any) -> bool:
    if not isinstance(node, dict):
        return True
    kind = node.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    return any(isinstance(s, dict) and s.get("type") == "null" for s in node.get("anyOf", ()))
