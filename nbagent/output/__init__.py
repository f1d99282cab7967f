"""Typed answers: a run that answers with a validated value of a given type.

``await agent.run(prompt, output=T)`` (and ``run_sync``, ``stream``, ``start``, and
``agent.map(output=T)`` per row): ``T`` is a Python type (a dataclass, TypedDict, pydantic
model, ``list[str]`` …) or a JSON Schema, compiled by the same strict compiler as a tool's
input, so a type that cannot be an answer is refused before any request, naming why.
``result.output`` holds the value (an instance for a dataclass).

How the answer is asked for depends on the model (:func:`typed_answer` chooses): where the
provider's API constrains the answer to the schema strictly (OpenAI Chat Completions
``response_format``, the Responses API's ``text.format``, Anthropic's structured outputs), the
answer streams as JSON text; otherwise (offline and local models, a schema strict mode cannot
take as it is) the run gets a ``final_answer`` tool whose arguments are the answer. Either way
the loop validates the answer; one that does not fit goes back to the model with the
validator's words, up to ``tries`` times, then the run fails with
:class:`~nbagent.errors.OutputInvalidError`, the last answer kept.
"""

from __future__ import annotations

from ._spec import ANSWER_TOOL, OutputSpec, output_spec, to_json
from ._typed import DEFAULT_TRIES, TypedAnswer, answer_route, typed_answer

__all__ = [
    "ANSWER_TOOL",
    "DEFAULT_TRIES",
    "OutputSpec",
    "TypedAnswer",
    "answer_route",
    "output_spec",
    "to_json",
    "typed_answer",
]
