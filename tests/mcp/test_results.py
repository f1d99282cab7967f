"""MCP content of every kind as a ToolResult, bounded, never raising (the SDK's own models)."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs the extra)")

import mcp_types as types

from nbagent.content import ImagePart
from nbagent.mcp import MCPLimits
from nbagent.mcp._convert import tool_result


def png(color: str = "blue", size: int = 4) -> str:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (size, size), color).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def result(*content: object, **fields: object) -> object:
    return types.CallToolResult(content=list(content), **fields)


def test_every_kind_of_content() -> None:
    mapped = tool_result(
        result(
            types.TextContent(text="hello"),
            types.ImageContent(data=png(), mime_type="image/png"),
            types.AudioContent(data=base64.b64encode(b"\0" * 300).decode(), mime_type="audio/wav"),
            types.ResourceLink(name="notes", uri="file:///notes.txt", description="my notes"),
            types.EmbeddedResource(
                resource=types.TextResourceContents(
                    uri="mem://a", text="inside", mime_type="text/plain"
                )
            ),
            types.EmbeddedResource(
                resource=types.BlobResourceContents(
                    uri="mem://b", blob=png("red"), mime_type="image/png"
                )
            ),
            types.EmbeddedResource(
                resource=types.BlobResourceContents(
                    uri="mem://c", blob="AAAA", mime_type="application/zip"
                )
            ),
        ),
        MCPLimits(),
    )
    kinds = [type(p).__name__ for p in mapped.content]
    assert kinds == [
        "TextPart",
        "ImagePart",
        "TextPart",
        "TextPart",
        "TextPart",
        "ImagePart",
        "TextPart",
    ]
    text = mapped.text
    assert "[audio (audio/wav, about 300 bytes): not sent]" in text
    assert "[resource link notes <file:///notes.txt>: my notes]" in text
    assert "[resource <mem://a>]\ninside" in text
    assert "[resource <mem://c> (application/zip, about 3 bytes): not sent]" in text
    assert not mapped.is_error


def test_structured_content_alone_becomes_json_text_and_is_error_is_kept() -> None:
    mapped = tool_result(result(structured_content={"t": 21.5}, is_error=True), MCPLimits())
    assert mapped.text == '{"t": 21.5}' and mapped.is_error
    assert tool_result(result(), MCPLimits()).text == "(the tool returned no content)"
    failed = tool_result(result(is_error=True), MCPLimits())  # a failure that says nothing
    assert failed.is_error and failed.text == "(the tool failed without saying why)"


def test_bad_images_become_notes_and_images_beyond_the_limit_are_left_out() -> None:
    mapped = tool_result(
        result(
            types.ImageContent(data="not base64!", mime_type="image/png"),
            types.ImageContent(
                data=base64.b64encode(b"GIF89a garbage").decode(), mime_type="image/gif"
            ),
            types.ImageContent(data=png("green"), mime_type="image/jpeg"),  # lies about its type
            types.ImageContent(data=png(), mime_type="image/png"),
            types.ImageContent(data=png(), mime_type="image/png"),
        ),
        MCPLimits(max_result_images=1),
    )
    notes = [p.text for p in mapped.content if not isinstance(p, ImagePart)]  # type: ignore[union-attr]
    assert len(mapped.images) == 1
    assert "could not be used" in notes[0] and "could not be used" in notes[1]
    assert "not the declared image/jpeg" in notes[2]
    assert "at most 1 images" in notes[3]
    assert all(
        " at 0x" not in note for note in notes
    )  # no memory addresses in what the model reads


def test_text_and_blocks_are_bounded() -> None:
    many = [types.TextContent(text="ab") for _ in range(10)]
    mapped = tool_result(result(*many), MCPLimits(max_result_parts=3, max_result_chars=5))
    assert [p.text for p in mapped.content] == [  # type: ignore[union-attr]
        "ab",
        "ab",
        "a",
        "[7 more content blocks left out]",
        "[... 1 more characters were cut: nbagent keeps at most 5 characters of an MCP "
        "tool's result]",
    ]


# --- structured content: sent for what it adds, never the same bytes twice ------------------


def test_structured_content_that_repeats_the_text_is_left_out() -> None:
    weather = {"temperature": 22.5, "conditions": "sunny"}
    text = types.TextContent(text=json.dumps(weather, indent=2))  # as the specification asks
    mapped = tool_result(result(text, structured_content=weather), MCPLimits())
    assert mapped.text == json.dumps(weather, indent=2)
    wrapped = tool_result(  # the Python SDK wraps a plain return value
        result(types.TextContent(text="42"), structured_content={"result": 42}), MCPLimits()
    )
    assert wrapped.text == "42"


def test_structured_content_that_repeats_an_image_is_left_out_and_what_it_adds_is_kept() -> None:
    data = png("red", 64)
    image = types.ImageContent(data=data, mime_type="image/png")
    mirror = {"content": [{"type": "image", "data": data, "mimeType": "image/png"}]}
    alone = tool_result(result(image, structured_content=mirror), MCPLimits())
    assert [type(p) for p in alone.content] == [ImagePart] and alone.text == ""
    more = {**mirror, "width": 64}
    kept = tool_result(result(image, structured_content=more), MCPLimits())
    assert [type(p).__name__ for p in kept.content] == ["ImagePart", "TextPart"]
    sent = json.loads(kept.text)
    assert sent["width"] == 64 and data not in kept.text
    assert sent["content"][0]["data"] == f"[{len(data):,} characters: the same as content block 1]"


def test_structured_content_beside_a_text_that_does_not_hold_it_is_sent() -> None:
    rows = {"rows": [{"id": 1}, {"id": 2}]}
    mapped = tool_result(
        result(types.TextContent(text="Found 2 rows"), structured_content=rows), MCPLimits()
    )
    assert mapped.text == 'Found 2 rows\n{"rows": [{"id": 1}, {"id": 2}]}'


def test_an_image_from_the_filesystem_server_is_sent_once(tmp_path: Path) -> None:
    """`read_media_file` answers with the image and, as structured content, the same image
    again (its base64 included): 100,000 characters of text for a 120 KB PNG."""
    from PIL import Image

    from nbagent.mcp import mcp_server

    from .conftest import by_name, call, filesystem_command

    picture = tmp_path / "noise.png"
    Image.effect_noise((220, 220), 80).convert("RGB").save(picture)
    assert picture.stat().st_size > 100_000
    with mcp_server("fs", filesystem_command(str(tmp_path))) as server:
        read = call(by_name(server, "fs__read_media_file"), {"path": str(picture)})
    assert not read.is_error, read.text
    [image] = read.content
    assert isinstance(image, ImagePart) and (image.width, image.height) == (220, 220)
    assert read.text == ""
