"""The grammar of ``%agent`` subcommands: each declares its forms here, one parser reads them.

A magic line whose first word names a subcommand (``fork``, ``compare``, ``rules`` …) *is* that
subcommand: it matches one of the subcommand's forms, or it is answered with the subcommand's
usage and nothing is sent to a model. Only other lines are prompts; a prompt that begins with a
subcommand's word is written after ``--`` (``%agent -- compare these two files``), or in the body
of a ``%%agent`` cell.

A form is a sequence of elements: a literal word (``"clear"``), a :class:`Word` (a placeholder
that tests the word it takes), :class:`Opt` (optional), :class:`Many` (repeated), :class:`OneOf`
(one of several), and :class:`Rest` (the rest of the line, for the subcommand's own options or
a prompt). The usage shown is the forms themselves, so what ``%agent help`` says and what the
parser accepts cannot drift apart.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from ...loop._ids import ID_PATTERN, expand

__all__ = [
    "GRAMMARS",
    "SUBCOMMANDS_HELP",
    "Form",
    "Grammar",
    "Many",
    "OneOf",
    "Opt",
    "Rest",
    "SubcommandUsageError",
    "Word",
    "parse",
    "usage_error",
]


class SubcommandUsageError(ValueError):
    """A subcommand line that matches none of its forms: ``str()`` says what was wrong and
    gives the subcommand's usage (the magic raises it as IPython's UsageError)."""


@dataclass(frozen=True)
class Word:
    """A placeholder (``RUN``, ``STEP``): takes one word that passes ``test``; ``what`` says
    what it must be, for the message when it does not."""

    label: str
    test: Callable[[str], bool]
    what: str


@dataclass(frozen=True)
class Opt:
    """``[...]``: the elements, or nothing."""

    items: tuple[Element, ...]


@dataclass(frozen=True)
class Many:
    """``X ...`` (at least one) or, with ``least=0``, ``[X ...]``."""

    item: Element
    least: int = 1


@dataclass(frozen=True)
class OneOf:
    """``A|B``: one of the elements."""

    items: tuple[Element, ...]


@dataclass(frozen=True)
class Rest:
    """The rest of the line, read by the subcommand itself (its options, a prompt): verbatim
    text for a subcommand that does not quote, its words for one that does. ``label`` is how
    the usage writes it; ``required``: at least one word."""

    label: str | tuple[str, ...]
    required: bool = False
    what: str = ""  # what is missing when it is required and absent (default: the label)

    @property
    def chunks(self) -> tuple[str, ...]:
        return (self.label,) if isinstance(self.label, str) else self.label


Element = str | Word | Opt | Many | OneOf | Rest


@dataclass(frozen=True)
class Form:
    """One way to write a subcommand, and what it does (a line of the help)."""

    items: tuple[Element, ...]
    does: str = ""


@dataclass(frozen=True)
class Grammar:
    """The forms of one subcommand. ``quoting``: its words are read as a shell reads them
    (quotes group; no shell runs anything), else split at whitespace."""

    name: str
    forms: tuple[Form, ...]
    quoting: bool = False

    def usage(self, *, explained: bool = False) -> str:
        """The forms, one a line (``explained``: each with what it does, as the help shows)."""
        lines = []
        for form in self.forms:
            shown = _wrapped(f"%agent {self.name}", _pieces(form.items))
            if explained and form.does:
                if len(shown[-1]) > _COLUMN:
                    shown.append(" " * (_COLUMN + 2) + form.does)
                else:
                    shown[-1] = f"{shown[-1].ljust(_COLUMN)}  {form.does}"
            lines += shown
        return "\n".join(lines)


_COLUMN = 38  # where the help's "what it does" starts
_WIDTH = 92


def _wrapped(head: str, pieces: list[str]) -> list[str]:
    lines = [head]
    indent = " " * (len(head) + 1)
    for piece in pieces:
        if len(lines[-1]) + 1 + len(piece) > _WIDTH and lines[-1].strip():
            lines.append(indent + piece)
        else:
            lines[-1] = f"{lines[-1]} {piece}"
    return lines


# --- the placeholders ---------------------------------------------------------------------------

_RUN_ID = ID_PATTERN  # run-k7q2x-3 (or run-3: this session's); serve-…: what %agent serve ran
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _whole_number(word: str) -> bool:
    return word.isascii() and word.isdigit() and len(word) <= 9 and int(word) >= 1


def _seconds(word: str) -> bool:
    text = word[:-1] if word.endswith("s") else word
    if not text or not text.isascii() or not re.fullmatch(r"[0-9.eE+]+", text):
        return False
    try:
        value = float(text)
    except ValueError:
        return False
    return 0 < value < math.inf  # "inf" and "1e400" are no timeout the session accepts


def _argument_pattern(word: str) -> bool:
    return "=" in word and not word.startswith("=")


def _not_an_option(word: str) -> bool:
    return not word.startswith("-")


RUN = Word(
    "RUN", lambda w: bool(_RUN_ID.fullmatch(w)), "a run's id (run-k7q2x-3, run-3, or serve-…-1)"
)
STEP = Word("STEP", _whole_number, "a step number (1, 2, …)")
N = Word("N", _whole_number, "a whole number from 1")
SECONDS = Word("SECONDS", _seconds, "a positive number of seconds")
TOOL = Word("TOOL", lambda w: bool(_TOOL_NAME.fullmatch(w)), "a tool's name")
ARG = Word("ARG=PATTERN", _argument_pattern, "ARG=PATTERN (an argument's name, =, a glob)")
NAME = Word("NAME", _not_an_option, "a name (not an option)")


# --- every subcommand ---------------------------------------------------------------------------


def _g(name: str, *forms: Form, quoting: bool = False) -> Grammar:
    return Grammar(name, forms, quoting)


def _f(*items: Element, does: str = "") -> Form:
    return Form(items, does)


_LISTS = {
    "tools": "the tools, their rules and schemas",
    "history": "the conversation so far",
    "config": "the model, approval policy and settings in use",
    "recording": "the recordings of this notebook",
    "usage": "tokens per run and per session",
    "report": "this notebook's AI use: each run, its calls and code (static)",
    "policy": "the course policy in force: its rules, file and digest",
    "stop": "stop the runs in progress",
}

#: Every subcommand, by its name, in the order the help lists them.
GRAMMARS: dict[str, Grammar] = {
    "help": _g(
        "help",
        _f(does="this help"),
        _f(Word("SUBCOMMAND", lambda w: w in GRAMMARS, "a subcommand"), does="its forms only"),
    ),
    **{name: _g(name, _f(does=does)) for name, does in _LISTS.items()},
    "rules": _g(
        "rules",
        _f(does="the approval rules in force, numbered"),
        _f("remove", OneOf((N, TOOL)), does="remove rule N, or every rule about TOOL"),
        _f("clear", does="remove every rule"),
    ),
    "allow": _g(
        "allow",
        _f(TOOL, Many(ARG, 0), does="allow matching calls without asking"),
        _f(
            "repeats",
            TOOL,
            Many(ARG, 0),
            does="let TOOL make the same call again and again without the run pausing",
        ),
        quoting=True,
    ),
    "deny": _g("deny", _f(TOOL, Many(ARG, 0), does="deny calls (deny rules win)"), quoting=True),
    "approval-timeout": _g(
        "approval-timeout",
        _f(Opt((OneOf((SECONDS, "off", "none")),)), does="answer unanswered calls after SECONDS"),
    ),
    "mcp": _g(
        "mcp",
        _f(
            "add",
            NAME,
            Rest(
                (
                    "[--env VAR[=VALUE]]...",
                    "[--timeout SECONDS]",
                    "[--max-timeout SECONDS]",
                    "-- COMMAND ARGS...",
                ),
                required=True,
                what="-- COMMAND ARGS... (a server to start) or --url URL (one to connect to)",
            ),
            does="start an MCP server",
        ),
        _f(
            "add",
            NAME,
            Rest(
                (
                    "[--timeout SECONDS]",
                    "[--max-timeout SECONDS]",
                    "[--header 'NAME: VALUE']...",
                    "[--client-id ID]",
                    "[--client-secret '$VAR']",
                    "[--scope SCOPES]",
                    "--url URL",
                ),
                required=True,
                what="-- COMMAND ARGS... (a server to start) or --url URL (one to connect to)",
            ),
            does="connect to one over HTTP",
        ),
        _f("list", does="the servers and their tools"),
        _f("remove", NAME, does="stop a server, remove its tools"),
        _f("login", NAME, does="sign in to an HTTP server again"),
        _f("logout", NAME, does="forget its tokens"),
        quoting=True,
    ),
    "undo": _g(
        "undo",
        _f(Many(RUN, 0), does="put back what --kernel and --notebook runs changed"),
        _f(Opt((RUN,)), "step", STEP, does="only that step's changes"),
    ),
    "cells": _g("cells", _f(Many(RUN, 0), does="the code --kernel runs ran, as cells")),
    "fork": _g(
        "fork",
        _f(RUN, STEP, Rest("[options] [PROMPT]"), does="a new conversation from RUN at STEP"),
    ),
    "compare": _g("compare", _f(RUN, RUN, does="two runs side by side: where they first differ")),
    "serve": _g(
        "serve",
        _f("stop", does="stop serving"),
        _f("status", does="what is served, and where"),
        _f(
            Rest(
                (
                    "[--kernel]",
                    "[--notebook]",
                    "[--approve ask|auto]",
                    "[--port PORT]",
                    "[--expose ADDRESS]",
                )
            ),
            does="serve the notebook's tools over MCP (see docs/howto/serve.md)",
        ),
        quoting=True,
    ),
    "acp": _g(
        "acp",
        _f(does="the external agents (ACP): known, your own, running"),
        _f(
            "add",
            NAME,
            "--",
            Rest(("COMMAND", "[ARGS ...]"), required=True, what="COMMAND (the program to start)"),
            does="register an agent that speaks ACP on stdio: %agent --acp NAME PROMPT",
        ),
        _f("remove", NAME, does="forget an agent you registered"),
        _f("stop", Opt((NAME,)), does="end the agent's process (and its conversation)"),
        quoting=True,
    ),
    "map": _g(
        "map",
        _f(
            Rest(("--over TABLE", "[-o NAME]", "[options]", "TEMPLATE"), required=True),
            does="run once per row of TABLE",
        ),
    ),
}


# --- the parser -----------------------------------------------------------------------------------


def _render(items: Sequence[Element]) -> str:
    return "".join(f" {_show(item)}" for item in items)


def _pieces(items: Sequence[Element]) -> list[str]:
    out: list[str] = []
    for item in items:
        out += list(item.chunks) if isinstance(item, Rest) else [_show(item)]
    return out


def _show(item: Element) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, Word):
        return item.label
    if isinstance(item, Rest):
        return " ".join(item.chunks)
    if isinstance(item, Opt):
        return f"[{_render(item.items).strip()}]"
    if isinstance(item, OneOf):
        return "|".join(_show(i) for i in item.items)
    shown = f"{_show(item.item)} ..."
    return f"[{shown}]" if item.least == 0 else shown


@dataclass
class _Tokens:
    words: list[str]
    starts: list[int]  # where each word starts in the text (plain splitting only)
    text: str
    quoting: bool


def _tokens(text: str, quoting: bool) -> _Tokens:
    if quoting:
        return _Tokens(shlex.split(text), [], text, True)
    found = list(re.finditer(r"\S+", text))
    return _Tokens([m.group(0) for m in found], [m.start() for m in found], text, False)


@dataclass
class _Miss:
    """The furthest point any form reached, and what it expected there: each as a label (for
    a missing word) and as what the word must be (for a wrong one); "" is the line's end."""

    at: int = -1
    labels: list[str] = field(default_factory=list)
    whats: list[str] = field(default_factory=list)

    def note(self, at: int, label: str, what: str = "") -> None:
        if at > self.at:
            self.at, self.labels, self.whats = at, [], []
        if at == self.at:
            if label and label not in self.labels:
                self.labels.append(label)
            what = what or label
            if what and what not in self.whats:
                self.whats.append(what)


#: Where a match of a form ended, and where its :class:`Rest` began (None: it has none). Every
#: element takes the words that follow the one before, so the words a form took are the line's
#: up to its end: a match need not carry them.
_End = tuple[int, int | None]


def _match(items: Sequence[Element], tokens: _Tokens, at: int, miss: _Miss) -> Iterator[_End]:
    """Every way ``items`` can take words from ``at`` on."""
    if not items:
        yield at, None
        return
    first, rest = items[0], items[1:]
    for end, rest_at in _one(first, tokens, at, miss):
        for final, later in _match(rest, tokens, end, miss):
            yield final, rest_at if rest_at is not None else later


def _one(item: Element, tokens: _Tokens, at: int, miss: _Miss) -> Iterator[_End]:
    words = tokens.words
    word = words[at] if at < len(words) else None
    if isinstance(item, str):
        if word == item:
            yield at + 1, None
        else:
            miss.note(at, item, repr(item))
    elif isinstance(item, Word):
        if word is not None and item.test(word):
            yield at + 1, None
        else:
            miss.note(at, item.label, item.what)
    elif isinstance(item, Rest):
        if item.required and word is None:
            miss.note(at, item.what or _show(item))
            return
        yield len(words), at
    elif isinstance(item, Opt):
        yield from _match(item.items, tokens, at, miss)
        yield at, None
    elif isinstance(item, OneOf):
        for choice in item.items:
            yield from _one(choice, tokens, at, miss)
    else:
        yield from _repeat(item, tokens, at, miss, 0)


def _repeat(item: Many, tokens: _Tokens, at: int, miss: _Miss, count: int) -> Iterator[_End]:
    if isinstance(item.item, (str, Word)):  # one word each: taken in a loop, longest first
        end = at
        while end < len(tokens.words) and any(_one(item.item, tokens, end, miss)):
            end += 1
        if end < len(tokens.words):
            any(_one(item.item, tokens, end, miss))  # notes what the next word should be
        for stop in range(end, at - 1, -1):
            if count + stop - at >= item.least:
                yield stop, None
        return
    for end, rest_at in _one(item.item, tokens, at, miss):
        if end > at:  # an element that takes nothing would repeat forever
            for final, later in _repeat(item, tokens, end, miss, count + 1):
                yield final, rest_at if rest_at is not None else later
    if count >= item.least:
        yield at, None


def _taken(tokens: _Tokens, rest_at: int | None) -> list[str]:
    """The words a whole-line match took, its :class:`Rest` as text (or words, quoting)."""
    words = tokens.words
    if rest_at is None or tokens.quoting:
        return list(words)
    text = tokens.text[tokens.starts[rest_at] :].strip() if rest_at < len(words) else ""
    return [*words[:rest_at], text]


def parse(line: str) -> tuple[Grammar, list[str]] | None:
    """The subcommand ``line`` is, with the words after its name (a :class:`Rest` gives its
    text, or its words when the subcommand quotes); None when the line is a prompt (its first
    word names no subcommand). Raises :class:`SubcommandUsageError` for a subcommand written
    in none of its forms."""
    head = re.match(r"\s*(\S+)", line)
    grammar = GRAMMARS.get(head.group(1)) if head is not None else None
    if grammar is None or head is None:
        return None
    text = line[head.end() :]
    try:
        tokens = _tokens(text, grammar.quoting)
    except ValueError as exc:  # shlex: an unbalanced quote
        raise _usage(grammar, line, f"{exc} (check the quotes)") from None
    miss = _Miss()
    for form in grammar.forms:
        for end, rest_at in _match(form.items, tokens, 0, miss):
            if end == len(tokens.words):
                return grammar, _runs_expanded(grammar, _taken(tokens, rest_at), rest_at)
            miss.note(end, "")
    raise _failure(grammar, line, tokens, miss)


def _takes_runs(items: Sequence[Element]) -> bool:
    for item in items:
        if item is RUN:
            return True
        inner = getattr(item, "items", None)
        inner = (item.item,) if isinstance(item, Many) else inner
        if isinstance(inner, tuple) and _takes_runs(inner):
            return True
    return False


def _runs_expanded(grammar: Grammar, words: list[str], rest_at: int | None) -> list[str]:
    """A run's short id (``run-3``) before the line's Rest as this session's full one: a
    subcommand finds its run by the id the record keeps (:func:`nbagent.loop._ids.expand`)."""
    if not any(_takes_runs(form.items) for form in grammar.forms):
        return words
    end = len(words) if rest_at is None else rest_at
    return [expand(w) if i < end else w for i, w in enumerate(words)]


def _failure(grammar: Grammar, line: str, tokens: _Tokens, miss: _Miss) -> SubcommandUsageError:
    if miss.at >= len(tokens.words):
        what = f"missing {' or '.join(miss.labels)}"
    elif miss.whats:
        what = f"{tokens.words[miss.at]!r} is not {' or '.join(miss.whats)}"
    else:
        what = f"{tokens.words[miss.at]!r} is more than %agent {grammar.name} takes"
    return _usage(grammar, line, what)


def usage_error(name: str, line: str, what: str) -> SubcommandUsageError:
    """The error for the subcommand ``name`` written wrong in ``line``: ``what`` was wrong,
    its usage, and how to send the line as a prompt instead (a subcommand that reads its own
    options, such as ``map``, says so the same way)."""
    return _usage(GRAMMARS[name], line, what)


def _usage(grammar: Grammar, line: str, what: str) -> SubcommandUsageError:
    prompt = " ".join(line.split())
    if len(prompt) > 80:
        prompt = prompt[:79] + "…"
    return SubcommandUsageError(
        f"%agent {grammar.name}: {what}; nothing was sent to the model.\n"
        f"Usage:\n{_indent(grammar.usage())}\n"
        f"To ask the model this as a prompt, put -- first: %agent -- {prompt}"
    )


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())


def _subcommands_help() -> str:
    return "\n".join(g.usage(explained=True) for g in GRAMMARS.values())


#: Every form of every subcommand with what it does (a section of ``%agent help``).
SUBCOMMANDS_HELP = _subcommands_help()
