"""What the offline stand-in does with the notebook tools: read, fix a misspelled name, explain.

It is not an LLM and says so. Given the notebook tools (``%agent --notebook``), it reads the
notebook first; then, asked to **fix** an error, it fixes the one kind of error it can fix
without understanding anything: a name Python itself suggests a correction for (``NameError:
name 'totl' is not defined. Did you mean: 'total'?``), by proposing the cell with that name
replaced; asked to **explain**, it describes the cell above the one it was asked from (or the
one it names by id) from its syntax: what it imports, defines and calls; asked to **add** a
cell with quoted text, it proposes that cell below the one above; with **run** in the prompt it
runs the cell it fixed. Every proposal goes through the card like a real model's, so a lesson
shows the whole review (accept, reject, edit, undo) with no key and no network.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..messages import AssistantMessage, ToolMessage
from .scripted import Call, Text, Turn

__all__ = ["notebook_turn"]

LABEL = "[offline model]"
NOTEBOOK_TOOLS = ("read_notebook", "read_cell", "edit_cell", "insert_cell", "run_cell")
_HEADER = re.compile(r"^\[cell (\d+)\] id=([A-Za-z0-9_-]+) · (code|markdown|raw)", re.M)
_ERROR = re.compile(r"The newest error is in cell (\d+) \(id ([A-Za-z0-9_-]+), \w+\): (.*)")
_PERSON = re.compile(r"The person is in cell (\d+) \(id ([A-Za-z0-9_-]+)")
_SUGGESTION = re.compile(r"name '([A-Za-z_]\w*)' is not defined\. Did you mean: '([A-Za-z_]\w*)'")
_QUOTED = re.compile(r"[\"“]([^\"”]+)[\"”]|'([^']+)'")


@dataclass(frozen=True)
class _Cell:
    number: int
    id: str
    type: str
    source: str | None  # None: not shown whole


def _cells(text: str) -> list[_Cell]:
    found = []
    heads = list(_HEADER.finditer(text))
    for n, head in enumerate(heads):
        end = heads[n + 1].start() if n + 1 < len(heads) else len(text)
        body = text[head.end() : end]
        source: str | None = None
        fence = re.search(r"\n(`{3,})[a-z]*\n(.*?)\n\1(?:\n|$)", body, re.S)
        if fence is not None and "(cut:" not in body and "hid a key" not in body:
            source = fence.group(2)
        elif "(empty)" in body.split("\n", 2)[1:2] or body.startswith("\n(empty)"):
            source = ""
        found.append(_Cell(int(head.group(1)), head.group(2), head.group(3), source))
    return found


def _wants(prompt: str, *words: str) -> bool:
    lowered = prompt.lower()
    return any(re.search(rf"\b{w}", lowered) for w in words)


def _last_results(since_user: Sequence[Any]) -> list[tuple[str, str, bool, dict[str, Any]]]:
    """(tool, text, is_error, arguments) of the newest batch of results."""
    calls: dict[str, Any] = {}
    for message in since_user:
        if isinstance(message, AssistantMessage):
            calls.update({c.id: c for c in message.tool_calls})
    tools = [m for m in since_user if isinstance(m, ToolMessage)]
    if not tools:
        return []
    out = []
    for result in tools[-1].results:
        call = calls.get(result.call_id)
        try:
            arguments = call.input if call is not None else {}
        except Exception:
            arguments = {}
        out.append(
            (
                result.name,
                result.text,
                result.is_error,
                arguments if isinstance(arguments, dict) else {},
            )
        )
    return out


def _read_text(since_user: Sequence[Any]) -> str:
    """The newest read_notebook result of this request."""
    found = ""
    for message in since_user:
        if isinstance(message, ToolMessage):
            for result in message.results:
                if result.name == "read_notebook" and not result.is_error:
                    found = result.text
    return found


def _say(text: str) -> Turn:
    return Turn(Text(text, chunks=max(1, len(text) // 12)))


def notebook_turn(prompt: str, since_user: Sequence[Any], tools: Sequence[Any]) -> Turn | None:
    """The stand-in's next turn with the notebook tools (None: they are not offered)."""
    names = {t.name for t in tools}
    if "read_notebook" not in names:
        return None
    results = _last_results(since_user)
    if not results:
        intro = f"{LABEL} Reading the notebook first."
        return Turn(Text(intro, chunks=3), Call("read_notebook", {}, chunks=1))
    tool, text, is_error, arguments = results[0]
    if tool == "read_notebook":
        if is_error:
            return _say(f"{LABEL} I could not read the notebook: {text}")
        return _after_reading(prompt, text, names)
    if tool == "edit_cell" and not is_error and "run_cell" in names and _wants(prompt, "run"):
        return Turn(Call("run_cell", {"cell_id": arguments.get("cell_id", "")}, chunks=1))
    first = text.splitlines()[0] if text else "(no text)"
    return _say(f"{LABEL} {tool}: {first}\n(This is the offline stand-in, not an LLM.)")


def _after_reading(prompt: str, text: str, names: set[str]) -> Turn:
    cells = _cells(text)
    person = _PERSON.search(text)
    here = int(person.group(1)) if person else len(cells) + 1
    above = next((c for c in reversed(cells) if c.number < here), None)
    if _wants(prompt, "fix", "repair", "error") and "edit_cell" in names:
        return _fix(text, cells)
    if _wants(prompt, "add", "insert", "new cell") and "insert_cell" in names:
        quoted = _QUOTED.search(prompt)
        if quoted is None:
            return _say(f'{LABEL} Quote the new cell\'s source: add a cell "print(total)".')
        source = quoted.group(1) or quoted.group(2)
        after = {"after_cell_id": above.id} if above is not None else {}
        return Turn(
            Text(f"{LABEL} Proposing the new cell.", chunks=2),
            Call("insert_cell", {"source": source, **after}, chunks=2),
        )
    named = next((c for c in cells if c.id in prompt), None)
    target = named or above
    if target is None:
        return _say(f"{LABEL} The notebook has no cell above this one to explain.")
    return _say(_explain(target))


def _fix(text: str, cells: list[_Cell]) -> Turn:
    error = _ERROR.search(text)
    if error is None:
        return _say(f"{LABEL} The notebook shows no error to fix.")
    number, cell_id, said = int(error.group(1)), error.group(2), error.group(3)
    cell = next((c for c in cells if c.id == cell_id), None)
    suggestion = _SUGGESTION.search(said) or _SUGGESTION.search(text)
    if cell is None or cell.source is None or suggestion is None:
        return _say(
            f"{LABEL} Cell {number} fails with: {said}\nI am the offline stand-in, not an LLM: "
            "the only error I can fix is a misspelled name that Python suggests a correction "
            "for. Set a model (-m …) for anything else."
        )
    wrong, right = suggestion.group(1), suggestion.group(2)
    fixed = re.sub(rf"\b{re.escape(wrong)}\b", right, cell.source)
    intro = (
        f"{LABEL} Cell {number} uses {wrong!r}, which Python suggests is {right!r}: "
        "proposing the fix."
    )
    return Turn(
        Text(intro, chunks=4), Call("edit_cell", {"cell_id": cell_id, "source": fixed}, chunks=3)
    )


def _explain(cell: _Cell) -> str:
    head = f"{LABEL} Cell {cell.number} (id {cell.id}) is a {cell.type} cell"
    source = cell.source
    if source is None:
        return f"{head}; I saw only part of it (read_cell shows it whole)."
    lines = source.count("\n") + 1 if source else 0
    if cell.type != "code":
        headings = [
            line.lstrip("# ").strip() for line in source.splitlines() if line.startswith("#")
        ]
        said = f" with the headings {', '.join(headings[:5])}" if headings else ""
        return (
            f"{head} of {lines} line(s){said}. (The offline stand-in describes, it does not "
            "understand.)"
        )
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return f"{head} of {lines} line(s) that is not valid Python ({exc.msg}, line {exc.lineno})."
    imports = sorted(
        {
            a.name
            for n in ast.walk(tree)
            if isinstance(n, (ast.Import, ast.ImportFrom))
            for a in n.names
        }
    )
    defined = sorted(
        {
            t.id
            for n in ast.walk(tree)
            if isinstance(n, ast.Assign)
            for t in n.targets
            if isinstance(t, ast.Name)
        }
    )
    functions = sorted(
        {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    )
    calls = sorted(
        {
            n.func.id
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
        }
    )
    parts = [f"{head} of {lines} line(s)."]
    for label, items in (
        ("It imports", imports),
        ("It sets", defined),
        ("It defines", functions),
        ("It calls", calls),
    ):
        if items:
            parts.append(f"{label} {', '.join(items[:8])}.")
    parts.append("(The offline stand-in reads the syntax; it does not understand the code.)")
    return " ".join(parts)
