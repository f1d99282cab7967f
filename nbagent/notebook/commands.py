"""``%agent tools``, ``%agent rules remove NAME`` …: what each subcommand of the magic does.

Which lines are subcommands, and how each is written, is :mod:`.grammar`'s: a line whose first
word names a subcommand is that subcommand, written in one of its forms or answered with its
usage (nothing is sent to a model). :data:`COMMANDS` binds each name to what it does, so a new
subcommand is one grammar and one entry here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from . import servers
from .command.grammar import GRAMMARS, SubcommandUsageError, parse
from .command.helptext import HELP
from .core.frontend import detect
from .reports import classreport as report
from .shown.render import no_math

if TYPE_CHECKING:
    from .core.session import Session

__all__ = ["COMMANDS", "Command", "find", "is_subcommand"]


@dataclass(frozen=True)
class Command:
    """What one subcommand does: ``run(session, shell, words)`` with the words after its name,
    as its grammar matched them (None: the line is a run, planned by the magics: ``fork``).

    ``awaited`` is the form an awaiting cell runs, for a command that may wait long (a sign-in,
    a batch): a kernel interrupt cancels an awaiting cell's coroutine, which a command blocking
    the kernel's thread would never see. ``body``: a ``%%agent`` cell may give it a body (a
    prompt, a template), which comes as one more word after the others.
    """

    run: Callable[[Session, Any, list[str]], Any] | None
    scan: bool = True  # pick up the notebook's tools first
    awaited: Callable[[Session, Any, list[str]], Awaitable[Any]] | None = None
    body: bool = False


def _acp(session: Session, shell: Any, words: list[str]) -> None:
    from .external.agents import run_command

    run_command(session, shell, words)


def _help(_session: Session, _shell: Any, words: list[str]) -> None:
    print(GRAMMARS[words[0]].usage(explained=True) if words else HELP)


def _stop(session: Session, _shell: Any, _words: list[str]) -> None:
    count = session.stop()
    print(f"stopped {count} run(s)" if count else "no run is in progress")


def _rules(session: Session, _shell: Any, words: list[str]) -> None:
    rules = session.rules
    if not words:
        report.rules(session)
    elif words == ["clear"]:
        count = rules.clear()
        print(f"removed {count} rule(s): every call that needs approval asks again")
    else:
        which: int | str = int(words[1]) if words[1].isdecimal() else words[1]
        gone = rules.remove(which)
        if not gone:
            known = ", ".join(f"{n}: {r.text}" for n, r in rules.numbered()) or "none"
            raise UsageError(f"no rule {words[1]!r}; rules in force: {known}")
        for rule in gone:
            print(f"removed: {rule.text}")


def _add_rule(effect: str) -> Callable[[Session, Any, list[str]], None]:
    def run(session: Session, _shell: Any, words: list[str]) -> None:
        from ..approvals.rules import RuleError, parse_rule

        try:
            number = session.rules.add(parse_rule([effect, *words]))
        except RuleError as exc:
            raise UsageError(
                f"{exc} (to ask the model instead, write `%agent -- {effect} {' '.join(words)}`)"
            ) from None
        rule = dict(session.rules.numbered())[number]
        print(f"rule {number}: {rule.text}  (remove with %agent rules remove {number})")

    return run


def _undo(session: Session, shell: Any, words: list[str]) -> None:
    if session.notebook is not None:  # the notebook's edits too (.editing.undo)
        from .editing.undo import undo_command as undo_both

        undo_both(session, shell, words)
        return
    from .toolkit.kernelview import undo_command

    undo_command(session, shell, words)


async def _undo_awaited(session: Session, shell: Any, words: list[str]) -> None:
    from .core.frontend import awaiting_cells_take_clicks

    if session.notebook is None or not awaiting_cells_take_clicks()[0]:
        _undo(session, shell, words)  # the page's answer cannot reach an awaiting cell here
        return
    from .editing.undo import undo_awaited

    await undo_awaited(session, shell, words)


def _cells(session: Session, shell: Any, words: list[str]) -> None:
    from .toolkit.kernelview import cells_command

    cells_command(session, shell, words)


def _report(session: Session, shell: Any, words: list[str]) -> None:
    from .reports.runreport import report as show

    show(session, shell, words)


def _policy(session: Session, shell: Any, words: list[str]) -> None:
    from .reports.courseview import show_policy

    show_policy(session, shell, words)


def _compare(session: Session, _shell: Any, words: list[str]) -> None:
    """``%agent compare run-3 run-5``: the two runs side by side (static: it survives saving)."""
    from IPython.display import display

    from ..inspection.fork import compare

    try:
        first, second = (session.result_of(w) for w in words)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    shown = compare(first, second)
    data = {"text/html": shown._repr_html_(), "text/plain": str(shown)}
    display(no_math(data), raw=True)  # type: ignore[no-untyped-call]


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


def _serve(session: Session, shell: Any, words: list[str]) -> None:
    from .serving.serve import serve_command

    serve_command(session, shell, words)


def _map(session: Session, shell: Any, words: list[str]) -> Any:
    from .map import mapmagic

    return mapmagic.run_map_blocking(session, shell, *words)


async def _map_awaited(session: Session, shell: Any, words: list[str]) -> Any:
    from .map import mapmagic

    return await mapmagic.run_map(session, shell, *words)


COMMANDS: dict[str, Command] = {
    "help": Command(_help, scan=False),
    "stop": Command(_stop, scan=False),
    "rules": Command(_rules, scan=False),
    "allow": Command(_add_rule("allow")),
    "deny": Command(_add_rule("deny")),
    "approval-timeout": Command(_timeout, scan=False),
    "recording": Command(lambda s, _sh, _w: report.recordings(s), scan=False),
    "tools": Command(lambda s, _sh, _w: report.tools_table(s)),
    "history": Command(lambda s, _sh, _w: report.history(s)),
    "config": Command(lambda s, sh, _w: report.config(s, detect(sh))),
    "usage": Command(lambda s, _sh, _w: report.usage(s), scan=False),
    "report": Command(_report, scan=False),
    "policy": Command(_policy, scan=False),
    "mcp": Command(servers.run, scan=False, awaited=servers.run_awaited),
    "undo": Command(_undo, scan=False, awaited=_undo_awaited),
    "cells": Command(_cells, scan=False),
    "fork": Command(None, body=True),
    "compare": Command(_compare, scan=False),
    "serve": Command(_serve),
    "map": Command(_map, scan=False, awaited=_map_awaited, body=True),
    "acp": Command(_acp, scan=False),
}


def find(line: str) -> tuple[Command, list[str]] | None:
    """The subcommand a magic line is, with the words after its name as its grammar took them
    (see :mod:`.grammar`); None for a prompt. A line whose first word names a subcommand but
    that matches none of its forms raises UsageError with its usage: it is never a prompt."""
    try:
        found = parse(line)
    except SubcommandUsageError as exc:
        raise UsageError(str(exc)) from None
    if found is None:
        return None
    grammar, words = found
    return COMMANDS[grammar.name], words


def is_subcommand(word: str) -> bool:
    """Whether ``word`` names a subcommand (a prompt starting with it needs ``--`` first)."""
    return word in COMMANDS
