"""Make an ``%agent`` cell end when its run ends: the cell awaits the run instead of starting it.

A magic is a plain function: it cannot make its cell wait without blocking the kernel, and a
blocked kernel cannot receive the clicks (Approve, Deny, Stop) a run may wait for. An *awaiting*
cell can (ipykernel ≥ 7.4 dispatches comm messages while a cell awaits). So two IPython input
transformers rewrite the magic before it runs:

* ``%agent …`` and ``x = %agent …`` at the top level of a cell become
  ``await …agent_cell("…")`` (``x`` gets the run's :class:`~nbagent.events.RunResult`);
* a ``%%agent`` cell becomes ``await …agent_cell("first line", "body")``.

The cell then runs as an async cell on the kernel's event loop: it ends when the run ends (so Run
All goes cell by cell and ``-o NAME`` is set before the next cell), clicks still arrive, and a
kernel interrupt cancels the run.

Where a cell cannot await (``x = %agent …`` inside a function, a loop or an ``if``; a shell with
autoawait off; code a running cell transforms, such as the body of ``%%time``), an assignment
becomes ``x = …agent_value("…", locals())``: the magic's plain form, which returns the run's
result (IPython's own rewrite would give ``x`` the magic's ``None``), with the variables where
it stands for ``{name}`` in the prompt.

What the magic would have done otherwise is decided in :mod:`.magics`; this module only finds
the syntax. Recognising it works on tokens, as IPython's own magic transformers do, so
``%agent`` inside a string or a comment is left alone, and a prompt that ends with ``?`` is a
prompt, not a help request (``%agent?`` alone still shows the help).
"""

from __future__ import annotations

import sys
import tokenize
from typing import Any

__all__ = [
    "install",
    "installed",
    "line_transformer",
    "transform_cell_magic",
    "uninstall",
]

#: The calls the transformers write; resolved in the user's namespace without adding names to it.
_CALL = '__import__("nbagent.notebook.magics").notebook.magics.agent_cell'
_VALUE = '__import__("nbagent.notebook.magics").notebook.magics.agent_value'


def _can_await() -> bool:
    """Top-level await works in this shell: autoawait on, with IPython's asyncio runner."""
    try:
        from IPython import get_ipython
        from IPython.core.async_helpers import _asyncio_runner
    except ImportError:  # pragma: no cover - IPython is a dependency
        return False
    shell = get_ipython()
    return bool(
        shell is not None
        and getattr(shell, "autoawait", False)
        and getattr(shell, "loop_runner", None) is _asyncio_runner
        and not _inside_a_cell(shell)
    )


def _inside_a_cell(shell: Any) -> bool:
    """The code being transformed is not a cell the kernel is about to run but code that a
    running cell transforms itself: the body of ``%%time``, ``%time``, ``%%capture``, a
    ``run_cell`` from a cell … That code is compiled without top-level await (or run on a
    loop that is already busy), so ``await`` there fails; the magic's plain form works."""
    user_globals = getattr(shell, "user_global_ns", None)
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_globals is user_globals:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _magic_at(line: list[tokenize.TokenInfo], index: int) -> bool:
    """``%agent`` starts at ``line[index]`` (the two tokens touch: ``% agent`` is not it)."""
    if index + 1 >= len(line):
        return False
    percent, name = line[index], line[index + 1]
    return (
        percent.string == "%"
        and name.type == tokenize.NAME
        and name.string == "agent"
        and name.start == (percent.start[0], percent.start[1] + 1)
    )


def _is_help(line: list[tokenize.TokenInfo], index: int) -> bool:
    """``%agent?`` / ``%agent??``: IPython's help, not a prompt."""
    rest = "".join(t.string for t in line[index + 2 :] if t.type not in _ENDS).strip()
    return rest in ("?", "??")


_ENDS = {tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.COMMENT}


def _assign_op(line: list[tokenize.TokenInfo]) -> int | None:
    """Index of the first ``=`` outside brackets, as IPython finds magic assignments."""
    depth = 0
    for index, token in enumerate(line):
        text = token.string
        if token.type == tokenize.OP:
            if text == "=" and depth == 0:
                return index
            if text in "([{":
                depth += 1
            elif text in ")]}" and depth:
                depth -= 1
    return None


def _base() -> type:
    from IPython.core.inputtransformer2 import TokenTransformBase

    return TokenTransformBase


class _Marker:
    """Where an ``%agent`` line was found: its line, the column where ``%`` starts, and whether
    the cell awaits it (else it is an assignment that gets the magic's result)."""

    def __init__(self, line: int, magic_col: int, *, awaited: bool = True) -> None:
        self.line = line
        self.magic_col = magic_col
        self.awaited = awaited


def _find(tokens_by_line: list[list[tokenize.TokenInfo]]) -> _Marker | None:
    can_await = _can_await()
    for tokens in tokens_by_line:
        # a line after an indented block starts with DEDENT tokens: they are not indentation
        line = [t for t in tokens if t.type != tokenize.DEDENT and t.type != tokenize.INDENT]
        if not line:
            continue
        first = line[0]
        top = can_await and first.start[1] == 0  # only the top level of a cell may await
        if top and _magic_at(line, 0):
            if _is_help(line, 0):
                continue
            return _Marker(first.start[0] - 1, 0)
        at = _assign_op(line)
        if at is not None and _magic_at(line, at + 1) and not _is_help(line, at + 1):
            return _Marker(first.start[0] - 1, line[at + 1].start[1], awaited=top)
    return None


def _rewrite(lines: list[str], marker: _Marker) -> list[str]:
    from IPython.core.inputtransformer2 import (
        assemble_continued_line,
        find_end_of_continued_line,
    )

    start = marker.line
    end = find_end_of_continued_line(lines, start)
    magic = assemble_continued_line(lines, (start, marker.magic_col), end)
    argument = magic[len("%agent") :].lstrip(" ")
    target = lines[start][: marker.magic_col]
    if not marker.awaited:
        call = f"{target}{_VALUE}({argument!r}, locals())\n"
    elif target:
        call = f"{target}await {_CALL}({argument!r}, value=True)\n"
    else:
        call = f"await {_CALL}({argument!r})\n"
    return [*lines[:start], call, *lines[end + 1 :]]


def _transformer_class() -> type:
    base = _base()

    class AgentLine(base):  # type: ignore[misc, valid-type]
        """``%agent …`` / ``x = %agent …`` at the top level → an awaited run; ``x = %agent …``
        elsewhere → the magic's result."""

        priority = 1  # before HelpEnd (5): a prompt's trailing "?" is not a help request

        def __init__(self, marker: _Marker) -> None:
            super().__init__((marker.line + 1, 0))
            self.marker = marker

        @classmethod
        def find(cls, tokens_by_line: list[list[tokenize.TokenInfo]]) -> Any:
            marker = _find(tokens_by_line)
            return cls(marker) if marker is not None else None

        def transform(self, lines: list[str]) -> list[str]:
            return _rewrite(lines, self.marker)

    return AgentLine


_line_class: type | None = None


def line_transformer() -> type:
    """The token transformer class (built on first use: IPython loads only with the extension)."""
    global _line_class
    if _line_class is None:
        _line_class = _transformer_class()
    return _line_class


def transform_cell_magic(lines: list[str]) -> list[str]:
    """A ``%%agent`` cell → one awaited call with the first line and the body."""
    if not lines or not lines[0].startswith("%%agent") or not _can_await():
        return lines
    head = lines[0].rstrip("\r\n")
    first = head[len("%%agent") :]
    if first and not first[0].isspace():
        return lines  # %%agents, %%agent?: another magic, or the help
    body = "".join(lines[1:])
    return [f"await {_CALL}({first.strip()!r}, {body!r})\n"]


_installed_in: dict[int, Any] = {}


def installed_in_this_cell(shell: Any) -> bool:
    """The transformers were installed while the current cell ran (``%load_ext`` in the same
    cell as ``%agent``): that cell was transformed before they existed."""
    return bool(_installed_in.get(id(shell), object()) == getattr(shell, "execution_count", None))


def installed(shell: Any) -> bool:
    """The line transformer is registered on ``shell`` (not before ``%load_ext``, nor after
    ``%unload_ext nbagent``)."""
    manager = getattr(shell, "input_transformer_manager", None)
    return _line_class is not None and _line_class in getattr(manager, "token_transformers", ())


def install(shell: Any) -> None:
    """Register both transformers on ``shell`` (idempotent)."""
    _installed_in[id(shell)] = getattr(shell, "execution_count", None)
    cls = line_transformer()
    manager = shell.input_transformer_manager
    if cls not in manager.token_transformers:
        manager.token_transformers.insert(0, cls)
    if transform_cell_magic not in shell.input_transformers_cleanup:
        shell.input_transformers_cleanup.append(transform_cell_magic)


def uninstall(shell: Any) -> None:
    """Remove both transformers from ``shell``."""
    manager = shell.input_transformer_manager
    if _line_class is not None and _line_class in manager.token_transformers:
        manager.token_transformers.remove(_line_class)
    if transform_cell_magic in shell.input_transformers_cleanup:
        shell.input_transformers_cleanup.remove(transform_cell_magic)
