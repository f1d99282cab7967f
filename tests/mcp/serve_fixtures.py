"""The conformance suite's fixture tools for its server scenarios, as notebook tools.

A test kernel runs this file as a cell's code (tests/mcp/test_serve_conformance.py), so these
are tools defined in a notebook, served by ``%agent serve``'s own path.
"""

import time

from nbagent import ToolContext, image_result, tool

# 1x1 red pixel (the suite's own suggestion)
RED_PIXEL = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108020000009077"
    "53de0000000c4944415408d763f8cfc000000301010018dd8db00000000049454e44ae426082"
)


@tool
def test_simple_text() -> str:
    """Returns simple text."""
    return "This is a simple text response for testing."


@tool
def test_image_content() -> object:
    """Returns an image."""
    return image_result(RED_PIXEL, "image/png")


@tool
def test_error_handling() -> str:
    """Always fails."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@tool
def test_tool_with_progress(context: ToolContext) -> str:
    """Reports progress three times, then finishes."""
    for fraction in (0.0, 0.5, 1.0):
        context.update(fraction)
        time.sleep(0.05)
    return "Progress complete"


@tool(
    schema={
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
            }
        },
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"},
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": False,
    }
)
def json_schema_2020_12_tool(**arguments: object) -> str:
    """Tool with JSON Schema 2020-12 features."""
    return "ok"
