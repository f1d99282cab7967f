"""Agent.map on a real Dask LocalCluster of worker processes (the optional ``dask`` extra).

Tools are defined inside the tests (closures), so they reach the workers by value through
cloudpickle, as functions defined in notebook cells do. The model runs in the worker processes:
a FunctionModel (it holds no key, so it travels as it is), or a model string resolved on each
worker from the worker's own environment against the loopback OpenAI-compatible server.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from nbagent import Agent, tool
from nbagent.batch import Batch
from nbagent.batch._dask import worker_spec_bytes
from nbagent.errors import BatchInputError
from nbagent.generation import Request
from nbagent.messages import UserMessage
from nbagent.models import Call, FunctionModel, Turn
from tests.providers.conftest import Reply, Server
from tests.providers.wire import openai_text

try:
    import dask
    from distributed import Client, LocalCluster
except ImportError as exc:  # pragma: no cover - the dask extra is part of scripts/test
    print(f"Dask tests skipped: the dask extra is not installed ({exc})")
    pytest.skip(f"dask.distributed is not installed: {exc}", allow_module_level=True)

pytestmark = pytest.mark.timeout(180)

CLIENT_KEY = "client-key-7f3a9c2e51"
WORKER_KEY = "worker-key-b81d40e6a2"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Client]:
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=2,
            processes=True,
            dashboard_address=":0",
            env={"OPENAI_API_KEY": WORKER_KEY},
        ) as made,
        Client(made) as client,
    ):
        yield client


def grading_agent() -> Agent:
    @tool
    def grade(answer: str, key: str) -> str:
        """Compare an answer with the key; says which process ran it."""
        verdict = "right" if answer == key else "wrong"
        return f"{verdict} (pid {os.getpid()})"

    def decide(request: Request) -> Any:
        last = request.messages[-1]
        if isinstance(last, UserMessage):
            answer, key = last.text.split("|")
            return Turn(Call("grade", {"answer": answer, "key": key}))
        return last.results[0].text  # type: ignore[union-attr]

    return Agent(FunctionModel(decide), [grade])


def test_runs_spread_over_the_workers_and_come_back_in_order(cluster: Client) -> None:
    frame = pd.DataFrame(
        {"answer": [str(i % 3) for i in range(24)], "key": ["1"] * 24},
        index=[f"s{i}" for i in range(24)],
    )
    seen: list[Any] = []
    out = grading_agent().map_sync(frame, "{answer}|{key}", engine=cluster, progress=seen.append)
    assert list(out.index) == list(frame.index)
    assert (out["status"] == "done").all(), out["error"].tolist()
    verdicts = [text.split(" (")[0] for text in out["text"]]
    assert verdicts == ["right" if i % 3 == 1 else "wrong" for i in range(24)]
    pids = {text.split("pid ")[1].rstrip(")") for text in out["text"]}
    assert len(pids) == 2 and str(os.getpid()) not in pids  # both workers ran, not us
    assert seen[-1].final and seen[-1].engine == "dask" and seen[-1].done == 24


def test_concurrency_bounds_the_tasks_in_flight(cluster: Client) -> None:
    peaks: list[int] = []

    def count(snapshot: Any) -> None:
        peaks.append(snapshot.running)

    out = grading_agent().map_sync(
        [f"{i}|1" for i in range(12)], engine=cluster, concurrency=3, progress=count, interval=0.01
    )
    assert (out["status"] == "done").all()
    assert max(peaks) <= 3


def set_env(name: str, value: str) -> None:
    os.environ[name] = value


@pytest.fixture
async def server() -> Any:
    made = Server()
    made.default = Reply(openai_text("graded on a worker"))
    await made.start()
    try:
        yield made
    finally:
        await made.close()


async def test_keys_come_from_the_workers_environment_never_from_the_task(
    cluster: Client, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", CLIENT_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    cluster.run(set_env, "OPENAI_BASE_URL", server.url + "/v1")  # not a secret: where to go
    agent = Agent("openai-compatible:grader")  # the client's key, from its environment

    # the adapter holding the key cannot travel: the batch asks for a model string
    with pytest.raises(BatchInputError, match=r"model='provider:name'"):
        await agent.map(["a"], engine=cluster, progress=None)

    batch = Batch(agent, ["a", "b", "c"], engine=cluster, model="openai-compatible:grader")
    shipped = worker_spec_bytes(batch)
    assert CLIENT_KEY.encode() not in shipped and WORKER_KEY.encode() not in shipped
    out = await batch.result()
    assert list(out["text"]) == ["graded on a worker"] * 3
    keys = {request.headers["authorization"] for request in server.requests}
    assert keys == {f"Bearer {WORKER_KEY}"}


class InFlight(Server):
    """The loopback OpenAI-compatible server, counting the requests it is answering at once
    (each answer waits 20 ms before its headers, so runs overlap as they would at a provider)."""

    def __init__(self) -> None:
        super().__init__()
        self.default = Reply(openai_text("graded"), before_headers=0.02)
        self.now = 0
        self.peak = 0

    async def _send(self, reply: Reply, reader: Any, writer: Any) -> bool:
        self.now += 1
        self.peak = max(self.peak, self.now)
        try:
            return await super()._send(reply, reader, writer)
        finally:
            self.now -= 1


@pytest.mark.parametrize("concurrency", [3, None])
async def test_at_most_concurrency_requests_are_in_flight_at_the_server_one_task_per_input(
    cluster: Client, concurrency: int | None
) -> None:
    """The issue's figures: concurrency=3 put 5 requests in flight, and the default (the
    cluster's 4 threads) 6, because inputs went in chunks that ran together on a worker. The
    bound holds across the cluster, and each input is a task of its own."""
    import asyncio

    from distributed import get_task_stream

    threads = await asyncio.to_thread(cluster.nthreads)  # a sync call: not on this loop
    bound = concurrency or sum(threads.values())
    server = InFlight()
    await server.start()
    try:
        cluster.run(set_env, "OPENAI_BASE_URL", server.url + "/v1")
        options = {} if concurrency is None else {"concurrency": concurrency}
        prompts = [f"answer {i}" for i in range(100)]
        with get_task_stream(cluster) as stream:
            # a model name of its own: workers keep the model a batch built (with the address
            # of its day's server) for a later batch of the same settings
            model = f"openai-compatible:grader-{concurrency}"
            out = await Agent("offline").map(
                prompts, engine=cluster, model=model, progress=None, **options
            )
    finally:
        await server.close()
    assert (out["status"] == "done").all(), out["error"].dropna().tolist()[:3]
    assert len(server.requests) == 100
    assert server.peak <= bound, f"{server.peak} requests in flight, at most {bound} promised"
    keys = {task["key"] for task in stream.data if "nbagent-run" in str(task["key"])}
    assert len(keys) == 100  # one task per input


def test_stop_half_way_on_the_cluster_keeps_finished_rows(cluster: Client) -> None:
    import threading

    @tool
    async def slow(n: int) -> str:
        """Quick for the first four inputs, then very slow."""
        import asyncio

        if n >= 4:
            await asyncio.sleep(3600)
        return f"done {n}"

    def decide(request: Request) -> Any:
        last = request.messages[-1]
        if isinstance(last, UserMessage):
            return Turn(Call("slow", {"n": int(last.text)}))
        return last.results[0].text  # type: ignore[union-attr]

    holder: list[Batch] = []

    def stop_when_four_done(snapshot: Any) -> None:
        if snapshot.done >= 4 and not snapshot.stopping and holder:
            threading.Thread(target=holder[0].cancel).start()

    batch = Batch(
        Agent(FunctionModel(decide), [slow]),
        [str(i) for i in range(10)],
        engine=cluster,
        concurrency=2,
        progress=stop_when_four_done,
        interval=0.02,
    )
    holder.append(batch)
    import asyncio

    out = asyncio.run(batch.result())
    assert list(out["text"][:4]) == [f"done {i}" for i in range(4)]
    assert list(out["status"][:4]) == ["done"] * 4
    assert set(out["status"][4:6]) == {"cancelled"}
    assert set(out["status"][6:]) == {"not run"}


def test_a_worker_that_dies_has_its_run_retried_elsewhere_or_reported(tmp_path: Path) -> None:
    """Row 1 kills its worker the first time only: Dask runs it again on another worker and it
    ends done. Row 3 kills every worker it lands on: after the allowed failures it is a failed
    row saying so. The other rows are done.

    One run at a time: Dask counts a worker's death against every task that worker held, so
    with two in flight an innocent run queued behind row 3 on the same worker could be blamed
    too (seen once in a clean-clone CI run). That is Dask's rule, and the row's message says so;
    this test is about retries and reporting, not about that race."""
    marker = tmp_path / "died-once"

    @tool
    def work(n: int) -> str:
        """Work on one input (two of them kill the process running them)."""
        if n == 1 and not marker.exists():
            marker.write_text("x")
            os._exit(1)
        if n == 3:
            os._exit(1)
        return f"worked {n}"

    def decide(request: Request) -> Any:
        last = request.messages[-1]
        if isinstance(last, UserMessage):
            return Turn(Call("work", {"n": int(last.text)}))
        return last.results[0].text  # type: ignore[union-attr]

    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 1}),
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as made,
        Client(made) as client,
    ):
        out = Agent(FunctionModel(decide), [work]).map_sync(
            [str(i) for i in range(6)], engine=client, concurrency=1, progress=None
        )
    assert marker.exists()
    assert out["status"][1] == "done" and out["text"][1] == "worked 1"
    assert out["status"][3] == "failed", out[["status", "error"]].to_string()
    assert "worker running it died" in out["error"][3]
    others = [0, 2, 4, 5]
    assert list(out["status"][others]) == ["done"] * 4, out["error"].tolist()


def test_a_missing_part_of_the_dask_extra_is_named_with_its_install_line(
    cluster: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "cloudpickle", None)  # hidden, as if not installed
    with pytest.raises(BatchInputError) as raised:
        Batch(grading_agent(), ["a"], "grade {}", engine=cluster)
    assert str(raised.value) == (
        "Agent.map(engine=...) needs the dask extra (cloudpickle is not installed here): "
        'pip install "nbagent[dask]"'
    )
