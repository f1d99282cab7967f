"""Strict JSON for tool-call arguments: one meaning per text, bounded before it is parsed.

Python's ``json`` accepts more than JSON: ``NaN`` and ``Infinity``, numbers that overflow to
infinity, a key given twice (the last one silently wins, so a person and a tool can read
different values than the stream showed), and lone surrogates. Arguments come from a model and
are untrusted, so :func:`parse_arguments` rejects all of these, and checks size and nesting depth
before any parsing work.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from .errors import ArgumentsError

__all__ = ["parse_arguments"]

# A JSON string (skipped whole, so brackets inside strings do not count) or a bracket.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)
# The escape of a UTF-16 surrogate; only then can the parsed text hold a lone one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class _Rejected(ValueError):
    """A JSON text that Python would accept but JSON (RFC 8259 / I-JSON) does not."""


def _reject_constant(name: str) -> Any:
    raise _Rejected(f"{name} is not a JSON number (send a finite number or null)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise _Rejected(f"the number {shown} is too large to represent")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Rejected(f"the key {_quote(key)} appears twice in one object")
            seen.add(key)
    return value


def _quote(key: str) -> str:
    shown = key if len(key) <= 40 else key[:37] + "..."
    return repr(shown)  # escapes what cannot be shown (control characters, lone surrogates)


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
    invalid JSON, ``NaN``/``Infinity`` and numbers too large for a float, a key twice in one
    object (at any depth), and lone surrogates (raw or escaped).
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
        value = json.loads(
            text,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
            object_pairs_hook=_unique_keys,
        )
    except _Rejected as exc:
        raise ArgumentsError(f"{label} are not valid JSON: {exc}") from None
    except RecursionError:
        raise ArgumentsError(f"{label} nest arrays or objects too deeply") from None
    except ValueError as exc:  # JSONDecodeError, or an integer with too many digits
        raise ArgumentsError(f"{label} are not valid JSON: {exc}") from None
    if _SURROGATE_ESCAPE.search(text):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ArgumentsError(
                f"{label} are not valid JSON: a string holds a lone surrogate escape "
                "(\\uD800-\\uDFFF without its pair), which is not valid Unicode"
            ) from None
    return value
