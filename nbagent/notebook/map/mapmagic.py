"""``%agent map --over df -o results "Grade {answer} against {key}"``: a batch from a cell.

A line whose first word is ``map`` is a map (see :mod:`.grammar`; ``%agent -- map the coast`` is
a prompt). The template's fields name columns of the table, filled per row (they are not taken
from the notebook's variables, as an ordinary ``%agent`` prompt's are). The batch uses the
notebook's model and tools, each run with a conversation of its own (the notebook's conversation
is neither read nor changed). Nobody clicks for hundreds of runs: calls that need approval are
denied unless ``--approve auto`` (or ``NBAGENT_APPROVAL=auto``) says otherwise.

The cell awaits the batch (see :mod:`.cells`), so the progress view's Stop works, Run All waits
for the table, and a kernel interrupt stops the batch: the rows finished by then are still
assigned to ``-o NAME`` before the interrupt goes on.
"""

from __future__ import annotations

import argparse
import asyncio
import keyword
import os
import re
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from ...errors import NbagentError
from ..command.grammar import usage_error
from ..policy.requestgate import Tally, tally

if TYPE_CHECKING:
    from ...batch import Batch
    from ..core.session import Session


__all__ = ["install_default_view", "run_map", "run_map_blocking"]


class _Parser(argparse.ArgumentParser):
    line = ""

    def error(self, message: str) -> Any:  # argparse would exit the process
        raise UsageError(str(usage_error("map", self.line, message))) from None


def _parser() -> _Parser:
    parser = _Parser(prog="%agent map", add_help=False)
    parser.add_argument("--over", required=True)
    parser.add_argument("-o", "--output")
    parser.add_argument("-m", "--model")
    parser.add_argument("--approve")
    parser.add_argument("--concurrency", type=int)
    parser.add_argument("--timeout", type=float)
    parser.add_argument("--max-steps", type=int)
    parser.add_argument("--schema")
    parser.add_argument("--checkpoint")
    parser.add_argument("--resume")
    parser.add_argument("--engine")
    parser.add_argument("--tools")
    return parser


def _split(text: str) -> tuple[list[str], str]:
    """The option tokens of the text after ``map`` and the template (the rest, quotes
    removed)."""
    rest = text.strip()
    tokens: list[str] = []
    while rest.startswith("-"):
        match = re.match(r"(\S+)\s*", rest)
        assert match is not None
        token = match.group(1)
        rest = rest[match.end() :]
        if token == "--":
            break
        tokens.append(token)
        if "=" not in token:
            value = re.match(r"(\S+)\s*", rest)
            if value is None:
                raise UsageError(f"%agent map: {token} needs a value")
            tokens.append(value.group(1))
            rest = rest[value.end() :]
    template = rest.strip()
    if len(template) >= 2 and template[0] == template[-1] and template[0] in "\"'":
        template = template[1:-1]
    return tokens, template


def _lookup(namespace: dict[str, Any], name: str, what: str) -> Any:
    if name not in namespace:
        raise UsageError(f"%agent map: {what} {name!r} is not a variable of this notebook")
    return namespace[name]


def _approver(flag: str | None) -> str:
    value = flag or os.environ.get("NBAGENT_APPROVAL", "").strip() or "deny"
    key = value.strip().lower()
    if key not in ("auto", "deny"):
        raise UsageError(
            f"%agent map: approval {value!r} cannot be used for a batch (nobody can click for "
            "every run): use --approve auto or --approve deny"
        )
    return key


def _namespace(shell: Any) -> dict[str, Any]:
    namespace: dict[str, Any] = shell.user_ns
    return namespace


def _approval_source(flag: str | None) -> str:
    if flag:
        return "--approve"
    return "NBAGENT_APPROVAL" if os.environ.get("NBAGENT_APPROVAL", "").strip() else "default"


def _offers_kernel_tools(session: Session, tools: list[str] | None) -> bool:
    kit = session.kernel
    if kit is None:
        return False
    return any(session.tools.get(t.name) is t and (tools is None or t.name in tools) for t in kit)


def _prepare(
    session: Session, shell: Any, text: str, cell: str | None
) -> tuple[Batch, str | None, Tally] | None:
    """Parse one ``%agent map`` (``text``: what follows ``map``), check it against the course
    policy, build its batch and show its view; nothing runs yet. None when the policy refused
    it (the cell shows why, with the refusal's record)."""
    from ...agent import Agent
    from ...batch import Batch
    from ..core.frontend import awaiting_cells_take_clicks, detect, widgets_available
    from ..policy.courseadmit import admit_map
    from .mapview import MapView

    namespace = _namespace(shell)
    tokens, template = _split(text)
    parser = _parser()
    parser.line = f"map {text}"
    args = parser.parse_args(tokens)
    if cell is not None and cell.strip():
        template = f"{template}\n{cell.strip()}" if template else cell.strip()
    if args.output is not None and (
        not args.output.isidentifier() or keyword.iskeyword(args.output)
    ):
        raise UsageError(f"%agent map: -o needs a variable name, not {args.output!r}")
    table = _lookup(namespace, args.over, "--over")
    options: dict[str, Any] = {"approver": _approver(args.approve)}
    for name in ("concurrency", "timeout", "max_steps", "checkpoint"):
        if getattr(args, name) is not None:
            options[name] = getattr(args, name)
    if args.schema:
        options["output"] = _lookup(namespace, args.schema, "--schema")
    if args.resume:
        options["resume"] = _lookup(namespace, args.resume, "--resume")
    if args.engine:
        options["engine"] = _lookup(namespace, args.engine, "--engine")
    if args.tools:
        options["tools"] = [t.strip() for t in args.tools.split(",") if t.strip()]
    title = f"{args.over}: {template}" if template else args.over
    admitted = admit_map(
        session,
        shell,
        prompt=f"map over {title}",
        spec=args.model or session.model_spec,
        approver=options["approver"],
        source=_approval_source(args.approve),
        kernel=_offers_kernel_tools(session, options.get("tools")),
    )
    if admitted is None:
        return None
    granted, spec = admitted
    model = spec if isinstance(spec, str) else None
    if model is None and options.get("engine") is not None:
        model = os.environ.get("NBAGENT_MODEL") or None
    if model is not None:
        options["model"] = model
    frontend = detect(shell)
    view = MapView(
        title,
        widgets=frontend.interactive and widgets_available(),
        stoppable=awaiting_cells_take_clicks()[0],
    )
    try:
        base = session.agent
        agent = Agent(
            session.generator,
            session.tool_list(),
            instructions=base.instructions,
            options=base.options,
            limits=base.limits,
            tool_timeout=base.tool_timeout,
        )
        batch = Batch(agent, table, template or None, progress=view, **options)
    except (NbagentError, OSError, TypeError) as exc:  # BatchInputError, a bad checkpoint …
        view.discard()
        raise UsageError(f"%agent map: {exc}") from None
    except BaseException:
        view.discard()
        raise
    counted = Tally()
    view.record = lambda progress: _record(granted, counted, batch, title, progress)
    view.show()
    return batch, args.output, counted


def _record(
    granted: Any, counted: Tally, batch: Batch, title: str, progress: Any
) -> dict[str, Any]:
    """The map's provenance, for its final output: what every row's requests spent (counted
    on the request path, helpers included), under which policy."""
    from ..policy.courserecord import map_record

    stopped = bool(progress.cancelled or progress.not_run)
    generator = batch.plan.agent.generator
    return map_record(granted.course, counted, f"map over {title}", generator,
                      progress.elapsed, stopped).to_metadata()  # fmt: skip


async def run_map(session: Session, shell: Any, text: str, cell: str | None = None) -> Any:
    """``%agent map`` awaited by its cell: returns the results table (None when the course
    policy refused it)."""
    prepared = _prepare(session, shell, text, cell)
    if prepared is None:
        return None
    batch, output, counted = prepared
    namespace = _namespace(shell)
    with tally(counted):  # every row's requests (and their helpers') count in it
        try:
            result = await batch.result()
        except asyncio.CancelledError:
            _keep(namespace, output, batch)
            from ..core.runner import CellInterrupted

            raise CellInterrupted("%agent map was stopped by a kernel interrupt") from None
    return _ended(namespace, output, batch, result)


def run_map_blocking(session: Session, shell: Any, text: str, cell: str | None = None) -> Any:
    """``%agent map`` where the cell cannot await (inside a function, an older IPython): the
    batch runs on a worker thread while the cell waits; an interrupt stops it."""
    prepared = _prepare(session, shell, text, cell)
    if prepared is None:
        return None
    batch, output, counted = prepared
    namespace = _namespace(shell)
    with tally(counted):
        result = _run_blocking(batch, namespace, output)
    return _ended(namespace, output, batch, result)


def _ended(namespace: dict[str, Any], output: str | None, batch: Batch, result: Any) -> Any:
    _keep(namespace, output, batch, result)
    if not output:
        from IPython.display import display

        display(result)  # type: ignore[no-untyped-call]
    return result


def _run_blocking(batch: Batch, namespace: dict[str, Any], output: str | None) -> Any:
    from ..._ground.threads import run_on_worker_loop

    def stop() -> None:
        batch.cancel()

    try:
        return run_on_worker_loop(batch.result, on_interrupt=stop)
    except KeyboardInterrupt:
        _keep(namespace, output, batch)
        raise


def _keep(namespace: dict[str, Any], output: str | None, batch: Batch, table: Any = None) -> None:
    if output:
        namespace[output] = table if table is not None else batch.table()


def install_default_view() -> None:
    """``agent.map(...)`` in a notebook cell shows its progress here (``progress="auto"``)."""
    from ...batch import set_default_reporter

    def factory() -> Any:
        try:
            from IPython import get_ipython
        except ImportError:  # pragma: no cover - IPython is there when this was installed
            return None
        shell = get_ipython()
        if shell is None or getattr(shell, "kernel", None) is None:
            return None
        from ..core.frontend import awaiting_cells_take_clicks, detect, widgets_available
        from .mapview import MapView

        interactive = detect(shell).interactive and widgets_available()
        view = MapView("agent.map", widgets=interactive, stoppable=awaiting_cells_take_clicks()[0])
        view.show()
        return view

    set_default_reporter(factory)
