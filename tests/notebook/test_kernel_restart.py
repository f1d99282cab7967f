"""A kernel restart loses nothing the person cares about: ``%agent --continue`` goes on from the
saved notebook.

Each test runs a real kernel started as jupyter-server starts one (``JPY_SESSION_NAME`` names
the notebook, the kernel works in its folder) against a loopback server speaking a provider's
real protocol: a run, the notebook saved with its outputs, a real restart (the kernel manager's
``restart_kernel``: the old process exits, a new one answers on the same channels), then
continuing. What the model receives after the restart is compared with what it received
without one: the same conversation, byte for byte as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from ..providers import wire
from .conftest import kernel_env
from .kernel import Kernel, make_kernel_manager
from .sse_loopback import SSELoopback
from .test_kernel_approval import run_record

SETUP = """\
%load_ext nbagent
import nbagent
from nbagent import tool

@tool
def weather(city: str) -> str:
    \"\"\"Current weather for a city.\"\"\"
    return f"{city}: sunny, 21 °C"
"""

FIRST = "what is the weather in Zürich?"
NEXT = "and what should I wear?"


def _chat_turns() -> list[bytes]:
    call = [
        wire.oa_chunk({"role": "assistant", "content": "Let me check."}),
        wire.oa_chunk({"tool_calls": [wire.oa_call(0, "call_zh", "weather")]}),
        wire.oa_chunk({"tool_calls": [wire.oa_call(0, args='{"city": "Zürich"}')]}),
        wire.oa_chunk({}, "tool_calls"),
        wire.oa_usage(120, 18),
    ]
    return [wire.openai_sse(call), wire.openai_text("Sunny in Zürich, 21 °C.")]


def _anthropic_turns() -> list[bytes]:
    call = [
        wire.an_message_start(120),
        wire.an_block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        wire.an_delta(0, {"type": "thinking_delta", "thinking": "The user wants the weather."}),
        wire.an_delta(0, {"type": "signature_delta", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA"}),
        wire.an_block_stop(0),
        wire.an_block_start(
            1, {"type": "tool_use", "id": "toolu_zh", "name": "weather", "input": {}}
        ),
        wire.an_json(1, '{"city": "Zürich"}'),
        wire.an_block_stop(1),
        wire.an_message_delta("tool_use", 18),
        wire.MESSAGE_STOP,
    ]
    return [wire.anthropic_sse(call), wire.anthropic_text("Sunny in Zürich, 21 °C.")]


def _responses_turns() -> list[bytes]:
    call = wire.ResponsesTurn()
    call.reasoning(["The user wants ", "the weather."], item_id="rs_1", encrypted="enc-1")
    call.message("Let me check.", item_id="msg_1")
    call.call("call_zh", "weather", '{"city": ', '"Zürich"}')
    answer = wire.ResponsesTurn()
    answer.message("Sunny in Zürich, 21 °C.", item_id="msg_2")
    return [call.completed(wire.rs_usage(120, 18)).body(), answer.completed().body()]


def _responses_text(text: str) -> bytes:
    turn = wire.ResponsesTurn()
    turn.message(text, item_id="msg_9")
    return turn.completed().body()


PROVIDERS = {
    "responses": ("openai-responses:gpt-test", _responses_turns, _responses_text),
    "chat": ("openai:gpt-test", _chat_turns, wire.openai_text),
    "anthropic": ("anthropic:claude-test", _anthropic_turns, wire.anthropic_text),
}


_Server = SSELoopback


class _Notebook:
    """A notebook folder with a kernel that runs it, as JupyterLab starts one."""

    def __init__(self, folder: Path, server: _Server) -> None:
        self.folder = folder
        self.path = folder / "lesson.ipynb"
        nbformat.write(nbformat.v4.new_notebook(), self.path)  # the file the server opened
        env = kernel_env(
            JPY_SESSION_NAME=str(self.path),
            NBAGENT_RECORDINGS=str(folder / "nbagent-recordings"),
            OPENAI_BASE_URL=f"{server.url}/v1",
            ANTHROPIC_BASE_URL=server.url,
            ANTHROPIC_API_KEY="sk-ant-test-key-0123456789",
        )
        km = make_kernel_manager(_python(), folder / "spec")
        km.start_kernel(env=env, cwd=str(folder))
        self.kernel = Kernel(km)
        self.cells: list[tuple[str, str]] = []

    def run(self, code: str, *, keep: bool = True) -> str:
        """Run a cell to its end (and its run's); ``keep``: it is one of the notebook's cells."""
        msg_id = self.kernel.submit(code)
        self.kernel.finish(msg_id, timeout=90, allow_errors=True)
        if keep:
            self.cells.append((code, msg_id))
        return msg_id

    def save(self) -> None:
        """Save the kept cells with the outputs the kernel sent, as the frontend saves them."""
        nb = nbformat.v4.new_notebook()
        for source, msg_id in self.cells:
            cell = nbformat.v4.new_code_cell(source)
            outputs = self.kernel.cell_outputs(msg_id)
            for output in outputs:  # the harness keeps an error's name only
                if output["output_type"] == "error":
                    output.update(evalue="", traceback=[])
            cell.outputs = [nbformat.from_dict(o) for o in outputs]
            nb.cells.append(cell)
        nbformat.validate(nb)
        nbformat.write(nb, self.path)

    def restart(self) -> None:
        """Kernel > Restart: the kernel is asked to shut down and a new process starts."""
        before = self.kernel.km.provisioner.pid  # type: ignore[union-attr]
        self.kernel.km.shutdown_wait_time = 60.0  # a loaded machine: let it exit by itself
        self.kernel.km.restart_kernel(now=False)
        # the old kernel's last outputs are queued on iopub: wait_for_ready would flush them
        self.kernel.drain(0.5)
        self.kernel.kc.wait_for_ready(timeout=60)
        self.kernel.drain(0.2)
        assert self.kernel.km.provisioner.pid != before  # type: ignore[union-attr]
        assert self.kernel.eval("'nbagent' in __import__('sys').modules") is False  # a new process

    def close(self) -> None:
        self.kernel.shutdown()


def _python() -> str:
    import sys

    return sys.executable


@pytest.fixture
def server() -> Iterator[_Server]:
    found = _Server()
    try:
        yield found
    finally:
        found.close()


@pytest.fixture
def notebook(tmp_path: Path, server: _Server) -> Iterator[_Notebook]:
    made = _Notebook(tmp_path, server)
    try:
        yield made
    finally:
        made.close()


def _ended(nb: _Notebook, cell: str) -> dict[str, Any]:
    """The record of the run of ``cell`` (which ran to its end)."""
    found = nb.kernel.wait_for(lambda: run_record(nb.kernel, cell), what="the run's record")
    return dict(found)


def _history(body: dict[str, Any]) -> list[Any]:
    """The conversation a request body holds (Chat and Messages: messages; Responses: input)."""
    return list(body.get("messages", body.get("input", [])))


def _first_run(nb: _Notebook, server: _Server, provider: str) -> dict[str, Any]:
    model, turns, _text = PROVIDERS[provider]
    server.bodies += turns()
    nb.run(SETUP)
    cell = nb.run(f"%agent -m {model} {FIRST}")
    record = _ended(nb, cell)
    assert record["stop_reason"] == "finished", record
    assert len(server.requests) == 2
    return record


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_after_a_restart_continue_sends_the_model_what_it_would_have_had(
    notebook: _Notebook, server: _Server, provider: str
) -> None:
    model, _turns, text = PROVIDERS[provider]
    record = _first_run(notebook, server, provider)
    run_id = record["provenance"]["run_id"]
    notebook.save()
    # without a restart: the next prompt goes on in the same kernel (not a cell of the file)
    server.bodies.append(text("Wear sunglasses."))
    notebook.run(f"%agent {NEXT}", keep=False)
    without_restart = server.requests[-1]
    assert len(_history(without_restart)) >= 4, without_restart

    notebook.restart()
    notebook.run(SETUP, keep=False)  # the tool's cell, run again as a person does
    server.bodies.append(text("Hello."))
    fresh = notebook.run(f"%agent -m {model} hello", keep=False)
    said = notebook.kernel.cell_text(fresh)
    assert "The saved notebook lesson.ipynb holds an earlier conversation" in said, said
    assert f"its latest run: {run_id}" in said and "%agent --continue" in said, said
    assert len(_history(server.requests[-1])) <= 2  # that run started a new conversation

    again = notebook.run("%agent --continue", keep=False)
    line = notebook.kernel.cell_text(again)
    assert f"continuing {run_id}'s conversation from the saved notebook lesson.ipynb" in line
    server.bodies.append(text("Wear sunglasses."))
    after = notebook.run(f"%agent {NEXT}", keep=False)
    assert run_record(notebook.kernel, after) is not None
    assert server.requests[-1] == without_restart  # exactly what the model would have had
    assert "earlier conversation" not in notebook.kernel.cell_text(after)  # said once


def _recording(nb: _Notebook) -> Path:
    (found,) = sorted((nb.folder / "nbagent-recordings").glob("*.json"))
    return found


def _refusal(nb: _Notebook, line: str = "%agent --continue") -> str:
    msg_id = nb.run(line, keep=False)
    reply = nb.kernel.replies[msg_id]["content"]
    assert reply["status"] == "error", reply
    return str(reply["evalue"])


def test_a_conversation_that_cannot_be_vouched_for_is_refused_naming_why(
    notebook: _Notebook, server: _Server
) -> None:
    record = _first_run(notebook, server, "chat")
    run_id = record["provenance"]["run_id"]
    notebook.save()
    notebook.restart()
    notebook.run(SETUP, keep=False)
    path = _recording(notebook)
    original = path.read_text(encoding="utf-8")

    # the recording edited: its digest is no longer the record's
    path.write_text(original.replace("Sunny in Zürich", "Rainy in Zürich"), encoding="utf-8")
    said = _refusal(notebook, "%agent -m openai:gpt-test --continue")
    assert said.startswith("nothing was continued: the recording"), said
    assert f"is not the one {run_id}'s record holds" in said, said

    # edited consistently with the record's digest: the hashes of what was sent still differ
    edited = original.replace("what is the weather in Zürich?", "what is the weather in Bern?")
    path.write_text(edited, encoding="utf-8")
    saved = path.read_bytes()
    import hashlib

    text = notebook.path.read_text(encoding="utf-8")
    digest = record["provenance"]["recording_digest"]
    notebook.path.write_text(
        text.replace(digest, "sha256:" + hashlib.sha256(saved).hexdigest()), encoding="utf-8"
    )
    said = _refusal(notebook)
    assert "message 1 of its conversation is not the one the model was sent" in said, said

    # missing
    path.unlink()
    said = _refusal(notebook)
    assert f"the recording {path.name} is missing" in said, said

    # a record pointing out of the notebook's folder
    named = f'"recording": "{record["provenance"]["recording"]}"'
    notebook.path.write_text(text.replace(named, '"recording": "../x.json"'), encoding="utf-8")
    said = _refusal(notebook)
    assert "points outside the notebook's folder ('../x.json')" in said, said

    # the run's cell pasted in again, edited: two records claim the run
    path.write_text(original, encoding="utf-8")
    saved_nb = json.loads(text)
    copy = json.loads(json.dumps(saved_nb["cells"][1]))
    for output in copy["outputs"]:
        found = output.get("metadata", {}).get("nbagent", {}).get("provenance")
        if found:
            found["prompt"] = "something else"
    notebook.path.write_text(json.dumps({**saved_nb, "cells": [*saved_nb["cells"], copy]}))
    said = _refusal(notebook, f"%agent --continue {run_id}")
    assert f"{run_id} is claimed by different records in cells 2, 3" in said, said
    # a record nbagent did not write: which conversation is the latest cannot be told
    for output in copy["outputs"]:
        found = output.get("metadata", {}).get("nbagent", {}).get("provenance")
        if found:
            found["tokens"] = "many"
    notebook.path.write_text(json.dumps({**saved_nb, "cells": [*saved_nb["cells"], copy]}))
    said = _refusal(notebook)
    assert "holds a record nbagent cannot read (cell 3: nbagent metadata: tokens" in said, said

    # another model
    notebook.path.write_text(text, encoding="utf-8")
    said = _refusal(notebook, "%agent -m anthropic:claude-test --continue")
    assert f"{run_id} talked to openai:gpt-test" in said, said
    # and nothing of it reached a model: the conversation is still the session's own
    assert len(server.requests) == 2
    assert notebook.kernel.eval("len(nbagent.notebook.current_session().agent.messages)") == 0
    # the very files, untouched: it continues
    line = notebook.kernel.cell_text(notebook.run("%agent -m openai:gpt-test --continue"))
    assert f"continuing {run_id}'s conversation" in line, line


APPROVAL_SETUP = """\
%load_ext nbagent
import nbagent
from nbagent import tool
ran = []

@tool(needs_approval=True)
def delete_file(path: str) -> str:
    \"\"\"Delete a file.\"\"\"
    ran.append(path)
    return f"deleted {path}"
"""

DELETE = "delete a.txt"


def _delete_turn() -> bytes:
    return wire.openai_sse(
        [
            wire.oa_chunk({"role": "assistant", "content": "I will delete it."}),
            wire.oa_chunk({"tool_calls": [wire.oa_call(0, "call_del", "delete_file")]}),
            wire.oa_chunk({"tool_calls": [wire.oa_call(0, args='{"path": "a.txt"}')]}),
            wire.oa_chunk({}, "tool_calls"),
            wire.oa_usage(100, 12),
        ]
    )


def _approve(nb: _Notebook, since: int) -> None:
    kernel = nb.kernel
    (button,) = kernel.wait_for(lambda: kernel.buttons("Approve", enabled=True, since=since))
    kernel.click(button)


def test_a_call_waiting_for_approval_across_a_restart_ends_and_is_offered_again(
    notebook: _Notebook, server: _Server
) -> None:
    kernel = notebook.kernel
    notebook.run(APPROVAL_SETUP)
    # without a restart: approved, the model's next request holds the call and its result
    server.bodies += [_delete_turn(), wire.openai_text("Deleted.")]
    since = kernel.mark()
    first = kernel.submit(f"%agent -m openai:gpt-test {DELETE}")
    _approve(notebook, since)
    kernel.finish(first, timeout=90)
    assert _ended(notebook, first)["stop_reason"] == "finished"
    without_restart = server.requests[-1]
    assert kernel.eval("ran") == ["a.txt"]

    # again, and the kernel restarts while the call waits for approval
    server.bodies.append(_delete_turn())
    since = kernel.mark()
    cell = kernel.submit(f"%agent --new {DELETE}")
    notebook.cells.append((f"%agent --new {DELETE}", cell))
    kernel.wait_for(lambda: kernel.buttons("Approve", enabled=True, since=since))
    notebook.restart()
    outputs = kernel.wait_static(cell)  # the frontend's copy once the kernel's last words came
    notebook.save()
    reopened = nbformat.read(notebook.path, as_version=4)
    saved = reopened.cells[-1].outputs
    assert not [o for o in saved if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    shown = "\n".join(str(o.get("data", {}).get("text/plain", "")) for o in saved)
    assert "waiting for approval" not in shown.lower() and "cancelled" in shown, shown
    record = next(o["metadata"]["nbagent"] for o in outputs if o.get("metadata", {}).get("nbagent"))
    assert record["provenance"]["stop_reason"] == "cancelled", record
    assert record["provenance"]["calls"][0]["status"] == "cancelled", record  # not "waiting"
    assert record["provenance"]["recording"].endswith("-waiting.json"), record

    notebook.run(APPROVAL_SETUP, keep=False)
    said = _refusal(notebook, f"%agent -m openai:gpt-test --continue {DELETE} again")
    assert "call to delete_file was waiting for approval when the kernel stopped" in said, said
    assert "with no prompt, asks it again" in said, said
    # continued from Python: the next prompt is refused until the call was asked again
    notebook.run("print(nbagent.current_session().continue_from())", keep=False)
    said = _refusal(notebook, f"%agent {DELETE} again")
    assert "has its call to delete_file waiting for approval: %agent --continue" in said, said
    asked = len(server.requests)
    server.bodies.append(wire.openai_text("Deleted."))
    since = kernel.mark()
    again = kernel.submit("%agent -m openai:gpt-test --continue")
    kernel.wait_for(lambda: kernel.buttons("Approve", enabled=True, since=since))
    # offered again and waiting for the click, not run by itself (ran is checked at the end:
    # the kernel cannot answer while the cell awaits), and the model not asked that step again
    assert len(server.requests) == asked
    _approve(notebook, since)
    kernel.finish(again, timeout=90)
    said = kernel.cell_text(again)
    assert "its call to delete_file was waiting for approval; it is asked again" in said, said
    assert _ended(notebook, again)["stop_reason"] == "finished"
    assert kernel.eval("ran") == ["a.txt"]  # once: when it was approved
    assert server.requests[-1] == without_restart  # what it would have had without a restart


def test_the_kernel_toolkit_s_undo_of_a_run_before_the_restart_says_why_not(
    notebook: _Notebook,
) -> None:
    kernel = notebook.kernel
    notebook.run(
        "%load_ext nbagent\nimport nbagent, nbagent.notebook\n"
        "from nbagent.models import ScriptedModel, Call, Turn\n"
        "nbagent.notebook.current_session().set_model(ScriptedModel("
        "[Turn(Call('run_python', {'code': 'made = 42'})), 'Done.']))"
    )
    cell = notebook.run("%agent --kernel --approve auto make a variable")
    run_id = _ended(notebook, cell)["provenance"]["run_id"]
    assert kernel.eval("made") == 42
    notebook.restart()
    notebook.run("%load_ext nbagent")
    said = kernel.cell_text(notebook.run(f"%agent undo {run_id}"))
    assert f"{run_id} cannot be undone: it ran in another kernel session" in said, said
    assert "the namespace its code changed went with that kernel" in said, said
    said = kernel.cell_text(notebook.run("%agent undo"))
    assert "the runs of sessions before a restart cannot be undone" in said, said


def test_under_a_course_policy_continuing_is_a_run_like_any_other(
    notebook: _Notebook, server: _Server
) -> None:
    policy = 'version = 1\nmodels = ["openai:gpt-*"]\n\n[budget.notebook]\nrequests = 3\n'
    (notebook.folder / "nbagent-course.toml").write_text(policy, encoding="utf-8")
    first = _first_run(notebook, server, "chat")["provenance"]
    assert first["policy_source"] == "nbagent-course.toml"
    notebook.save()
    notebook.restart()
    notebook.run(SETUP, keep=False)
    server.bodies.append(wire.openai_text("Wear sunglasses."))
    cell = notebook.run(f"%agent -m openai:gpt-test --continue {NEXT}", keep=False)
    record = _ended(notebook, cell)["provenance"]
    assert record["policy_digest"] == first["policy_digest"], record  # its record, as any run's
    assert record["stop_reason"] == "finished" and record["requests"] == 1, record
    assert len(_history(server.requests[-1])) >= 4  # it went on from the saved conversation
    # the notebook's budget counts it: the next continuation is refused, and says by which rule
    asked = len(server.requests)
    again = notebook.run(f"%agent --continue {NEXT}", keep=False)
    said = notebook.kernel.cell_text(again)
    assert "budget.notebook.requests = 3" in said and "nothing was sent" in said, said
    assert len(server.requests) == asked


TYPED_SETUP = """\
%load_ext nbagent
import json, dataclasses
import nbagent, nbagent.notebook
from nbagent.messages import messages_to_json
from nbagent.models import ScriptedModel, Call, Turn

@dataclasses.dataclass
class Person:
    name: str
    age: int

nbagent.notebook.current_session().set_model(ScriptedModel(
    [Turn(Call("final_answer", {"name": "Ann", "age": 31})), "She is 31."]))
"""

HISTORY = "json.dumps(messages_to_json(nbagent.notebook.current_session().agent.messages))"


def test_a_typed_run_recorded_from_a_model_set_in_python_continues_as_it_was(
    notebook: _Notebook,
) -> None:
    """A typed run answers through its own final_answer tool (no tool of the session's), on a
    model set from Python that --record records: its conversation comes back as it was."""
    kernel = notebook.kernel
    notebook.run(TYPED_SETUP)
    cell = notebook.run("%agent --record --output Person -o who Ann is 31")
    record = _ended(notebook, cell)["provenance"]
    assert record["mode"] == "offline" and record["recording"], record
    before = kernel.eval(HISTORY)
    assert "final_answer" in before
    notebook.save()
    notebook.restart()
    notebook.run(TYPED_SETUP, keep=False)
    line = kernel.cell_text(notebook.run("%agent --continue", keep=False))
    assert f"continuing {record['run_id']}'s conversation" in line, line
    assert kernel.eval(HISTORY) == before  # the same messages, the answer tool's call in them
