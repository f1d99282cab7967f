"""Strict JSON: one meaning per text, bounded before it is parsed.

Python's ``json`` accepts more than JSON: ``NaN`` and ``Infinity``, numbers that overflow to
infinity, a key given twice (the last one silently wins, so a person and a program can read
different values in the same text), and lone surrogates. Text from a model, a server or a file
someone handed over is untrusted, so :func:`strict_loads` refuses all of these, saying what and
where; :func:`parse_arguments` (tool-call arguments) and the recording reader both use it, and
the arguments also get their size and nesting depth checked before any parsing work.
"""

from __future__ import annotations

import json
import math
import re
import threading
from typing import Any

from ..errors import ArgumentsError

__all__ = ["StrictJSONError", "parse_arguments", "strict_loads"]

# A JSON string (skipped whole, so brackets inside strings do not count) or a bracket.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)
# The escape of a UTF-16 surrogate; only then can the parsed text hold a lone one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")

Path = tuple[str | int, ...]


class StrictJSONError(ValueError):
    """A JSON text that Python would accept but JSON (RFC 8259 / I-JSON) does not.

    ``problem`` says what, ``path`` where (the keys and indexes from the top, ``()`` for the
    text as a whole) and ``key`` the key given twice, when that is the problem.
    """

    def __init__(self, problem: str, path: Path = (), key: str | None = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.path = path
        self.key = key


class _Twice(dict):  # type: ignore[type-arg]
    """An object that held a key twice: kept while parsing, found and named afterwards."""

    key = ""


class _NotANumber:
    """Where a number JSON cannot carry stood (``NaN``, ``1e400``): found and named afterwards."""

    __slots__ = ("problem",)

    def __init__(self, problem: str) -> None:
        self.problem = problem


def _quote(key: str) -> str:
    shown = key if len(key) <= 40 else key[:37] + "..."
    return repr(shown)  # escapes what cannot be shown (control characters, lone surrogates)


def _children(node: Any) -> list[tuple[str | int, Any]]:
    if isinstance(node, dict):
        return list(node.items())
    if isinstance(node, list):
        return list(enumerate(node))
    return []


def _first(value: Any, flawed: Any) -> tuple[Path, Any] | None:
    """The first node (in the text's order) for which ``flawed`` says something, and its path.
    Iterative: a document may nest as deep as the parser allows."""
    stack: list[tuple[Path, Any]] = [((), value)]
    while stack:
        path, node = stack.pop()
        if flawed(node):
            return path, node
        stack.extend(((*path, step), child) for step, child in reversed(_children(node)))
    return None


def _lone_surrogate(node: Any) -> bool:
    texts = [node] if isinstance(node, str) else list(node) if isinstance(node, dict) else []
    for text in texts:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return True
    return False


class _Flaws(threading.local):
    """How many flaws the parse under way on this thread met (the hooks below count them)."""

    count = 0


_flaws = _Flaws()


def _pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(items)
    if len(value) == len(items):
        return value
    _flaws.count += 1
    twice = _Twice(value)
    seen: set[str] = set()
    for key, _ in items:
        if key in seen:
            twice.key = key
            break
        seen.add(key)
    return twice


def _constant(name: str) -> Any:
    _flaws.count += 1
    return _NotANumber(f"{name} is not a JSON number (send a finite number or null)")


def _number(digits: str) -> Any:
    value = float(digits)
    if math.isfinite(value):
        return value
    _flaws.count += 1
    shown = digits if len(digits) <= 40 else digits[:37] + "..."
    return _NotANumber(f"the number {shown} is too large to represent")


#: One decoder for every parse (``json.loads`` with hooks builds a decoder and its scanner per
#: call, most of the cost of parsing a small text); its hooks keep no state but the count above.
_decode = json.JSONDecoder(
    parse_constant=_constant, parse_float=_number, object_pairs_hook=_pairs
).decode


def strict_loads(text: str) -> Any:
    """Parse ``text`` as strict JSON, or raise :class:`StrictJSONError` naming what and where.

    Refused: ``NaN``/``Infinity`` and numbers too large for a float, a key twice in one object
    (at any depth) and lone surrogates (escaped; a ``str`` cannot be decoded UTF-8 with a raw
    one). Invalid JSON raises ``json.JSONDecodeError`` (a ``ValueError``) and nesting past the
    parser's reach ``RecursionError``, as ``json.loads`` does.
    """
    if isinstance(text, (bytes, bytearray)):  # as json.loads takes them
        text = text.decode(json.detect_encoding(text), "surrogatepass")
    elif text.startswith("\ufeff"):  # as json.loads refuses it
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    _flaws.count = 0
    value = _decode(text)
    if _flaws.count:
        found = _first(value, lambda node: isinstance(node, (_Twice, _NotANumber)))
        assert found is not None  # every flaw sits in the tree, or in an object that is _Twice
        path, node = found
        if isinstance(node, _NotANumber):
            raise StrictJSONError(node.problem, path)
        raise StrictJSONError(
            f"the key {_quote(node.key)} appears twice in one object", path, node.key
        )
    if "\\u" in text and _SURROGATE_ESCAPE.search(text):
        found = _first(value, _lone_surrogate)
        if found is not None:
            raise StrictJSONError(
                "a string holds a lone surrogate escape (\\uD800-\\uDFFF without its pair), "
                "which is not valid Unicode",
                found[0],
            )
    return value


def _depth_exceeds(text: str, limit: int) -> bool:
    if text.count("[") + text.count("{") <= limit:  # cannot nest deeper: skip the scan
        return False
    depth = 0
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > limit:
                return True
        elif token in "]}":
            depth -= 1
    return False


def parse_arguments(text: str, *, name: str, max_bytes: int, max_depth: int) -> Any:
    """Parse a call's arguments as strict JSON; raise :class:`ArgumentsError` saying why not.

    Empty text means "no arguments" (``{}``; some servers send ``""`` for tools without
    parameters). Rejected: more than ``max_bytes`` of UTF-8, nesting deeper than ``max_depth``,
    invalid JSON, and everything :func:`strict_loads` refuses.
    """
    label = f"arguments of {_quote(name)}"
    if len(text) > max_bytes:  # every character is at least one byte: no need to encode
        raise ArgumentsError(
            f"{label} are at least {len(text):,} bytes, more than the limit of {max_bytes:,}: "
            "send less, for example by splitting the work into several calls"
        )
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise ArgumentsError(f"{label} hold a lone surrogate, which is not valid Unicode") from None
    if size > max_bytes:
        raise ArgumentsError(
            f"{label} are {size:,} bytes, more than the limit of {max_bytes:,}: send less, for "
            "example by splitting the work into several calls"
        )
    if not text.strip():
        return {}
    if _depth_exceeds(text, max_depth):
        raise ArgumentsError(f"{label} nest arrays or objects deeper than {max_depth} levels")
    try:
        return strict_loads(text)
    except RecursionError:
        raise ArgumentsError(f"{label} nest arrays or objects too deeply") from None
    except ValueError as exc:  # StrictJSONError, JSONDecodeError, an int with too many digits
        raise ArgumentsError(f"{label} are not valid JSON: {exc}") from None
