"""How an approval rule's glob meets a string that may be a path.

A path has many spellings of one file, and symbolic links make one spelling reach another
place. A *deny* pattern must never be narrower than written, so it is matched against every
spelling and against where links lead; an *allow* pattern must never be broader than written,
so a value that walks out with ``..`` or through a link to somewhere the pattern does not cover
is not allowed (the call goes to the approver instead). See :mod:`nbagent.rules` for the rules.
"""

from __future__ import annotations

import functools
import os
import posixpath
import re
import unicodedata

__all__ = ["allow_matches", "deny_matches", "glob_regex"]

_DOTDOT = re.compile(r"(^|[/\\])\.\.([/\\]|$)")
#: Longest string read as a path on disk (longer ones are only text: no file has that name).
MAX_PATH = 4096


@functools.lru_cache(maxsize=1024)
def glob_regex(pattern: str, control: bool = False, fold: bool = False) -> re.Pattern[str]:
    """The glob as an anchored regex: ``*`` any run without ``/`` or ``\\``, ``**`` any run,
    ``?`` one character but a separator, everything else literal.

    ``control``: wildcards match control characters too (for deny patterns, which must never
    be narrower than written: ``secrets/**`` denies ``secrets/a<TAB>b``). ``fold``: letter case
    is ignored (deny patterns where the filesystem ignores it).
    """
    banned = "" if control else r"\x00-\x1f\x7f-\x9f"  # C0, DEL and C1 (NEL is a line break)
    out: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if pattern.startswith("**", index):
            out.append(f"[^{banned}]*" if banned else ".*")
            index += 2
            continue
        if char == "*":
            out.append(rf"[^/\\{banned}]*")
        elif char == "?":
            out.append(rf"[^/\\{banned}]")
        else:
            out.append(re.escape(char))
        index += 1
    return re.compile("".join(out), re.DOTALL | (re.IGNORECASE if fold else 0))


def _here() -> str | None:
    try:
        return posixpath.normpath(os.getcwd().replace("\\", "/"))
    except OSError:  # the working folder is gone
        return None


def _resolved(path: str) -> str | None:
    """Where ``path`` leads once symbolic links are followed, when that is not where its text
    says (None when no link is on the way, or it cannot be read as a path)."""
    if not path or len(path) > MAX_PATH or "\x00" in path:
        return None
    try:
        expanded = os.path.expanduser(path) if path.startswith("~") else path
        absolute = os.path.abspath(expanded)  # the text's reading: ".." drops a segment
        real = os.path.realpath(expanded)  # the system's: ".." leaves where a link led
    except (OSError, ValueError):  # an unreadable folder on the way: the text is all there is
        return None
    real = real.replace("\\", "/")
    return None if real == absolute.replace("\\", "/") else real


def _from_here(paths: set[str]) -> set[str]:
    """The same paths spelled the other way round from the working folder (where tools run):
    ``secrets/k`` also as ``/work/secrets/k``, and ``/work/secrets/k`` also as ``secrets/k``."""
    here = _here()
    if here is None:
        return set()
    other = set()
    for path in paths:
        if path.startswith("/"):
            if path == here or path.startswith(here.rstrip("/") + "/"):
                other.add(posixpath.relpath(path, here))
        elif path not in (".", "") and not path.startswith("~"):
            other.add(posixpath.normpath(posixpath.join(here, path)))
    return other


def cut(text: str) -> str:
    """``text`` where the system stops reading it: a C string ends at its first NUL, so
    ``secrets.txt\\x00.png`` opens ``secrets.txt`` for any tool that hands it to C."""
    return text.split("\x00", 1)[0]


_WINDOWS_SEGMENT = re.compile(r"(?<=[^/.])[. ]+(?=/|$)|(?<=[^/]):[^/]*")


def windows(slashed: str) -> str:
    """A path as Windows reads it: a segment's trailing dots and spaces are dropped
    (``secrets.txt.`` is ``secrets.txt``) and ``name:stream`` is a stream of ``name``
    (``secrets.txt::$DATA`` is its content). A drive (``C:``) stays."""
    drive = re.match(r"[A-Za-z]:", slashed)
    start = drive.end() if drive else 0
    return slashed[:start] + _WINDOWS_SEGMENT.sub("", slashed[start:])


def spellings(text: str) -> set[str]:
    """``text`` as written, where it is cut (see :func:`cut`), in both Unicode normal forms,
    each as a normalized path (also as Windows reads it), and where it leads through symbolic
    links.

    A path has many spellings of one file: ``\\`` for ``/``, doubled slashes (``//secrets``),
    ``.`` and ``..`` segments, a trailing slash, trailing dots and spaces and ``:stream`` on
    Windows, composed or decomposed accents (one file on macOS), ``~`` for the home folder, an
    absolute or a relative path from the working folder, and a link to it (``link/../k`` is
    read as the system reads it, through the link).
    """
    cuts = {text, cut(text)}
    forms = {f for c in cuts for f in (c, *(unicodedata.normalize(n, c) for n in ("NFC", "NFD")))}
    paths = set()
    for form in forms:
        if form:
            slashed = re.sub(r"/+", "/", form.replace("\\", "/"))
            paths.add(posixpath.normpath(slashed))
            paths.add(posixpath.normpath(windows(slashed)) if windows(slashed) else ".")
            if slashed.startswith("~"):  # a tool that expands ~ reads the home folder
                paths.add(posixpath.normpath(os.path.expanduser(slashed).replace("\\", "/")))
            real = _resolved(slashed)
            if real is not None:
                paths.add(real)
    return forms | paths | _from_here(paths)


def _folders(patterns: set[str]) -> set[str]:
    """The folder a ``folder/**`` or ``folder/*`` pattern protects, as a pattern of its own: a
    tool given the folder itself (to delete, move or list it) reaches everything in it."""
    out = set()
    for pattern in patterns:
        for suffix in ("/**", "/*"):
            if pattern.endswith(suffix):
                out.add(pattern[: -len(suffix)] or "/")
    return out


@functools.lru_cache(maxsize=16)
def _ignores_case(folder: str) -> bool:
    """Whether the filesystem holding ``folder`` ignores letter case (macOS and Windows by
    default): the folder is found again with its letters' case swapped."""
    swapped = folder.swapcase()
    if swapped == folder:
        return False
    try:
        return os.path.samefile(folder, swapped)
    except (OSError, ValueError):
        return False


def case_blind() -> bool:
    """Whether deny patterns should ignore letter case here (the working folder's filesystem
    does: ``Secrets/k`` is ``secrets/k`` there)."""
    here = _here()
    return here is not None and _ignores_case(here)


def deny_matches(pattern: str, value: str) -> bool:
    """Whether a deny pattern matches ``value`` in any of its spellings (never narrower than
    written)."""
    fold = case_blind()
    forms = spellings(pattern) - {""} or {""}
    regexes = {glob_regex(form, True, fold) for form in forms | _folders(forms)}
    values = spellings(value) | {value}
    return any(regex.fullmatch(form) for regex in regexes for form in values)


def allow_matches(pattern: str, value: str) -> bool:
    """Whether an allow pattern matches ``value`` as written and nowhere else: never through a
    ``..`` segment the pattern does not spell, and a value that reaches through a symbolic link
    only when where the link leads is covered by the pattern too."""
    if _DOTDOT.search(value) and not _DOTDOT.search(pattern):
        return False  # "under data/" never reaches out of data/
    if not glob_regex(pattern).fullmatch(value):
        return False
    real = _resolved(value)
    if real is None:
        return True
    targets = {real} | _from_here({real})
    where = _resolved(pattern) or posixpath.normpath(os.path.abspath(pattern).replace("\\", "/"))
    covered = {where} | _from_here({where})
    return any(glob_regex(form).fullmatch(target) for form in covered for target in targets)
