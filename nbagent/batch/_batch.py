"""A batch in progress: many runs of one agent, a bounded number at a time, one row each.

:class:`Batch` checks everything before the first run (inputs, template, approver, output
schema, checkpoint), then runs the inputs that are not done yet on the chosen engine: here,
``concurrency`` runs at a time on the running event loop; or on a Dask cluster
(:mod:`._dask`). Each finished row is kept, written to the checkpoint and counted at once;
progress goes to the reporter at most every ``interval`` seconds. :meth:`Batch.cancel` (the
Stop button) lets no new run start and cancels those in flight; every row already finished
stays, and :meth:`Batch.result` returns the table with the others marked "cancelled" or
"not run". A cancel of whoever awaits :meth:`Batch.result` (a kernel interrupt) stops the batch
the same way and is passed on once the runs wound down.
"""

from __future__ import annotations

import asyncio
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .._ground.extras import missing
from .._ground.spending import Account, spend_from, spending_account
from ..approvals.approval import Approver, InteractiveApprover, approval_policy
from ..approvals.rules import RuleApprover
from ..errors import BatchInputError
from ..limits import Budget
from ..output._spec import ANSWER_TOOL, OutputSpec, output_spec
from ._checkpoint import CheckpointWriter, UnwritableRowError, load_checkpoint
from ._fingerprint import Fingerprint, differences, fingerprint
from ._inputs import MAX_INPUTS, Item, prepare
from ._progress import BatchProgress, Reporter, default_reporter
from ._rows import BatchRow, describe_error, done_rows_of_table, make_table, not_run, ordered
from ._run import Gate, MappedAgent, RunPlan, run_item

if TYPE_CHECKING:
    from ..generation import Options

__all__ = ["DEFAULT_CONCURRENCY", "Batch", "check_approver"]

#: Runs at once by default: enough to hide a remote model's latency, few enough that one
#: notebook does not trip a provider's per-minute limits at once.
DEFAULT_CONCURRENCY = 8
#: Seconds between two progress reports (a notebook view redraws at most this often).
INTERVAL = 0.25
#: After a stop, how long the batch waits for cancelled runs to wind down.
STOP_WAIT = 10.0
#: Where a results table keeps the configuration its answers came from (``DataFrame.attrs``).
TABLE_ATTR = "nbagent.batch.configuration"

_HOW = (
    "pass approver='auto' (calls that need approval run), 'deny' (they are refused, the model "
    "reads why) or a RuleApprover with a rule per tool"
)


def check_approver(approver: Approver | str | None, agent: MappedAgent) -> Approver:
    """The batch's approver; refuses one that would wait for a person."""
    if isinstance(approver, str):
        if approver.strip().lower() == "ask":
            raise BatchInputError(
                f"approver='ask' makes no sense for a batch: nobody can click for hundreds of "
                f"runs; {_HOW}"
            )
        approver = approval_policy(approver)
    chosen = approver if approver is not None else agent.approver
    seen: Approver | None = chosen
    while seen is not None:
        if isinstance(seen, InteractiveApprover):
            where = "this agent's approver" if approver is None else "the approver"
            raise BatchInputError(
                f"{where} asks a person (buttons), which makes no sense for a batch of runs "
                f"with nobody to click; {_HOW}"
            )
        seen = seen.fallback if isinstance(seen, RuleApprover) else None
    return chosen


def _is_dask_client(engine: Any) -> bool:
    return any(
        cls.__module__.startswith("distributed") and cls.__name__ == "Client"
        for cls in type(engine).__mro__
    )


class Batch:
    """Many runs of one agent; see :meth:`nbagent.Agent.map` for every argument."""

    def __init__(
        self,
        agent: MappedAgent,
        inputs: Any,
        template: str | None = None,
        *,
        concurrency: int | None = None,
        max_steps: int | None = None,
        timeout: float | None = None,
        approver: Approver | str | None = None,
        output: Any = None,
        checkpoint: str | Any = None,
        resume: Any = None,
        engine: Any = None,
        model: str | None = None,
        retries: int = 3,
        retry_delay: float = 2.0,
        progress: Reporter | str | None = "auto",
        tools: Iterable[str] | None = None,
        options: Options | None = None,
        keep_history: bool = False,
        interval: float = INTERVAL,
        max_inputs: int = MAX_INPUTS,
        budget: Budget | None = None,
    ) -> None:
        self.concurrency_default = concurrency is None
        if concurrency is None:
            concurrency = DEFAULT_CONCURRENCY
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise BatchInputError(f"concurrency must be a positive integer, not {concurrency!r}")
        if timeout is not None and not timeout > 0:
            raise BatchInputError("timeout must be a positive number of seconds, or None")
        if max_steps is not None and max_steps < 1:
            raise BatchInputError("max_steps must be at least 1")
        if retries < 0 or retry_delay < 0:
            raise BatchInputError("retries and retry_delay must not be negative")
        if engine is not None and not _is_dask_client(engine):
            raise BatchInputError(
                f"engine= takes a dask.distributed.Client (or None to run here), not "
                f"{type(engine).__name__}"
            )
        if budget is not None and not isinstance(budget, Budget):
            raise BatchInputError(f"budget= takes a nbagent.Budget, not {type(budget).__name__}")
        lacking = missing("dask", "Agent.map(engine=...)") if engine is not None else None
        if lacking is not None:  # what the tasks travel with (cloudpickle) is part of it
            raise BatchInputError(lacking)
        self.items, self.index = prepare(inputs, template, max_inputs=max_inputs)
        #: What the whole map may spend, every row and its helpers together (the agent's own
        #: budget still bounds each row's run): one account, made as the batch starts.
        self.budget = budget
        self.account: Account | None = None
        self.concurrency = concurrency
        self.engine = engine
        self.interval = interval
        self.notes: list[str] = []
        approver = check_approver(approver, agent)
        spec: OutputSpec | None = (
            output_spec(output, error=BatchInputError) if output is not None else None
        )
        tool_names = list(tools) if tools is not None else None
        self.plan = RunPlan(
            self._prepared_agent(agent, spec, model if engine is None else None, tool_names),
            approver,
            max_steps=max_steps,
            tools=tool_names,
            options=options,
            timeout=timeout,
            retries=retries,
            retry_delay=retry_delay,
            output=spec,
            keep_history=keep_history,
        )
        self.model = model
        self.fingerprint: Fingerprint = fingerprint(self.plan, model)
        if isinstance(progress, str) and progress != "auto":
            raise BatchInputError(f"progress= takes 'auto', None or a callable, not {progress!r}")
        self.rows: list[BatchRow | None] = [None] * len(self.items)
        self._resume(resume, checkpoint, spec)
        self._writer = (
            CheckpointWriter(checkpoint, self.fingerprint) if checkpoint is not None else None
        )
        self._lock = threading.Lock()
        self._stopping = False
        self._running = 0
        self._counts = {"done": 0, "failed": 0, "cancelled": 0, "not run": 0}
        self._tokens = 0
        self._started = 0.0
        self._ended: float | None = None
        self._task: asyncio.Task[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._gate = Gate()
        self._on_stop: list[Callable[[], Any]] = []
        # last, once nothing can fail any more: a view shown now belongs to a batch that runs
        self._reporter: Reporter | None = (
            default_reporter() if isinstance(progress, str) else progress
        )
        bind = getattr(self._reporter, "bind", None)
        if callable(bind):  # a view that offers Stop, or lists failed rows at the end
            bind(self)

    # --- before the first run ---------------------------------------------------------------

    @staticmethod
    def _prepared_agent(
        agent: MappedAgent, spec: OutputSpec | None, model: str | None, tools: list[str] | None
    ) -> MappedAgent:
        """A fork of the caller's agent with the batch's model (never the caller's own object:
        its conversation and tools stay as they were; each typed run adds its own answer tool).
        On Dask the model string is resolved by each worker, in its own environment, not here."""
        prepared = agent.fork()
        if model is not None:
            from ..providers import resolve_generator

            prepared.generator = resolve_generator(model)
        if tools is not None:
            unknown = [n for n in tools if n not in prepared.tools]
            if unknown:
                raise BatchInputError(
                    f"unknown tools {unknown}; registered: {sorted(prepared.tools)}"
                )
        if spec is not None and ANSWER_TOOL in prepared.tools:
            raise BatchInputError(
                f"the agent has a tool named {ANSWER_TOOL!r}, which a structured output "
                "needs for itself: rename the tool"
            )
        return prepared

    def _resume(self, table: Any, checkpoint: Any, spec: OutputSpec | None) -> None:
        """Take over the done rows answered under this batch's configuration, for the same
        input and prompt; say why the others run again."""
        known: dict[tuple[str, str], BatchRow] = {}
        elsewhere: dict[tuple[str, str], str] = {}
        described: dict[str, dict[str, Any]] = {}
        legacy: set[tuple[str, str]] = set()
        if table is not None:
            rows = done_rows_of_table(table)
            earlier = _table_configuration(table)
            if earlier is None or earlier.get("id") == self.fingerprint.id:
                known.update(((row.key, row.digest), row) for row in rows)
            else:
                described[earlier["id"]] = earlier
                elsewhere.update(((row.key, row.digest), earlier["id"]) for row in rows)
        if checkpoint is not None:
            loaded = load_checkpoint(
                checkpoint, spec.decode if spec is not None else None, config=self.fingerprint.id
            )
            if loaded.damaged:
                self._note(
                    f"{loaded.damaged} damaged line(s) of the checkpoint {checkpoint} were "
                    "skipped (a crash mid-write); their rows run again"
                )
            known.update(loaded.rows)
            elsewhere.update(loaded.elsewhere)
            described.update(loaded.configurations)
            legacy = loaded.legacy
        other: Counter[str] = Counter()
        without_output = used_legacy = 0
        for item in self.items:
            key = (item.key, item.digest)
            earlier_row = known.get(key)
            if earlier_row is not None and earlier_row.status == "done":
                if spec is not None and not earlier_row.has_output:
                    without_output += 1  # answered when no output was asked for
                    continue
                self.rows[item.position] = earlier_row.at(item)
                used_legacy += key in legacy
            elif key in elsewhere:
                other[elsewhere[key]] += 1
        where = f"the checkpoint {checkpoint}" if checkpoint is not None else "the results table"
        for config, count in other.most_common(3):
            what = "; ".join(differences(described.get(config), self.fingerprint.parts))
            self._note(
                f"{where} holds {count} done row(s) of these inputs answered under another "
                f"configuration (changed: {what}): they run again"
                + (", and the file keeps the earlier answers" if checkpoint is not None else "")
            )
        if without_output:
            self._note(
                f"{where} holds {without_output} done row(s) without the structured output "
                "output= asks for: they run again"
            )
        if used_legacy:
            self._note(
                f"the checkpoint {checkpoint} was written by an older nbagent, which did not "
                f"record what its answers depend on (model, instructions, tools, output): "
                f"{used_legacy} done row(s) are taken from it as they are. If any of those "
                "changed since, use another checkpoint path (or delete the file) to run them "
                "again"
            )

    def _note(self, note: str) -> None:
        self.notes.append(note)
        warnings.warn(note, stacklevel=4)

    @property
    def pending(self) -> list[Item]:
        """Inputs that have no row yet (not done before, not finished in this batch)."""
        return [item for item in self.items if self.rows[item.position] is None]

    # --- state ------------------------------------------------------------------------------

    def progress(self, *, final: bool = False) -> BatchProgress:
        """Where the batch is now."""
        with self._lock:
            resumed = sum(1 for r in self.rows if r is not None and r.resumed)
            end = self._ended if self._ended is not None else time.monotonic()
            return BatchProgress(
                total=len(self.items),
                done=self._counts["done"],
                failed=self._counts["failed"],
                running=self._running,
                resumed=resumed,
                cancelled=self._counts["cancelled"],
                not_run=self._counts["not run"],
                tokens=self._tokens,
                elapsed=(end - self._started) if self._started else 0.0,
                stopping=self._stopping,
                final=final,
                rate_limited=self._gate.pauses,
                engine="dask" if self.engine is not None else "local",
            )

    def table(self) -> Any:
        """The results table as it stands: rows not finished yet show as "not run"."""
        with self._lock:
            rows = [
                row if row is not None else not_run(item)
                for item, row in zip(self.items, self.rows, strict=True)
            ]
        frame = make_table(ordered(rows, len(rows)), self.index, with_output=self._with_output)
        # what the answers depend on, so that resume= this table can tell a changed batch
        frame.attrs[TABLE_ATTR] = self.fingerprint.to_json()
        return frame

    @property
    def _with_output(self) -> bool:
        return self.plan.output is not None

    @property
    def stopping(self) -> bool:
        return self._stopping

    # --- control ----------------------------------------------------------------------------

    def on_stop(self, callback: Callable[[], Any]) -> None:
        """Call ``callback`` (from the batch's loop) when the batch is asked to stop."""
        self._on_stop.append(callback)

    def cancel(self) -> bool:
        """Stop: no new run starts, runs in flight are cancelled, finished rows stay.

        Safe from any thread (a button's click handler) and after the end; False if the batch
        already ended."""
        loop, task = self._loop, self._task
        if task is None or loop is None or task.done():
            self._stopping = self._task is None or self._stopping
            return False
        try:
            loop.call_soon_threadsafe(self._stop_now)
        except RuntimeError:  # the loop closed: the batch is over
            return False
        return True

    def _stop_now(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        for callback in list(self._on_stop):
            try:
                callback()
            except Exception as exc:  # a stop hook must not keep the batch running
                self.notes.append(f"stopping: {type(exc).__name__}: {exc}")

    # --- running ----------------------------------------------------------------------------

    def start(self) -> Batch:
        """Start on the running event loop (called by :meth:`result` if need be)."""
        if self._task is None:
            self._loop = asyncio.get_running_loop()
            self._task = self._loop.create_task(self._main(), name="nbagent-batch")
        return self

    async def result(self) -> Any:
        """Wait for the end and return the results table (see :meth:`nbagent.Agent.map`)."""
        task = self.start()._task
        assert task is not None
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                self._stop_now()
                await asyncio.wait({task}, timeout=STOP_WAIT)
            raise
        task.result()  # a bug in the batch itself surfaces here, never silently
        return self.table()

    def record(self, row: BatchRow) -> None:
        """Keep a finished row: checkpoint it, count it (engines call this on the loop).
        Never raises: a row the checkpoint cannot hold becomes a failed row, the rest go on."""
        with self._lock:
            if self.rows[row.position] is not None:
                return  # a retried task that came back twice: the first row counts
        row = self._checkpointed(row)
        with self._lock:
            self.rows[row.position] = row
            self._counts[row.status] += 1
            self._tokens += row.tokens

    def _checkpointed(self, row: BatchRow) -> BatchRow:
        """``row`` once written to the checkpoint; a failed row saying why when it cannot be."""
        writer = self._writer
        if writer is None:
            return row
        try:
            writer.write(row)
        except OSError as exc:
            self._note(f"the checkpoint could not be written ({exc}); it is no longer updated")
            self._close_writer()
            return row
        except Exception as exc:  # UnwritableRowError, or anything a strange value raised
            why = exc if isinstance(exc, UnwritableRowError) else describe_error(exc)
            error = (
                f"the checkpoint cannot hold this row ({why}), so it was not kept there; it "
                "runs again when the batch is resumed"
            )
            if row.error:
                error = f"{row.error}; {error}"
            failed = replace(row, status="failed", error=error)
            try:  # the line says what happened; every field of this one is plain text
                writer.write(BatchRow(row.position, row.key, row.prompt, "failed", error=error))
            except Exception:  # pragma: no cover - plain text always goes (OSError aside)
                pass
            return failed
        return row

    def running(self, delta: int) -> None:
        with self._lock:
            self._running += delta

    async def _main(self) -> None:
        self._started = time.monotonic()
        ambient = spending_account()  # a map inside a run's tool spends from that run's too
        if self.budget is not None:
            self.account = Account(self.budget, ambient, label="the map's budget")
        else:
            self.account = ambient
        spend_from(self.account)  # this task's: every row's run is started from it
        reporter = asyncio.ensure_future(self._report())
        try:
            todo = self.pending
            if todo:
                if self.engine is not None:
                    from ._dask import run_on_dask

                    await run_on_dask(self, todo)
                else:
                    await self._run_here(todo)
        finally:
            self._ended = time.monotonic()
            reporter.cancel()
            for item in self.items:  # whatever never got a row did not run
                if self.rows[item.position] is None:
                    self.record(not_run(item))
            self._close_writer()
            self._report_now(final=True)

    async def _run_here(self, todo: list[Item]) -> None:
        queue = iter(todo)
        workers: set[asyncio.Task[None]] = set()

        async def worker() -> None:
            for item in queue:
                if self._stopping:
                    return
                spent = self.account.refusal() if self.account is not None else None
                if spent is not None:  # every later row would stop before its first request
                    self.record(not_run(item, spent, status="not run"))
                    continue
                self.running(1)
                try:
                    row = await run_item(self.plan, item, self._gate)
                except asyncio.CancelledError:
                    row = BatchRow(
                        item.position, item.key, item.prompt, "cancelled", error="stopped"
                    )
                finally:
                    self.running(-1)
                self.record(row)

        for _ in range(min(self.concurrency, len(todo))):
            workers.add(asyncio.ensure_future(worker()))

        def stop_workers() -> None:
            for task in workers:
                task.cancel()

        self.on_stop(stop_workers)
        try:
            await asyncio.gather(*workers)
        except asyncio.CancelledError:
            stop_workers()
            await asyncio.wait(workers, timeout=STOP_WAIT)
            raise

    def _close_writer(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()

    # --- progress ---------------------------------------------------------------------------

    async def _report(self) -> None:
        last: BatchProgress | None = None
        while True:
            snapshot = self.progress()
            if last is None or _changed(last, snapshot):
                self._deliver(snapshot)
                last = snapshot
            await asyncio.sleep(self.interval)

    def _report_now(self, *, final: bool) -> None:
        self._deliver(self.progress(final=final))

    def _deliver(self, snapshot: BatchProgress) -> None:
        if self._reporter is None:
            return
        try:
            self._reporter(snapshot)
        except Exception as exc:  # a broken view must not stop the batch; say so once
            self.notes.append(f"the progress view failed: {type(exc).__name__}: {exc}")
            warnings.warn(self.notes[-1], stacklevel=2)
            self._reporter = None


def _table_configuration(table: Any) -> dict[str, Any] | None:
    """The configuration an earlier results table was made under (None: not known)."""
    attrs = getattr(table, "attrs", None)
    found = attrs.get(TABLE_ATTR) if isinstance(attrs, dict) else None
    return found if isinstance(found, dict) and isinstance(found.get("id"), str) else None


def _changed(a: BatchProgress, b: BatchProgress) -> bool:
    return (a.done, a.failed, a.running, a.cancelled, a.not_run, a.stopping, a.tokens) != (
        b.done,
        b.failed,
        b.running,
        b.cancelled,
        b.not_run,
        b.stopping,
        b.tokens,
    ) or int(a.elapsed) != int(b.elapsed)
