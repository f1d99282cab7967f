"""Unsatisfiable schemas: every kind of contradiction found, at its pointer; nothing that some
value satisfies is ever reported (checked against the whole JSON-Schema-Test-Suite)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nbagent.schema._satisfiable import unsatisfiable


def obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


CONTRADICTIONS = [
    pytest.param(
        obj(x={"type": "string", "minLength": 5, "maxLength": 2}),
        "/properties/x",
        "at least 5 and at most 2 characters",
        id="string-length",
    ),
    pytest.param(
        obj(x={"type": "array", "items": {}, "minItems": 4, "maxItems": 1}),
        "/properties/x",
        "at least 4 and at most 1 items",
        id="array-items",
    ),
    pytest.param(
        obj(x={"type": "number", "minimum": 5, "maximum": 2}),
        "/properties/x",
        "no number",
        id="number-range",
    ),
    pytest.param(
        obj(x={"type": "number", "exclusiveMinimum": 2, "maximum": 2}),
        "/properties/x",
        "no number",
        id="exclusive-min",
    ),
    pytest.param(
        obj(x={"type": "number", "minimum": 3, "exclusiveMaximum": 3}),
        "/properties/x",
        "no number",
        id="exclusive-max",
    ),
    pytest.param(
        obj(x={"type": "integer", "minimum": 1.2, "maximum": 1.8}),
        "/properties/x",
        "no integer",
        id="no-integer-between",
    ),
    pytest.param(
        obj(x={"type": "integer", "exclusiveMinimum": 1, "exclusiveMaximum": 2}),
        "/properties/x",
        "no integer",
        id="no-integer-exclusive",
    ),
    pytest.param(
        obj(x={"type": "integer", "minimum": 1, "maximum": 4, "multipleOf": 5}),
        "/properties/x",
        "multiple of 5",
        id="multiple-of",
    ),
    pytest.param(
        obj(x={"type": "object", "minProperties": 3, "maxProperties": 1}),
        "/properties/x",
        "at least 3 and at most 1 properties",
        id="object-size",
    ),
    pytest.param(
        {
            "type": "object",
            "properties": {"a": {}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
        "",
        "'b' is not allowed",
        id="required-forbidden",
    ),
    pytest.param(
        {"type": "object", "properties": {"a": False}, "required": ["a"]},
        "",
        "'a' accepts no value",
        id="required-false",
    ),
    pytest.param(
        {"type": "object", "required": ["a", "b"], "maxProperties": 1},
        "",
        "requires 2 properties",
        id="required-over-max",
    ),
    pytest.param(obj(x={"enum": []}), "/properties/x", "`enum` is empty", id="empty-enum"),
    pytest.param(
        obj(x={"type": "string", "const": 3}), "/properties/x", "`const`", id="const-type"
    ),
    pytest.param(
        obj(x={"type": "integer", "enum": ["a", 1.5]}), "/properties/x", "`enum`", id="enum-type"
    ),
    pytest.param(
        obj(x={"const": "a", "enum": ["b"]}), "/properties/x", "not one of", id="const-enum"
    ),
    pytest.param(obj(x={"type": []}), "/properties/x", "empty list", id="no-type"),
    pytest.param({"type": "object", "not": {}}, "", "`not`", id="not-everything"),
    pytest.param(
        obj(x={"allOf": [{"type": "string"}, {"type": "integer"}]}),
        "/properties/x",
        "types have nothing in common",
        id="allof-types",
    ),
    pytest.param(
        obj(x={"type": "string", "allOf": [{"minLength": 4}, {"maxLength": 3}]}),
        "/properties/x",
        "at least 4 and at most 3",
        id="allof-lengths",
    ),
    pytest.param(
        obj(x={"allOf": [{"type": "string"}, False]}),
        "/properties/x",
        "allOf member 1",
        id="allof-false",
    ),
    pytest.param(
        obj(x={"anyOf": [False, {"not": {}}]}), "/properties/x", "none of its", id="anyof-all-dead"
    ),
    pytest.param(
        obj(x={"$ref": "#/$defs/bad"})
        | {"$defs": {"bad": {"type": "string", "minLength": 9, "maxLength": 1}}},
        "/properties/x",
        "$ref",
        id="through-ref",
    ),
    pytest.param(
        obj(x={"type": "array", "prefixItems": [{}], "items": False, "minItems": 2}),
        "/properties/x",
        "minItems is 2",
        id="items-false",
    ),
    pytest.param(
        obj(x={"type": "array", "contains": {}, "minContains": 3, "maxContains": 1}),
        "/properties/x",
        "minContains 3",
        id="contains",
    ),
    pytest.param(
        obj(x={"type": ["string", "null"], "minLength": 5, "maxLength": 2}),
        "/properties/x",
        "no string",
        id="a-declared-type-dead",
    ),
    pytest.param(
        obj(x={"type": "array", "items": {"type": "string", "minLength": 3, "maxLength": 0}}),
        "/properties/x/items",
        "no string",
        id="nested",
    ),
]


@pytest.mark.parametrize(("schema", "pointer", "why"), CONTRADICTIONS)
def test_each_kind_of_contradiction_is_found_at_its_pointer(
    schema: dict[str, Any], pointer: str, why: str
) -> None:
    found = unsatisfiable(schema)
    assert found, schema
    assert found[0][0] == pointer and why in found[0][1], found


SATISFIABLE = [
    {"type": "object", "properties": {"x": {"type": "string", "minLength": 2, "maxLength": 2}}},
    {"type": "object", "properties": {"x": {"minLength": 5, "maxLength": 2}}},  # any non-string
    {"type": "object", "properties": {"x": False}},  # x is forbidden: how a schema says so
    {"type": "object", "properties": {"x": {"not": {}}}},
    {"type": "object", "additionalProperties": False},
    {"type": "object", "properties": {"a": {}}, "required": ["a"], "additionalProperties": False},
    {
        "type": "object",
        "patternProperties": {"^b": {}},
        "required": ["b"],
        "additionalProperties": False,
    },
    {"type": "object", "properties": {"n": {"type": "number", "minimum": 1.2, "maximum": 1.8}}},
    {"type": "object", "properties": {"n": {"type": "integer", "minimum": 2, "maximum": 2}}},
    {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 5, "maximum": 10, "multipleOf": 5}},
    },
    {"type": "object", "properties": {"e": {"type": "integer", "enum": [1.0, "a"]}}},
    {"type": "object", "properties": {"a": {"anyOf": [False, {"type": "string"}]}}},
    {"type": "object", "properties": {"t": {"$ref": "#"}}},  # recursive: decided as satisfiable
    {
        "type": "object",
        "properties": {
            "a": {"type": "array", "prefixItems": [{}, {}], "items": False, "minItems": 2}
        },
    },
]


@pytest.mark.parametrize("schema", SATISFIABLE)
def test_what_some_value_satisfies_is_never_reported(schema: dict[str, Any]) -> None:
    assert unsatisfiable(schema) == []


def test_the_suite_has_no_satisfiable_schema_reported_unsatisfiable() -> None:
    """Every group of the official suite with a valid instance is satisfiable: never reported."""
    base = Path(__file__).resolve().parents[1].parent / "shared" / "jsonschema-test-suite"
    files = sorted(base.glob("draft2020-12/**/*.json"))
    if not files:
        reason = f"the JSON-Schema-Test-Suite is not at {base}"
        print(reason)
        pytest.skip(reason)
    checked = 0
    for file in files:
        for group in json.loads(file.read_text(encoding="utf-8")):
            if any(test["valid"] for test in group["tests"]):
                checked += 1
                root = [p for p, _ in unsatisfiable(group["schema"]) if p == ""]
                assert not root, (file.name, group["description"])
    assert checked > 300
