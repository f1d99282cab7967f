"""Definitions (what the model sees), Tools (definition + the function that runs it), calls.

A :class:`Definition` is sent to a Generator; a :class:`Tool` is registered on an Agent, which
runs it inside its loop. :func:`tool` builds a Tool from a typed Python function.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Literal, TypeVar, Union, overload

from ._ground.textbuf import _UNSET, StreamedArguments, TextBuffer
from .content import ToolResult
from .errors import ArgumentsError, SchemaError, ToolDefinitionError
from .limits import Limits
from .schema._strict_json import parse_arguments

if TYPE_CHECKING:
    from .schema import CompiledSchema

__all__ = [
    "Definition",
    "ExecutionMode",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolInput",
    "ToolSequence",
    "decode_arguments",
    "parse_call_arguments",
    "tool",
    "validate_arguments",
    "validate_tools",
]

T = TypeVar("T")
ExecutionMode = Literal["concurrent", "sequential"]
NeedsApproval = Union[bool, Callable[[Mapping[str, Any]], bool | Awaitable[bool]]]
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class ToolCall:
    """One call the model asked for: ``arguments`` is the raw JSON text exactly as sent."""

    id: str
    name: str
    arguments: str = "{}"
    provider_executed: bool = False
    #: A provider-executed call's own block (JSON), sent back verbatim in the history; for a
    #: call the loop runs, what its adapter must send back with it (Gemini's extra_content).
    raw: Any = field(default=None, compare=False, repr=False)

    @functools.cached_property
    def input(self) -> Any:
        """The arguments parsed as strict JSON, within the default :class:`~nbagent.Limits`.

        Raises :class:`ArgumentsError` for anything that is not exactly one JSON value: invalid
        JSON, ``NaN``/``Infinity``, a key given twice, a lone surrogate, too large or too deep.
        Empty text counts as ``{}`` (some servers send ``""`` for tools without parameters).
        """
        return parse_call_arguments(self)


def parse_call_arguments(call: ToolCall, limits: Limits | None = None) -> Any:
    """A fresh parse of ``call.arguments`` as strict JSON within ``limits`` (see ToolCall.input)."""
    bounds = limits or _DEFAULT_LIMITS
    return parse_arguments(
        call.arguments,
        name=call.name,
        max_bytes=bounds.max_argument_bytes,
        max_depth=bounds.max_argument_depth,
    )


class ToolInput(StreamedArguments):
    """Streaming arguments of one call, given to ``on_input_*`` callbacks.

    ``delta`` is the newest fragment; ``text`` the JSON received so far and ``partial`` its best
    parse (a dict that fills in as fragments arrive; the final input when complete) are
    computed when first read.
    """

    __slots__ = ("call_id", "delta", "name")
    __match_args__ = ("call_id", "name", "text", "delta", "partial")
    call_id: str
    name: str
    delta: str

    def __init__(
        self,
        call_id: str,
        name: str,
        text: str | None = None,
        delta: str = "",
        partial: Any = _UNSET,
        *,
        source: tuple[TextBuffer, int] | None = None,
    ) -> None:
        object.__setattr__(self, "call_id", call_id)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "delta", delta)
        self._init_arguments(text if text is not None or source else "", source, partial)

    def __repr__(self) -> str:
        return f"ToolInput(call_id={self.call_id!r}, name={self.name!r}, delta={self.delta!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolInput):
            return NotImplemented
        return (self.call_id, self.name, self.delta, self.text) == (
            other.call_id,
            other.name,
            other.delta,
            other.text,
        )

    def __hash__(self) -> int:
        return hash((self.call_id, self.name, self.delta, self.text))


@dataclass(frozen=True, kw_only=True)
class Definition:
    """What a model is told about a tool: name, description and a JSON Schema for its input."""

    name: str
    description: str = ""
    input_schema: Mapping[str, Any] | None = None
    title: str | None = None
    input_examples: tuple[Mapping[str, Any], ...] = ()
    strict: bool | None = None
    provider_options: Mapping[str, Any] = field(default_factory=dict)
    #: The provider runs it (web search …): ``provider_options["tool"]`` is its own spec.
    provider_executed: bool = False


class ToolContext:
    """What a running tool may use: its call, parsed input, progress updates and cancellation.

    Sync tools run on a worker thread: they should poll :meth:`cancelled` around slow work.
    Async tools simply receive ``asyncio.CancelledError``. ``run_id`` and ``step`` say which run
    and which model turn asked for the call (None when a tool is run outside a run).
    """

    __slots__ = ("_cancelled", "_done", "_emit", "call", "input", "run_id", "step", "tool")

    def __init__(
        self,
        call: ToolCall,
        input: Any,
        tool: Tool,
        emit: Callable[[ToolResult], None] | None = None,
        *,
        run_id: str | None = None,
        step: int | None = None,
    ) -> None:
        self.call = call
        self.input = input
        self.tool = tool
        self.run_id = run_id
        self.step = step
        self._emit = emit
        self._cancelled = False  # set once, from the loop; a worker thread only reads it
        self._done = False

    def update(self, progress: ToolResult | str | float) -> None:
        """Report provisional progress. Shown to the person only; ignored after the tool returned.

        A float in [0, 1] is a fraction done; a string is a status line.
        """
        if self._done or self._emit is None:
            return
        if isinstance(progress, ToolResult):
            result = replace(progress, terminate=False)  # provisional terminate is ignored
        elif isinstance(progress, (int, float)) and not isinstance(progress, bool):
            from .content import TextPart

            result = ToolResult((TextPart(f"{float(progress):.0%}"),), value=float(progress))
        else:
            from .content import TextPart

            result = ToolResult((TextPart(str(progress)),), value=progress)
        self._emit(result)

    def cancelled(self) -> bool:
        """True once the run was cancelled or the tool timed out: stop work and return."""
        return self._cancelled

    def _finish(self) -> None:
        self._done = True

    def _request_cancel(self) -> None:
        self._cancelled = True


Execute = Callable[[ToolContext], Any]
InputCallback = Callable[[ToolInput], Any]


@dataclass(frozen=True, kw_only=True)
class Tool(Definition):
    """A Definition plus the function that runs it and the rules for running it.

    ``execute(context)`` may be sync (run on a worker thread) or async and returns anything
    :func:`nbagent.content.to_tool_result` understands. ``needs_approval`` is a bool or a
    function of the input (sync or async). ``to_model_output`` turns the returned value into
    what the model reads. ``execution_mode="sequential"`` keeps calls of this tool from
    overlapping. ``timeout`` (seconds) bounds one call. ``preview`` is a function of the
    (validated) input, sync or async, that returns what the call *would* do without doing it
    (the rows a delete would remove, a diff, a plot): front ends show it while the call waits
    for approval. It is for the person only, bounded by ``Agent.preview_timeout``.
    ``code_arguments`` names arguments that hold code, with their language (``{"code":
    "python"}``, ``{"query": "sql"}``): front ends show them as code, highlighted, while they
    stream, instead of as JSON.
    """

    execute: Execute | None = None
    needs_approval: NeedsApproval = False
    to_model_output: Callable[[Any], Any] | None = None
    on_input_start: InputCallback | None = None
    on_input_delta: InputCallback | None = None
    on_input_available: InputCallback | None = None
    execution_mode: ExecutionMode = "concurrent"
    timeout: float | None = None
    preview: Callable[[Mapping[str, Any]], Any] | None = None
    code_arguments: Mapping[str, str] = field(default_factory=dict)
    function: Callable[..., Any] | None = field(default=None, compare=False, repr=False)

    @property
    def definition(self) -> Definition:
        """The Definition part alone, as sent to a Generator."""
        return Definition(**{f.name: getattr(self, f.name) for f in fields(Definition)})

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the wrapped Python function directly (only for tools made with :func:`tool`)."""
        if self.function is None:
            raise TypeError(f"tool {self.name!r} wraps no Python function to call directly")
        return self.function(*args, **kwargs)

    async def approval_needed(self, input: Any) -> bool:
        """Evaluate ``needs_approval`` for this input (a bool, or a sync or async predicate)."""
        rule = self.needs_approval
        if isinstance(rule, bool):
            return rule
        import inspect

        verdict = rule(input)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        return bool(verdict)


def _is_context_param(annotation: Any) -> bool:
    return (
        annotation is ToolContext
        or annotation == "ToolContext"
        or (isinstance(annotation, str) and annotation.endswith(".ToolContext"))
    )


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    title: str | None = None,
    schema: Mapping[str, Any] | None = None,
    needs_approval: NeedsApproval = False,
    to_model_output: Callable[[Any], Any] | None = None,
    input_examples: Sequence[Mapping[str, Any]] = (),
    strict: bool | None = None,
    execution_mode: ExecutionMode = "concurrent",
    timeout: float | None = None,
    preview: Callable[[Mapping[str, Any]], Any] | None = None,
    code_arguments: Mapping[str, str] | None = None,
    on_input_start: InputCallback | None = None,
    on_input_delta: InputCallback | None = None,
    on_input_available: InputCallback | None = None,
    provider_options: Mapping[str, Any] | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
    """Make a :class:`Tool` from a typed function: schema from hints, docs from the docstring.

    Use bare (``@tool``) or with options (``@tool(needs_approval=True)``). A parameter annotated
    ``ToolContext`` receives the call's context (progress updates, cancellation) and is not part
    of the schema. A hint the schema cannot express is an error now, not at run time; pass
    ``schema=`` to write the JSON Schema yourself (arguments then arrive as keyword arguments).
    """
    if fn is None:
        return lambda f: _make_tool(f, **options)
    return _make_tool(fn, **options)


def _make_tool(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    title: str | None = None,
    schema: Mapping[str, Any] | None = None,
    input_examples: Sequence[Mapping[str, Any]] = (),
    provider_options: Mapping[str, Any] | None = None,
    **rest: Any,
) -> Tool:
    import inspect

    from .schema._signature import function_schema

    if not callable(fn):
        raise ToolDefinitionError(f"@tool needs a function, got {type(fn).__name__}")
    tool_name = str(name or getattr(fn, "__name__", ""))
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(f"cannot read the signature of {tool_name!r}: {exc}") from None
    context_params = [
        p.name for p in signature.parameters.values() if _is_context_param(p.annotation)
    ]
    fschema = function_schema(fn, skip=context_params) if schema is None else None
    if fschema is not None:
        input_schema: Mapping[str, Any] = fschema.schema
        doc = fschema.description
    else:
        input_schema = dict(schema or {})
        doc = inspect.cleandoc(fn.__doc__ or "").split("\n\n")[0]
    is_async = inspect.iscoroutinefunction(fn)

    def call_args(context: ToolContext) -> tuple[list[Any], dict[str, Any]]:
        if fschema is not None:
            return fschema.decode(context.input, dict.fromkeys(context_params, context))
        kwargs = dict(context.input)
        for param in context_params:
            kwargs[param] = context
        return [], kwargs

    execute: Execute
    if is_async:

        async def execute_async(context: ToolContext) -> Any:
            args, kwargs = call_args(context)
            return await fn(*args, **kwargs)

        execute = execute_async
    else:

        def execute_sync(context: ToolContext) -> Any:
            args, kwargs = call_args(context)
            return fn(*args, **kwargs)

        execute = execute_sync

    if rest.get("code_arguments", {}) is None:
        del rest["code_arguments"]
    try:
        made = Tool(
            name=tool_name,
            description=description if description is not None else doc,
            input_schema=input_schema,
            title=title,
            input_examples=tuple(input_examples),
            provider_options=dict(provider_options or {}),
            execute=execute,
            function=fn,
            **rest,
        )
    except TypeError as exc:
        raise ToolDefinitionError(f"@tool on {tool_name!r}: {exc}") from None
    validate_tools([made])
    for attr in ("__module__", "__doc__", "__wrapped__"):  # behave like the function it wraps
        object.__setattr__(made, attr, fn if attr == "__wrapped__" else getattr(fn, attr, None))
    return made


def validate_arguments(call: ToolCall, *, limits: Limits | None = None) -> Mapping[str, Any]:
    """Parse ``call.arguments`` as strict JSON and check that it is an object; return it.

    Raises :class:`ArgumentsError` for anything :attr:`ToolCall.input` rejects (invalid JSON,
    ``NaN``, duplicate keys, lone surrogates, beyond ``limits``) and for any other JSON value.
    With ``limits``, the text is parsed afresh within them (the returned value is then a new
    object, not the cached ``call.input``).
    """
    value = call.input if limits is None else parse_call_arguments(call, limits)
    if not isinstance(value, dict):
        raise ArgumentsError(
            f"arguments of {call.name!r} must be a JSON object, got {_json_type(value)}"
        )
    return value


def decode_arguments(call: ToolCall | Mapping[str, Any], target: type[T]) -> T:
    """Decode a call's arguments into ``target`` (a dataclass, TypedDict or plain type).

    No coercion: ``"123"`` does not become an ``int``. Raises :class:`ArgumentsError` with the
    path of the first mismatch.
    """
    from .schema._hints import decode_arguments_as

    value = validate_arguments(call) if isinstance(call, ToolCall) else call
    return decode_arguments_as(value, target)  # type: ignore[no-any-return]


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


def validate_tools(tools: Sequence[Tool | Definition]) -> dict[str, CompiledSchema]:
    """Check names (legal, unique), the function, schema and execution mode of every tool.

    Returns each tool's compiled schema by name. Raises :class:`ToolDefinitionError` (or
    :class:`SchemaError` for a schema the strict policy rejects) naming the tool.
    """
    from .schema import compile_schema

    compiled: dict[str, CompiledSchema] = {}
    for index, item in enumerate(tools):
        if not isinstance(item, Definition):
            raise ToolDefinitionError(
                f"tools[{index}] is a {type(item).__name__}: register a Tool (use @tool)"
            )
        label = f"tool {item.name!r}"
        if not isinstance(item.name, str) or not _NAME.match(item.name):
            raise ToolDefinitionError(
                f"{label}: a name must be 1-64 letters, digits, '_' or '-' (providers require it)"
            )
        if item.name in compiled:
            raise ToolDefinitionError(f"{label} is registered twice: names must be unique")
        if isinstance(item, Tool):
            if item.execute is None and not item.provider_executed:
                raise ToolDefinitionError(f"{label} has no execute function")
            if item.execute is not None and not callable(item.execute):
                raise ToolDefinitionError(f"{label}: execute is not callable")
            if item.execution_mode not in ("concurrent", "sequential"):
                raise ToolDefinitionError(
                    f"{label}: execution_mode must be 'concurrent' or 'sequential', "
                    f"not {item.execution_mode!r}"
                )
            if not isinstance(item.needs_approval, bool) and not callable(item.needs_approval):
                raise ToolDefinitionError(f"{label}: needs_approval must be a bool or a function")
            if item.timeout is not None and not item.timeout > 0:
                raise ToolDefinitionError(f"{label}: timeout must be a positive number of seconds")
            if item.preview is not None and not callable(item.preview):
                raise ToolDefinitionError(f"{label}: preview must be a function of the input")
            code = item.code_arguments
            if not isinstance(code, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) and v for k, v in code.items()
            ):
                raise ToolDefinitionError(
                    f"{label}: code_arguments must map argument names to languages, "
                    'such as {"code": "python"}'
                )
        try:
            compiled[item.name] = compile_schema(item.input_schema)
        except SchemaError as exc:
            raise SchemaError(f"{label}: {exc.reason}", exc.pointer) from None
    return compiled


class ToolSequence(Sequence[Tool]):
    """A toolkit is a list of tools (``tools=[*kit]``, ``tools=kit``, ``kit[0]``); a subclass
    sets ``_tools`` and adds what its tools share (a namespace, a document)."""

    _tools: tuple[Tool, ...]

    @overload
    def __getitem__(self, index: int) -> Tool: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Tool]: ...
    def __getitem__(self, index: int | slice) -> Tool | Sequence[Tool]:
        return self._tools[index]

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools)

    @property
    def names(self) -> list[str]:
        """The tools' names, in order."""
        return [t.name for t in self._tools]
