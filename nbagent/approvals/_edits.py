"""Arguments that did not come from the model (a person's edit, a before-tool hook's rewrite),
checked exactly like the model's before anything runs with them, and what the model reads
about the change.

An edit passes the same gate as a model's call: a JSON object, within ``Limits`` (size and
depth, checked on its canonical JSON text), and valid against the tool's compiled schema. The
checked value is a fresh parse of that text, so nothing the editor still holds can change what
runs. An edit never names a tool: it can change only the arguments of the call it belongs to.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..content import TextPart, ToolResult
from ..errors import ArgumentsError
from ..limits import Limits
from ..schema._strict_json import parse_arguments

if TYPE_CHECKING:
    from ..schema import CompiledSchema

__all__ = ["MISSING", "arguments_note", "canonical", "checked_arguments", "json_diff", "with_note"]

_DEFAULT = Limits()


def canonical(value: Any) -> str:
    """``value`` as JSON text (keys in their order); raises ArgumentsError if it is not JSON."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ArgumentsError(f"the arguments are not JSON: {exc}") from None


def checked_arguments(
    value: Any,
    name: str,
    schema: CompiledSchema | None = None,
    limits: Limits | None = None,
) -> dict[str, Any]:
    """A fresh copy of ``value`` if it may run as the arguments of tool ``name``.

    Raises :class:`ArgumentsError` saying why not: not a JSON object, too large or too deep
    (``limits``), or against ``schema``.
    """
    if not isinstance(value, dict):
        kind = "an array" if isinstance(value, list) else type(value).__name__
        raise ArgumentsError(f"the arguments of {name!r} must be a JSON object, not {kind}")
    bounds = limits or _DEFAULT
    text = canonical(value)
    parsed = parse_arguments(
        text, name=name, max_bytes=bounds.max_argument_bytes, max_depth=bounds.max_argument_depth
    )
    assert isinstance(parsed, dict)
    if schema is not None:
        schema.validate(parsed)
    return parsed


def json_diff(before: Any, after: Any, limit: int = 50) -> list[tuple[str, Any, Any]]:
    """What changed, as ``(JSON pointer, old, new)``; a missing side is :data:`MISSING`.

    Objects are compared key by key and arrays index by index; at most ``limit`` changes.
    """
    changes: list[tuple[str, Any, Any]] = []

    def walk(a: Any, b: Any, pointer: str, depth: int) -> None:
        if len(changes) >= limit:
            return
        if isinstance(a, dict) and isinstance(b, dict) and depth < 32:
            for key in list(a) + [k for k in b if k not in a]:
                where = f"{pointer}/{str(key).replace('~', '~0').replace('/', '~1')}"
                walk(a.get(key, MISSING), b.get(key, MISSING), where, depth + 1)
            return
        if isinstance(a, list) and isinstance(b, list) and depth < 32:
            for index in range(max(len(a), len(b))):
                old = a[index] if index < len(a) else MISSING
                new = b[index] if index < len(b) else MISSING
                walk(old, new, f"{pointer}/{index}", depth + 1)
            return
        if not _same(a, b):
            changes.append((pointer or "/", a, b))

    walk(before, after, "", 0)
    return changes


class _Missing:
    def __repr__(self) -> str:
        return "(absent)"


#: Stands for a value that is not there (a key added or removed by an edit).
MISSING: Any = _Missing()


def _same(a: Any, b: Any) -> bool:
    if a is MISSING or b is MISSING:
        return a is b
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return bool(a == b)
    return type(a) is type(b) and bool(a == b)


def arguments_note(changed_by: list[str], arguments: Any, limits: Limits | None = None) -> str:
    """What the model reads first in the result of a call whose arguments were changed.

    Credential-shaped values (a token a hook added, say) are shown as ``***``: the model needs
    to know what changed, not the secret.
    """
    from ..redact import redact_secrets

    bounds = limits or _DEFAULT
    who = " and then ".join(changed_by)
    text = redact_secrets(canonical(arguments))
    room = max(200, bounds.max_result_chars // 4)
    if len(text) > room:
        text = f"{text[:room]}… ({len(text) - room:,} more characters)"
    return (
        f"[Note: the arguments of this call were changed before it ran ({who}). It ran with "
        f"these arguments, not the ones you sent: {text}]"
    )


def with_note(result: ToolResult, note: str) -> ToolResult:
    """``result`` with ``note`` as its first text part."""
    return ToolResult(
        (TextPart(note), *result.content), result.is_error, result.terminate, result.value
    )
