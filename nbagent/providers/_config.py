"""Turn a model string (``openai:gpt-4.1-mini``) and the environment into a Generator.

Lookup order: the explicit argument first. Model and base URL: then ``NBAGENT_MODEL`` /
``NBAGENT_BASE_URL``, then the vendor's own variables (``OPENAI_BASE_URL``,
``ANTHROPIC_BASE_URL``, ``OLLAMA_BASE_URL``). The key of ``openai:``, ``openai-responses:``
and ``anthropic:``: the vendor's own variable (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``), then
``NBAGENT_API_KEY`` — a vendor's key goes to that vendor, so with both set, ``anthropic:…``
never sends the ``NBAGENT_API_KEY`` meant for another. With no model anywhere, the offline
model is used (it says so itself).

Keys are stripped of surrounding whitespace and must be printable ASCII without spaces inside
(:func:`~nbagent.providers._keys.clean_api_key`). A key recognisably one vendor's (``sk-ant-…``
is Anthropic's; ``sk-proj-…`` and other OpenAI shapes are OpenAI's) is never sent to another
vendor or to another server: resolving such a setup raises :class:`ConfigurationError` naming
the variable, never the key.

Spec strings:

``openai:MODEL``             OpenAI Chat Completions (key needed)
``openai-responses:MODEL``   OpenAI Responses API (key needed; same key and address as openai)
``anthropic:MODEL``          Anthropic Messages (key needed)
``ollama:MODEL``             Ollama's OpenAI-compatible API at http://localhost:11434/v1 (no key)
``openai-compatible:MODEL``  any Chat Completions server; needs a base URL, key optional
``local:smollm2``            SmolLM2-135M run in this process by llama.cpp (no key, no
                             network; ``local:/path/model.gguf`` for any GGUF file: see
                             :mod:`nbagent.providers.local`)
``offline``                  the offline model (no key, no network)

A bare model name whose vendor is obvious (``gpt-…``, ``o3…``, ``claude-…``) is accepted too.
For ``openai-compatible``, ``OPENAI_API_KEY`` is only sent when the base URL also came from
``OPENAI_BASE_URL``, so a key is never sent to a server it was not set up for. ``ollama`` and
``openai-compatible`` take ``NBAGENT_API_KEY`` (or the argument) when the server wants a key.

``NBAGENT_TOOL_CALLS`` (``native`` or ``structured``) sets how the Chat Completions adapters ask
for tool calls when the ``tool_calls`` argument does not: ``structured`` is for models whose
server drops ``tools`` (see :mod:`nbagent.providers._structured`); ``local:`` models use it
by default.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError
from ..generation import Generator
from ._keys import check_key_destination, clean_api_key

__all__ = ["describe_config", "model_id", "model_string", "resolve_generator"]

PROVIDERS = (
    "openai",
    "openai-responses",
    "anthropic",
    "ollama",
    "openai-compatible",
    "local",
    "offline",
)
_ALIASES = {
    "compatible": "openai-compatible",
    "openai_compatible": "openai-compatible",
    "openai_responses": "openai-responses",
    "responses": "openai-responses",
}
_DEFAULT_URLS = {
    "openai": "https://api.openai.com/v1",
    "openai-responses": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    "ollama": "http://localhost:11434/v1",
}
_VENDOR_KEY = {
    "openai": "OPENAI_API_KEY",
    "openai-responses": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
}
_VENDOR_URL = {
    "openai": "OPENAI_BASE_URL",
    "openai-responses": "OPENAI_BASE_URL",
    "anthropic": "ANTHROPIC_BASE_URL",
    "ollama": "OLLAMA_BASE_URL",
    "openai-compatible": "OPENAI_BASE_URL",
}
_DESTINATION = {"openai": "openai", "openai-responses": "openai", "anthropic": "anthropic"}
_OFFLINE_HINT = "or use the model 'offline', which needs no key"


@dataclass(frozen=True)
class _Resolved:
    provider: str
    model: str
    base_url: str | None
    base_url_source: str | None
    api_key: str | None
    key_source: str | None
    key_problem: str | None = None  # a key that must not be used (shape, or another vendor's)


def _env(environ: Mapping[str, str], name: str) -> str | None:
    value = environ.get(name, "").strip()
    return value or None


def _parse(spec: str) -> tuple[str, str]:
    text = spec.strip()
    provider, sep, model = text.partition(":")
    provider = _ALIASES.get(provider.lower(), provider.lower())
    if sep and provider in PROVIDERS:
        return provider, model.strip()
    if text.lower() == "offline":
        return "offline", ""
    if re.match(r"^(gpt-|o\d|chatgpt-)", text):
        return "openai", text
    if text.startswith("claude-"):
        return "anthropic", text
    raise ConfigurationError(
        f"cannot tell which provider the model {spec!r} belongs to: write it as "
        "'provider:model' with provider one of openai, openai-responses, anthropic, ollama, "
        "openai-compatible, local (e.g. 'openai:gpt-4.1-mini', 'openai-responses:gpt-5-mini', "
        "'anthropic:claude-sonnet-4-5', 'ollama:qwen2.5', 'local:smollm2'), or use 'offline'"
    )


def _resolve(
    spec: str | None,
    api_key: str | None,
    base_url: str | None,
    environ: Mapping[str, str],
) -> _Resolved:
    text = spec if spec else _env(environ, "NBAGENT_MODEL")
    if not text:
        return _Resolved("offline", "offline", None, None, None, None)
    provider, model = _parse(text)
    if provider == "offline":
        return _Resolved("offline", "offline", None, None, None, None)
    if not model:
        raise ConfigurationError(
            f"the model spec {text!r} names no model: write '{provider}:MODEL', e.g. "
            "'openai:gpt-4.1-mini'"
        )
    if provider == "local":  # served in this process: no address, no key
        return _Resolved("local", model, None, None, None, None)
    # base URL: argument, NBAGENT_BASE_URL, the vendor's variable, the default
    url_source: str | None = "argument" if base_url else None
    if not base_url:
        for name in ("NBAGENT_BASE_URL", _VENDOR_URL.get(provider, "")):
            if name and _env(environ, name):
                base_url, url_source = _env(environ, name), name
                break
    if not base_url:
        base_url = _DEFAULT_URLS.get(provider)
        url_source = "default" if base_url else None
    # key: argument, the vendor's variable, NBAGENT_API_KEY (a vendor's key goes to the vendor)
    key_source: str | None = "the api_key argument" if api_key else None
    if not api_key:
        candidates = []
        if provider in _VENDOR_KEY:
            candidates.append(_VENDOR_KEY[provider])
        candidates.append("NBAGENT_API_KEY")
        if provider == "openai-compatible" and url_source == "OPENAI_BASE_URL":
            candidates.append("OPENAI_API_KEY")
        for name in candidates:
            if _env(environ, name):
                api_key, key_source = environ[name], name
                break
    problem = None
    try:
        api_key = clean_api_key(api_key, key_source or "the api_key argument")
        # OPENAI_API_KEY beside OPENAI_BASE_URL is a pair set up for that server
        paired = key_source == "OPENAI_API_KEY" and url_source == "OPENAI_BASE_URL"
        destination = "openai" if paired else _DESTINATION.get(provider, "")
        check_key_destination(api_key, key_source or "the api_key argument", destination, base_url)
    except ConfigurationError as exc:
        problem = str(exc)
    if key_source == "the api_key argument":
        key_source = "argument"
    return _Resolved(provider, model, base_url, url_source, api_key, key_source, problem)


def resolve_generator(
    spec: str | Generator | None = None,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    environ: Mapping[str, str] | None = None,
    **overrides: Any,
) -> Generator:
    """The Generator for ``spec`` (see the module docs); a Generator passes through unchanged.

    ``overrides`` go to the HTTP adapter (``timeout``, ``max_retries``, ``headers`` …; the
    offline model takes none). Raises
    :class:`ConfigurationError` saying which variable to set when a key or base URL is missing.
    """
    if spec is not None and not isinstance(spec, str):
        if isinstance(spec, Generator):
            return spec
        raise ConfigurationError(
            f"expected a model string such as 'openai:gpt-4.1-mini' or a Generator, got "
            f"{type(spec).__name__}"
        )
    env = os.environ if environ is None else environ
    resolved = _resolve(spec, api_key, base_url, env)
    provider = resolved.provider
    if provider == "offline":
        from ..models import OfflineModel

        return OfflineModel()  # adapter settings (timeout …) mean nothing to it
    if resolved.key_problem:
        raise ConfigurationError(resolved.key_problem)
    mode = _env(env, "NBAGENT_TOOL_CALLS")
    if mode and provider != "anthropic" and "tool_calls" not in overrides:
        overrides["tool_calls"] = mode.lower()
    if provider == "local":
        if api_key or base_url:
            raise ConfigurationError(
                f"local:{resolved.model} is served in this process: it takes no api_key or base_url"
            )
        from .local import LocalChat

        return LocalChat(resolved.model, environ=env, **overrides)
    if provider in _VENDOR_KEY and not resolved.api_key:
        raise ConfigurationError(
            f"no API key for {provider}:{resolved.model}: set {_VENDOR_KEY[provider]} (or "
            f"NBAGENT_API_KEY), or pass api_key=...; {_OFFLINE_HINT}"
        )
    if provider == "openai-compatible" and not resolved.base_url:
        raise ConfigurationError(
            f"openai-compatible:{resolved.model} needs the server's address: set "
            "NBAGENT_BASE_URL (e.g. http://localhost:8080/v1), or pass base_url=...; "
            f"{_OFFLINE_HINT}"
        )
    if provider == "anthropic":
        from .anthropic import AnthropicMessages

        return AnthropicMessages(
            resolved.model, api_key=resolved.api_key, base_url=resolved.base_url, **overrides
        )
    if provider == "openai-responses":
        from .responses import OpenAIResponses

        return OpenAIResponses(
            resolved.model, api_key=resolved.api_key, base_url=resolved.base_url, **overrides
        )
    from .openai import OpenAIChat

    settings: dict[str, Any] = {"api_key": resolved.api_key, "base_url": resolved.base_url}
    if provider == "ollama":
        settings.update(max_tokens_field="max_tokens", provider_name="Ollama", key_env="")
    elif provider == "openai-compatible":
        settings.update(
            max_tokens_field="max_tokens",
            provider_name="the OpenAI-compatible server",
            key_env="NBAGENT_API_KEY",
        )
    settings.update(overrides)
    return OpenAIChat(resolved.model, **settings)


def model_id(spec: str | None = None, environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """``(provider, model)`` a model string names, as :func:`resolve_generator` reads it
    (``gpt-4.1`` is ``("openai", "gpt-4.1")``; no model anywhere is ``("offline", "offline")``);
    no key is looked at. Raises :class:`ConfigurationError` for a string it cannot read."""
    env = os.environ if environ is None else environ
    text = spec if spec else _env(env, "NBAGENT_MODEL")
    if not text:
        return "offline", "offline"
    provider, model = _parse(text)
    return (provider, model) if provider != "offline" else ("offline", "offline")


def model_string(generator: object) -> str | None:
    """The model string that names ``generator`` when it is one of the adapters here
    (``openai:gpt-4.1-mini``, ``ollama:qwen2.5``, ``local:smollm2`` …), as
    :func:`resolve_generator` would have read it; None for any other Generator (the offline
    and scripted models, a recording, a Generator of one's own). Loads no adapter: an object of
    one exists only when its module is loaded."""
    import sys

    def loaded(module: str, name: str) -> type | None:
        found = sys.modules.get(f"{__package__}.{module}")
        kind = getattr(found, name, None)
        return kind if isinstance(kind, type) else None

    model = str(getattr(generator, "model", "") or "")
    anthropic = loaded("anthropic", "AnthropicMessages")
    if anthropic is not None and isinstance(generator, anthropic):
        return f"anthropic:{model}"
    responses = loaded("responses", "OpenAIResponses")
    if responses is not None and isinstance(generator, responses):
        return f"openai-responses:{model}"
    local = loaded("local", "LocalChat")
    if local is not None and isinstance(generator, local):
        return f"local:{model}"
    chat = loaded("openai", "OpenAIChat")
    if chat is not None and isinstance(generator, chat):
        named = getattr(generator, "provider", "OpenAI")
        provider = {"OpenAI": "openai", "Ollama": "ollama"}.get(named, "openai-compatible")
        return f"{provider}:{model}"
    return None


def describe_config(
    spec: str | Generator | None = None,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Where each setting comes from, for ``%agent config``: never the key itself.

    Returns ``provider``, ``model``, ``base_url``, ``base_url_source``, ``key_source`` (the
    variable's name, ``"argument"`` or None) and ``problem`` (what is missing or wrong — a
    malformed key, or a key that belongs to another vendor — or None).
    """
    if spec is not None and not isinstance(spec, str):
        return {
            "provider": type(spec).__name__,
            "model": getattr(spec, "model", ""),
            "base_url": getattr(spec, "base_url", None),
            "base_url_source": "object",
            "key_source": "object",
            "problem": None,
        }
    env = os.environ if environ is None else environ
    try:
        resolved = _resolve(spec, api_key, base_url, env)
    except ConfigurationError as exc:
        return {
            "provider": None,
            "model": None,
            "base_url": None,
            "base_url_source": None,
            "key_source": None,
            "problem": str(exc),
        }
    problem = resolved.key_problem
    if resolved.provider == "local":
        from .local import local_problem

        problem = local_problem(resolved.model, env)
    elif problem is None and resolved.provider in _VENDOR_KEY and not resolved.api_key:
        problem = f"no API key: set {_VENDOR_KEY[resolved.provider]} (or NBAGENT_API_KEY)"
    elif problem is None and resolved.provider == "openai-compatible" and not resolved.base_url:
        problem = "no base URL: set NBAGENT_BASE_URL"
    return {
        "provider": resolved.provider,
        "model": resolved.model,
        "base_url": resolved.base_url,
        "base_url_source": resolved.base_url_source,
        "key_source": resolved.key_source,
        "problem": problem,
    }
