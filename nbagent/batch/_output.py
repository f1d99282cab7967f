"""The batch's structured output is the run's (see :mod:`nbagent.output`): one mechanism for both."""

from __future__ import annotations

from ..output._spec import ANSWER_TOOL, OutputSpec, output_spec, to_json

__all__ = ["ANSWER_TOOL", "OutputSpec", "output_spec", "to_json"]
