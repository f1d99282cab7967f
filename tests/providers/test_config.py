"""resolve_generator / describe_config: spec strings, lookup order, clear errors, lazy imports."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from nbagent.errors import ConfigurationError
from nbagent.providers import AnthropicMessages, OpenAIChat, describe_config, resolve_generator

from .helpers import KEY


def test_openai_spec_with_vendor_key() -> None:
    model = resolve_generator("openai:gpt-4.1-mini", environ={"OPENAI_API_KEY": KEY})
    assert isinstance(model, OpenAIChat)
    assert (model.model, model.base_url) == ("gpt-4.1-mini", "https://api.openai.com/v1")
    assert model.max_tokens_field == "max_completion_tokens"
    assert model._headers()["authorization"] == f"Bearer {KEY}"
    assert KEY not in repr(model)


def test_anthropic_spec_and_base_url_variable() -> None:
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": "https://proxy.example/"}
    model = resolve_generator("anthropic:claude-sonnet-4-5", environ=env)
    assert isinstance(model, AnthropicMessages)
    assert (model.model, model.base_url) == ("claude-sonnet-4-5", "https://proxy.example")
    assert model._headers()["x-api-key"] == KEY


def test_nbagent_variables_win_over_vendor_ones_and_arguments_win_over_all() -> None:
    env = {
        "NBAGENT_MODEL": "openai:gpt-4.1",
        "NBAGENT_API_KEY": "sk-nbagent",
        "NBAGENT_BASE_URL": "http://gateway.local/v1",
        "OPENAI_API_KEY": "sk-openai",
        "OPENAI_BASE_URL": "http://openai.local/v1",
    }
    model = resolve_generator(environ=env)
    assert (model.model, model.base_url, model._key.reveal()) == (
        "gpt-4.1",
        "http://gateway.local/v1",
        "sk-nbagent",
    )  # type: ignore[attr-defined]
    model = resolve_generator(
        "openai:o3", api_key="sk-arg", base_url="http://arg.local/v1", environ=env
    )
    assert (model.model, model.base_url, model._key.reveal()) == (
        "o3",
        "http://arg.local/v1",
        "sk-arg",
    )  # type: ignore[attr-defined]
    assert describe_config(environ=env) == {
        "provider": "openai",
        "model": "gpt-4.1",
        "base_url": "http://gateway.local/v1",
        "base_url_source": "NBAGENT_BASE_URL",
        "key_source": "NBAGENT_API_KEY",
        "problem": None,
    }


def test_ollama_needs_no_key() -> None:
    model = resolve_generator("ollama:qwen2.5", environ={})
    assert isinstance(model, OpenAIChat)
    assert model.base_url == "http://localhost:11434/v1" and "authorization" not in model._headers()
    assert model.max_tokens_field == "max_tokens" and model.provider == "Ollama"
    model = resolve_generator("ollama:llama3", environ={"OLLAMA_BASE_URL": "http://gpu:11434/v1"})
    assert model.base_url == "http://gpu:11434/v1"  # type: ignore[attr-defined]


def test_openai_compatible_needs_a_base_url_and_guards_the_openai_key() -> None:
    with pytest.raises(ConfigurationError, match="set NBAGENT_BASE_URL"):
        resolve_generator("openai-compatible:llama", environ={"OPENAI_API_KEY": KEY})
    env = {"NBAGENT_BASE_URL": "http://vllm:8000/v1", "OPENAI_API_KEY": KEY}
    model = resolve_generator("openai-compatible:llama", environ=env)
    assert "authorization" not in model._headers()  # type: ignore[attr-defined]  # not its key
    env = {"OPENAI_BASE_URL": "https://openrouter.ai/api/v1", "OPENAI_API_KEY": KEY}
    model = resolve_generator("openai-compatible:meta/llama", environ=env)
    assert model._headers()["authorization"] == f"Bearer {KEY}"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("spec", "variable"),
    [
        ("openai:gpt-4.1-mini", "OPENAI_API_KEY"),
        ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
    ],
)
def test_missing_key_says_which_variable_to_set(spec: str, variable: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        resolve_generator(spec, environ={})
    message = str(raised.value)
    assert f"set {variable} (or NBAGENT_API_KEY)" in message and "'offline'" in message
    assert (
        describe_config(spec, environ={})["problem"]
        == f"no API key: set {variable} (or NBAGENT_API_KEY)"
    )


def test_no_model_anywhere_is_the_offline_model() -> None:
    from nbagent.models import OfflineModel

    assert isinstance(resolve_generator(environ={}), OfflineModel)
    assert isinstance(resolve_generator("offline", environ={"OPENAI_API_KEY": KEY}), OfflineModel)
    assert describe_config(environ={})["provider"] == "offline"


def test_bare_model_names_and_bad_specs() -> None:
    env = {"OPENAI_API_KEY": KEY, "ANTHROPIC_API_KEY": KEY}
    assert isinstance(resolve_generator("gpt-4.1-mini", environ=env), OpenAIChat)
    assert isinstance(resolve_generator("claude-opus-4-1", environ=env), AnthropicMessages)
    with pytest.raises(ConfigurationError, match="provider:model"):
        resolve_generator("llama3", environ=env)
    with pytest.raises(ConfigurationError, match="names no model"):
        resolve_generator("openai:", environ=env)
    with pytest.raises(ConfigurationError, match="must start with http"):
        resolve_generator("ollama:x", base_url="localhost:11434", environ={})
    assert "provider:model" in describe_config("llama3", environ={})["problem"]


def test_generators_pass_through_and_overrides_reach_the_adapter() -> None:
    model = OpenAIChat("m", api_key=KEY)
    assert resolve_generator(model) is model
    assert describe_config(model)["provider"] == "OpenAIChat"
    tuned: Any = resolve_generator(
        "openai:m", environ={"OPENAI_API_KEY": KEY}, timeout=5, max_retries=0
    )
    assert (tuned.timeout, tuned.max_retries) == (5, 0)
    with pytest.raises(ConfigurationError):
        resolve_generator(42)  # type: ignore[arg-type]


def test_importing_nbagent_and_providers_loads_no_http_client() -> None:
    code = (
        "import sys, nbagent, nbagent.providers as p\n"
        "assert 'httpx2' not in sys.modules, 'httpx2 imported early'\n"
        "p.describe_config('openai:gpt-4.1-mini')\n"
        "assert 'httpx2' not in sys.modules\n"
        "p.OpenAIChat\n"
        "assert 'httpx2' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
