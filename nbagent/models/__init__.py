"""Offline models: they stream through the same events as a real provider, with no network.

May import (docs/architecture.md): the ground, :mod:`nbagent.schema` and the vocabulary.
"""

from .function import FunctionModel
from .offline import OFFLINE_LABEL, OfflineModel
from .scripted import Call, Fail, Pause, Reasoning, ScriptedModel, Text, Turn

__all__ = [
    "OFFLINE_LABEL",
    "Call",
    "Fail",
    "FunctionModel",
    "OfflineModel",
    "Pause",
    "Reasoning",
    "ScriptedModel",
    "Text",
    "Turn",
]
