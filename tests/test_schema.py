"""nbagent.schema: normalization, the strict Draft 2020-12 policy, and structural validation."""

from __future__ import annotations

import copy
import socket
import subprocess
import sys
import urllib.request
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbagent.schema._schema_validator as validator_module
from nbagent.errors import ArgumentsError, SchemaError
from nbagent.schema import SCHEMA_DIALECT, CompiledSchema, compile_schema, normalize_schema

EMPTY = {"type": "object", "properties": {}}


def violations(compiled: CompiledSchema, instance: object) -> tuple[tuple[str, str], ...]:
    with pytest.raises(ArgumentsError) as info:
        compiled.validate(instance)
    assert not compiled.is_valid(instance)
    return info.value.violations


def accepts(compiled: CompiledSchema, instance: object) -> bool:
    valid = compiled.is_valid(instance)
    try:
        compiled.validate(instance)
    except ArgumentsError:
        assert not valid, "is_valid and validate disagree"
        return False
    assert valid, "is_valid and validate disagree"
    return True


def obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


# --- normalization -------------------------------------------------------------------------------


@pytest.mark.parametrize("schema", [None, {}, True])
def test_empty_schemas_become_an_explicit_object(schema: Any) -> None:
    assert normalize_schema(schema) == EMPTY


def test_properties_without_type_get_object_type_and_keep_the_rest() -> None:
    schema = {"properties": {"a": {"type": "string"}}, "required": ["a"], "description": "d"}
    assert normalize_schema(schema) == {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "required": ["a"],
        "description": "d",
    }


def test_an_explicit_object_schema_is_kept_as_is() -> None:
    assert normalize_schema({"type": "object"}) == {"type": "object"}


def test_normalize_never_mutates_and_never_shares() -> None:
    schema = {"properties": {"a": {"enum": ["x", "y"]}}, "$defs": {"d": {"type": "integer"}}}
    before = copy.deepcopy(schema)
    result = normalize_schema(schema)
    assert schema == before
    result["properties"]["a"]["enum"].append("z")
    result["$defs"]["d"]["type"] = "string"
    assert schema == before


def test_compile_never_mutates_its_input() -> None:
    schema = {"$schema": SCHEMA_DIALECT, "properties": {"a": {"default": 1}}}
    before = copy.deepcopy(schema)
    compiled = compile_schema(schema)
    assert schema == before
    assert compiled.schema["$schema"] == SCHEMA_DIALECT
    assert compiled.schema["type"] == "object"


def test_tuples_become_lists() -> None:
    assert normalize_schema({"properties": {"a": {"enum": ("x", "y")}}})["properties"]["a"] == {
        "enum": ["x", "y"]
    }


def test_false_and_non_json_schemas_are_schema_errors() -> None:
    with pytest.raises(SchemaError, match="accepts no input"):
        normalize_schema(False)
    with pytest.raises(SchemaError, match="JSON object"):
        normalize_schema(["type", "object"])  # type: ignore[arg-type]
    with pytest.raises(SchemaError) as info:
        normalize_schema({"properties": {"a": {"enum": {1, 2}}}})
    assert info.value.pointer == "/properties/a/enum"
    with pytest.raises(SchemaError) as info:
        normalize_schema({"properties": {1: {}}})
    assert info.value.pointer == "/properties"


# --- the policy: rejections name the pointer -----------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [
        ({"type": "object", "$id": "https://example.com/s"}, "/$id"),
        (obj(a={"$id": "a"}), "/properties/a/$id"),
        (obj(l={"type": "array", "items": {"$id": "i"}}), "/properties/l/items/$id"),
        (obj(l={"prefixItems": [{}, {"$id": "i"}]}), "/properties/l/prefixItems/1/$id"),
        ({"type": "object", "$defs": {"d": {"$id": "d"}}}, "/$defs/d/$id"),
        ({"type": "object", "allOf": [{}, {"$id": "x"}]}, "/allOf/1/$id"),
        ({"type": "object", "not": {"anyOf": [{"$id": "x"}]}}, "/not/anyOf/0/$id"),
        ({"type": "object", "if": {}, "then": {"$id": "x"}}, "/then/$id"),
        (
            {"type": "object", "patternProperties": {"a/b~": {"$id": "x"}}},
            "/patternProperties/a~1b~0/$id",
        ),
        (obj(a={"$recursiveRef": "#"}), "/properties/a/$recursiveRef"),
        (
            {"type": "object", "$defs": {"x": {"$recursiveAnchor": True}}},
            "/$defs/x/$recursiveAnchor",
        ),
        ({"type": "object", "$schema": "http://json-schema.org/draft-07/schema#"}, "/$schema"),
        ({"type": "object", "$schema": "https://json-schema.org/draft/2019-09/schema"}, "/$schema"),
        (obj(a={"$schema": SCHEMA_DIALECT}), "/properties/a/$schema"),
        (obj(a={"$ref": "other.json#/x"}), "/properties/a/$ref"),
        (obj(a={"$ref": "https://example.com/s"}), "/properties/a/$ref"),
        (
            {"type": "object", "allOf": [{"$dynamicRef": "https://example.com/s#x"}]},
            "/allOf/0/$dynamicRef",
        ),
        (obj(a={"$ref": ""}), "/properties/a/$ref"),
    ],
)
def test_forbidden_keywords_are_rejected_with_their_pointer(schema: Any, pointer: str) -> None:
    with pytest.raises(SchemaError) as info:
        compile_schema(schema)
    assert info.value.pointer == pointer
    assert repr(pointer) in str(info.value)


def test_dialect_with_or_without_trailing_hash_is_accepted() -> None:
    for dialect in (SCHEMA_DIALECT, SCHEMA_DIALECT + "#"):
        compiled = compile_schema({"$schema": dialect, **obj(a={"type": "integer"})})
        assert accepts(compiled, {"a": 1})
        assert not accepts(compiled, {"a": "1"})


@pytest.mark.parametrize(
    "schema",
    [
        obj(**{"$id": {"type": "string"}, "$ref": {"type": "string"}, "$schema": {}}),
        obj(a={"enum": [{"$id": "x", "$ref": "https://example.com/s"}]}),
        obj(a={"const": {"$id": "x"}}),
        obj(a={"default": {"$id": "x"}, "examples": [{"$recursiveRef": "#"}]}),
        {"type": "object", "x-unknown": {"$id": "https://example.com/s"}},
    ],
)
def test_keywords_in_data_positions_are_not_keywords(schema: Any) -> None:
    compile_schema(schema)


def test_a_property_named_id_validates_as_a_property() -> None:
    compiled = compile_schema({**obj(**{"$id": {"type": "string"}}), "required": ["$id"]})
    assert accepts(compiled, {"$id": "abc"})
    assert violations(compiled, {"$id": 1}) == (("/$id", "1 is not of type 'string'"),)


def test_a_ref_target_is_a_schema_position_wherever_it_is() -> None:
    schema = {
        "type": "object",
        "x-defs": {"a": {"$id": "https://example.com/a"}},
        "properties": {"p": {"$ref": "#/x-defs/a"}},
    }
    with pytest.raises(SchemaError) as info:
        compile_schema(schema)
    assert info.value.pointer == "/x-defs/a/$id"


@pytest.mark.parametrize(
    ("schema", "pointer", "message"),
    [
        (obj(a={"$ref": "#/$defs/missing"}), "/properties/a/$ref", "does not resolve"),
        (obj(a={"$ref": "#nowhere"}), "/properties/a/$ref", "does not resolve"),
        (obj(a={"$dynamicRef": "#nowhere"}), "/properties/a/$dynamicRef", "does not resolve"),
        (
            {**obj(a={"$ref": "#/required"}), "required": ["a"]},
            "/properties/a/$ref",
            "not point at a schema",
        ),
    ],
)
def test_references_must_resolve_to_a_schema(schema: Any, pointer: str, message: str) -> None:
    with pytest.raises(SchemaError, match=message) as info:
        compile_schema(schema)
    assert info.value.pointer == pointer


def test_a_ref_cycle_that_never_consumes_input_is_rejected() -> None:
    schema = {
        "type": "object",
        "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}},
        "properties": {"p": {"$ref": "#/$defs/a"}},
    }
    with pytest.raises(SchemaError, match="cycle") as info:
        compile_schema(schema)
    assert info.value.pointer in {"/$defs/a/$ref", "/$defs/b/allOf/0/$ref"}
    with pytest.raises(SchemaError, match="cycle"):
        compile_schema({"type": "object", "anyOf": [{"$ref": "#"}]})


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [
        (obj(a={"minLength": -1}), "/properties/a/minLength"),
        ({"type": "object", "required": "a"}, "/required"),
        ({"type": "objet"}, "/type"),
        (obj(a={"$ref": 5}), "/properties/a/$ref"),
    ],
)
def test_schemas_failing_the_metaschema_are_rejected(schema: Any, pointer: str) -> None:
    with pytest.raises(SchemaError) as info:
        compile_schema(schema, require_object=False)
    assert info.value.pointer == pointer


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [
        (obj(a={"type": "string", "pattern": "(unclosed"}), "/properties/a/pattern"),
        (obj(a={"pattern": "(?i)python-only-flags"}), "/properties/a/pattern"),
        ({"type": "object", "patternProperties": {"[z-a]": {}}}, "/patternProperties/[z-a]"),
    ],
)
def test_invalid_ecma_regexes_are_schema_errors(schema: Any, pointer: str) -> None:
    with pytest.raises(SchemaError, match="ECMA-262") as info:
        compile_schema(schema)
    assert info.value.pointer == pointer


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [
        ({"type": "string"}, "/type"),
        ({"type": ["object", "null"]}, "/type"),
        ({"required": ["a"]}, ""),
    ],
)
def test_a_tool_input_schema_must_describe_an_object(schema: Any, pointer: str) -> None:
    with pytest.raises(SchemaError, match='"type": "object"') as info:
        compile_schema(schema)
    assert info.value.pointer == pointer
    compile_schema(schema, require_object=False)


def test_require_object_false_compiles_any_schema_as_written() -> None:
    assert accepts(compile_schema(True, require_object=False), [1, "x"])
    assert not accepts(compile_schema(False, require_object=False), {})
    ignores_arrays = compile_schema(
        {"properties": {"a": {"type": "integer"}}}, require_object=False
    )
    assert accepts(ignores_arrays, [])
    normalized = compile_schema({"properties": {"a": {"type": "integer"}}})
    assert not accepts(normalized, [])


# --- references that work ------------------------------------------------------------------------


def test_defs_pointer_refs_validate() -> None:
    compiled = compile_schema(
        {
            "type": "object",
            "properties": {"p": {"$ref": "#/$defs/positive"}, "q": {"$ref": "#/$defs/a%25b~1c"}},
            "$defs": {"positive": {"type": "integer", "minimum": 1}, "a%b/c": {"type": "string"}},
        }
    )
    assert accepts(compiled, {"p": 1, "q": "x"})
    assert violations(compiled, {"p": 0, "q": 1}) == (
        ("/p", "0 is less than the minimum of 1"),
        ("/q", "1 is not of type 'string'"),
    )


def test_anchor_refs_validate() -> None:
    compiled = compile_schema(
        {**obj(name={"$ref": "#name"}), "$defs": {"n": {"$anchor": "name", "type": "string"}}}
    )
    assert accepts(compiled, {"name": "x"})
    assert not accepts(compiled, {"name": 3})


def test_dynamic_refs_validate() -> None:
    compiled = compile_schema(
        {
            "type": "object",
            "properties": {
                "list": {"$ref": "#/$defs/list"},
                "one": {"$dynamicRef": "#/$defs/item"},
            },
            "$defs": {
                "list": {"type": "array", "items": {"$dynamicRef": "#item"}},
                "item": {"$dynamicAnchor": "item", "type": "string"},
            },
        }
    )
    assert accepts(compiled, {"list": ["a", "b"], "one": "c"})
    assert violations(compiled, {"list": ["a", 1], "one": 2}) == (
        ("/list/1", "1 is not of type 'string'"),
        ("/one", "2 is not of type 'string'"),
    )


def test_recursive_root_ref_validates_trees() -> None:
    compiled = compile_schema(
        {
            "$schema": SCHEMA_DIALECT,
            "type": "object",
            "properties": {
                "name": {"type": "string", "pattern": "^[a-z]+$"},
                "children": {"type": "array", "items": {"$ref": "#"}},
            },
            "required": ["name"],
        }
    )
    tree = {"name": "root", "children": [{"name": "leaf", "children": []}]}
    assert accepts(compiled, tree)
    # The ECMA pattern still applies after `$ref` re-enters the root (which holds `$schema`).
    bad = {"name": "root", "children": [{"name": "leaf\n"}]}
    assert [path for path, _ in violations(compiled, bad)] == ["/children/0/name"]


def test_too_deep_instances_are_argument_errors_not_crashes() -> None:
    compiled = compile_schema({"type": "object", "properties": {"c": {"$ref": "#"}}})
    deep: dict[str, Any] = {}
    for _ in range(3000):
        deep = {"c": deep}
    assert compiled.is_valid(deep) is False
    with pytest.raises(ArgumentsError, match="too deeply"):
        compiled.validate(deep)


# --- nothing is ever fetched ---------------------------------------------------------------------


@pytest.fixture
def network_watch(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[object]]:
    """Record (and refuse) any network use and every call to the registry's retrieve hook."""
    seen: dict[str, list[object]] = {"network": [], "retrieve": []}

    def no_network(*args: object, **kwargs: object) -> None:
        seen["network"].append(args)
        raise AssertionError("network access attempted")

    real_refuse = validator_module._refuse_retrieval

    def watched_refuse(uri: str) -> None:
        seen["retrieve"].append(uri)
        real_refuse(uri)

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(validator_module, "_refuse_retrieval", watched_refuse)
    return seen


@pytest.mark.parametrize(
    "ref",
    ["https://example.com/s", "http://localhost:1234/draft2020-12/integer.json", "other.json"],
)
def test_remote_refs_are_rejected_before_anything_could_fetch(
    network_watch: dict[str, list[object]], ref: str
) -> None:
    with pytest.raises(SchemaError, match="never fetches"):
        compile_schema(obj(a={"$ref": ref}))
    assert network_watch == {"network": [], "retrieve": []}


def test_same_document_refs_never_reach_the_retrieve_hook(
    network_watch: dict[str, list[object]],
) -> None:
    compiled = compile_schema(
        {
            "type": "object",
            "properties": {
                "a": {"$ref": "#/$defs/a"},
                "b": {"$ref": "#b"},
                "c": {"type": "array", "items": {"$dynamicRef": "#c"}},
                "d": {"type": "object", "unevaluatedProperties": False, "$ref": "#/$defs/d"},
            },
            "$defs": {
                "a": {"type": "integer"},
                "b": {"$anchor": "b", "type": "string"},
                "c": {"$dynamicAnchor": "c", "type": "boolean"},
                "d": {"properties": {"x": {}}},
            },
        }
    )
    assert accepts(compiled, {"a": 1, "b": "x", "c": [True], "d": {"x": 1}})
    assert not accepts(compiled, {"a": "1", "b": 2, "c": [1], "d": {"y": 1}})
    assert network_watch == {"network": [], "retrieve": []}


def test_the_registry_itself_refuses_even_if_the_policy_were_bypassed(
    network_watch: dict[str, list[object]],
) -> None:
    # Build the validator directly, skipping compile_schema's checks, as a bug might.
    validator = validator_module._validator_class()(
        {"$ref": "https://example.com/remote.json"}, registry=validator_module._new_registry()
    )
    with pytest.raises(Exception, match=r"refusing to retrieve|Unretrievable|remote\.json"):
        validator.is_valid({})
    assert network_watch["retrieve"] == ["https://example.com/remote.json"]
    assert network_watch["network"] == []


# --- validation semantics ------------------------------------------------------------------------


def test_no_coercion_of_types() -> None:
    compiled = compile_schema(obj(n={"type": "integer"}, s={"type": "string"}))
    assert not accepts(compiled, {"n": "123"})
    assert not accepts(compiled, {"n": True})
    assert not accepts(compiled, {"n": 1.5})
    assert accepts(compiled, {"n": 1.0})
    assert not accepts(compiled, {"s": 123})
    assert violations(compiled, {"n": "123"}) == (("/n", "'123' is not of type 'integer'"),)


@pytest.mark.parametrize(
    ("keyword", "instance"),
    [
        ({"format": "email"}, "not-an-email"),
        ({"format": "date-time"}, "yesterday"),
        ({"format": "uuid"}, "nope"),
        ({"format": "ipv4"}, "999.1.1.1"),
        ({"format": "regex"}, "(unclosed"),
        ({"contentEncoding": "base64"}, "!!! not base64 !!!"),
        ({"contentMediaType": "application/json"}, "{not json"),
        (
            {"contentMediaType": "application/json", "contentSchema": {"type": "integer"}},
            '"a string, not an integer"',
        ),
    ],
)
def test_format_and_content_keywords_are_annotations(
    keyword: dict[str, Any], instance: str
) -> None:
    compiled = compile_schema(obj(v={"type": "string", **keyword}))
    assert accepts(compiled, {"v": instance})


def test_defaults_are_never_applied_and_instances_never_mutated() -> None:
    compiled = compile_schema(
        {
            **obj(
                opt={"type": "integer", "default": 7},
                nested={"type": "object", "properties": {"x": {"default": []}}, "default": {}},
            ),
            "required": [],
        }
    )
    instance: dict[str, Any] = {}
    compiled.validate(instance)
    assert instance == {}
    instance = {"nested": {}}
    compiled.validate(instance)
    assert instance == {"nested": {}}


def test_validation_never_mutates_valid_or_invalid_instances() -> None:
    compiled = compile_schema(
        {
            **obj(items={"type": "array", "items": {"type": "object", "required": ["name"]}}),
            "additionalProperties": False,
        }
    )
    for instance in (
        {"items": [{"name": "a", "extra": [1, {"k": None}]}]},
        {"items": [{"nom": 1}, 3], "zzz": {"deep": [1, 2]}},
    ):
        before = copy.deepcopy(instance)
        compiled.is_valid(instance)
        try:
            compiled.validate(instance)
        except ArgumentsError:
            pass
        assert instance == before


def test_every_violation_is_listed_with_its_path_in_a_stable_order() -> None:
    compiled = compile_schema(
        {
            **obj(
                items={
                    "type": "array",
                    "items": {**obj(name={"type": "string", "minLength": 2}), "required": ["name"]},
                },
                count={"type": "integer", "maximum": 3},
            ),
            "required": ["items", "mode"],
            "additionalProperties": False,
        }
    )
    items: list[Any] = [{"name": "ok"}] * 12
    items[2] = {"name": "x"}
    items[10] = {}
    with pytest.raises(ArgumentsError) as info:
        compiled.validate({"items": items, "count": 9, "b": 1, "a": 2})
    assert info.value.violations == (
        ("", "'mode' is a required property"),
        ("/a", "unexpected property (additionalProperties is false)"),
        ("/b", "unexpected property (additionalProperties is false)"),
        ("/count", "9 is greater than the maximum of 3"),
        ("/items/2/name", "'x' is too short"),
        ("/items/10", "'name' is a required property"),
    )
    text = str(info.value)
    assert "6 violations" in text
    assert "(root): 'mode' is a required property" in text
    assert "/items/10: 'name' is a required property" in text


def test_combinator_failures_say_what_came_closest() -> None:
    compiled = compile_schema(
        obj(v={"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}]})
    )
    ((path, message),) = violations(compiled, {"v": "long"})
    assert path == "/v"
    assert "is not valid under any of the given schemas" in message
    assert "closest" in message


def test_huge_instances_give_short_messages() -> None:
    compiled = compile_schema(obj(v={"type": "integer"}))
    ((_, message),) = violations(compiled, {"v": "x" * 10_000})
    assert len(message) < 400
    assert message.endswith("is not of type 'integer'")


# --- ECMA-262 regexes ----------------------------------------------------------------------------


def test_pattern_uses_ecma_anchors() -> None:
    compiled = compile_schema(obj(s={"type": "string", "pattern": "^[a-z]+$"}))
    assert accepts(compiled, {"s": "abc"})
    assert not accepts(compiled, {"s": "abc\n"})  # Python's re.search would match here
    assert not accepts(compiled, {"s": "ABC"})


def test_ecma_character_classes() -> None:
    digits = compile_schema(obj(s={"type": "string", "pattern": "^\\d+$"}))
    assert accepts(digits, {"s": "123"})
    assert not accepts(digits, {"s": "١٢٣"})  # Arabic-Indic digits: \d is ASCII-only in ECMA
    letters = compile_schema(obj(s={"type": "string", "pattern": "^\\p{Letter}+$"}))
    assert accepts(letters, {"s": "héllo"})
    assert not accepts(letters, {"s": "h3llo"})


def test_legacy_ecma_escapes_fall_back_rather_than_fail() -> None:
    compiled = compile_schema(obj(phone={"type": "string", "pattern": "^\\d{3}\\-\\d{4}$"}))
    assert accepts(compiled, {"phone": "555-1234"})
    assert not accepts(compiled, {"phone": "5551234"})


def test_pattern_properties_and_additional_properties_use_ecma() -> None:
    compiled = compile_schema(
        {
            "type": "object",
            "patternProperties": {"^[a-z]+$": {"type": "integer"}},
            "additionalProperties": False,
        }
    )
    assert accepts(compiled, {"abc": 1})
    assert violations(compiled, {"abc": "1"}) == (("/abc", "'1' is not of type 'integer'"),)
    assert violations(compiled, {"abc\n": 1}) == (
        ("/abc\n", "unexpected property (additionalProperties is false)"),
    )


def test_unevaluated_properties_use_ecma_through_refs() -> None:
    compiled = compile_schema(
        {
            "type": "object",
            "$ref": "#/$defs/base",
            "unevaluatedProperties": False,
            "$defs": {"base": {"patternProperties": {"^x-[a-z]+$": {"type": "string"}}}},
        }
    )
    assert accepts(compiled, {"x-ok": "v"})
    assert violations(compiled, {"x-ok\n": "v", "other": 1}) == (
        ("/other", "unexpected property (unevaluatedProperties is false)"),
        ("/x-ok\n", "unexpected property (unevaluatedProperties is false)"),
    )


def test_property_names_pattern_uses_ecma() -> None:
    compiled = compile_schema({"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}})
    assert accepts(compiled, {"abc": 1})
    assert not accepts(compiled, {"abc\n": 1})


# --- the compiled object -------------------------------------------------------------------------


def test_compiled_schema_is_read_only_and_reusable() -> None:
    compiled = compile_schema(obj(a={"type": "integer"}))
    with pytest.raises(AttributeError):
        compiled.schema = {}
    with pytest.raises(AttributeError):
        compiled.extra = 1
    for value in range(50):
        assert accepts(compiled, {"a": value})
    other = compile_schema(obj(a={"type": "string"}))
    assert accepts(compiled, {"a": 1})
    assert not accepts(other, {"a": 1})
    assert "CompiledSchema(" in repr(compiled)


def test_importing_the_module_does_not_import_the_heavy_libraries() -> None:
    code = (
        "import sys, nbagent.schema; "
        "print(sorted(m for m in ('jsonschema', 'referencing', 'regress') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[]"


# --- properties ----------------------------------------------------------------------------------

_NAMES = st.text(min_size=1, max_size=8)
_TYPES = {
    "string": st.text(max_size=10),
    "integer": st.integers(),
    "number": st.floats(allow_nan=False, allow_infinity=False),
    "boolean": st.booleans(),
    "null": st.none(),
}
_WRONG = {
    "string": 1,
    "integer": "1",
    "number": "1.5",
    "boolean": 0,
    "null": False,
}


@settings(max_examples=60, deadline=None)
@given(
    properties=st.dictionaries(_NAMES, st.sampled_from(sorted(_TYPES)), min_size=1, max_size=6),
    data=st.data(),
)
def test_generated_object_schemas_accept_matching_and_reject_wrong_values(
    properties: dict[str, str], data: st.DataObject
) -> None:
    schema = {
        "properties": {name: {"type": kind} for name, kind in properties.items()},
        "required": sorted(properties),
    }
    compiled = compile_schema(schema)
    assert compiled.schema["type"] == "object"
    instance = {name: data.draw(_TYPES[kind]) for name, kind in properties.items()}
    before = copy.deepcopy(instance)
    assert accepts(compiled, instance)
    broken_name = data.draw(st.sampled_from(sorted(properties)))
    broken = {**instance, broken_name: _WRONG[properties[broken_name]]}
    escaped = broken_name.replace("~", "~0").replace("/", "~1")
    assert [path for path, _ in violations(compiled, broken)] == [f"/{escaped}"]
    missing = {k: v for k, v in instance.items() if k != broken_name}
    assert [path for path, _ in violations(compiled, missing)] == [""]
    assert instance == before


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4)
    ),
    max_leaves=20,
)

_MIXED = compile_schema(
    {
        "type": "object",
        "properties": {
            "a": {"type": "array", "items": {"type": ["integer", "string"], "maxLength": 3}},
            "b": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/o"}]},
        },
        "patternProperties": {"^[a-z]$": {"minimum": 0}},
        "unevaluatedProperties": {"type": "boolean"},
        "$defs": {
            "o": {"type": "object", "minProperties": 1, "additionalProperties": {"const": 1}}
        },
    }
)


@settings(max_examples=150, deadline=None)
@given(instance=_JSON)
def test_validation_never_mutates_random_json_and_both_entry_points_agree(instance: Any) -> None:
    before = copy.deepcopy(instance)
    accepts(_MIXED, instance)
    if isinstance(instance, dict):
        accepts(_MIXED, {"a": instance.get("a"), "b": instance, **instance})
    assert instance == before


def test_compiled_schemas_are_cached_by_canonical_json() -> None:
    from nbagent.schema import compile_schema as compile_

    one = compile_({"type": "object", "properties": {"q": {"type": "string"}}})
    same = compile_({"properties": {"q": {"type": "string"}}, "type": "object"})
    other = compile_({"type": "object", "properties": {"q": {"type": "integer"}}})
    assert one is same and other is not one
    assert not other.is_valid({"q": "x"}) and one.is_valid({"q": "x"})


def test_violation_paths_with_unicode_digit_keys() -> None:
    compiled = compile_schema({"type": "object", "additionalProperties": {"type": "string"}})
    with pytest.raises(ArgumentsError) as info:
        compiled.validate({"¹": None, "2": None})
    assert [path for path, _ in info.value.violations] == ["/2", "/¹"]
