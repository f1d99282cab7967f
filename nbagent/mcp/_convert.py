"""MCP tools as nbagent Tools, and MCP call results as ToolResults.

Names: a server's tool ``read-file`` on the server named ``fs`` becomes ``fs__read-file``. A name
that holds characters providers refuse (anything but letters, digits, ``_`` and ``-``), or that
would be longer than 64 characters, has them replaced by ``_``, is shortened, and gets ``_`` and
six hex digits of a hash of the original name, so that two server names do not meet in one
(a server may still name a tool like a made-safe name: the connection keeps the first).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..content import ImagePart, Part, TextPart, ToolResult, image_part
from ..errors import ImageError, NbagentError, SchemaError
from ..tools import Tool, ToolContext, validate_tools
from ._dialect import original_pointer, to_draft_2020_12
from ._limits import MCPLimits

if TYPE_CHECKING:
    import mcp_types

__all__ = ["check_server_name", "make_tool", "tool_name", "tool_result"]

_SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,23}$")
_TOOL_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_NAME_LIMIT = 64
_IMAGE_MIMES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})

Call = Callable[[str, dict[str, Any], ToolContext], Awaitable[ToolResult]]


def check_server_name(name: object) -> str:
    """The server name, or ValueError saying what a name may be (it prefixes tool names)."""
    if (
        not isinstance(name, str)
        or not _SERVER_NAME.match(name)
        or "__" in name
        or name.endswith("_")
    ):
        raise ValueError(
            f"an MCP server name is 1-24 letters, digits, '-' or '_' (not '__', not ending in "
            f"'_'), starting with a letter or digit; not {name!r}"
        )
    return name


def tool_name(server: str, name: str) -> str:
    """The nbagent name of the MCP tool ``name`` on ``server``: ``server__name`` (see above)."""
    plain = f"{server}__{name}"
    if len(plain) <= _NAME_LIMIT and not _TOOL_CHARS.search(name) and name:
        return plain
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:6]
    cleaned = _TOOL_CHARS.sub("_", name)
    room = _NAME_LIMIT - len(server) - 2 - 7
    return f"{server}__{cleaned[:room]}_{digest}"


def _shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [... {len(text) - limit:,} more characters cut]"


def make_tool(
    server: str,
    listed: mcp_types.Tool,
    call: Call,
    *,
    needs_approval: bool,
    limits: MCPLimits,
) -> Tool:
    """The nbagent Tool for one listed MCP tool; raises :class:`NbagentError` naming server,
    tool and (for a schema) the JSON pointer when it cannot be registered."""
    label = f"tool {listed.name!r} of MCP server {server!r}"
    try:
        size = len(json.dumps(listed.input_schema))
    except (TypeError, ValueError, RecursionError) as exc:
        raise NbagentError(f"{label}: its input schema is not JSON ({exc})") from None
    if size > limits.max_schema_bytes:
        raise NbagentError(
            f"{label}: its input schema is {size:,} bytes of JSON, more than the "
            f"{limits.max_schema_bytes:,} allowed (MCPLimits.max_schema_bytes)"
        )
    _check_runnable(label, listed)
    renames: list[tuple[str, str]] = []
    try:
        schema, renames = to_draft_2020_12(listed.input_schema)
        made = _tool(server, listed, schema, call, needs_approval, limits)
        validate_tools([made])
    except SchemaError as exc:
        where = original_pointer(exc.pointer, renames) or "(the schema root)"
        reason = f"{label}: {_unlabelled(exc.reason)} (in its input schema)"
        raise SchemaError(reason, where) from None
    except NbagentError as exc:
        raise NbagentError(f"{label}: {_unlabelled(str(exc))}") from None
    except RecursionError:
        raise NbagentError(f"{label}: its input schema nests too deeply to be used") from None
    return made


def _check_runnable(label: str, listed: mcp_types.Tool) -> None:
    """Refuse a tool every call of which would fail: one that runs only as an MCP task (the
    SDK's client has no tasks), or whose output schema the SDK cannot use to check results."""
    execution = getattr(listed, "execution", None)
    if getattr(execution, "task_support", None) == "required":
        raise NbagentError(
            f'{label}: it runs only as an MCP task (execution.taskSupport is "required"), '
            "which nbagent does not support, so every call would fail"
        )
    output = listed.output_schema
    if output is None:
        return
    from jsonschema.exceptions import SchemaError as InvalidSchema
    from jsonschema.validators import validator_for

    try:
        validator_for(output).check_schema(output)  # what the SDK does before each check
    except InvalidSchema as exc:
        where = "/".join(str(part) for part in exc.path) or "(the schema root)"
        raise NbagentError(
            f"{label}: its output schema is not valid JSON Schema ({_shorten(exc.message, 200)}"
            f", at {where}), so the MCP SDK would refuse every result it returns"
        ) from None
    except RecursionError:
        raise NbagentError(f"{label}: its output schema nests too deeply to be used") from None


def _unlabelled(reason: str) -> str:
    """validate_tools prefixes ``tool 'name':``; the caller names the tool its own way."""
    return re.sub(r"^tool '[^']*': ", "", reason)


def _tool(
    server: str,
    listed: mcp_types.Tool,
    schema: Any,
    call: Call,
    needs_approval: bool,
    limits: MCPLimits,
) -> Tool:
    remote = listed.name

    async def execute(context: ToolContext) -> ToolResult:
        return await call(remote, dict(context.input), context)

    title = listed.title or (listed.annotations.title if listed.annotations else None)
    return Tool(
        name=tool_name(server, remote),
        description=_shorten(listed.description or "", limits.max_description_chars),
        input_schema=schema,
        title=_shorten(title, 200) if title else None,
        execute=execute,
        needs_approval=needs_approval,
        # The call times out on the server's side first, with a clearer message; this is a
        # backstop for a connection whose own loop stopped answering.
        timeout=limits.max_call_timeout + 5.0,
    )


# --- results -------------------------------------------------------------------------------------


class _Budget:
    """What is left of one result's allowance of characters and images."""

    def __init__(self, limits: MCPLimits) -> None:
        self.chars = limits.max_result_chars
        self.images = limits.max_result_images
        self.cut = 0
        self.limits = limits

    def text(self, text: str) -> TextPart | None:
        kept = text[: max(self.chars, 0)]
        self.cut += len(text) - len(kept)
        self.chars -= len(kept)
        return TextPart(kept) if kept else None


def tool_result(result: mcp_types.CallToolResult, limits: MCPLimits) -> ToolResult:
    """An MCP ``CallToolResult`` as a ToolResult: text, images, resources, structured content,
    ``isError``; bounded by ``limits``, never raising on odd content (it becomes a note)."""
    budget = _Budget(limits)
    parts: list[Part] = []
    blocks: Sequence[Any] = result.content
    for block in blocks[: limits.max_result_parts]:
        kind = getattr(block, "type", None)
        if kind == "text":
            _add(parts, budget.text(block.text))
        else:
            _add(parts, _media(block, kind, budget))
    if len(blocks) > limits.max_result_parts:
        extra = len(blocks) - limits.max_result_parts
        parts.append(TextPart(f"[{extra:,} more content blocks left out]"))
    if result.structured_content is not None:
        _add(parts, budget.text(new_in_structured(result.structured_content, blocks) or ""))
    if budget.cut:
        parts.append(
            TextPart(
                f"[... {budget.cut:,} more characters were cut: nbagent keeps at most "
                f"{limits.max_result_chars:,} characters of an MCP tool's result]"
            )
        )
    if not parts:
        empty = "failed without saying why" if result.is_error else "returned no content"
        parts.append(TextPart(f"(the tool {empty})"))
    return ToolResult(tuple(parts), is_error=bool(result.is_error))


# --- structured content: only what the blocks do not carry -----------------------------------

_REPEAT = 64  # a carried string longer than this is not sent again, only pointed at
_DEEPEST = 64


def new_in_structured(structured: Any, blocks: Sequence[Any]) -> str | None:
    """The structured content as JSON text, for what it adds to the content blocks; None when
    it adds nothing.

    Servers often send the same thing twice: the text block holds the structured content's
    JSON (as the specification asks, for older clients), or the structured content repeats
    the blocks themselves, base64 data included (a filesystem server's ``read_media_file``:
    100,000 characters for one 120 KB PNG the model already sees). A value is carried when it
    equals a block's field (its text, data, URI, MIME type …) or the JSON a text block holds.
    When every value is carried the structured content is left out; otherwise it is sent,
    each long carried string replaced by a note saying which block holds it.
    """
    fields, scalars, documents = _carried(blocks)

    def carried(value: Any, depth: int) -> bool:
        if isinstance(value, str) and value in fields:
            return True
        if isinstance(value, (dict, list)):
            # a text block holding this JSON (compared near the top only: that is where it is)
            if depth <= 2 and any(type(value) is type(d) and value == d for d in documents):
                return True
            if depth > _DEEPEST:
                return False
            items = value.values() if isinstance(value, dict) else value
            return all(carried(item, depth + 1) for item in items)
        return (type(value), value) in scalars

    def pointed(value: Any, depth: int) -> Any:
        if isinstance(value, str) and len(value) > _REPEAT and value in fields:
            return f"[{len(value):,} characters: the same as content block {fields[value] + 1}]"
        if depth > _DEEPEST:
            return value
        if isinstance(value, dict):
            return {k: pointed(v, depth + 1) for k, v in value.items()}
        if isinstance(value, list):
            return [pointed(v, depth + 1) for v in value]
        return value

    try:
        if carried(structured, 0):
            return None
        return json.dumps(pointed(structured, 0), ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return "[structured content that is not JSON]"


def _carried(blocks: Sequence[Any]) -> tuple[dict[str, int], set[tuple[type, Any]], list[Any]]:
    """The strings the content blocks hold (each mapped to its block's index), and the JSON
    their texts hold: scalars (as ``(type, value)``, so that ``1`` is not ``True``) and
    documents."""
    fields: dict[str, int] = {}
    scalars: set[tuple[type, Any]] = set()
    documents: list[Any] = []
    for index, block in enumerate(blocks):
        resource = getattr(block, "resource", None)
        for owner in (block, resource):
            for name in _BLOCK_FIELDS:
                value = getattr(owner, name, None)
                if isinstance(value, str) and value:
                    fields.setdefault(value, index)
        text = getattr(block, "text", None)
        if not isinstance(text, str):
            continue
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, (dict, list)):
            documents.append(value)
        elif isinstance(value, (str, int, float, bool)) or value is None:
            scalars.add((type(value), value))
    return fields, scalars, documents


_BLOCK_FIELDS = ("type", "text", "data", "mime_type", "uri", "name", "title", "description", "blob")


def _add(parts: list[Part], part: Part | None) -> None:
    if part is not None:
        parts.append(part)


def _media(block: Any, kind: object, budget: _Budget) -> Part | None:
    """One non-text content block: an image part when it is a usable image, else a note."""
    if kind == "image":
        return _image(block.data, block.mime_type, "image", budget)
    if kind == "audio":
        size = len(block.data) * 3 // 4
        return budget.text(f"[audio ({block.mime_type}, about {size:,} bytes): not sent]")
    if kind == "resource_link":
        about = f": {block.description}" if block.description else ""
        return budget.text(f"[resource link {block.name} <{block.uri}>{about}]")
    if kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        if isinstance(text, str):
            return budget.text(f"[resource <{resource.uri}>]\n{text}")
        mime = resource.mime_type or "application/octet-stream"
        if mime in _IMAGE_MIMES:
            return _image(resource.blob, mime, f"resource <{resource.uri}>", budget)
        size = len(resource.blob) * 3 // 4
        return budget.text(f"[resource <{resource.uri}> ({mime}, about {size:,} bytes): not sent]")
    return budget.text(f"[content of type {str(kind)[:40]!r}: not understood, left out]")


def _image(data: str, mime: str | None, what: str, budget: _Budget) -> Part | None:
    if budget.images <= 0:
        return budget.text(
            f"[{what} left out: nbagent keeps at most {budget.limits.max_result_images} "
            "images of an MCP tool's result]"
        )
    try:
        raw = _without_broken_ancillary_chunks(base64.b64decode(data, validate=True))
        part: ImagePart = image_part(raw, mime if mime in _IMAGE_MIMES else None)
    except (binascii.Error, ValueError, ImageError) as exc:
        reason = re.sub(r" at 0x[0-9a-fA-F]+", "", str(exc))
        return budget.text(f"[{what} ({mime}) could not be used: {reason}]")
    budget.images -= 1
    return part


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _without_broken_ancillary_chunks(data: bytes) -> bytes:
    """A PNG with its ancillary chunks whose checksum fails left out, as the PNG specification
    lets a decoder do (Pillow refuses the whole image instead). The reference server's own
    image has such a colour-profile chunk. Critical chunks are never touched: a broken one
    still fails the decode check."""
    import struct
    import zlib

    if not data.startswith(_PNG_SIGNATURE):
        return data
    kept = [_PNG_SIGNATURE]
    position = len(_PNG_SIGNATURE)
    dropped = False
    while position + 12 <= len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        end = position + 12 + length
        if end > len(data):
            return data  # truncated: leave it to the decode check
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : end - 4]
        (crc,) = struct.unpack(">I", data[end - 4 : end])
        ancillary = bool(kind[0] & 0x20)
        if ancillary and zlib.crc32(kind + body) & 0xFFFFFFFF != crc:
            dropped = True
        else:
            kept.append(data[position:end])
        position = end
        if kind == b"IEND":
            break
    return b"".join(kept) if dropped else data
