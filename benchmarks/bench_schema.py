"""Schema work per call: compile a realistic tool schema once, validate every call's arguments.

The schema has nested objects, arrays of objects, enums, a pattern, numeric ranges, ``$defs`` and
``$ref``, ``additionalProperties: false``. Contenders (same schema, same instances):

* nbagent: ``compile_schema`` (strict policy + metaschema check + validator), then
  ``CompiledSchema.is_valid`` and ``CompiledSchema.validate`` (which collects every violation).
* jsonschema-rs (Rust, the fast reference): ``validator_for`` then ``is_valid`` / ``validate``.
* jsonschema (pure Python): ``Draft202012Validator.check_schema`` + construction, then
  ``is_valid`` / ``validate``.

``validate`` is timed on a valid instance (the loop's normal path: no error to build).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from _common import Section, compare, describe_import_error, main, median_of

SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1, "maxLength": 500},
        "mode": {"enum": ["fast", "thorough", "exhaustive"]},
        "limit": {"type": "integer", "minimum": 1, "maximum": 100},
        "filters": {
            "type": "array",
            "maxItems": 20,
            "items": {"$ref": "#/$defs/filter"},
        },
        "sort": {
            "type": "object",
            "properties": {
                "field": {"type": "string", "pattern": "^[a-z_][a-z0-9_]*$"},
                "order": {"enum": ["asc", "desc"]},
            },
            "required": ["field"],
            "additionalProperties": False,
        },
        "owner": {"$ref": "#/$defs/person"},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
    },
    "required": ["query", "mode"],
    "additionalProperties": False,
    "$defs": {
        "filter": {
            "type": "object",
            "properties": {
                "field": {"type": "string"},
                "op": {"enum": ["eq", "ne", "lt", "gt", "in", "contains"]},
                "value": {"type": ["string", "number", "boolean", "array"]},
            },
            "required": ["field", "op", "value"],
            "additionalProperties": False,
        },
        "person": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "email": {"type": "string", "format": "email"},
                "age": {"type": "integer", "minimum": 0},
            },
            "required": ["name"],
        },
    },
}

VALID: dict[str, Any] = {
    "query": "quarterly revenue by region",
    "mode": "thorough",
    "limit": 25,
    "filters": [
        {"field": "year", "op": "eq", "value": 2024},
        {"field": "region", "op": "in", "value": ["emea", "apac"]},
        {"field": "amount", "op": "gt", "value": 1000.5},
    ],
    "sort": {"field": "amount", "order": "desc"},
    "owner": {"name": "Ada", "email": "ada@example.org", "age": 36},
    "tags": ["finance", "q4"],
}
INVALID: dict[str, Any] = {**VALID, "mode": "sloppy", "limit": 0}


MIN_MEASURE_SECONDS = 0.05  # --quick: 0.02
REGISTERED = 20  # tools given to one Agent; --quick: 8


def _per_call(fn: Callable[[], Any]) -> Callable[[], float]:
    """A measurement: call ``fn`` in batches until enough time passed; seconds per call."""
    minimum = MIN_MEASURE_SECONDS

    def measure() -> float:
        calls, started = 0, time.perf_counter()
        batch = 10
        while True:
            for _ in range(batch):
                fn()
            calls += batch
            elapsed = time.perf_counter() - started
            if elapsed >= minimum:
                return elapsed / calls
            batch *= 2

    measure()
    return measure


def _nbagent() -> Any:
    from nbagent.schema import compile_schema

    compiled = compile_schema(SCHEMA)
    if not compiled.is_valid(VALID) or compiled.is_valid(INVALID):
        raise RuntimeError("nbagent validated the fixtures wrongly")
    return compile_schema, compiled


def _nbagent_uncached() -> Any:
    """compile_schema without its cache (a tool's first registration)."""
    from nbagent.schema._compiled import compile_uncached

    return lambda schema: compile_uncached(schema, True)


def _rs() -> Any:
    try:
        import jsonschema_rs
    except ImportError as exc:
        raise describe_import_error("jsonschema-rs", exc) from None
    validator = jsonschema_rs.validator_for(SCHEMA)
    if not validator.is_valid(VALID) or validator.is_valid(INVALID):
        raise RuntimeError("jsonschema-rs validated the fixtures wrongly")
    return jsonschema_rs, validator


def _py() -> Any:
    try:
        from jsonschema import Draft202012Validator
    except ImportError as exc:
        raise describe_import_error("jsonschema", exc) from None
    validator = Draft202012Validator(SCHEMA)
    if not validator.is_valid(VALID) or validator.is_valid(INVALID):
        raise RuntimeError("jsonschema validated the fixtures wrongly")
    return Draft202012Validator, validator


def _compile_py() -> Any:
    cls, _ = _py()

    def build() -> Any:
        cls.check_schema(SCHEMA)
        return cls(SCHEMA)

    return build


def _registering(one_by_one: bool) -> Callable[[], float]:
    """Seconds per tool to give an Agent ``count`` tools with SCHEMA: all at construction, or
    one by one through ``Agent.add_tool`` (what the notebook session does before a run)."""
    from nbagent import Agent, Tool

    async def noop(ctx: Any) -> str:
        return "ok"

    count = REGISTERED
    tools = [Tool(name=f"t{i}", input_schema=SCHEMA, execute=noop) for i in range(count)]

    def measure() -> float:
        started = time.perf_counter()
        if one_by_one:
            agent = Agent("offline")
            for item in tools:
                agent.add_tool(item)
        else:
            Agent("offline", tools)
        return (time.perf_counter() - started) / count

    measure()
    return measure


def _compiling(compile_: Callable[[Any], Any]) -> Callable[[], float]:
    return _per_call(lambda: compile_(SCHEMA))


def _validating(method: str, instance: Any) -> dict[str, Callable[[], Callable[[], float]]]:
    """Setups that time ``validator.<method>(instance)`` for each contender."""

    def setup(make: Callable[[], Any]) -> Callable[[], Callable[[], float]]:
        def ready() -> Callable[[], float]:
            bound = getattr(make()[1], method)
            return _per_call(lambda: bound(instance))

        return ready

    return {"nbagent": setup(_nbagent), "jsonschema-rs": setup(_rs), "jsonschema": setup(_py)}


def build(quick: bool) -> Section:
    global MIN_MEASURE_SECONDS, REGISTERED
    if quick:
        MIN_MEASURE_SECONDS, REGISTERED = 0.02, 8
    section = Section("schema", "4. Schema work: compile once, validate each call")
    rounds = 3 if quick else 7
    cases: dict[str, dict[str, Callable[[], Callable[[], float]]]] = {
        "compile": {
            "nbagent": lambda: _compiling(_nbagent_uncached()),
            "nbagent, cached": lambda: _compiling(_nbagent()[0]),
            "jsonschema-rs": lambda: _compiling(_rs()[0].validator_for),
            "jsonschema": lambda: _per_call(_compile_py()),
        },
        f"{REGISTERED} tools, per tool": {
            "nbagent Agent(tools)": lambda: _registering(False),
            f"nbagent {REGISTERED} x add_tool": lambda: _registering(True),
        },
        "is_valid (valid)": _validating("is_valid", VALID),
        "is_valid (invalid)": _validating("is_valid", INVALID),
        "validate (valid)": _validating("validate", VALID),
    }
    try:
        import jsonschema_rs  # noqa: F401

        reference = "jsonschema-rs"
    except ImportError:
        reference = "nbagent"
    for label, contenders in cases.items():
        ref = "nbagent Agent(tools)" if label.endswith("per tool") else reference
        compare(section, label, contenders, rounds=rounds, reference=ref)
    for row in section.rows:
        if row.values:
            row.extra = "us per tool" if row.label.endswith("per tool") else "us per call"
    nb = median_of(section.row("validate (valid)", "nbagent"))
    if nb is not None:
        section.notes.append(
            f"nbagent validates with jsonschema (extended for ECMA-262 regexes): "
            f"{nb * 1e6:,.0f} us per call on this schema"
        )
    section.notes.append(
        "compile happens once per tool (Agent construction / registration); validate once per call"
    )
    label, n = f"{REGISTERED} tools, per tool", REGISTERED
    once = median_of(section.row(label, "nbagent Agent(tools)"))
    each = median_of(section.row(label, f"nbagent {n} x add_tool"))
    if once and each:
        section.notes.append(
            f"giving an Agent {n} such tools: {once * n * 1e3:,.0f} ms at construction, "
            f"{each * n * 1e3:,.0f} ms through {n} add_tool calls (add_tool compiles only the new "
            "tool; compiled schemas are cached by canonical JSON)"
        )
    return section


if __name__ == "__main__":
    main(build)
