"""EditForm: a call's arguments as a form built from the tool's JSON Schema, prefilled with what
the model proposed, with a raw-JSON editor for what a form cannot express.

Fields by schema: strings (a text box, or a text area for long or multi-line text), integers and
numbers (typed as text and parsed as JSON, so large integers stay exact), booleans (a check
box), enums (a drop-down), ``null`` alongside one other type (a "null" check box), arrays (one
row per item, add and remove) and nested objects (their fields, indented; an optional property
has an "include" box). Anything else — ``oneOf``/``anyOf`` with several choices, maps, tuples,
extra keys the schema does not list — becomes a JSON text box for that value. The form is
bounded (:data:`MAX_DEPTH`, :data:`MAX_FIELDS`, :data:`MAX_ITEMS`); past a bound the whole
form is one JSON text box. :meth:`EditForm.value` reads the arguments back, or raises
:class:`FormError` naming the field; the caller then checks them against the tool's compiled
schema (the form is a convenience, never the gate).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import ipywidgets as widgets

from ...approvals._edits import MISSING
from ...errors import ArgumentsError
from ...limits import Limits
from ...schema._strict_json import parse_arguments
from ..shown.render import STATUS_COLORS

__all__ = ["MAX_DEPTH", "MAX_FIELDS", "MAX_ITEMS", "EditForm", "FormError"]

#: Nested objects and arrays the form shows as fields; deeper values are JSON text boxes.
MAX_DEPTH = 4
#: Fields one form may hold; a larger form is a single JSON text box.
MAX_FIELDS = 60
#: Items one array may hold in the form (more: a JSON text box for the array).
MAX_ITEMS = 50
#: Strings longer than this (or with a line break) get a text area.
LONG_TEXT = 80


# Layouts are widgets that the run view closes with their owners: one each, never shared.
def _label_layout() -> widgets.Layout:
    return widgets.Layout(width="8em", flex="0 0 auto", overflow="hidden")


def _row_layout() -> widgets.Layout:
    return widgets.Layout(flex_flow="row wrap", align_items="center", width="100%")


def _grow_layout() -> widgets.Layout:
    return widgets.Layout(flex="1 1 10em", min_width="8em", width="auto")


class FormError(ValueError):
    """A field whose text is not a value of its type; ``pointer`` says which."""

    def __init__(self, pointer: str, message: str) -> None:
        super().__init__(f"{pointer or '/'}: {message}")
        self.pointer = pointer


class _TooBig(Exception):
    """The schema or the value needs more than the form's bounds."""


def _parse(text: str) -> Any:
    """Strict JSON within the default limits (the loop checks its own limits again)."""
    limits = Limits()
    return parse_arguments(
        text,
        name="the edit",
        max_bytes=limits.max_argument_bytes,
        max_depth=limits.max_argument_depth,
    )


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


class _Builder:
    """Builds fields, counting them and resolving local ``$ref`` against the root schema."""

    def __init__(self, root: Mapping[str, Any], made: list[widgets.Widget]) -> None:
        self.root = root
        self.count = 0
        self.made = made

    def widget(self, kind: Callable[..., widgets.Widget], **kw: Any) -> Any:
        self.count += 1
        if self.count > MAX_FIELDS:
            raise _TooBig
        made = kind(**kw)
        self.made.append(made)
        return made

    def resolve(self, node: Any) -> Any:
        for _ in range(16):
            ref = node.get("$ref") if isinstance(node, Mapping) else None
            if not isinstance(ref, str):
                return node
            if not ref.startswith("#/"):
                return None
            target: Any = self.root
            for part in ref[2:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                if not isinstance(target, Mapping) or part not in target:
                    return None
                target = target[part]
            node = target
        return None

    def field(self, node: Any, value: Any, pointer: str, depth: int) -> _Field:
        node = self.resolve(node)
        if not isinstance(node, Mapping) or depth > MAX_DEPTH:
            return _Raw(self, value, pointer)
        kinds = _types(node)
        nullable = "null" in kinds and len(kinds) > 1
        if nullable:
            kinds.discard("null")
        if "enum" in node and isinstance(node["enum"], list) and node["enum"]:
            return _Enum(self, list(node["enum"]), value, pointer)
        if "const" in node:
            return _Enum(self, [node["const"]], value, pointer)
        if len(kinds) != 1 or set(node) & {"oneOf", "anyOf", "allOf", "not", "if"}:
            branches = [
                b for b in node.get("anyOf", ()) if _types(self.resolve(b) or {}) != {"null"}
            ]
            if not kinds and len(branches) == 1 and len(node.get("anyOf", ())) == 2:
                inner = self.field(branches[0], None if value is None else value, pointer, depth)
                return _Nullable(self, inner, value is None)
            return _Raw(self, value, pointer)
        (kind,) = kinds
        made: _Field
        try:
            if kind == "object":
                made = _Object(
                    self, node, None if value is None and nullable else value, pointer, depth
                )
            elif kind == "array":
                made = _Array(
                    self, node, None if value is None and nullable else value, pointer, depth
                )
            else:
                made = self._scalar(kind, value, pointer)
        except _Unlisted:
            return _Raw(self, value, pointer)
        if nullable:
            return _Nullable(self, made, value is None)
        return made

    def _scalar(self, kind: str, value: Any, pointer: str) -> _Field:
        made: _Field
        if kind == "boolean":
            made = _Bool(self, value, pointer)
        elif kind in ("string", "integer", "number"):
            made = _Text(self, kind, value, pointer)
        else:
            made = _Raw(self, value, pointer)
        return made


def _types(node: Mapping[str, Any]) -> set[str]:
    kind = node.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {str(k) for k in kind}
    if "properties" in node:
        return {"object"}
    if "items" in node:
        return {"array"}
    return set()


class _Field:
    widget: widgets.Widget

    def value(self) -> Any:
        raise NotImplementedError


class _Text(_Field):
    def __init__(self, build: _Builder, kind: str, value: Any, pointer: str) -> None:
        self.kind, self.pointer = kind, pointer
        if kind == "string":
            text = value if isinstance(value, str) else ""
            long = len(text) > LONG_TEXT or "\n" in text
            self.widget = build.widget(
                widgets.Textarea if long else widgets.Text, value=text, layout=_grow_layout()
            )
            if long:
                self.widget.rows = min(8, text.count("\n") + 2)
        else:
            good = isinstance(value, (int, float)) and not isinstance(value, bool)
            text = json.dumps(value) if good else ""
            self.widget = build.widget(
                widgets.Text, value=text, placeholder=kind, layout=widgets.Layout(width="12em")
            )

    def value(self) -> Any:
        text = self.widget.value
        if self.kind == "string":
            return text
        try:
            number = json.loads(text.strip())
        except ValueError:
            number = None
        ok = isinstance(number, (int, float)) and not isinstance(number, bool)
        if not ok or (self.kind == "integer" and not isinstance(number, int)):
            raise FormError(
                self.pointer, f"enter {'an integer' if self.kind == 'integer' else 'a number'}"
            )
        return number


class _Bool(_Field):
    def __init__(self, build: _Builder, value: Any, pointer: str) -> None:
        self.widget = build.widget(
            widgets.Checkbox,
            value=value is True,
            description=json.dumps(value is True),
            indent=False,
            layout=widgets.Layout(width="auto"),
        )

        def shown(change: Any) -> None:  # the box says the JSON value it stands for
            self.widget.description = json.dumps(bool(change["new"]))

        self.widget.observe(shown, names="value")

    def value(self) -> Any:
        return bool(self.widget.value)


class _Enum(_Field):
    def __init__(self, build: _Builder, choices: list[Any], value: Any, pointer: str) -> None:
        self.choices = choices
        labels = [(json.dumps(c, ensure_ascii=False)[:60], i) for i, c in enumerate(choices[:200])]
        index = next((i for i, c in enumerate(choices) if c == value and type(c) is type(value)), 0)
        self.widget = build.widget(
            widgets.Dropdown,
            options=labels,
            value=min(index, len(labels) - 1),
            layout=widgets.Layout(width="auto"),
        )

    def value(self) -> Any:
        return self.choices[self.widget.value]


class _Raw(_Field):
    """A JSON text box for a value the form cannot express."""

    def __init__(self, build: _Builder, value: Any, pointer: str) -> None:
        self.pointer = pointer
        text = "" if value is MISSING else json.dumps(value, ensure_ascii=False, indent=2)
        self.widget = build.widget(
            widgets.Textarea,
            value=text,
            placeholder="JSON",
            rows=min(12, text.count("\n") + 2),
            layout=_grow_layout(),
        )
        self.widget.add_class("nbagent-json")

    def value(self) -> Any:
        try:
            return _parse(self.widget.value or "null")
        except ArgumentsError as exc:
            raise FormError(self.pointer, f"not valid JSON: {exc}") from None


class _Nullable(_Field):
    def __init__(self, build: _Builder, inner: _Field, is_null: bool) -> None:
        self.inner = inner
        self.null = build.widget(
            widgets.Checkbox,
            value=is_null,
            description="null",
            indent=False,
            layout=widgets.Layout(width="auto"),
        )
        self.widget = build.widget(
            widgets.HBox, children=[inner.widget, self.null], layout=_row_layout()
        )

    def value(self) -> Any:
        return None if self.null.value else self.inner.value()


class _Object(_Field):
    def __init__(
        self, build: _Builder, node: Mapping[str, Any], value: Any, pointer: str, depth: int
    ) -> None:
        props = node.get("properties") if isinstance(node.get("properties"), Mapping) else {}
        assert isinstance(props, Mapping)
        current = value if isinstance(value, dict) else {}
        if set(current) - set(props):
            raise _Unlisted  # keys the schema does not name: only JSON can show them
        required = set(node.get("required") or ())
        self.fields: list[tuple[str, _Field, widgets.Checkbox | None]] = []
        rows = []
        for name, sub in props.items():
            where = f"{pointer}/{_escape(name)}"
            present = name in current
            start = current.get(name, _default(build.resolve(sub)))
            field = build.field(sub, start, where, depth + 1)
            include = None
            label = build.widget(
                widgets.Label,
                value=f"{name} *" if name in required else name,
                layout=_label_layout(),
            )
            label.tooltip = str((build.resolve(sub) or {}).get("description", ""))[:300] or None
            parts: list[widgets.Widget] = [label, field.widget]
            if name not in required:
                include = build.widget(
                    widgets.Checkbox,
                    value=present,
                    description="include",
                    indent=False,
                    layout=widgets.Layout(width="auto"),
                )
                parts.append(include)
                _include_on_edit(field.widget, include)
            rows.append(build.widget(widgets.HBox, children=parts, layout=_row_layout()))
            self.fields.append((name, field, include))
        indent = "0 0 0 1.2em" if depth else "0"
        self.widget = build.widget(
            widgets.VBox, children=rows, layout=widgets.Layout(margin=indent, width="100%")
        )

    def value(self) -> Any:
        out: dict[str, Any] = {}
        for name, field, include in self.fields:
            if include is not None and not include.value:
                continue
            out[name] = field.value()
        return out


def _include_on_edit(control: widgets.Widget, include: widgets.Checkbox) -> None:
    """Editing an optional field's value includes it (the person meant it)."""
    if not control.has_trait("value"):
        return

    def changed(_change: Any) -> None:
        include.value = True

    control.observe(changed, names="value")


class _Unlisted(Exception):
    """An object value with keys its schema does not list."""


class _Array(_Field):
    def __init__(
        self, build: _Builder, node: Mapping[str, Any], value: Any, pointer: str, depth: int
    ) -> None:
        self.build, self.pointer, self.depth = build, pointer, depth
        self.items_schema = node.get("items", {})
        current = value if isinstance(value, list) else []
        if len(current) > MAX_ITEMS or not isinstance(build.resolve(self.items_schema), Mapping):
            raise _Unlisted
        self.rows: list[tuple[_Field, widgets.Widget]] = []
        self.box = build.widget(widgets.VBox, children=[], layout=widgets.Layout(width="100%"))
        self.add = build.widget(
            widgets.Button, description="Add item", icon="plus", layout=widgets.Layout(width="auto")
        )
        self.add.on_click(lambda _b: self._add(_default(build.resolve(self.items_schema))))
        for item in current:
            self._add(item)
        self.widget = build.widget(
            widgets.VBox, children=[self.box, self.add], layout=widgets.Layout(width="100%")
        )

    def _add(self, item: Any) -> None:
        if len(self.rows) >= MAX_ITEMS:
            return
        field = self.build.field(
            self.items_schema, item, f"{self.pointer}/{len(self.rows)}", self.depth + 1
        )
        remove = self.build.widget(
            widgets.Button,
            description="",
            icon="times",
            tooltip="Remove this item",
            layout=widgets.Layout(width="2.5em"),
        )
        row = self.build.widget(widgets.HBox, children=[field.widget, remove], layout=_row_layout())
        entry = (field, row)
        self.rows.append(entry)
        remove.on_click(lambda _b: self._remove(entry))
        self.box.children = (*self.box.children, row)

    def _remove(self, entry: tuple[_Field, widgets.Widget]) -> None:
        if entry in self.rows:
            self.rows.remove(entry)
            self.box.children = tuple(r for _, r in self.rows)

    def value(self) -> Any:
        return [field.value() for field, _ in self.rows]


def _default(node: Any) -> Any:
    """A starting value for a field that has none: the schema's default, else nothing."""
    if isinstance(node, Mapping) and "default" in node:
        return node["default"]
    return MISSING


class EditForm:
    """The editor of one call's arguments: a form, or JSON text (the person switches)."""

    def __init__(self, schema: Mapping[str, Any] | None, arguments: Any) -> None:
        self.schema: Mapping[str, Any] = schema or {"type": "object", "properties": {}}
        self.made: list[widgets.Widget] = []
        self.mode = widgets.ToggleButtons(
            options=["Form", "JSON"],
            value="Form",
            style={"button_width": "5em"},
            tooltips=["Edit field by field", "Edit the arguments as JSON"],
        )
        self.error = widgets.HTML(value="")
        self.note = widgets.HTML(
            value='<span style="font-size:0.85em;opacity:0.75">* required. Approve runs the call '
            "with these arguments (they are checked against the tool's schema first).</span>"
        )
        self.note.add_class("nbagent-note")
        self.error.add_class("nbagent-note")
        self.body = widgets.VBox(layout=widgets.Layout(width="100%"))
        self.form: _Field | None = None
        self.raw: widgets.Textarea | None = None
        self.widget = widgets.VBox(
            [self.mode, self.body, self.error, self.note],
            layout=widgets.Layout(
                border="1px dashed var(--jp-border-color2, #ccc)",
                padding="4px 6px",
                margin="4px 0",
                width="100%",
            ),
        )
        self.widget.add_class("nbagent-edit")
        self._build(arguments)
        self.mode.observe(self._switch, names="value")

    # --- building and switching ------------------------------------------------------------

    def _build(self, arguments: Any) -> None:
        made: list[widgets.Widget] = []
        try:
            self.form = _Builder(self.schema, made).field(self.schema, arguments, "", 0)
            if isinstance(self.form, _Raw):
                raise _TooBig
        except (_TooBig, _Unlisted, RecursionError):
            self._close(made)
            self.form = None
            self._show_raw(arguments)
            self.mode.value = "JSON"
            self.mode.disabled = True
            self.note.value += (
                '<br><span style="font-size:0.85em;opacity:0.75">These arguments are too large '
                "or complex for a form: edit them as JSON.</span>"
            )
            return
        self.made += made
        self.body.children = [self.form.widget]

    def _show_raw(self, arguments: Any) -> None:
        text = json.dumps(arguments, ensure_ascii=False, indent=2)
        if self.raw is None:
            self.raw = widgets.Textarea(layout=widgets.Layout(width="100%"))
            self.raw.add_class("nbagent-json")
        self.raw.value = text
        self.raw.rows = min(16, text.count("\n") + 2)
        self.body.children = [self.raw]

    def _switch(self, change: Any) -> None:
        self.error.value = ""
        if change["new"] == "JSON":
            try:
                current = self.form.value() if self.form is not None else {}
            except FormError as exc:
                self.show_error([str(exc)])
                self.mode.value = "Form"
                return
            self._show_raw(current)
            return
        try:
            parsed = self._raw_value()
        except FormError as exc:
            self.show_error([str(exc)])
            self.mode.value = "JSON"
            return
        old = self.made
        self.made = []
        self._build(parsed)
        self._close(old)

    def _raw_value(self) -> Any:
        assert self.raw is not None
        try:
            return _parse(self.raw.value)
        except ArgumentsError as exc:
            raise FormError("", f"not valid JSON: {exc}") from None

    # --- reading ------------------------------------------------------------------------------

    def value(self) -> Any:
        """The arguments as edited; raises :class:`FormError` for a field that is not a value."""
        if self.mode.value == "JSON" or self.form is None:
            return self._raw_value()
        return self.form.value()

    def show_error(self, lines: list[str]) -> None:
        """Say inline why the edit cannot run (escaped: it may quote the person's text)."""
        import html

        if not lines:
            self.error.value = ""
            return
        items = "".join(f"<li>{html.escape(line)}</li>" for line in lines[:10])
        self.error.value = (
            f'<div style="color:{STATUS_COLORS["error"]};font-size:0.9em"><b>Not run: these '
            f"arguments do not fit the tool.</b><ul style='margin:2px 0'>{items}</ul></div>"
        )

    def disable(self) -> None:
        for widget in self.all_widgets():
            if hasattr(widget, "disabled"):
                widget.disabled = True

    def all_widgets(self) -> list[widgets.Widget]:
        made = [self.widget, self.mode, self.error, self.note, self.body, *self.made]
        if self.raw is not None:
            made.append(self.raw)
        return made

    @staticmethod
    def _close(made: list[widgets.Widget]) -> None:
        for widget in made:
            try:
                widget.close()
            except Exception:  # already gone
                continue
