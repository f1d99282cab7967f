"""``%agent tools``, ``%agent rules remove NAME`` …: the subcommands of the magic.

A line is a subcommand only when it is exactly one (``%agent history`` is; ``%agent history of
Rome`` is a prompt). Each subcommand says which word counts it accepts after its name and what
it does; :data:`COMMANDS` is the table the magic consults, so a new subcommand is one entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from . import report, servers
from .frontend import detect

if TYPE_CHECKING:
    from .session import Session

__all__ = ["COMMANDS", "Command", "find"]


@dataclass(frozen=True)
class Command:
    """One subcommand: ``accepts(words after the name)`` and ``run(session, shell, words)``.

    ``split`` cuts the line into words (``%agent mcp add`` quotes like a shell).
    """

    accepts: Callable[[list[str]], bool]
    run: Callable[[Session, Any, list[str]], None]
    scan: bool = True  # pick up the notebook's tools first
    split: Callable[[str], list[str]] = str.split


def _alone(words: list[str]) -> bool:
    return not words


def _help(_session: Session, _shell: Any, _words: list[str]) -> None:
    from .magics import HELP

    print(HELP)


def _stop(session: Session, _shell: Any, _words: list[str]) -> None:
    count = session.stop()
    print(f"stopped {count} run(s)" if count else "no run is in progress")


def _rules_words(words: list[str]) -> bool:
    return not words or words == ["clear"] or (len(words) == 2 and words[0] == "remove")


def _rules(session: Session, _shell: Any, words: list[str]) -> None:
    allowed = session.approver.always_allowed
    if not words:
        report.rules(session)
    elif words == ["clear"]:
        count = len(allowed)
        allowed.clear()
        print(f"removed {count} rule(s): every call that needs approval asks again")
    elif words[1] in allowed:
        allowed.discard(words[1])
        print(f"removed: calls to {words[1]} ask for approval again")
    else:
        known = ", ".join(sorted(allowed)) or "none"
        raise UsageError(f"no rule for {words[1]!r}; rules in force: {known}")


COMMANDS: dict[str, Command] = {
    "help": Command(_alone, _help, scan=False),
    "stop": Command(_alone, _stop, scan=False),
    "rules": Command(_rules_words, _rules, scan=False),
    "recording": Command(_alone, lambda s, _sh, _w: report.recordings(s), scan=False),
    "tools": Command(_alone, lambda s, _sh, _w: report.tools_table(s)),
    "history": Command(_alone, lambda s, _sh, _w: report.history(s)),
    "config": Command(_alone, lambda s, sh, _w: report.config(s, detect(sh))),
    "usage": Command(_alone, lambda s, _sh, _w: report.usage(s), scan=False),
    "mcp": Command(servers.accepts, servers.run, scan=False, split=servers.split),
}


def find(line: str) -> tuple[Command, list[str]] | None:
    """The subcommand a magic line is, with the words after its name; None for a prompt."""
    words = line.split()
    if not words:
        return None
    command = COMMANDS.get(words[0])
    if command is None:
        return None
    words = command.split(line)
    if not command.accepts(words[1:]):
        return None
    return command, words[1:]
