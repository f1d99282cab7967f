"""Turn a typed Python function into a strict JSON Schema, and JSON arguments back into a call.

``function_schema(fn)`` reads the signature, the type hints and the docstring once, at decoration
time, and returns the tool's input schema (Draft 2020-12, self-contained) together with a
precompiled plan that turns validated JSON arguments into the ``(args, kwargs)`` of a call. The
types themselves are compiled by :mod:`nbagent.schema._hints`.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from types import NoneType
from typing import Any

from ..errors import ArgumentsError, ToolDefinitionError
from ._decoders import (
    _decode_bool,
    _decode_float,
    _decode_int,
    _decode_none,
    _decode_str,
    _Decoder,
    _describe,
    _Mismatch,
    _pointer,
)
from ._docstrings import _parse_docstring
from ._hints import (
    _MISSING,
    _add_default,
    _Compiler,
    _describe_property,
    _object_schema,
)

__all__ = ["FunctionSchema", "call_arguments", "function_schema"]


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class FunctionSchema:
    """A function's input schema, its description, and how to call it with JSON arguments.

    Treat ``schema`` as read-only: it is shared by every use of the tool.
    """

    schema: dict[str, Any]
    description: str
    parameters: tuple[str, ...]
    positional_only: tuple[str, ...]
    _plan: _CallPlan = field(repr=False, compare=False)

    def decode(
        self, arguments: Mapping[str, Any], context: Mapping[str, Any] | None = None
    ) -> tuple[list[Any], dict[str, Any]]:
        """Return ``(args, kwargs)`` for ``fn(*args, **kwargs)`` from validated JSON arguments.

        Each argument is decoded to its parameter's type (a dataclass parameter receives an
        instance, an Enum parameter its member, a tuple parameter a tuple). An absent optional
        argument is left out so the function's own default applies. ``context`` gives values
        for the skipped (context) parameters by name; names it has that were not skipped are
        ignored. Raises :class:`ArgumentsError` naming every argument that does not fit.
        """
        return self._plan.decode(arguments, context)


def call_arguments(
    fn_schema: FunctionSchema,
    fn: Callable[..., Any],
    arguments: Mapping[str, Any],
    *,
    context: Mapping[str, Any] | None = None,
) -> tuple[list[Any], dict[str, Any]]:
    """Return ``(args, kwargs)`` to call ``fn`` (the function ``fn_schema`` was made from).

    Same as ``fn_schema.decode(arguments, context)``; ``fn`` is not inspected again, because
    everything needed was precomputed by :func:`function_schema`.
    """
    del fn
    return fn_schema._plan.decode(arguments, context)


# --------------------------------------------------------------------------- function_schema


class _Never:
    """No JSON value has this type: parameters without a fast path use it."""


# Decoders that return a value of exactly this type unchanged.
_EXACT: dict[_Decoder, type] = {
    _decode_str: str,
    _decode_int: int,
    _decode_float: float,
    _decode_bool: bool,
    _decode_none: NoneType,
}


class _CallPlan:
    """Per-parameter decoders, precomputed so that decoding a call is a few dict lookups."""

    __slots__ = ("context_keyword", "keyword", "names", "owner", "positional", "required")

    def __init__(
        self,
        owner: str,
        keyword: tuple[tuple[str, _Decoder, type], ...],
        positional: tuple[tuple[str, _Decoder | None, Any], ...],
        required: frozenset[str],
        context_keyword: tuple[str, ...],
    ) -> None:
        self.owner = owner
        self.keyword = keyword
        # Positional-only parameters in order; a None decoder marks a context parameter.
        self.positional = positional
        self.required = required
        self.names = frozenset(name for name, _, _ in keyword) | frozenset(
            name for name, decode, _ in positional if decode is not None
        )
        self.context_keyword = context_keyword

    def decode(
        self, arguments: Mapping[str, Any], context: Mapping[str, Any] | None
    ) -> tuple[list[Any], dict[str, Any]]:
        if type(arguments) is not dict and not isinstance(arguments, Mapping):
            raise ArgumentsError(
                f"arguments of {self.owner} must be a JSON object, got {_describe(arguments)}"
            )
        problems: list[tuple[str, str]] = []
        found = 0
        kwargs: dict[str, Any] = {}
        for name, decode, exact in self.keyword:
            value = arguments.get(name, _MISSING)
            if type(value) is exact:  # a str for a str parameter: nothing to convert
                kwargs[name] = value
                found += 1
                continue
            if value is _MISSING:
                if name in self.required:
                    problems.append((_pointer([name]), "missing required argument"))
                continue
            found += 1
            try:
                kwargs[name] = decode(value)
            except _Mismatch as mismatch:
                problems.append((_pointer([*mismatch.path, name]), mismatch.message))
        args: list[Any] = []
        if self.positional:
            found += self._positional(arguments, context, args, problems)
        if found != len(arguments):
            for key in arguments:
                if key not in self.names:
                    problems.append((_pointer([str(key)]), "unexpected argument"))
        if problems:
            raise ArgumentsError(f"arguments of {self.owner} do not fit its parameters", problems)
        if context:
            for name in self.context_keyword:
                if name in context:
                    kwargs[name] = context[name]
        return args, kwargs

    def _positional(
        self,
        arguments: Mapping[str, Any],
        context: Mapping[str, Any] | None,
        args: list[Any],
        problems: list[tuple[str, str]],
    ) -> int:
        found = 0
        values: list[Any] = []
        for name, decode, _ in self.positional:
            if decode is None:
                values.append(context.get(name, _MISSING) if context else _MISSING)
                continue
            value = arguments.get(name, _MISSING)
            if value is _MISSING:
                if name in self.required:
                    problems.append((_pointer([name]), "missing required argument"))
            else:
                found += 1
                try:
                    value = decode(value)
                except _Mismatch as mismatch:
                    problems.append((_pointer([*mismatch.path, name]), mismatch.message))
            values.append(value)
        if problems:
            return found  # the call will not be made
        while values and values[-1] is _MISSING:
            values.pop()
        # A gap before a later positional argument is filled with the function's own default.
        for (name, _, default), value in zip(self.positional, values, strict=False):
            if value is _MISSING:
                if default is inspect.Parameter.empty:
                    raise ToolDefinitionError(f"{self.owner}: no value for parameter {name!r}")
                value = default
            args.append(value)
        return found


def _callable_name(fn: Any) -> str:
    while isinstance(fn, functools.partial):
        fn = fn.func
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    return str(name) if name else type(fn).__qualname__


def _hint_target(fn: Any) -> Any:
    """The object whose annotations and globals describe ``fn``'s parameters."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.isclass(fn):
        return fn.__init__
    if inspect.isfunction(fn) or inspect.ismethod(fn) or inspect.isbuiltin(fn):
        return fn
    return type(fn).__call__


def _resolve_hints(
    fn: Any, parameters: Sequence[inspect.Parameter], skip: Collection[str], owner: str
) -> dict[str, Any]:
    target = _hint_target(fn)
    try:
        return typing.get_type_hints(target, include_extras=True)
    except Exception:
        pass
    # Something failed: resolve one parameter at a time, so that an unresolvable hint on a
    # skipped (context) parameter or on the return type does not matter, and the error can
    # name the parameter whose hint is at fault.
    unwrapped = inspect.unwrap(target.__func__ if inspect.ismethod(target) else target)
    globalns = getattr(unwrapped, "__globals__", {})
    hints: dict[str, Any] = {}
    for parameter in parameters:
        if parameter.name in skip or parameter.annotation is inspect.Parameter.empty:
            continue

        def holder() -> None: ...

        holder.__annotations__ = {parameter.name: parameter.annotation}
        try:
            hints.update(typing.get_type_hints(holder, globalns, include_extras=True))
        except Exception as exc:
            raise ToolDefinitionError(
                f"{owner}: the type hint of parameter {parameter.name!r} "
                f"({parameter.annotation!r}) could not be resolved: {exc}. Import or define "
                "the name at module level, or pass schema= to @tool"
            ) from None
    return hints


def function_schema(fn: Callable[..., Any], *, skip: Collection[str] = ()) -> FunctionSchema:
    """Build the input schema of ``fn`` from its type hints and docstring.

    Parameters named in ``skip`` (context parameters) are left out. Raises
    :class:`ToolDefinitionError` naming the parameter for anything the schema cannot express:
    ``*args``/``**kwargs``, a missing or unresolvable hint, an unsupported type.
    """
    owner = _callable_name(fn)
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(f"cannot read the signature of {owner}: {exc}") from None
    parameters = list(signature.parameters.values())
    for parameter in parameters:
        if parameter.name in skip:
            continue
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            stars = "*" if parameter.kind is parameter.VAR_POSITIONAL else "**"
            raise ToolDefinitionError(
                f"{owner}: parameter {stars}{parameter.name} cannot be expressed as a JSON "
                "Schema property; name each parameter, or pass schema= to @tool"
            )
        if parameter.annotation is parameter.empty:
            raise ToolDefinitionError(
                f"{owner}: parameter {parameter.name!r} has no type hint; "
                "add a type hint or pass schema= to @tool"
            )
    hints = _resolve_hints(fn, parameters, skip, owner)
    target = fn.func if isinstance(fn, functools.partial) else fn
    description, parameter_docs = _parse_docstring(inspect.getdoc(target))

    compiler = _Compiler(owner)
    properties: dict[str, Any] = {}
    required: list[str] = []
    keyword: list[tuple[str, _Decoder, type]] = []
    positional: list[tuple[str, _Decoder | None, Any]] = []
    context_keyword: list[str] = []
    for parameter in parameters:
        positional_only = parameter.kind is parameter.POSITIONAL_ONLY
        if parameter.name in skip:
            if positional_only:
                positional.append((parameter.name, None, parameter.default))
            elif parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                context_keyword.append(parameter.name)
            continue
        node = compiler.compile(hints[parameter.name], f"parameter {parameter.name!r}")
        _describe_property(node.schema, parameter_docs.get(parameter.name))
        if parameter.default is parameter.empty:
            required.append(parameter.name)
        else:
            _add_default(node.schema, parameter.default)
        properties[parameter.name] = node.schema
        if positional_only:
            positional.append((parameter.name, node.decode, parameter.default))
        else:
            keyword.append((parameter.name, node.decode, _EXACT.get(node.decode, _Never)))

    schema = _object_schema(properties, required, "")
    defs = compiler.definitions()
    if defs:
        schema["$defs"] = defs
    plan = _CallPlan(
        owner, tuple(keyword), tuple(positional), frozenset(required), tuple(context_keyword)
    )
    return FunctionSchema(
        schema=schema,
        description=description,
        parameters=tuple(properties),
        positional_only=tuple(n for n, decode, _ in positional if decode is not None),
        _plan=plan,
    )
