"""How an approval rule's glob meets a string that may be a path.

A path has many spellings of one file, and symbolic links make one spelling reach another
place. A *deny* pattern must never be narrower than written, so it is matched against every
spelling and against where links lead; an *allow* pattern must never be broader than written,
so a value that walks out with ``..`` or through a link to somewhere the pattern does not cover
is not allowed (the call goes to the approver instead). See :mod:`nbagent.approvals.rules` for the
rules.
"""

from __future__ import annotations

import functools
import os
import posixpath
import re
import unicodedata

from . import _globs as globs
from . import _value_globs as value_globs

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
    written), and, when ``value`` is itself a glob, whether anything it could name does."""
    fold = case_blind()
    forms = spellings(pattern) - {""} or {""}
    regexes = {glob_regex(form, True, fold) for form in forms | _folders(forms)}
    values = spellings(value) | {value}
    if any(regex.fullmatch(form) for regex in regexes for form in values):
        return True
    return any(_glob_reaches(forms, fold, text) for text in {value, cut(value)} if is_glob(text))


def allow_matches(pattern: str, value: str) -> bool:
    """Whether an allow pattern matches ``value`` as written and nowhere else: never through a
    ``..`` segment the pattern does not spell, and a value that reaches through a symbolic link
    only when where the link leads is covered by the pattern too. A value that is itself a glob
    is allowed only when everything it could name is covered as well."""
    if _DOTDOT.search(value) and not _DOTDOT.search(pattern):
        return False  # "under data/" never reaches out of data/
    if not glob_regex(pattern).fullmatch(value):
        return False
    if is_glob(value) and not _glob_covered(pattern, value):
        return False
    real = _resolved(value)
    if real is None:
        return True
    return _covers_target(pattern, real)


def _covers_target(pattern: str, real: str, *, below: bool = False) -> bool:
    """Whether an allow pattern covers ``real`` (a path links lead to), in a spelling from the
    working folder or absolute; ``below``: and everything under it."""
    targets = {real} | _from_here({real})
    where = _resolved(pattern) or posixpath.normpath(os.path.abspath(pattern).replace("\\", "/"))
    covered = {where} | _from_here({where})
    if not below:
        return any(glob_regex(form).fullmatch(target) for form in covered for target in targets)
    return any(
        globs.covers(globs.rule_glob(form, control=True), globs.literal_glob(target, under=True))
        is True
        for form in covered
        for target in targets
    )


# --- a value that is itself a glob -------------------------------------------------------------
# A tool may expand its argument as a glob (glob.glob, a shell, fnmatch over a listing, git):
# then ``secr*/key`` names ``secrets/key``. Such a value is decided by every path it could name,
# in every common dialect at once (:func:`nbagent.approvals._value_globs.value_glob`): a deny
# pattern matches it when the two sets meet, an allow pattern only when it holds the whole set.
# Where that cannot be told (too long, too many states, too much on disk to look through) deny
# denies and allow does not allow (the call is asked).

_GLOBBY = re.compile(r"[*?\[{\\]|[@!+](?=\()|^!.")
#: The longest value read as a glob (a longer one that could name a path: a deny rule denies
#: it, an allow rule asks).
MAX_GLOB = MAX_PATH
#: The longest path the system opens, in bytes: a glob whose every reading is longer names none.
SYSTEM_PATH_MAX = 32_767 if os.name == "nt" else 4_096
#: Folder entries looked through for symbolic links a glob value could pass (beyond: cannot tell).
MAX_WALK = 10_000
_DOT = globs.chars(".")
_ANY_RUN = globs.ANY
_SEPARATOR = re.compile(r"[/\\]")


def is_glob(text: str) -> bool:
    """Whether ``text`` holds anything a glob dialect reads as a wildcard, a class, braces,
    an escape, an extended glob or a negation."""
    return _GLOBBY.search(text) is not None


@functools.lru_cache(maxsize=1)
def _dotdot() -> globs.Glob:
    """Every string with a ``..`` segment."""
    shapes = []
    for before in ("", "/", "\\"):
        for after in ("", "/", "\\"):
            parts: list[str | globs.CharSet] = []
            if before:
                parts += [_ANY_RUN, before]
            parts.append("..")
            if after:
                parts += [after, _ANY_RUN]
            shapes.append(globs.sequence(*parts))
    return globs.union(shapes)


def _climbs(text: str) -> bool:
    """Whether the glob part of ``text`` could name a ``..`` segment the text does not spell
    before it, so that it could lead anywhere: braces or classes that make ``..``, a segment
    that starts with a dot and a wildcard (``.*`` takes in ``..`` in some shells), or ``..``
    after a glob segment (whose match may be a symbolic link)."""
    segments = _SEPARATOR.split(text)
    first = next((n for n, segment in enumerate(segments) if is_glob(segment)), len(segments))
    rest = segments[first:]
    dotted = (s for s in rest if s.startswith(".") and is_glob(s))
    if ".." in rest or any(value_globs.value_glob(s).accepts("..") for s in dotted):
        return True
    tail = "/".join(rest)
    if tail.count(".") < 2:
        return False  # a wildcard takes a name from a listing, never "..": two dots are needed
    no_dot = globs.minus(globs.ANY, _DOT)
    found = globs.intersects(value_globs.value_glob(tail, no_dot), _dotdot())
    return found is not False


@functools.lru_cache(maxsize=256)
def _rule(pattern: str, control: bool, fold: bool) -> globs.Glob:
    return globs.rule_glob(pattern, control=control, fold=fold)


def _readings(text: str) -> set[str]:
    """``text`` as written and with its escapes taken (``ke\\ys`` is ``keys`` to a shell):
    what each names is spelled and looked up on disk on its own."""
    return {text, re.sub(r"\\(.)", r"\1", text, flags=re.DOTALL)}


def _glob_reaches(forms: set[str], fold: bool, text: str) -> bool:
    """Whether the glob ``text`` could name something a deny pattern (its spellings
    ``forms``) matches; True also when that cannot be told."""
    if value_globs.shortest(text) > SYSTEM_PATH_MAX:
        return False  # longer than any path, however it is read: text, not a path
    readings = _readings(text)
    if len(text) > MAX_GLOB or any(_climbs(reading) for reading in readings):
        return True  # it could lead anywhere: never narrower than written
    # loosened: what the value's braces and classes spell is not normalized (secrets/{/,x})
    denied = globs.loosen(globs.union(_rule(f, True, fold) for f in forms | _folders(forms)))
    named = globs.union(
        value_globs.value_glob(form) for reading in readings for form in spellings(reading) if form
    )
    if globs.intersects(named, denied) is not False:
        return True
    for reading in readings:
        targets = _links_passed(reading)
        if targets is None:
            return True
        for target in targets:
            shape = globs.literal_glob(target, under=os.path.isdir(target))
            if globs.intersects(shape, denied) is not False:
                return True
    return False


def _glob_covered(pattern: str, text: str) -> bool:
    """Whether an allow pattern holds every path the glob ``text`` could name, also where
    the symbolic links it could pass lead. The names a glob expands to are files that exist,
    so the pattern's wildcards are read as taking any character here (a control character in
    a name found on disk does not take the path out of the folder)."""
    if value_globs.shortest(text) > SYSTEM_PATH_MAX:
        return True  # as a glob it names no path at all; as text the pattern matched it
    readings = _readings(text)
    if len(text) > MAX_GLOB or any(_climbs(reading) for reading in readings):
        return False
    if any(_DOTDOT.search(r) for r in readings) and not _DOTDOT.search(pattern):
        return False  # "data/\\.\\./x" is "data/../x" to a shell
    if globs.covers(_rule(pattern, True, False), value_globs.value_glob(text)) is not True:
        return False
    for reading in readings:
        targets = _links_passed(reading)
        if targets is None:
            return False
        if not all(_covers_target(pattern, t, below=os.path.isdir(t)) for t in targets):
            return False
    return True


def _links_passed(text: str) -> list[str] | None:
    """Where the symbolic links lead that the glob ``text`` could name or pass through, on
    disk now, below the folder its fixed part names; None when more than :data:`MAX_WALK`
    entries would have to be read."""
    slashed = posixpath.normpath(re.sub(r"/+", "/", text.replace("\\", "/")))
    if slashed.startswith("~"):
        slashed = os.path.expanduser(slashed)
    segments = slashed.split("/")
    fixed: list[str] = []
    for segment in segments:
        if is_glob(segment):
            break
        fixed.append(segment)
    folder = "/".join(fixed) or ("/" if slashed.startswith("/") else "")
    named = value_globs.value_glob(slashed)
    states = named.run(folder)
    if not states or not os.path.isdir(folder or "."):
        return []
    targets: list[str] = []
    seen = 0
    todo = [(folder, states)]
    while todo:
        where, states = todo.pop()
        try:
            entries = list(os.scandir(where or "."))
        except OSError:  # unreadable: nothing there a tool could reach either
            continue
        for entry in entries:
            seen += 1
            if seen > MAX_WALK:
                return None
            spelled = where.rstrip("/") + "/" + entry.name if where else entry.name
            after = named.run(("" if where in ("", "/") else "/") + entry.name, states)
            if not after:
                continue  # the glob names nothing here, nor below
            try:
                if entry.is_symlink():
                    targets.append(os.path.realpath(entry.path).replace("\\", "/"))
                elif entry.is_dir(follow_symlinks=False) and named.step(after, "/"):
                    todo.append((spelled, after))
            except OSError:
                continue
    return targets
