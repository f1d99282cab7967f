"""A value read as a glob: every string it may name, in every common glob dialect at once.

A tool may expand its argument (``glob.glob``, a shell, ``fnmatch`` over a listing, git,
minimatch), and the dialects differ: ``*`` crosses folders in some, ``[`` is literal in others,
braces and extended globs exist in a few, ``\\`` escapes in some and separates in others. An
approval rule must not guess which one the tool speaks, so :func:`value_glob` reads the value as
all of them together, an over-estimate: every string some dialect would make of it is in, and
:func:`shortest` bounds how short any of them can be.
"""

from __future__ import annotations

from ._globs import (
    ANY,
    Alt,
    CharSet,
    Glob,
    GlobTooLarge,
    Node,
    Seq,
    Sym,
    build,
    chars,
    minus,
    normal,
)

__all__ = ["MAX_NESTING", "shortest", "value_glob"]

#: How deeply brackets and braces may nest in a value read as a glob (deeper: anything at all).
MAX_NESTING = 32
_EMPTY = Seq(())

_EXTGLOB = "@!+*?"


def _closing(text: str, start: int, open_: str, close: str) -> int:
    """The index of the bracket that closes the one at ``start`` (nesting counted), or -1."""
    depth = 0
    for index in range(start, len(text)):
        if text[index] == open_:
            depth += 1
        elif text[index] == close:
            depth -= 1
            if depth == 0:
                return index
    return -1


def _class_end(text: str, index: int) -> int:
    """The index of the ``]`` that closes the bracket expression opening at ``index``, or -1.
    A ``]`` first (after any ``!`` or ``^``) is a member, and so is what ``[:alpha:]``,
    ``[.x.]`` and ``[=e=]`` hold."""
    pos = index + 1 + (text[index + 1 : index + 2] in ("!", "^"))
    if text[pos : pos + 1] == "]":
        pos += 1
    while pos < len(text):
        kind = text[pos + 1 : pos + 2]
        if text[pos] == "[" and kind in (":", ".", "="):
            inner = text.find(kind + "]", pos + 2)
            if inner >= 0:
                pos = inner + 2
                continue
        if text[pos] == "]":
            return pos
        pos += 1
    return -1


def _class(body: str, wild: CharSet) -> CharSet:
    """The characters a bracket expression's body names (``!``/``^`` negates; a POSIX class
    such as ``[:alpha:]`` counts as any character, which is never narrower)."""
    negated = body[:1] in ("!", "^")
    if negated:
        body = body[1:]
    ranges: list[tuple[int, int]] = []
    index = 0
    while index < len(body):
        kind = body[index + 1 : index + 2]
        if body[index] == "[" and kind in (":", ".", "=") and kind + "]" in body[index + 2 :]:
            return wild  # a named class, collating element or equivalence: any character
        char = body[index]
        if char == "\\" and index + 1 < len(body):  # an escape: the next one, or the backslash
            ranges.append((ord(char), ord(char)))
            index += 1
            char = body[index]
        if index + 2 < len(body) and body[index + 1] == "-":
            low, high = ord(char), ord(body[index + 2])
            ranges.append((min(low, high), max(low, high)))  # a reversed range: both ways
            index += 3
            continue
        ranges.append((ord(char), ord(char)))
        index += 1
    named = normal(ranges)
    return minus(wild, named) if negated else named


def _top_level_commas(body: str) -> list[str]:
    parts, depth, begun = [], 0, 0
    for index, char in enumerate(body):
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(body[begun:index])
            begun = index + 1
    parts.append(body[begun:])
    return parts


class _TooDeep(Exception):
    pass


def _value(text: str, depth: int, wild: CharSet) -> Node:
    """``text`` read as every common glob dialect may read it, at once (an over-estimate);
    ``depth`` counts the brackets and braces around it (0: the whole value); a wildcard reads
    the characters ``wild``."""
    if depth > MAX_NESTING:
        raise _TooDeep
    items: list[Node] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char in _EXTGLOB and text.startswith("(", index + 1):
            end = _closing(text, index + 1, "(", ")")
            if end > 0:  # @(a|b), !(a), +(a) ...: an extended glob can name anything
                items.append(Sym(wild, star=True))
                index = end + 1
                continue
        if char == "!" and index == 0 and depth == 0 and len(text) > 1:  # "!x": all but x
            items.append(Sym(wild, star=True))
            break
        if char == "*":
            while index < len(text) and text[index] == "*":
                index += 1
            items.append(Sym(wild, star=True))  # some tools' * crosses folders (fnmatch, git)
            continue
        if char == "?":
            items.append(Sym(wild))
        elif char == "\\":  # an escape (the backslash goes), or a character of its own
            items.append(Alt((_EMPTY, Sym(chars("\\")))))
        elif char == "[":
            end = _class_end(text, index)
            if end > 0:
                body = text[index + 1 : end]
                literal = Seq((Sym(chars("[")), _value(body, depth + 1, wild), Sym(chars("]"))))
                items.append(Alt((Sym(_class(body, wild)), literal)))
                index = end + 1
                continue
            items.append(Sym(chars("[")))
        elif char == "{":
            end = _closing(text, index, "{", "}")
            if end > 0:
                body = text[index + 1 : end]
                literal = Seq((Sym(chars("{")), _value(body, depth + 1, wild), Sym(chars("}"))))
                parts = _top_level_commas(body)
                if len(parts) > 1:
                    choices = [_value(part, depth + 1, wild) for part in parts]
                    items.append(Alt((*choices, literal)))
                elif ".." in body:  # {1..9}, {a..z}: a sequence
                    items.append(Sym(wild, star=True))
                else:
                    items.append(literal)
                index = end + 1
                continue
            items.append(Sym(chars("{")))
        else:
            items.append(Sym(chars(char)))
        index += 1
    return _simpler(items, Sym(wild, star=True))


def _simpler(items: list[Node], anything: Sym) -> Node:
    """The sequence of ``items``, with what adds no string left out: a run of anything beside
    another, a choice one of whose options is a run of anything (it is that run). Without
    this, ``{a,*}{b,*}…`` would make an automaton quadratic in its length."""
    out: list[Node] = []
    for item in items:
        if isinstance(item, Alt) and any(_is(option, anything) for option in item.items):
            item = anything
        if _is(item, anything) and out and _is(out[-1], anything):
            continue
        out.append(item)
    return Seq(tuple(out))


def _is(node: Node, anything: Sym) -> bool:
    return node == anything or (isinstance(node, Seq) and node.items == (anything,))


def value_glob(text: str, wild: CharSet = ANY) -> Glob:
    """Every string ``text`` may name as a glob, in any common dialect at once (never fewer):
    ``*`` and ``**`` any run (across folders too, as fnmatch and git read it), ``?`` any one
    character, ``[…]`` one character of the class or the brackets as written, ``{a,b}`` each
    choice or the braces as written, a ``\\`` an escape or itself, extended globs (``@(…)``,
    ``!(…)``) and a leading ``!`` (negation) anything at all. ``wild``: what a wildcard may
    stand for (any character unless told)."""
    try:
        return build(_value(text, 0, wild))
    except (_TooDeep, GlobTooLarge):  # past reading: it could name anything
        return build(Sym(wild, star=True))


def shortest(text: str) -> int:
    """A lower bound on the length of any string :func:`value_glob` reads ``text`` as: the
    characters outside every bracket, brace and extended-glob group that are no wildcard or
    escape (a group may stand for less than it spells, a leading ``!`` for anything)."""
    if text.startswith("!") and len(text) > 1:
        return 0
    count = index = 0
    while index < len(text):
        char = text[index]
        end = -1
        if char in _EXTGLOB and text.startswith("(", index + 1):
            end = _closing(text, index + 1, "(", ")")
        elif char == "[":
            end = _class_end(text, index)
        elif char == "{":
            end = _closing(text, index, "{", "}")
        if end > 0:
            index = end + 1
            continue
        if char not in "*?\\":
            count += 1
        index += 1
    return count
