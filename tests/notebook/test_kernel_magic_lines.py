"""Magic lines in a real kernel: a subcommand written wrong is answered with its usage and sends
nothing to the model; a prompt that starts with a subcommand's word goes after ``--`` (or in a
``%%agent`` body); a fork is checked against the tools its run will offer."""

from __future__ import annotations

import pytest

from .kernel import Kernel
from .test_kernel_approval import setup_run, wait_ended

TOOLS = """
@tool
def weather(city: str) -> str:
    \"\"\"The weather in a city.\"\"\"
    return f"{city}: sunny"
"""
TURNS = '[Turn("Looking.", Call("weather", {"city": "Paris"}, id="c1")), "Sunny.", "Again."]'

SESSION = "nbagent.notebook.current_session()"


def _sent(kernel: Kernel) -> tuple[int, int]:
    """What reached the model (its requests) and how many runs the session started."""
    return kernel.eval("len(model.requests)"), kernel.eval(f"len({SESSION}.jobs)")


@pytest.fixture(scope="module")
def first_run(kernel: Kernel) -> str:
    """One finished run with a weather call, to fork and compare."""
    setup_run(kernel, TURNS, tools=TOOLS)
    record = wait_ended(kernel, kernel.submit("%agent --new --approve auto weather in Paris?"))
    assert record["stop_reason"] == "finished"
    return str(record["run_id"])


MALFORMED = [
    ("fork {run} -1", "'-1' is not a step number"),
    ("fork {run}", "missing STEP"),
    ("fork {run} x", "'x' is not a step number"),
    ("fork", "missing RUN"),
    ("fork {run} 0", "'0' is not a step number"),
    ("compare {run}", "missing RUN"),
    ("compare these two files", "'these' is not a run's id"),
    ("compare {run} {run} {run}", "more than %agent compare takes"),
    ("undo that", "'that' is not a run's id (run-k7q2x-3, run-3, or serve-…-1) or 'step'"),
    ("undo step", "missing STEP"),
    ("cells please", "'please' is not a run's id"),
    ("mcp add fs", "missing -- COMMAND ARGS..."),
    ("mcp list my servers", "'my' is more than %agent mcp takes"),
    ("mcp", "missing add or list or remove or login or logout"),
    ("allow me to ask something", "'to' is not ARG=PATTERN"),
    ("deny weather, please", "'weather,' is not a tool's name"),
    ("rules remove", "missing N or TOOL"),
    ("rules of the game", "'of' is not 'remove' or 'clear'"),
    ("approval-timeout for this call?", "'for' is not a positive number of seconds"),
    ("map the coast of Norway", "the following arguments are required: --over"),
    ("map", "missing --over TABLE"),
    ("help me write a function", "'me' is not a subcommand"),
    ("history of Rome", "'of' is more than %agent history takes"),
    ("tools please", "'please' is more than %agent tools takes"),
    ("config now", "'now' is more than %agent config takes"),
    ("recording of the talk", "'of' is more than %agent recording takes"),
    ("usage of tokens", "'of' is more than %agent usage takes"),
    ("stop the war", "'the' is more than %agent stop takes"),
]


@pytest.mark.parametrize(("line", "said"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_a_subcommand_written_wrong_is_its_usage_and_never_a_prompt(
    kernel: Kernel, first_run: str, line: str, said: str
) -> None:
    line = line.format(run=first_run)
    before = _sent(kernel)
    cell = kernel.submit(f"%agent {line}")
    kernel.finish(cell, allow_errors=True)
    reply = kernel.replies[cell]["content"]
    assert reply["status"] == "error" and reply["ename"] == "UsageError", reply
    message = reply["evalue"]
    assert said in message, message
    name = line.split()[0]
    assert "nothing was sent to the model" in message and f"Usage:\n  %agent {name}" in message
    assert f"put -- first: %agent -- {line}" in message
    assert _sent(kernel) == before, f"{line!r} reached the model"


def test_options_before_a_subcommand_and_a_body_it_does_not_take(
    kernel: Kernel, first_run: str
) -> None:
    before = _sent(kernel)
    for code, said in (
        (f"%agent --step fork {first_run} 2", "'fork' is a subcommand, and comes first"),
        ("%agent --new compare these files", "put -- before the prompt: %agent --new -- compare"),
        (f"%%agent compare {first_run} {first_run}\nand tell me why", "takes no cell body"),
    ):
        cell = kernel.submit(code)
        kernel.finish(cell, allow_errors=True)
        reply = kernel.replies[cell]["content"]
        assert reply["ename"] == "UsageError" and said in reply["evalue"], reply
        assert "nothing was sent to the model" in reply["evalue"]
    assert _sent(kernel) == before


def test_a_prompt_that_starts_with_a_subcommand_s_word_goes_after_dashes(
    kernel: Kernel, first_run: str
) -> None:
    kernel.execute("model.add('Compared.'); model.add('From the body.')")
    requests = kernel.eval("len(model.requests)")
    record = wait_ended(kernel, kernel.submit("%agent -- compare these two files"))
    assert record["stop_reason"] == "finished"
    assert kernel.eval("model.requests[-1].messages[-1].text") == "compare these two files"
    record = wait_ended(kernel, kernel.submit("%%agent\ncompare these two, from a body"))
    assert record["stop_reason"] == "finished"
    assert kernel.eval("model.requests[-1].messages[-1].text") == "compare these two, from a body"
    assert kernel.eval("len(model.requests)") == requests + 2


def test_help_names_every_subcommand_and_one_subcommand_s_forms(kernel: Kernel) -> None:
    cell = kernel.submit("%agent help")
    kernel.finish(cell)
    whole = kernel.cell_text(cell)
    for name in kernel.eval("list(nbagent.notebook.commands.COMMANDS)"):
        assert f"%agent {name}" in whole, name
    assert "put -- first (%agent -- compare these two" in whole
    cell = kernel.submit("%agent help fork")
    kernel.finish(cell)
    one = kernel.cell_text(cell)
    assert one.strip().startswith("%agent fork RUN STEP [options] [PROMPT]")
    assert "%agent compare" not in one


def test_a_fork_whose_history_calls_a_tool_the_run_would_not_offer_is_refused(
    kernel: Kernel, first_run: str
) -> None:
    before = _sent(kernel)
    kernel.execute("del weather")
    cell = kernel.submit(f"%agent fork {first_run} 2")
    kernel.finish(cell, allow_errors=True)
    reply = kernel.replies[cell]["content"]
    assert reply["ename"] == "UsageError", reply
    assert f"cannot fork {first_run} at step 2: its history calls 'weather'" in reply["evalue"]
    assert "no tool of that name is registered now" in reply["evalue"]
    assert _sent(kernel) == before
    # defined again, it forks; unregistered, it is refused again; --tools without it too
    kernel.execute(TOOLS)
    kernel.execute("model.add('Forked.')")
    assert wait_ended(kernel, kernel.submit(f"%agent fork {first_run} 2"))["stop_reason"] == (
        "finished"
    )
    assert "weather" in kernel.eval("[d.name for d in model.requests[-1].tools]")
    after = _sent(kernel)
    kernel.execute(f"{SESSION}.unregister('weather')")
    cell = kernel.submit(f"%agent fork {first_run} 2")
    kernel.finish(cell, allow_errors=True)
    assert "no tool of that name is registered now" in kernel.replies[cell]["content"]["evalue"]
    kernel.execute(
        'nbagent.register(weather)\n@tool\ndef other() -> str:\n    """Other."""\n    return "x"'
    )
    cell = kernel.submit(f"%agent fork {first_run} 2 --tools other")
    kernel.finish(cell, allow_errors=True)
    assert "weather: --tools leaves it out" in kernel.replies[cell]["content"]["evalue"]
    assert _sent(kernel) == after


def test_compare_in_code_takes_run_ids_and_names_one_that_is_not_there(
    kernel: Kernel, first_run: str
) -> None:
    kernel.execute(
        f"from nbagent.inspection.fork import compare\nfirst = {SESSION}.result_of({first_run!r})"
    )
    cell = kernel.submit("compare(first, 'run-99')")
    kernel.finish(cell, allow_errors=True)
    said = kernel.replies[cell]["content"]["evalue"]
    assert said.startswith("the second run: no run named 'run-99' in this session; its runs are")
    assert first_run in said
    assert kernel.eval(f"compare({first_run!r}, first).first_difference") is None
