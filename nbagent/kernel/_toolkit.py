"""The toolkit: the three kernel tools over one namespace, and the journal of what they ran
(undo, cells). Running a snippet is :mod:`._run`'s; looking at variables :mod:`._inspect`'s."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._ground.guard import Reader
from ..content import ToolResult
from ..tools import NeedsApproval, Tool, ToolContext, ToolSequence
from ._cell_outputs import Outputs
from ._inspect import describe_variable, list_variables
from ._journal import Journal, Snippet, UndoReport
from ._limits import KernelLimits
from ._protect import Keeper
from ._run import run_snippet
from ._wording import (
    DESCRIBE_DESCRIPTION,
    DESCRIBE_SCHEMA,
    LIST_DESCRIPTION,
    LIST_SCHEMA,
    RUN_DESCRIPTION,
    RUN_SCHEMA,
)

__all__ = ["KernelToolkit", "kernel_tools"]


class KernelToolkit(ToolSequence):
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
                input_schema=LIST_SCHEMA,
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

    def __repr__(self) -> str:
        names = ", ".join(t.name for t in self._tools)
        return f"<KernelToolkit: {names}; {len(self.journal.snippets)} snippets>"

    def _hidden(self) -> Mapping[str, Any] | None:
        return getattr(self.shell, "user_ns_hidden", None)

    def _keeper(self) -> Keeper:
        return _keeper()

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

    async def _run_python(self, context: ToolContext) -> ToolResult:
        code = str(context.input["code"])
        return await run_snippet(self, context, code, str(context.input.get("purpose") or ""))

    async def run_code(
        self, context: ToolContext, code: str, purpose: str = "", *, cell_outputs: Outputs = None
    ) -> ToolResult:
        """Run ``code`` as run_python does; ``cell_outputs`` gets its outputs as a cell's."""
        return await run_snippet(self, context, code, purpose, cell_outputs=cell_outputs)

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


def kernel_tools(
    namespace: dict[str, Any] | None = None,
    *,
    approval: NeedsApproval = True,
    limits: KernelLimits | None = None,
) -> KernelToolkit:
    """The kernel tools over ``namespace`` (default: the notebook's); see :class:`KernelToolkit`."""
    return KernelToolkit(namespace, approval=approval, limits=limits)


@functools.cache
def _keeper() -> Keeper:
    """The :class:`~._protect.Keeper` of every toolkit: it keeps tools, agents and toolkits
    (the agent's module loads on first use, not with the kernel tools)."""
    from ..agent import Agent

    return Keeper(Tool, Agent, KernelToolkit)


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
