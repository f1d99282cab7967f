"""Bring your own tools: ``--tools MODULE[:ATTR]`` or ``--tools path/to/file.py[:ATTR]``.

Without ``ATTR`` every :class:`~nbagent.tools.Tool` defined at the top level of the module is
registered; with it, that attribute (a Tool, or a list or tuple of Tools). A module may also set
``nbagent_model`` to a Generator (e.g. a scripted model for a demo or a test), used when no
``--model`` is given.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from ..generation import Generator
from ..tools import Tool

__all__ = ["MODEL_ATTRIBUTE", "LoadedTools", "ToolsLoadError", "load_tools"]

#: The module attribute that may hold a Generator for the terminal to use.
MODEL_ATTRIBUTE = "nbagent_model"


class ToolsLoadError(Exception):
    """A ``--tools`` spec could not be used; the message says why in one line."""


@dataclass
class LoadedTools:
    """Tools gathered from every ``--tools`` spec, and a model if one module offered it."""

    tools: list[Tool] = field(default_factory=list)
    model: Generator | None = None
    origins: dict[str, str] = field(default_factory=dict)


def split_spec(spec: str) -> tuple[str, str | None]:
    """``"pkg.mod:attr"`` -> (``"pkg.mod"``, ``"attr"``); a Windows drive letter is no attr."""
    head, sep, tail = spec.rpartition(":")
    if sep and head and tail.isidentifier() and not (len(head) == 1 and head.isalpha()):
        return head, tail
    return spec, None


def _is_path(target: str) -> bool:
    return target.endswith(".py") or "/" in target or os.sep in target


def _import_file(target: str) -> ModuleType:
    path = Path(target).expanduser()
    if not path.is_file():
        raise ToolsLoadError(f"no such file: {target}")
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)  # like `python file.py`: the file's siblings import
    name = f"nbagent_tools_{path.stem}" if path.stem.isidentifier() else "nbagent_tools_file"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ToolsLoadError(f"cannot load {target} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _import(target: str) -> ModuleType:
    if _is_path(target):
        return _import_file(target)
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # the `nbagent` script: find modules where it runs
    return importlib.import_module(target)


def _tools_in(value: Any, where: str) -> list[Tool]:
    if isinstance(value, Tool):
        return [value]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, Tool) for v in value):
        return list(value)
    kind = type(value).__name__
    raise ToolsLoadError(f"{where} is a {kind}, not an nbagent.Tool or a list of Tools")


def load_tools(specs: list[str], loaded: LoadedTools | None = None) -> LoadedTools:
    """Import each spec and collect its tools; raises :class:`ToolsLoadError` on any problem
    (the import's own exception is chained, for ``--debug``)."""
    found = loaded or LoadedTools()
    for spec in specs:
        target, attr = split_spec(spec.strip())
        if not target:
            raise ToolsLoadError("--tools needs a module name or a .py file")
        try:
            module = _import(target)
        except ToolsLoadError:
            raise
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # a module may even call sys.exit while importing
            from .._ground.formatting import error_text

            raise ToolsLoadError(  # the module's own exception: its text read bounded
                f"cannot import tools from {target!r}: {error_text(exc)}"
            ) from exc
        if attr is not None:
            if not hasattr(module, attr):
                raise ToolsLoadError(f"{target!r} has no attribute {attr!r}")
            tools = _tools_in(getattr(module, attr), f"{target}:{attr}")
        else:
            unique = {id(v): v for v in vars(module).values() if isinstance(v, Tool)}
            tools = list(unique.values())
        model = getattr(module, MODEL_ATTRIBUTE, None)
        if model is not None:
            if not isinstance(model, Generator):
                raise ToolsLoadError(
                    f"{target}.{MODEL_ATTRIBUTE} is a {type(model).__name__}, not a Generator"
                )
            if found.model is not None and found.model is not model:
                raise ToolsLoadError(f"two --tools modules set {MODEL_ATTRIBUTE}: keep one")
            found.model = model
        if not tools and (attr is not None or model is None):
            raise ToolsLoadError(
                f"no nbagent.Tool found in {target!r}: define tools at the top level with "
                "@nbagent.tool, or name one with MODULE:ATTR"
            )
        for one in tools:
            if one.name in found.origins:
                raise ToolsLoadError(
                    f"two tools are named {one.name!r} (from {found.origins[one.name]} and "
                    f"{spec}): rename one"
                )
            found.origins[one.name] = spec
            found.tools.append(one)
    return found
