"""Globs as automata, so that one glob can be compared with another: do they share a string,
does one hold every string of the other.

A rule's pattern is a glob; so may be the value it tests (``secr*/key``), when the tool expands
it. Deciding such a value means comparing two sets of strings, which a regex cannot do. Both
globs become small automata over sets of characters (Glushkov's construction: one state per
character position, no empty moves), and the questions are answered by walking both at once:

* :func:`intersects` — some string is in both (a deny rule could be reached);
* :func:`covers` — every string of one is in the other (an allow rule holds for all of it).

Each walk has a budget of states; past it the answer is None ("cannot tell"), which callers read
the safe way (deny, or ask). :func:`rule_glob` reads a rule's pattern exactly as
:func:`nbagent.approvals._paths.glob_regex` does, :func:`loosen` adds every spelling of its paths
the system reads the same, and :mod:`nbagent.approvals._value_globs` reads a value as a glob.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

__all__ = [
    "ANY",
    "Alt",
    "CharSet",
    "Glob",
    "GlobTooLarge",
    "Node",
    "Seq",
    "Sym",
    "build",
    "chars",
    "covers",
    "intersects",
    "literal_glob",
    "loosen",
    "minus",
    "normal",
    "rule_glob",
    "sequence",
    "union",
]

#: A set of characters: sorted, disjoint, non-adjacent inclusive ranges of code points.
CharSet = tuple[tuple[int, int], ...]

_TOP = 0x10FFFF
ANY: CharSet = ((0, _TOP),)
#: Product states one comparison may visit before it answers "cannot tell".
BUDGET = 200_000
#: Transitions one automaton may hold (a glob of many optional parts has a number of them
#: quadratic in its length): beyond it, :class:`GlobTooLarge`.
MAX_TRANSITIONS = 1_000_000


class GlobTooLarge(ValueError):
    """A glob whose automaton would hold more than :data:`MAX_TRANSITIONS` transitions."""


def normal(ranges: Iterable[tuple[int, int]]) -> CharSet:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(r for r in ranges if r[0] <= r[1]):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


def chars(text: str) -> CharSet:
    return normal((ord(c), ord(c)) for c in text)


def _minus(a: CharSet, b: CharSet) -> CharSet:
    out: list[tuple[int, int]] = []
    for lo, hi in a:
        for blo, bhi in b:
            if bhi < lo or blo > hi:
                continue
            if blo > lo:
                out.append((lo, blo - 1))
            lo = max(lo, bhi + 1)
            if lo > hi:
                break
        if lo <= hi:
            out.append((lo, hi))
    return tuple(out)


def _and(a: CharSet, b: CharSet) -> CharSet:
    out: list[tuple[int, int]] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def _has(a: CharSet, code: int) -> bool:
    return any(lo <= code <= hi for lo, hi in a)


def _meets(a: CharSet, b: CharSet) -> bool:
    """Whether two sets share a character (most are one character: test that one)."""
    if len(a) == 1 and a[0][0] == a[0][1]:
        return _has(b, a[0][0])
    if len(b) == 1 and b[0][0] == b[0][1]:
        return _has(a, b[0][0])
    return bool(_and(a, b))


# --- expressions -------------------------------------------------------------------------------
# A glob is a sequence of characters from sets, runs of characters from a set (``*``), choices
# (braces) and empty; nothing else is needed, so the expressions are these three.


@dataclass(frozen=True)
class Sym:
    """One character of ``chars``, or with ``star`` any run of them."""

    chars: CharSet
    star: bool = False  # any run of these characters (``*``), not exactly one


@dataclass(frozen=True)
class Seq:
    """Each item in turn (none: the empty string)."""

    items: tuple[Node, ...]


@dataclass(frozen=True)
class Alt:
    """Any one of the items."""

    items: tuple[Node, ...]


Node = Sym | Seq | Alt
_EMPTY = Seq(())


@dataclass(frozen=True)
class Glob:
    """An automaton: ``sets[p]`` is what position ``p`` reads; state -1 is the start.

    ``follow[p]`` are the positions after ``p``, ``first`` those after the start; a string is
    accepted when it ends on a position in ``last`` (or on the start, when ``nullable``).
    """

    sets: tuple[CharSet, ...]
    first: frozenset[int]
    follow: tuple[frozenset[int], ...]
    last: frozenset[int]
    nullable: bool

    def after(self, state: int) -> frozenset[int]:
        return self.first if state < 0 else self.follow[state]

    def accepting(self, state: int) -> bool:
        return self.nullable if state < 0 else state in self.last

    def step(self, states: Iterable[int], char: str) -> frozenset[int]:
        """The states after reading ``char`` from any of ``states``."""
        code = ord(char)
        return frozenset(p for q in states for p in self.after(q) if _has(self.sets[p], code))

    def run(self, text: str, states: Iterable[int] = (-1,)) -> frozenset[int]:
        current = frozenset(states)
        for char in text:
            if not current:
                break
            current = self.step(current, char)
        return current

    def accepts(self, text: str) -> bool:
        return any(self.accepting(q) for q in self.run(text))

    def live(self) -> frozenset[int]:
        """The states from which some string is still accepted."""
        before: dict[int, set[int]] = {}
        for q in range(-1, len(self.sets)):
            for p in self.after(q):
                if self.sets[p]:
                    before.setdefault(p, set()).add(q)
        alive = {q for q in range(-1, len(self.sets)) if self.accepting(q)}
        todo = list(alive)
        while todo:
            for q in before.get(todo.pop(), ()):
                if q not in alive:
                    alive.add(q)
                    todo.append(q)
        return frozenset(alive)


def build(node: Node) -> Glob:
    """The automaton of ``node``; :class:`GlobTooLarge` past :data:`MAX_TRANSITIONS`."""
    sets: list[CharSet] = []
    follow: list[set[int]] = []
    transitions = 0

    def walk(node: Node) -> tuple[frozenset[int], frozenset[int], bool]:
        # iterative over sequences, recursive only into choices (bounded by MAX_NESTING)
        if isinstance(node, Sym):
            sets.append(node.chars)
            follow.append(set())
            p = len(sets) - 1
            if node.star:
                follow[p].add(p)
            return frozenset({p}), frozenset({p}), node.star
        if isinstance(node, Alt):
            first: frozenset[int] = frozenset()
            last: frozenset[int] = frozenset()
            nullable = not node.items
            for item in node.items:
                f, la, n = walk(item)
                first, last, nullable = first | f, last | la, nullable or n
            return first, last, nullable
        nonlocal transitions
        first, last, nullable = frozenset(), frozenset(), True
        for item in node.items:
            f, la, n = walk(item)
            transitions += len(last) * len(f)
            if transitions > MAX_TRANSITIONS:
                raise GlobTooLarge(f"more than {MAX_TRANSITIONS:,} transitions")
            for p in last:
                follow[p] |= f
            first = first | f if nullable else first
            last = la | last if n else la
            nullable = nullable and n
        return first, last, nullable

    first, last, nullable = walk(node)
    return Glob(tuple(sets), first, tuple(frozenset(f) for f in follow), last, nullable)


def union(globs: Iterable[Glob]) -> Glob:
    """One automaton for every string of any of ``globs``."""
    sets: list[CharSet] = []
    follow: list[frozenset[int]] = []
    first: set[int] = set()
    last: set[int] = set()
    nullable = False
    for glob in globs:
        base = len(sets)
        sets.extend(glob.sets)
        follow.extend(frozenset(base + p for p in f) for f in glob.follow)
        first |= {base + p for p in glob.first}
        last |= {base + p for p in glob.last}
        nullable = nullable or glob.nullable
    return Glob(tuple(sets), frozenset(first), tuple(follow), frozenset(last), nullable)


def literal_glob(text: str, *, under: bool = False) -> Glob:
    """Exactly ``text``; with ``under``, also everything below it as a folder (``text/…``)."""
    items: list[Node] = [Sym(chars(c)) for c in text]
    if under:
        items.append(Alt((_EMPTY, Seq((Sym(chars("/")), Sym(ANY, star=True))))))
    return build(Seq(tuple(items)))


# --- comparing -------------------------------------------------------------------------------


_WORK = 20  # transitions looked at per state of the budget


def intersects(a: Glob, b: Glob, budget: int = BUDGET) -> bool | None:
    """Whether some string is in both; None when the budget ran out first."""
    start = (-1, -1)
    seen = {start}
    todo = [start]
    work = 0
    while todo:
        qa, qb = todo.pop()
        if a.accepting(qa) and b.accepting(qb):
            return True
        work += len(a.after(qa)) * len(b.after(qb))
        if work > budget * _WORK:
            return None
        for pa in a.after(qa):
            sa = a.sets[pa]
            for pb in b.after(qb):
                pair = (pa, pb)
                if pair not in seen and _meets(sa, b.sets[pb]):
                    if len(seen) >= budget:
                        return None
                    seen.add(pair)
                    todo.append(pair)
    return False


def _regions(
    chars_: CharSet, cover: Glob, states: frozenset[int]
) -> Iterator[tuple[CharSet, frozenset[int]]]:
    """``chars_`` split by where ``cover`` goes from ``states`` on them."""
    regions: list[tuple[CharSet, frozenset[int]]] = [(chars_, frozenset())]
    for p in {p for q in states for p in cover.after(q)}:
        split: list[tuple[CharSet, frozenset[int]]] = []
        for region, went in regions:
            inside = _and(region, cover.sets[p])
            if inside:
                split.append((inside, went | {p}))
            outside = _minus(region, cover.sets[p])
            if outside:
                split.append((outside, went))
        regions = split
    yield from regions


def covers(cover: Glob, glob: Glob, budget: int = BUDGET) -> bool | None:
    """Whether every string of ``glob`` is one of ``cover``; None when the budget ran out."""
    live = glob.live()
    if -1 not in live:
        return True  # glob holds no string at all
    start = (-1, frozenset({-1}))
    seen = {start}
    todo = [start]
    work = 0
    while todo:
        q, states = todo.pop()
        if glob.accepting(q) and not any(cover.accepting(s) for s in states):
            return False
        work += len(glob.after(q)) * (1 + len(states))
        if work > budget * _WORK:
            return None
        for p in glob.after(q):
            if p not in live or not glob.sets[p]:
                continue
            for _, went in _regions(glob.sets[p], cover, states):
                if not went:
                    return False  # glob goes on where cover has nothing left
                pair = (p, went)
                if pair not in seen:
                    if len(seen) >= budget:
                        return None
                    seen.add(pair)
                    todo.append(pair)
    return True


# --- a rule's pattern ------------------------------------------------------------------------

_SEPARATORS = chars("/\\")
_CONTROL = normal([(0x00, 0x1F), (0x7F, 0x9F)])
# Characters a filesystem that ignores case may take for one another beyond lower/upper.
_ALSO = {"k": "\u212a", "s": "\u017f", "i": "\u0130\u0131", "\u00e5": "\u212b"}


def _folded(char: str) -> CharSet:
    forms = {char, char.lower(), char.upper(), char.casefold(), char.swapcase()}
    forms |= set(_ALSO.get(char.lower(), ""))
    for key, extra in _ALSO.items():
        if char in extra:
            forms |= {key, key.upper(), *extra}
    return chars("".join(f for f in forms if len(f) == 1))


def rule_glob(pattern: str, *, control: bool = False, fold: bool = False) -> Glob:
    """A rule's pattern, read as :func:`nbagent.approvals._paths.glob_regex` reads it: ``*`` any run
    but a separator, ``**`` any run, ``?`` one character but a separator, the rest literal."""
    banned: CharSet = () if control else _CONTROL
    run = _minus(ANY, banned)
    one = _minus(run, _SEPARATORS)
    items: list[Node] = []
    index = 0
    while index < len(pattern):
        if pattern.startswith("**", index):
            items.append(Sym(run, star=True))
            index += 2
            continue
        char = pattern[index]
        if char == "*":
            items.append(Sym(one, star=True))
        elif char == "?":
            items.append(Sym(one))
        else:
            items.append(Sym(_folded(char) if fold else chars(char)))
        index += 1
    return build(Seq(tuple(items)))


def minus(a: CharSet, b: CharSet) -> CharSet:
    """The characters of ``a`` that are not in ``b``."""
    return _minus(a, b)


def sequence(*parts: str | CharSet) -> Glob:
    """A small fixed automaton: literal strings and runs (any length) of sets, in order."""
    items: list[Node] = []
    for part in parts:
        if isinstance(part, str):
            items.extend(Sym(chars(c)) for c in part)
        else:
            items.append(Sym(part, star=True))
    return build(Seq(tuple(items)))


_SLASH = chars("/")
_TRAILING = chars(". ")  # what Windows drops at the end of a name
_NUL = chars("\x00")
_STREAM = chars(":")
_NAME = _minus(ANY, _SLASH)


def loosen(glob: Glob) -> Glob:
    """``glob`` with every spelling of its paths the system reads the same: where it reads a
    ``/`` (a literal one), also ``//``, ``/./`` and the like; ``./`` in front; ``/`` or
    ``/.`` at the end; a name's trailing dots and spaces and a ``:stream`` after it (Windows);
    and anything after a NUL (where C stops reading). Comparing a value's glob with a loosened
    rule needs no normalizing of what the value's braces and classes spell
    (``secrets/{/,x}`` is ``secrets//``, the folder)."""
    sets = list(glob.sets)
    follow = [set(f) for f in glob.follow]
    first = set(glob.first)
    last = set(glob.last)

    def add(chars_: CharSet) -> int:
        sets.append(chars_)
        follow.append(set())
        return len(sets) - 1

    def before(p: int) -> list[int]:
        return [q for q in range(len(glob.sets)) if p in glob.follow[q]]

    slashes = [p for p, s in enumerate(glob.sets) if s == _SLASH]
    for p in slashes:
        more, dot, dot_slash = add(_SLASH), add(chars(".")), add(_SLASH)
        tail, stream, stream_run = add(_TRAILING), add(_STREAM), add(_NAME)
        after = set(glob.follow[p])
        for q in (p, more, dot_slash):
            follow[q] |= {more, dot} | after
        follow[dot].add(dot_slash)
        # a name's trailing dots and spaces, or a stream, before this slash
        entering = before(p)
        for q in entering:
            follow[q] |= {tail, stream}
        follow[tail] |= {tail, p, stream}
        follow[stream] |= {stream_run, p}
        follow[stream_run] |= {stream_run, p}
        if p in glob.last:  # a pattern ending in "/"
            last |= {more, dot_slash}
    # the front of a relative path: "./", "././" ...
    if not any(glob.sets[p] == _SLASH for p in glob.first):
        lead_dot, lead_slash = add(chars(".")), add(_SLASH)
        follow[lead_dot].add(lead_slash)
        follow[lead_slash] |= {lead_dot, lead_slash} | set(glob.first)
        if glob.nullable:
            last.add(lead_slash)
        first.add(lead_dot)
    # the end: "/", "/.", trailing dots and spaces, a stream, a NUL and anything after it
    end_slash, end_dot = add(_SLASH), add(chars("."))
    end_tail, end_stream, end_stream_run = add(_TRAILING), add(_STREAM), add(_NAME)
    nul, after_nul = add(_NUL), add(ANY)
    ends = set(glob.last)
    for q in ends:
        follow[q] |= {end_slash, end_tail, end_stream, nul}
    if glob.nullable:
        first |= {nul}
    follow[end_slash] |= {end_slash, end_dot, nul}
    follow[end_dot] |= {end_slash, nul}
    follow[end_tail] |= {end_tail, end_slash, end_stream, nul}
    follow[end_stream] |= {end_stream_run, nul}
    follow[end_stream_run] |= {end_stream_run, nul}
    follow[nul].add(after_nul)
    follow[after_nul].add(after_nul)
    last |= {end_slash, end_dot, end_tail, end_stream, end_stream_run, nul, after_nul}
    return Glob(
        tuple(sets),
        frozenset(first),
        tuple(frozenset(f) for f in follow),
        frozenset(last),
        glob.nullable,
    )
