"""Content parts (text, images) and the results tools hand back to the model.

A :class:`ToolResult` carries what the *model* reads (``content``) and, separately, what the tool
returned for the *person* (``value``: a DataFrame, a figure, a PIL image …). Front ends render
``value`` when it is set; providers only ever send ``content``.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Union

from .errors import ImageError, ResultError

if TYPE_CHECKING:
    from PIL.Image import Image as PILImage

__all__ = [
    "IMAGE_MAX_BYTES",
    "IMAGE_MAX_SIDE",
    "IMAGE_MAX_PIXELS",
    "ImagePart",
    "Part",
    "Shown",
    "Table",
    "TextPart",
    "ToolResult",
    "error_result",
    "image_part",
    "image_result",
    "checked_image",
    "shown_pieces",
    "text_and_image_result",
    "text_result",
    "to_tool_result",
    "validate_result",
]

#: Longest side sent to a model; larger images are downscaled (providers downscale anyway, and
#: the bytes would cost tokens and time).
IMAGE_MAX_SIDE = 2048
#: Images declaring more pixels than this are refused before decoding (decompression bombs).
IMAGE_MAX_PIXELS = 40_000_000
#: Encoded size sent to a model; a larger image is downscaled until it fits (Anthropic refuses
#: images over 5 MB of base64, which is 3.75 MB of bytes).
IMAGE_MAX_BYTES = 3_750_000

_MIME_BY_FORMAT = {
    "PNG": "image/png",
    "JPEG": "image/jpeg",
    "GIF": "image/gif",
    "WEBP": "image/webp",
}


@dataclass(frozen=True, slots=True)
class TextPart:
    """Plain text, for the model and the person alike.

    ``raw``: in a model's answer, what its adapter must send back with this text (the
    Responses API's message item: its ``phase``, its ``id``); None elsewhere.
    """

    text: str
    raw: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class ImagePart:
    """Encoded image bytes that a provider can send as-is (PNG, JPEG, GIF or WebP)."""

    data: bytes = field(repr=False)
    mime_type: str
    width: int = 0
    height: int = 0

    def __repr__(self) -> str:
        return f"ImagePart({self.mime_type}, {self.width}x{self.height}, {len(self.data)} bytes)"


Part = Union[TextPart, ImagePart]


def image_part(image: bytes | PILImage, mime_type: str | None = None) -> ImagePart:
    """Check that ``image`` decodes, refuse bombs, downscale oversize ones, and wrap it.

    ``image`` is encoded bytes (PNG, JPEG, GIF, WebP) or a PIL image. ``mime_type`` is checked
    against what the bytes really are; a mismatch is an :class:`ImageError`, not a silent lie.
    """
    from PIL import Image

    if isinstance(image, (bytes, bytearray, memoryview)):
        data = bytes(image)
        if not data:
            raise ImageError("image data is empty")
        try:
            with Image.open(io.BytesIO(data)) as probe:
                fmt = probe.format or ""
                width, height = probe.size
                _refuse_bomb(width, height)
                real_mime = _MIME_BY_FORMAT.get(fmt)
                if real_mime is None:
                    raise ImageError(
                        f"unsupported image format {fmt or 'unknown'}: send PNG, JPEG, GIF or WebP"
                    )
                if mime_type is not None and mime_type != real_mime:
                    raise ImageError(f"image data is {real_mime}, not the declared {mime_type}")
                probe.load()  # decodes every byte: truncated or corrupt data fails here
                if max(width, height) <= IMAGE_MAX_SIDE and len(data) <= IMAGE_MAX_BYTES:
                    return ImagePart(data, real_mime, width, height)
                return _encode(probe, real_mime)
        except ImageError:
            raise
        except (Image.DecompressionBombError, OSError, SyntaxError, ValueError) as exc:
            # Pillow names the buffer with its address: the message must read the same in
            # every process (a replay compares tool results), so the address goes.
            raise ImageError(f"image data does not decode: {stable_text(str(exc))}") from None
    if hasattr(image, "size") and hasattr(image, "save"):
        width, height = image.size
        _refuse_bomb(width, height)
        mime = mime_type or "image/png"
        if mime not in _MIME_BY_FORMAT.values():
            raise ImageError(f"cannot encode an image as {mime}: use image/png or image/jpeg")
        return _encode(image, mime)
    raise ImageError(f"expected image bytes or a PIL image, got {type(image).__name__}")


def _refuse_bomb(width: int, height: int) -> None:
    if width * height > IMAGE_MAX_PIXELS:
        raise ImageError(
            f"image of {width}x{height} pixels is larger than {IMAGE_MAX_PIXELS:,} pixels "
            "(possible decompression bomb): downscale it before returning it"
        )
    if width <= 0 or height <= 0:
        raise ImageError("image has no pixels")


def _encode(image: PILImage, mime: str) -> ImagePart:
    side = IMAGE_MAX_SIDE
    fmt = {v: k for k, v in _MIME_BY_FORMAT.items()}[mime]
    if fmt == "JPEG" and image.mode not in ("RGB", "L"):
        image = image.convert("RGB")
    while True:
        scaled = image
        if max(image.size) > side:
            scaled = image.copy()
            scaled.thumbnail((side, side))
        buffer = io.BytesIO()
        scaled.save(buffer, format=fmt)
        if buffer.tell() <= IMAGE_MAX_BYTES:
            return ImagePart(buffer.getvalue(), mime, scaled.size[0], scaled.size[1])
        if side <= 64:
            raise ImageError(
                f"image does not fit in {IMAGE_MAX_BYTES:,} bytes even at {side} pixels a side"
            )
        side = min(side, max(scaled.size)) // 2


def checked_image(part: ImagePart) -> ImagePart:
    """Decode-check an :class:`ImagePart` built by hand, exactly as :func:`image_part` does.

    Returns ``part`` itself when it is a valid image within the bounds, a downscaled copy when it
    is too large, and raises :class:`ImageError` when the bytes do not decode, are a
    decompression bomb, or are not what ``mime_type`` says.
    """
    if not isinstance(part, ImagePart):
        raise ImageError(f"expected an ImagePart, got {type(part).__name__}")
    if not isinstance(part.data, (bytes, bytearray, memoryview)):
        raise ImageError(f"ImagePart.data must be bytes, not {type(part.data).__name__}")
    checked = image_part(bytes(part.data), part.mime_type)
    if checked.data == part.data and (checked.width, checked.height) == (part.width, part.height):
        return part
    return checked


@dataclass(frozen=True)
class ToolResult:
    """What a tool call produced: ``content`` for the model, ``value`` for the person.

    ``is_error`` marks a failure the model should read and react to. ``terminate`` asks the loop
    to stop after this batch (only if every call in the batch terminates successfully).
    """

    content: tuple[Part, ...]
    is_error: bool = False
    terminate: bool = False
    value: Any = field(default=None, compare=False, repr=False)

    @property
    def text(self) -> str:
        """The text parts joined by newlines (images left out)."""
        return "\n".join(p.text for p in self.content if isinstance(p, TextPart))

    @property
    def images(self) -> tuple[ImagePart, ...]:
        """The image parts, in order."""
        return tuple(p for p in self.content if isinstance(p, ImagePart))


@dataclass(frozen=True)
class Table:
    """Rows of plain values to show as a table: every cell is shown as its text."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Shown:
    """One piece of a result as the person sees it; a tuple of them as a result's ``value``
    shows each in order (the model reads the result's ``content``, and its images follow).

    ``kind`` is ``"stdout"`` / ``"stderr"`` (a program's output), ``"text"``, ``"markdown"``
    (made safe before it is shown), ``"table"`` (``value`` a :class:`Table` or a DataFrame),
    ``"code"`` (``value`` the code, ``language`` its language) or ``"error"`` (a traceback).
    ``label`` says what the piece is ("Out", "display 2", "Namespace").
    """

    kind: Literal["stdout", "stderr", "text", "markdown", "table", "code", "error"]
    value: Any
    label: str = ""
    language: str = ""


def shown_pieces(value: Any) -> tuple[Shown, ...] | None:
    """``value`` as pieces to show in order, when it is a tuple of :class:`Shown` (else None)."""
    if isinstance(value, tuple) and value and all(isinstance(v, Shown) for v in value):
        return value
    return None


def text_result(text: str, *, terminate: bool = False, value: Any = None) -> ToolResult:
    """A result the model reads as text."""
    return ToolResult((TextPart(str(text)),), terminate=terminate, value=value)


def image_result(
    image: bytes | PILImage, mime_type: str | None = None, *, terminate: bool = False
) -> ToolResult:
    """A result holding one image (bytes + mime type, or a PIL image); see :func:`image_part`."""
    return ToolResult((image_part(image, mime_type),), terminate=terminate, value=image)


def text_and_image_result(
    text: str, image: bytes | PILImage, mime_type: str | None = None, *, terminate: bool = False
) -> ToolResult:
    """A caption plus one image."""
    return ToolResult((TextPart(text), image_part(image, mime_type)), terminate=terminate)


def error_result(message: str, *, value: Any = None) -> ToolResult:
    """A failure the model can read (``is_error=True``); it never terminates the run."""
    return ToolResult((TextPart(message),), is_error=True, value=value)


def validate_result(result: object) -> ToolResult:
    """Check that ``result`` can be sent to a model: a ToolResult of text and image parts.

    Every image is decode-checked (:func:`checked_image`): one that does not decode, is a bomb,
    or lies about its type raises :class:`ImageError`. Raises :class:`ResultError` naming what
    is wrong; returns the result itself, or a copy whose oversize images were downscaled.
    """
    if not isinstance(result, ToolResult):
        raise ResultError(f"expected a ToolResult, got {type(result).__name__}")
    if not isinstance(result.content, tuple):
        raise ResultError("ToolResult.content must be a tuple of parts")
    parts: list[Part] = []
    for index, part in enumerate(result.content):
        if isinstance(part, TextPart):
            if not isinstance(part.text, str):
                raise ResultError(f"content[{index}] text is not a string")
            parts.append(part)
        elif isinstance(part, ImagePart):
            if not part.data or part.mime_type not in _MIME_BY_FORMAT.values():
                raise ResultError(f"content[{index}] is an empty or unsupported image")
            try:
                parts.append(checked_image(part))
            except ImageError as exc:
                raise ImageError(f"content[{index}]: {exc}") from None
        else:
            raise ResultError(f"content[{index}] is a {type(part).__name__}, not a part")
    if all(new is old for new, old in zip(parts, result.content, strict=True)):
        return result
    return ToolResult(tuple(parts), result.is_error, result.terminate, result.value)


def _close_pyplot_figure(figure: Any) -> None:
    """A pyplot figure is captured once: close it, or Jupyter's inline backend draws it again
    under the next cell (and pyplot keeps it in memory). Figures made with
    ``matplotlib.figure.Figure`` are not pyplot's and are left alone."""
    import sys

    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None or getattr(figure, "number", None) is None:
        return
    try:
        if figure.number in pyplot.get_fignums():
            pyplot.close(figure)
    except Exception:  # a figure-like object that is not matplotlib's: nothing to close
        return


def checked_result(value: Any) -> ToolResult:
    """What a tool returned (or a person wrote in its place at a step-mode pause) as a checked
    ToolResult: :func:`to_tool_result`, then :func:`validate_result` (images decode-checked).
    The loop then bounds it for the model (``result_for_model``)."""
    return validate_result(to_tool_result(value))


def to_tool_result(value: Any) -> ToolResult:
    """Turn whatever a tool returned into a ToolResult, keeping the original as ``value``.

    ``ToolResult`` passes through; ``str`` is text; PIL images, image bytes and figures (objects
    with ``savefig``) become images; DataFrame-like objects (``to_markdown``/``to_string``) become
    a text table; ``None`` says the tool returned nothing; other JSON-able values become JSON.
    """
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, str):
        return ToolResult((TextPart(value),), value=value)
    if value is None:
        return ToolResult((TextPart("(the tool returned no output)"),))
    if isinstance(value, (bytes, bytearray)):
        return ToolResult((image_part(bytes(value)),), value=value)
    if hasattr(value, "save") and hasattr(value, "size") and hasattr(value, "mode"):
        return ToolResult((image_part(value),), value=value)
    if hasattr(value, "savefig"):
        buffer = io.BytesIO()
        value.savefig(buffer, format="png", bbox_inches="tight")
        _close_pyplot_figure(value)
        return ToolResult((image_part(buffer.getvalue()),), value=value)
    if isinstance(value, Sequence) and value and all(isinstance(v, ToolResult) for v in value):
        raise ResultError("return one ToolResult, not a list of them")
    for method in ("to_markdown", "to_string"):
        render = getattr(value, method, None)
        if callable(render) and not isinstance(value, type):
            try:
                return ToolResult((TextPart(str(render())),), value=value)
            except ImportError:  # pandas.to_markdown needs `tabulate`; fall back to to_string
                continue
    try:
        text = json.dumps(_plain(value, 0, set()), ensure_ascii=False)
    except (TypeError, ValueError):
        text = stable_text(repr(value))
    return ToolResult((TextPart(text),), value=value)


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_PLAIN_DEPTH = 100


def stable_text(text: str) -> str:
    """``str()`` of an object without the memory address default reprs carry (differs per run)."""
    return _ADDRESS.sub("", text)


def _plain(value: Any, depth: int, path: set[int]) -> Any:
    """``value`` as JSON-able data that renders the same in every process.

    Sets are sorted (by value, else by their JSON text): their iteration order follows string
    hashes, which change per process. Anything else unknown becomes its ``str()``.
    """
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if depth >= _PLAIN_DEPTH or id(value) in path:
        return "..."
    path.add(id(value))
    try:
        if isinstance(value, Mapping):
            return {
                (k if k is None or isinstance(k, (str, int, float, bool)) else _key(k)): _plain(
                    v, depth + 1, path
                )
                for k, v in value.items()
            }
        if isinstance(value, (list, tuple)):
            return [_plain(v, depth + 1, path) for v in value]
        if isinstance(value, (set, frozenset)):
            items = [_plain(v, depth + 1, path) for v in value]
            try:
                return sorted(items)
            except TypeError:
                return sorted(items, key=_json_text)
        return stable_text(str(value))
    finally:
        path.discard(id(value))


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _key(key: Any) -> str:
    if isinstance(key, frozenset):
        return json.dumps(_plain(key, 0, set()), ensure_ascii=False)
    return stable_text(str(key))
