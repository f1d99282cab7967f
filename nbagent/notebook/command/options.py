"""The options of an ``%agent`` line (``-m``, ``--step`` …): where they end and the prompt
begins, how they parse, and ``{name}`` in a prompt."""

from __future__ import annotations

import argparse
import re
from typing import Any

from IPython.core.error import UsageError

from ...loop._ids import ID_PATTERN

__all__ = ["interpolate", "parser", "run_options", "split_at_options", "split_options"]

_VALUE_OPTIONS = {
    "-m",
    "--model",
    "-o",
    "--output",
    "--approve",
    "--acp",
    "--max-steps",
    "--tools",
    "--pace",
    "--budget",
}
_FLAG_OPTIONS = {
    "--new",
    "--reset",
    "--record",
    "--replay",
    "--live",
    "--kernel",
    "--step",
    "--notebook",  # also --notebook=NAME: a variable holding the document to work on
    "--continue",  # also --continue RUN / --continue=RUN: a run of the saved notebook
}
_FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\}")


def split_options(line: str) -> tuple[list[str], str]:
    """Leading options as tokens, and the rest of the line verbatim (the prompt).

    The prompt is never shell-split, so quotes and apostrophes in it stay as typed. ``--``
    ends the options; a word that merely starts with a dash (``-5°C?``) starts the prompt.
    """
    tokens, rest, _ended = split_at_options(line)
    return tokens, rest


def split_at_options(line: str) -> tuple[list[str], str, bool]:
    """:func:`split_options`, and whether ``--`` ended the options."""
    tokens: list[str] = []
    rest = line.lstrip()
    while rest.startswith("-"):
        match = re.match(r"(\S+)\s*", rest)
        assert match is not None
        token = match.group(1)
        name = token.split("=", 1)[0]
        if token == "--":
            return tokens, rest[match.end() :], True
        if token == "--continue":  # a run's id may follow: --continue run-k7q2x-3
            tokens.append(token)
            rest = rest[match.end() :]
            run = re.match(r"(run-\S+)\s*", rest)
            if run is not None and ID_PATTERN.fullmatch(run.group(1)):
                tokens.append(run.group(1))
                rest = rest[run.end() :]
        elif name in _FLAG_OPTIONS:
            tokens.append(token)
            rest = rest[match.end() :]
        elif name in _VALUE_OPTIONS:
            tokens.append(token)
            rest = rest[match.end() :]
            if "=" not in token:
                value = re.match(r"(\S+)\s*", rest)
                if value is None:
                    raise UsageError(f"{name} needs a value")
                tokens.append(value.group(1))
                rest = rest[value.end() :]
        elif token.startswith("--"):
            raise UsageError(
                f"unknown option {name}; see `%agent help` (put `--` before a prompt that "
                "starts with dashes)"
            )
        else:
            break
    return tokens, rest, False


def interpolate(text: str, namespace: dict[str, Any]) -> str:
    """Replace ``{name}`` and ``{name.attr}`` with values from the namespace.

    Unknown names stay as written; ``{{`` and ``}}`` give literal braces. No expression is
    evaluated: only names and attribute lookups, which run the object's own code as Python does
    (a property, ``__getattr__``, then ``__str__``), like an f-string with a bare name. That
    code runs bounded (:class:`nbagent._ground.formatting.Formatter`: 2 s, 100,000 characters kept):
    one that raises or does not finish is a UsageError naming the field and saying why.
    """
    from ..._ground.formatting import Formatter, Unreadable, stand_in

    with Formatter(name="prompt") as formatter:

        def replace(match: re.Match[str]) -> str:
            whole = match.group(0)
            if whole in ("{{", "}}"):
                return whole[0]
            path = match.group(1).split(".")
            if path[0] not in namespace:
                return whole
            value = namespace[path[0]]
            try:
                found = formatter.read(f"{{{match.group(1)}}}", _looked_up, value, path[1:])
            except Unreadable as exc:
                raise UsageError(
                    f"{whole} in the prompt could not be filled in: {stand_in(value, str(exc))}"
                ) from None
            return whole if found is None else formatter.text(found)

        return _FIELD.sub(replace, text)


def _looked_up(value: Any, attributes: list[str]) -> str | None:
    """On a worker: ``value.a.b`` as text (None: an attribute it does not have)."""
    for attr in attributes:
        try:
            value = getattr(value, attr)
        except AttributeError:
            return None
    text = str(value)
    if type(text) is not str:
        raise TypeError("its __str__ did not return a str")
    return text


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would exit the process
        raise UsageError(f"{message}; see `%agent help`")


def parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="%agent", add_help=False)
    parser.add_argument("-m", "--model")
    parser.add_argument("--new", "--reset", dest="new", action="store_true")
    parser.add_argument("-o", dest="output")
    parser.add_argument("--output", dest="output_type")
    parser.add_argument("--approve", choices=["ask", "auto", "deny"])
    parser.add_argument("--max-steps", type=int)
    parser.add_argument("--tools")
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--replay", action="store_true")
    parser.add_argument("--live", action="store_true")
    parser.add_argument("--pace", choices=["instant", "readable", "recorded"])
    parser.add_argument("--budget", type=int)
    parser.add_argument("--kernel", action="store_true")
    parser.add_argument("--step", action="store_true")
    parser.add_argument("--notebook", nargs="?", const=True, default=False)
    parser.add_argument("--continue", dest="resume", nargs="?", const=True, default=False)
    parser.add_argument("--acp", metavar="NAME")
    return parser


def run_options(args: argparse.Namespace) -> list[str]:
    """Options that only mean something for a run (so they need a prompt)."""
    names = (
        "output",
        "output_type",
        "approve",
        "max_steps",
        "tools",
        "record",
        "replay",
        "live",
        "pace",
        "budget",
        "kernel",
        "step",
        "notebook",
    )
    return [n for n in names if getattr(args, n) not in (None, False)]
