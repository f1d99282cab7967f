"""The notebook tools: read the notebook, propose edits the person reviews per cell, run a cell.

:class:`NotebookToolkit` is a list of tools over a :class:`~.protocol.Document`:

* ``read_notebook`` and ``read_cell`` read (no approval): the cells by id, type, source and a
  bounded summary of their outputs and errors, secrets hidden; which cell the person is in and
  where the newest error is;
* ``insert_cell``, ``edit_cell``, ``delete_cell`` and ``move_cell`` are **proposals**: each
  asks for approval (the card shows the per-cell diff), and only an accepted one lands, in the
  live document; ``run_cell`` runs a code cell's source through the kernel toolkit (its
  namespace diff and undo are ``run_python``'s), asks first, and puts the outputs in the cell.

A proposal is made against what the model was shown of the cell: if the person changed the
cell since, it is not applied (the person's edit wins) and both the model and the card say so,
with the diff against the cell as it is now. :meth:`NotebookToolkit.undo` takes back a run's
accepted edits as one step, with the same promise. :meth:`NotebookToolkit.attach` lets the
toolkit hear an agent's runs (who accepted each proposal, for the cell's record; the bound on
proposals per run); the notebook's ``%agent --notebook`` attaches it.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from ..content import Shown, TextPart, ToolResult, error_result
from ..tools import NeedsApproval, Tool, ToolContext, ToolSequence
from . import _proposals
from ._descriptions import DESCRIPTIONS, SCHEMAS, TITLES
from ._proposals import Plan, Refusal
from ._results import landed, not_applied
from .cells import Snapshot
from .changes import Applied, Change, EditCell, InsertCell, SetOutputs, StampCell, inverse
from .journal import Edited, EditJournal, NotebookUndoReport, describe_change, undo_said
from .limits import NotebookLimits
from .protocol import Document, NotebookUnavailableError
from .reading import Seen, overview, whole_cell
from .record import KEY, Accepted, EditEntry, add_entry, source_digest

__all__ = ["PROPOSALS", "NotebookToolkit", "Runner", "notebook_tools"]

#: The tools that change the notebook (each a proposal the person accepts or rejects).
PROPOSALS = ("insert_cell", "edit_cell", "delete_cell", "move_cell", "run_cell")
_KINDS: dict[str, _proposals.Kind] = {
    "insert_cell": "insert",
    "edit_cell": "edit",
    "delete_cell": "delete",
    "move_cell": "move",
    "run_cell": "run",
}
#: Calls remembered for who decided them and which run made them.
_KEEP_CALLS = 2_000


class Runner(Protocol):
    """Runs a cell's source as a journaled snippet (the kernel toolkit's ``run_code``)."""

    def __call__(
        self,
        context: ToolContext,
        code: str,
        purpose: str = "",
        *,
        cell_outputs: list[dict[str, Any]] | None = None,
    ) -> Awaitable[ToolResult]: ...


def _key(arguments: Any) -> str:
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)


class NotebookToolkit(ToolSequence):
    """The notebook tools over ``document`` (see the module). Pass it where tools go.

    ``document``: the notebook (a :class:`~.protocol.Document`; :meth:`use` changes it).
    ``approval``: ``needs_approval`` of the proposals (True; a function of the input may
    decide per call, and rules apply as for any tool). ``runner``: what ``run_cell`` runs a
    cell's source with (the kernel toolkit's ``run_code``); without one there is no
    ``run_cell``. ``protected``: the id of a cell the tools never change (the run's own).
    """

    def __init__(
        self,
        document: Document,
        *,
        approval: NeedsApproval = True,
        limits: NotebookLimits | None = None,
        runner: Runner | None = None,
    ) -> None:
        self.document = document
        self.limits = limits or NotebookLimits()
        self.approval = approval
        self.runner = runner
        self.journal = EditJournal(self.limits)
        self.protected: str | None = None
        #: A front end said once what ``--approve auto`` means for these tools.
        self.warned_auto = False
        self._seen: OrderedDict[tuple[int, str], Seen] = OrderedDict()
        self._refused: dict[str, str] = {}
        # what the model had been shown of a proposal's cell when it was made (gated), by its
        # arguments, oldest first: another run's read meanwhile must not move what it expects
        self._against: OrderedDict[str, list[Seen]] = OrderedDict()
        self._decided: OrderedDict[str, str] = OrderedDict()  # call id -> Decision.by
        self._run_of: OrderedDict[str, str] = OrderedDict()  # call id -> run id
        self._asked = 0  # proposals asked since the newest run started
        self._made: dict[str | None, int] = {}  # proposals applied or tried, per run
        self._shown_code: dict[tuple[int, str], str] = {}  # run_cell: the code the card showed
        self._tools = self._make_tools()

    def _make_tools(self) -> tuple[Tool, ...]:
        made = []
        for name in ("read_notebook", "read_cell", *PROPOSALS):
            if name == "run_cell" and self.runner is None:
                continue
            proposal = name in PROPOSALS
            made.append(
                Tool(
                    name=name,
                    title=TITLES[name],
                    description=DESCRIPTIONS[name],
                    input_schema=SCHEMAS[name](self.limits),
                    execute=self._executor(name),
                    needs_approval=self._gate(name) if proposal else False,
                    preview=self._previewer(name) if proposal else None,
                    execution_mode="sequential" if proposal else "concurrent",
                    provider_options={"mcp": {"annotations": _HINTS[name]}},
                    # the proposed source shows as code while the model writes it
                    code_arguments={"source": "python"} if name in _WRITES else {},
                )
            )
        return tuple(made)

    # --- a list of tools ------------------------------------------------------------------

    def __repr__(self) -> str:
        return f"<NotebookToolkit on {self.document.name}: {', '.join(self.names)}>"

    def use(self, document: Document, *, protected: str | None = None) -> None:
        """Work on ``document`` from now on (what was read of another one is kept apart);
        ``protected``: the id of the cell the run is in, which the tools never change."""
        self.document = document
        self.protected = protected

    # --- hearing the agent ------------------------------------------------------------------

    def attach(self, agent: Any) -> Callable[[], None]:
        """Hear ``agent``'s runs (an :class:`~nbagent.agent.Agent`): who accepted each
        proposal, and where a run starts (the bound on proposals per run). Returns what
        detaches it."""
        stop: Callable[[], None] = agent.observe(self._heard)
        return stop

    def _heard(self, run_id: str, event: Any) -> None:
        kind = type(event).__name__
        if kind == "RunStarted":
            self._asked = 0
        elif kind == "ToolCallReady" and event.call.name in PROPOSALS:
            self._remember(self._run_of, event.call.id, run_id)
        elif kind == "ApprovalResolved":
            self._remember(self._decided, event.call_id, str(event.decision.by or ""))

    @staticmethod
    def _remember(store: OrderedDict[str, str], key: str, value: str) -> None:
        store[key] = value
        while len(store) > _KEEP_CALLS:
            store.popitem(last=False)

    def _accepted(self, context: ToolContext) -> Accepted:
        by = self._decided.get(context.call.id)
        if by is None:
            return "without asking" if self.approval is False else "as proposed"
        if by == "rule":
            return "by a rule"
        if by in ("auto", "always", "script"):
            return "by policy"
        try:
            proposed = context.call.input
        except Exception:  # the model's raw arguments do not parse: what ran is the edit
            proposed = None
        return "edited" if proposed != context.input else "as proposed"

    # --- what the model was shown ---------------------------------------------------------

    def _doc(self) -> int:
        return id(self.document)

    def seen(self, cell_id: str) -> Seen | None:
        """What the model was shown of a cell of the current document (None: nothing)."""
        return self._seen.get((self._doc(), cell_id))

    def _saw(self, found: Mapping[str, Seen]) -> None:
        doc = self._doc()
        for cell_id, saw in found.items():
            key = (doc, cell_id)
            self._seen.pop(key, None)
            self._seen[key] = saw
        while len(self._seen) > self.limits.max_cells * 2:
            self._seen.popitem(last=False)

    def _seen_here(self) -> dict[str, Seen]:
        doc = self._doc()
        return {cell: saw for (d, cell), saw in self._seen.items() if d == doc}

    async def _read(self, ids: Sequence[str] | None) -> Snapshot:
        return await self.document.read(ids, self.limits)

    # --- reading --------------------------------------------------------------------------

    def _executor(self, name: str) -> Callable[[ToolContext], Awaitable[ToolResult]]:
        async def execute(context: ToolContext) -> ToolResult:
            try:
                if name == "read_notebook":
                    return await self._read_notebook(context)
                if name == "read_cell":
                    return await self._read_cell(context)
                return await self._propose(name, context)
            except NotebookUnavailableError as exc:
                return error_result(str(exc))

        execute.__name__ = name
        return execute

    async def _read_notebook(self, context: ToolContext) -> ToolResult:
        start = int(context.input.get("start") or 1)
        snapshot = await self._read(None)
        text, found = overview(snapshot, self.limits, start)
        self._saw(found)
        return ToolResult((TextPart(text),), value=(Shown("text", text, "What the agent read"),))

    async def _read_cell(self, context: ToolContext) -> ToolResult:
        cell_id = str(context.input["cell_id"])
        snapshot = await self._read([cell_id])
        cell = snapshot.find(cell_id)
        if cell is None:
            return error_result(
                f"There is no cell {cell_id} in this notebook (read_notebook lists the cells "
                "and their ids)."
            )
        text, saw = whole_cell(snapshot, cell, self.limits)
        self._saw({cell_id: saw})
        return ToolResult((TextPart(text),), value=(Shown("text", text, "What the agent read"),))

    # --- proposals --------------------------------------------------------------------------

    async def _plan(
        self, name: str, arguments: Mapping[str, Any], call_id: str, against: Seen | None = None
    ) -> Plan:
        """Check a proposal against the notebook now and what the model was shown of its cell
        (``against``: what it had been shown when the proposal was made)."""
        ids = [
            arguments[k] for k in ("cell_id", "after_cell_id", "before_cell_id") if arguments.get(k)
        ]
        snapshot = await self._read([str(i) for i in ids] if ids else [])
        seen = self._seen_here()
        if against is not None and isinstance(arguments.get("cell_id"), str):
            seen[arguments["cell_id"]] = against
        return _proposals.plan(
            _KINDS[name],
            arguments,
            snapshot,
            seen,
            call_id=call_id,
            protected=self.protected,
        )

    def _made_against(self, key: str, arguments: Mapping[str, Any]) -> None:
        """Keep what the model had been shown of the proposal's cell, now that it is made."""
        cell_id = arguments.get("cell_id")
        saw = self.seen(cell_id) if isinstance(cell_id, str) else None
        if saw is None:
            return
        self._against.setdefault(key, []).append(saw)
        self._against.move_to_end(key)
        while len(self._against) > _KEEP_CALLS:
            self._against.popitem(last=False)

    def _proposed_against(self, name: str, context: ToolContext) -> Seen | None:
        """What the model had been shown of the cell when it made this proposal (the person
        may have edited its arguments since: the model's own are the key)."""
        try:
            proposed = context.call.input
        except Exception:  # the model's raw arguments do not parse: none was kept for them
            return None
        key = _key([name, proposed])
        kept = self._against.get(key)
        if not kept:
            return None
        saw = kept.pop(0)
        if not kept:
            del self._against[key]
        return saw

    def _gate(self, name: str) -> Callable[[Mapping[str, Any]], Awaitable[bool]]:
        """``needs_approval`` of a proposal: a proposal that cannot be made (or one past the
        run's bound) asks nobody; its call then refuses it, saying why."""

        async def needs_approval(arguments: Mapping[str, Any]) -> bool:
            key = _key([name, arguments])
            if self._asked >= self.limits.max_proposals:
                self._refused[key] = self._too_many()
                return False
            try:
                await self._plan(name, arguments, "")
            except (Refusal, NotebookUnavailableError) as exc:
                self._refused[key] = str(exc)
                while len(self._refused) > _KEEP_CALLS:
                    self._refused.pop(next(iter(self._refused)))
                return False
            self._refused.pop(key, None)  # one left by a call that never ran
            self._made_against(key, arguments)
            self._asked += 1
            rule = self.approval
            if isinstance(rule, bool):
                return rule
            verdict = rule(arguments)
            if hasattr(verdict, "__await__"):
                verdict = await verdict
            return bool(verdict)

        return needs_approval

    def _too_many(self) -> str:
        return (
            f"This run made {self.limits.max_proposals} proposals, the most one run may make "
            "(NotebookLimits.max_proposals): this one was not shown to the person. Finish, and "
            "let the person ask again."
        )

    def _previewer(self, name: str) -> Callable[[Mapping[str, Any]], Awaitable[ToolResult]]:
        async def preview(arguments: Mapping[str, Any]) -> ToolResult:
            try:
                found = await self._plan(name, arguments, "")
            except (Refusal, NotebookUnavailableError) as exc:
                return error_result(str(exc))
            if found.kind == "run" and found.cell is not None:
                self._shown_code[(self._doc(), found.cell.id)] = found.cell.source
            return _proposals.preview(found)

        return preview

    async def _propose(self, name: str, context: ToolContext) -> ToolResult:
        refused = self._refused.pop(_key([name, context.input]), None)
        if refused is not None:
            return error_result(refused)
        run_id = context.run_id
        made = self._made.get(run_id, 0)
        if made >= self.limits.max_proposals:
            return error_result(self._too_many())
        self._made[run_id] = made + 1
        while len(self._made) > self.limits.max_runs:
            self._made.pop(next(iter(self._made)))
        against = self._proposed_against(name, context)
        try:
            found = await self._plan(name, context.input, context.call.id, against)
        except Refusal as exc:
            return error_result(str(exc))
        if found.kind == "run":
            return await self._run(context, found)
        assert found.change is not None
        return await self._land(context, found, found.change)

    async def _land(self, context: ToolContext, found: Plan, change: Change) -> ToolResult:
        accepted = self._accepted(context)
        if isinstance(change, InsertCell):
            entry = self._entry("inserted", context, accepted, change.source)
            change = InsertCell(
                change.cell_id,
                change.cell_type,
                change.source,
                change.after,
                change.before,
                metadata={KEY: add_entry(None, entry)},
            )
        [applied] = await self.document.apply([change], self.limits)
        if not applied.ok:
            return self._not_applied(found, change, applied)
        where = self._where(found, applied)
        self._keep(context, change, applied, describe_change(change, where))
        if isinstance(change, EditCell):
            entry = self._entry("edited", context, accepted, change.source)
            await self._stamp(change.cell_id, entry)
            kind = change.cell_type or (found.cell.type if found.cell else "code")
            self._saw({change.cell_id: Seen(change.source, True, False, kind)})
        elif isinstance(change, InsertCell) and applied.cell_id:
            self._saw({applied.cell_id: Seen(change.source, True, False, change.cell_type)})
        elif found.kind == "delete" and found.cell is not None:
            self._seen.pop((self._doc(), found.cell.id), None)
        elif found.kind == "move" and found.cell is not None:
            entry = self._entry("moved", context, accepted, found.cell.source)
            await self._stamp(found.cell.id, entry)
        return self._landed(found, accepted, where, context, applied)

    def _entry(
        self, action: Any, context: ToolContext, accepted: Accepted, source: str
    ) -> EditEntry:
        return EditEntry(
            action,
            context.run_id,
            context.call.id,
            context.tool.name,
            accepted,
            source_digest(source),
        )

    async def _stamp(self, cell_id: str, entry: EditEntry) -> None:
        """Add ``entry`` to the cell's record (outside the undo history): a record that cannot
        be written costs the edit nothing, it already landed."""
        try:
            snapshot = await self._read([cell_id])
            cell = snapshot.find(cell_id)
            existing = cell.record if cell is not None else None
            stamp = StampCell(cell_id, KEY, add_entry(existing, entry))
            await self.document.apply([stamp], self.limits)
        except NotebookUnavailableError:
            return

    def _where(self, found: Plan, applied: Applied) -> str:
        number = applied.index
        cell_id = applied.cell_id or found.cell_id
        return f"cell {number} (id {cell_id})" if number else f"cell {cell_id}"

    def _keep(self, context: ToolContext, change: Change, applied: Applied, said: str) -> None:
        self.journal.add(
            Edited(
                context.run_id,
                context.call.id,
                context.step,
                change,
                applied,
                inverse(change, applied),
                said,
                document=self.document,
            )
        )

    def _landed(
        self, found: Plan, accepted: Accepted, where: str, context: ToolContext, applied: Applied
    ) -> ToolResult:
        return landed(found, accepted, where, str(context.input.get("source") or ""), applied)

    def _not_applied(self, found: Plan, change: Change, applied: Applied) -> ToolResult:
        result, now = not_applied(found, change, applied)
        if now is not None and found.cell_id:  # the model read it now, in the result
            self._saw(
                {found.cell_id: Seen(now, True, False, found.cell.type if found.cell else "code")}
            )
        return result

    # --- running a cell ---------------------------------------------------------------------

    async def _run(self, context: ToolContext, found: Plan) -> ToolResult:
        assert self.runner is not None and found.cell is not None
        cell = found.cell
        shown = self._shown_code.pop((self._doc(), cell.id), None)
        if shown is not None and shown != cell.source:
            return error_result(
                f"Not run: cell {cell.id} changed after its code was shown to the person; "
                "nothing ran. Read it again."
            )
        outputs: list[dict[str, Any]] = []
        purpose = f"cell {found.number} (id {cell.id})"
        result = await self.runner(context, cell.source, purpose, cell_outputs=outputs)
        marked = tuple(
            {**o, "metadata": {**(o.get("metadata") or {}), "nbagent": {"ran_by": context.call.id}}}
            for o in outputs
        )
        change = SetOutputs(cell.id, marked, None, by=context.call.id)
        try:
            [applied] = await self.document.apply([change], self.limits)
        except NotebookUnavailableError as exc:
            applied = Applied(False, problem="refused", text=str(exc))
        if applied.ok:
            self._keep(
                context, change, applied, describe_change(change, self._where(found, applied))
            )
            entry = self._entry("ran", context, self._accepted(context), cell.source)
            await self._stamp(cell.id, entry)
            note = "Its outputs are in the cell now (its execution count is left empty)."
        else:
            note = "Its outputs could not be put in the cell (the notebook refused them)."
        content = tuple(result.content)
        extra = TextPart(note)
        value = result.value if isinstance(result.value, tuple) else ()
        return ToolResult(
            (*content, extra),
            result.is_error,
            result.terminate,
            (*value, Shown("text", note, "Cell")),
        )

    # --- undo -------------------------------------------------------------------------------

    async def undo(
        self, runs: str | Sequence[str] | None = None, *, step: int | None = None
    ) -> NotebookUndoReport:
        """Take back the accepted edits of ``runs`` (default: the newest run with edits) as one
        step (``step``: only that step's); a cell changed since is kept as it is, and said so."""
        if isinstance(runs, str):
            runs = [runs]
        if runs is None:
            last = self.journal.last_run()
            if last is None:
                return NotebookUndoReport()
            runs = [last]
        edits = self.journal.of_runs(runs)
        if step is not None:
            edits = [e for e in edits if e.step == step]
        report = NotebookUndoReport(lost=self.journal.lost(runs))
        by_document: dict[int, list[tuple[Edited, Change]]] = {}
        for edited, change in self.journal.plan(edits):
            by_document.setdefault(id(edited.document), []).append((edited, change))
        for planned in by_document.values():
            document = planned[0][0].document
            try:
                results = await document.apply([c for _, c in planned], self.limits, together=True)
            except NotebookUnavailableError as exc:
                report.problem = str(exc)
                continue
            for (edited, _), applied in zip(planned, results, strict=False):
                line = undo_said(edited, applied)
                edited.undone = True  # settled: a cell changed since stays as the person left it
                (report.undone if applied.ok else report.kept).append(line)
        for edited in edits:
            if edited.undo is None and not edited.undone:
                report.kept.append(f"{edited.said}: not enough was kept to take it back")
                edited.undone = True
        return report


_WRITES = ("insert_cell", "edit_cell")
_READ = {"readOnlyHint": True, "openWorldHint": False}
_CHANGE = {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": False}
_HINTS: dict[str, dict[str, bool]] = {
    "read_notebook": _READ,
    "read_cell": _READ,
    "insert_cell": _CHANGE,
    "edit_cell": {**_CHANGE, "destructiveHint": True},
    "delete_cell": {**_CHANGE, "destructiveHint": True},
    "move_cell": _CHANGE,
    "run_cell": {"readOnlyHint": False, "destructiveHint": True, "openWorldHint": True},
}


def notebook_tools(
    document: Document,
    *,
    approval: NeedsApproval = True,
    limits: NotebookLimits | None = None,
    runner: Runner | None = None,
) -> NotebookToolkit:
    """The notebook tools over ``document``; see :class:`NotebookToolkit`."""
    return NotebookToolkit(document, approval=approval, limits=limits, runner=runner)
