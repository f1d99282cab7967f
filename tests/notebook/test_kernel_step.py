"""``%agent --step``, ``%agent fork`` and ``%agent compare`` in a real kernel (ipykernel 7.4 and
6.29), with clicks and typed text sent as a browser sends them; and the saved run's "what the
model saw" readable without a kernel."""

from __future__ import annotations

import re
from pathlib import Path

from .kernel import Kernel
from .test_kernel_approval import in_cell, run_record, setup_run, wait_ended

TOOLS = """
@tool
def lookup(city: str) -> str:
    \"\"\"The weather in a city.\"\"\"
    return f"{city}: sunny"
"""
TURNS = (
    '[Turn("Looking.", Call("lookup", {"city": "Paris"}, id="c1")), '
    '"It is sunny in Paris.", "Asked again."]'
)


PAUSE_STOP = "End the run here (every call is answered)"


def _click_next(kernel: Kernel, since: int, clicked: set[str], label: str = "Next") -> None:
    found = kernel.wait_for(
        lambda: [b for b in kernel.buttons(label, enabled=True, since=since) if b not in clicked],
        what=f"a pause's {label}",
    )
    clicked.add(found[0])
    kernel.click(found[0])


def test_next_steps_through_the_run_and_the_saved_run_shows_what_the_model_saw(
    kernel: Kernel,
) -> None:
    since = setup_run(kernel, TURNS, tools=TOOLS)
    cell = kernel.submit("%agent --new --step -o stepped weather in Paris?")
    clicked: set[str] = set()
    for _ in range(3):  # before request 1, before its calls, before request 2
        _click_next(kernel, since, clicked)
    record = wait_ended(kernel, cell)
    assert record["stop_reason"] == "finished"
    plain = kernel.cell_text(cell)
    pauses = [line.strip("()") for line in plain.splitlines() if line.startswith("(‖")]
    assert pauses == [
        "‖ step 1: paused before the model request, then went on to the next step",
        "‖ step 1: paused before running its calls, then went on to the next step",
        "‖ step 2: paused before the model request, then went on to the next step",
    ]
    html = kernel.cell_text(cell, "text/html")
    assert "What the model saw, step by step (2 requests)" in html
    assert "tool result of <code>lookup</code>" in html and "Paris: sunny" in html
    assert "It is sunny in Paris." in html
    assert kernel.eval("len(stepped.exchanges)") == 2


def test_run_to_end_stop_and_interrupt_at_a_pause(kernel: Kernel) -> None:
    since = setup_run(kernel, TURNS, tools=TOOLS)
    cell = kernel.submit("%agent --new --step weather in Paris?")
    _click_next(kernel, since, set(), "Run to end")
    assert wait_ended(kernel, cell)["stop_reason"] == "finished"
    assert kernel.cell_text(cell).count("(‖ step") == 1  # no pause after Run to end

    since = setup_run(kernel, TURNS, tools=TOOLS)
    cell = kernel.submit("%agent --new --step weather in Paris?")
    clicked: set[str] = set()
    _click_next(kernel, since, clicked)  # the request goes; the calls pause comes
    stops = kernel.wait_for(  # the second pause's bar, whole
        lambda: kernel.widget_ids("ButtonModel", since=since, tooltip=PAUSE_STOP)[1:],
        what="the calls' pause",
    )
    kernel.click(stops[-1])  # the Stop of the newest pause
    record = wait_ended(kernel, cell)
    assert record["stop_reason"] == "cancelled"
    assert (
        kernel.eval("ran") == []
        and kernel.eval("type(nbagent.notebook.current_session().agent.messages[-1]).__name__")
        == "ToolMessage"
    )  # the stopped call is answered

    since = setup_run(kernel, TURNS, tools=TOOLS)
    cell = kernel.submit("%agent --new --step weather in Paris?")
    kernel.wait_for(lambda: kernel.buttons("Next", enabled=True, since=since), what="a pause")
    kernel.km.interrupt_kernel()  # an idle kernel (a run in the background) stops it too
    kernel.finish(cell, allow_errors=True, timeout=30)
    if in_cell(kernel):
        assert kernel.replies[cell]["content"]["ename"] == "KeyboardInterrupt"
    record = kernel.wait_for(lambda: run_record(kernel, cell), what="the run's end")
    assert record["stop_reason"] == "cancelled"
    assert kernel.eval("nbagent.notebook.current_session().approver.paused()") == []
    kernel.execute("model.add('after the interrupt')")
    again = kernel.submit("%agent --approve auto still there?")  # the next run is not blocked
    assert wait_ended(kernel, again)["stop_reason"] == "finished"


def test_an_edit_at_a_pause_reaches_the_model_marked_as_edited(kernel: Kernel) -> None:
    since = setup_run(kernel, TURNS, tools=TOOLS)
    cell = kernel.submit("%agent --new --step weather in Paris?")
    clicked: set[str] = set()
    _click_next(kernel, since, clicked)
    _click_next(kernel, since, clicked)
    (edit,) = kernel.wait_for(
        lambda: kernel.buttons("Edit before sending", enabled=True, since=since), what="Edit"
    )
    kernel.click(edit)
    (box,) = kernel.wait_for(
        lambda: kernel.widget_ids("TextareaModel", since=since, value="Paris: sunny"),
        what="the result's text box",
    )
    kernel.type_into(box, "Paris: a storm is coming")
    _click_next(kernel, since, clicked)
    wait_ended(kernel, cell)
    read = kernel.eval("repr(model.requests[-1].messages[-1].results[0])")
    assert "a storm is coming" in str(read) and "edited=True" in str(read)
    html = kernel.cell_text(cell, "text/html")
    assert "edited by the person" in html and "rewrote the result of lookup (c1)" in html


def test_step_mode_headless_says_so_and_runs_to_the_end(kernel: Kernel) -> None:
    setup_run(kernel, TURNS, tools=TOOLS)
    cell = kernel.submit("%agent --new --step --approve auto weather in Paris?")
    record = wait_ended(kernel, cell)
    assert record["stop_reason"] == "finished"
    assert "--step: nobody can click Next here (--approve says auto)" in kernel.cell_text(cell)


def test_fork_a_finished_and_a_replayed_run_and_compare(kernel: Kernel, tmp_path: Path) -> None:
    kernel.execute(f"import os; os.environ['NBAGENT_RECORDINGS'] = {str(tmp_path)!r}")
    setup_run(kernel, TURNS, tools=TOOLS)
    first = kernel.submit("%agent --new --record --approve auto weather in Paris?")
    run_id = wait_ended(kernel, first)["run_id"]
    fork = kernel.submit(f"%agent fork {run_id} 2")
    forked = wait_ended(kernel, fork)
    assert "Asked again." in kernel.cell_text(fork)
    assert "a fork of run-" in kernel.cell_text(fork) and "at step 2" in kernel.cell_text(fork)
    compared = kernel.submit(f"%agent compare {run_id} {forked['run_id']}")
    kernel.finish(compared)
    said = kernel.cell_text(compared)
    assert "they first differ at step 2: they answered differently" in said
    assert "<table" in kernel.cell_text(compared, "text/html")
    # a replayed run (no model set, the recording found) forks just as well
    kernel.execute("nbagent.notebook.current_session().set_model(None)")
    replay = kernel.submit("%agent --new --approve auto weather in Paris?")
    replayed = wait_ended(kernel, replay)
    assert "replay of" in kernel.cell_text(replay)
    kernel.execute("nbagent.notebook.current_session().set_model(ScriptedModel(['Live now.']))")
    live = kernel.submit(f"%agent fork {replayed['run_id']} 2")
    wait_ended(kernel, live)
    assert "Live now." in kernel.cell_text(live)
    # a fork of a step that does not exist says so, and nothing changes
    bad = kernel.submit(f"%agent fork {run_id} 9")
    kernel.finish(bad, allow_errors=True)
    reply = kernel.replies[bad]["content"]
    assert reply["ename"] == "UsageError" and "has no step 9" in reply["evalue"]
    missing = kernel.submit("%agent fork run-999 1")
    kernel.finish(missing, allow_errors=True)
    assert re.search(
        r"no run named 'run-999' in this session; its runs are: run-",
        kernel.replies[missing]["content"]["evalue"],
    )


def test_what_the_person_types_at_a_pause_is_bounded_as_a_tool_result(kernel: Kernel) -> None:
    """A paste into the pause bar's text box beyond the result limit reaches the model as a
    tool's result would, cut with the marker, still marked edited. (A lone surrogate cannot
    come this way: ipywidgets echoes an update before applying it, and jupyter_client cannot
    encode one, so the update is dropped; Resume edits with one are tested against the
    loopback server in tests/providers/test_step_and_fork.py.)"""
    since = setup_run(kernel, TURNS, tools=TOOLS)
    limits = "nbagent.notebook.current_session().agent.limits"
    kernel.execute(f"{limits} = nbagent.Limits(max_result_chars=2_000)")
    cell = kernel.submit("%agent --new --step weather in Paris?")
    clicked: set[str] = set()
    _click_next(kernel, since, clicked)
    _click_next(kernel, since, clicked)
    (edit,) = kernel.wait_for(
        lambda: kernel.buttons("Edit before sending", enabled=True, since=since), what="Edit"
    )
    kernel.click(edit)
    (box,) = kernel.wait_for(
        lambda: kernel.widget_ids("TextareaModel", since=since, value="Paris: sunny"),
        what="the result's text box",
    )
    kernel.type_into(box, "storm " + "x" * 500_000)
    _click_next(kernel, since, clicked)
    assert wait_ended(kernel, cell)["stop_reason"] == "finished"
    kernel.execute(f"{limits} = nbagent.Limits()")
    read = "model.requests[-1].messages[-1].results[0]"
    text = kernel.eval(f"{read}.text")
    assert text.startswith("storm xxx") and len(text) < 2_200, len(text)
    assert "a tool result may send at most 2,000 characters to the model" in text
    assert kernel.eval(f"{read}.edited") is True


def test_a_cell_written_against_the_older_docs_runs_and_says_where_the_names_went(
    kernel: Kernel,
) -> None:
    """``from nbagent.stepping import next_step`` (the how-to's example before the rooms): the
    cell runs, and the person reads the new path under it, pointing at their line."""
    code = "from nbagent.stepping import next_step, run_to_end\nprint(next_step().action)"
    msg_id = kernel.submit(code)
    kernel.finish(msg_id)
    outputs = kernel.cell_outputs(msg_id)
    stderr = "".join(o["text"] for o in outputs if o.get("name") == "stderr")
    assert "DeprecationWarning: nbagent.stepping moved to nbagent.inspection.stepping" in stderr
    assert "from nbagent.stepping import next_step" in stderr  # the line it points at
    assert "".join(o["text"] for o in outputs if o.get("name") == "stdout") == "next\n"
    assert kernel.eval("next_step is nbagent.next_step") is True
