"""A server's tool listing, read one tool at a time: one bad tool never costs the others.

The SDK reads a ``tools/list`` answer as one JSON-RPC message and validates it as one result,
so a single tool the SDK cannot take makes the whole listing fail, and with it the connection:
one schema nested past its JSON parser's limit (about 200 levels: "recursion limit
exceeded"), a ``NaN`` (not JSON), a field of the wrong type, an unknown ``taskSupport``. Both
transports hand every ``tools/list`` answer to a :class:`ListingScreen` before the SDK sees
it. The screen checks each listed tool alone, with the SDK's own models for the negotiated
protocol version, nesting bounded by ``MCPLimits.max_schema_depth``, and (on 2026-07-28
connections) the ``x-mcp-header`` rule the SDK would otherwise apply by dropping the tool
silently; each tool that fails is taken out of the answer and named, with the reason, in the
answer's ``_meta`` under :data:`SCREENED`, where the connection reads it.

Nesting deeper than Python's own parser goes (thousands of levels) is cut out of the text
first, without parsing it (:func:`load_answer`), and refuses its tool like any other depth.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from ._limits import MCPLimits

__all__ = ["SCREENED", "ListingScreen", "load_answer"]

#: The ``_meta`` key of a screened listing: ``{"refused": [reason, ...], "kept": [name, ...],
#: "unread": bool}`` (whether tools past ``MCPLimits.max_tools`` were left out unread).
SCREENED = "nbagent/screened"

# In a JSON-RPC answer, a tool's fields sit at depth 4 (message, result, tools, the tool), so
# depth 1 of a tool's schema is depth 5 of the message.
_ENVELOPE = 4
_MAX_PENDING = 64
# Strings (so that brackets inside them do not count) and brackets, in the raw bytes.
_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
# What a cut-out subtree becomes: a string no JSON library writes, so the tool holding it is
# found and refused (a server that sends it only refuses its own tool).
_CUT = "\x00nbagent: nested deeper than it can be read"
_NOT_JSON = "\x00nbagent: NaN or Infinity, which JSON does not allow"


class _Problem(Exception):
    """Why one listed tool cannot be taken."""


def load_answer(raw: bytes | str, cut_depth: int) -> Any:
    """A JSON-RPC answer as Python values, whatever its nesting, or None when it is not JSON.

    Arrays and objects opened deeper than ``cut_depth`` become a marker string, and so do
    ``NaN`` and ``Infinity`` (Python accepts them, JSON and the SDK do not); the listing's
    check then refuses the tool holding them.
    """
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    try:
        return json.loads(data, parse_constant=lambda _: _NOT_JSON)
    except RecursionError:
        pass
    except ValueError:
        return None
    try:
        return json.loads(_cut_deep(data, cut_depth), parse_constant=lambda _: _NOT_JSON)
    except (ValueError, RecursionError):
        return None


def _cut_deep(data: bytes, cut_depth: int) -> bytes:
    """``data`` with every array or object opened deeper than ``cut_depth`` replaced by
    :data:`_CUT`; linear in its length, nothing parsed."""
    marker = json.dumps(_CUT).encode()
    out: list[bytes] = []
    depth = 0
    kept_to = 0
    cut_from = -1
    for token in _TOKENS.finditer(data):
        first = data[token.start()]
        if first == 0x22:  # a string
            continue
        if first in b"[{":
            depth += 1
            if depth == cut_depth + 1:
                cut_from = token.start()
        else:
            if depth == cut_depth + 1 and cut_from >= 0:
                out += (data[kept_to:cut_from], marker)
                kept_to = token.end()
                cut_from = -1
            depth -= 1
    out.append(data[kept_to:])
    return b"".join(out)


class ListingScreen:
    """Checks each ``tools/list`` answer of one connection, tool by tool (see the module)."""

    def __init__(self, server: str, limits: MCPLimits, version: Callable[[], str | None]) -> None:
        self.server = server
        self.limits = limits
        self.version = version
        self._pending: list[Any] = []  # ids of tools/list requests sent and not yet answered

    # --- which answers are listings (stdio: the transport tells it what it sent) ------------

    def sent(self, message: Any) -> None:
        """Note an outgoing JSON-RPC message; a ``tools/list`` request's answer is screened."""
        if getattr(message, "method", None) == "tools/list" and hasattr(message, "id"):
            self._pending = [*self._pending[-(_MAX_PENDING - 1) :], message.id]

    def answers(self, request_id: Any) -> bool:
        """Whether ``request_id`` is a pending ``tools/list`` request (forgotten once asked)."""
        for index, pending in enumerate(self._pending):
            if pending == request_id and type(pending) is type(request_id):
                del self._pending[index]
                return True
        return False

    # --- screening ------------------------------------------------------------------------

    def screen_bytes(self, raw: bytes | str) -> bytes | None:
        """A whole ``tools/list`` answer (JSON text) screened, as JSON text; None when it is
        not a JSON-RPC answer to screen (the SDK then reports it as it is)."""
        message = load_answer(raw, _ENVELOPE + self.limits.max_schema_depth)
        if not isinstance(message, dict) or not isinstance(message.get("result"), dict):
            return None
        screened = self.screen_result(message["result"])
        if screened is None:
            return None
        try:
            return json.dumps({**message, "result": screened}, allow_nan=False).encode()
        except (ValueError, TypeError, RecursionError):  # e.g. 1e400, read as infinity
            return None

    def screen_result(self, result: dict[str, Any]) -> dict[str, Any] | None:
        """The result of a ``tools/list`` answer with each tool the SDK cannot take left out
        and named in ``_meta`` (see :data:`SCREENED`); None when its envelope itself is wrong
        (not a list of tools, a bad cursor): the SDK reports that."""
        tools = result.get("tools")
        meta = result.get("_meta", {})
        if not isinstance(tools, list) or not isinstance(meta, dict):
            return None
        version = self.version() or "2025-11-25"  # the SDK's own default before a handshake
        envelope = {key: value for key, value in result.items() if key != "tools"}
        if _validation_problem({**envelope, "tools": []}, version) is not None:
            return None
        kept: list[Any] = []
        refused: list[str] = []
        # past max_tools nothing is read (the connection takes no more): bounded work per page
        for index, entry in enumerate(tools[: self.limits.max_tools]):
            try:
                self._check(entry, envelope, version)
            except _Problem as problem:
                refused.append(f"{_label(entry, index, self.server)}: {problem}")
                continue
            kept.append(entry)
        names = [entry["name"] for entry in kept]
        unread = len(tools) > self.limits.max_tools
        screened = {"refused": refused, "kept": names, "unread": unread}
        return {**result, "tools": kept, "_meta": {**meta, SCREENED: screened}}

    def _check(self, entry: Any, envelope: dict[str, Any], version: str) -> None:
        if not isinstance(entry, dict):
            raise _Problem(f"it is listed as {type(entry).__name__}, not as an object")
        limit = self.limits.max_schema_depth
        for key, value in entry.items():
            depth, marker = _depth(value, limit)
            if marker == _NOT_JSON:
                raise _Problem(
                    f"its {_field(key)} holds NaN or Infinity, which JSON does not allow"
                )
            if depth > limit or marker == _CUT:
                raise _Problem(
                    f"its {_field(key)} nests arrays or objects deeper than {limit} levels "
                    "(MCPLimits.max_schema_depth)"
                )
        problem = _validation_problem({**envelope, "tools": [entry]}, version)
        if problem is not None:
            raise _Problem(f"it is not a valid MCP tool: {problem}")
        header = _x_mcp_header_problem(entry, version)
        if header is not None:
            raise _Problem(
                f"its x-mcp-header annotation is invalid ({header}); on a {version} connection "
                "the MCP SDK cannot call such a tool"
            )


def _label(entry: Any, index: int, server: str) -> str:
    """How a refusal names the tool: as :func:`~._convert.make_tool` does, when it has a name."""
    name = entry.get("name") if isinstance(entry, dict) else None
    if isinstance(name, str) and name:
        shown = name if len(name) <= 80 else name[:77] + "..."
        return f"tool {shown!r} of MCP server {server!r}"
    return f"the {_ordinal(index + 1)} tool MCP server {server!r} listed (it has no usable name)"


def _ordinal(number: int) -> str:
    if 10 <= number % 100 <= 20:
        return f"{number}th"
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def _field(key: str) -> str:
    names = {"inputSchema": "input schema", "outputSchema": "output schema"}
    return names.get(key, repr(key[:40]))


def _depth(value: Any, limit: int) -> tuple[int, str | None]:
    """How deeply arrays and objects nest in ``value`` (1 for a flat one), stopping past
    ``limit``; and the first marker string found (see :func:`load_answer`)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if item in (_CUT, _NOT_JSON):
                return deepest, item
            continue
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest, None
        stack.extend((child, depth) for child in children)
    return deepest, None


def _validation_problem(result: dict[str, Any], version: str) -> str | None:
    """What the SDK's models (the negotiated version's, then its own) find wrong in a
    ``tools/list`` result, in a sentence; None when they take it."""
    import mcp_types
    from mcp_types import methods
    from pydantic import ValidationError

    try:
        methods.validate_server_result("tools/list", version, result)
    except ValidationError as exc:
        return describe_validation_error(exc, skip=("tools", 0))
    except (KeyError, ValueError):  # a version the SDK has no model for: it skips this too
        pass
    try:
        mcp_types.ListToolsResult.model_validate(result, by_name=False)
    except ValidationError as exc:
        return describe_validation_error(exc, skip=("tools", 0))
    return None


def _x_mcp_header_problem(entry: dict[str, Any], version: str) -> str | None:
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    if version not in MODERN_PROTOCOL_VERSIONS:
        return None
    try:
        from mcp.shared.inbound import find_invalid_x_mcp_header
    except ImportError:  # pragma: no cover - an SDK without the rule drops nothing for it
        return None
    return find_invalid_x_mcp_header(entry.get("inputSchema"))


def describe_validation_error(exc: Exception, skip: tuple[str | int, ...] = ()) -> str:
    """A pydantic ``ValidationError`` in one sentence: where (leaving out the ``skip``
    prefix of its location), what, and at how many more places something is wrong.

    A value that fits no member of a union (an MCP content block of an unknown type) gives
    pydantic one error per member and field; they are told as one: "it matches none of …".
    """
    errors_of = getattr(exc, "errors", None)
    try:
        errors = errors_of(include_url=False) if callable(errors_of) else []
    except Exception:  # not pydantic's: say what it is
        errors = []
    if not errors:
        return f"{type(exc).__name__}: {str(exc)[:300]}"
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for error in errors:
        location = tuple(error.get("loc", ()))
        if location[: len(skip)] == skip:
            location = location[len(skip) :]
        cut = next((i for i, part in enumerate(location) if not _is_place(part)), len(location))
        groups.setdefault(location[:cut], []).append({**error, "loc": location[cut:]})
    place, group = next(iter(groups.items()))
    members = list(dict.fromkeys(str(e["loc"][0]) for e in group if e["loc"]))
    if len(members) > 1:
        kinds = [e.get("input") for e in group if e["loc"][1:] == ("type",)]
        given = f" (its 'type' is {_short_repr(kinds[0])})" if kinds else ""
        what = f"it matches none of {', '.join(members)}{given}"
    else:
        first = group[0]
        message = str(first.get("msg", "invalid"))
        value = first.get("input")
        shown = "" if isinstance(value, (dict, list)) else f" (it is {_short_repr(value)})"
        what = f"{message[:1].lower()}{message[1:]}{shown}"
    where = "/".join(str(part) for part in place)
    more = len(groups) - 1
    tail = f"; and {more} more problem{'s' if more != 1 else ''}" if more else ""
    return f"{f'at {where!r}: ' if where else ''}{what}{tail}"


def _is_place(part: Any) -> bool:
    if isinstance(part, int):
        return True
    return isinstance(part, str) and "[" not in part and (part[:1].islower() or part[:1] == "_")


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
