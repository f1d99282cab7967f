"""A served tool and its result as MCP sees them: the listing (strict schema, title,
description, MCP's annotations and output schema) and the content (text, images,
``structuredContent`` when the tool declares an output schema)."""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

from ...content import ImagePart, TextPart, ToolResult

if TYPE_CHECKING:
    from ...tools import Tool

__all__ = ["error_content", "mcp_result", "mcp_tool"]


def error_content(text: str) -> Any:
    """A tool error the client reads."""
    import mcp_types as types

    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def mcp_tool(found: Tool) -> Any:
    """``found`` as MCP lists it: name, title, description, the strict input schema, and
    ``provider_options["mcp"]``'s ``annotations`` and ``outputSchema`` when it has them."""
    import mcp_types as types

    extra = found.provider_options.get("mcp") if found.provider_options else None
    extra = extra if isinstance(extra, dict) else {}
    annotations = extra.get("annotations")
    output_schema = extra.get("outputSchema")
    schema = dict(found.input_schema or {"type": "object", "properties": {}})
    return types.Tool(
        name=found.name,
        title=found.title,
        description=found.description or None,
        input_schema=schema,
        output_schema=dict(output_schema) if isinstance(output_schema, dict) else None,
        annotations=types.ToolAnnotations(**_annotations(annotations)) if annotations else None,
    )


_HINTS = {
    "title": "title",
    "readOnlyHint": "read_only_hint",
    "destructiveHint": "destructive_hint",
    "idempotentHint": "idempotent_hint",
    "openWorldHint": "open_world_hint",
}


def _annotations(given: Any) -> dict[str, Any]:
    if not isinstance(given, dict):
        return {}
    return {_HINTS[k]: v for k, v in given.items() if k in _HINTS}


def mcp_result(result: ToolResult, found: Tool | None = None) -> Any:
    """A tool's result as MCP content: its text and images, and ``structuredContent`` when the
    tool declares an output schema and its value is a JSON object."""
    import mcp_types as types

    content: list[Any] = []
    for part in result.content:
        if isinstance(part, TextPart):
            content.append(types.TextContent(type="text", text=part.text))
        elif isinstance(part, ImagePart):
            data = base64.b64encode(part.data).decode("ascii")
            content.append(types.ImageContent(type="image", data=data, mime_type=part.mime_type))
    structured = None
    extra = found.provider_options.get("mcp") if found is not None else None
    if isinstance(extra, dict) and isinstance(extra.get("outputSchema"), dict):
        value = result.value
        if isinstance(value, dict) and not result.is_error:
            try:
                structured = json.loads(json.dumps(value, allow_nan=False))
            except (TypeError, ValueError):
                structured = None
            if structured is not None and not content:
                content.append(types.TextContent(type="text", text=json.dumps(structured)))
    return types.CallToolResult(
        content=content, is_error=result.is_error, structured_content=structured
    )
