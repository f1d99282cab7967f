"""What a refusal says: one sentence naming the rule and the file, in every form it is shown.

The notebook refuses with these sentences (:mod:`nbagent.notebook.policy.coursegate`), the class
report and ``%agent report`` read them back from the records, and the generated sample course
writes the very same ones (:mod:`._samples`), so there is one wording. The sentence is the
plain form: the rule it names stands in backticks (``rule `notebooks[1].ai = false` in
../nbagent-course.toml``), shown as code in Markdown and HTML; everything else, the teacher's
message too, is shown exactly as written.
"""

from __future__ import annotations

import re
from typing import Any

from .._ground.markdown import code_span, md_text

__all__ = [
    "ai_off_sentence",
    "refusal_bundle",
    "rule_said",
    "sentence_markdown",
    "sentence_parts",
]

#: How a refusal names its rule (:func:`rule_said` writes it, :func:`sentence_parts` finds it).
_RULE_SAID = re.compile(r"rule `(?P<rule>[^\n]+?)` in ")


def rule_said(shown: str, source: str | None) -> str:
    """The part of a refusal's sentence that names the rule as the file writes it
    (``Rules.said``), and the file (relative to the notebook's folder)."""
    return f"rule `{shown}` in {source}"


def ai_off_sentence(message: str | None, where: str) -> str:
    """The refusal of a run in a notebook the policy marks AI off (``where``: :func:`rule_said`)."""
    said = (message or "the course turns AI off for this notebook").rstrip(".")
    return f"AI is off here: {said} ({where}); nothing was sent."


def sentence_parts(sentence: str) -> list[tuple[str, bool]]:
    """A refusal's sentence as pieces of text and (``True``) the rule it names, which is
    shown as code; everything else is shown exactly as written (the teacher's message may hold
    any sign)."""
    parts: list[tuple[str, bool]] = []
    at = 0
    for match in _RULE_SAID.finditer(sentence):
        parts.append((sentence[at : match.start()] + "rule ", False))
        parts.append((match.group("rule"), True))
        at = match.end() - len(" in ")
    parts.append((sentence[at:], False))
    return [(text, code) for text, code in parts if text]


def sentence_markdown(sentence: str) -> str:
    """A refusal's sentence as Markdown: the rule as code, the rest as written."""
    return "".join(
        code_span(text) if code else md_text(text) for text, code in sentence_parts(sentence)
    )


def refusal_bundle(sentence: str) -> dict[str, Any]:
    """The output a refused cell shows: the sentence as plain text and as Markdown."""
    return {"text/plain": sentence, "text/markdown": f"**nbagent:** {sentence_markdown(sentence)}"}
