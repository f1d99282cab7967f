"""The batch's structured output is a run's (see :mod:`nbagent.output`): one mechanism."""

from __future__ import annotations

from ..output._spec import ANSWER_TOOL, OutputSpec, output_spec, to_json

__all__ = ["ANSWER_TOOL", "OutputSpec", "output_spec", "to_json"]
