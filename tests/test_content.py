"""Results and images: what reaches the model is checked, downscaled and never a bomb."""

from __future__ import annotations

import io
import json

import pytest
from PIL import Image

from nbagent import ImagePart, ToolResult, image_result, text_and_image_result, text_result
from nbagent.content import IMAGE_MAX_SIDE, image_part, to_tool_result, validate_result
from nbagent.errors import ImageError, ResultError


def png(width: int = 8, height: int = 6, mode: str = "RGB") -> bytes:
    buffer = io.BytesIO()
    Image.new(mode, (width, height), "red" if mode == "RGB" else 0).save(buffer, format="PNG")
    return buffer.getvalue()


def test_text_result() -> None:
    result = text_result("hello", terminate=True)
    assert result.text == "hello" and result.terminate and not result.is_error


def test_image_bytes_are_checked_and_kept() -> None:
    data = png()
    result = image_result(data, "image/png")
    [part] = result.content
    assert isinstance(part, ImagePart)
    assert part.data == data and (part.width, part.height) == (8, 6)


def test_mime_type_must_match_the_bytes() -> None:
    with pytest.raises(ImageError, match="image/png, not the declared image/jpeg"):
        image_part(png(), "image/jpeg")


@pytest.mark.parametrize("data", [b"", b"not an image", png()[:30]])
def test_undecodable_images_are_refused(data: bytes) -> None:
    with pytest.raises(ImageError):
        image_part(data)


def test_oversize_images_are_downscaled() -> None:
    part = image_part(png(IMAGE_MAX_SIDE * 2, 100))
    assert part.width == IMAGE_MAX_SIDE and part.height == 50
    with Image.open(io.BytesIO(part.data)) as decoded:
        assert decoded.size == (IMAGE_MAX_SIDE, 50)


def test_decompression_bomb_is_refused_before_decoding() -> None:
    # a 1-bit PNG of 20000 x 20000 pixels is small on disk but 400 megapixels
    buffer = io.BytesIO()
    Image.new("1", (20000, 20000)).save(buffer, format="PNG")
    assert len(buffer.getvalue()) < 2_000_000
    with pytest.raises(ImageError, match="decompression bomb"):
        image_part(buffer.getvalue())


def test_pil_image_and_caption() -> None:
    image = Image.new("RGBA", (4, 4))
    result = text_and_image_result("a square", image)
    assert result.text == "a square"
    assert result.images[0].mime_type == "image/png"
    jpeg = image_part(image, "image/jpeg")  # RGBA is converted, not refused
    assert jpeg.mime_type == "image/jpeg"


class Frame:
    """DataFrame-like: has to_string."""

    def to_string(self) -> str:
        return "a  b\n1  2"


class Figure:
    def savefig(self, buffer: io.BytesIO, **kwargs: object) -> None:
        buffer.write(png())


def test_to_tool_result_covers_what_tools_return() -> None:
    assert to_tool_result("x").text == "x"
    assert to_tool_result({"a": [1, 2]}).text == json.dumps({"a": [1, 2]})
    frame = Frame()
    table = to_tool_result(frame)
    assert table.text == "a  b\n1  2" and table.value is frame
    assert to_tool_result(Figure()).images[0].mime_type == "image/png"
    assert to_tool_result(Image.new("RGB", (2, 2))).images
    assert "no output" in to_tool_result(None).text
    same = text_result("y")
    assert to_tool_result(same) is same


def test_validate_result() -> None:
    assert validate_result(text_result("ok")).text == "ok"
    with pytest.raises(ResultError):
        validate_result("just a string")
    with pytest.raises(ResultError):
        validate_result(ToolResult(("raw",)))  # type: ignore[arg-type]
    with pytest.raises(ResultError):
        validate_result(ToolResult((ImagePart(b"", "image/png"),)))
