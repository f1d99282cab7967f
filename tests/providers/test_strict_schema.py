"""strict_schema: the visible rewrite OpenAI strict mode needs, its refusals, and undoing nulls."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from nbagent.errors import ToolDefinitionError
from nbagent.providers import strict_schema
from nbagent.providers._strict import drop_added_nulls


def test_objects_are_closed_and_optional_properties_become_nullable() -> None:
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name"},
            "days": {"type": "integer", "default": 3},
            "units": {"type": "string", "enum": ["C", "F"]},
            "tags": {
                "type": "array",
                "items": {"type": "object", "properties": {"k": {"type": "string"}}},
            },
            "note": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "maybe": {"type": ["string", "null"]},
            "place": {"$ref": "#/$defs/place"},
            "fixed": {"const": "x"},
        },
        "required": ["city"],
        "$defs": {
            "place": {
                "type": "object",
                "properties": {"lat": {"type": "number"}},
                "required": ["lat"],
            }
        },
    }
    original = copy.deepcopy(schema)
    assert strict_schema(schema) == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name"},
            "days": {"type": ["integer", "null"], "description": "(default: 3)"},
            "units": {"type": ["string", "null"], "enum": ["C", "F", None]},
            "tags": {
                "type": ["array", "null"],
                "items": {
                    "type": "object",
                    "properties": {"k": {"type": ["string", "null"]}},
                    "required": ["k"],
                    "additionalProperties": False,
                },
            },
            "note": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
            "maybe": {"type": ["string", "null"]},
            "place": {"anyOf": [{"$ref": "#/$defs/place"}, {"type": "null"}]},
            "fixed": {"anyOf": [{"const": "x"}, {"type": "null"}]},
        },
        "required": ["city", "days", "units", "tags", "note", "maybe", "place", "fixed"],
        "additionalProperties": False,
        "$defs": {
            "place": {
                "type": "object",
                "properties": {"lat": {"type": "number"}},
                "required": ["lat"],
                "additionalProperties": False,
            }
        },
    }
    assert schema == original  # the input is never changed


@pytest.mark.parametrize("schema", [None, {}])
def test_empty_schemas_become_closed_empty_objects(schema: Any) -> None:
    assert strict_schema(schema) == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


@pytest.mark.parametrize(
    ("schema", "where", "what"),
    [
        ({"type": "array"}, "/", "root of a strict schema must be an object"),
        (
            {"type": "object", "additionalProperties": {"type": "integer"}},
            "/",
            "additionalProperties must be false",
        ),
        (
            {"type": "object", "additionalProperties": True},
            "/",
            "additionalProperties must be false",
        ),
        (
            {"type": "object", "patternProperties": {"^x": {}}},
            "/",
            "'patternProperties' is not supported",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"oneOf": [{"type": "string"}]}},
                "required": ["a"],
            },
            "/properties/a",
            "'oneOf' is not supported in strict mode (use anyOf)",
        ),
        (
            {"type": "object", "properties": {"a/b": {"type": "string", "maxLength": 3}}},
            "/properties/a~1b",
            "'maxLength'",
        ),
        ({"type": "object", "properties": {"a": {}}}, "/properties/a", "of any type"),
        (
            {"type": "object", "properties": {"a": {"description": "anything"}}},
            "/properties/a",
            "of any type",
        ),
        (
            {"type": "object", "properties": {"settings": {"type": "object"}}},
            "/properties/settings",
            "free-form object",
        ),
        (
            {"type": "object", "properties": {"s": {"type": "array", "items": {"type": "object"}}}},
            "/properties/s/items",
            "free-form object",
        ),
        ({"type": "object", "properties": {"a": True}}, "/properties/a", "boolean schemas"),
        (
            {"type": "object", "properties": {"a": {"type": "array", "items": [{}]}}},
            "/properties/a/items",
            "tuple-form",
        ),
    ],
)
def test_schemas_that_cannot_be_strict_are_refused(schema: Any, where: str, what: str) -> None:
    with pytest.raises(ToolDefinitionError) as raised:
        strict_schema(schema, tool="book")
    message = str(raised.value)
    assert message.startswith("tool 'book' cannot be made strict for OpenAI")
    assert f"at {where};" in message and what in message and "strict=False" in message


SCHEMA = {
    "type": "object",
    "properties": {
        "a": {"type": "string"},
        "b": {"type": ["string", "null"]},
        "c": {"type": "string"},
        "items": {"type": "array", "items": {"$ref": "#/$defs/item"}},
        "opt": {"anyOf": [{"$ref": "#/$defs/item"}, {"type": "null"}]},
    },
    "required": ["c"],
    "$defs": {
        "item": {
            "type": "object",
            "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
            "required": ["x"],
        }
    },
}


@pytest.mark.parametrize(
    ("sent", "expected"),
    [
        (
            {"a": None, "b": None, "c": None},
            {"b": None, "c": None},
        ),  # required nulls stay (and fail later)
        (
            {"c": "x", "items": [{"x": 1, "y": None}, {"x": None, "y": 2}]},
            {"c": "x", "items": [{"x": 1}, {"x": None, "y": 2}]},
        ),
        ({"c": "x", "opt": {"x": 1, "y": None}}, {"c": "x", "opt": {"x": 1}}),
        ({"c": "x", "zzz": None}, {"c": "x", "zzz": None}),  # unknown keys are left for validation
    ],
)
def test_drop_added_nulls(sent: dict[str, Any], expected: dict[str, Any]) -> None:
    assert json.loads(drop_added_nulls(json.dumps(sent), SCHEMA)) == expected


def test_drop_added_nulls_leaves_other_text_alone() -> None:
    assert drop_added_nulls('{"c": "x"}', SCHEMA) == '{"c": "x"}'  # nothing removed: unchanged text
    assert drop_added_nulls("not json", SCHEMA) == "not json"
    assert drop_added_nulls("[1]", SCHEMA) == "[1]"
