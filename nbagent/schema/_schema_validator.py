"""The validator behind :mod:`nbagent.schema`: Draft 2020-12 as jsonschema implements it, with
ECMA-262 regexes (through ``regress``), ``format`` as a pure annotation, and a registry that
refuses every retrieval, so nothing is ever fetched. Heavy imports happen on first use.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NoReturn

from nbagent.errors import SchemaError

if TYPE_CHECKING:
    import regress
    from referencing import Registry

__all__: list[str] = []


def _refuse_retrieval(uri: str) -> NoReturn:
    """The registry's only way to fetch: always refuse (rule 2: nothing is ever fetched)."""
    raise SchemaError(f"refusing to retrieve {uri!r}: nbagent never fetches schemas")


def _new_registry() -> Registry[Any]:
    from referencing import Registry

    # `_refuse_retrieval` is looked up at call time so that tests can watch the hook. (mypy does
    # not see the attrs alias `retrieve` of `Registry._retrieve`.)
    return Registry(retrieve=lambda uri: _refuse_retrieval(uri))  # type: ignore[call-arg]


@functools.lru_cache(maxsize=1024)
def _regex(pattern: str) -> regress.Regex:
    """Compile an ECMA-262 pattern: Unicode mode, else legacy (Annex B) syntax; cached."""
    import regress

    try:
        return regress.Regex(pattern, "u")
    except regress.RegressError:
        return regress.Regex(pattern)


def _matches(pattern: str, text: str) -> bool:
    return _regex(pattern).find(text) is not None


@functools.lru_cache(maxsize=1)
def _load_jsonschema() -> None:
    """Import jsonschema without its optional ``rfc3987_syntax`` helper.

    That helper (installed with Jupyter) builds a grammar at import, about 1 s here, for the
    ``iri`` format check — and nbagent never checks formats. jsonschema skips it on ImportError.
    If either module is already imported, nothing changes.
    """
    if "jsonschema" in sys.modules or "rfc3987_syntax" in sys.modules:
        return
    sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]
    try:
        import jsonschema  # noqa: F401
    finally:
        if sys.modules.get("rfc3987_syntax", 0) is None:
            del sys.modules["rfc3987_syntax"]


@functools.lru_cache(maxsize=1)
def _metaschema_validator() -> Any:
    """The Draft 2020-12 metaschema validator, without format checks, unable to fetch."""
    from jsonschema import Draft202012Validator

    return Draft202012Validator(
        Draft202012Validator.META_SCHEMA, format_checker=None, registry=_new_registry()
    )


@functools.lru_cache(maxsize=1)
def _validator_class() -> Any:
    """Draft 2020-12 with ECMA-262 regexes and `format` as a pure annotation."""
    from jsonschema import Draft202012Validator, validators
    from jsonschema.exceptions import ValidationError

    def is_object(validator: Any, instance: object) -> bool:
        return bool(validator.is_type(instance, "object"))

    def pattern(validator: Any, regex: str, instance: object, schema: object) -> Iterator[Any]:
        if validator.is_type(instance, "string") and not _matches(regex, str(instance)):
            yield ValidationError(f"{instance!r} does not match {regex!r}")

    def pattern_properties(
        validator: Any, patterns: dict[str, Any], instance: Any, schema: object
    ) -> Iterator[Any]:
        if not is_object(validator, instance):
            return
        for regex, subschema in patterns.items():
            for name, value in instance.items():
                if _matches(regex, name):
                    yield from validator.descend(value, subschema, path=name, schema_path=regex)

    def additional_properties(
        validator: Any, additional: Any, instance: Any, schema: dict[str, Any]
    ) -> Iterator[Any]:
        if not is_object(validator, instance):
            return
        known = schema.get("properties", {})
        patterns = list(schema.get("patternProperties", {}))
        extras = [
            name
            for name in instance
            if name not in known and not any(_matches(regex, name) for regex in patterns)
        ]
        if additional is False:
            for name in extras:
                yield ValidationError(
                    "unexpected property (additionalProperties is false)", path=[name]
                )
        elif additional is not True:
            for name in extras:
                yield from validator.descend(instance[name], additional, path=name)

    def evaluated_keys(
        validator: Any, instance: dict[str, Any], schema: Any, own: bool
    ) -> set[str]:
        """Keys some applicator of ``schema`` evaluated (the annotations unevaluatedProperties
        reads), following refs and only subschemas that hold."""
        if not isinstance(schema, dict):
            return set()
        keys: set[str] = set()
        for keyword in ("$ref", "$dynamicRef"):
            ref = schema.get(keyword)
            if ref is not None:
                resolved = validator._resolver.lookup(ref)
                inner = validator.evolve(schema=resolved.contents, _resolver=resolved.resolver)
                keys |= evaluated_keys(inner, instance, resolved.contents, False)
        properties = schema.get("properties")
        if isinstance(properties, dict):
            keys |= properties.keys() & instance.keys()
        for regex in schema.get("patternProperties", {}):
            keys.update(name for name in instance if _matches(regex, name))
        for keyword in ("additionalProperties", "unevaluatedProperties"):
            subschema = schema.get(keyword)
            if subschema is None or (own and keyword == "unevaluatedProperties"):
                continue
            keys.update(
                name
                for name, value in instance.items()
                if next(validator.descend(value, subschema), None) is None
            )
        for name, subschema in schema.get("dependentSchemas", {}).items():
            if name in instance:
                keys |= evaluated_keys(validator, instance, subschema, False)
        for keyword in ("allOf", "anyOf", "oneOf"):
            for subschema in schema.get(keyword, ()):
                if next(validator.descend(instance, subschema), None) is None:
                    keys |= evaluated_keys(validator, instance, subschema, False)
        if "if" in schema:
            if next(validator.descend(instance, schema["if"]), None) is None:
                keys |= evaluated_keys(validator, instance, schema["if"], False)
                keys |= evaluated_keys(validator, instance, schema.get("then"), False)
            else:
                keys |= evaluated_keys(validator, instance, schema.get("else"), False)
        return keys

    def unevaluated_properties(
        validator: Any, unevaluated: Any, instance: Any, schema: dict[str, Any]
    ) -> Iterator[Any]:
        if not is_object(validator, instance) or unevaluated is True:
            return
        evaluated = evaluated_keys(validator, instance, schema, True)
        for name, value in instance.items():
            if name in evaluated:
                continue
            if unevaluated is False:
                yield ValidationError(
                    "unexpected property (unevaluatedProperties is false)", path=[name]
                )
            else:
                yield from validator.descend(value, unevaluated, path=name, schema_path=name)

    def annotation_only(
        validator: Any, value: object, instance: object, schema: object
    ) -> Iterator[Any]:
        return iter(())

    return validators.extend(
        Draft202012Validator,
        {
            "additionalProperties": additional_properties,
            "format": annotation_only,
            "pattern": pattern,
            "patternProperties": pattern_properties,
            "unevaluatedProperties": unevaluated_properties,
        },
    )
