"""``%agent map`` and ``agent.map`` in a real kernel: the live progress view, Stop, the final
progress as plain output (no widget left), and a Dask LocalCluster running a tool that was
defined in a notebook cell."""

from __future__ import annotations

import re
import textwrap
from typing import Any

import pytest

from .kernel import Kernel
from .test_kernel_approval import WIDGET_MIME, in_cell

SETUP = """
import asyncio, os
import pandas as pd
import nbagent.notebook
from nbagent.models import FunctionModel, Call, Turn
from nbagent.messages import UserMessage

@tool
def grade(answer: str, key: str) -> str:
    \"\"\"Compare an answer with the key (and say which process ran it).\"\"\"
    return ("right" if answer == key else "wrong") + f" in {os.getpid()}"

hold = asyncio.Event()

async def decide(request):
    last = request.messages[-1]
    if isinstance(last, UserMessage):
        answer, key = last.text.split("|")
        if answer == "slow":
            await hold.wait()
        return Turn(Call("grade", {"answer": answer, "key": key}))
    return last.results[0].text

nbagent.notebook.current_session().set_model(FunctionModel(decide))
quiz = pd.DataFrame({"answer": ["4", "5", "7"], "key": ["4", "4", "7"]}, index=["q1", "q2", "q3"])
"""


@pytest.fixture(scope="module")
def ready(kernel: Kernel) -> Kernel:
    kernel.execute(textwrap.dedent(SETUP))
    return kernel


def _widget_outputs(kernel: Kernel, msg_id: str) -> list[dict[str, Any]]:
    return [o for o in kernel.cell_outputs(msg_id) if WIDGET_MIME in o.get("data", {})]


def test_a_map_cell_shows_live_progress_then_plain_output(ready: Kernel) -> None:
    kernel = ready
    since = kernel.mark()
    msg_id = kernel.submit('%agent map --over quiz -o results "{answer}|{key}"')
    kernel.finish(msg_id)
    assert kernel.eval("list(results['status'])") == ["done"] * 3
    assert kernel.eval("list(results.index)") == ["q1", "q2", "q3"]
    texts = kernel.eval("[t.split(' in ')[0] for t in results['text']]")
    assert texts == ["right", "wrong", "right"]
    # live: a Stop button (where clicks reach a waiting cell) and an HTML progress widget …
    if in_cell(kernel):
        assert kernel.buttons("Stop", since=since)
    else:
        assert any("Kernel &gt; Interrupt stops" in t for t in kernel.html_texts(since))
    # … and replaced by plain output: the saved cell holds no widget, only the summary
    assert _widget_outputs(kernel, msg_id) == []
    plain = kernel.cell_text(msg_id)
    assert "nbagent map (finished): quiz: {answer}|{key}" in plain
    assert "3/3 · done 3 · failed 0" in plain
    html = kernel.cell_text(msg_id, "text/html")
    assert "nbagent map" in html and "<script" not in html
    live = list(kernel.widgets)[since:]
    assert live and all(c in kernel.closed for c in live), "every widget of the view was closed"


def test_bad_input_is_a_usage_error_naming_the_columns(ready: Kernel) -> None:
    since = ready.mark()
    msg_id = ready.submit('%agent map --over quiz -o nope "{answr}|{key}"')
    ready.finish(msg_id, allow_errors=True)
    reply = ready.replies[msg_id]["content"]
    assert reply["status"] == "error" and reply["ename"] == "UsageError"
    assert "its columns: answer, key" in reply["evalue"]
    made = list(ready.widgets)[since:]
    assert all(c in ready.closed for c in made), "a batch that never started left widgets"
    assert _widget_outputs(ready, msg_id) == []
    msg_id = ready.submit('%agent map --over quiz --approve ask "{answer}|{key}"')
    ready.finish(msg_id, allow_errors=True)
    assert "--approve auto" in ready.replies[msg_id]["content"]["evalue"]
    # a line that starts with "map" is a map: without --over it is answered with the usage
    msg_id = ready.submit("%agent map the coast")
    ready.finish(msg_id, allow_errors=True)
    said = ready.replies[msg_id]["content"]["evalue"]
    assert "the following arguments are required: --over" in said
    assert "put -- first: %agent -- map the coast" in said


def test_stop_keeps_the_finished_rows(ready: Kernel) -> None:
    kernel = ready
    if not in_cell(kernel):
        pytest.skip("this ipykernel does not deliver clicks to a cell that awaits (< 7.4)")
    kernel.execute(
        "slow_quiz = pd.DataFrame({'answer': ['4', '4', 'slow', 'slow', 'slow'], 'key': ['4'] * 5})"
    )
    since = kernel.mark()
    msg_id = kernel.submit(
        '%agent map --over slow_quiz -o stopped --concurrency 2 "{answer}|{key}"'
    )
    stop = kernel.wait_for(lambda: kernel.buttons("Stop", enabled=True, since=since))
    kernel.wait_for(
        lambda: any("done 2" in t for t in kernel.html_texts(since)), what="two rows done"
    )
    assert kernel.running(msg_id)
    kernel.click(stop[0])
    kernel.finish(msg_id)
    statuses = kernel.eval("list(stopped['status'])")
    assert statuses == ["done", "done", "cancelled", "cancelled", "not run"]
    plain = kernel.cell_text(msg_id)
    assert "nbagent map (stopped)" in plain and "stopped 3" in plain
    assert _widget_outputs(kernel, msg_id) == []


def test_agent_map_in_a_cell_shows_the_same_view(ready: Kernel) -> None:
    code = textwrap.dedent(
        """
        agent = nbagent.Agent(FunctionModel(decide), [grade])
        table = await agent.map(quiz, "{answer}|{key}")
        print(list(table["status"]))
        """
    )
    msg_id = ready.submit(code)
    ready.finish(msg_id)
    plain = ready.cell_text(msg_id)
    assert "['done', 'done', 'done']" in plain
    assert "nbagent map (finished): agent.map" in plain
    assert _widget_outputs(ready, msg_id) == []


DASK = """
from distributed import Client, LocalCluster

def plain(request):  # no asyncio.Event here: what a worker gets must pickle
    last = request.messages[-1]
    if isinstance(last, UserMessage):
        answer, key = last.text.split("|")
        return Turn(Call("grade", {"answer": answer, "key": key}))
    return last.results[0].text

nbagent.notebook.current_session().set_model(FunctionModel(plain))
cluster = LocalCluster(n_workers=2, threads_per_worker=2, processes=True, dashboard_address=":0")
client = Client(cluster)
"""


def test_a_dask_cluster_runs_a_tool_defined_in_a_notebook_cell(ready: Kernel) -> None:
    kernel = ready
    if not kernel.eval("__import__('importlib.util').util.find_spec('distributed') is not None"):
        pytest.skip("dask.distributed is not installed in this kernel's environment")
    kernel.execute(textwrap.dedent(DASK), timeout=120)
    try:
        msg_id = kernel.submit('%agent map --over quiz -o spread --engine client "{answer}|{key}"')
        kernel.finish(msg_id, timeout=120)
        assert kernel.eval("list(spread['status'])") == ["done"] * 3
        pids = kernel.eval("sorted({t.split(' in ')[1] for t in spread['text']})")
        here = kernel.eval("str(os.getpid())")
        workers = kernel.eval("sorted(str(p) for p in client.run(os.getpid).values())")
        assert here not in pids and set(pids) <= set(workers)  # the cell's tool ran there
        assert "nbagent map (finished)" in kernel.cell_text(msg_id)
        # a model that cannot travel is refused before anything runs, saying why (a lock of its
        # own: SETUP's decide cannot travel only once a test has awaited its asyncio.Event)
        kernel.execute(
            textwrap.dedent(
                """
                import threading
                held = threading.Lock()

                def locked(request):
                    with held:
                        return plain(request)

                nbagent.notebook.current_session().set_model(FunctionModel(locked))
                """
            )
        )
        msg_id = kernel.submit('%agent map --over quiz --engine client "{answer}|{key}"')
        kernel.finish(msg_id, allow_errors=True)
        assert "cannot be sent to Dask workers" in kernel.replies[msg_id]["content"]["evalue"]
    finally:  # the module's model again: the tests after this one wait on its `hold`
        kernel.execute(
            "client.close(); cluster.close()\n"
            "nbagent.notebook.current_session().set_model(FunctionModel(decide))",
            timeout=120,
        )


def test_an_interrupted_map_cell_says_so_in_one_line(ready: Kernel) -> None:
    kernel = ready
    if not in_cell(kernel):
        pytest.skip("before ipykernel 7.4 a map that may ask runs in the background")
    # the row waits on `hold` (never set) under the module's model, whatever ran before
    kernel.execute(
        'stuck = pd.DataFrame({"answer": ["slow"], "key": ["4"]})\n'
        "nbagent.notebook.current_session().set_model(FunctionModel(decide))"
    )
    since = kernel.mark()
    msg_id = kernel.submit('%agent map --over stuck -o partial "{answer}|{key}"')
    kernel.wait_for(lambda: kernel.buttons("Stop", since=since), what="the map's view")
    kernel.km.interrupt_kernel()
    kernel.finish(msg_id, allow_errors=True, timeout=30)
    reply = kernel.replies[msg_id]["content"]
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt"
    # one line, not the frames of nbagent's awaiting call
    shown = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(reply["traceback"]))
    assert shown == "KeyboardInterrupt: %agent map was stopped by a kernel interrupt", shown
    assert kernel.eval("list(partial['status'])") == ["cancelled"]
