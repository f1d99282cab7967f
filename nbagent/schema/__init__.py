"""Strict JSON Schema for tool inputs: normalize, compile once, validate every call.

This package is the schema room, and this module its face: compiling and validating schemas
(``_compiled``: the compiled schema and its cache; ``_policy``: the checks below; the validator
in ``_schema_validator``), strict JSON (``_strict_json``), Python types as schemas and decoders
(``_hints``, ``_decoders``, ``_pydantic``), functions as tools' schemas (``_signature``,
``_docstrings``) and the schemas no value satisfies (``_satisfiable``). It may import the ground
only (:mod:`nbagent.errors`); everything that knows tools imports it.

A tool's input schema is compiled once (at ``Agent(...)`` construction or tool registration) and the
compiled form validates each call's arguments before the tool runs (DESIGN.md, "Contract from the
seeds", rules 2 and 3).

Policy applied by :func:`compile_schema`:

* JSON Schema **Draft 2020-12 only**. ``$schema`` may appear only at the root and must name 2020-12
  (``SCHEMA_DIALECT``, with or without a trailing ``#``). Without ``$id`` there are no embedded
  resources, and the specification forbids ``$schema`` in any other subschema.
* Rejected, with a :class:`~nbagent.errors.SchemaError` naming the JSON pointer: ``$id``,
  ``$recursiveRef``, ``$recursiveAnchor``, and every ``$ref``/``$dynamicRef`` that is not
  same-document (it must start with ``#``). Only schema positions are inspected: a *property named*
  ``$id`` or an ``$id`` inside ``enum``/``const``/``default``/``examples`` is data, not a keyword.
  Locations that a ``$ref`` points at count as schema positions too.
* References must resolve, point at a schema, and not form a ``$ref`` cycle that never consumes
  input (such a schema would recurse forever on every call).
* The schema must pass the Draft 2020-12 metaschema.
* **Nothing is ever fetched**: the validator's ``referencing.Registry`` has a ``retrieve`` that
  raises, so even a bug in the checks above cannot reach the network.

Validation is structural only: ``format`` and ``contentEncoding``/``contentMediaType``/
``contentSchema`` are annotations that never fail; no defaults are applied; nothing is coerced
(``"123"`` is not an integer, ``True`` is not an integer, ``1.0`` is); the instance is never
mutated.

Regex dialect: ``pattern`` and ``patternProperties`` (and the pattern matching that
``additionalProperties``/``unevaluatedProperties`` depend on) use **ECMA-262**, as JSON Schema
specifies, through the ``regress`` package, not Python's :mod:`re`. So ``^[a-z]+$`` does not match
``"abc\\n"``, ``\\d`` is ASCII only and ``\\p{Letter}`` works. A pattern is compiled with the
Unicode (``u``) flag, as the specification recommends; a pattern that is only valid in ECMA's
legacy (Annex B) syntax, such as ``\\-`` outside a class, falls back to that syntax, as browsers do
for a regex without ``u``. Python-only syntax (``(?i)``, ``\\Z``, ...) is either a compile-time
:class:`SchemaError` or means what ECMA says it means.

Heavy libraries (jsonschema, referencing, regress) are imported on first use, so
``import nbagent`` stays fast.
"""

from __future__ import annotations

from nbagent.schema._compiled import CompiledSchema, compile_schema, normalize_schema
from nbagent.schema._policy import SCHEMA_DIALECT

__all__ = ["SCHEMA_DIALECT", "CompiledSchema", "compile_schema", "normalize_schema"]
