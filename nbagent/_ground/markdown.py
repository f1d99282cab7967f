"""Text shown exactly as written in Markdown: what a person, a file or a server wrote.

Markdown reads signs as markup: a model glob ``openai:gpt-4.1-*`` loses its star to italics, a
backtick opens code, ``<b>`` is raw HTML. Text that is not meant as Markdown (a course
policy's values, a prompt, a tool's name, a path, an error) goes into a Markdown output
through :func:`md_text`, one escape for every room; model text, which is meant as Markdown,
is made safe another way (``nbagent.notebook.shown.render.safe_markdown``).
"""

from __future__ import annotations

import re

__all__ = ["code_span", "md_text"]

#: Characters that make or change Markdown anywhere in a line (emphasis, code, links, raw
#: HTML, headings, tables, strikethrough, TeX, character references, escapes).
_MD_SIGNS = re.compile(r"([\\`*_\[\]<>#|~$&])")
#: What makes a line a list item, a thematic break or a setext underline where it starts.
_MD_LINE_START = re.compile(r"^( {0,3})([-+=])")
#: What makes a line an ordered list item.
_MD_ORDERED = re.compile(r"^( {0,3}\d{1,9})([.)])")


def md_text(text: str) -> str:
    """Text a person, a file or a server wrote (a policy's values, a prompt, a tool's name, a
    path, an error), as Markdown that shows exactly that text: every sign that would make
    Markdown is escaped (``openai:gpt-4.1-*`` stays a glob, not italics; a backtick stays a
    backtick), so it can neither format nor run nor fetch anything. Model text, which is meant
    as Markdown, goes through ``nbagent.notebook.shown.render.safe_markdown`` instead."""
    lines = []
    for line in text.split("\n"):
        line = _MD_SIGNS.sub(r"\\\1", line)
        stripped = line.lstrip(" \t")
        if len(line) - len(stripped) >= 4 or line.startswith("\t"):  # an indented code block
            line = "\u00a0" * min(len(line) - len(stripped), 40) + stripped
        line = _MD_LINE_START.sub(r"\1\\\2", line)
        lines.append(_MD_ORDERED.sub(r"\1\\\2", line))
    return "\n".join(lines)


_BACKTICKS = re.compile(r"`+")


def code_span(text: str) -> str:
    """``text`` as one Markdown code span, whatever backticks it holds."""
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"
