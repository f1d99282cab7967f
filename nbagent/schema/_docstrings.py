"""Parameter descriptions from a docstring: Google, NumPy and Sphinx styles."""

from __future__ import annotations

import inspect
import re
from collections.abc import Sequence

# --------------------------------------------------------------------------- docstrings

_SECTION_NAMES = (
    "Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Other Parameters|Attributes"
)
_GOOGLE_HEADER = re.compile(rf"^(\s*)(?:{_SECTION_NAMES})\s*:\s*$")
_GOOGLE_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:(.*)$")
_NUMPY_HEADER = re.compile(rf"^\s*(?:{_SECTION_NAMES})\s*$")
_UNDERLINE = re.compile(r"^\s*-{3,}\s*$")
_SPHINX_PARAM = re.compile(
    r"^\s*:(?:param|parameter|arg|argument|key|keyword)\s+(?:[^:]*?\s+)?\*{0,2}(\w+)\s*:(.*)$"
)
_SPHINX_TYPE = re.compile(r"^\s*:type\s+\*{0,2}\w+\s*:")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _join(lines: Sequence[str]) -> str:
    """Join wrapped lines into paragraphs (one blank line between paragraphs)."""
    paragraphs: list[str] = []
    current: list[str] = []
    for line in lines:
        text = line.strip()
        if text:
            current.append(text)
        elif current:
            paragraphs.append(" ".join(current))
            current = []
    if current:
        paragraphs.append(" ".join(current))
    return "\n\n".join(paragraphs)


def _block_end(lines: Sequence[str], start: int, indent: int) -> int:
    """Index after the lines from ``start`` indented deeper than ``indent`` (blank lines too)."""
    end = start
    while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > indent):
        end += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return end


def _is_numpy_header(lines: Sequence[str], index: int) -> bool:
    return (
        index + 1 < len(lines)
        and bool(lines[index].strip())
        and not _UNDERLINE.match(lines[index])
        and bool(_UNDERLINE.match(lines[index + 1]))
    )


def _google_entries(block: Sequence[str]) -> dict[str, str]:
    entries: dict[str, list[str]] = {}
    current: list[str] | None = None
    base = min((_indent(line) for line in block if line.strip()), default=0)
    for line in block:
        match = _GOOGLE_ENTRY.match(line.strip()) if _indent(line) == base else None
        if match:
            current = entries[match.group(1)] = [match.group(2)]
        elif current is not None:
            current.append(line)
    return {name: _join(text) for name, text in entries.items()}


def _numpy_entries(block: Sequence[str]) -> dict[str, str]:
    entries: dict[str, list[str]] = {}
    names: list[str] = []
    base = min((_indent(line) for line in block if line.strip()), default=0)
    for line in block:
        if line.strip() and _indent(line) == base:
            head = line.split(":", 1)[0]
            names = [n.strip().lstrip("*") for n in head.split(",")]
            names = [n for n in names if n.isidentifier()]
            for name in names:
                entries[name] = []
        else:
            for name in names:
                entries[name].append(line)
    return {name: _join(text) for name, text in entries.items()}


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a docstring into its description and per-parameter descriptions.

    Understands Google (``Args:``), NumPy (``Parameters`` + dashes) and Sphinx (``:param x:``)
    parameter sections; other sections (``Returns``, ``Raises`` …) stay in the description.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    kept: list[str] = []
    params: dict[str, str] = {}
    index = 0
    while index < len(lines):
        line = lines[index]
        google = _GOOGLE_HEADER.match(line)
        if google:
            end = _block_end(lines, index + 1, len(google.group(1)))
            entries = _google_entries(lines[index + 1 : end])
            if entries:
                params.update(entries)
                index = end
                continue
        elif _NUMPY_HEADER.match(line) and _is_numpy_header(lines, index):
            end = index + 2
            while end < len(lines) and not _is_numpy_header(lines, end):
                end += 1
            params.update(_numpy_entries(lines[index + 2 : end]))
            index = end
            continue
        else:
            sphinx = _SPHINX_PARAM.match(line)
            if sphinx or _SPHINX_TYPE.match(line):
                end = _block_end(lines, index + 1, _indent(line))
                if sphinx:
                    params[sphinx.group(1)] = _join([sphinx.group(2), *lines[index + 1 : end]])
                index = end
                continue
        kept.append(line.rstrip())
        index += 1
    description = re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()
    return description, params
