"""The notebook is the recording: record a run against a real adapter (a loopback server), then
Run All in a fresh kernel with no model, no server and no network: the same run, replayed.

Each notebook runs through nbclient in a real kernel. The replay kernel gets an audit hook that
refuses every Python socket connection (the kernel's own ZMQ sockets are not Python's), so a
replay that touched the network would fail, not pass by luck.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from ..providers import wire
from .kernel import AsyncLocalKernelManager
from .sse_loopback import SSELoopback

KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}

SETUP = """\
%load_ext nbagent
import nbagent
from nbagent import tool

@tool
def weather(city: str) -> str:
    \"\"\"Current weather for a city.\"\"\"
    return f"{city}: sunny, 21 °C"
"""


def _openai_turns() -> list[bytes]:
    call = [
        wire.oa_chunk({"role": "assistant", "content": "Let me check "}),
        wire.oa_chunk({"content": "the weather."}),
        wire.oa_chunk({"tool_calls": [wire.oa_call(0, "call_zh", "weather")]}),
        wire.oa_chunk({"tool_calls": [wire.oa_call(0, args='{"city": ')]}),
        wire.oa_chunk({"tool_calls": [wire.oa_call(0, args='"Zürich"}')]}),
        wire.oa_chunk({}, "tool_calls"),
        wire.oa_usage(120, 18),
    ]
    answer = [
        wire.oa_chunk({"content": "It is sunny in "}),
        wire.oa_chunk({"content": "Zürich, 21 °C."}),
        wire.oa_chunk({}, "stop"),
        wire.oa_usage(160, 9),
    ]
    return [wire.openai_sse(call), wire.openai_sse(answer)]


def _anthropic_turns() -> list[bytes]:
    call = [
        wire.an_message_start(120),
        wire.an_block_start(0, {"type": "text", "text": ""}),
        wire.an_text(0, "Let me check "),
        wire.an_text(0, "the weather."),
        wire.an_block_stop(0),
        wire.an_block_start(
            1, {"type": "tool_use", "id": "toolu_zh", "name": "weather", "input": {}}
        ),
        wire.an_json(1, '{"city": '),
        wire.an_json(1, '"Zürich"}'),
        wire.an_block_stop(1),
        wire.an_message_delta("tool_use", 18),
        wire.MESSAGE_STOP,
    ]
    answer = [
        wire.an_message_start(160),
        wire.an_block_start(0, {"type": "text", "text": ""}),
        wire.an_text(0, "It is sunny in "),
        wire.an_text(0, "Zürich, 21 °C."),
        wire.an_block_stop(0),
        wire.an_message_delta("end_turn", 9),
        wire.MESSAGE_STOP,
    ]
    return [wire.anthropic_sse(call), wire.anthropic_sse(answer)]


_Server = SSELoopback


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    import os

    for name in list(os.environ):
        if name.startswith(("NBAGENT_", "OPENAI_", "ANTHROPIC_")):
            monkeypatch.delenv(name)
    return monkeypatch


PROBE = """\
import socket
try:
    socket.create_connection(("127.0.0.1", 9), timeout=1)
except OSError as error:
    print("probe:", error)
"""


def _notebook(path: Path, agent_line: str) -> Path:
    cells = [SETUP, agent_line, "print(r.stop_reason, '|', r.text)", PROBE]
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(c) for c in cells], metadata={"kernelspec": KERNELSPEC}
    )
    nbformat.write(nb, path)
    return path


def _execute(path: Path) -> Any:
    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb,
        kernel_name="python3",
        kernel_manager_class=AsyncLocalKernelManager,
        timeout=90,
        resources={"metadata": {"path": str(path.parent)}},
    ).execute()
    nbformat.write(nb, path)
    return nb


def _no_sockets(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the next kernels refuse every Python-level socket connection."""
    (folder / "sitecustomize.py").write_text(
        "import sys\n"
        "def _refuse(event, args):\n"
        "    if event == 'socket.connect':\n"
        "        raise OSError(f'network blocked in this test: {args[1]!r}')\n"
        "sys.addaudithook(_refuse)\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(folder))


_TIMES = re.compile(r"(&lt;|\\?<)?(\d+ min )?\d+(\.\d+)? s\b")  # "<0.1 s" (escaped in Markdown)


def _comparable(nb: Any) -> list[Any]:
    """The run's outputs with what must differ made equal: times, and the model line."""
    out = []
    for output in nb.cells[1].outputs:
        data = dict(output.get("data", {}))
        for mime in ("text/plain", "text/html", "text/markdown"):
            if mime in data:
                text = _TIMES.sub("T", data[mime])
                text = re.sub(r"replay of [^,\]<`]*, recorded [0-9-]+", "MODEL", text)
                text = re.sub(r"\[model [^\]]*\]|model `[^`]*`|<code>[^<]*</code>", "MODEL", text)
                text = re.sub(r" · recorded in [^ <*]*", "", text)
                # a live run's footer says what it cost; its replay cost nothing
                text = re.sub(r" · (price unknown|\\?\$[0-9.]+)", "", text)
                # each step of "what the model saw" names its model (a replay says so)
                text = re.sub(r"(step \d+ · )[^·<]*( · )", r"\1MODEL\2", text)
                data[mime] = text
        out.append(data)
    return out


@pytest.mark.parametrize("kind", ["openai-compatible", "anthropic", "offline"])
def test_record_then_replay_in_a_fresh_kernel_with_no_network(
    kind: str, tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "course"
    folder.mkdir()
    flag = "--record " if kind == "offline" else ""
    prompt = 'Please weather "Zürich", is it warm?'
    line = f"%agent --approve auto {flag}-o r {prompt}"
    turns = {"openai-compatible": _openai_turns, "anthropic": _anthropic_turns}
    with _Server(turns[kind]() if kind in turns else []) as server:
        if kind == "openai-compatible":
            clean_env.setenv("NBAGENT_MODEL", "openai-compatible:tiny")
            clean_env.setenv("NBAGENT_BASE_URL", server.url + "/v1")
        elif kind == "anthropic":
            clean_env.setenv("NBAGENT_MODEL", "anthropic:claude-test")
            clean_env.setenv("ANTHROPIC_BASE_URL", server.url)
            clean_env.setenv("ANTHROPIC_API_KEY", "sk-ant-test-" + "k" * 24)
        recorded = _execute(_notebook(folder / "lesson.ipynb", line))
        if kind in turns:
            assert len(server.requests) == 2  # the live run really went to the server
    said = "".join(o.get("text", "") for o in recorded.cells[2].outputs)
    assert said.startswith("finished |")
    files = list((folder / "nbagent-recordings").glob("*.json"))
    assert len(files) == 1 and files[0].name.startswith("please-weather-z-rich-is-it-warm-")
    text = files[0].read_text()
    assert "sk-ant-test" not in text and "127.0.0.1" not in text

    # a student's machine: the same folder, no model, no server, no network
    for name in ("NBAGENT_MODEL", "NBAGENT_BASE_URL", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"):
        clean_env.delenv(name, raising=False)
    (tmp_path / "site").mkdir()
    _no_sockets(tmp_path / "site", clean_env)
    student = tmp_path / "student"
    student.mkdir()
    (student / "nbagent-recordings").mkdir()
    (student / "nbagent-recordings" / files[0].name).write_text(text)
    clean_notebook = _notebook(student / "lesson.ipynb", line.replace("--record ", ""))
    replayed = _execute(clean_notebook)
    said_again = "".join(o.get("text", "") for o in replayed.cells[2].outputs)
    probe = "".join(o.get("text", "") for o in replayed.cells[3].outputs)
    assert "network blocked in this test" in probe  # the kernel really had no network
    assert said_again == said
    assert _comparable(replayed) == _comparable(recorded)
    before = recorded.cells[1].outputs[-1].metadata["nbagent"]
    after = replayed.cells[1].outputs[-1].metadata["nbagent"]
    assert after["model"].startswith("replay of ")
    assert [(c["name"], c["arguments"]) for c in after["calls"]] == [
        (c["name"], c["arguments"]) for c in before["calls"]
    ]
    assert [c["name"] for c in after["calls"]] == ["weather"]
    assert (
        "Z\\u00fcrich" in after["calls"][0]["arguments"]
        or "Zürich" in after["calls"][0]["arguments"]
    )


def test_a_changed_tool_result_stops_the_replay_and_says_where(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    line = '%agent --approve auto -o r Please weather "Oslo"'
    recorded = tmp_path / "teacher"
    recorded.mkdir()
    _execute(_notebook(recorded / "lesson.ipynb", line.replace("auto ", "auto --record ")))
    student = tmp_path / "student"
    student.mkdir()
    (student / "nbagent-recordings").mkdir()
    for file in (recorded / "nbagent-recordings").glob("*.json"):
        (student / "nbagent-recordings" / file.name).write_text(file.read_text())
    path = _notebook(student / "lesson.ipynb", line)
    nb = nbformat.read(path, as_version=4)
    nb.cells[0].source = nb.cells[0].source.replace(
        "sunny, 21 °C", "rain, 9 °C"
    )  # the tool changed
    nbformat.write(nb, path)
    replayed = _execute(path)
    html = "".join(o.get("data", {}).get("text/html", "") for o in replayed.cells[1].outputs)
    assert "diverged at step 2" in html
    assert "message 3 of the conversation differs" in html and "rain, 9 °C" in html
    said = "".join(o.get("text", "") for o in replayed.cells[2].outputs)
    assert said.startswith("failed |")


def test_a_recorded_prompt_whose_run_departs_says_how_instead_of_running_offline(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    """The tool set changed after recording: the run's first request matches no recording, so
    no file is found by its hash. The prompt was recorded, though: the cell must say what
    differs (not answer with the offline stand-in as if nothing had been recorded), while a
    prompt nobody recorded still runs on the stand-in."""
    line = '%agent --approve auto -o r Please weather "Oslo"'
    teacher = tmp_path / "teacher"
    teacher.mkdir()
    _execute(_notebook(teacher / "lesson.ipynb", line.replace("auto ", "auto --record ")))
    student = tmp_path / "student"
    student.mkdir()
    (student / "nbagent-recordings").mkdir()
    for file in (teacher / "nbagent-recordings").glob("*.json"):
        (student / "nbagent-recordings" / file.name).write_text(file.read_text())
    path = _notebook(student / "lesson.ipynb", line)
    nb = nbformat.read(path, as_version=4)
    nb.cells[0].source = nb.cells[0].source.replace("Current weather", "The weather")
    nb.cells[2].source = "print(r.stop_reason, '|', type(r.error).__name__)"
    nb.cells[3].source = '%agent --approve auto -o s Please weather "Bergen"\nprint(s.text)'
    nbformat.write(nb, path)
    replayed = _execute(path)
    shown = "".join(
        o.get("text", "") + o.get("data", {}).get("text/plain", "")
        for o in replayed.cells[1].outputs
    )
    assert "definition (description or schema) of tool(s) weather differs" in shown
    assert "[offline model]" not in shown and "Traceback" not in shown
    said = "".join(o.get("text", "") for o in replayed.cells[2].outputs)
    assert said == "failed | RecordingError\n"  # refused before it began, and -o holds that
    fresh = "".join(o.get("text", "") for o in replayed.cells[3].outputs)
    assert "Bergen: sunny" in fresh  # not recorded: the offline stand-in, as always


def test_a_recording_that_cannot_be_written_says_so_without_the_full_path(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    """The run went fine; its recording could not be written (here the folder's parent is a
    file). The footer says so in words and names the folder relative to the notebook, not as
    an absolute path (which would carry the author's home directory into the notebook)."""
    folder = tmp_path / "course"
    folder.mkdir()
    (folder / "blocker").write_text("a file, not a folder")
    clean_env.setenv("NBAGENT_RECORDINGS", str(folder / "blocker" / "recs"))
    line = '%agent --approve auto --record -o r Please weather "Oslo"'
    nb = _execute(_notebook(folder / "lesson.ipynb", line))
    said = "".join(o.get("text", "") for o in nb.cells[2].outputs)
    assert said.startswith("finished |")
    footer = nb.cells[1].outputs[-1]["data"]["text/plain"].splitlines()[-1]
    assert "not recorded: Not a directory (blocker/recs)" in footer, footer
    assert "recorded in" not in footer and str(tmp_path) not in json.dumps(nb.cells[1].outputs)
    assert nb.cells[1].outputs[-1].metadata["nbagent"]["recording"] is None


def test_a_cell_that_names_its_model_replays_where_there_is_no_key(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    """A lesson whose cells say ``-m openai:…`` was recorded with a key; a student has none.
    The recorded cell replays (as a cell naming no model would); an unrecorded one still says
    that the key is missing."""
    line = '%agent -m openai:gpt-4.1-mini --approve auto -o r Please weather "Zürich"'
    teacher = tmp_path / "teacher"
    teacher.mkdir()
    with _Server(_openai_turns()) as server:
        clean_env.setenv("OPENAI_BASE_URL", server.url + "/v1")
        clean_env.setenv("OPENAI_API_KEY", "sk-test-" + "k1" * 12)
        recorded = _execute(_notebook(teacher / "lesson.ipynb", line))
        assert len(server.requests) == 2
    clean_env.delenv("OPENAI_BASE_URL")
    clean_env.delenv("OPENAI_API_KEY")
    said = "".join(o.get("text", "") for o in recorded.cells[2].outputs)
    assert said.startswith("finished |")
    student = tmp_path / "student"
    shutil.copytree(teacher / "nbagent-recordings", student / "nbagent-recordings")
    path = _notebook(student / "lesson.ipynb", line)
    nb = nbformat.read(path, as_version=4)
    nb.cells[3].source = "%agent -m openai:gpt-4.1-mini Something never recorded"
    nbformat.write(nb, path)
    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb,
        kernel_name="python3",
        kernel_manager_class=AsyncLocalKernelManager,
        timeout=90,
        allow_errors=True,
        resources={"metadata": {"path": str(student)}},
    ).execute()
    assert "".join(o.get("text", "") for o in nb.cells[2].outputs) == said
    assert nb.cells[1].outputs[-1].metadata["nbagent"]["model"].startswith("replay of OpenAIChat")
    unrecorded = "".join(o.get("text", "") for o in nb.cells[3].outputs)
    assert "no API key for openai:gpt-4.1-mini" in unrecorded


def test_a_replay_that_ends_before_its_recording_says_so(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    """The tool now ends the run: the replay never reaches its second recorded step, so no
    request is compared. The cell still says the run departed from its recording."""
    line = '%agent --approve auto -o r Please weather "Oslo"'
    teacher = tmp_path / "teacher"
    teacher.mkdir()
    _execute(_notebook(teacher / "lesson.ipynb", line.replace("auto ", "auto --record ")))
    student = tmp_path / "student"
    shutil.copytree(teacher / "nbagent-recordings", student / "nbagent-recordings")
    path = _notebook(student / "lesson.ipynb", line)
    nb = nbformat.read(path, as_version=4)
    nb.cells[0].source = nb.cells[0].source.replace(
        'return f"{city}: sunny, 21 °C"',
        'return nbagent.text_result(f"{city}: sunny, 21 °C", terminate=True)',
    )
    nbformat.write(nb, path)
    replayed = _execute(path)
    said = "".join(o.get("text", "") for o in replayed.cells[2].outputs)
    assert said.startswith("terminated |")
    last = replayed.cells[1].outputs[-1]
    assert "diverged after step 1" in last["data"]["text/plain"]
    assert "the recording asks the model again (step 2 of 2)" in last["data"]["text/plain"]
    assert "diverged after step 1" in last.metadata["nbagent"]["error"]
