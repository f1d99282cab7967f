"""Schemas from type hints and docstrings, and JSON arguments decoded back into Python values.

This module uses ``from __future__ import annotations``, so every hint below is a string that
``function_schema`` must resolve; ``_with_hint`` builds functions whose hints are real objects.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import datetime
import enum
import functools
import re
import subprocess
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import (
    Annotated,
    Any,
    Generic,
    Literal,
    NewType,
    NotRequired,
    Optional,
    Required,
    TypedDict,
    TypeVar,
    Union,
)

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from nbagent.errors import ArgumentsError, ToolDefinitionError
from nbagent.schema._hints import decode_arguments_as
from nbagent.schema._signature import FunctionSchema, call_arguments, function_schema

# --------------------------------------------------------------------------- types used below


class Color(enum.Enum):
    """A paint colour."""

    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Mixed(enum.Enum):
    ONE = 1
    NAME = "name"
    NOTHING = None


@dataclasses.dataclass
class Point:
    """A point on the plane.

    Attributes:
        x: Horizontal position.
        y: Vertical position.
    """

    x: float
    y: float = 0.0


@dataclasses.dataclass(frozen=True)
class Cell:
    row: int
    column: int


@dataclasses.dataclass
class TreeNode:
    value: int
    children: list[TreeNode] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Route:
    start: Point
    stops: list[Point]
    color: Color | None = None
    tags: set[str] = dataclasses.field(default_factory=set)
    window: tuple[int, int] | None = None


@dataclasses.dataclass
class Positive:
    value: int

    def __post_init__(self) -> None:
        if self.value <= 0:
            raise ValueError("value must be positive")


@dataclasses.dataclass
class Computed:
    value: int
    double: int = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.double = 2 * self.value


class Movie(TypedDict):
    """A film."""

    title: Annotated[str, "The title"]
    year: NotRequired[int]
    rating: Annotated[NotRequired[float], "Stars"]


class Draft(TypedDict, total=False):
    title: Required[str]
    notes: str


class Comment(TypedDict):
    text: str
    replies: list[Comment]


UserId = NewType("UserId", int)

T = TypeVar("T")


@dataclasses.dataclass
class Box(Generic[T]):
    item: T


@dataclasses.dataclass
class WithInitVar:
    value: int
    scale: dataclasses.InitVar[int]


class Opaque:
    pass


@dataclasses.dataclass
class HoldsOpaque:
    thing: Opaque


class _Holder:
    """Holds the other ``Point`` so that two classes share a ``$defs`` name."""

    @dataclasses.dataclass
    class Point:
        label: str


# --------------------------------------------------------------------------- helpers


def _with_hint(tp: Any) -> Callable[..., Any]:
    """A function ``f(x)`` whose hint for ``x`` is the real object ``tp`` (not a string)."""

    def f(x: Any) -> Any:
        return x

    f.__annotations__ = {"x": tp}
    return f


def _property(tp: Any) -> dict[str, Any]:
    return function_schema(_with_hint(tp)).schema["properties"]["x"]


def _check(schema: Mapping[str, Any]) -> Draft202012Validator:
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


# --------------------------------------------------------------------------- exact schemas


def test_scalar_parameters_and_the_top_level_object() -> None:
    def f(name: str, count: int, ratio: float, flag: bool, nothing: None, anything: Any) -> str:
        return name

    fs = function_schema(f)
    assert fs.schema == {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "count": {"type": "integer"},
            "ratio": {"type": "number"},
            "flag": {"type": "boolean"},
            "nothing": {"type": "null"},
            "anything": {},
        },
        "required": ["name", "count", "ratio", "flag", "nothing", "anything"],
        "additionalProperties": False,
    }
    assert fs.parameters == ("name", "count", "ratio", "flag", "nothing", "anything")
    assert fs.positional_only == ()
    assert fs.description == ""
    _check(fs.schema)


def test_no_parameters_gives_an_empty_object_without_required() -> None:
    def f() -> None: ...

    assert function_schema(f).schema == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }


@pytest.mark.parametrize(
    ("tp", "expected"),
    [
        (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
        (Literal[1, 2], {"type": "integer", "enum": [1, 2]}),
        (Literal[True], {"type": "boolean", "enum": [True]}),
        (Literal["a", None], {"type": ["string", "null"], "enum": ["a", None]}),
        (Literal[Color.RED], {"type": "string", "enum": ["red"]}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (Sequence[str], {"type": "array", "items": {"type": "string"}}),
        (list, {"type": "array"}),
        (list[Any], {"type": "array"}),
        (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
        (tuple, {"type": "array"}),
        (
            tuple[int, str],
            {
                "type": "array",
                "prefixItems": [{"type": "integer"}, {"type": "string"}],
                "items": False,
                "minItems": 2,
                "maxItems": 2,
            },
        ),
        (tuple[()], {"type": "array", "items": False, "minItems": 0, "maxItems": 0}),
        (set[str], {"type": "array", "uniqueItems": True, "items": {"type": "string"}}),
        (frozenset[int], {"type": "array", "uniqueItems": True, "items": {"type": "integer"}}),
        (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
        (
            Mapping[str, list[str]],
            {
                "type": "object",
                "additionalProperties": {"type": "array", "items": {"type": "string"}},
            },
        ),
        (dict, {"type": "object"}),
        (dict[str, Any], {"type": "object"}),
        (Optional[int], {"type": ["integer", "null"]}),  # noqa: UP045
        (int | str, {"type": ["integer", "string"]}),
        (
            Union[int, list[int]],
            {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"type": "integer"}}]},
        ),
        (Color, {"type": "string", "enum": ["red", "green"], "description": "A paint colour."}),
        (Level, {"type": "integer", "enum": [1, 2]}),
        (Mixed, {"type": ["integer", "string", "null"], "enum": [1, "name", None]}),
        (datetime.date, {"type": "string", "format": "date"}),
        (datetime.datetime, {"type": "string", "format": "date-time"}),
        (datetime.time, {"type": "string", "format": "time"}),
        (uuid.UUID, {"type": "string", "format": "uuid"}),
        (Path, {"type": "string"}),
        (UserId, {"type": "integer"}),
        (object, {}),
        (Annotated[int, "How many"], {"type": "integer", "description": "How many"}),
        (
            Annotated[int, {"minimum": 0, "maximum": 9}],
            {"type": "integer", "minimum": 0, "maximum": 9},
        ),
        (Annotated[str, "Later wins", object()], {"type": "string", "description": "Later wins"}),
    ],
    # the same id in every process (pytest-xdist's workers must agree), not object()'s address
    ids=lambda value: re.sub(r" at 0x[0-9a-f]+", "", repr(value)),
)
def test_exact_schema_per_type(tp: Any, expected: dict[str, Any]) -> None:
    assert _property(tp) == expected
    _check(function_schema(_with_hint(tp)).schema)


def test_dataclass_used_once_is_inlined_with_docstring_descriptions_and_defaults() -> None:
    def f(point: Point) -> None: ...

    assert function_schema(f).schema["properties"]["point"] == {
        "type": "object",
        "description": "A point on the plane.",
        "properties": {
            "x": {"type": "number", "description": "Horizontal position."},
            "y": {"type": "number", "description": "Vertical position.", "default": 0.0},
        },
        "required": ["x"],
        "additionalProperties": False,
    }


def test_typeddict_required_keys_and_annotated_field_description() -> None:
    assert _property(Movie) == {
        "type": "object",
        "description": "A film.",
        "properties": {
            "title": {"type": "string", "description": "The title"},
            "year": {"type": "integer"},
            "rating": {"type": "number", "description": "Stars"},
        },
        "required": ["title"],
        "additionalProperties": False,
    }
    assert _property(Draft)["required"] == ["title"]


def test_recursive_dataclass_goes_to_defs_with_a_same_document_ref() -> None:
    schema = function_schema(_with_hint(TreeNode)).schema
    assert schema["properties"]["x"] == {"$ref": "#/$defs/TreeNode"}
    assert schema["$defs"] == {
        "TreeNode": {
            "type": "object",
            "properties": {
                "value": {"type": "integer"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/TreeNode"}},
            },
            "required": ["value"],
            "additionalProperties": False,
        }
    }
    validator = _check(schema)
    assert validator.is_valid({"x": {"value": 1, "children": [{"value": 2, "children": []}]}})
    assert not validator.is_valid({"x": {"value": 1, "children": [{"value": "2"}]}})


def test_recursive_typeddict() -> None:
    schema = function_schema(_with_hint(Comment)).schema
    assert schema["$defs"]["Comment"]["properties"]["replies"] == {
        "type": "array",
        "items": {"$ref": "#/$defs/Comment"},
    }
    validator = _check(schema)
    assert validator.is_valid({"x": {"text": "a", "replies": [{"text": "b", "replies": []}]}})
    assert not validator.is_valid({"x": {"text": "a", "replies": [{"text": "b"}]}})


def test_a_type_used_twice_is_shared_through_defs_and_descriptions_stay_at_the_use_site() -> None:
    def f(a: Annotated[Point, "Where to start"], b: Point, c: Color) -> None: ...

    schema = function_schema(f).schema
    assert schema["properties"]["a"] == {"$ref": "#/$defs/Point", "description": "Where to start"}
    assert schema["properties"]["b"] == {"$ref": "#/$defs/Point"}
    assert schema["properties"]["c"]["enum"] == ["red", "green"]  # used once: inlined
    assert set(schema["$defs"]) == {"Point"}
    validator = _check(schema)
    assert validator.is_valid({"a": {"x": 1}, "b": {"x": 2, "y": 3}, "c": "red"})
    assert not validator.is_valid({"a": {"x": 1, "z": 0}, "b": {"x": 2}, "c": "red"})


def test_two_classes_with_one_name_get_distinct_defs() -> None:
    def f(a: Point, b: Point, c: _Holder.Point, d: _Holder.Point) -> None: ...

    schema = function_schema(f).schema
    assert set(schema["$defs"]) == {"Point", "Point_2"}
    assert schema["properties"]["c"] == {"$ref": "#/$defs/Point_2"}
    _check(schema)


def test_nested_dataclass_schema_validates_samples() -> None:
    validator = _check(function_schema(_with_hint(Route)).schema)
    good = {"start": {"x": 0}, "stops": [{"x": 1, "y": 2}], "color": "green", "tags": ["a"]}
    assert validator.is_valid({"x": good})
    assert validator.is_valid({"x": {**good, "color": None, "window": [1, 2]}})
    assert not validator.is_valid({"x": {**good, "color": "blue"}})
    assert not validator.is_valid({"x": {**good, "tags": ["a", "a"]}})
    assert not validator.is_valid({"x": {**good, "window": [1, 2, 3]}})
    assert not validator.is_valid({"x": {"start": {"x": 0}}})


def test_non_init_dataclass_fields_are_not_part_of_the_schema() -> None:
    assert list(_property(Computed)["properties"]) == ["value"]
    assert decode_arguments_as({"value": 2}, Computed).double == 4


# --------------------------------------------------------------------------- every type: samples


_SAMPLES: list[tuple[Any, list[Any], list[Any]]] = [
    (str, ["", "x"], [1, None, ["x"]]),
    (int, [0, -5, 2**70], ["1", 1.5, True, None]),
    (float, [1.5, 2, -0.0], ["1.5", True, None]),
    (bool, [True, False], [0, "true", None]),
    (None, [None], [0, "", False]),
    (Any, [None, 1, "a", [1], {"a": [1]}], []),
    (Literal["a", 2], ["a", 2], ["b", 3, "2", True]),
    (Literal[1], [1], [True, "1"]),
    (Color, ["red", "green"], ["RED", "blue", 1]),
    (Level, [1, 2], [3, "1", True]),
    (list[int], [[], [1, 2]], [[1, "2"], "12", {"0": 1}]),
    (Sequence[Optional[str]], [["a", None]], [[1]]),  # noqa: UP045
    (tuple[int, ...], [[], [1, 2, 3]], [[1, "x"]]),
    (tuple[int, str], [[1, "a"]], [[1], [1, "a", 2], ["a", 1]]),
    (set[int], [[], [1, 2]], [["1"], [1.5]]),
    (frozenset[str], [["a", "b"]], [[1]]),
    (dict[str, int], [{}, {"a": 1}], [{"a": "1"}, [["a", 1]]]),
    (Mapping[str, list[bool]], [{"a": [True]}], [{"a": [1]}]),
    (list, [[1, "a", None]], [{}, "abc"]),
    (dict, [{"a": [1]}], [[], "abc"]),
    (Optional[Point], [None, {"x": 1}], [{"y": 1}, {"x": 1, "z": 2}, "p"]),  # noqa: UP045
    (Union[int, Color], [1, "red"], ["blue", 1.5]),
    (Point, [{"x": 1.5, "y": 2}], [{"x": "1"}, {}, {"x": 1, "q": 1}]),
    (Route, [{"start": {"x": 0}, "stops": []}], [{"start": {"x": 0}, "stops": [{"y": 1}]}]),
    (TreeNode, [{"value": 1, "children": [{"value": 2}]}], [{"value": 1, "children": [{}]}]),
    (Movie, [{"title": "Up"}, {"title": "Up", "year": 2009}], [{"year": 2009}, {"title": 1}]),
    (Draft, [{"title": "t"}, {"title": "t", "notes": "n"}], [{"notes": "n"}]),
    (Comment, [{"text": "a", "replies": []}], [{"text": "a"}]),
    (datetime.date, ["2024-02-29"], [20240229, None]),
    (datetime.datetime, ["2024-02-29T10:00:00+00:00"], [1.5]),
    (datetime.time, ["10:30"], [1030]),
    (uuid.UUID, ["12345678-1234-5678-1234-567812345678"], [12345678]),
    (Path, ["/tmp/x"], [1]),
    (UserId, [7], ["7"]),
    (Annotated[int, {"minimum": 0}], [0, 5], ["5"]),
    (Annotated[list[Annotated[str, "a tag"]], "Tags"], [["a"]], [[1]]),
]


@pytest.mark.parametrize(("tp", "valid", "invalid"), _SAMPLES, ids=lambda v: repr(v)[:40])
def test_every_type_gives_a_valid_schema_that_matches_the_decoder(
    tp: Any, valid: list[Any], invalid: list[Any]
) -> None:
    fs = function_schema(_with_hint(tp))
    validator = _check(fs.schema)
    for value in valid:
        assert validator.is_valid({"x": value}), value
        before = copy.deepcopy(value)
        fs.decode({"x": value})
        decode_arguments_as(value, tp)
        assert value == before  # never mutated
    for value in invalid:
        assert not validator.is_valid({"x": value}), value
        with pytest.raises(ArgumentsError):
            decode_arguments_as(value, tp)


def test_constraints_from_annotated_are_checked_by_the_schema_not_the_decoder() -> None:
    tp = Annotated[int, {"minimum": 0}]
    assert not _check(function_schema(_with_hint(tp)).schema).is_valid({"x": -1})
    assert decode_arguments_as(-1, tp) == -1


# --------------------------------------------------------------------------- docstrings


def test_google_docstring() -> None:
    def f(city: str, units: str = "metric", *, days: int = 1) -> str:
        """Get the weather forecast.

        Looks the city up first.

        Args:
            city: The city to look up, for example
                "Paris" or "Lyon".
            units (str, optional): Either "metric"
                or "imperial".

                Metric is the default.
            days (int): How many days.

        Returns:
            The forecast as text.
        """
        return city

    fs = function_schema(f)
    assert fs.description == (
        "Get the weather forecast.\n\nLooks the city up first.\n\n"
        "Returns:\n    The forecast as text."
    )
    properties = fs.schema["properties"]
    assert (
        properties["city"]["description"] == 'The city to look up, for example "Paris" or "Lyon".'
    )
    assert properties["units"]["description"] == (
        'Either "metric" or "imperial".\n\nMetric is the default.'
    )
    assert properties["days"]["description"] == "How many days."


@pytest.mark.parametrize("header", ["Arguments:", "Parameters:", "Keyword Args:"])
def test_google_section_names(header: str) -> None:
    def f(a: int) -> None: ...

    f.__doc__ = f"Summary.\n\n{header}\n    a: The a.\n"
    fs = function_schema(f)
    assert fs.schema["properties"]["a"]["description"] == "The a."
    assert fs.description == "Summary."


def test_numpy_docstring() -> None:
    def f(x: float, y: float, label: str = "") -> None:
        """Plot a point.

        Parameters
        ----------
        x, y : float
            Coordinates of the
            point.
        label : str, optional
            Text shown next to it.

        Returns
        -------
        None
            Nothing.
        """

    fs = function_schema(f)
    properties = fs.schema["properties"]
    assert properties["x"]["description"] == "Coordinates of the point."
    assert properties["y"]["description"] == "Coordinates of the point."
    assert properties["label"]["description"] == "Text shown next to it."
    assert fs.description == "Plot a point.\n\nReturns\n-------\nNone\n    Nothing."


def test_sphinx_docstring() -> None:
    def f(path: str, mode: str = "r") -> None:
        """Open a file.

        :param path: Where the file is,
            relative to the notebook.
        :type path: str
        :param str mode: How to open it.
        :returns: nothing
        """

    fs = function_schema(f)
    properties = fs.schema["properties"]
    assert properties["path"]["description"] == "Where the file is, relative to the notebook."
    assert properties["mode"]["description"] == "How to open it."
    assert fs.description == "Open a file.\n\n:returns: nothing"


def test_annotated_description_wins_over_the_docstring() -> None:
    def f(a: Annotated[int, "From the hint"], b: int) -> None:
        """Do it.

        Args:
            a: From the docstring.
            b: Also from the docstring.
        """

    properties = function_schema(f).schema["properties"]
    assert properties["a"]["description"] == "From the hint"
    assert properties["b"]["description"] == "Also from the docstring."


def test_a_section_header_without_entries_stays_in_the_description() -> None:
    def f(a: int) -> None:
        """Summary.

        Parameters:
        see the manual.
        """

    fs = function_schema(f)
    assert fs.description == "Summary.\n\nParameters:\nsee the manual."
    assert "description" not in fs.schema["properties"]["a"]


# --------------------------------------------------------------------------- defaults


def test_defaults_make_a_parameter_optional_and_are_shown_when_json() -> None:
    def fn(
        a: int,
        b: int = 3,
        c: Color = Color.GREEN,
        d: tuple[int, int] = (1, 2),
        e: Path = Path("/tmp"),
        f: int | None = None,
        g: frozenset[int] = frozenset(),
        h: float = float("nan"),
        *,
        i: dict[str, int] = {"a": 1},  # noqa: B006
    ) -> None: ...

    schema = function_schema(fn).schema
    properties = schema["properties"]
    assert schema["required"] == ["a"]
    assert "default" not in properties["a"]
    assert properties["b"]["default"] == 3
    assert properties["c"]["default"] == "green"
    assert properties["d"]["default"] == [1, 2]
    assert properties["e"]["default"] == "/tmp"
    assert properties["f"]["default"] is None
    assert "default" not in properties["g"]  # a set has no JSON form
    assert "default" not in properties["h"]  # NaN is not JSON
    assert properties["i"]["default"] == {"a": 1}


def test_absent_optional_arguments_are_left_to_python() -> None:
    def f(a: int, b: int = 3, *, c: str = "c") -> tuple[int, int, str]:
        return a, b, c

    fs = function_schema(f)
    args, kwargs = fs.decode({"a": 1})
    assert (args, kwargs) == ([], {"a": 1})
    assert f(*args, **kwargs) == (1, 3, "c")


# --------------------------------------------------------------------------- unsupported


def _variadic(a: int, *rest: int) -> None: ...


def _keywords(a: int, **options: Any) -> None: ...


def _unhinted(a, b: int) -> None:  # type: ignore[no-untyped-def]
    ...


def _bytes(data: bytes) -> None: ...


def _opaque(thing: Opaque) -> None: ...


def _callable(fn: Callable[[int], int]) -> None: ...


def _int_keys(table: dict[int, str]) -> None: ...


def _set_of_lists(groups: set[list[int]]) -> None: ...


def _set_of_mutable_dataclasses(points: set[Point]) -> None: ...


def _typevar(item: T) -> None: ...


def _generic_dataclass(box: Box[int]) -> None: ...


def _initvar(value: WithInitVar) -> None: ...


def _nested_opaque(holder: list[HoldsOpaque]) -> None: ...


def _bad_literal(kind: Literal[b"x"]) -> None: ...


class Planet(enum.Enum):
    EARTH = (1.0, 2.0)


def _bad_enum(planet: Planet) -> None: ...


def _unresolvable(a: int, b: NoSuchName) -> None:  # type: ignore[name-defined]  # noqa: F821
    ...


@pytest.mark.parametrize(
    ("fn", "words"),
    [
        (_variadic, ["_variadic", "*rest", "schema="]),
        (_keywords, ["_keywords", "**options", "schema="]),
        (_unhinted, ["_unhinted", "'a'", "add a type hint", "schema="]),
        (_bytes, ["'data'", "bytes", "base64", "schema="]),
        (_opaque, ["'thing'", "Opaque", "schema="]),
        (_callable, ["'fn'", "function", "schema="]),
        (_int_keys, ["'table'", "dict[int, str]", "keys are strings"]),
        (_set_of_lists, ["'groups'", "hashable"]),
        (_set_of_mutable_dataclasses, ["'points'", "hashable"]),
        (_typevar, ["'item'", "type variable"]),
        (_generic_dataclass, ["'box'", "generic dataclass"]),
        (_initvar, ["'value'", "InitVar"]),
        (_nested_opaque, ["'holder'", "HoldsOpaque.thing", "Opaque", "schema="]),
        (_bad_literal, ["'kind'", "Literal values"]),
        (_bad_enum, ["'planet'", "Enum values"]),
        (_unresolvable, ["_unresolvable", "'b'", "NoSuchName", "could not be resolved"]),
    ],
    ids=lambda v: getattr(v, "__name__", "")[:30],
)
def test_unsupported_signatures_are_definition_errors_naming_the_parameter(
    fn: Callable[..., Any], words: list[str]
) -> None:
    with pytest.raises(ToolDefinitionError) as caught:
        function_schema(fn)
    for word in words:
        assert word in str(caught.value)


def test_a_local_class_in_a_string_hint_cannot_be_resolved() -> None:
    @dataclasses.dataclass
    class Local:
        a: int

    def f(item: Local) -> None: ...

    with pytest.raises(ToolDefinitionError, match=r"'item'.*could not be resolved"):
        function_schema(f)


def test_real_object_hints_resolve_local_classes() -> None:
    @dataclasses.dataclass
    class Local:
        a: int

    schema = function_schema(_with_hint(list[Local])).schema
    assert schema["properties"]["x"]["items"]["properties"] == {"a": {"type": "integer"}}


# --------------------------------------------------------------------------- skip (context)


class Context:
    pass


def test_skipped_parameters_are_left_out_even_with_unresolvable_hints() -> None:
    def f(ctx: Unknown, city: str, *, update: Context, **extra: Any) -> str:  # type: ignore[name-defined]  # noqa: F821
        return city

    fs = function_schema(f, skip={"ctx", "update", "extra"})
    assert fs.parameters == ("city",)
    assert fs.schema["required"] == ["city"]
    context = Context()
    args, kwargs = fs.decode({"city": "Oslo"}, {"ctx": 1, "update": context, "other": 2})
    assert args == []
    assert kwargs == {"city": "Oslo", "ctx": 1, "update": context}


def test_positional_only_context_parameter_is_put_in_its_slot() -> None:
    def f(ctx: Context, a: int = 1, b: int = 2, /, c: int = 3) -> tuple[Any, ...]:
        return ctx, a, b, c

    fs = function_schema(f, skip=["ctx"])
    assert fs.positional_only == ("a", "b")
    context = Context()
    args, kwargs = fs.decode({"b": 5}, {"ctx": context})
    assert args == [context, 1, 5]
    assert f(*args, **kwargs) == (context, 1, 5, 3)
    assert fs.decode({}, {"ctx": context}) == ([context], {})


def test_a_context_value_may_be_left_to_the_caller() -> None:
    def f(ctx: Context, a: int) -> None: ...

    fs = function_schema(f, skip=["ctx"])
    assert fs.decode({"a": 1}) == ([], {"a": 1})


# --------------------------------------------------------------------------- decode_arguments_as


def test_decode_nested_dataclass() -> None:
    value = {
        "start": {"x": 1},
        "stops": [{"x": 2, "y": 3.5}],
        "color": "green",
        "tags": ["a", "b"],
        "window": [9, 17],
    }
    before = copy.deepcopy(value)
    route = decode_arguments_as(value, Route)
    assert route == Route(
        start=Point(1.0),
        stops=[Point(2.0, 3.5)],
        color=Color.GREEN,
        tags={"a", "b"},
        window=(9, 17),
    )
    assert isinstance(route.start.x, float)
    assert value == before


def test_decode_typeddict_returns_a_new_dict() -> None:
    value = {"text": "a", "replies": [{"text": "b", "replies": []}]}
    decoded = decode_arguments_as(value, Comment)
    assert decoded == value
    assert decoded is not value
    assert decoded["replies"] is not value["replies"]


def test_decode_plain_types() -> None:
    assert decode_arguments_as("red", Color) is Color.RED
    assert decode_arguments_as(2, Level) is Level.HIGH
    assert decode_arguments_as(None, Mixed) is Mixed.NOTHING
    assert decode_arguments_as([1, "a"], tuple[int, str]) == (1, "a")
    assert decode_arguments_as([1, 2, 2], set[int]) == {1, 2}
    assert decode_arguments_as([[1, 2]], frozenset[Cell | tuple[int, int]]) == frozenset({(1, 2)})
    assert decode_arguments_as([{"row": 1, "column": 2}], frozenset[Cell]) == {Cell(1, 2)}
    assert decode_arguments_as({"a": ["x"]}, dict[str, Sequence[str]]) == {"a": ["x"]}
    assert decode_arguments_as(3, float) == 3.0
    assert isinstance(decode_arguments_as(3, float), float)
    assert decode_arguments_as(3.0, int) == 3
    assert isinstance(decode_arguments_as(3.0, int), int)
    assert decode_arguments_as("2024-02-29", datetime.date) == datetime.date(2024, 2, 29)
    assert decode_arguments_as("/tmp", Path) == Path("/tmp")
    assert decode_arguments_as(5, UserId) == 5
    assert decode_arguments_as("b", Literal["a", "b"]) == "b"
    assert decode_arguments_as(1, Literal[Color.RED, 1]) == 1
    assert decode_arguments_as("red", Literal[Color.RED, 1]) is Color.RED


def test_union_takes_the_first_arm_that_decodes() -> None:
    assert decode_arguments_as(1, Union[int, float]) == 1
    assert isinstance(decode_arguments_as(1, Union[float, int]), float)
    assert decode_arguments_as(True, int | bool) is True
    assert decode_arguments_as({"x": 1}, Point | Movie) == Point(1.0)
    assert decode_arguments_as({"title": "t"}, Point | Movie) == {"title": "t"}


def test_any_values_are_copied_so_a_tool_cannot_change_the_history() -> None:
    value = {"a": [1, {"b": 2}]}
    decoded = decode_arguments_as(value, Any)
    decoded["a"][1]["b"] = 3
    assert value == {"a": [1, {"b": 2}]}


@pytest.mark.parametrize(
    ("value", "target", "pointer", "message"),
    [
        ("123", int, "", 'expected an integer, got string "123"'),
        (True, int, "", "expected an integer, got true"),
        (1.5, int, "", "expected an integer, got number 1.5"),
        ("1.5", float, "", "expected a number"),
        (1, str, "", "expected a string, got number 1"),
        (0, bool, "", "expected a boolean"),
        ("blue", Color, "", 'expected one of "red", "green", got string "blue"'),
        (1, Literal[True], "", "expected one of true, got number 1"),
        ("x", Optional[int], "", "expected an integer or null"),  # noqa: UP045
        (1.5, int | str, "", "expected an integer or a string, got number 1.5"),
        ([1, "2"], list[int], "/1", "expected an integer"),
        ({"a/b": "x"}, dict[str, int], "/a~1b", "expected an integer"),
        ({"m~n": "x"}, dict[str, int], "/m~0n", "expected an integer"),
        ({"x": "1"}, Point, "/x", "expected a number"),
        ({"x": 1, "z": 2}, Point, "", "unexpected property 'z'"),
        ({"y": 1}, Point, "", "missing required property 'x' of Point"),
        ([{"x": 1}], Point, "", "expected an object (Point), got an array"),
        ({"start": {"x": 1}, "stops": [{"x": "2"}]}, Route, "/stops/0/x", "expected a number"),
        ({"value": 1, "children": [{"value": "2"}]}, TreeNode, "/children/0/value", "integer"),
        ({"title": 1}, Movie, "/title", "expected a string"),
        ({"year": 1}, Movie, "", "missing required property 'title' of Movie"),
        ([1], tuple[int, int], "", "expected an array of 2 items"),
        ([1, "a"], tuple[int, int], "/1", "expected an integer"),
        ("not a date", datetime.date, "", "expected a date string"),
        ("nope", uuid.UUID, "", "expected a UUID string"),
        ({"value": 0}, Positive, "", "Positive rejected the values: value must be positive"),
        ([[1], [1]], set[Any], "", "expected an array of hashable items"),
    ],
)
def test_mismatches_name_the_path_and_what_was_expected(
    value: Any, target: Any, pointer: str, message: str
) -> None:
    before = copy.deepcopy(value)
    with pytest.raises(ArgumentsError) as caught:
        decode_arguments_as(value, target)
    ((path, text),) = caught.value.violations
    assert path == pointer
    assert message in text
    assert value == before


def test_decode_into_an_unsupported_target_is_a_definition_error() -> None:
    with pytest.raises(ToolDefinitionError, match="Opaque"):
        decode_arguments_as({}, Opaque)


def test_decode_into_an_unhashable_annotated_target() -> None:
    assert decode_arguments_as(4, Annotated[int, {"minimum": 0}]) == 4


# --------------------------------------------------------------------------- call_arguments


def test_call_arguments_decode_each_parameter_to_its_type() -> None:
    def plan(route: Route, color: Color, pair: tuple[int, str], tags: set[str]) -> Any:
        return route, color, pair, tags

    fs = function_schema(plan)
    arguments = {
        "route": {"start": {"x": 0}, "stops": []},
        "color": "red",
        "pair": [1, "a"],
        "tags": ["x", "y"],
    }
    args, kwargs = call_arguments(fs, plan, arguments)
    assert plan(*args, **kwargs) == (
        Route(Point(0.0), []),
        Color.RED,
        (1, "a"),
        {"x", "y"},
    )


async def test_call_arguments_for_an_async_function() -> None:
    async def fetch(url: str, retries: int = 0, *, timeout: float = 1.0) -> tuple[Any, ...]:
        await asyncio.sleep(0)
        return url, retries, timeout

    fs = function_schema(fetch)
    args, kwargs = call_arguments(fs, fetch, {"url": "u", "timeout": 2})
    assert await fetch(*args, **kwargs) == ("u", 0, 2.0)


def test_positional_only_parameters_are_passed_positionally() -> None:
    def f(a: int, b: str = "b", /, c: int = 0) -> tuple[Any, ...]:
        return a, b, c

    fs = function_schema(f)
    assert fs.positional_only == ("a", "b")
    args, kwargs = fs.decode({"a": 1, "c": 2})
    assert (args, kwargs) == ([1], {"c": 2})
    args, kwargs = fs.decode({"a": 1, "b": "x"})
    assert f(*args, **kwargs) == (1, "x", 0)


def test_every_bad_argument_is_reported() -> None:
    def f(a: int, b: str, /, c: list[int]) -> None: ...

    fs = function_schema(f)
    with pytest.raises(ArgumentsError) as caught:
        fs.decode({"b": 2, "c": [1, "x"], "zzz": 1})
    assert set(caught.value.violations) == {
        ("/a", "missing required argument"),
        ("/b", "expected a string, got number 2"),
        ("/c/1", 'expected an integer, got string "x"'),
        ("/zzz", "unexpected argument"),
    }
    assert "f do not fit its parameters" in str(caught.value)


def test_arguments_must_be_an_object() -> None:
    def f(a: int) -> None: ...

    with pytest.raises(ArgumentsError, match="must be a JSON object, got an array"):
        function_schema(f).decode([1])  # type: ignore[arg-type]


def test_decoding_does_not_mutate_or_alias_the_arguments() -> None:
    def f(items: list[dict[str, int]], anything: Any) -> None: ...

    arguments = {"items": [{"a": 1}], "anything": {"k": [1]}}
    before = copy.deepcopy(arguments)
    _, kwargs = function_schema(f).decode(arguments)
    kwargs["items"][0]["a"] = 2
    kwargs["anything"]["k"].append(2)
    assert arguments == before


class Greeter:
    def __init__(self, greeting: str) -> None:
        self.greeting = greeting

    def greet(self, name: str) -> str:
        """Greet someone."""
        return f"{self.greeting}, {name}"

    def __call__(self, name: str, loud: bool = False) -> str:
        return self.greet(name).upper() if loud else self.greet(name)


def test_methods_partials_and_callable_objects() -> None:
    greeter = Greeter("Hi")
    method = function_schema(greeter.greet)
    assert method.parameters == ("name",)
    assert method.description == "Greet someone."
    args, kwargs = call_arguments(method, greeter.greet, {"name": "Ann"})
    assert greeter.greet(*args, **kwargs) == "Hi, Ann"

    instance = function_schema(greeter)
    args, kwargs = instance.decode({"name": "Ann", "loud": True})
    assert greeter(*args, **kwargs) == "HI, ANN"

    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    partial = function_schema(functools.partial(add, b=1))
    assert partial.schema["required"] == ["a"]
    assert partial.description == "Add two numbers."


def test_wrapped_functions_use_the_wrapped_signature() -> None:
    def inner(city: str) -> str:
        return city

    @functools.wraps(inner)
    def outer(*args: Any, **kwargs: Any) -> str:
        return inner(*args, **kwargs)

    assert function_schema(outer).parameters == ("city",)


def test_function_schema_is_a_frozen_value() -> None:
    def f(a: int) -> None: ...

    fs = function_schema(f)
    assert isinstance(fs, FunctionSchema)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fs.description = "x"  # type: ignore[misc]
    assert "_plan" not in repr(fs)


def test_importing_the_module_does_not_import_jsonschema() -> None:
    code = (
        "import sys, nbagent.errors; before = set(sys.modules); "
        "import nbagent.schema._hints, nbagent.schema._signature; "
        "new = set(sys.modules) - before; "
        "assert not any(m.startswith(('jsonschema', 'referencing')) for m in new), new"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --------------------------------------------------------------------------- property test

_LEAVES: list[tuple[Any, st.SearchStrategy[Any]]] = [
    (str, st.text(max_size=5)),
    (int, st.integers()),
    (float, st.floats(allow_nan=False, allow_infinity=False)),
    (bool, st.booleans()),
    (None, st.none()),
    (Literal["a", "b", 3], st.sampled_from(["a", "b", 3])),
    (Color, st.sampled_from(["red", "green"])),
]


def _values(tp: Any) -> st.SearchStrategy[Any]:
    """JSON values that fit ``tp``."""
    if tp is type(None):
        return st.none()
    for leaf, strategy in _LEAVES:
        if tp is leaf or tp == leaf:
            return strategy
    origin, args = getattr(tp, "__origin__", None), getattr(tp, "__args__", ())
    if origin is list or origin is tuple:
        return st.lists(_values(args[0]), max_size=3)
    if origin is dict:
        return st.dictionaries(st.text(max_size=3), _values(args[1]), max_size=3)
    if origin is Union:
        return st.one_of(*(_values(arg) for arg in args))
    raise AssertionError(tp)


_types: st.SearchStrategy[Any] = st.recursive(
    st.sampled_from([leaf for leaf, _ in _LEAVES]),
    lambda inner: st.one_of(
        inner.map(lambda t: list[t]),  # type: ignore[valid-type]
        inner.map(lambda t: tuple[t, ...]),  # type: ignore[valid-type]
        inner.map(lambda t: dict[str, t]),  # type: ignore[valid-type]
        inner.map(lambda t: Optional[t]),  # type: ignore[valid-type]  # noqa: UP045
    ),
    max_leaves=4,
)


def _expected(tp: Any, value: Any) -> Any:
    """What decoding ``value`` into ``tp`` should give."""
    if tp is float:
        return float(value)
    if tp is Color:
        return Color(value)
    origin, args = getattr(tp, "__origin__", None), getattr(tp, "__args__", ())
    if origin is list:
        return [_expected(args[0], v) for v in value]
    if origin is tuple:
        return tuple(_expected(args[0], v) for v in value)
    if origin is dict:
        return {k: _expected(args[1], v) for k, v in value.items()}
    if origin is Union:
        return None if value is None else _expected(args[0], value)
    return value


@settings(max_examples=150, deadline=None)
@given(data=st.data(), tp=_types)
def test_schema_accepts_what_the_decoder_decodes(data: st.DataObject, tp: Any) -> None:
    validator = _check(function_schema(_with_hint(tp)).schema)
    value = data.draw(_values(tp))
    before = copy.deepcopy(value)
    assert validator.is_valid({"x": value})
    assert decode_arguments_as(value, tp) == _expected(tp, value)
    assert value == before
    assert not validator.is_valid({"x": value, "unexpected": 1})
