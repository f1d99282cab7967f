"""What a batch runs: one prompt per input, from prompt strings or a template filled from rows.

Everything is checked before the first run, so a template that names a missing column fails at
once (naming the columns there are) instead of 10,000 times. A row whose field is empty (None or
NaN) is not run: it becomes a failed row saying which column was empty, and the others go on.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import BatchInputError

__all__ = ["Item", "Template", "label_key", "prepare", "prompt_digest"]

#: Inputs one batch accepts unless told otherwise (a list of prompts is held in memory).
MAX_INPUTS = 100_000
#: Characters one filled-in prompt may have; a longer one is a failed row, never sent.
MAX_PROMPT_CHARS = 200_000


@dataclass(frozen=True)
class Item:
    """One input: where it is (position, index label), and the prompt it becomes.

    ``problem`` is set (and ``prompt`` may be partial) when the input cannot be run.
    """

    position: int
    label: Any
    key: str
    prompt: str
    problem: str | None = None

    @property
    def digest(self) -> str:
        return prompt_digest(self.prompt)


def prompt_digest(prompt: str) -> str:
    """A short fingerprint of a prompt: a resumed row counts as done only for the same prompt."""
    return hashlib.sha256(prompt.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def label_key(label: Any) -> str:
    """An index label as stable text (JSON when it is plain data), for matching rows on resume."""
    item = getattr(label, "item", None)
    if callable(item) and type(label).__module__ == "numpy":
        label = item()
    if isinstance(label, tuple):
        label = [label_key(part) for part in label]
    if label is None or isinstance(label, (bool, int, str, list)):
        return json.dumps(label, ensure_ascii=False)
    if isinstance(label, float) and math.isfinite(label):
        return json.dumps(label)
    return repr(label)


class Template:
    """A prompt template such as ``"Grade {answer} against {key}"``: fields name columns.

    Each field is a column's whole name (``{0}`` names column 0, ``{q.1}`` the column named
    ``q.1``; nothing is read as an attribute or an index), with an optional conversion and
    format spec (``{score:.2f}``); ``{{`` and ``}}`` are literal braces.
    """

    def __init__(self, text: str) -> None:
        if not isinstance(text, str):
            raise BatchInputError(f"a template is a string, not {type(text).__name__}")
        self.text = text
        self._formatter = string.Formatter()
        try:
            parsed = list(self._formatter.parse(text))
        except ValueError as exc:
            raise BatchInputError(f"the template {text!r} is malformed: {exc}") from None
        self._parts: list[tuple[str, str | None, str, str | None]] = []
        fields: list[str] = []
        for literal, name, spec, conversion in parsed:
            if name is not None:
                if name == "":
                    raise BatchInputError(
                        f"the template {text!r} has an empty field {{}}: name a column, e.g. "
                        "{answer}"
                    )
                # A field is a column's whole name, read as it is: ``{0}`` names column 0 (a
                # CSV read without a header), ``{q.1}`` the column pandas named so. Nothing is
                # looked up as an attribute or an index, so check() decides what exists.
                if spec and "{" in spec:
                    raise BatchInputError(f"the template field {{{name}}} has a nested field")
                if name not in fields:
                    fields.append(name)
            self._parts.append((literal, name, spec or "", conversion))
        self.fields = tuple(fields)

    def check(self, columns: Sequence[str], what: str) -> None:
        """Fail now, naming the columns there are, if a field names none of them."""
        if not self.fields:
            raise BatchInputError(
                f"the template {self.text!r} names no column, so every run would get the same "
                f"prompt: put a column of the {what} in braces, e.g. {{{columns[0]}}}"
                if columns
                else f"the template {self.text!r} names no column"
            )
        missing = [f for f in self.fields if f not in columns]
        if missing:
            hints = []
            for name in missing:
                base = name.split(".")[0].split("[")[0]
                close = difflib.get_close_matches(name, columns, n=1)
                if base != name and base in columns:
                    hints.append(
                        f"{{{name}}}: a field names a whole column (no attributes or indexing)"
                    )
                elif close:
                    hints.append(f"{{{name}}}: did you mean {{{close[0]}}}?")
            shown = ", ".join(columns[:20]) + (" …" if len(columns) > 20 else "")
            raise BatchInputError(
                f"the template names {_plural(len(missing), 'column')} the {what} does not "
                f"have: {', '.join(missing)}; its columns: {shown or 'none'}"
                + (f" ({'; '.join(hints)})" if hints else "")
            )

    def fill(self, values: Mapping[str, Any]) -> tuple[str, str | None]:
        """The prompt for one row, and the problem when a field is empty or will not format."""
        out: list[str] = []
        for literal, name, spec, conversion in self._parts:
            out.append(literal)
            if name is None:
                continue
            value = values[name]
            if _empty(value):
                return "".join(out), f"column {name!r} is empty in this row"
            try:
                if conversion:
                    value = self._formatter.convert_field(value, conversion)
                out.append(format(value, spec))
            except (ValueError, TypeError) as exc:
                return "".join(out), f"column {name!r} does not format as {{{name}:{spec}}}: {exc}"
        return "".join(out), None


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _empty(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    try:  # pandas' own missing values (NA, NaT) without importing pandas here
        return type(value).__name__ in ("NAType", "NaTType")
    except Exception:  # pragma: no cover - a strange object: it is a value
        return False


def _table_kind(inputs: Any) -> str | None:
    module = type(inputs).__module__
    if module.startswith("pandas"):
        name = type(inputs).__name__
        if name in ("DataFrame", "Series"):
            return name
    return None


def prepare(
    inputs: Any,
    template: str | None,
    *,
    max_inputs: int = MAX_INPUTS,
    max_prompt_chars: int = MAX_PROMPT_CHARS,
) -> tuple[list[Item], Any]:
    """The items to run and the index the results table keeps (None: positions 0..n-1).

    ``inputs``: a pandas DataFrame (with a template), a pandas Series or a list of prompt
    strings (a template may use ``{value}``), or a list of mappings (with a template).
    """
    if isinstance(inputs, (str, bytes)):
        raise BatchInputError(
            "inputs must be several prompts (a list, a Series) or a table, not one string: "
            "for one prompt use agent.run"
        )
    kind = _table_kind(inputs)
    tmpl = Template(template) if template is not None else None
    if kind == "Series":
        if tmpl is None:  # the values are the prompts, whatever the Series is named
            inputs, tmpl = inputs.to_frame(name="value"), Template("{value}")
        else:
            inputs = inputs.to_frame(name=inputs.name if inputs.name is not None else "value")
        kind = "DataFrame"
    if kind == "DataFrame":
        if len(inputs) > max_inputs:
            raise BatchInputError(_too_many(len(inputs), max_inputs))
        columns = [str(c) for c in inputs.columns]
        if tmpl is None:
            raise BatchInputError(
                "a table needs a template saying how a row becomes a prompt, e.g. "
                + (f"'Grade {{{columns[0]}}}'" if columns else "'Grade {answer}'")
            )
        tmpl.check(columns, "table")
        if len(set(columns)) != len(columns):
            dupes = sorted({c for c in columns if columns.count(c) > 1})
            raise BatchInputError(f"the table has columns of the same name: {', '.join(dupes)}")
        by_name = {str(c): c for c in inputs.columns}
        wanted = [by_name[f] for f in tmpl.fields]
        rows = zip(*(inputs[c].tolist() for c in wanted), strict=True) if wanted else iter(())
        labels = list(inputs.index)
        items = [
            _item(position, label, dict(zip(tmpl.fields, values, strict=True)), tmpl)
            for position, (label, values) in enumerate(zip(labels, rows, strict=True))
        ]
        return _bounded(items, max_prompt_chars), inputs.index
    values = _materialize(inputs, max_inputs)
    items = []
    for position, value in enumerate(values):
        if isinstance(value, Mapping):
            if tmpl is None:
                raise BatchInputError(
                    f"input {position} is a mapping: give a template saying how it becomes a "
                    "prompt, e.g. 'Grade {answer}'"
                )
            columns = [str(k) for k in value]
            tmpl.check(columns, f"mapping at input {position}")
            items.append(_item(position, position, {str(k): v for k, v in value.items()}, tmpl))
        elif isinstance(value, str):
            if tmpl is None:
                items.append(Item(position, position, label_key(position), value))
            else:
                tmpl.check(["value"], "list of strings (use {value})")
                items.append(_item(position, position, {"value": value}, tmpl))
        else:
            raise BatchInputError(
                f"input {position} is a {type(value).__name__}: each input is a prompt string "
                "or a mapping (or pass a pandas DataFrame with a template)"
            )
    return _bounded(items, max_prompt_chars), None


def _item(position: int, label: Any, values: Mapping[str, Any], tmpl: Template) -> Item:
    prompt, problem = tmpl.fill(values)
    return Item(position, label, label_key(label), prompt, problem)


def _bounded(items: list[Item], max_chars: int) -> list[Item]:
    out = []
    for item in items:
        if item.problem is None and len(item.prompt) > max_chars:
            problem = f"the prompt has {len(item.prompt):,} characters (at most {max_chars:,})"
            item = Item(item.position, item.label, item.key, item.prompt[:max_chars], problem)
        out.append(item)
    return out


def _too_many(count: int, limit: int) -> str:
    return f"{count:,} inputs is more than max_inputs={limit:,}: split the job or raise the limit"


def _materialize(inputs: Any, limit: int) -> list[Any]:
    if not isinstance(inputs, Iterable):
        raise BatchInputError(
            f"inputs must be a list of prompts or a table, not {type(inputs).__name__}"
        )
    values: list[Any] = []
    for value in inputs:
        values.append(value)
        if len(values) > limit:
            raise BatchInputError(_too_many(len(values), limit) + " (or more)")
    return values
