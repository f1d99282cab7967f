"""Draft-07 input schemas at the MCP boundary: exact translations, and refusals that say where."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft7Validator

from nbagent.errors import SchemaError
from nbagent.mcp._dialect import original_pointer, to_draft_2020_12
from nbagent.schema import compile_schema

D7 = "http://json-schema.org/draft-07/schema#"

#: Draft-07 schemas the translation must carry over with the same meaning.
TRANSLATABLE: dict[str, dict[str, Any]] = {
    "zod object": {
        "$schema": D7,
        "type": "object",
        "properties": {
            "message": {"type": "string", "description": "Message to echo"},
            "count": {"type": "number", "minimum": 1, "maximum": 10, "default": 3},
            "kind": {"type": "string", "enum": ["a", "b"]},
        },
        "required": ["message"],
        "additionalProperties": False,
    },
    "tuple items": {
        "$schema": D7,
        "type": "object",
        "properties": {
            "pair": {
                "type": "array",
                "items": [{"type": "string"}, {"type": "integer"}],
                "additionalItems": False,
            },
            "open": {"type": "array", "items": [{"type": "boolean"}]},
            "rest": {
                "type": "array",
                "items": [{"type": "null"}],
                "additionalItems": {"type": "integer"},
            },
        },
    },
    "dependencies": {
        "$schema": D7,
        "type": "object",
        "properties": {"a": {}, "b": {}, "c": {"type": "integer"}},
        "dependencies": {"a": ["b"], "c": {"required": ["a"]}},
    },
    "definitions and refs": {
        "$schema": D7,
        "type": "object",
        "definitions": {"pos": {"type": "integer", "minimum": 0}},
        "properties": {
            "x": {"$ref": "#/definitions/pos", "description": "an annotation beside $ref is fine"},
            "ys": {"type": "array", "items": {"$ref": "#/definitions/pos"}},
        },
    },
    "conditionals": {
        "$schema": D7,
        "type": "object",
        "properties": {"kind": {"const": "n"}, "value": {}},
        "if": {"properties": {"kind": {"const": "n"}}, "required": ["kind"]},
        "then": {"properties": {"value": {"type": "number"}}},
        "else": {"properties": {"value": {"type": "string"}}},
        "propertyNames": {"maxLength": 5},
    },
    "items schema with ignored additionalItems": {
        "$schema": D7,
        "type": "object",
        "properties": {
            "xs": {"type": "array", "items": {"type": "integer"}, "additionalItems": False}
        },
    },
}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 12) | st.sampled_from(["a", "b", "n", "xyz", ""]),
    lambda inner: st.lists(inner, max_size=3),
    max_leaves=6,
)
instances = st.dictionaries(
    st.sampled_from(["message", "count", "kind", "pair", "open", "rest", "a", "b", "c", "x",
                     "ys", "value", "xs", "longname"]),
    json_values,
    max_size=4,
)  # fmt: skip


@pytest.mark.parametrize("name", sorted(TRANSLATABLE))
@settings(max_examples=150, deadline=None)
@given(instance=instances)
def test_a_translated_schema_accepts_exactly_what_draft_07_accepts(
    name: str, instance: Any
) -> None:
    original = TRANSLATABLE[name]
    translated, _ = to_draft_2020_12(original)
    assert "$schema" not in translated
    expected = Draft7Validator(original).is_valid(instance)
    assert compile_schema(translated).is_valid(instance) == expected, (name, instance)


def test_the_spelling_changes_are_the_documented_ones() -> None:
    translated, renames = to_draft_2020_12(TRANSLATABLE["tuple items"])
    pair = translated["properties"]["pair"]
    assert pair == {
        "type": "array",
        "prefixItems": [{"type": "string"}, {"type": "integer"}],
        "items": False,
    }
    assert "items" not in translated["properties"]["open"]
    assert ("/properties/pair/prefixItems", "/properties/pair/items") in renames
    deps, _ = to_draft_2020_12(TRANSLATABLE["dependencies"])
    assert deps["dependentRequired"] == {"a": ["b"]}
    assert deps["dependentSchemas"] == {"c": {"required": ["a"]}}
    assert "dependencies" not in deps
    xs, _ = to_draft_2020_12(TRANSLATABLE["items schema with ignored additionalItems"])
    assert xs["properties"]["xs"] == {"type": "array", "items": {"type": "integer"}}


def test_schemas_without_draft_07_pass_through_untouched() -> None:
    for schema in ({"type": "object"}, {"$schema": "https://json-schema.org/draft/2020-12/schema"}):
        assert to_draft_2020_12(schema) == (schema, [])
    schema = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object"}
    assert to_draft_2020_12(schema)[0] is schema  # the strict compile refuses it, saying why


@pytest.mark.parametrize(
    ("schema", "pointer", "words"),
    [
        (
            {
                "properties": {"w": {"$ref": "#/definitions/s", "maxLength": 3}},
                "definitions": {"s": {}},
            },
            "/properties/w/maxLength",
            "beside `$ref`",
        ),
        (
            {"properties": {"t": {"prefixItems": [{}]}}},
            "/properties/t/prefixItems",
            "not a draft-07",
        ),
        ({"unevaluatedProperties": False}, "/unevaluatedProperties", "not a draft-07"),
        ({"properties": {"a": {"$anchor": "x"}}}, "/properties/a/$anchor", "not a draft-07"),
        (
            {
                "properties": {
                    "t": {"items": [{"type": "string"}]},
                    "u": {"$ref": "#/properties/t/items/0"},
                }
            },
            "/properties/u/$ref",
            "cannot be translated",
        ),
    ],
)
def test_what_differs_in_meaning_is_refused_naming_the_pointer(
    schema: dict[str, Any], pointer: str, words: str
) -> None:
    with pytest.raises(SchemaError) as caught:
        to_draft_2020_12({"$schema": D7, "type": "object", **schema})
    assert caught.value.pointer == pointer
    assert words in caught.value.reason


def test_a_pointer_into_a_renamed_place_maps_back_to_the_servers_schema() -> None:
    schema = {
        "$schema": D7,
        "type": "object",
        "properties": {"t": {"type": "array", "items": [{"type": "string", "pattern": "("}]}},
    }
    translated, renames = to_draft_2020_12(schema)
    with pytest.raises(SchemaError) as caught:
        compile_schema(translated)
    assert caught.value.pointer == "/properties/t/prefixItems/0/pattern"
    assert original_pointer(caught.value.pointer, renames) == "/properties/t/items/0/pattern"
