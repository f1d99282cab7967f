"""``%agent --output TYPE``: the type named in the line, looked up in the notebook.

``TYPE`` is a type expression, never code: names, attributes, subscripts and ``|`` only
(``Person``, ``models.Person``, ``list[str]``, ``dict[str, int]`` written without spaces,
``Person|None``), evaluated in the notebook's namespace. A call, a lambda or anything else that
would run code is refused with the reason, and so is a type that cannot be an answer (checked
by the same compiler the run uses), before anything is sent.
"""

from __future__ import annotations

import ast
import builtins
from typing import Any

from IPython.core.error import UsageError

from ...errors import NbagentError

__all__ = ["output_type"]

_ALLOWED = (
    ast.Expression,
    ast.Name,
    ast.Attribute,
    ast.Subscript,
    ast.Tuple,
    ast.List,
    ast.Load,
    ast.BinOp,
    ast.BitOr,
    ast.Constant,
)
_MAX_LENGTH = 500


def output_type(text: str, namespace: dict[str, Any]) -> Any:
    """The type (or JSON Schema) ``text`` names in ``namespace``; UsageError saying why not."""
    if len(text) > _MAX_LENGTH:
        raise UsageError(f"--output takes a type's name, not {len(text):,} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise UsageError(
            f"--output takes a type, such as Person or list[str]; not {text!r}"
        ) from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            raise UsageError(
                f"--output takes a type (names, [...] and |), not an expression with "
                f"{type(node).__name__.lower()}: {text!r}"
            )
    try:
        value = eval(compile(tree, "<--output>", "eval"), {"__builtins__": builtins}, namespace)
    except NameError as exc:
        raise UsageError(f"--output: {exc} in this notebook") from None
    except Exception as exc:
        raise UsageError(f"--output {text}: {type(exc).__name__}: {exc}") from None
    from ...output import output_spec

    try:
        output_spec(value)
    except NbagentError as exc:
        raise UsageError(f"--output {text}: {exc}") from None
    return value
