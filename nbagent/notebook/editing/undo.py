"""``%agent undo`` and the Undo button for runs that edited the notebook.

A run with ``--notebook`` may change two things: the notebook (its accepted edits, new cells,
deletions, moves, the outputs of cells it ran) and, through ``run_cell``, the kernel's
namespace (journaled like ``run_python``'s snippets). Undo takes back both: the namespace as
``%agent undo`` always did, the notebook's edits as **one step** of the notebook's undo history
(JupyterLab's Undo then redoes them, if wanted). A cell changed since is kept as it is and
said so, never overwritten. The page must answer for the notebook part, so the command awaits
it where the cell can (ipykernel ≥ 7.4, at the top of a cell), and elsewhere goes on in the
background and shows its report when the page answered.
"""

from __future__ import annotations

import asyncio
import html
import threading
import uuid
from typing import TYPE_CHECKING, Any

from ...document.journal import NotebookUndoReport
from ...redact import redact_secrets
from ..shown.render import fenced

if TYPE_CHECKING:
    from ..core.session import Session

__all__ = ["offer_undo", "undo_awaited", "undo_command"]

_lock = threading.Lock()
_tasks: set[asyncio.Task[Any]] = set()  # undos going on in the background (kept alive)


def _runs(session: Session, words: list[str]) -> tuple[list[str] | None, int | None]:
    step = None
    if len(words) >= 2 and words[-2] == "step":
        step, words = int(words[-1]), words[:-2]
    if words:
        return words, step
    newest = _newest(session)
    return ([newest] if newest else None), step


def _newest(session: Session) -> str | None:
    """The newest run with kernel snippets or notebook edits not undone yet."""
    found: list[str] = []
    kit = session.kernel
    if kit is not None:
        last = kit.journal.last_run()
        if last:
            found.append(last)
    notebook = session.notebook
    if notebook is not None:
        last = notebook.journal.last_run()
        if last:
            found.append(last)
    if not found:
        return None
    order = {job.run.id: n for n, job in enumerate(session.jobs) if job.run is not None}
    return max(found, key=lambda run: (order.get(run, -1), run))


def _kernel_lines(session: Session, runs: list[str] | None, step: int | None) -> list[str]:
    kit = session.kernel
    if kit is None or not kit.snippets(runs):
        return []
    report = kit.undo(runs, step=step)
    return [redact_secrets(line) for line in report.lines()] if report.snippets else []


def _bundle(lines: list[str]) -> dict[str, Any]:
    text = "\n".join(lines)
    return {"text/plain": text, "text/markdown": fenced(text)}


async def _notebook(
    session: Session, runs: list[str] | None, step: int | None
) -> NotebookUndoReport:
    kit = session.notebook
    if kit is None or runs is None:
        return NotebookUndoReport()
    return await kit.undo(runs, step=step)


def _nothing(runs: list[str] | None) -> list[str]:
    if runs:
        return [
            f"Nothing to undo: {', '.join(runs)} changed neither the namespace nor the "
            "notebook (or it was undone already)."
        ]
    return [
        "Nothing to undo: no run changed the namespace or the notebook (or it was undone already)."
    ]


async def undo_awaited(session: Session, shell: Any, words: list[str]) -> None:
    """``%agent undo [RUN ...] [step N]`` awaited by its cell: the namespace, then the notebook."""
    from IPython.display import display

    runs, step = _runs(session, words)
    lines = _kernel_lines(session, runs, step)
    report = await _notebook(session, runs, step)
    lines += [redact_secrets(line) for line in report.lines()]
    display(_bundle(lines or _nothing(runs)), raw=True)  # type: ignore[no-untyped-call]


def undo_command(session: Session, shell: Any, words: list[str]) -> None:
    """The same, from a cell that cannot await: the namespace now, the notebook once its page
    answered (the report shown in place of a note saying so)."""
    from IPython.display import display

    runs, step = _runs(session, words)
    lines = _kernel_lines(session, runs, step)
    kit = session.notebook
    waiting = kit is not None and runs is not None and bool(kit.journal.of_runs(runs))
    if not waiting:
        display(_bundle(lines or _nothing(runs)), raw=True)  # type: ignore[no-untyped-call]
        return
    display_id = f"nbagent-undo-notebook-{uuid.uuid4().hex}"
    said = [
        *lines,
        "Taking back the notebook's edits: the report comes here once the page answered.",
    ]
    display(_bundle(said), raw=True, display_id=display_id)  # type: ignore[no-untyped-call]

    async def later() -> None:
        from IPython.display import update_display

        try:
            report = await _notebook(session, runs, step)
            found = [redact_secrets(line) for line in report.lines()]
        except Exception as exc:  # the report must say it: no failure is silent
            found = [f"The notebook's edits could not be taken back: {redact_secrets(str(exc))}"]
        update_display(_bundle([*lines, *found] or _nothing(runs)), raw=True, display_id=display_id)  # type: ignore[no-untyped-call]

    _start(later())


def _start(work: Any) -> None:
    from ..core.runner import kernel_loop

    task = kernel_loop().create_task(work)
    with _lock:
        _tasks.add(task)
    task.add_done_callback(lambda done: _tasks.discard(done))


def offer_undo(session: Session, run_id: str | None) -> None:
    """Under a run that edited the notebook: one button that takes back its notebook edits
    and the namespace changes of the cells it ran; it becomes the report once clicked, and plain
    text when a later cell runs (a widget would not survive saving)."""
    kit = session.notebook
    if kit is None or run_id is None:
        return
    edits = [e for e in kit.journal.of_runs([run_id]) if not e.undone]
    if not edits:
        return
    import ipywidgets as widgets
    from IPython.display import display, update_display

    count = len(edits)
    button = widgets.Button(
        description="Undo this run's notebook edits",
        icon="undo",
        tooltip=f"take back its {count} accepted edit(s) as one step (a cell changed since stays)",
        layout=widgets.Layout(width="auto", min_width="fit-content"),
    )
    note = widgets.HTML(
        '<div style="font-size:0.85em;opacity:0.7;line-height:1.45">'
        f"{html.escape(run_id)} made {count} edit(s) to the notebook (or run "
        f"<code>%agent undo {html.escape(run_id)}</code>)</div>",
        layout=widgets.Layout(align_self="center"),
    )
    box = widgets.HBox([button, note])
    display_id = f"nbagent-undo-nb-{uuid.uuid4().hex}"
    shell = session.shell
    made = int(getattr(shell, "execution_count", 0) or 0)
    done: list[bool] = []

    def retire(lines: list[str]) -> None:
        if done:
            return
        done.append(True)
        update_display(_bundle(lines), raw=True, display_id=display_id)  # type: ignore[no-untyped-call]
        for widget in (box, button, note):
            widget.close()
        try:
            shell.events.unregister("post_run_cell", after_cell)
        except (AttributeError, ValueError):
            pass

    def clicked(_button: Any) -> None:
        button.disabled = True
        button.description = "Undoing…"

        async def work() -> None:
            lines = _kernel_lines(session, [run_id], None)
            try:
                report = await _notebook(session, [run_id], None)
                lines += [redact_secrets(line) for line in report.lines()]
            except Exception as exc:
                lines.append(
                    f"The notebook's edits could not be taken back: {redact_secrets(str(exc))}"
                )
            retire(lines or _nothing([run_id]))

        _start(work())

    def after_cell(result: Any = None) -> None:
        if getattr(result, "execution_count", None) is not None and result.execution_count < made:
            return
        retire([f"To take back what {run_id} did to the notebook: %agent undo {run_id}"])

    button.on_click(clicked)
    bundle = dict(box._repr_mimebundle_() or {}) if hasattr(box, "_repr_mimebundle_") else {}
    bundle["text/plain"] = f"{run_id} edited the notebook: %agent undo {run_id} takes it back"
    display(bundle, raw=True, display_id=display_id)  # type: ignore[no-untyped-call]
    if shell is not None and hasattr(shell, "events"):
        shell.events.register("post_run_cell", after_cell)
