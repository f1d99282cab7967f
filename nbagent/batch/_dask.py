"""Runs of a batch spread over a Dask cluster (``engine=`` a ``dask.distributed.Client``).

Dask does the scheduling; nbagent submits **one task per input**, never more than
``concurrency`` of them at a time across the whole cluster (a new one only when one has ended),
and takes each row back as its task ends (into the same table, checkpoint and progress). So at
most ``concurrency`` runs are in flight at the provider, whatever the cluster's size, and a run
that kills its worker takes no other input's run with it. (Tasks of several inputs each were
cheaper for Dask, but a task of 8 inputs put 8 runs in flight under ``concurrency=3``.)

What travels to the workers is a :class:`WorkerSpec`, pickled once with cloudpickle (so tools
defined in notebook cells go by value) and sent with each task: the tools, the agent's
settings, the approver, the output schema, and the *model string*, never a generator holding a
key. Each worker builds its model from that string and its own environment (``OPENAI_API_KEY``
… set where the worker starts: ``LocalCluster(env=...)``, the deployment's configuration), once
per batch. Provider adapters refuse to be pickled (their key is a ``Secret``), so an agent whose
model was built in code with a key cannot leak it into a task graph: the batch asks for
``model="provider:name"`` instead. Offline models (FunctionModel …) hold no key and travel as
they are.

A map's budget (``budget=``) is one account in this process, which a worker in another
process cannot reserve from. So before a task is submitted the client takes a *share* of what
is left for it (what is left, divided among the tasks that may still be in flight), the
worker's run and its helpers spend from that share as their own account, and the row brings
back what it spent, which settles the share. The whole map stays within its budget; what does
not carry across processes: a row cannot use what another row in flight has left unused (it
may stop at its share while the map still had some), a task is submitted only once a share
holds at least one request (and one token, where tokens are bounded), and a task whose worker
died is counted as having spent its whole share (its spending died with it; if Dask retries it
elsewhere, the retry spends from that same share again).

The task is a coroutine, so Dask runs it on the worker's event loop: a run that waits on the
network holds a task slot (a worker thread) but no thread. Give workers more threads than cores
for remote models (``dask worker --nthreads 16``). A worker that dies mid-run has its task
retried elsewhere by Dask (``distributed.scheduler.allowed-failures``); a task that keeps
killing workers ends as a failed row saying so.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from .._ground.spending import Account, Reservation, spend_from
from ..errors import BatchInputError
from ..limits import Budget
from ._inputs import Item
from ._rows import BatchRow, describe_error, not_run
from ._run import Gate, MappedAgent, RunPlan, run_item

if TYPE_CHECKING:
    from ..approvals.approval import Approver
    from ..generation import Generator, Options
    from ..limits import Limits
    from ..messages import Message
    from ..output._spec import OutputSpec
    from ..tools import Tool

__all__ = ["DrivenBatch", "WorkerSpec", "run_on_dask", "worker_spec", "worker_spec_bytes"]


class DrivenBatch(Protocol):
    """The batch as the cluster drives it (:class:`~._batch.Batch`, which imports this module
    for ``engine=``): its plan and settings, and where rows and the count of runs in flight go."""

    plan: RunPlan
    model: str | None
    engine: Any
    concurrency: int
    concurrency_default: bool
    account: Account | None

    @property
    def stopping(self) -> bool: ...

    def on_stop(self, callback: Callable[[], Any]) -> None: ...

    def running(self, delta: int) -> None: ...

    def record(self, row: BatchRow) -> None: ...


#: Prepared agents a worker keeps (one per batch spec): a few batches may share a cluster.
_KEEP_PLANS = 4


@dataclass
class WorkerSpec:
    """Everything a worker needs to run inputs of one batch: no key, ever."""

    model: str | None
    generator: Generator | None
    tools: list[Tool]
    instructions: str | None
    options: Options
    limits: Limits
    agent_max_steps: int
    tool_timeout: float | None
    max_concurrency: int | None
    approval_timeout: float | None
    messages: list[Message]
    approver: Approver
    max_steps: int | None
    tool_names: list[str] | None
    run_options: Options | None
    timeout: float | None
    retries: int
    retry_delay: float
    output: OutputSpec | None
    keep_history: bool
    #: The prepared agent's class (nbagent's Agent: a fork always is one), by reference.
    agent_class: Callable[..., MappedAgent]
    extra: dict[str, Any] = field(default_factory=dict)
    #: The agent's own budget: it bounds each row's run, as it does here.
    budget: Budget | None = None

    def plan(self) -> RunPlan:
        agent = self.agent_class(
            self.model if self.model is not None else self.generator,
            self.tools,
            instructions=self.instructions,
            approver=self.approver,
            max_steps=self.agent_max_steps,
            options=self.options,
            tool_timeout=self.tool_timeout,
            max_concurrency=self.max_concurrency,
            messages=self.messages,
            limits=self.limits,
            approval_timeout=self.approval_timeout,
            budget=self.budget,
        )
        return RunPlan(
            agent,
            self.approver,
            max_steps=self.max_steps,
            tools=self.tool_names,
            options=self.run_options,
            timeout=self.timeout,
            retries=self.retries,
            retry_delay=self.retry_delay,
            output=self.output,
            keep_history=self.keep_history,
        )


def worker_spec(batch: DrivenBatch) -> WorkerSpec:
    """The spec of ``batch``'s runs; refuses a model that would carry a key."""
    plan = batch.plan
    agent = plan.agent
    generator: Generator | None = None
    if batch.model is None:
        generator = _travelling(agent.generator)
    return WorkerSpec(
        model=batch.model,
        generator=generator,
        tools=list(agent.tools.values()),
        instructions=agent.instructions,
        options=agent.options,
        limits=agent.limits,
        agent_max_steps=agent.max_steps,
        tool_timeout=agent.tool_timeout,
        max_concurrency=agent.max_concurrency,
        approval_timeout=agent.approval_timeout,
        messages=list(agent.messages) if plan.keep_history else [],
        approver=plan.approver,
        max_steps=plan.max_steps,
        tool_names=plan.tools,
        run_options=plan.options,
        timeout=plan.timeout,
        retries=plan.retries,
        retry_delay=plan.retry_delay,
        output=plan.output,
        keep_history=plan.keep_history,
        agent_class=type(agent),
        budget=getattr(agent, "budget", None),
    )


def _travelling(generator: Generator) -> Generator:
    """The agent's own model, fit to travel: no key, and without the requests it recorded."""
    import copy

    import cloudpickle

    if getattr(generator, "api_key", None) is not None or hasattr(generator, "_client"):
        raise BatchInputError(
            f"the agent's model ({type(generator).__name__}) talks to a provider, and neither "
            "its connection nor its key ever travels in a task: pass model='provider:name' (e.g. "
            "model='openai:gpt-4.1-mini'), and each worker builds the model from its own "
            "environment (set OPENAI_API_KEY … where the workers start)"
        )
    made = copy.copy(generator)
    if isinstance(getattr(made, "requests", None), list):
        made.requests = []  # type: ignore[attr-defined]  # an offline model's own record
    try:
        cloudpickle.dumps(made)
    except Exception as exc:
        raise BatchInputError(
            f"the agent's model ({type(generator).__name__}) cannot be sent to Dask workers: "
            f"{type(exc).__name__}: {exc}. Give the batch a model string (model='provider:"
            "name'), or a model whose functions use nothing bound to this process (a lock, "
            "an event, an open file)"
        ) from None
    return made


def worker_spec_bytes(batch: DrivenBatch) -> bytes:
    """The spec as the bytes sent to the workers (cloudpickle: notebook functions by value)."""
    import cloudpickle

    try:
        return bytes(cloudpickle.dumps(worker_spec(batch)))
    except BatchInputError:
        raise
    except Exception as exc:
        raise BatchInputError(
            f"the batch cannot be sent to Dask workers: {type(exc).__name__}: {exc} (a tool, "
            "the approver or the model holds something that does not pickle)"
        ) from None


# --- on a worker ------------------------------------------------------------------------------

_plans: OrderedDict[str, tuple[RunPlan, Gate]] = OrderedDict()
_plans_lock = threading.Lock()


def _plan_for(spec: bytes) -> tuple[RunPlan, Gate]:
    digest = hashlib.sha256(spec).hexdigest()
    with _plans_lock:
        found = _plans.get(digest)
        if found is not None:
            _plans.move_to_end(digest)
            return found
    import cloudpickle

    loaded: WorkerSpec = cloudpickle.loads(spec)
    made = (loaded.plan(), Gate())
    with _plans_lock:
        _plans[digest] = made
        while len(_plans) > _KEEP_PLANS:
            _plans.popitem(last=False)
    return made


async def run_remote(spec: bytes, item: Item, share: Budget | None = None) -> BatchRow:
    """The task: one input, run on the worker's event loop; with ``share`` (of the map's
    budget), in an account of its own whose spending the row brings back."""
    plan, gate = _plan_for(spec)
    if share is None:
        return await run_item(plan, item, gate)
    account = Account(share, label="this row's share of the map's budget")

    async def spending() -> BatchRow:
        spend_from(account)  # this task's context only: the row's run is started from it
        return await run_item(plan, item, gate)

    row = await asyncio.get_running_loop().create_task(spending())
    spent = (account.spent_requests, account.spent_tokens, account.spent_usd)
    return replace(row, spent=spent)


# --- on the client ----------------------------------------------------------------------------


async def run_on_dask(batch: DrivenBatch, todo: list[Item]) -> None:
    """Submit ``todo`` to the cluster, at most ``batch.concurrency`` in flight, and record each
    row as its task ends. Returns when every input has a row or the batch was stopped."""
    client = batch.engine
    if getattr(client, "asynchronous", False):
        raise BatchInputError(
            "engine= needs a synchronous dask.distributed.Client (Client(...) without "
            "asynchronous=True)"
        )
    spec = worker_spec_bytes(batch)
    loop = asyncio.get_running_loop()
    stop = threading.Event()
    state: dict[str, Any] = {"futures": {}}
    lock = threading.Lock()

    def on_stop() -> None:
        stop.set()
        with lock:
            futures = [f for f, _ in state["futures"].values()]
        if futures:  # Client.cancel waits for the scheduler: not on the event loop
            threading.Thread(target=_cancel, args=(client, futures), daemon=True).start()

    batch.on_stop(on_stop)
    if batch.stopping:
        return
    await asyncio.to_thread(_drive, batch, client, spec, todo, loop, stop, state, lock)


def _cancel(client: Any, futures: list[Any]) -> None:
    try:
        client.cancel(futures)
    except Exception:  # the cluster went away: the rows are reported as cancelled anyway
        pass


def _drive(
    batch: DrivenBatch,
    client: Any,
    spec: bytes,
    todo: list[Item],
    loop: asyncio.AbstractEventLoop,
    stop: threading.Event,
    state: dict[str, Any],
    lock: threading.Lock,
) -> None:
    from distributed import as_completed

    limit = batch.concurrency
    if batch.concurrency_default:
        limit = max(1, sum(client.nthreads().values()))
    pending = iter(todo)
    # with_results: each result is fetched on the client's own loop as its task ends, not by
    # one blocking call per task from this thread; an error or a cancel comes as the exception
    completed = as_completed(with_results=True, raise_errors=False)
    futures: dict[str, tuple[Any, Item]] = state["futures"]
    # this batch's own keys: Dask takes a task with a known key for the same task, so the same
    # batch run twice on one cluster (after a Stop, or from two notebooks) must not share them
    token = f"{hashlib.sha256(spec).hexdigest()[:12]}-{secrets.token_hex(4)}"

    def post(function: Any, *args: Any) -> None:
        loop.call_soon_threadsafe(function, *args)

    account = batch.account
    backlog: deque[Item] = deque()  # taken from ``pending`` but not submitted: no share yet
    shares: dict[str, Reservation] = {}

    def taken(count: int) -> list[tuple[Item, Budget | None]]:
        """Up to ``count`` inputs, each with its share of the map's budget (if it has one)."""
        out: list[tuple[Item, Budget | None]] = []
        while len(out) < count:
            item = backlog.popleft() if backlog else next(pending, None)
            if item is None:
                break
            given: Budget | None = None
            if account is not None:
                with lock:
                    flying = len(futures)
                got = account.share(limit - flying - len(out))
                if got is None:  # nothing to share until a row in flight settles
                    backlog.appendleft(item)
                    break
                given, held = got
                shares[_key(token, item)] = held
            out.append((item, given))
        return out

    def submit(count: int) -> None:
        """Submit up to ``count`` more inputs, one task each, in one message to the scheduler."""
        if stop.is_set():
            return
        chosen = taken(count)
        if not chosen:
            return
        items = [item for item, _ in chosen]
        # The spec goes with each task rather than scattered once: data scattered to workers
        # is lost when they die, and then every task needing it would be cancelled. At most
        # ``limit`` tasks exist at a time, so this costs little.
        light = [Item(i.position, None, i.key, i.prompt, i.problem) for i in items]
        made = client.map(
            run_remote,
            [spec] * len(light),
            light,
            [given for _, given in chosen],
            key=[_key(token, i) for i in items],
            pure=False,
        )
        with lock:
            for future, item in zip(made, items, strict=True):
                futures[future.key] = (future, item)
        post(batch.running, len(items))
        completed.update(made)

    def record(rows: list[BatchRow]) -> None:
        batch.running(-len(rows))
        for row in rows:
            batch.record(row)

    submit(limit)
    with lock:
        started = bool(futures)
    for finished in completed.batches() if started else ():
        rows = []
        for future, result in finished:
            with lock:
                _, item = futures.pop(future.key)
            row = _row_of(future, item, result, stop.is_set())
            held = shares.pop(future.key, None)
            if held is not None:  # the share settles with what the row spent, or all of it
                if row.spent is not None:
                    requests, tokens, usd = row.spent
                    held.settle(tokens, usd, requests)
                else:
                    held.settle_whole()
            rows.append(row)
        post(record, rows)
        submit(len(rows))  # as many new tasks as ended: never more than ``limit`` in flight
        with lock:
            if not futures:
                break
    if account is not None and not stop.is_set():
        # what is left is too little for one more row: the rest never ran, and say why
        why = account.refusal() or (
            "the map's budget has too little left to give another row a share of it"
        )
        rest = [not_run(item, why, status="not run") for item in (*backlog, *pending)]
        for row in rest:  # never counted as running
            post(batch.record, row)


def _key(token: str, item: Item) -> str:
    return f"nbagent-run-{token}-{item.position}"


def _row_of(future: Any, item: Item, result: Any, stopping: bool) -> BatchRow:
    """The row of ``item`` from its task's ``result`` (its row, or the exception it ended
    with)."""
    if future.status == "cancelled":
        if stopping:
            return BatchRow(item.position, item.key, item.prompt, "cancelled", error="stopped")
        return BatchRow(
            item.position,
            item.key,
            item.prompt,
            "failed",
            error="the Dask cluster cancelled the task (a worker or the scheduler went away)",
        )
    if future.status == "error" or isinstance(result, BaseException):
        # Dask hands an error over as (type, exception, traceback)
        exc = result[1] if isinstance(result, tuple) and len(result) == 3 else result
        if not isinstance(exc, BaseException):  # pragma: no cover - another Dask's shape
            exc = future.exception()
        name = type(exc).__name__
        if name == "KilledWorker":
            why = (
                "the Dask worker running it died, and so did the workers it was retried on "
                "(Dask counts a death against every task the worker held, so another run on "
                "the same worker may have been the cause; running the batch again retries "
                f"only the failed rows) ({describe_error(exc)})"
            )
        else:
            why = describe_error(exc) or "the task failed"
        return BatchRow(item.position, item.key, item.prompt, "failed", error=why)
    if isinstance(result, BatchRow) and result.position == item.position:
        return result
    why = f"the task gave back no row for it: {type(result).__name__}"
    return BatchRow(item.position, item.key, item.prompt, "failed", error=why)
