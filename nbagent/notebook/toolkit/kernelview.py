"""The kernel tools in a notebook: ``%agent --kernel``, ``%agent undo``, ``%agent cells``, and the
Undo button under a run whose snippets changed the namespace.

The tools themselves (:mod:`nbagent.kernel`) enter a run like any tool; this module only gives
them to runs that ask for them (``--kernel``: they are opt in), shows what a person can do after
such a run, and turns the journal into cells.

**Cells.** ``%agent cells [RUN ...]`` puts the code the agent ran (every run in this kernel, as
``KernelToolkit.cells()`` gives it, or the named runs) into a new cell below, through the
kernel's ``set_next_input`` payload, the mechanism ``%load`` uses. IPython keeps one such payload
per execution, and JupyterLab 4.6 and Notebook 7.6 insert the first of a reply as one new cell
directly below the executed cell (measured in tests/browser), so every step comes in that one
cell, each under a comment naming its run and step. Run All does not run the new cell, and each
``%agent cells`` adds one more. Headless runs (nbclient, ``jupyter execute``, CI) ignore
payloads: the same code is also shown in the cell's output, so nothing is lost there. The
output's metadata holds the command's record (which runs, each step and whether its code is
kept in the cell, the policy's digest); in JupyterLab and Notebook 7 the page copies it into the
new cell's own metadata (:mod:`.cellnote`), since a payload cannot carry metadata.

**The Undo button** is a widget, so it cannot survive saving (a reopened notebook would show
JupyterLab's "Error displaying widget"): it becomes plain text once clicked, and as soon as any
later cell runs. A notebook saved right after the run still has it; ``%agent undo`` does the same.
"""

from __future__ import annotations

import threading
import uuid
from typing import TYPE_CHECKING, Any

from ...course.provenance import FollowUp, StepRecord, sha256_digest
from ...loop._ids import ID_PATTERN, prefix
from ...redact import redact_secrets
from ..core.registry import offered, withheld
from ..shown.render import fenced

if TYPE_CHECKING:
    from ...kernel import KernelToolkit, UndoReport
    from ..core.session import Session

__all__ = ["cells_command", "offer_undo", "undo_command", "use_kernel"]

_lock = threading.Lock()
#: Undo buttons still live: display id → (the run, the execution count that made it).
_live: dict[str, tuple[str, int]] = {}
_hooked: set[int] = set()
_warned: set[int] = set()


def toolkit(session: Session) -> KernelToolkit:
    """The session's kernel toolkit over the notebook's namespace, made on first use."""
    found: KernelToolkit | None = session.kernel
    if found is None:
        from ...kernel import KernelToolkit

        found = KernelToolkit(shell=session.shell) if session.shell is not None else KernelToolkit()
        session.kernel = found
    return found


def use_kernel(session: Session, tools: list[str] | None, *, wanted: bool) -> list[str] | None:
    """The tools of a run: with ``--kernel`` the kernel tools as well (registered on first use),
    without it every registered tool but them (they are opt in)."""
    if wanted:
        return offered(session, toolkit(session), tools)
    return withheld(session, session.kernel, tools)


def warn_auto_once(session: Session) -> str | None:
    """What ``--approve auto`` with the kernel tools allows, once per session (None after)."""
    from ...kernel import AUTO_WARNING

    with _lock:
        if id(session) in _warned:
            return None
        _warned.add(id(session))
    return AUTO_WARNING


# --- undo ---------------------------------------------------------------------------------------


def _report_bundle(report: UndoReport) -> dict[str, Any]:
    lines = [redact_secrets(line) for line in report.lines()]
    return {"text/plain": "\n".join(lines), "text/markdown": fenced("\n".join(lines))}


def undo_command(session: Session, _shell: Any, words: list[str]) -> None:
    """``%agent undo [RUN] [step N]``: put back what the newest (or the named) run's snippets
    changed (or that one step's)."""
    from IPython.display import display

    kit = session.kernel
    step = None
    if len(words) >= 2 and words[-2] == "step":
        step, words = int(words[-1]), words[:-2]
    earlier = [w for w in words if _of_an_earlier_kernel(w)]
    for run_id in earlier:
        print(
            f"{run_id} cannot be undone: it ran in another kernel session (before a restart), "
            "and the namespace its code changed went with that kernel; its code is in the "
            "saved notebook's record (%agent report)."
        )
    words = [w for w in words if w not in earlier]
    if earlier and not words:
        return
    if kit is None:
        print(
            "Nothing to undo: no run used the kernel tools (%agent --kernel …) in this kernel "
            "session (the runs of sessions before a restart cannot be undone: their namespace "
            "went with that kernel)."
        )
        return
    runs = words or None
    report = kit.undo(runs, step=step)
    labels = [label.split()[0] for label in report.snippets if label.startswith("run-")]
    undone = tuple(dict.fromkeys(labels))  # the runs whose snippets were undone, once each
    metadata = {}
    if undone and step is None:  # whole runs undone (one step's undo: its snippet says so)
        metadata = {"nbagent": _follow_up(session, FollowUp("undone", undone))}
    display(_report_bundle(report), raw=True, metadata=metadata)  # type: ignore[no-untyped-call]
    with _lock:
        retired = [
            d for d, (run, _) in _live.items() if step is None and (runs is None or run in runs)
        ]
    for display_id in retired:
        _retire(display_id, "undone with %agent undo")


def _of_an_earlier_kernel(word: str) -> bool:
    """A run's full id whose kernel session is not this one (each session draws its own
    prefix: :mod:`nbagent.loop._ids`)."""
    found = ID_PATTERN.fullmatch(word)
    return found is not None and found.group(2) is not None and found.group(2) != prefix()


def offer_undo(session: Session, run_id: str | None) -> None:
    """Under a run whose snippets changed the namespace: an Undo button (see the module)."""
    kit = session.kernel
    if kit is None or run_id is None:
        return
    changed = [s for s in kit.snippets(run_id) if s.diff and not s.undone]
    if not changed:
        return
    import ipywidgets as widgets
    from IPython.display import display

    names = sorted({c.name for s in changed for c in s.diff.changes})
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    button = widgets.Button(
        description="Undo this run's changes",
        tooltip=f"put back {shown} as they were before {run_id}",
        icon="undo",
        # ipywidgets' default button width (148 px) cut the label to "Undo this run'…"
        layout=widgets.Layout(width="auto", min_width="fit-content"),
    )
    # a block with its own line height: ipywidgets gives an HTML widget's text the height of a
    # button row (28 px), so a note that wrapped read double spaced
    note = widgets.HTML(
        '<div style="font-size:0.85em;opacity:0.7;line-height:1.45">'
        f"{_escape(run_id)} changed {_escape(shown)} (or run <code>%agent undo</code>)</div>",
        layout=widgets.Layout(align_self="center"),
    )
    box = widgets.HBox([button, note])
    display_id = f"nbagent-undo-{uuid.uuid4().hex}"
    shell = session.shell
    count = int(getattr(shell, "execution_count", 0) or 0)
    with _lock:
        _live[display_id] = (run_id, count)
    _hook(shell)

    def clicked(_button: Any) -> None:
        report = kit.undo([run_id])
        _retire(display_id, None, report)

    button.on_click(clicked)
    bundle = box._repr_mimebundle_() if hasattr(box, "_repr_mimebundle_") else {}
    bundle = dict(bundle or {})
    bundle["text/plain"] = f"{run_id} changed {shown}: %agent undo {run_id} puts them back"
    display(bundle, raw=True, display_id=display_id)  # type: ignore[no-untyped-call]


def _retire(display_id: str, why: str | None, report: UndoReport | None = None) -> None:
    """The button becomes text: what the undo did, or how to undo later."""
    from IPython.display import update_display

    with _lock:
        found = _live.pop(display_id, None)
    if found is None:
        return
    run_id = found[0]
    if report is not None:
        data = _report_bundle(report)
    else:
        text = (
            f"{run_id}: {why}"
            if why
            else f"To put back what {run_id} changed: %agent undo {run_id}"
        )
        data = {"text/plain": text, "text/markdown": f"*{_escape_md(text)}*"}
    update_display(data, raw=True, display_id=display_id)  # type: ignore[no-untyped-call]


def _hook(shell: Any) -> None:
    """Retire live buttons made by earlier cells whenever a cell ends (they would not survive
    saving); the cell that made a button keeps it."""
    if shell is None or id(shell) in _hooked:
        return
    _hooked.add(id(shell))

    def after_cell(result: Any = None) -> None:
        count = getattr(result, "execution_count", None)
        with _lock:
            # while cell N runs, the shell's count is already N + 1 (IPython counts before it
            # runs a cell), so a button made during cell N has made = N + 1
            old = [d for d, (_, made) in _live.items() if count is None or count >= made]
        for display_id in old:
            _retire(display_id, None)

    shell.events.register("post_run_cell", after_cell)


# --- cells --------------------------------------------------------------------------------------


def cells_command(session: Session, shell: Any, words: list[str]) -> None:
    """``%agent cells [RUN ...]``: the code of every run (or of the named runs), as a new cell
    below (see the module)."""
    from IPython.display import display

    kit = session.kernel
    runs = words or None  # none named: every run, as KernelToolkit.cells() gives them
    cells = kit.cells(runs) if kit is not None else []
    if not cells:
        print(
            f"No code to turn into cells: {', '.join(runs)} did not use the kernel tools."
            if runs
            else "No code to turn into cells: no run used the kernel tools (%agent --kernel …)."
        )
        return
    assert kit is not None
    source = "\n".join(cells).rstrip() + "\n"
    if shell is not None and hasattr(shell, "set_next_input"):
        shell.set_next_input(source, replace=False)
    ran = dict.fromkeys(s.run_id or "" for s in kit.snippets(runs))  # oldest first, once each
    named = ", ".join(r for r in ran if r) or "this kernel's snippets"
    steps = f"{len(cells)} step{'s' if len(cells) != 1 else ''} of {named}"
    said = (
        f"The code of {steps} is in a new cell below (JupyterLab, Notebook 7); run it to redo "
        "the work without the agent. Where no cell appears (nbclient, jupyter execute), here it is:"
    )
    # which runs' code became a cell, and the cell's digest: the report finds the new cell by
    # it; each step, and whether its code is in the cell (the page copies this record into the
    # new cell's own metadata: .cellnote)
    digest = sha256_digest(source)
    record = FollowUp(
        "cells", tuple(r for r in ran if r), digest, _steps(kit, runs), _policy_digest(shell)
    )
    display(  # type: ignore[no-untyped-call]
        {
            "text/plain": f"{said}\n\n{source}",
            "text/markdown": f"{said}\n\n{fenced(source, 'python')}",
        },
        raw=True,
        metadata={"nbagent": _follow_up(session, record)},
    )
    if getattr(shell, "kernel", None) is not None:
        from ..live.cellnote import note_cell

        note_cell("below", digest)


def _steps(kit: KernelToolkit, runs: list[str] | None) -> tuple[StepRecord, ...]:
    """Each snippet in the new cell, as ``KernelToolkit.cells()`` writes it: kept as code, or
    left out as a comment (undone, failed, interrupted …)."""
    steps = []
    for snippet in kit.snippets(runs):
        kept = snippet.status == "done" and not snippet.undone
        why = None if kept else "undone" if snippet.undone else snippet.status
        steps.append(StepRecord(snippet.run_id, snippet.step, kept, why))
    return tuple(steps)


def _policy_digest(shell: Any) -> str | None:
    """The digest of the course policy in force now (None: none, or it does not read)."""
    from ..policy.coursegate import current

    try:
        return current(shell).digest
    except Exception:  # the record is kept without it; %agent policy says what is wrong
        return None


def _follow_up(session: Session, record: FollowUp) -> dict[str, Any]:
    """What a command did with runs' code, kept by the session for ``%agent report``, as the
    record (:class:`~nbagent.course.FollowUp`) its output carries."""
    session.follow_ups.append(record)
    return record.to_metadata()


def _escape(text: str) -> str:
    import html

    return html.escape(redact_secrets(text))


def _escape_md(text: str) -> str:
    from ..shown.render import md_text

    return md_text(redact_secrets(text))
