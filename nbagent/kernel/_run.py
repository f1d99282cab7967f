"""Running one snippet of ``run_python``: compiled, the namespace taken before, run on a thread
of its own, interrupted with the call, and its result made on that thread once it ends
(figures, the names a snippet may not take away put back, the diff kept for undo, what the
process changed, the notes).

It reads the toolkit through :class:`Workspace` (the toolkit's module imports this one).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import Any, Protocol

from .._ground.guard import Reader
from ..content import Shown, ToolResult, error_result
from ..tools import ToolContext
from ._capture import Capture, routed
from ._cell_outputs import Outputs
from ._cell_outputs import cell_outputs as as_cell
from ._exact import Budget
from ._execute import Ending, SnippetThread, compile_snippet, syntax_error_text
from ._journal import Journal, Snippet
from ._limits import KernelLimits
from ._namespace import Before, NamespaceDiff
from ._present import gather, open_figures, result, take_figures
from ._process import ProcessState, imported_names
from ._protect import Keeper, refuse_exit, restore
from ._wording import RUNNING_NOTE

__all__ = ["Workspace", "run_snippet"]


class Workspace(Protocol):
    """What running a snippet reads of the toolkit."""

    namespace: dict[str, Any]
    shell: Any
    limits: KernelLimits
    journal: Journal

    def _hidden(self) -> Mapping[str, Any] | None:
        """The shell's hidden names (``user_ns_hidden``), if there is a shell."""

    def _keeper(self) -> Keeper:
        """What a snippet may not take away of the namespace."""


async def run_snippet(
    kit: Workspace,
    context: ToolContext,
    code: str,
    purpose: str = "",
    *,
    cell_outputs: Outputs = None,
) -> ToolResult:
    """Run ``code`` in ``kit.namespace`` and make its result; a cancel (Stop, a kernel
    interrupt, the run's cancel) interrupts it and waits for it to end. ``cell_outputs`` gets
    its outputs as a notebook cell's (the notebook tools' run of a cell)."""
    snippet = kit.journal.new(code, context.run_id, context.step, context.call.id, purpose)
    filename = f"<nbagent {snippet.label}>"
    try:
        compiled = compile_snippet(code, filename, kit.shell)
    except SyntaxError as exc:
        snippet.status = "refused"
        return error_result(f"{syntax_error_text(exc)}\nNothing ran: the code is not valid Python.")
    limits = kit.limits
    capture = Capture(max_chars=limits.max_output_chars, max_displays=limits.max_displays)
    state: dict[str, Any] = {"cells": cell_outputs}
    reader = Reader(limits.read_timeout, name=snippet.label)

    def before() -> None:
        state["figures"] = open_figures()
        state["protected"] = kit._keeper().take(kit.namespace)
        state["before"] = Before.take(
            kit.namespace,
            kit._hidden(),
            compiled.names,
            limits.copy_budget,
            reader,
            limits.copy_timeout,
        )
        state["imports"] = imported_names(compiled.source)
        state["process"] = ProcessState.take()  # last: nbagent's own imports stay out

    def after(ending: Ending) -> None:
        try:
            if "process" in state:
                state["process_now"] = ProcessState.take()  # first, for the same reason
            state["result"] = _finish(kit, snippet, capture, ending, state, reader)
        finally:
            reader.close()

    runner = SnippetThread(
        compiled,
        kit.namespace,
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
    with routed(kit.shell):
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
    outcome: ToolResult = state.get("result") or error_result("the snippet ended without a result")
    return outcome


def _finish(
    kit: Workspace,
    snippet: Snippet,
    capture: Capture,
    ending: Ending,
    state: dict[str, Any],
    reader: Reader,
) -> ToolResult:
    """On the snippet's thread, once its code ended: figures, protected names, diff, result
    (each object's own code through ``reader``)."""
    limits = kit.limits
    figures, dropped = take_figures(state.get("figures", set()), limits.max_images)
    restored = restore(kit.namespace, state.get("protected", {}))
    before: Before | None = state.get("before")
    notes: list[str] = []
    # for the person only: the model has no use for it, and a recorded run replays as it was
    for_person: list[str] = []
    if before is None:
        diff = NamespaceDiff()
    else:
        diff, now, _ = before.diff(kit.namespace, kit._hidden(), reader)
        diff = NamespaceDiff(diff.changes, tuple(restored), diff.uncertain)
        snippet.keep(before, diff, now, budget=Budget(limits.copy_budget))
        kit.journal.settle()
        notes += _undo_notes(snippet, diff)
        for_person += _vouch_notes(snippet)
    process: list[str] = []
    loaded: list[str] = []
    if "process" in state and "process_now" in state:
        process, loaded = state["process"].changes(state["process_now"], state["imports"])
    if refuse_exit(kit.shell):
        notes.append(
            "The snippet asked the kernel to exit (exit() or quit()): refused, the kernel goes on."
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
        max_images=limits.max_images,
        max_repr=limits.max_repr_chars,
        shell=kit.shell,
        reader=reader,
    )
    if state.get("cells") is not None:  # run_snippet's cell_outputs
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


def _undo_notes(snippet: Snippet, diff: NamespaceDiff) -> list[str]:
    """What the model is told undo cannot check or restore of this snippet's changes."""
    notes = []
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
    return notes


def _vouch_notes(snippet: Snippet) -> list[str]:
    """What the person is told undo will leave as it is (objects it cannot fingerprint)."""
    vouch = snippet.unsure()
    if not vouch:
        return []
    one = len(vouch) == 1
    return [
        "Undo will leave "
        + _some([f"{n} ({why})" for n, why in vouch.items()], "; ")
        + (" as it is" if one else " as they are")
        + ": nbagent cannot tell whether "
        + ("it changes" if one else "they change")
        + " after this step."
    ]


def _some(items: list[str], sep: str = ", ", shown: int = 8) -> str:
    """The first ``shown`` of ``items``, and how many more: a note stays short."""
    text = sep.join(items[:shown])
    return text + (f" and {len(items) - shown:,} more" if len(items) > shown else "")


async def _wait(done: asyncio.Future[None]) -> None:
    """Wait for the snippet thread, waking the loop now and then: ipykernel delivers a kernel
    interrupt to an awaiting cell only when its loop wakes up."""
    while not done.done():
        await asyncio.wait({done}, timeout=0.1)
