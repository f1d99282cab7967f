"""What a model object reaches, as the course policy judges it: a server, a recording, nothing.

The policy's rules are about where a request goes: ``models`` names model strings,
``live = false`` allows only replays, AI off allows nothing. A run's model may be a model
string resolved into an adapter, an object set from Python (``set_model(OpenAIChat(...))``),
a recording being made or replayed around one, the offline stand-in. :func:`reach_of` looks
through the wrappers to what a request would reach and names it the way the policy's
``models`` globs are written (``openai:gpt-4.1-mini``), so every route is judged the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Reach", "reach_of"]

Kind = Literal["offline", "replayed", "live", "unknown"]
#: Models that play in this process from a script or a function: nothing reaches a server.
_OFFLINE = ("OfflineModel", "ScriptedModel", "FunctionModel")


@dataclass(frozen=True)
class Reach:
    """Where a request goes: ``kind`` (``offline``: a script or function plays the model;
    ``replayed``: a recording with no live model behind it; ``live``: an adapter of
    :mod:`nbagent.providers`; ``unknown``: a Generator nbagent cannot name), ``model`` the
    model string for a live one, ``named`` how a sentence names it."""

    kind: Kind
    model: str | None
    named: str

    @property
    def may_reach_a_server(self) -> bool:
        return self.kind in ("live", "unknown")


def reach_of(generator: Any, *, _depth: int = 0) -> Reach:
    """What ``generator`` sends a request to (see the module)."""
    from ...models import FunctionModel, OfflineModel, ScriptedModel
    from ...providers import model_string
    from ...recording import RecordingGenerator, ReplayGenerator

    if _depth > 8:  # wrappers of wrappers: nothing nbagent makes nests this deep
        return Reach("unknown", None, "a model wrapped too deeply to tell")
    if isinstance(generator, RecordingGenerator):
        return reach_of(generator.inner, _depth=_depth + 1)
    if isinstance(generator, ReplayGenerator):
        if generator.fallback is None:
            return Reach("replayed", None, "a replay")
        # a replay that goes on live where it diverges: the policy judges the live model
        return reach_of(generator.fallback, _depth=_depth + 1)
    if isinstance(generator, (OfflineModel, ScriptedModel, FunctionModel)):
        return Reach("offline", None, type(generator).__name__)
    model = model_string(generator)
    if model is not None:
        return Reach("live", model, model)
    name = type(generator).__name__
    return Reach("unknown", None, f"a model of type {name[:60]}, which nbagent cannot name")
