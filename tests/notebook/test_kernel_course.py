"""The course policy in a real kernel: each rule refuses in one sentence naming the rule and the
file, and nothing reaches the model server (a loopback OpenAI-compatible server counts every
request); allowed runs carry their provenance record in the output's metadata."""

from __future__ import annotations

import hashlib
import json
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

import nbformat
import pytest

from nbagent.course.provenance import Provenance, from_metadata, read_output

from ..course.gateway import Gateway
from ..providers import wire
from .conftest import SECRET
from .kernel import Kernel
from .test_kernel_approval import setup_run, wait_ended

MODEL = "openai:gpt-4.1-mini"


@pytest.fixture
def gateway(kernel: Kernel) -> Any:
    with Gateway() as server:
        kernel.execute(
            f"import os\nos.environ['OPENAI_BASE_URL'] = {server.url!r}\n"
            "import nbagent.notebook.policy.courserecord as _cg\n_cg._sessions.clear()"
        )
        yield server


def course(kernel: Kernel, folder: Path, policy: str, notebook: str = "lesson.ipynb") -> bytes:
    """Write the policy and an empty notebook into ``folder``; the kernel runs that notebook
    (JPY_SESSION_NAME, as jupyter-server sets it). Returns the policy's bytes."""
    data = textwrap.dedent(policy).encode()
    (folder / "nbagent-course.toml").write_bytes(data)
    path = folder / notebook
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(), path)
    kernel.execute(
        f"import os\nos.environ['JPY_SESSION_NAME'] = {str(path)!r}\n"
        "os.environ.pop('NBAGENT_COURSE_POLICY', None)"
    )
    return data


def run(kernel: Kernel, line: str) -> tuple[str, Provenance | None, list[dict[str, Any]]]:
    """Run one %agent line to its end: the cell's text, the run's provenance, its outputs."""
    msg_id = kernel.submit(line)
    kernel.finish(msg_id, allow_errors=True)

    def record() -> Provenance | None:
        for output in kernel.cell_outputs(msg_id):
            found = read_output(output.get("metadata", {}))
            if isinstance(found, Provenance):
                return found
        return None

    found = kernel.wait_for(record, what="the run's record")
    return kernel.cell_text(msg_id), found, kernel.cell_outputs(msg_id)


def one_sentence(text: str) -> bool:
    """One line, ending in a full stop, with no full stop followed by a new sentence inside."""
    line = text.strip()
    return "\n" not in line and line.endswith(".") and not re.search(r"[.!?]\s+[A-Z]", line)


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def test_ai_off_in_an_exam_answers_with_the_teachers_message_and_sends_nothing(
    kernel: Kernel, gateway: Gateway, tmp_path: Path
) -> None:
    data = course(
        kernel,
        tmp_path,
        """
        [[notebooks]]
        match = "exams/*.ipynb"
        ai = false
        message = "This is the exam: work on your own."
        """,
        notebook="exams/final.ipynb",
    )
    text, record, outputs = run(kernel, f"%agent -m {MODEL} what is 2 + 2?")
    assert "AI is off here: This is the exam: work on your own" in text
    assert "notebooks[1].ai = false" in text and "nbagent-course.toml" in text
    assert one_sentence(text)
    assert gateway.requests == []
    assert record is not None and record.ai_off and record.refused
    assert record.policy_digest == digest(data)
    assert record.policy_source == "../nbagent-course.toml"  # relative to exams/
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("%agent what is 2 + 2?")
    cell.outputs = [nbformat.from_dict(o) for o in outputs]
    nb.cells = [cell]
    nbformat.validate(nb)


def test_the_same_policy_leaves_a_lesson_alone_and_the_run_carries_its_record(
    kernel: Kernel, gateway: Gateway, tmp_path: Path
) -> None:
    data = course(
        kernel,
        tmp_path,
        """
        models = ["openai:gpt-4.1-*"]
        [[notebooks]]
        match = "exams/*.ipynb"
        ai = false
        """,
    )
    gateway.sse(wire.openai_text(f"four (my key is {SECRET})"))
    text, record, outputs = run(kernel, f"%agent -m {MODEL} --new what is 2 + 2? {SECRET}")
    assert len(gateway.requests) == 1
    assert record is not None and record.refused is None and not record.ai_off
    assert record.mode == "live" and record.model == MODEL and record.provider == "openai"
    assert (record.input_tokens, record.output_tokens, record.requests) == (82, 17, 1)
    assert record.cost_usd is not None and record.cost_usd > 0
    assert record.policy_digest == digest(data) and record.policy_source == "nbagent-course.toml"
    assert record.stop_reason == "finished"
    assert record.output_digest is not None
    raw = json.dumps(outputs)
    assert SECRET not in raw  # not in the record, not in the outputs
    assert "price unknown" not in text
    assert "$0.00006" in text  # 82 in, 17 out at gpt-4.1-mini's price, in the footer


def test_a_model_with_no_known_price_says_so_and_never_guesses(
    kernel: Kernel, gateway: Gateway, tmp_path: Path
) -> None:
    course(kernel, tmp_path, "live = true\n")
    gateway.sse(wire.openai_text("hi"))
    text, record, _ = run(kernel, "%agent -m openai:no-such-model-7 --new hello")
    assert record is not None and record.cost_usd is None and record.mode == "live"
    assert "price unknown" in text and "$" not in text


def test_a_model_the_course_does_not_allow_is_refused(
    kernel: Kernel, gateway: Gateway, tmp_path: Path
) -> None:
    course(kernel, tmp_path, 'models = ["openai:gpt-4.1-mini", "anthropic:claude-*"]\n')
    text, record, _ = run(kernel, "%agent -m openai:gpt-4o hello")
    assert "The model openai:gpt-4o is not allowed here" in text and one_sentence(text)
    assert "rule `models = [" in text and "nbagent-course.toml" in text
    assert gateway.requests == []
    assert record is not None and record.refused and not record.ai_off


def test_options_the_course_turns_off_are_refused(
    kernel: Kernel, gateway: Gateway, tmp_path: Path
) -> None:
    course(kernel, tmp_path, "kernel_tools = false\nnotebook_tools = false\nauto_approve = false\n")
    text, _, _ = run(kernel, f"%agent -m {MODEL} --kernel sum the list")
    assert "kernel tools (--kernel) are off" in text and "kernel_tools = false" in text
    text, _, _ = run(kernel, f"%agent -m {MODEL} --notebook fix the error above")
    assert "notebook tools (--notebook) are off" in text and "notebook_tools = false" in text
    text, _, _ = run(kernel, f"%agent -m {MODEL} --approve auto tidy up")
    assert "--approve=auto" in text and "auto_approve = false" in text
    assert gateway.requests == []


def test_mcp_servers_off_refuses_a_run_while_one_is_connected(
    kernel: Kernel, gateway: Gateway, tmp_path: Path
) -> None:
    pytest.importorskip("mcp", reason="the mcp SDK is not installed (the mcp extra)")
    if not kernel.eval("__import__('importlib.util').util.find_spec('mcp') is not None"):
        pytest.skip("the kernel's Python has no mcp SDK (a venv built without the mcp extra)")
    from ..mcp.conftest import DEMO

    course(kernel, tmp_path, "mcp = true\n")  # connected while it was allowed
    kernel.execute(f"%agent mcp add demo -- {sys.executable} {DEMO} stdio", timeout=60)
    course(kernel, tmp_path, "mcp = false\n")
    try:
        text, record, _ = run(kernel, f"%agent -m {MODEL} --new use the tools")
    finally:
        kernel.execute("%agent mcp remove demo", timeout=60)
    assert "MCP servers are off in this notebook, and demo is connected" in text
    assert "mcp = false" in text and one_sentence(text)
    assert record is not None and record.refused
    assert gateway.requests == []
    msg_id = kernel.submit(f"%agent mcp add other -- {sys.executable} {DEMO} stdio")
    kernel.finish(msg_id, timeout=60)
    said = kernel.cell_text(msg_id)
    assert "MCP servers are off in this notebook, so 'other' was not started" in said
    assert (
        one_sentence(said)
        and kernel.eval("'other' in nbagent.current_session().mcp_servers") is False
    )


LOOKUP = '@tool\ndef lookup(word: str) -> str:\n    """Look a word up."""\n    return word\n'


def test_a_run_budget_stops_the_run_before_its_next_request(
    kernel: Kernel, gateway: Gateway, tmp_path: Path
) -> None:
    course(kernel, tmp_path, "[budget.run]\nrequests = 1\n")
    kernel.execute(LOOKUP)
    gateway.sse(
        wire.openai_sse(
            [
                wire.oa_chunk({"role": "assistant", "content": ""}),
                wire.oa_chunk({"tool_calls": [wire.oa_call(0, "c1", "lookup", '{"word": "a"}')]}),
                wire.oa_chunk({}, "tool_calls"),
                wire.oa_usage(82, 17),
            ]
        )
    )
    gateway.sse(wire.openai_text("never sent"))
    try:
        _, record, _ = run(kernel, f"%agent -m {MODEL} --new look up a")
    finally:
        kernel.execute("del lookup\nnbagent.current_session().unregister('lookup')")
    assert record is not None and record.stop_reason == "budget", record
    assert len(gateway.requests) == 1
    assert [c.tool for c in record.calls] == ["lookup"] and record.calls[0].decision == "not asked"


def test_live_off_replays_the_courses_recording_and_refuses_what_has_none(
    kernel: Kernel, gateway: Gateway, tmp_path: Path
) -> None:
    course(kernel, tmp_path, "live = true\n")
    gateway.sse(wire.openai_text("Paris."))
    _, recorded, _ = run(kernel, f"%agent -m {MODEL} --new capital of France?")
    assert recorded is not None and recorded.mode == "live" and recorded.recording
    course(kernel, tmp_path, "live = false\n")
    text, replayed, _ = run(kernel, f"%agent -m {MODEL} --new capital of France?")
    assert len(gateway.requests) == 1  # the replay sent nothing
    assert replayed is not None and replayed.mode == "replayed", text
    assert replayed.recording_digest is not None and replayed.cost_usd == 0
    assert replayed.output_digest == recorded.output_digest
    text, refused, _ = run(kernel, f"%agent -m {MODEL} --new capital of Spain?")
    assert "Live calls are off here" in text and "live = false" in text
    assert refused is not None and refused.refused
    assert len(gateway.requests) == 1


@pytest.mark.parametrize(
    ("limit", "words"),
    [
        ("requests = 1", "1 requests of 1"),
        ("tokens = 50", "99 tokens of 50"),
        ("usd = 0.00001", "of 1e-05"),
    ],
)
def test_each_session_budget_refuses_once_spent(
    kernel: Kernel, gateway: Gateway, tmp_path: Path, limit: str, words: str
) -> None:
    course(kernel, tmp_path, f"[budget.session]\n{limit}\n")
    gateway.sse(wire.openai_text("one"))
    _, first, _ = run(kernel, f"%agent -m {MODEL} --new count to one")
    assert first is not None and first.refused is None and len(gateway.requests) == 1
    text, second, _ = run(kernel, f"%agent -m {MODEL} --new count to two")
    assert "The session budget is spent" in text and "budget.session." in text, text
    assert words in text
    assert second is not None and second.refused
    assert len(gateway.requests) == 1


def test_the_notebook_budget_counts_across_runs(
    kernel: Kernel, gateway: Gateway, tmp_path: Path
) -> None:
    course(kernel, tmp_path, "[budget.notebook]\nrequests = 1\n", notebook="hw/one.ipynb")
    gateway.sse(wire.openai_text("one"))
    run(kernel, f"%agent -m {MODEL} --new count to one")
    kernel.execute("_cg._sessions.clear()")  # a new kernel session: the notebook's total stays
    text, _, _ = run(kernel, f"%agent -m {MODEL} --new count to two")
    assert "The notebook budget is spent: this notebook used 1" in text, text
    assert len(gateway.requests) == 1


def test_a_money_budget_on_a_model_with_no_price_is_refused(
    kernel: Kernel, gateway: Gateway, tmp_path: Path
) -> None:
    course(kernel, tmp_path, "[budget.run]\nusd = 0.5\n")
    text, _, _ = run(kernel, "%agent -m openai:no-such-model-7 hello")
    assert "the price of openai:no-such-model-7 is unknown" in text
    assert "budget.run.usd = 0.5" in text
    assert gateway.requests == []


def test_a_policy_that_does_not_read_refuses_every_run_saying_why(
    kernel: Kernel, gateway: Gateway, tmp_path: Path
) -> None:
    course(kernel, tmp_path, "ai = false\nbudgett = 3\n")
    text, _, _ = run(kernel, f"%agent -m {MODEL} hello")
    assert "budgett: unknown key" in text and "nbagent-course.toml" in text
    assert gateway.requests == []


def test_agent_policy_shows_the_rules_the_file_and_the_digest(
    kernel: Kernel, tmp_path: Path
) -> None:
    data = course(kernel, tmp_path, "live = false\n[budget.run]\ntokens = 500\n")
    msg_id = kernel.submit("%agent policy")
    kernel.finish(msg_id)
    text = kernel.cell_text(msg_id)
    assert digest(data) in text
    assert str(tmp_path / "nbagent-course.toml") in text
    assert "live calls: false  (live)" in text
    assert "budget per run: 500 tokens" in text
    assert "JPY_SESSION_NAME" in text


def test_a_refusal_record_reads_back_strictly(kernel: Kernel, tmp_path: Path) -> None:
    course(kernel, tmp_path, "ai = false\n")
    _, record, outputs = run(kernel, "%agent hello")
    assert record is not None
    raw = next(o["metadata"]["nbagent"] for o in outputs if "nbagent" in o.get("metadata", {}))
    assert from_metadata(raw) == record


def test_agent_report_lists_refused_attempts_after_the_run_they_followed(
    kernel: Kernel, gateway: Gateway, tmp_path: Path
) -> None:
    setup_run(kernel, '["Hello."]')
    kernel.execute("s = nbagent.notebook.current_session(); s.jobs.clear(); s.refusals.clear()")
    course(kernel, tmp_path, "kernel_tools = false\n")
    wait_ended(kernel, kernel.submit("%agent --new say hello"))
    run(kernel, f"%agent -m {MODEL} --kernel sum <b>the</b> list")
    run(kernel, f"%agent -m {MODEL} --kernel again")
    report = kernel.submit("%agent report")
    kernel.finish(report)
    (output,) = [o for o in kernel.cell_outputs(report) if o["output_type"] == "display_data"]
    plain, shown = output["data"]["text/plain"], output["data"]["text/html"]
    assert "3 run(s): 0 live, 0 replayed, 1 offline, 2 refused" in plain, plain
    lines = [line for line in plain.splitlines()[3:] if " · " in line and line[0] != " "]
    assert [line.split(" · ")[1] for line in lines] == ["offline stand-in", "refused", "refused"]
    assert plain.count("refused: The kernel tools (--kernel) are off") == 2, plain
    assert "sum &lt;b&gt;the&lt;/b&gt; list" in shown and "<b>the</b>" not in shown
    assert gateway.requests == []
    assert kernel.eval("(len(s.refusals), s.refusals.maxlen)") == (2, 200)


# what the gateways answer, as their sources and docs give it: LiteLLM's proxy turns a
# BudgetExceededError into ProxyException(type="budget_exceeded", code=400) (429 in newer
# releases); OpenRouter answers 402 with {"error": {"code": 402, "message": ...}}
LITELLM_BUDGET = {
    "error": {
        "message": "Budget has been exceeded! Current cost: 0.0123, Max budget: 0.01",
        "type": "budget_exceeded",
        "param": None,
        "code": "400",
    }
}
OPENROUTER_CREDITS = {
    "error": {
        "code": 402,
        "message": "Insufficient credits. Add more using https://openrouter.ai/credits",
        "metadata": {"limit_source": "openrouter_key_limit"},
    }
}


@pytest.mark.parametrize(
    ("status", "body", "words"),
    [
        (400, LITELLM_BUDGET, "the budget of this key is spent (Budget has been exceeded!"),
        (429, LITELLM_BUDGET, "the budget of this key is spent"),
        (402, OPENROUTER_CREDITS, "refused the request for want of credits (HTTP 402: Insuff"),
    ],
)
def test_a_gateways_spending_refusal_reads_as_one_sentence_and_is_not_retried(
    kernel: Kernel, gateway: Gateway, tmp_path: Path, status: int, body: Any, words: str
) -> None:
    course(kernel, tmp_path, f'models = ["{MODEL}"]\n')
    for _ in range(3):
        gateway.error(status, body)
    text, record, _ = run(kernel, f"%agent -m {MODEL} --new hello")
    assert words in text, text
    line = next(line for line in text.splitlines() if words in line)
    assert line.startswith("Error: SpendingLimitError: OpenAI ")
    # one sentence of nbagent's around the gateway's own words (quoted in parentheses)
    assert one_sentence(re.sub(r"\(.*\)", "(…)", line.split(": ", 2)[2]))
    assert len(gateway.requests) == 1  # a spent budget is never asked again
    assert gateway.headers[0]["authorization"] == f"Bearer {SECRET}"  # the student's own key
    assert record is not None and record.stop_reason == "failed"
    assert SECRET not in text


def test_the_default_model_is_used_when_nothing_names_one(
    kernel: Kernel, gateway: Gateway, tmp_path: Path
) -> None:
    course(kernel, tmp_path, f'models = ["{MODEL}"]\ndefault_model = "{MODEL}"\n')
    kernel.execute("nbagent.current_session().set_model(None)")
    gateway.sse(wire.openai_text("hi"))
    _, record, _ = run(kernel, "%agent --new hello")
    assert record is not None and record.model == MODEL and record.mode == "live"
    assert gateway.requests[0]["model"] == "gpt-4.1-mini"


def test_an_unknown_notebook_in_the_exam_folder_is_still_an_exam(
    kernel: Kernel, gateway: Gateway, tmp_path: Path
) -> None:
    """nbclient and jupyter execute name no notebook: the kernel's folder stands in."""
    course(kernel, tmp_path, '[[notebooks]]\nmatch = "exams/*.ipynb"\nai = false\n')
    (tmp_path / "exams").mkdir()
    kernel.execute(
        "os.environ.pop('JPY_SESSION_NAME', None)\n_was = os.getcwd()\n"
        f"os.chdir({str(tmp_path / 'exams')!r})\n"
        "_saved_session = globals().pop('__session__', None)"
    )
    try:
        text, record, outputs = run(kernel, f"%agent -m {MODEL} my key is {SECRET}")
        msg_id = kernel.submit("%agent policy")
        kernel.finish(msg_id)
        shown = kernel.cell_text(msg_id)
    finally:
        kernel.execute("os.chdir(_was)\n__session__ = _saved_session")
    assert "AI is off here" in text and record is not None and record.ai_off
    assert SECRET not in json.dumps(outputs) and "my key is ***" in record.prompt
    assert "notebook: unknown" in shown and "notebooks[1]" in shown
    assert gateway.requests == []
