"""resolve_generator / describe_config: spec strings, lookup order, clear errors, lazy imports."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from nbagent.errors import ConfigurationError
from nbagent.providers import (
    AnthropicMessages,
    OpenAIChat,
    OpenAIResponses,
    describe_config,
    resolve_generator,
)

from .helpers import KEY


def test_openai_spec_with_vendor_key() -> None:
    model = resolve_generator("openai:gpt-4.1-mini", environ={"OPENAI_API_KEY": KEY})
    assert isinstance(model, OpenAIChat)
    assert (model.model, model.base_url) == ("gpt-4.1-mini", "https://api.openai.com/v1")
    assert model.max_tokens_field == "max_completion_tokens"
    assert model._headers()["authorization"] == f"Bearer {KEY}"
    assert KEY not in repr(model)


def test_openai_responses_spec_uses_the_openai_key_and_address() -> None:
    env = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": "https://proxy.example/v1"}
    for spec in ("openai-responses:gpt-5-mini", "responses:gpt-5-mini"):
        model = resolve_generator(spec, environ=env, store=True, max_retries=0)
        assert isinstance(model, OpenAIResponses)
        assert (model.model, model.base_url) == ("gpt-5-mini", "https://proxy.example/v1")
        assert model._headers()["authorization"] == f"Bearer {KEY}"
        assert (model.store, model.max_retries) == (True, 0)
        assert KEY not in repr(model)
    model = resolve_generator("openai-responses:o3", environ={"NBAGENT_API_KEY": KEY})
    assert model.base_url == "https://api.openai.com/v1"  # type: ignore[attr-defined]
    assert describe_config("openai-responses:o3", environ={"OPENAI_API_KEY": KEY}) == {
        "provider": "openai-responses",
        "model": "o3",
        "base_url": "https://api.openai.com/v1",
        "base_url_source": "default",
        "key_source": "OPENAI_API_KEY",
        "problem": None,
    }


def test_anthropic_spec_and_base_url_variable() -> None:
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": "https://proxy.example/"}
    model = resolve_generator("anthropic:claude-sonnet-4-5", environ=env)
    assert isinstance(model, AnthropicMessages)
    assert (model.model, model.base_url) == ("claude-sonnet-4-5", "https://proxy.example")
    assert model._headers()["x-api-key"] == KEY


def test_lookup_order_and_arguments_win_over_all() -> None:
    env = {
        "NBAGENT_MODEL": "openai:gpt-4.1",
        "NBAGENT_API_KEY": "sk-nbagent",
        "NBAGENT_BASE_URL": "http://gateway.local/v1",
        "OPENAI_API_KEY": "sk-openai",
        "OPENAI_BASE_URL": "http://openai.local/v1",
    }
    model = resolve_generator(environ=env)
    # the base URL: NBAGENT_BASE_URL first; the key: the vendor's own variable first
    assert (model.model, model.base_url, model._key.reveal()) == (
        "gpt-4.1",
        "http://gateway.local/v1",
        "sk-openai",
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
        "key_source": "OPENAI_API_KEY",
        "problem": None,
    }
    del env["OPENAI_API_KEY"]
    assert resolve_generator(environ=env)._key.reveal() == "sk-nbagent"  # type: ignore[attr-defined]


# --- keys: a vendor's key goes to that vendor only ------------------------------------------------

OPENAI_KEY = "sk-proj-" + "Ab1" * 20
OPENAI_LEGACY_KEY = "sk-" + "a1B2c3" * 3 + "T3BlbkFJ" + "x9Y8z7" * 3
ANTHROPIC_KEY = "sk-ant-api03-" + "Zz9" * 30


def test_the_vendors_own_variable_wins_over_nbagent_api_key() -> None:
    env = {"NBAGENT_API_KEY": OPENAI_KEY, "ANTHROPIC_API_KEY": ANTHROPIC_KEY}
    model = resolve_generator("anthropic:claude-sonnet-4-5", environ=env)
    assert model._headers()["x-api-key"] == ANTHROPIC_KEY  # type: ignore[attr-defined]
    assert describe_config("anthropic:claude-sonnet-4-5", environ=env)["key_source"] == (
        "ANTHROPIC_API_KEY"
    )
    model = resolve_generator("openai:gpt-4.1", environ=env)  # NBAGENT_API_KEY is OpenAI's
    assert model._headers()["authorization"] == f"Bearer {OPENAI_KEY}"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("spec", "env", "variable", "vendor"),
    [
        (
            "anthropic:claude-sonnet-4-5",
            {"NBAGENT_API_KEY": OPENAI_KEY},
            "NBAGENT_API_KEY",
            "OpenAI",
        ),
        (
            "anthropic:claude-sonnet-4-5",
            {"ANTHROPIC_API_KEY": OPENAI_LEGACY_KEY},
            "ANTHROPIC_API_KEY",
            "OpenAI",
        ),
        ("openai:gpt-4.1", {"NBAGENT_API_KEY": ANTHROPIC_KEY}, "NBAGENT_API_KEY", "Anthropic"),
        ("openai:gpt-4.1", {"OPENAI_API_KEY": ANTHROPIC_KEY}, "OPENAI_API_KEY", "Anthropic"),
        (
            "openai-responses:gpt-5",
            {"OPENAI_API_KEY": ANTHROPIC_KEY},
            "OPENAI_API_KEY",
            "Anthropic",
        ),
        ("ollama:qwen2.5", {"NBAGENT_API_KEY": ANTHROPIC_KEY}, "NBAGENT_API_KEY", "Anthropic"),
        (
            "openai-compatible:llama",
            {"NBAGENT_API_KEY": OPENAI_KEY, "NBAGENT_BASE_URL": "http://vllm:8000/v1"},
            "NBAGENT_API_KEY",
            "OpenAI",
        ),
    ],
)
def test_a_key_recognisably_another_vendors_is_never_sent(
    spec: str, env: dict[str, str], variable: str, vendor: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        resolve_generator(spec, environ=env)
    message = str(raised.value)
    assert f"the API key from {variable} looks like an {vendor} key" in message
    assert OPENAI_KEY not in message and ANTHROPIC_KEY not in message
    assert OPENAI_LEGACY_KEY not in message
    assert describe_config(spec, environ=env)["problem"] == message


def test_recognised_keys_may_reach_their_own_vendor_through_any_route() -> None:
    # a proxy in front of Anthropic takes Anthropic keys
    env = {"ANTHROPIC_API_KEY": ANTHROPIC_KEY, "ANTHROPIC_BASE_URL": "https://proxy.corp"}
    assert resolve_generator("anthropic:claude-x", environ=env).base_url == "https://proxy.corp"  # type: ignore[attr-defined]
    # OPENAI_API_KEY set up with OPENAI_BASE_URL for an OpenAI-compatible gateway
    env = {"OPENAI_API_KEY": OPENAI_KEY, "OPENAI_BASE_URL": "https://gateway.corp/v1"}
    assert resolve_generator("openai-compatible:m", environ=env) is not None
    # Anthropic's own OpenAI-compatible endpoint takes Anthropic keys
    model = OpenAIChat("claude-x", api_key=ANTHROPIC_KEY, base_url="https://api.anthropic.com/v1/")
    assert model._headers()["authorization"] == f"Bearer {ANTHROPIC_KEY}"
    # keys of no known vendor (DeepSeek, a LiteLLM proxy) are not restricted
    env = {"NBAGENT_API_KEY": "sk-0123456789abcdef0123456789abcdef"}
    assert resolve_generator("anthropic:claude-x", environ=env) is not None


def test_adapters_built_directly_refuse_another_vendors_key() -> None:
    with pytest.raises(ConfigurationError, match="looks like an OpenAI key"):
        AnthropicMessages("claude-x", api_key=OPENAI_KEY)
    with pytest.raises(ConfigurationError, match="looks like an Anthropic key"):
        OpenAIResponses("gpt-5", api_key=ANTHROPIC_KEY)
    with pytest.raises(ConfigurationError, match="looks like an Anthropic key") as raised:
        OpenAIChat("gpt-4.1", api_key=ANTHROPIC_KEY)
    assert "the api_key argument" in str(raised.value) and ANTHROPIC_KEY not in str(raised.value)


def test_a_key_with_a_trailing_newline_is_stripped() -> None:
    env = {"OPENAI_API_KEY": KEY + "\n"}
    model = resolve_generator("openai:gpt-4.1", environ=env)
    assert model._headers()["authorization"] == f"Bearer {KEY}"  # type: ignore[attr-defined]
    model = OpenAIChat("m", api_key=f"  {KEY}\r\n")
    assert model._headers()["authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize(
    ("key", "what"),
    [
        (KEY + "\n" + KEY, "a line break (U+000A) at character 32 of 63"),
        (KEY[:10] + " " + KEY[10:], "a space (U+0020) at character 11"),
        (KEY + "\x00", "a control character (U+0000)"),
        (KEY + "é", "a non-ASCII character (U+00E9)"),
        ("\u201c" + KEY + "\u201d", "a non-ASCII character (U+201C) at character 1"),
    ],
)
def test_a_malformed_key_is_refused_naming_its_source_never_its_value(key: str, what: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        resolve_generator("openai:gpt-4.1", environ={"OPENAI_API_KEY": key})
    message = str(raised.value)
    assert message.startswith(f"the API key from OPENAI_API_KEY contains {what}"), message
    assert KEY not in message and KEY[:12] not in message
    with pytest.raises(ConfigurationError, match="the api_key argument contains"):
        AnthropicMessages("claude-x", api_key=key)
    problem = describe_config("openai:gpt-4.1", environ={"OPENAI_API_KEY": key})["problem"]
    assert problem == message


def test_unsendable_extra_headers_are_refused_without_their_value() -> None:
    with pytest.raises(ConfigurationError, match="header 'x-token' must be printable") as raised:
        OpenAIChat("m", api_key=KEY, headers={"x-token": "abc\nInjected: 1"})
    assert "Injected" not in str(raised.value)


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
        ("openai-responses:gpt-5-mini", "OPENAI_API_KEY"),
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
        "p.describe_config('openai-responses:gpt-5')\n"
        "assert 'httpx2' not in sys.modules\n"
        "p.OpenAIResponses\n"
        "assert 'httpx2' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
