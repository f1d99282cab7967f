"""Every route to a model is held to the course policy, in a real kernel against a loopback
model server that counts each request: ``%agent map``, a model object set from Python, an
``Agent`` of one's own, a helper agent, a model switched to at a step-mode pause, a fork, and
``%agent serve``. A refusal is one sentence naming the rule and the file, nothing reaches the
server, and a map leaves one provenance record for its rows, which the class report counts."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import nbformat
import pytest

from nbagent.course import read_class
from nbagent.course.policy import load_policy
from nbagent.course.provenance import Provenance, read_output

from ..course.gateway import Gateway
from ..providers import wire
from .conftest import SECRET
from .kernel import Kernel
from .test_kernel_course import MODEL, course, gateway, one_sentence, run

__all__ = ["gateway"]  # the fixture, shared with test_kernel_course
QUIZ = "import pandas as pd\nquiz = pd.DataFrame({'q': ['2 + 2', '3 + 3']})"


def cell(kernel: Kernel, source: str) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    """Run a cell to its end: its text, its outputs, its reply."""
    msg_id = kernel.submit(source)
    kernel.finish(msg_id, allow_errors=True, timeout=120)
    return kernel.cell_text(msg_id), kernel.cell_outputs(msg_id), kernel.replies[msg_id]["content"]


def record_of(outputs: list[dict[str, Any]]) -> Provenance | None:
    for output in outputs:
        found = read_output(output.get("metadata", {}))
        if isinstance(found, Provenance):
            return found
    return None


EXAM = """
models = ["openai:gpt-4.1-*"]
[[notebooks]]
match = "exams/*.ipynb"
ai = false
message = "This is the exam: work on your own."
"""


def test_a_map_in_an_ai_off_exam_is_refused_and_sends_nothing(
    kernel: Kernel, gateway: Gateway, tmp_path: Path
) -> None:
    course(kernel, tmp_path, EXAM, notebook="exams/final.ipynb")
    kernel.execute(QUIZ)
    text, outputs, reply = cell(kernel, f'%agent map --over quiz -o answers -m {MODEL} "{{q}}"')
    assert reply["status"] == "ok"
    assert "AI is off here: This is the exam: work on your own" in text, text
    assert "notebooks[1].ai = false" in text and one_sentence(text)
    assert gateway.requests == []
    record = record_of(outputs)
    assert record is not None and record.refused and record.ai_off and record.rule == "ai"
    assert record.prompt.startswith("map over quiz")
    assert kernel.eval("'answers' in globals()") is False


@pytest.mark.parametrize(
    ("policy", "options", "words", "rule"),
    [
        (
            'models = ["anthropic:*"]\n',
            "",
            "The model openai:gpt-4.1-mini is not allowed",
            "models",
        ),
        ("live = false\n", "", "Live calls are off here: only the course's recordings", "live"),
        (
            "auto_approve = false\n",
            "--approve auto",
            "(--approve=auto) is not allowed",
            "auto_approve",
        ),
    ],
)
def test_a_map_keeps_to_the_models_live_calls_and_auto_approval(
    kernel: Kernel, gateway: Gateway, tmp_path: Path, policy: str, options: str, words: str,
    rule: str,
) -> None:  # fmt: skip
    course(kernel, tmp_path, policy)
    kernel.execute(QUIZ)
    text, outputs, _ = cell(kernel, f'%agent map --over quiz {options} -m {MODEL} "{{q}}"')
    assert words in text and one_sentence(text), text
    assert "nbagent-course.toml" in text
    assert gateway.requests == []
    record = record_of(outputs)
    assert record is not None and record.refused and record.rule == rule


def _saved(outputs: list[dict[str, Any]], source: str, path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    made = nbformat.v4.new_code_cell(source)
    made.outputs = [nbformat.from_dict(o) for o in outputs]
    nb.cells = [made]
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def test_a_map_leaves_one_record_for_its_rows_and_the_class_report_counts_them(
    kernel: Kernel, gateway: Gateway, tmp_path: Path
) -> None:
    course(kernel, tmp_path, 'models = ["openai:gpt-4.1-*"]\n')
    kernel.execute(QUIZ)
    for answer in ("four", "six"):
        gateway.sse(wire.openai_text(answer))
    source = f'%agent map --over quiz -o answers -m {MODEL} "{{q}} {SECRET}"'
    text, outputs, _ = cell(kernel, source)
    assert len(gateway.requests) == 2, text
    assert kernel.eval("sorted(answers['text'])") == ["four", "six"]
    record = record_of(outputs)
    assert record is not None and record.refused is None, text
    assert record.rows == 2 and record.requests == 2 and record.mode == "live"
    assert (record.input_tokens, record.output_tokens) == (164, 34)
    assert record.model == MODEL and record.cost_usd is not None and record.cost_usd > 0
    assert record.policy_source == "nbagent-course.toml" and record.policy_digest
    assert SECRET not in json.dumps(outputs)
    # the class report over the saved notebook: two runs, and in an AI-off exam, a flag
    submissions = tmp_path / "submissions"
    _saved(outputs, source, submissions / "alice" / "exams" / "quiz.ipynb")
    (tmp_path / "exam-policy.toml").write_text(EXAM)
    (row,) = read_class([submissions], policy=load_policy(tmp_path / "exam-policy.toml"))
    assert (row.runs, row.live, row.refused) == (2, 2, 0), row
    assert row.input_tokens == 164 and row.flag_list == ["ai_off", "other_policy"], row


def test_the_session_budget_holds_across_a_maps_parallel_rows(
    kernel: Kernel, gateway: Gateway, tmp_path: Path
) -> None:
    course(kernel, tmp_path, "[budget.session]\nrequests = 1\n")
    kernel.execute(QUIZ)
    gateway.sse(wire.openai_text("four"))
    gateway.sse(wire.openai_text("never asked"))
    text, outputs, _ = cell(kernel, f'%agent map --over quiz -o answers -m {MODEL} "{{q}}"')
    assert len(gateway.requests) == 1, text  # two rows at once: only one took the last request
    statuses = kernel.eval("sorted(answers['status'])")
    assert statuses == ["done", "failed"], statuses
    error = kernel.eval("answers[answers['status'] == 'failed']['error'].iloc[0]")
    assert "The session budget is spent" in error and "budget.session.requests" in error
    record = record_of(outputs)
    assert record is not None and record.rows == 1 and record.requests == 1


def test_a_model_object_set_from_python_is_held_to_the_allow_list(
    kernel: Kernel, gateway: Gateway, tmp_path: Path
) -> None:
    course(kernel, tmp_path, 'models = ["openai:gpt-4.1-mini"]\n')
    kernel.execute(
        "from nbagent.providers import OpenAIChat\n"
        "forbidden = OpenAIChat('gpt-4o', api_key=os.environ['OPENAI_API_KEY'], "
        "base_url=os.environ['OPENAI_BASE_URL'])"
    )
    kernel.execute("nbagent.current_session().set_model(forbidden)")
    try:
        text, record, _ = run(kernel, "%agent --new hello")
    finally:
        kernel.execute("nbagent.current_session().set_model(None)")
    assert "The model openai:gpt-4o is not allowed here" in text and one_sentence(text), text
    assert record is not None and record.refused and record.model == "openai:gpt-4o"
    # an Agent of one's own, run from Python: the same rule, at its request
    said, _, reply = cell(
        kernel,
        "from nbagent import Agent\ntry:\n    Agent(forbidden).run_sync('hello')\n"
        "except Exception as exc:\n    print(type(exc).__name__, exc)",
    )
    assert reply["status"] == "ok"
    assert "RunFailedError" in said and "The model openai:gpt-4o is not allowed here" in said
    assert gateway.requests == []


HELPER = """
from nbagent import Agent
from nbagent.models import ScriptedModel, Call, Turn
expert = Agent(forbidden, name="expert", description="Ask the expert.")
nbagent.current_session().set_model(ScriptedModel([
    Turn(Call("expert", {"prompt": "what is 2 + 2?"})),
    "The expert could not be asked.",
]))
nbagent.register(expert.as_tool())
"""


def test_a_helper_on_a_model_the_course_forbids_is_refused_at_its_request(
    kernel: Kernel, gateway: Gateway, tmp_path: Path
) -> None:
    course(kernel, tmp_path, 'models = ["openai:gpt-4.1-mini"]\n')
    kernel.execute(
        "from nbagent.providers import OpenAIChat\n"
        "forbidden = OpenAIChat('gpt-4o', api_key=os.environ['OPENAI_API_KEY'], "
        "base_url=os.environ['OPENAI_BASE_URL'])"
    )
    kernel.execute(textwrap.dedent(HELPER))
    try:
        text, record, _ = run(kernel, "%agent --new ask the expert")
    finally:
        kernel.execute(
            "nbagent.current_session().unregister('expert')\n"
            "nbagent.current_session().set_model(None)"
        )
    assert gateway.requests == []
    assert "The model openai:gpt-4o is not allowed here" in text, text
    assert record is not None and record.refused is None  # the caller's own run went on
    assert record.stop_reason == "finished" and [c.tool for c in record.calls] == ["expert"]


STEP = """
from nbagent import Agent
from nbagent.approvals.approval import ScriptedApprover
from nbagent.inspection.stepping import run_to_end
from nbagent.models import ScriptedModel
stepped = Agent(ScriptedModel(["never played"]))
switch = ScriptedApprover(pauses=[run_to_end(model=forbidden)])
try:
    stepped.run_sync("hello", step=True, approver=switch)
except Exception as exc:
    print(type(exc).__name__, exc)
"""


def test_the_model_switched_to_at_a_step_pause_is_judged_before_it_is_asked(
    kernel: Kernel, gateway: Gateway, tmp_path: Path
) -> None:
    course(kernel, tmp_path, 'models = ["openai:gpt-4.1-mini"]\n')
    kernel.execute(
        "from nbagent.providers import OpenAIChat\n"
        "forbidden = OpenAIChat('gpt-4o', api_key=os.environ['OPENAI_API_KEY'], "
        "base_url=os.environ['OPENAI_BASE_URL'])"
    )
    said, _, _ = cell(kernel, textwrap.dedent(STEP))
    assert "The model openai:gpt-4o is not allowed here" in said, said
    assert gateway.requests == []


def test_a_fork_asks_the_policy_as_a_run_does(
    kernel: Kernel, gateway: Gateway, tmp_path: Path
) -> None:
    course(kernel, tmp_path, "live = true\n", notebook="exams/final.ipynb")
    kernel.execute(
        "from nbagent.models import ScriptedModel\n"
        "scripted = ScriptedModel(['first', 'again'])\n"
        "nbagent.current_session().set_model(scripted)"
    )
    try:
        _, first, _ = run(kernel, "%agent --new say something")
        assert first is not None and first.refused is None
        course(kernel, tmp_path, EXAM, notebook="exams/final.ipynb")
        text, refused, _ = run(kernel, f"%agent fork {first.run_id} 1")
    finally:
        kernel.execute("nbagent.current_session().set_model(None)")
    assert "AI is off here" in text and refused is not None and refused.ai_off
    assert kernel.eval("scripted.remaining") == 1  # the fork asked nothing


def test_serving_in_an_ai_off_exam_is_refused(
    kernel: Kernel, gateway: Gateway, tmp_path: Path
) -> None:
    course(kernel, tmp_path, EXAM, notebook="exams/final.ipynb")
    text, outputs, reply = cell(kernel, "%agent serve")
    assert reply["status"] == "ok"
    assert "AI is off here" in text and one_sentence(text), text
    assert kernel.eval("nbagent.current_session().served is None") is True
    record = record_of(outputs)
    assert record is not None and record.ai_off and record.refused
