"""``%agent --output TYPE`` in a real kernel: the type looked up in the notebook, the run
answering with a validated value (natively and through the final-answer tool), the value
shown as a table in the saved output, and types that cannot be answered refused before
anything is sent."""

from __future__ import annotations

import textwrap

import pytest

from .kernel import Kernel
from .test_kernel_approval import wait_ended

SETUP = """
import dataclasses, json
import nbagent.notebook
from nbagent.models import Call, FunctionModel, Turn
from nbagent.messages import UserMessage

@dataclasses.dataclass
class Person:
    name: str
    age: int

class NativeModel(FunctionModel):
    def native_answers(self, schema):
        return True, "test structured output"

def decide(request):
    if request.answer_format is not None:
        return '{"name": "Ann <b>", "age": 31}'
    if any(d.name == "final_answer" for d in request.tools):
        return Turn(Call("final_answer", {"name": "Bo", "age": 7}))
    return "plain text"

native = NativeModel(decide)
tooled = FunctionModel(decide)
session = nbagent.notebook.current_session()
session.set_model(native)
"""


@pytest.fixture(scope="module")
def ready(kernel: Kernel) -> Kernel:
    kernel.execute(textwrap.dedent(SETUP))
    return kernel


def test_a_typed_answer_lands_in_the_variable_and_shows_as_a_table(ready: Kernel) -> None:
    kernel = ready
    cell = kernel.submit("%agent --new --output Person -o p Who is Ann?")
    record = wait_ended(kernel, cell)
    assert record["stop_reason"] == "finished"
    assert kernel.eval("p.output == Person('Ann <b>', 31)") is True
    assert kernel.eval("type(p.output).__name__") == "Person"
    html = kernel.cell_text(cell, "text/html")
    assert "Answer" in html and "Ann &lt;b&gt;" in html and '<b>"' not in html
    assert "<th" in html and ">age</th>" in html
    plain = kernel.cell_text(cell)
    assert '"age": 31' in plain


def test_the_final_answer_tool_where_the_model_has_no_native_output(ready: Kernel) -> None:
    kernel = ready
    kernel.execute("session.set_model(tooled)")
    try:
        cell = kernel.submit("%agent --new --output Person -o bo Who is Bo?")
        record = wait_ended(kernel, cell)
    finally:
        kernel.execute("session.set_model(native)")
    assert record["stop_reason"] == "terminated"
    assert kernel.eval("bo.output == Person('Bo', 7)") is True
    assert [c["name"] for c in record["calls"]] == ["final_answer"]
    plain = kernel.cell_text(cell)
    assert "final_answer" in plain and '"name": "Bo"' in plain


def test_types_that_cannot_be_answered_are_refused_before_anything_is_sent(
    ready: Kernel,
) -> None:
    kernel = ready
    kernel.execute("session.set_model(native)")
    before = kernel.eval("len(native.requests)")
    for line, said in (
        ("%agent --output Nobody hi", "name 'Nobody' is not defined"),
        ("%agent --output print(1) hi", "not an expression with call"),
        ("%agent --output session hi", "cannot be an answer type"),
    ):
        cell = kernel.submit(line)
        kernel.finish(cell, allow_errors=True)
        reply = kernel.replies[cell]["content"]
        assert reply["ename"] == "UsageError" and said in reply["evalue"], reply
    assert kernel.eval("len(native.requests)") == before
