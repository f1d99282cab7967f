"""What a batch runs: one prompt per input, from prompt strings or a template filled from rows.

Everything is checked before the first run, so a template that names a missing column, or whose
format specs would pad a prompt to gigabytes, fails at once (naming the field) instead of 10,000
times. A row that cannot become a prompt (a field that is empty, None or NaN; a value that will
not format, whose ``__format__``/``repr`` raises, or that holds a lone surrogate) is not run: it
becomes a failed row saying why, and the others go on.
"""

from __future__ import annotations

import decimal
import difflib
import hashlib
import json
import math
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import BatchInputError

__all__ = [
    "MAX_FORMAT_CHARS",
    "MAX_INPUTS",
    "MAX_PROMPT_CHARS",
    "Item",
    "Template",
    "label_key",
    "prepare",
    "prompt_digest",
]

#: Inputs one batch accepts unless told otherwise (a list of prompts is held in memory).
MAX_INPUTS = 100_000
#: Characters one filled-in prompt may have; a longer one is a failed row, never sent.
MAX_PROMPT_CHARS = 200_000
#: Characters a template's format specs may ask for, all fields together: the sum of every
#: width and precision (``{name:<20}`` asks for 20, ``{score:8.2f}`` for 10). A format spec is
#: applied before any prompt limit, so ``{answer:>1000000000}`` would allocate gigabytes per row.
MAX_FORMAT_CHARS = 1_000

_CONVERSIONS = ("r", "s", "a")
#: Python's standard format spec: [[fill]align][sign][z][#][0][width][grouping][.precision][type]
_STANDARD_SPEC = re.compile(
    r"(?:.?[<>=^])?[-+ ]?z?#?0?(?P<width>\d*)[,_]?(?:\.(?P<precision>\d*))?[bcdeEfFgGnosxX%]?",
    re.DOTALL,
)
_SURROGATE = re.compile("[\ud800-\udfff]")


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

    What a field may be: a column's whole name (``{0}`` names column 0, ``{q.1}`` the column
    named ``q.1``; nothing is read as an attribute or an index), then optionally a conversion
    (``!r``, ``!s``, ``!a``) and a format spec of the value's type (``{score:.2f}``,
    ``{name:<20}``, ``{day:%Y-%m-%d}``); ``{{`` and ``}}`` are literal braces. A format spec
    holds no field of its own (``{answer:{width}}``), and the widths and precisions of all
    fields together ask for at most :data:`MAX_FORMAT_CHARS` characters. Anything else is
    refused here, before any run, naming the field.
    """

    def __init__(self, text: str) -> None:
        if not isinstance(text, str):
            raise BatchInputError(f"a template is a string, not {type(text).__name__}")
        self.text = text
        self._formatter = string.Formatter()
        try:
            parsed = list(self._formatter.parse(text))
        except ValueError as exc:
            raise BatchInputError(f"the template {_shown(text)} is malformed: {exc}") from None
        self._parts: list[tuple[str, str | None, str, str | None]] = []
        fields: list[str] = []
        asked: list[tuple[int, str]] = []
        for literal, name, spec, conversion in parsed:
            if _SURROGATE.search(literal):
                raise BatchInputError(
                    f"the template {_shown(text)} holds a lone surrogate, which no UTF-8 "
                    "request can carry"
                )
            if name is not None:
                if name == "":
                    raise BatchInputError(
                        f"the template {_shown(text)} has an empty field {{}}: name a column, "
                        "e.g. {answer}"
                    )
                # A field is a column's whole name, read as it is: ``{0}`` names column 0 (a
                # CSV read without a header), ``{q.1}`` the column pandas named so. Nothing is
                # looked up as an attribute or an index, so check() decides what exists.
                shown = _field_text(name, spec, conversion)
                if conversion is not None and conversion not in _CONVERSIONS:
                    raise BatchInputError(
                        f"the template field {shown} has the conversion !{conversion}: a "
                        "field takes !r, !s or !a, or none"
                    )
                if spec and ("{" in spec or "}" in spec):
                    raise BatchInputError(
                        f"the template field {shown} has a field inside its format spec, which "
                        "templates do not support: write the spec out (e.g. {answer:>20})"
                    )
                asked.append((_asked_chars(spec or ""), shown))
                if name not in fields:
                    fields.append(name)
            self._parts.append((literal, name, spec or "", conversion))
        total = sum(chars for chars, _ in asked)
        if total > MAX_FORMAT_CHARS:
            chars, shown = max(asked, key=lambda pair: pair[0])  # the first of the largest
            each = "" if chars == total else f" ({_count(total)} with the other fields)"
            raise BatchInputError(
                f"the template field {shown} asks for {_count(chars)} characters{each}: the "
                f"widths and precisions of a template's format specs may ask for at most "
                f"{MAX_FORMAT_CHARS:,} together (a spec is applied before any prompt limit). "
                "To shorten a long value, cut the column first (df['essay'].str[:2000])"
            )
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

    def fill(
        self, values: Mapping[str, Any], max_chars: int = MAX_PROMPT_CHARS
    ) -> tuple[str, str | None]:
        """The prompt for one row, and the problem when it cannot be made: a field that is
        empty, a value that will not format (whatever its ``__format__`` or ``repr`` raises)
        or holds a lone surrogate, or a prompt past ``max_chars``. A problem is that row's,
        never the batch's: nothing here raises for a value."""
        out: list[str] = []
        size = 0
        for literal, name, spec, conversion in self._parts:
            out.append(literal)
            size += len(literal)
            if name is None:
                continue
            value = values[name]
            try:
                if _empty(value):
                    return "".join(out), f"column {name!r} is empty in this row"
                if conversion:
                    value = self._formatter.convert_field(value, conversion)
                wide = _fixed_point_chars(value, spec)
                if wide > max_chars:  # a tiny Decimal('1E+999999999') is a gigabyte as {x:f}
                    field = _field_text(name, spec, conversion)
                    return "".join(out), (
                        f"column {name!r} would be {_count(wide)} characters as {field} (a "
                        f"prompt has at most {max_chars:,})"
                    )
                piece = format(value, spec)
                if not isinstance(piece, str):  # pragma: no cover - format() checks this
                    raise TypeError(f"__format__ returned {type(piece).__name__}")
            except Exception as exc:  # a user's object may raise anything (MemoryError too)
                field = _field_text(name, spec, conversion)
                return "".join(out), f"column {name!r} does not format as {field}: {_reason(exc)}"
            found = _SURROGATE.search(piece)
            if found is not None:
                return "".join(out), (
                    f"column {name!r} holds a lone surrogate (U+{ord(found.group()):04X}), which "
                    "no UTF-8 request can carry: fix the value (e.g. read the file with "
                    "errors='replace')"
                )
            out.append(piece)
            size += len(piece)
            if size > max_chars:  # stop here: the rest would only make it longer
                return "".join(out)[:max_chars], _too_long(size, max_chars, "more than ")
        return "".join(out), None


def _field_text(name: str, spec: str | None, conversion: str | None) -> str:
    field = name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
    return "{" + (field if len(field) <= 80 else field[:77] + "...") + "}"


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 80 else repr(text[:77]) + "..."


def _asked_chars(spec: str) -> int:
    """Characters a format spec may ask for: its width plus its precision. A spec that is not
    Python's standard one (``%Y-%m-%d`` for a date) counts every number in it, since its type
    may read a number as a size."""
    found = _STANDARD_SPEC.fullmatch(spec)
    numbers = [found["width"], found["precision"]] if found else re.findall(r"\d+", spec)
    # a number of more digits than any size reads as "too many" (int() of 5,000 digits raises)
    return sum(int(n) if len(n) <= 18 else 10**18 for n in numbers if n)


def _fixed_point_chars(value: Any, spec: str) -> int:
    """About how long ``value`` formats under ``spec`` when that is a Decimal in fixed point
    (``f``, ``F``, ``%``): every digit of its integer part is written out, so the length is
    its exponent, which the value's own size does not bound. 0 for everything else (a float
    has at most 309 digits, an int's text is bounded by Python)."""
    if not isinstance(value, decimal.Decimal):
        return 0
    found = _STANDARD_SPEC.fullmatch(spec)
    if found is None or not spec or spec[-1] not in "fF%":
        return 0
    precision = int(found["precision"]) if found["precision"] else 6
    return max(value.adjusted(), 0) + 3 + precision + (2 if spec[-1] == "%" else 0)


def _count(chars: int) -> str:
    return f"{chars:,}" if chars < 10**18 else "more than 10^18"


def _reason(exc: BaseException) -> str:
    """An exception as a line, even when its own ``str`` raises."""
    try:
        text = str(exc)
    except Exception:
        text = ""
    name = type(exc).__name__
    if not text:
        return name
    text = text if len(text) <= 300 else text[:297] + "..."
    return text if text.startswith(name) else f"{name}: {text}"


def _too_long(chars: int, limit: int, more: str = "") -> str:
    return f"the prompt has {more}{chars:,} characters (at most {limit:,})"


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
            _item(
                position, label, dict(zip(tmpl.fields, values, strict=True)), tmpl, max_prompt_chars
            )
            for position, (label, values) in enumerate(zip(labels, rows, strict=True))
        ]
        return _checked(items, max_prompt_chars), inputs.index
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
            values_of = {str(k): v for k, v in value.items()}
            items.append(_item(position, position, values_of, tmpl, max_prompt_chars))
        elif isinstance(value, str):
            if tmpl is None:
                items.append(Item(position, position, label_key(position), value))
            else:
                tmpl.check(["value"], "list of strings (use {value})")
                items.append(_item(position, position, {"value": value}, tmpl, max_prompt_chars))
        else:
            raise BatchInputError(
                f"input {position} is a {type(value).__name__}: each input is a prompt string "
                "or a mapping (or pass a pandas DataFrame with a template)"
            )
    return _checked(items, max_prompt_chars), None


def _item(
    position: int, label: Any, values: Mapping[str, Any], tmpl: Template, max_chars: int
) -> Item:
    key, problem = _key(label, position)
    prompt, unfilled = tmpl.fill(values, max_chars)
    return Item(position, label, key, prompt, problem or unfilled)


def _key(label: Any, position: int) -> tuple[str, str | None]:
    """The label's key, or a stand-in and the problem when the label cannot be read."""
    try:
        return label_key(label), None
    except Exception as exc:  # a label whose repr raises: that row's problem
        return f"<input {position}>", f"its index label cannot be read: {_reason(exc)}"


def _checked(items: list[Item], max_chars: int) -> list[Item]:
    """Prompts past the limit, or holding a lone surrogate, become failed rows (never sent)."""
    out = []
    for item in items:
        problem = None
        if item.problem is None and len(item.prompt) > max_chars:
            problem = _too_long(len(item.prompt), max_chars)
        elif item.problem is None and (found := _SURROGATE.search(item.prompt)) is not None:
            problem = (
                f"the prompt holds a lone surrogate (U+{ord(found.group()):04X}) at character "
                f"{found.start():,}, which no UTF-8 request can carry"
            )
        if problem is not None:
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
