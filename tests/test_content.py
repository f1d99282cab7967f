"""Results and images: what reaches the model is checked, downscaled and never a bomb."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest
from PIL import Image

from nbagent import ImagePart, ToolResult, image_result, text_and_image_result, text_result
from nbagent.content import (
    IMAGE_MAX_BYTES,
    IMAGE_MAX_SIDE,
    TextPart,
    checked_image,
    image_part,
    to_tool_result,
    validate_result,
)
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


# --- hand-built images are checked like any other ---------------------------------------


@pytest.mark.parametrize(
    ("part", "fragment"),
    [
        (ImagePart(b"not a png", "image/png"), "does not decode"),
        (ImagePart(png()[:40], "image/png"), "does not decode"),
        (ImagePart(png(), "image/jpeg"), "not the declared image/jpeg"),
    ],
)
def test_validate_result_decode_checks_hand_built_images(part: ImagePart, fragment: str) -> None:
    with pytest.raises(ImageError, match=fragment):
        validate_result(ToolResult((TextPart("see"), part)))
    with pytest.raises(ImageError, match=fragment):
        checked_image(part)


def test_a_bad_image_in_a_given_conversation_names_its_message() -> None:
    # Agent(messages=...) said "the prompt's image (part 0)" for any message, and nothing at all
    # about where a bad image in a tool result was
    from nbagent import Agent
    from nbagent.messages import AssistantMessage, ToolMessage, ToolResultPart, UserMessage
    from nbagent.tools import ToolCall

    bad = ImagePart(b"not a png", "image/png")
    ok = UserMessage((TextPart("hi"),))
    with pytest.raises(ImageError, match=r"^message 2 of the conversation's image \(part 0\)"):
        Agent(messages=[ok, AssistantMessage((TextPart("yes"),)), UserMessage((bad,))])
    call = AssistantMessage((ToolCall("c1", "draw", "{}"),))
    answer = ToolMessage((ToolResultPart("c1", "draw", (bad,)),))
    with pytest.raises(ImageError, match=r"^message 2 of the conversation: .* call c1 "):
        Agent(messages=[ok, call, answer])


def test_hand_built_bomb_is_refused() -> None:
    buffer = io.BytesIO()
    Image.new("1", (20000, 20000)).save(buffer, format="PNG")
    with pytest.raises(ImageError, match="decompression bomb"):
        checked_image(ImagePart(buffer.getvalue(), "image/png", 1, 1))


def test_valid_hand_built_image_passes_unchanged_or_downscaled() -> None:
    good = ImagePart(png(), "image/png", 8, 6)
    result = ToolResult((good,))
    assert validate_result(result) is result
    wide = ImagePart(png(IMAGE_MAX_SIDE * 2, 10), "image/png")
    [scaled] = validate_result(ToolResult((wide,))).images
    assert scaled.width == IMAGE_MAX_SIDE
    assert image_part(scaled.data).width == IMAGE_MAX_SIDE  # really re-encoded


def test_images_too_many_bytes_are_downscaled_to_fit() -> None:
    noisy = Image.effect_noise((IMAGE_MAX_SIDE, IMAGE_MAX_SIDE), 120).convert("RGB")
    buffer = io.BytesIO()
    noisy.save(buffer, format="PNG")
    assert len(buffer.getvalue()) > IMAGE_MAX_BYTES
    part = image_part(buffer.getvalue())
    assert len(part.data) <= IMAGE_MAX_BYTES and part.width < IMAGE_MAX_SIDE


# --- results render the same in every process ---------------------------------------------


VALUES = """[
    {"pear", "apple", "fig", "kiwi", "plum", "lime"},
    frozenset({"b", "a", "c"}),
    {"k": {"z", "y", "x"}, "n": [{3, 1, 2}]},
    {1, "a", 2.5, None, "b"},
    {("t", 1), ("s", 2)},
]"""
SCRIPT = (
    "from nbagent.content import to_tool_result\n"
    f"for value in {VALUES}:\n"
    "    print(to_tool_result(value).text)\n"
)


def test_sets_render_deterministically_across_hash_seeds() -> None:
    outputs = set()
    for seed in ("1", "2", "3", "4"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True, env=env
        )
        outputs.add(done.stdout)
    assert len(outputs) == 1, outputs
    lines = outputs.pop().splitlines()
    assert lines[0] == '["apple", "fig", "kiwi", "lime", "pear", "plum"]'
    assert lines[2] == '{"k": ["x", "y", "z"], "n": [[1, 2, 3]]}'


def test_reprs_lose_their_memory_addresses() -> None:
    class Thing:
        pass

    text = to_tool_result({"thing": Thing(), "f": print}).text
    assert "0x" not in text and "Thing object" in text


def test_cyclic_values_do_not_break_results() -> None:
    loop: list[object] = [1]
    loop.append(loop)
    assert to_tool_result(loop).text == '[1, "..."]'


def test_a_pyplot_figure_is_captured_once_then_closed() -> None:
    """Else Jupyter's inline backend draws it again under the next cell."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    from nbagent.content import to_tool_result

    figure, axes = plt.subplots()
    axes.plot([1, 3, 2])
    number = figure.number
    assert number in plt.get_fignums()
    result = to_tool_result(figure)
    assert result.images and result.images[0].mime_type == "image/png"
    assert number not in plt.get_fignums()
    assert result.value is figure  # the person still gets the figure itself
    standalone = Figure()
    standalone.add_subplot().plot([1, 2])
    assert to_tool_result(standalone).images  # not pyplot's: nothing to close, no error
