"""The agent works in your kernel: tools that run Python in the notebook's namespace and look at it.

**There is no sandbox.** Code the agent runs has your rights, in your kernel: it can read and
write your files, use the network, and change or delete any variable. Every snippet asks for
approval by default, shows its code before it runs, and can be undone as far as the namespace
goes; for code you would not run yourself, run the notebook in a container or a separate kernel.

:func:`kernel_tools` returns a :class:`KernelToolkit`, a list of three tools:

* ``run_python`` runs a snippet as a cell would (``print`` and stderr, the last expression's
  value, displays, figures, the traceback of an error) on a thread of its own, and reports what
  it changed in the namespace. It needs approval unless told otherwise; Stop, a kernel
  interrupt or the run's cancel interrupt it.
* ``list_variables`` and ``describe_variable`` look without running the agent's code (no
  approval).

Every object in the namespace is the person's code too: nbagent reads types, lengths and shapes
the interpreter keeps, and runs anything else of an object's (a repr, a copy for undo) through
a :class:`~._guard.Reader`, bounded by ``KernelLimits.read_timeout`` / ``copy_timeout``,
stopped with the call, what it raised said as text. A snippet's changes to the process (the
working directory, ``sys.path``, environment variables, imports) are said in its result.

The toolkit keeps a :class:`~._journal.Journal` of the snippets: :meth:`KernelToolkit.undo`
puts back what a run's snippets changed, :meth:`KernelToolkit.cells` gives their code as cells.
In a notebook: ``%agent --kernel …``, ``%agent undo``, ``%agent cells``.

May import (docs/architecture.md): the core rooms, ground to events, and the agent; never a
front end.
"""

from __future__ import annotations

import asyncio
import dataclasses
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

from ..content import Shown, ToolResult, error_result
from ..tools import NeedsApproval, Tool, ToolContext
from ._capture import Capture, routed
from ._cell_outputs import Outputs
from ._cell_outputs import cell_outputs as as_cell
from ._exact import Budget
from ._execute import Ending, SnippetThread, compile_snippet, syntax_error_text
from ._guard import Reader, derives
from ._inspect import describe_variable, list_variables
from ._journal import Journal, Snippet, UndoReport
from ._namespace import SHELL_NAMES, Before, NamespaceDiff
from ._present import gather, open_figures, result, take_figures
from ._process import ProcessState, imported_names

__all__ = [
    "KernelLimits",
    "KernelToolkit",
    "Snippet",
    "UndoReport",
    "kernel_tools",
]

#: What ``--approve auto`` with the kernel tools allows, said once where it is set.
AUTO_WARNING = (
    "--approve auto with --kernel: the agent's Python code runs in this kernel without asking "
    "you first, with your rights (your files, the network, every variable). Undo restores "
    "variables, not files or data sent."
)


#: Shown on a snippet's card while it runs: a snippet that never returns is the person's to stop.
RUNNING_NOTE = (
    "running in your kernel: Stop or Kernel > Interrupt stops it (a call that blocks in C, "
    "such as time.sleep, stops when it returns)"
)


@dataclass(frozen=True)
class KernelLimits:
    """Bounds of the kernel tools (defaults in parentheses).

    ``max_output_chars`` (50,000): printed characters kept per snippet, all streams together;
    ``max_displays`` (20) displays kept per snippet; ``max_images`` (8) figures and images sent
    per snippet; ``max_repr_chars`` (10,000) characters of one value or display's text;
    ``copy_budget`` (256 MiB) bytes copied before a snippet, for undo of in-place changes, of
    the objects its code names, and read after it for the exact fingerprints undo checks before
    it puts anything back (a larger object is one undo leaves as it is); ``undo_memory``
    (1 GiB) bytes of such copies kept for all snippets together (the oldest go first);
    ``max_snippets`` (500) snippets remembered; ``read_timeout`` (2 s) one call of an
    object's own code on nbagent's path (its repr, a fingerprint of its attributes, a
    description), after which it is stopped and said; ``copy_timeout`` (30 s) one copy for
    undo (``__deepcopy__`` is the object's code too).
    """

    max_output_chars: int = 50_000
    max_displays: int = 20
    max_images: int = 8
    max_repr_chars: int = 10_000
    copy_budget: int = 256 * 1024 * 1024
    undo_memory: int = 1024 * 1024 * 1024
    max_snippets: int = 500
    read_timeout: float = 2.0
    copy_timeout: float = 30.0


def _paragraph(text: str) -> str:
    return " ".join(text.split())


RUN_DESCRIPTION = _paragraph(
    """Run Python code in the person's Jupyter kernel, in the notebook's own namespace:
    variables the notebook defined are there, and what the code defines stays there for later
    snippets and for the person. Use it to load, clean, analyse and plot data the person has or
    asks about. You get back what it printed, displays (tables as text), figures as images, the
    value of a last expression, the traceback of an error (fix it and try again), and the names
    it added, rebound, deleted or changed. Keep each snippet short and focused on one step;
    import what you use. The person sees the code and usually approves each snippet before it
    runs; input() is not available. Prefer list_variables and describe_variable to look at data
    without running code."""
)

LIST_DESCRIPTION = _paragraph(
    """List the variables of the person's notebook: name, type and size (shape or length, or
    the value of a number). Runs no code; needs no approval."""
)

DESCRIBE_DESCRIPTION = _paragraph(
    """Describe one variable of the person's notebook without running code: a DataFrame's
    shape, columns, dtypes and first rows; an array's shape, dtype and a few values; other
    objects' type and a bounded repr. Needs no approval."""
)

RUN_SCHEMA = {
    "type": "object",
    "properties": {
        "code": {
            "type": "string",
            "minLength": 1,
            "description": "The Python code to run, as in a notebook cell.",
        },
        "purpose": {
            "type": "string",
            "maxLength": 200,
            "description": "What this step does, in a few words (shown to the person).",
        },
    },
    "required": ["code"],
    "additionalProperties": False,
}

DESCRIBE_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 200}},
    "required": ["name"],
    "additionalProperties": False,
}


class KernelToolkit(Sequence[Tool]):
    """The kernel tools over one namespace, and the journal of what they ran (see the module).

    Pass it where tools go (``Agent(model, kernel_tools())`` or ``[*kernel_tools(), other]``).
    ``namespace``: the variables the code runs in (default: the IPython shell's, else
    ``__main__``'s). ``approval``: ``needs_approval`` of ``run_python`` (True; a function of the
    input may decide per snippet, and approval rules apply as for any tool).
    """

    def __init__(
        self,
        namespace: dict[str, Any] | None = None,
        *,
        approval: NeedsApproval = True,
        limits: KernelLimits | None = None,
        shell: Any = None,
    ) -> None:
        self.shell = shell if shell is not None else _shell() if namespace is None else None
        if namespace is None:
            namespace = self.shell.user_ns if self.shell is not None else _main_namespace()
        self.namespace = namespace
        self.limits = limits or KernelLimits()
        self.journal = Journal(
            max_snippets=self.limits.max_snippets,
            copy_budget_total=self.limits.undo_memory,
            print_budget=self.limits.copy_budget,
        )
        self._tools = (
            Tool(
                name="run_python",
                title="Run Python in your kernel",
                description=RUN_DESCRIPTION,
                input_schema=RUN_SCHEMA,
                execute=self._run_python,
                needs_approval=approval,
                execution_mode="sequential",
                code_arguments={"code": "python"},
            ),
            Tool(
                name="list_variables",
                title="List your variables",
                description=LIST_DESCRIPTION,
                input_schema={"type": "object", "properties": {}, "additionalProperties": False},
                execute=lambda context: self._look(context, list_variables),
            ),
            Tool(
                name="describe_variable",
                title="Describe one variable",
                description=DESCRIBE_DESCRIPTION,
                input_schema=DESCRIBE_SCHEMA,
                execute=lambda context: self._look(
                    context,
                    lambda namespace, hidden, reader: describe_variable(
                        namespace,
                        hidden,
                        str(context.input["name"]),
                        max_chars=self.limits.max_repr_chars,
                        reader=reader,
                    ),
                ),
            ),
        )

    # --- a list of tools ------------------------------------------------------------------------

    @overload
    def __getitem__(self, index: int) -> Tool: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Tool]: ...
    def __getitem__(self, index: int | slice) -> Tool | Sequence[Tool]:
        return self._tools[index]

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools)

    def __repr__(self) -> str:
        names = ", ".join(t.name for t in self._tools)
        return f"<KernelToolkit: {names}; {len(self.journal.snippets)} snippets>"

    @property
    def names(self) -> list[str]:
        return [t.name for t in self._tools]

    def _hidden(self) -> Mapping[str, Any] | None:
        return getattr(self.shell, "user_ns_hidden", None)

    def _look(
        self,
        context: ToolContext,
        look: Callable[[Mapping[str, Any], Mapping[str, Any] | None, Reader], ToolResult],
    ) -> ToolResult:
        """list_variables / describe_variable: each object's own code bounded, and stopped
        when the call is (Stop, the tool's timeout)."""
        with Reader(
            self.limits.read_timeout, cancelled=context.cancelled, name=context.tool.name
        ) as reader:
            return look(self.namespace, self._hidden(), reader)

    # --- running a snippet -------------------------------------------------------------------

    async def _run_python(self, context: ToolContext) -> ToolResult:
        return await self.run_code(context, context.input["code"], context.input.get("purpose", ""))

    async def run_code(
        self, context: ToolContext, code: str, purpose: str = "", *, cell_outputs: Outputs = None
    ) -> ToolResult:
        """Run ``code`` as run_python does; ``cell_outputs`` gets its outputs as a cell's."""
        snippet = self.journal.new(code, context.run_id, context.step, context.call.id, purpose)
        filename = f"<nbagent {snippet.label}>"
        try:
            compiled = compile_snippet(code, filename, self.shell)
        except SyntaxError as exc:
            snippet.status = "refused"
            return error_result(
                f"{syntax_error_text(exc)}\nNothing ran: the code is not valid Python."
            )
        capture = Capture(
            max_chars=self.limits.max_output_chars, max_displays=self.limits.max_displays
        )
        state: dict[str, Any] = {"cells": cell_outputs}
        reader = Reader(self.limits.read_timeout, name=snippet.label)

        def before() -> None:
            state["figures"] = open_figures()
            state["protected"] = _protected(self.namespace)
            state["before"] = Before.take(
                self.namespace,
                self._hidden(),
                compiled.names,
                self.limits.copy_budget,
                reader,
                self.limits.copy_timeout,
            )
            state["imports"] = imported_names(compiled.source)
            state["process"] = ProcessState.take()  # last: nbagent's own imports stay out

        def after(ending: Ending) -> None:
            try:
                if "process" in state:
                    state["process_now"] = ProcessState.take()  # first, for the same reason
                state["result"] = self._finish(
                    snippet, compiled.names, capture, ending, state, reader
                )
            finally:
                reader.close()

        runner = SnippetThread(
            compiled,
            self.namespace,
            capture,
            before=before,
            after=after,
            name=f"nbagent-kernel-{snippet.label}",
        )
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def settle() -> None:
            if not done.done():
                done.set_result(None)

        def finished() -> None:
            try:
                loop.call_soon_threadsafe(settle)
            except RuntimeError:  # the loop closed meanwhile: nobody waits any more
                pass

        context.update(RUNNING_NOTE)
        with routed(self.shell):
            runner.start(finished)
            try:
                await _wait(done)
            except asyncio.CancelledError:
                # Stop, a kernel interrupt or the run's cancel: interrupt the code (or, before
                # or after it, the object of the person's nbagent is reading), then wait for it
                # to end (nbagent reports the call as still running if it does not)
                if not runner.interrupt():
                    reader.interrupt()
                await _wait(done)
                raise
        outcome: ToolResult = state.get("result") or error_result(
            "the snippet ended without a result"
        )
        return outcome

    def _finish(
        self,
        snippet: Snippet,
        names: frozenset[str],
        capture: Capture,
        ending: Ending,
        state: dict[str, Any],
        reader: Reader,
    ) -> ToolResult:
        """On the snippet's thread, once its code ended: figures, protected names, diff, result
        (each object's own code through ``reader``)."""
        figures, dropped = take_figures(state.get("figures", set()), self.limits.max_images)
        restored = _restore(self.namespace, state.get("protected", {}))
        before: Before | None = state.get("before")
        notes: list[str] = []
        # for the person only: the model has no use for it, and a recorded run replays as it was
        for_person: list[str] = []
        if before is None:
            diff = NamespaceDiff()
        else:
            diff, now, _ = before.diff(self.namespace, self._hidden(), reader)
            diff = NamespaceDiff(diff.changes, tuple(restored), diff.uncertain)
            snippet.keep(before, diff, now, budget=Budget(self.limits.copy_budget))
            self.journal.settle()
            named = set(diff.names())
            unsure = [n for n in diff.uncertain if n not in named]
            if unsure:
                notes.append(
                    f"Not compared for in-place changes: {_some(unsure)} (nbagent cannot "
                    "fingerprint these objects)."
                )
            skipped = [n for n in diff.names("changed") if n in snippet.not_copied]
            if skipped:
                notes.append(
                    "Undo cannot restore in-place changes to "
                    + _some([f"{n} ({snippet.not_copied[n]})" for n in skipped], "; ")
                    + "."
                )
            vouch = snippet.unsure()
            if vouch:
                one = len(vouch) == 1
                for_person.append(
                    "Undo will leave "
                    + _some([f"{n} ({why})" for n, why in vouch.items()], "; ")
                    + (" as it is" if one else " as they are")
                    + ": nbagent cannot tell whether "
                    + ("it changes" if one else "they change")
                    + " after this step."
                )
        process: list[str] = []
        loaded: list[str] = []
        if "process" in state and "process_now" in state:
            process, loaded = state["process"].changes(state["process_now"], state["imports"])
        if _refuse_exit(self.shell):
            notes.append(
                "The snippet asked the kernel to exit (exit() or quit()): refused, the kernel "
                "goes on."
            )
        if ending.threads:
            notes.append(
                f"Threads it started are still running: {', '.join(ending.threads)}. They may "
                "go on changing the namespace after this result."
            )
        snippet.seconds = ending.seconds
        snippet.status = (
            "interrupted"
            if ending.interrupted
            else "error"
            if ending.error
            else "exited"
            if ending.exited is not None
            else "done"
        )
        outcome = gather(
            capture,
            ending,
            figures,
            dropped,
            max_images=self.limits.max_images,
            max_repr=self.limits.max_repr_chars,
            shell=self.shell,
            reader=reader,
        )
        if state.get("cells") is not None:  # run_code's cell_outputs
            state["cells"].extend(as_cell(capture, ending, figures, outcome.pieces))
        made = result(
            outcome,
            ending,
            diff,
            status=snippet.status,
            notes=notes,
            process=process,
            loaded=loaded,
        )
        if for_person and isinstance(made.value, tuple):
            shown = tuple(Shown("text", note, "Undo") for note in for_person)
            made = dataclasses.replace(made, value=(*made.value, *shown))
        return made

    # --- undo and cells -------------------------------------------------------------------------

    def snippets(self, runs: str | Sequence[str] | None = None) -> list[Snippet]:
        """The snippets of a run (its id), of several, or all (None), oldest first."""
        if isinstance(runs, str):
            runs = [runs]
        return self.journal.of_runs(runs)

    def undo(
        self, runs: str | Sequence[str] | None = None, *, step: int | None = None
    ) -> UndoReport:
        """Put back what the snippets of ``runs`` changed in the namespace (default: the newest
        run with snippets not undone yet); ``step``: only that step's snippet (a later step
        that changed the same names makes them conflicts, kept as they are). See
        :class:`~._journal.UndoReport`."""
        if runs is None:
            last = self.journal.last_run()
            if last is None:
                return UndoReport()
            runs = [last]
        chosen = self.snippets(runs)
        if step is not None:
            chosen = [s for s in chosen if s.step == step]
        return self.journal.undo(chosen, self.namespace, self._hidden())

    def cells(self, runs: str | Sequence[str] | None = None) -> list[str]:
        """The code of the snippets of ``runs`` (default: every run, as ``%agent cells`` with no
        run named gives them), oldest first, each as a cell's source with a first comment naming
        its run and step; snippets that failed, were undone or were interrupted stay out (Run
        All must re-create the result), each said in a comment."""
        cells = []
        for snippet in self.snippets(runs):
            head = f"# nbagent {snippet.label}" + (
                f": {snippet.purpose}" if snippet.purpose else ""
            )
            if snippet.status == "done" and not snippet.undone:
                cells.append(f"{head}\n{snippet.code.rstrip()}\n")
                continue
            why = (
                "it was undone"
                if snippet.undone
                else {
                    "error": "it raised an error",
                    "refused": "it was not valid Python",
                    "interrupted": "it was interrupted",
                    "exited": "it called sys.exit()",
                    "running": "it had not finished",
                }.get(snippet.status, snippet.status)
            )
            commented = "\n".join(f"# {line}" for line in snippet.code.rstrip().splitlines())
            cells.append(f"{head} (left out: {why})\n{commented}\n")
        return cells


def _some(items: list[str], sep: str = ", ", shown: int = 8) -> str:
    """The first ``shown`` of ``items``, and how many more: a note stays short."""
    text = sep.join(items[:shown])
    return text + (f" and {len(items) - shown:,} more" if len(items) > shown else "")


def kernel_tools(
    namespace: dict[str, Any] | None = None,
    *,
    approval: NeedsApproval = True,
    limits: KernelLimits | None = None,
) -> KernelToolkit:
    """The kernel tools over ``namespace`` (default: the notebook's); see :class:`KernelToolkit`."""
    return KernelToolkit(namespace, approval=approval, limits=limits)


async def _wait(done: asyncio.Future[None]) -> None:
    """Wait for the snippet thread, waking the loop now and then: ipykernel delivers a kernel
    interrupt to an awaiting cell only when its loop wakes up."""
    while not done.done():
        await asyncio.wait({done}, timeout=0.1)


def _shell() -> Any:
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def _main_namespace() -> dict[str, Any]:
    import __main__

    namespace: dict[str, Any] = __main__.__dict__
    return namespace


def _protected(namespace: Mapping[str, Any]) -> dict[str, Any]:
    """Names code the agent runs may not take away: nbagent itself, its tools, agents and
    toolkits, and the shell's own names (``In``, ``Out``, ``get_ipython`` …)."""
    from ..agent import Agent

    guarded = _GUARDED
    if not guarded:
        guarded[Tool] = guarded[Agent] = guarded[KernelToolkit] = True
    kept = {}
    for name, value in list(namespace.items()):
        kind = type(value)
        if kind is types.ModuleType:
            module = vars(value).get("__name__")  # not value.__name__: a module's __getattr__
            if type(module) is str and module.split(".")[0] == "nbagent":
                kept[name] = value
            continue
        # each type is looked at once; one whose metaclass is not type is never hashed (its
        # __hash__ is someone's code), and its MRO is read by identity (issubclass against
        # KernelToolkit, a Sequence, would hash it)
        cached = type(kind) is type
        is_guarded = guarded.get(kind) if cached else None
        if is_guarded is None:
            is_guarded = derives(kind, Tool, Agent, KernelToolkit)
            if cached:
                guarded[kind] = is_guarded
        if is_guarded or name in SHELL_NAMES:
            kept[name] = value
    return kept


#: Types whose values :func:`_protected` keeps (True) or not (False), as they are met.
_GUARDED: dict[type, bool] = {}


def _restore(namespace: dict[str, Any], protected: Mapping[str, Any]) -> list[str]:
    restored = []
    for name, value in protected.items():
        if namespace.get(name, _MISSING) is not value:
            namespace[name] = value
            restored.append(name)
    return restored


_MISSING = object()


def _refuse_exit(shell: Any) -> bool:
    """Undo an ``exit()`` / ``quit()`` the snippet called: the shell would end the kernel (or
    ask the frontend to) once the cell ends. True if there was one."""
    if shell is None:
        return False
    asked = bool(getattr(shell, "exit_now", False))
    payloads = getattr(shell, "payload_manager", None)
    if payloads is not None:
        kept = [p for p in payloads.read_payload() if p.get("source") != "ask_exit"]
        asked = asked or len(kept) != len(payloads.read_payload())
        payloads.clear_payload()
        for payload in kept:
            payloads.write_payload(payload, single=False)
    if asked:
        shell.exit_now = False
    return asked
