"""``%agent tools``, ``%agent rules remove NAME`` …: the subcommands of the magic.

A line is a subcommand only when it is exactly one (``%agent history`` is; ``%agent history of
Rome`` is a prompt). Each subcommand says which word counts it accepts after its name and what
it does; :data:`COMMANDS` is the table the magic consults, so a new subcommand is one entry.
``%agent allow TOOL [ARG=PATTERN ...]`` and ``%agent deny ...`` read their words as a shell
would (quotes group), and are rules only when every word after the tool is ``ARG=PATTERN``
(``%agent allow me to ask`` stays a prompt); ``%agent allow repeats TOOL [ARG=PATTERN ...]`` lets
a tool repeat without the run pausing (see :mod:`nbagent._repeats`).
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from . import report, servers
from .frontend import detect
from .helptext import HELP
from .render import no_math

if TYPE_CHECKING:
    from .session import Session

__all__ = ["COMMANDS", "Command", "find"]


@dataclass(frozen=True)
class Command:
    """One subcommand: ``accepts(words after the name)`` and ``run(session, shell, words)``.

    ``split`` cuts the whole line into words (``%agent mcp add`` and rule lines quote like a
    shell). ``awaited`` is the form an awaiting cell runs, for a command that may wait long
    (a sign-in): a kernel interrupt cancels an awaiting cell's coroutine, which a command
    blocking the kernel's thread would never see.
    """

    accepts: Callable[[list[str]], bool]
    run: Callable[[Session, Any, list[str]], None]
    scan: bool = True  # pick up the notebook's tools first
    split: Callable[[str], list[str]] = str.split  # the words of the whole line
    awaited: Callable[[Session, Any, list[str]], Awaitable[None]] | None = None


def _alone(words: list[str]) -> bool:
    return not words


def _help(_session: Session, _shell: Any, _words: list[str]) -> None:
    print(HELP)


def _stop(session: Session, _shell: Any, _words: list[str]) -> None:
    count = session.stop()
    print(f"stopped {count} run(s)" if count else "no run is in progress")


def _rules_words(words: list[str]) -> bool:
    return not words or words == ["clear"] or (len(words) == 2 and words[0] == "remove")


def _rules(session: Session, _shell: Any, words: list[str]) -> None:
    rules = session.rules
    if not words:
        report.rules(session)
    elif words == ["clear"]:
        count = rules.clear()
        print(f"removed {count} rule(s): every call that needs approval asks again")
    else:
        which: int | str = int(words[1]) if words[1].isdigit() else words[1]
        gone = rules.remove(which)
        if not gone:
            known = ", ".join(f"{n}: {r.text}" for n, r in rules.numbered()) or "none"
            raise UsageError(f"no rule {words[1]!r}; rules in force: {known}")
        for rule in gone:
            print(f"removed: {rule.text}")


_TOOL_WORD = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _rule_words(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError:  # an unbalanced quote: a prompt ("allow me, don't ...")
        return ["\0"]


def _is_rule(words: list[str]) -> bool:
    """``TOOL`` then only ``ARG=PATTERN`` words."""
    return (
        bool(words)
        and bool(_TOOL_WORD.fullmatch(words[0]))
        and all("=" in w and not w.startswith("=") for w in words[1:])
    )


def _is_allow(words: list[str]) -> bool:
    """A rule, or ``repeats TOOL [ARG=PATTERN ...]`` (``%agent allow repeats list_variables``)."""
    return _is_rule(words) or (len(words) > 1 and words[0] == "repeats" and _is_rule(words[1:]))


def _add_rule(effect: str) -> Callable[[Session, Any, list[str]], None]:
    def run(session: Session, _shell: Any, words: list[str]) -> None:
        from ..rules import RuleError, parse_rule

        try:
            number = session.rules.add(parse_rule([effect, *words]))
        except RuleError as exc:
            raise UsageError(
                f"{exc} (to ask the model instead, write `%agent -- {effect} {' '.join(words)}`)"
            ) from None
        rule = dict(session.rules.numbered())[number]
        print(f"rule {number}: {rule.text}  (remove with %agent rules remove {number})")

    return run


_RUN = re.compile(r"run-\d{1,9}")


def _runs(words: list[str]) -> bool:
    """Nothing, or run ids (``%agent cells run-3``; ``%agent cells please`` is a prompt)."""
    return all(_RUN.fullmatch(w) for w in words)


def _undo_words(words: list[str]) -> bool:
    """``[RUN ...]``, or ``[RUN] step N`` (``%agent undo that`` is a prompt)."""
    if len(words) >= 2 and words[-2] == "step" and words[-1].isdigit():
        words = words[:-2]
        return len(words) <= 1 and _runs(words)
    return _runs(words)


def _undo(session: Session, shell: Any, words: list[str]) -> None:
    from .kernelview import undo_command

    undo_command(session, shell, words)


def _cells(session: Session, shell: Any, words: list[str]) -> None:
    from .kernelview import cells_command

    cells_command(session, shell, words)


def _two_runs(words: list[str]) -> bool:
    return len(words) == 2 and _runs(words)


def _compare(session: Session, _shell: Any, words: list[str]) -> None:
    """``%agent compare run-3 run-5``: the two runs side by side (static: it survives saving)."""
    from IPython.display import display

    from ..fork import compare

    try:
        first, second = (session.result_of(w) for w in words)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    shown = compare(first, second)
    data = {"text/html": shown._repr_html_(), "text/plain": str(shown)}
    display(no_math(data), raw=True)  # type: ignore[no-untyped-call]


def _timeout_words(words: list[str]) -> bool:
    return len(words) <= 1 and (not words or words[0] in ("off", "none") or _seconds(words[0]))


def _seconds(word: str) -> bool:
    try:
        value = float(word.rstrip("s"))
    except ValueError:
        return False
    return 0 < value < math.inf  # "inf" and "1e400" are no timeout the session accepts


def _timeout(session: Session, _shell: Any, words: list[str]) -> None:
    if words:
        value = None if words[0] in ("off", "none") else float(words[0].rstrip("s"))
        session.set_approval_timeout(value)
    seconds = session.approval_timeout
    if seconds is None:
        print("approval timeout: off (a call that needs approval waits until someone answers)")
    else:
        print(
            f"approval timeout: {seconds:g} s (a call nobody answers by then is answered "
            "'approval timed out', and the run goes on)"
        )


COMMANDS: dict[str, Command] = {
    "help": Command(_alone, _help, scan=False),
    "stop": Command(_alone, _stop, scan=False),
    "rules": Command(_rules_words, _rules, scan=False),
    "allow": Command(_is_allow, _add_rule("allow"), split=_rule_words),
    "deny": Command(_is_rule, _add_rule("deny"), split=_rule_words),
    "approval-timeout": Command(_timeout_words, _timeout, scan=False),
    "recording": Command(_alone, lambda s, _sh, _w: report.recordings(s), scan=False),
    "tools": Command(_alone, lambda s, _sh, _w: report.tools_table(s)),
    "history": Command(_alone, lambda s, _sh, _w: report.history(s)),
    "config": Command(_alone, lambda s, sh, _w: report.config(s, detect(sh))),
    "usage": Command(_alone, lambda s, _sh, _w: report.usage(s), scan=False),
    "mcp": Command(
        servers.accepts, servers.run, scan=False, split=servers.split, awaited=servers.run_awaited
    ),
    "undo": Command(_undo_words, _undo, scan=False),
    "cells": Command(_runs, _cells, scan=False),
    "compare": Command(_two_runs, _compare, scan=False),
}


def find(line: str) -> tuple[Command, list[str]] | None:
    """The subcommand a magic line is, with the words after its name; None for a prompt."""
    words = line.split(None, 1)
    if not words:
        return None
    command = COMMANDS.get(words[0])
    if command is None:
        return None
    rest = command.split(line)[1:]
    if not command.accepts(rest):
        return None
    return command, rest
