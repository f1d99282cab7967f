"""The optional features, the extra that installs each, and one sentence for a missing one.

nbagent's own dependencies are few; a feature that needs more (MCP, serving, Dask, tracing,
local models, prices) is an extra of the package. Every such feature asks here before it
starts (:func:`missing`), or explains an ``ImportError`` it met (:func:`explained`), so that a
person who lacks one reads the same sentence everywhere: what needs it, which module is not
there, and the line that installs it, e.g. ``%agent serve needs the mcp extra (uvicorn is not
installed here): pip install "nbagent[mcp]"``. Nothing here imports the modules it names.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

__all__ = ["EXTRAS", "Extra", "absent", "explained", "install_line", "missing"]


@dataclass(frozen=True)
class Extra:
    """One extra of the package: its name, what it is for, and the modules nbagent (or a
    library it brings) imports from it."""

    name: str
    feature: str
    modules: tuple[str, ...]


#: Every extra a feature of nbagent needs at run time, by name (pyproject.toml's
#: ``[project.optional-dependencies]``; tests/test_extras.py checks that they agree).
EXTRAS: dict[str, Extra] = {
    extra.name: extra
    for extra in (
        Extra(
            "mcp",
            "MCP servers and %agent serve",
            ("mcp", "mcp_types", "uvicorn", "h11", "starlette", "sse_starlette"),
        ),
        Extra("dask", "Agent.map on a Dask cluster", ("dask", "distributed", "cloudpickle")),
        Extra("otel", "tracing with OpenTelemetry", ("opentelemetry.trace",)),
        Extra("local", "local: models (llama.cpp in this process)", ("xllamacpp",)),
        Extra("prices", "what a run's tokens cost", ("genai_prices",)),
        Extra("acp", "external agents over ACP (%agent --acp)", ("acp", "pydantic")),
    )
}


def install_line(extra: str) -> str:
    """The command that installs ``extra``."""
    return f'pip install "nbagent[{EXTRAS[extra].name}]"'


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # its parent is missing, or it is hidden or broken
        return False


def absent(extra: str) -> str | None:
    """The first module of ``extra`` that is not installed here, or None."""
    return next((m for m in EXTRAS[extra].modules if not _importable(m)), None)


def _sentence(extra: str, module: str, feature: str | None) -> str:
    found = EXTRAS[extra]
    return (
        f"{feature or found.feature} needs the {found.name} extra ({module} is not installed "
        f"here): {install_line(extra)}"
    )


def missing(extra: str, feature: str | None = None) -> str | None:
    """What is missing for ``extra`` as one sentence (``feature``: what needs it, in the
    words of the place asking), or None when everything it brings is installed."""
    module = absent(extra)
    return None if module is None else _sentence(extra, module, feature)


def explained(error: BaseException, feature: str | None = None) -> str | None:
    """``error`` (an ``ImportError``) as the sentence of the extra that brings the module it
    could not import, or None when no extra brings it."""
    name = getattr(error, "name", None)
    if not isinstance(error, ImportError) or not isinstance(name, str):
        return None
    for extra in EXTRAS.values():
        for module in extra.modules:
            if name == module or name.startswith(module + ".") or module.startswith(name + "."):
                return _sentence(extra.name, name, feature)
    return None
