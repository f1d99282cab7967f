"""A finished run as ordinary outputs: sanitized HTML, Markdown and plain text, and real images.

A saved notebook must show a run with no kernel and no widget state (JupyterLab and Notebook 7
after reopening, ``nbconvert --to html``, GitHub). So when a run ends its live widgets are replaced
by plain mime bundles built here from the :class:`~.transcript.Transcript`:

* ``text/html`` built by us: every piece of model or tool text is escaped, and Markdown is
  rendered by markdown-it with raw HTML off, links only to http(s)/mailto (``rel=noopener``) and
  images from model text shown as a label (nothing is fetched from an address a model wrote);
* ``text/markdown`` and ``text/plain`` fallbacks for renderers without HTML;
* images returned by tools as real ``image/png`` (or jpeg/gif) outputs.

:func:`run_outputs` cuts the run into segments at each image (HTML, image, HTML …) so that every
renderer shows the image in place; ``inline_images=True`` embeds them as ``data:`` URLs in one
bundle instead, for front ends that can only update one output (a background run).
"""

from __future__ import annotations

import base64
import functools
import html
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...content import ImagePart, ToolResult, shown_pieces
from ...redact import redact_secrets
from ..shown.exchanges import exchanges_html
from ..shown.records import Block, CallRecord, NoteRecord, ReasoningRecord, TextRecord
from ..shown.render import (
    STATUS_COLORS,
    code_html,
    code_span,
    fenced,
    md_text,
    no_math,
    pretty_arguments,
    result_outputs,
    safe_markdown,
    shorten,
)
from ..shown.transcript import Transcript
from ..shown.wording import change_lines
from .answerview import answer_forms
from .static_nested import nested_forms, nested_requests

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

__all__ = [
    "Bundle",
    "after_notes",
    "change_notes",
    "block_html",
    "block_markdown",
    "block_outputs",
    "block_plain",
    "head_outputs",
    "markdown_html",
    "preview_label",
    "run_markdown",
    "run_outputs",
    "run_plain",
    "tail_outputs",
]

#: ``(data, metadata)`` of one display output.
Bundle = tuple[dict[str, Any], dict[str, Any]]

#: Longest text shown in a saved card (arguments, result, traceback).
PREVIEW = 2_000
#: The Markdown and plain-text fallbacks cut each long text (an answer, a pasted prompt) here
#: (the HTML keeps all of it): three full copies of a long text would triple the notebook's
#: size for renderers that read only the first form they know.
FALLBACK = 2_000
_MORE = "the HTML form of this output has all of it"
#: The same for a call's arguments and result in the fallbacks (the HTML card shows up to
#: :data:`PREVIEW`): a run of many calls would otherwise save each of them three times.
CALL_FALLBACK = 400
_SHOWN_IMAGES = ("image/png", "image/jpeg", "image/gif")
_SAFE_LINK = re.compile(r"(?i)^\s*(https?://|mailto:)")

_RUN_STYLE = (
    "font-family:var(--jp-content-font-family,system-ui,sans-serif);"
    "font-size:var(--jp-content-font-size1,14px);line-height:1.5;overflow-wrap:anywhere"
)
_CARD_STYLE = (
    "border:1px solid var(--jp-border-color2,#ddd);padding:2px 8px 6px 8px;margin:4px 0;"
    "border-radius:2px"
)
_PRE_STYLE = (
    "white-space:pre-wrap;margin:2px 0;padding:4px 6px;"
    "font-family:var(--jp-code-font-family,monospace);font-size:var(--jp-code-font-size,13px);"
    "background:var(--jp-layout-color2,#f3f3f3);border-radius:3px"
)
#: An error result: the theme's text on its error background (red text on the code background
#: was unreadable in a dark theme).
_ERROR_PRE_STYLE = _PRE_STYLE.replace(
    "background:var(--jp-layout-color2,#f3f3f3)",
    "background:var(--jp-rendermime-error-background,#fdd)",
)
_LABEL_STYLE = "font-size:0.85em;opacity:0.7;margin-top:4px"
_DIM_STYLE = "opacity:0.7"


# --- Markdown from a model, made safe ------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _markdown() -> MarkdownIt:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.validateLink = lambda url: bool(_SAFE_LINK.match(url))  # type: ignore[method-assign]

    def link_open(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
        tokens[idx].attrSet("target", "_blank")
        tokens[idx].attrSet("rel", "noopener noreferrer nofollow")
        return str(self.renderToken(tokens, idx, options, env))

    def image(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
        token = tokens[idx]
        alt = self.renderInlineAsText(token.children or [], options, env)
        return html.escape(f"[image: {alt or token.attrGet('src') or ''}]")

    md.add_render_rule("link_open", link_open)
    md.add_render_rule("image", image)
    return md


def markdown_html(text: str) -> str:
    """Model Markdown as HTML that can run nothing (see the module docs)."""
    return str(_markdown().render(redact_secrets(text)))


# --- pieces of a run -----------------------------------------------------------------------------


@dataclass
class _Piece:
    """One rendered block: the three text forms, and the images that follow it."""

    html: str
    markdown: str
    plain: str
    images: list[ImagePart] = field(default_factory=list)


def _esc(text: str) -> str:
    """Escaped for HTML, with credential-shaped text replaced (a saved notebook keeps no key)."""
    return html.escape(redact_secrets(text), quote=True)


def _pre(text: str, style: str = _PRE_STYLE) -> str:
    return f'<pre style="{style}">{_esc(shorten(text, PREVIEW))}</pre>'


def _image_tag(part: ImagePart) -> str:
    if part.mime_type not in _SHOWN_IMAGES:
        return f"<div>{_esc(_image_label(part))}</div>"
    data = base64.b64encode(part.data).decode("ascii")
    return (
        f'<img src="data:{part.mime_type};base64,{data}" alt="{_esc(_image_label(part))}" '
        f'style="max-width:100%;display:block;margin:4px 0">'
    )


def _image_label(part: ImagePart) -> str:
    return f"[image {part.width}×{part.height}, {part.mime_type}]"


def _result_html(result: ToolResult) -> str:
    """A result's text, table or Markdown as HTML (images are handled by the caller)."""
    parts: list[str] = []
    for output in result_outputs(result, limit=PREVIEW):
        if output["output_type"] == "stream":
            style = _PRE_STYLE if output.get("name") == "stdout" else _ERROR_PRE_STYLE
            parts.append(_pre(output.get("text", ""), style))
            continue
        data = output.get("data", {})
        if any(mime in data for mime in _SHOWN_IMAGES) or "text/plain" not in data:
            if not any(mime in data for mime in _SHOWN_IMAGES) and data.get("text/plain"):
                parts.append(_pre(str(data["text/plain"])))
            continue
        if "text/html" in data:  # our own table: every cell already escaped
            parts.append(f'<div style="overflow-x:auto">{data["text/html"]}</div>')
        elif "text/markdown" in data:
            parts.append(markdown_html(str(data["text/markdown"])))
        else:
            parts.append(_pre(str(data["text/plain"])))
    return "".join(parts)


def _card(record: CallRecord, transcript: Transcript, inline_images: bool) -> _Piece:
    color = STATUS_COLORS.get(record.status, "#555")
    title = f' <span style="{_DIM_STYLE}">{_esc(record.title)}</span>' if record.title else ""
    line = transcript.call_line(record)
    html_parts = [
        f'<div style="{_CARD_STYLE}">',
        f"<div><b>⚙ {_esc(record.name)}</b>{title} · "
        f'<span style="color:{color}">{_esc(line)}</span></div>',
    ]
    args = transcript.call_arguments(record)
    code = record.code()
    if args or code is not None:
        if record.changes:
            html_parts.append(f'<div style="{_LABEL_STYLE}">Proposed by the model</div>')
        if code is not None and code[3]:
            html_parts.append(_details_html(code[3]))
        elif args:
            html_parts.append(_pre(args))
        if code is not None:
            html_parts.append(code_html(code[2], code[1]))
    html_parts.extend(_changes_html(record))
    if record.preview is not None:
        html_parts.append(
            f'<details><summary style="{_LABEL_STYLE}">{_esc(preview_label(record))}</summary>'
            f"{_result_html(record.preview)}"
            + "".join(_image_tag(p) for p in record.preview.images)
            + "</details>"
        )
    images: list[ImagePart] = []
    result = record.result
    if result is not None:
        if shown_pieces(result.value) is None:  # labelled pieces (Out, Namespace …) need none
            label = "Error" if record.is_error else "Result"
            html_parts.append(f'<div style="{_LABEL_STYLE}">{label}</div>')
        html_parts.append(_result_html(result))
        images = list(result.images)
        if inline_images:
            html_parts.extend(_image_tag(p) for p in images)
    if after_notes(record):
        html_parts.append(_list_html("After it ran", after_notes(record)))
    if record.model_result is not None:
        html_parts.append(
            f'<details><summary style="{_LABEL_STYLE}">What the model read instead</summary>'
            f"{_pre(record.model_result.text)}</details>"
        )
    if record.traceback:
        html_parts.append(
            f'<details><summary style="{_LABEL_STYLE}">Traceback</summary>'
            f"{_pre(record.traceback)}</details>"
        )
    markdown = redact_secrets(block_markdown(record, transcript))
    plain = redact_secrets(block_plain(record, transcript))
    nested = nested_forms(record.name, transcript.helpers.get(record.call_id, ()), _forms)
    if nested is not None:  # the helper's own run, under the call (each piece already safe)
        html_parts.append(nested[0])
        markdown, plain = f"{markdown}\n\n{nested[1]}", f"{plain}\n{nested[2]}"
    html_parts.append("</div>")
    return _Piece("".join(html_parts), markdown, plain, [] if inline_images else images)


def _forms(transcript: Transcript) -> list[tuple[str, str, str]]:
    """A helper's run as pieces in their three forms (its images inline: a nested run is one
    block of its caller's output)."""
    return [(p.html, p.markdown, p.plain) for p in _pieces(transcript, True, seen=False)]


def _details_html(rest: dict[str, Any]) -> str:
    """The arguments of a code call besides its code, one line each (``purpose: …``), as the
    live card shows them (it showed ``{"purpose": …}`` as JSON once saved)."""
    lines = []
    for key, value in rest.items():
        text = value if isinstance(value, str) else pretty_arguments(value, "")
        lines.append(f"<b>{_esc(str(key))}:</b> {_esc(shorten(text, PREVIEW))}")
    return f'<div style="font-size:0.9em;margin:2px 0">{"<br>".join(lines)}</div>'


def preview_label(record: CallRecord) -> str:
    """The heading of a call's preview, saying how it ended (and, when the person edited the
    call, that it is of the model's arguments, not those that ran)."""
    label = {
        "error": "Preview (it failed)",
        "timeout": "Preview (it did not finish in time)",
    }.get(record.preview_status, "Preview (what the call would do, shown before it was approved)")
    if any(change.by == "person" for change in record.changes):
        label = label.replace("Preview", "Preview of the model's arguments, not your edit", 1)
    return label


def change_notes(record: CallRecord) -> list[str]:
    """Lines about what changed a call before it ran: hooks, and each changed value."""
    before = [n for n in record.hook_notes if not n.startswith("after-tool")]
    return [*before, *change_lines(record)]


def after_notes(record: CallRecord) -> list[str]:
    """Lines about what after-tool hooks did to the result the model reads, then what was done
    with the call's effects later (an undo)."""
    hooks = [n for n in record.hook_notes if n.startswith("after-tool")]
    return [*hooks, *getattr(record, "later", ())]


def _list_html(title: str, lines: list[str]) -> str:
    items = "".join(f"<li><code>{_esc(line)}</code></li>" for line in lines)
    return f'<div style="{_LABEL_STYLE}">{title}</div><ul style="margin:2px 0">{items}</ul>'


def _changes_html(record: CallRecord) -> list[str]:
    notes = change_notes(record)
    if not notes:
        return []
    parts = [_list_html("Before it ran", notes)]
    if record.changes and record.executed is not None:
        parts.append(f'<div style="{_LABEL_STYLE}">Ran with</div>')
        parts.append(_pre(pretty_arguments(record.executed, "")))
    return parts


def block_html(block: Block, transcript: Transcript, *, inline_images: bool = True) -> str:
    """One block of the run as safe HTML."""
    return _piece(block, transcript, inline_images).html


def _piece(block: Block, transcript: Transcript, inline_images: bool) -> _Piece:
    if isinstance(block, CallRecord):
        return _card(block, transcript, inline_images)
    markdown = redact_secrets(block_markdown(block, transcript))
    plain = redact_secrets(block_plain(block, transcript))
    if isinstance(block, TextRecord):
        body = f"<div>{markdown_html(block.text)}</div>" if block.text.strip() else ""
    elif isinstance(block, ReasoningRecord):
        body = (
            f'<details><summary style="{_LABEL_STYLE}">Thinking</summary>'
            f'<div style="white-space:pre-wrap;font-style:italic;{_DIM_STYLE}">'
            f"{_esc(shorten(block.text.strip(), PREVIEW))}</div></details>"
            if block.text.strip()
            else ""
        )
    else:
        body = f'<div style="font-style:italic;{_DIM_STYLE}">{_esc(block.text)}</div>'
    return _Piece(body, markdown, plain)


def _fallback(text: str) -> str:
    """A text cut for the Markdown and plain-text forms (see :data:`FALLBACK`)."""
    if len(text) <= FALLBACK:
        return text
    return f"{text[:FALLBACK]}\n… ({len(text) - FALLBACK:,} more characters: {_MORE})"


def block_markdown(block: Block, transcript: Transcript) -> str:
    """One block as Markdown that renders safely anywhere (images listed, not shown)."""
    if isinstance(block, TextRecord):
        return safe_markdown(_fallback(block.text)) if block.text.strip() else ""
    if isinstance(block, ReasoningRecord):
        if not block.text.strip():
            return ""
        quoted = safe_markdown(shorten(block.text.strip(), PREVIEW)).replace("\n", "\n> ")
        return f"> *thinking:* {quoted}"
    if isinstance(block, NoteRecord):
        return f"*{md_text(block.text)}*"
    title = f" ({md_text(block.title)})" if block.title else ""
    status = md_text(transcript.call_line(block))
    lines = [f"**🔧 {md_text(block.name)}**{title} — {status}"]
    args = transcript.call_arguments(block)
    if args:
        lines += ["", fenced(shorten(args, CALL_FALLBACK), "json")]
    code = block.code()
    if code is not None:
        lines += ["", fenced(redact_secrets(_fallback(code[2])), code[1])]
    notes = change_notes(block)
    if notes:
        lines += ["", "Before it ran:", ""] + [f"- {code_span(line)}" for line in notes]
    if block.preview is not None and block.preview.text:
        lines += [
            "",
            f"{preview_label(block)}:",
            "",
            fenced(shorten(block.preview.text, CALL_FALLBACK)),
        ]
    if block.result is not None:
        label = "Error" if block.is_error else "Result"
        if block.result_text:
            lines += ["", f"{label}:", "", fenced(shorten(block.result_text, CALL_FALLBACK))]
        lines += [f"\n*{_image_label(p)}*" for p in block.result.images]
    later = after_notes(block)
    if later:
        lines += ["", "After it ran:", ""] + [f"- {code_span(line)}" for line in later]
    if block.model_result is not None:
        read = shorten(block.model_result.text, PREVIEW)
        lines += ["", "What the model read instead:", "", fenced(read)]
    return "\n".join(lines)


def block_plain(block: Block, transcript: Transcript) -> str:
    """One block as plain text."""
    if isinstance(block, TextRecord):
        return _fallback(block.text.strip())
    if isinstance(block, ReasoningRecord):
        return "(thinking) " + shorten(block.text.strip(), PREVIEW) if block.text.strip() else ""
    if isinstance(block, NoteRecord):
        return f"({block.text})"
    code = block.code()
    if code is not None:
        args = transcript.call_arguments(block)
        lines = [f"[tool] {block.name} {shorten(args, CALL_FALLBACK)}".rstrip()]
        lines += ["    " + line for line in _fallback(code[2]).splitlines()]
    else:
        lines = [f"[tool] {block.name} {shorten(block.arguments, CALL_FALLBACK)}"]
    lines.append(f"  {transcript.call_line(block)}")
    lines += [
        f"  changed {line}" if line.startswith("by ") else f"  {line}"
        for line in change_notes(block)
    ]
    if block.preview is not None and block.preview.text:
        shown = shorten(block.preview.text, PREVIEW).replace("\n", "\n    ")
        lines.append(f"  preview: {shown}")
    if block.result_text:
        prefix = "  error: " if block.is_error else "  → "
        lines.append(prefix + shorten(block.result_text, CALL_FALLBACK).replace("\n", "\n    "))
    lines += [f"  {line}" for line in after_notes(block)]
    if block.model_result is not None:
        read = shorten(block.model_result.text, CALL_FALLBACK).replace("\n", "\n    ")
        lines.append(f"  the model read instead: {read}")
    if block.result is not None:
        lines += [f"  {_image_label(p)}" for p in block.result.images]
    return "\n".join(lines)


def _head(transcript: Transcript) -> _Piece:
    if transcript.serving is not None:  # %agent serve: what is served, where, to whom
        return _Piece(*transcript.serving.head_forms())
    model = f" · <code>{_esc(transcript.model)}</code>" if transcript.model else ""
    prompt = _esc(transcript.prompt).replace("\n", "<br>")
    quoted = md_text(_fallback(transcript.prompt)).replace("\n", "\n> ")
    model_md = f" · model {code_span(transcript.model)}" if transcript.model else ""
    plain = f"You: {_fallback(transcript.prompt)}" + (
        f"  [model {transcript.model}]" if transcript.model else ""
    )
    return _Piece(
        f'<div style="{_DIM_STYLE}"><b>You:</b> {prompt}{model}</div>',
        redact_secrets(f"> **You:** {quoted}{model_md}"),
        redact_secrets(plain),
    )


def _tail(transcript: Transcript) -> _Piece:
    parts, md, plain = [], [], []
    if transcript.answered:  # a typed run's validated value (which may be null)
        shown, written, said = answer_forms(transcript.answer)
        parts.append(shown)
        md.append(written)
        plain.append(said)
    if transcript.error:
        color = STATUS_COLORS["error"]
        parts.append(f'<div style="color:{color}"><b>Error:</b> {_esc(transcript.error)}</div>')
        md.append(f"**Error:** {md_text(transcript.error)}")
        plain.append(f"Error: {transcript.error}")
    footer = transcript.footer()
    if transcript.saved_to:
        footer += f" · recorded in {transcript.saved_to}"
    elif transcript.not_saved:
        footer += f" · not recorded: {transcript.not_saved}"
    parts.append(f'<div style="{_DIM_STYLE};font-size:0.9em">{_esc(footer)}</div>')
    md.append(f"*{md_text(footer)}*")
    plain.append(footer)
    return _Piece("".join(parts), redact_secrets("\n\n".join(md)), redact_secrets("\n".join(plain)))


def _pieces(transcript: Transcript, inline_images: bool, seen: bool = True) -> Iterator[_Piece]:
    yield _head(transcript)
    folded = transcript.serving.folded_forms() if transcript.serving is not None else None
    if folded is not None:  # %agent serve: the calls folded out of a long session
        yield _Piece(*folded)
    for block in transcript.blocks:
        piece = _piece(block, transcript, inline_images)
        if piece.html or piece.images:
            yield piece
    exchanges = _exchanges_piece(transcript) if seen else None  # a helper's: under the call
    if exchanges is not None:
        yield exchanges
    yield _tail(transcript)


def _exchanges_piece(transcript: Transcript) -> _Piece | None:
    """What the model saw at each step, folded (it opens in the saved output); for a
    serving, what the client asked and got."""
    if transcript.serving is not None:
        forms = transcript.serving.requests_forms(transcript)
        return None if forms is None else _Piece(*forms)
    if not transcript.exchanges:
        return None
    count = len(transcript.exchanges)
    requests = f"{count} request{'s' if count != 1 else ''}"
    said = f"(what the model saw at each step, {requests}: in the HTML form)"
    return _Piece(
        exchanges_html(transcript.exchanges, nested_requests(transcript)), f"*{said}*", said
    )


def _bundle(pieces: list[_Piece]) -> dict[str, Any]:
    body = "".join(p.html for p in pieces)
    return no_math(
        {
            "text/html": f'<div class="nbagent-run" style="{_RUN_STYLE}">{body}</div>',
            "text/markdown": "\n\n".join(p.markdown for p in pieces if p.markdown),
            "text/plain": "\n\n".join(p.plain for p in pieces if p.plain),
        }
    )


def _image_bundle(part: ImagePart) -> dict[str, Any]:
    if part.mime_type not in _SHOWN_IMAGES:
        return {"text/plain": _image_label(part)}
    return {
        part.mime_type: base64.b64encode(part.data).decode("ascii"),
        "text/plain": _image_label(part),
    }


def run_outputs(
    transcript: Transcript,
    *,
    inline_images: bool = False,
    metadata: dict[str, Any] | None = None,
) -> list[Bundle]:
    """The whole run as display outputs, in order; the first carries ``metadata``.

    Without ``inline_images``: HTML segments separated by real image outputs. With it: one
    bundle, the images embedded in the HTML (and listed in the text forms).
    """
    bundles: list[Bundle] = []
    pending: list[_Piece] = []
    for piece in _pieces(transcript, inline_images):
        pending.append(piece)
        if piece.images:
            bundles.append((_bundle(pending), {}))
            pending = []
            for part in piece.images:
                meta = {part.mime_type: {"width": part.width, "height": part.height}}
                bundles.append((_image_bundle(part), meta))
    if inline_images and pending:
        pending[-1].html += _timeline_html(transcript)
    if pending:
        bundles.append((_bundle(pending), {}))
    timeline = None if inline_images else _timeline_bundle(transcript)
    if timeline is not None:
        bundles.append(timeline)
    first_data, _ = bundles[0]
    bundles[0] = (first_data, dict(metadata or {}))
    return bundles


def _timeline_bundle(transcript: Transcript) -> Bundle | None:
    """The run over time as an SVG output (see :meth:`Transcript.timeline`)."""
    timeline = transcript.timeline()
    if timeline is None:
        return None
    return (timeline._repr_mimebundle_(), {})


def _timeline_html(transcript: Transcript) -> str:
    timeline = transcript.timeline()
    return "" if timeline is None else timeline.html()


def _with_images(piece: _Piece) -> list[Bundle]:
    bundles: list[Bundle] = [(_bundle([piece]), {})] if piece.html else []
    for part in piece.images:
        meta = {part.mime_type: {"width": part.width, "height": part.height}}
        bundles.append((_image_bundle(part), meta))
    return bundles


def head_outputs(transcript: Transcript) -> list[Bundle]:
    """The prompt line of a run, as one output (for views that show a run piece by piece)."""
    return _with_images(_head(transcript))


def block_outputs(block: Block, transcript: Transcript) -> list[Bundle]:
    """One block as outputs: its HTML (with text twins), then its images."""
    return _with_images(_piece(block, transcript, False))


def tail_outputs(transcript: Transcript, metadata: dict[str, Any] | None = None) -> list[Bundle]:
    """The timeline, when the run is worth one, then the error (if any) and the footer, which
    carries the run's ``metadata`` (the last output of a run holds its record)."""
    data, _ = _with_images(_tail(transcript))[0]
    timeline = _timeline_bundle(transcript)
    exchanges = _exchanges_piece(transcript)
    seen: list[Bundle] = [(_bundle([exchanges]), {})] if exchanges is not None else []
    return [*seen, *([timeline] if timeline else []), (data, dict(metadata or {}))]


def run_markdown(transcript: Transcript) -> str:
    """The whole run as one Markdown text (images listed)."""
    return "\n\n".join(p.markdown for p in _pieces(transcript, True) if p.markdown)


def run_plain(transcript: Transcript) -> str:
    """The whole run as plain text."""
    return "\n\n".join(p.plain for p in _pieces(transcript, True) if p.plain)
