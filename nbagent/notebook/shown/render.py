"""What a person sees of a tool result, and model or tool text made safe to show.

Model and tool text is never trusted HTML, and credential-shaped text in it is shown as ``***``
(:func:`nbagent.redact.redact_secrets`). JupyterLab renders outputs of a live session (and
everything inside an Output widget) as *trusted*: Markdown there may carry raw HTML and
``javascript:`` links that run. So text goes out as ``text/plain``, or as Markdown passed
through :func:`safe_markdown`, or as HTML we build ourselves with every value escaped; text that
is not meant as Markdown (what a person or a file wrote: a policy's globs, a prompt, a name)
goes into Markdown through :func:`md_text`, which shows it exactly as written.
"""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Iterable
from typing import Any

from ..._ground.formatting import Formatter, Unreadable, stand_in
from ..._ground.markdown import code_span, md_text
from ...content import ImagePart, Table, ToolResult
from ...redact import redact_secrets
from .values import SHOWING, Piece, TableForm, pieces_of, table_form

__all__ = [
    "CODE_BACKGROUND",
    "CODE_COLORS",
    "close_widgets",
    "code_html",
    "MAX_TEXT",
    "NO_MATH_CLASS",
    "no_math",
    "no_math_outputs",
    "STATUS_COLORS",
    "code_span",
    "fenced",
    "form_html",
    "md_text",
    "result_outputs",
    "rows_html",
    "safe_markdown",
    "shorten",
    "table_html",
]

#: The colour of a call's status line, live and saved alike. A saved run cannot know the theme
#: it will be shown in, so each is a middle tone that reads at 4:1 or better both on white and on
#: JupyterLab Dark's page (#111).
STATUS_COLORS = {
    "done": "#388e3c",
    "error": "#e53935",
    "timeout": "#e53935",
    "invalid": "#e53935",
    "denied": "#e91e63",
    "cancelled": "#757575",
    "waiting": "#cc5500",
    "running": "#1976d2",
}

#: Jupyter front ends typeset ``$…$`` in HTML and Markdown outputs as TeX (MathJax), so model
#: text such as "costs $5 and $10" lost its dollars and words. MathJax leaves an element with
#: one of these classes alone: MathJax 3's (JupyterLab, Notebook 7) and MathJax 2's (nbviewer).
NO_MATH_CLASS = "tex2jax_ignore mathjax_ignore"

#: Longest text shown for one result (the model may have received more).
MAX_TEXT = 20_000
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
#: Whatever a browser could read as a URL scheme: a letter, then letters, digits, ``+ - .``
#: (a browser drops tabs and line breaks anywhere in a URL, and Markdown lets a backslash
#: escape the colon), then the colon, unless prose goes on after it: a link destination ends
#: at white space, so "denied by policy: nobody" is no URL and keeps its colon untouched, but
#: a colon before the end of a line, a ``)`` or a link title (``"``, ``'``, ``(``) could end one.
_SCHEME = re.compile(
    r"([A-Za-z](?:[\t\r\n\\]*[A-Za-z0-9+.\-])*)([\t\r\n\\ ]*):(?=\S|\s*(?:[)\"'(]|$))",
    re.MULTILINE,
)
_SCHEME_NOISE = re.compile(r"[\t\r\n\\]")
#: The only schemes a link in text nbagent writes may keep.
SAFE_SCHEMES = frozenset({"http", "https", "mailto"})
#: An ``&`` that could start a character reference (``&colon;``, ``&#58;``): some renderers
#: decode a link destination twice, so even ``&amp;#58;`` can come out as a colon.
_REFERENCE = re.compile(r"&amp;(?=[#A-Za-z])")
_BACKTICKS = re.compile(r"`+")
_IMAGE = re.compile(r"(?<!\\)((?:\\\\)*)!\[")  # a "![" whose "!" is not escaped


def shorten(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n… ({len(text) - limit:,} more characters not shown)"


def _defuse(text: str) -> str:
    """Outside code: no raw HTML (``<`` and ``&`` escaped, and no ``&`` can start a character
    reference in any renderer), no URL scheme but http(s) and mailto, and no images
    (``![…](…)`` would make every viewer of the notebook fetch an address the model wrote: the
    ``!`` becomes an entity, so the image reads as a link to click).

    A scheme is broken by an invisible zero-width space before its colon, wherever it stands
    (a link, a reference definition, an autolink, plain text a renderer may linkify): deciding
    by an allowlist, over the text a browser would read, leaves no scheme to forget.
    """
    text = _REFERENCE.sub("&amp;\u200b", text.replace("&", "&amp;"))
    text = text.replace("<", "&lt;").replace("$", "&#36;")
    text = _IMAGE.sub(r"\1&#33;[", text)
    return _SCHEME.sub(_break_scheme, text)


def _break_scheme(match: re.Match[str]) -> str:
    if _SCHEME_NOISE.sub("", match.group(1)).lower() in SAFE_SCHEMES:
        return match.group()
    return f"{match.group(1)}{match.group(2)}\u200b:"


def _defuse_inline(line: str) -> str:
    """Escape a line's text but keep its code spans (which show their text literally)."""
    out: list[str] = []
    pos = 0
    while True:
        opening = _BACKTICKS.search(line, pos)
        if opening is None:
            break
        run = opening.group()
        closing = re.compile(rf"(?<!`){run}(?!`)").search(line, opening.end())
        if closing is None:
            break
        out.append(_defuse(line[pos : opening.start()]))
        out.append(line[opening.start() : closing.end()])
        pos = closing.end()
    out.append(_defuse(line[pos:]))
    return "".join(out)


def safe_markdown(text: str) -> str:
    """Markdown that reads the same but can run and fetch nothing: raw HTML is escaped,
    ``javascript:`` (and similar) URLs are broken and images become links, outside code spans
    and fenced blocks, which stay literal. For model text; text that must show as written
    goes through :func:`md_text`."""
    lines = text.split("\n")
    fence: str | None = None
    for index, line in enumerate(lines):
        match = _FENCE.match(line)
        if fence is not None:
            closes = match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence)
            if closes and match and not match.group(2).strip():
                fence = None
            continue
        if match and not (match.group(1)[0] == "`" and "`" in match.group(2)):
            fence = match.group(1)
            lines[index] = match.group(1) + _defuse(match.group(2))
            continue
        lines[index] = _defuse_inline(line)
    return "\n".join(lines)


def no_math(data: dict[str, Any]) -> dict[str, Any]:
    """A mime bundle whose HTML and Markdown are shown as text, never typeset as TeX: each is
    wrapped in a block MathJax skips (the Markdown inside still reads as Markdown)."""
    out = dict(data)
    if isinstance(out.get("text/html"), str):
        out["text/html"] = f'<div class="{NO_MATH_CLASS}">{out["text/html"]}</div>'
    if isinstance(out.get("text/markdown"), str):
        out["text/markdown"] = f'<div class="{NO_MATH_CLASS}">\n\n{out["text/markdown"]}\n\n</div>'
    return out


def no_math_outputs(outputs: Iterable[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    """nbformat outputs with :func:`no_math` applied to each display's bundle."""
    return tuple({**o, "data": no_math(o["data"])} if "data" in o else o for o in outputs)


def fenced(text: str, info: str = "") -> str:
    """``text`` as a fenced Markdown code block, whatever fences it holds."""
    longest = max((len(m) for m in re.findall(r"`{3,}", text)), default=2)
    fence = "`" * (longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def table_html(value: Any, *, max_rows: int = 50, max_cols: int = 30) -> str | None:
    """A DataFrame (pandas or polars, or a Series) or a :class:`~nbagent.content.Table` as an
    HTML table with every value escaped; None when ``value`` is no table. Its cells are read
    through the guard (:mod:`.values`): a table that cannot be read is shown as one escaped
    line saying why."""
    return _guarded_table(value, max_rows, max_cols, align=False)


def _guarded_table(value: Any, max_rows: int, max_cols: int, *, align: bool) -> str | None:
    with Formatter(name="table") as formatter:
        try:
            form = formatter.read(SHOWING, table_form, value, max_rows, max_cols)
        except Unreadable as exc:
            return _problem_html(stand_in(value, str(exc)))
    return None if form is None else form_html(form, align=align)


def form_html(form: TableForm, *, align: bool = False) -> str:
    """A table read by :func:`.values.table_form` as HTML, every value escaped. ``align``:
    text columns read from the left (Jupyter right-aligns every cell), numbers stay right."""
    esc = html.escape
    cells = form.cells
    numeric = [
        bool(cells) and all(type(r[i]) in (int, float) for r in cells if i < len(r))
        for i in range(len(form.columns))
    ]

    def style(i: int) -> str:
        return "" if not align or (i < len(numeric) and numeric[i]) else ' style="text-align:left"'

    parts = ['<table class="nbagent-table"><thead><tr>']
    if form.labels is not None:
        parts.append(f"<th>{esc(form.index)}</th>")
    parts.extend(f"<th{style(i)}>{esc(c)}</th>" for i, c in enumerate(form.columns))
    parts.append("</tr></thead><tbody>")
    for number, row in enumerate(cells):
        parts.append("<tr>")
        if form.labels is not None:
            parts.append(f"<th>{esc(form.labels[number])}</th>")
        parts.extend(f"<td{style(i)}>{esc(str(v))}</td>" for i, v in enumerate(row))
        parts.append("</tr>")
    parts.append("</tbody></table>")
    if form.frame and (form.total_rows > len(cells) or form.total_cols > len(form.columns)):
        parts.append(
            f"<p><small>{form.total_rows:,} rows × {form.total_cols:,} columns</small></p>"
        )
    elif not form.frame and form.total_rows > len(cells):
        parts.append(f"<p><small>{form.total_rows:,} rows</small></p>")
    return "".join(parts)


def _problem_html(problem: str) -> str:
    """A stand-in for what could not be read (:func:`nbagent._ground.formatting.stand_in`),
    escaped."""
    return f"<p><code>{html.escape(redact_secrets(problem))}</code></p>"


def _display(data: dict[str, Any], metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"output_type": "display_data", "data": data, "metadata": metadata or {}}


def _image_output(part: ImagePart) -> dict[str, Any]:
    encoded = base64.b64encode(part.data).decode("ascii")
    label = f"[image {part.width}×{part.height}, {part.mime_type}]"
    metadata = {part.mime_type: {"width": part.width, "height": part.height}}
    if part.mime_type in ("image/png", "image/jpeg", "image/gif"):
        return _display({part.mime_type: encoded, "text/plain": label}, metadata)
    return _display({"text/plain": label})


# --- code ------------------------------------------------------------------------------------
# Highlighting is Pygments' (IPython's own dependency): its tokens are escaped here and wrapped
# only in ``<span style="color:…">``, so code the model wrote is shown, never run. Colors are
# inline hex (a saved notebook carries no stylesheet, and JupyterLab's sanitizer drops ``var()``
# from the styles of an untrusted notebook), so they must read on every background the block can
# get: the theme's editor background (#f5f5f5 light, #212121 dark) or, where the sanitizer
# dropped it, the page (#fff, #111). ``<code>`` gets no background of its own: JupyterLab gives
# one to every ``code``, which drew a band of the page's color behind each line.

#: Longest code shown in a saved card (the recording and the run's record keep all of it).
CODE_LIMIT = 20_000

CODE_BACKGROUND = "var(--jp-cell-editor-background,#f5f5f5)"
_CODE_STYLE = (
    "white-space:pre;overflow-x:auto;margin:2px 0;padding:4px 6px;"
    "font-family:var(--jp-code-font-family,monospace);font-size:var(--jp-code-font-size,13px);"
    f"background:{CODE_BACKGROUND};border-radius:3px;line-height:1.4"
)
#: Token colors, each of luminance about 0.2: at least 3.6:1 on all four backgrounds above.
#: ``live/plain.js`` (the live view) uses the same, so a card keeps its colors when it ends.
CODE_COLORS = {
    "Keyword": "#d031cd",
    "Name.Builtin": "#0184bc",
    "Name.Function": "#3b75f2",
    "Name.Class": "#a67101",
    "Name.Decorator": "#a67101",
    "Literal.String": "#378d37",
    "Literal.Number": "#cb5a00",
    "Comment": "#7c7c7c",
    "Operator.Word": "#d031cd",
    # a diff (a notebook proposal's): added and removed lines, and where a hunk starts
    "Generic.Inserted": "#378d37",
    "Generic.Deleted": "#e0402f",
    "Generic.Subheading": "#8f6ae0",
}
#: A diff's added and removed lines also get a faint band behind them (alpha: the text keeps
#: its contrast with whatever is behind the block).
CODE_BANDS = {
    "Generic.Inserted": "rgba(55,141,55,0.12)",
    "Generic.Deleted": "rgba(224,64,47,0.12)",
}


def code_html(code: str, language: str, *, limit: int = CODE_LIMIT) -> str:
    """``code`` as a highlighted ``<pre>`` block (plain, escaped, for an unknown language)."""
    text = shorten(redact_secrets(code), limit)
    body = _highlighted(text, language)
    return f'<pre style="{_CODE_STYLE}"><code style="background:none;padding:0">{body}</code></pre>'


def _highlighted(text: str, language: str) -> str:
    try:
        from pygments import lex
        from pygments.lexers import get_lexer_by_name
        from pygments.util import ClassNotFound
    except ImportError:  # pragma: no cover - IPython depends on Pygments
        return html.escape(text)
    try:
        lexer = get_lexer_by_name(language, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return html.escape(text)
    runs: list[tuple[str | None, list[str]]] = []  # neighbours of one color share a span
    for token, value in lex(text, lexer):
        color = _color(token) if value.strip() else (runs[-1][0] if runs else None)
        if runs and runs[-1][0] == color:
            runs[-1][1].append(value)
        else:
            runs.append((color, [value]))
    return "".join(
        f'<span style="{color}">{html.escape("".join(values))}</span>'
        if color
        else html.escape("".join(values))
        for color, values in runs
    )


def _color(token: Any) -> str | None:
    """The inline style of a token: its color (and, in a diff, its line's band)."""
    while token is not None and len(token):
        name = ".".join(token)
        if name in CODE_COLORS:
            band = CODE_BANDS.get(name)
            return f"color:{CODE_COLORS[name]}" + (f";background:{band}" if band else "")
        token = token.parent
    return None


def result_outputs(result: ToolResult, *, limit: int = MAX_TEXT) -> list[dict[str, Any]]:
    """nbformat outputs showing ``result`` to a person: text, Markdown, a table, images, an error.

    The person sees ``result.value`` (what the tool returned) where it has a better form than
    the text the model reads; images come from the already encoded parts. The value is read
    through the guard, once (:func:`.values.pieces_of`): what cannot be read in bounded time is
    an escaped line naming its type and saying why, above the text the model read.
    """
    text = redact_secrets(result.text)
    if result.is_error and type(result.value) is not tuple:  # its text says it: no value read
        return [{"output_type": "stream", "name": "stderr", "text": shorten(text, limit)}]
    pieces = pieces_of(result)
    if pieces is not None and pieces[0].kind != "value":  # Shown pieces
        shown = [o for piece in pieces for o in _piece_outputs(piece, limit)]
        return shown + [_image_output(part) for part in result.images]
    if result.is_error:
        return [{"output_type": "stream", "name": "stderr", "text": shorten(text, limit)}]
    outputs: list[dict[str, Any]] = []
    piece = pieces[0] if pieces else None
    if piece is not None and piece.problem:
        outputs.append(_display({"text/plain": shorten(redact_secrets(piece.problem), limit)}))
    if piece is not None and piece.table is not None:
        table = redact_secrets(form_html(piece.table))
        outputs.append(_display({"text/html": table, "text/plain": shorten(text, limit)}))
    elif piece is not None and piece.text:
        source = redact_secrets(piece.text)
        outputs.append(
            _display({"text/markdown": safe_markdown(shorten(source, limit)), "text/plain": source})
        )
    elif text:
        outputs.append(_display({"text/plain": shorten(text, limit)}))
    outputs.extend(_image_output(part) for part in result.images)
    if not outputs:
        outputs.append(_display({"text/plain": "(no output)"}))
    return outputs


def _label_html(label: str) -> str:
    if not label:
        return ""
    return f'<div style="font-size:0.85em;opacity:0.7">{html.escape(label)}</div>'


def rows_html(table: Table, *, max_rows: int = 200) -> str:
    """A :class:`~nbagent.content.Table` as an HTML table, every cell escaped (read through the
    guard: a cell may be any object); text reads from the left, numbers from the right."""
    found = _guarded_table(table, max_rows, len(table.columns), align=True)
    return found if found is not None else _problem_html(stand_in(table, "it is not a table"))


def _form_text(form: TableForm) -> str:
    """A table's text form: a Table's rows, a frame's shape (its HTML shows the cells)."""
    if form.frame:
        return f"({form.total_rows}, {form.total_cols})"
    lines = ["  ".join(form.columns)]
    lines += ["  ".join(str(v) for v in row) for row in form.cells]
    return "\n".join(lines)


def _piece_outputs(piece: Piece, limit: int) -> list[dict[str, Any]]:
    """One piece of a result's :class:`~nbagent.content.Shown` value as nbformat outputs."""
    label = redact_secrets(piece.label)
    head = f"{label}: " if label else ""
    if piece.problem:
        return [_display({"text/plain": shorten(head + redact_secrets(piece.problem), limit)})]
    if piece.kind in ("stdout", "stderr", "error"):
        text = shorten(redact_secrets(piece.text), limit)
        name = "stdout" if piece.kind == "stdout" else "stderr"
        return [{"output_type": "stream", "name": name, "text": text}] if text else []
    if piece.table is not None:
        body = form_html(piece.table, align=not piece.table.frame)
        return [
            _display(
                {
                    "text/html": _label_html(label) + redact_secrets(body),
                    "text/plain": shorten(head + redact_secrets(_form_text(piece.table)), limit),
                }
            )
        ]
    if piece.kind == "code":
        code = piece.text
        return [
            _display(
                {
                    "text/html": _label_html(label) + code_html(code, piece.language, limit=limit),
                    "text/plain": shorten(head + redact_secrets(code), limit),
                }
            )
        ]
    text = shorten(redact_secrets(piece.text), limit)
    if piece.kind == "markdown":
        return [
            _display(
                {
                    "text/markdown": safe_markdown(f"*{label}*\n\n{text}" if label else text),
                    "text/plain": head + text,
                }
            )
        ]
    return [_display({"text/plain": head + text})] if text else []


def pretty_arguments(value: Any, raw: str) -> str:
    """Arguments as indented JSON (the raw text when they did not parse)."""
    if value is None:
        return raw
    try:
        return json.dumps(value, indent=2, ensure_ascii=False)
    except (TypeError, ValueError):
        return raw


def close_widgets(made: Iterable[Any], *, spare: Iterable[Any] = ()) -> None:
    """Close each widget with its layout and style (each is a comm of its own), once each; a
    widget that is already gone is skipped. Closed widgets leave no state in a saved notebook.
    ``spare``: layouts and styles that other widgets still share (a view's
    :class:`.card.Shared`, when only some of its widgets go): left open."""
    seen: set[int] = {id(part) for part in spare}
    for widget in made:
        for part in (widget, getattr(widget, "layout", None), getattr(widget, "style", None)):
            if part is None or id(part) in seen:
                continue
            seen.add(id(part))
            try:
                part.close()
            except Exception:  # a widget that is already gone
                continue
