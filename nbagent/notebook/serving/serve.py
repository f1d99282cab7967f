"""``%agent serve``: the notebook's tools (and with ``--kernel`` the kernel tools) over MCP.

The server (:mod:`nbagent.mcp._serving.server`) runs on a thread of its own, so cells run while it
serves; each call a client makes runs on the kernel's loop through nbagent's own call path
(:mod:`nbagent.loop._served`) and shows as a card in the serving cell, from the same events and
with the same widgets as a run's calls: arguments, previews, Approve / Deny / Edit, the rules
of ``%agent allow``, a snippet's namespace diff, and an Undo button under a snippet that
changed it. The cell's output becomes plain output and the serving's record when serving ends
(``%agent serve stop``, the Stop button, a kernel restart or shutdown), and a notebook saved
before that holds the card as it stood (:mod:`.savedform`), never a widget.

The line to paste into a client (with the bearer token) is shown once (:mod:`.connectionline`).
"""

from __future__ import annotations

import argparse
import asyncio
import html
import shlex
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..._ground.extras import missing
from ...approvals.approval import Approver, AutoApprove, DenyAll
from ...approvals.rules import RuleApprover
from ...events import AgentEvent, ToolFinished
from ...loop._served import ServedCalls
from ...mcp._serving.server import ServeError, ServeSettings, ToolServer, is_loopback
from ...redact import redact_secrets
from ..core.frontend import detect, widgets_available
from ..core.runner import kernel_loop
from ..live import outputs
from .connectionline import show_connection
from .servedrequests import ServingForms

if TYPE_CHECKING:
    from ...tools import Tool
    from ..core.session import Session

__all__ = ["ServedSession", "serve", "serve_command"]

#: MCP's hints for the kernel tools: looking is read-only, running code is not.
_KERNEL_HINTS = {
    "list_variables": {"readOnlyHint": True, "openWorldHint": False},
    "describe_variable": {"readOnlyHint": True, "openWorldHint": False},
    "run_python": {"readOnlyHint": False, "destructiveHint": True, "openWorldHint": True},
}
AUTO_SERVE_WARNING = (
    "--approve auto: every call a client with the token makes runs without asking you, "
    "run_python included when the kernel tools are served: its code runs in this kernel with "
    "your rights (your files, the network, every variable). Undo restores variables only."
)
_TICK = 0.2


class ServedSession:
    """What ``%agent serve`` started: the server, its calls, the view in its cell."""

    def __init__(
        self,
        session: Session,
        server: ToolServer,
        calls: ServedCalls,
        view: Any,
        *,
        kernel: bool,
        auto: bool,
        notebook: bool = False,
    ) -> None:
        self.session = session
        #: The notebook tools are served too, on the page of the serving cell.
        self.notebook = notebook
        self.server = server
        self.calls = calls
        self.view = view
        self.kernel = kernel
        self.auto = auto
        self._ticker: asyncio.Task[None] | None = None
        self._stopped = False
        self._lock = threading.Lock()
        self.started = time.monotonic()
        self.reason: str | None = None
        #: When serving ended (wall clock), for the finished output's "from … to …".
        self.ended_at: float | None = None
        #: Whether a call that needs approval can be approved (widgets to click, or auto).
        self.asks = True
        #: Takes the line with the token out of the cell (set while it is shown).
        self.hide_line: Callable[[], None] | None = None

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else "serving"
        return f"<nbagent {state} at {self.server.url}: {', '.join(self.tool_names())}>"

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def token(self) -> str:
        """The bearer token (its repr is hidden): for a client you configure from Python."""
        return self.server.token

    @property
    def running(self) -> bool:
        return not self._stopped and self.server.running

    def tool_names(self) -> list[str]:
        return [t.name for t in self.calls.listed()]

    def describe(self, *, counted: bool = True) -> str:
        """What is served, where and to whom (no token); ``counted``: with the calls so far
        (a status asked now, not a line that stays in the cell and goes stale)."""
        tools = ", ".join(self.tool_names()) or "no tools yet (define some with @nbagent.tool)"
        approval = "as in a run"
        if self.auto:
            approval = "without asking (--approve auto)"
        elif not self.asks:
            approval = "by your rules; calls that ask are denied (nobody can click here)"
        clients = self.calls.clients
        used = f"; used by {', '.join(clients[-4:])}" if clients else ""
        calls = ""
        transcript = getattr(self.view, "transcript", None)
        if counted and transcript is not None and transcript.serving is not None:
            calls = f"; {transcript.serving.counts(transcript)} so far"
        closed = sum(self.server.bounds.closed.values())
        if counted and closed:
            calls += (
                f"; {closed:,} connection{'s' if closed != 1 else ''} closed for their bounds "
                "(too slow, or without the token)"
            )
        return redact_secrets(  # a client's name is its own text
            f"serving over MCP at {self.url} (run {self.calls.id}): {tools}; approvals "
            f"{approval}{used}{calls}. `%agent serve stop` ends it."
        )

    def stop(self, reason: str = "stopped with %agent serve stop") -> None:
        """End serving: calls still waiting are cancelled (their cards say so), the line with
        the token leaves the cell, the cell's output becomes text."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self.reason = reason  # before the cell becomes text: its header says why it stopped
        self.ended_at = time.time()
        # the calls and the cell first, the server last: its shutdown can take a while, and a
        # kernel shutting down may exit before it returns (the cell must be text by then)
        self.calls.close(f"Serving stopped ({reason})")
        if self._ticker is not None:
            self._ticker.cancel()
        try:
            if self.hide_line is not None:
                self.hide_line()
            self._note_undone()
            self._record()  # before the view writes its final output, which carries it
            if not self.view.finished:
                self.view.close("finished")
            outputs.run_ended(self.view, static_segments=False)
        finally:
            if self.session.served is self:
                self.session.served = None
            self.server.stop()

    def _note_undone(self) -> None:
        """Each served snippet undone since it ran (its button, or ``%agent undo``) says so in
        its card, so that the finished output does not show the change as still there."""
        kit = self.session.kernel
        transcript = getattr(self.view, "transcript", None)
        if kit is None or transcript is None:
            return
        for snippet in kit.snippets(self.calls.id):
            record = transcript.calls.get(snippet.call_id)
            if snippet.undone and record is not None and not record.later:
                record.later.append("undone since: its changes to the namespace were put back")

    def _record(self) -> None:
        """The session's provenance onto its view, so the cell's final output carries it."""
        from ..policy.servedrecord import served_record

        try:
            self.view.provenance = served_record(self).to_metadata()
        except Exception as exc:  # the record must never cost the cell its outputs
            import logging

            logging.getLogger("nbagent").warning(
                "no provenance record for %s: %s", self.calls.id, redact_secrets(str(exc))
            )

    def connection_line(self, client: str = "claude") -> str:
        """The exact line (or snippet) to give ``client``, token included: show it only to the
        person who asked for it."""
        return client_config(client, self.url, self.token)


def client_config(client: str, url: str, token: str) -> str:
    """How ``client`` connects to ``url`` with ``token`` (see docs/howto/serve.md)."""
    header = f"Authorization: Bearer {token}"
    if client == "claude":
        return f'claude mcp add --transport http nbagent {url} --header "{header}"'
    if client == "json":
        import json

        return json.dumps(
            {
                "mcpServers": {
                    "nbagent": {
                        "type": "http",
                        "url": url,
                        "headers": {"Authorization": f"Bearer {token}"},
                    }
                }
            }
        )
    if client == "inspector":
        return (
            f"npx @modelcontextprotocol/inspector --cli {url} --transport http "
            f'--header "{header}" --method tools/list'
        )
    raise ValueError(f"unknown client {client!r}: claude, json or inspector")


# --- starting -----------------------------------------------------------------------------------


def _served_tools(session: Session, kernel: bool, notebook: bool = False) -> dict[str, Tool]:
    """The tools served now: the notebook's, and the kernel tools (with MCP's hints) and the
    notebook tools (their own hints: .editing) when asked; read at every list and call."""
    from ..toolkit.kernelview import toolkit

    tools = dict(session.tools)
    kit_names = set(session.kernel.names) if session.kernel is not None else set()
    if session.notebook is not None:
        kit_names |= {t.name for t in session.notebook if tools.get(t.name) is t}
    for name in kit_names:
        tools.pop(name, None)
    if kernel:
        for found in toolkit(session):
            tools[found.name] = _hinted(found)
    if notebook and session.notebook is not None:
        tools.update((t.name, t) for t in session.notebook)
    return tools


_hinted_cache: dict[int, Any] = {}


def _hinted(found: Tool) -> Tool:
    cached = _hinted_cache.get(id(found))
    if cached is not None and cached[0] is found:
        return cached[1]  # type: ignore[no-any-return]
    options = dict(found.provider_options or {})
    mcp = dict(options.get("mcp") or {})
    mcp.setdefault("annotations", _KERNEL_HINTS.get(found.name, {}))
    options["mcp"] = mcp
    made = replace(found, provider_options=options)
    _hinted_cache[id(found)] = (found, made)
    return made


def serve(
    session: Session,
    *,
    kernel: bool = False,
    approve: str | None = None,
    port: int = 0,
    expose: str | None = None,
    settings: ServeSettings | None = None,
    notebook: bool = False,
) -> ServedSession:
    """Start serving (see the module); if already serving, the session serving now.
    ``notebook``: the notebook tools too, on the notebook open in the page whose cell serves
    (each proposal a card in the serving cell, as in a run)."""
    found = session.served
    if found is not None and found.running:
        return found  # type: ignore[no-any-return]
    if approve not in (None, "ask", "auto"):
        raise ValueError("approve: 'ask' or 'auto'")
    lacking = missing("mcp", "%agent serve")
    if lacking is not None:  # before anything shows in the cell
        raise ServeError(lacking)
    shell = session.shell
    from ..policy.courseadmit import admit_serving

    refusal = admit_serving(
        session, shell, prompt="%agent serve", kernel=kernel, auto=approve == "auto",
        notebook=notebook,
    )  # fmt: skip
    if refusal is not None:  # the cell says why, with the refusal's record
        raise refusal
    frontend = detect(shell)
    interactive = frontend.interactive and widgets_available()
    auto = approve == "auto"
    fallback: Approver
    if auto:
        fallback = AutoApprove()
    elif interactive:
        fallback = session.approver
    else:
        fallback = DenyAll(
            "nobody can approve calls here (no widgets to click): serve with --approve auto, "
            "or allow the tool with %agent allow"
        )
    approver = RuleApprover(session.rules, fallback=fallback)
    host = expose or "127.0.0.1"
    if settings is None:
        settings = ServeSettings(host=host, port=port, expose=expose is not None)
    if auto:
        outputs.note(AUTO_SERVE_WARNING)
    if not is_loopback(settings.host):
        outputs.note(
            f"serving on {settings.host}, not only on this machine: anyone who can reach it and "
            "holds the token may ask for these tools"
            + (" and run code in this kernel (run_python)" if kernel else "")
        )
    served_holder: list[ServedSession] = []

    def stop_clicked() -> None:
        if served_holder:
            served_holder[0].stop("stopped with the Stop button")

    forms = ServingForms()
    view = _make_view(
        forms, interactive, fallback if fallback is session.approver else None, stop_clicked
    )
    loop = kernel_loop()
    if notebook:
        from ..editing.tools import serve_notebook

        serve_notebook(session, shell, frontend)
    calls = ServedCalls(
        lambda: _served_tools(session, kernel, notebook),
        approver,
        lambda event: None,
        loop=loop,
        agent=session.agent,
        label="tool calls from an MCP client",
        budget=getattr(session.agent, "budget", None),  # all the session's calls together
    )
    calls._sink = lambda event: _show(served_holder, view, event)
    transcript = getattr(view, "transcript", None)
    if transcript is not None:  # its outputs are the session's, by its id (course.shown)
        transcript.run_id = calls.id
    server = ToolServer(calls, settings)
    try:
        server.start()
    except ServeError:
        raise
    served = ServedSession(
        session, server, calls, view, kernel=kernel, auto=auto, notebook=notebook
    )
    served.asks = interactive or auto  # whether a call that asks reaches a person (or auto)
    forms.served = served
    if hasattr(view, "refresh_header"):
        view.refresh_header()  # it said "starting" until now
    served_holder.append(served)
    session.served = served
    session.served_sessions = [*getattr(session, "served_sessions", [])[-99:], served]
    if kernel:
        toolkit_names = ", ".join(_KERNEL_HINTS)
        outputs.note(f"with the kernel tools ({toolkit_names}): run_python asks you each time")
    if notebook:
        outputs.note(
            "with the notebook tools: each change a client proposes is a card here, with its "
            "diff, that you accept or reject"
        )
    if interactive:
        outputs.show_live(view, f"nbagent-serve-{uuid.uuid4().hex}")
        view.keep_saved(now=True)  # a notebook saved from now on holds no widget here
        show_connection(served)

        async def tick() -> None:
            while True:
                await asyncio.sleep(_TICK)
                view.tick()

        served._ticker = loop.create_task(tick())
    else:
        print(
            f"serving over MCP at {served.url}; the bearer token is in "
            "nbagent.serve().token (it is never printed)"
        )
    return served


def _make_view(forms: ServingForms, interactive: bool, approver: Any, on_stop: Any) -> Any:
    if interactive:
        from .servingview import ServingView

        return ServingView(forms, approver=approver, on_stop=on_stop)
    from ..saved.textview import TextView

    view = TextView("tool calls from an MCP client")
    view.transcript.serving = forms
    return view


def _show(holder: list[ServedSession], view: Any, event: AgentEvent) -> None:
    """One event into the serving cell's view; a snippet that changed the namespace gets an
    Undo button under its card."""
    view.handle(event)
    if isinstance(event, ToolFinished) and event.call.name == "run_python" and holder:
        _offer_undo(holder[0], view, event)
    fold = getattr(view, "fold", None)
    if callable(fold) and isinstance(event, ToolFinished):
        fold()  # a long session keeps the cards of its latest calls (see ServingForms.fold)


def _offer_undo(served: ServedSession, view: Any, event: ToolFinished) -> None:
    kit = served.session.kernel
    if kit is None or not hasattr(view, "add_under"):
        return
    step = next((s for s in kit.snippets(served.calls.id) if s.call_id == event.call.id), None)
    if step is None or not step.diff or step.undone:
        return
    import ipywidgets as widgets

    names = sorted({c.name for c in step.diff.changes})
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    button = widgets.Button(
        description="Undo this call's changes",
        icon="undo",
        tooltip=f"put back {shown} as they were before this call",
        layout=widgets.Layout(width="auto", min_width="fit-content"),
    )
    note = widgets.HTML(
        '<div style="font-size:0.85em;opacity:0.7">'
        f"changed {html.escape(redact_secrets(shown))} (or "
        f"<code>%agent undo {served.calls.id} step {step.step}</code>)</div>"
    )
    box = widgets.HBox([button, note])

    def clicked(_button: Any) -> None:
        report = kit.undo([served.calls.id], step=step.step)
        record = getattr(view, "transcript", None) and view.transcript.calls.get(event.call.id)
        if record is not None:  # the finished output says it too
            record.later.extend(redact_secrets(line)[:500] for line in report.lines()[:20])
        button.disabled = True
        button.layout.display = "none"
        note.value = (
            '<div style="font-size:0.85em">'
            + "<br>".join(html.escape(redact_secrets(line)) for line in report.lines())
            + "</div>"
        )

    button.on_click(clicked)
    view.add_under(event.call.id, box, [box, button, note])


# --- the magic ----------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="%agent serve", add_help=False, exit_on_error=False)
    parser.add_argument("--kernel", action="store_true")
    parser.add_argument("--notebook", action="store_true")
    parser.add_argument("--approve", choices=("ask", "auto"))
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--expose", metavar="ADDRESS")
    return parser


def serve_command(session: Session, _shell: Any, words: list[str]) -> None:
    """``%agent serve [options]``, ``%agent serve stop``."""
    from IPython.core.error import UsageError

    if words == ["stop"]:
        served = session.served
        if served is None or not served.running:
            print("nothing is served (start with %agent serve)")
            return
        url = served.url
        served.stop()
        print(f"stopped serving at {url}")
        return
    if words == ["status"] or (session.served is not None and session.served.running):
        served = session.served
        if served is None or not served.running:
            print("nothing is served (start with %agent serve)")
        else:
            if words and words != ["status"]:
                print("already serving (options given now are not applied):")
            print(served.describe())
        return
    try:
        args = _parser().parse_args(words)
    except (argparse.ArgumentError, SystemExit) as exc:
        raise UsageError(f"%agent serve {shlex.join(words)}: {exc}") from None
    if not 0 <= args.port <= 65535:
        raise UsageError("--port must be between 0 (a free one) and 65535")
    from ..policy.coursegate import CourseRefusal

    try:
        served = serve(
            session,
            kernel=args.kernel,
            approve=args.approve,
            port=args.port,
            expose=args.expose,
            notebook=args.notebook,
        )
    except CourseRefusal:
        return  # the course policy refused it: the cell shows its sentence and record
    except (ServeError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    if not hasattr(served.view, "widget"):  # a card's header says it, and keeps it current
        print(served.describe(counted=False))
