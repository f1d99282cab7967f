"""``python -m nbagent``: arguments, help, the banner, and the process around a session."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..agent import Agent
    from ._console import Console
    from ._view import TerminalLimits

__all__ = ["build_parser", "main"]

DESCRIPTION = """\
Talk to an agent in the terminal. The model's answer streams in; each tool call is shown with
its arguments; a call that needs approval waits for your answer.

With no prompt, nbagent starts an interactive session: type a prompt after "you>". Ctrl-C stops
a run (at once, even at a question or while a tool runs) and brings you back to the prompt;
Ctrl-D, or Ctrl-C at the prompt, quits. With prompts on the command line it runs them in
order, without the banner, and exits.

Without --model (or NBAGENT_MODEL) nbagent uses its offline stand-in: not an LLM, it calls the
tools your prompt names with values taken from the prompt (quote strings), so everything works
with no key and no network.
"""

EPILOG = """\
tools:
  Without --tools you get three demo tools: add, delete_file (asks first) and countdown
  (slow, with progress). --tools imports a module or a .py file and registers every
  nbagent.Tool defined at its top level, or only the attribute named after a colon (a Tool
  or a list of Tools). A tools module may also set nbagent_model to a Generator (such as a
  ScriptedModel), used when --model is not given. Repeat --tools to combine modules.

approvals (--approve ask):
  y runs the call, a runs it and allows that tool for the rest of the session, n or Enter
  denies it, and any other text denies it with that text as the reason the model reads.

examples:
  python -m nbagent                                  interactive, demo tools, offline model
  python -m nbagent 'add 2 and 3'                    one prompt, then exit
  python -m nbagent 'delete_file "old.log"' 'add 1 and 2'
  python -m nbagent -m openai:gpt-4.1-mini           a real model (set OPENAI_API_KEY)
  python -m nbagent -m ollama:qwen2.5                a local model through Ollama, no key
  python -m nbagent -m local:smollm2                 a tiny model in this process (the local extra)
  python -m nbagent --tools my_tools.py              your tools instead of the demo ones
  python -m nbagent --tools mypkg.tools:TOOLS --approve auto 'tidy up'
  NO_COLOR=1 python -m nbagent                       no colors (they are off when piped too)
  python -m nbagent report submissions/              the class report (a teacher's; see
                                                     report --help); a prompt that starts
                                                     with "report" goes after --

exit status:
  0 all runs done, 1 a run failed (or the output could not be written), 2 bad arguments or
  setup, 130 interrupted with Ctrl-C, 141 the output's reader left (a closed pipe, as | head).
"""


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m nbagent``."""
    parser = argparse.ArgumentParser(
        prog="nbagent",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "prompt", nargs="*", help="prompts to run in order (none: an interactive session)"
    )
    parser.add_argument(
        "-m",
        "--model",
        metavar="MODEL",
        help="provider:model, e.g. openai:gpt-4.1-mini, openai-responses:gpt-5-mini, "
        "anthropic:claude-sonnet-4-5, ollama:qwen2.5, local:smollm2, or offline "
        "(default: $NBAGENT_MODEL, else offline)",
    )
    parser.add_argument(
        "--tools",
        action="append",
        default=[],
        metavar="MODULE[:ATTR]",
        help="register the tools of a module or a path/to/file.py (repeatable; replaces the "
        "demo tools)",
    )
    parser.add_argument("--instructions", metavar="TEXT", help="system instructions for the model")
    parser.add_argument(
        "--approve",
        choices=["ask", "auto", "deny"],
        default="ask",
        help="calls that need approval: ask me (default), run them all, or deny them all",
    )
    parser.add_argument(
        "--max-steps", type=int, default=10, metavar="N", help="model turns per run (default 10)"
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="no banner in an interactive session"
    )
    parser.add_argument(
        "--debug", action="store_true", help="show tracebacks of failed imports, tools and runs"
    )
    return parser


def _error(message: str, exc: BaseException | None = None, *, debug: bool = False) -> None:
    from ..redact import redact_secrets
    from ._console import clean

    try:  # where even the error cannot be written, the status says it
        if sys.stdout is not None:
            sys.stdout.flush()
        err = sys.stderr or sys.stdout
        print(f"nbagent: error: {clean(redact_secrets(message))}", file=err)
        if exc is not None:
            if debug:
                from .._ground.formatting import traceback_text

                trace = traceback_text(exc)  # bounded: the person's exception, often
                print(clean(redact_secrets(trace)), end="", file=err)
            else:
                print("(run with --debug for the traceback)", file=err)
        if err is not None:
            err.flush()
    except (OSError, ValueError):
        pass


def _model_label(agent: Agent, spec: str | None, from_module: bool) -> tuple[str, bool]:
    from ..models import OfflineModel

    generator = agent.generator
    if isinstance(generator, OfflineModel):
        return "the offline stand-in (not an LLM)", True
    name = str(getattr(generator, "model", "") or "")
    if from_module:
        return f"{name} ({type(generator).__name__}, from --tools)", False
    from ..providers import describe_config

    config = describe_config(spec)
    if config.get("provider") and config.get("model"):
        return f"{config['provider']}:{config['model']}", False
    return f"{name} ({type(generator).__name__})", False


def print_banner(
    console: Console, agent: Agent, model: tuple[str, bool], *, demo: bool, approve: str
) -> None:
    """What a person needs on start: the model, the tools, how approvals work, how to quit."""
    from ._console import clean_strict

    label, offline = model
    c = console
    c.line(c.style("nbagent", "bold") + f" · model: {clean_strict(label)}")
    if offline:
        c.line(
            "  it calls the tools your prompt names, with values from the prompt; for a real "
            "model use -m provider:model or NBAGENT_MODEL",
            "dim",
        )
    c.line("tools:" if agent.tools else "tools: none")
    width = max((len(name) for name in agent.tools), default=0)
    for name, one in agent.tools.items():
        rule = one.needs_approval
        asks = "" if rule is False else (" [asks first]" if rule is True else " [may ask]")
        about = " ".join(clean_strict(one.description or "").split())
        about = about if len(about) <= 70 else about[:69] + "…"
        c.line(f"  {clean_strict(name).ljust(width)}  {about}" + c.style(asks, "yellow"))
    if demo:
        c.line("  (demo tools: bring your own with --tools my_tools.py)", "dim")
    if approve == "ask":
        c.line(
            "approvals: a call marked [asks first] waits for you: y runs it, a always allows "
            "that tool, n or Enter denies it, other text denies it with that reason"
        )
    elif approve == "auto":
        c.line("approvals: --approve auto, every call runs without asking")
    else:
        c.line("approvals: --approve deny, every call that needs approval is denied")
    c.line("Ctrl-C stops a run; Ctrl-D (or Ctrl-C at the prompt) quits.", "dim")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m nbagent`` / ``nbagent``; returns the exit status.

    Meant to be the process's last act: when a tool function the loop abandoned (it ignored a
    cancel) is still running, or after a second Ctrl-C, it ends the process at once
    (``os._exit``) instead of waiting for that function, and says so.

    ``report FOLDER…`` is the class report (:mod:`nbagent.course.report`), not a prompt: a
    prompt that starts with the word ``report`` goes after ``--``.
    """
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["report"]:
        from ..course.report import main as report_main

        return report_main(words[1:])
    args = build_parser().parse_args(argv)
    try:
        return _main(args)
    except KeyboardInterrupt:  # before the session took over Ctrl-C (imports, setup)
        print("\ninterrupted", file=sys.stderr)
        return 130


def _main(args: argparse.Namespace, limits: TerminalLimits | None = None) -> int:
    from ..errors import NbagentError
    from ._loading import LoadedTools, ToolsLoadError, load_tools

    if args.max_steps < 1:
        _error("--max-steps must be at least 1")
        return 2
    loaded = LoadedTools()
    try:
        if args.tools:
            load_tools(args.tools, loaded)
    except ToolsLoadError as exc:
        _error(str(exc), exc.__cause__, debug=args.debug)
        return 2

    from ..agent import Agent
    from ..approvals.approval import InteractiveApprover, approval_policy
    from ._demo import demo_tools

    tools = loaded.tools if args.tools else demo_tools()
    approver: Any = approval_policy(args.approve)
    model: Any = args.model if args.model is not None else loaded.model
    try:
        agent = Agent(
            model,
            tools,
            instructions=args.instructions,
            approver=approver,
            max_steps=args.max_steps,
        )
    except (NbagentError, ValueError, TypeError) as exc:
        from .._ground.formatting import error_text

        _error(error_text(exc), exc if args.debug else None, debug=args.debug)
        return 2
    label = _model_label(agent, args.model, model is not None and args.model is None)
    interactive = not args.prompt
    asks = approver if isinstance(approver, InteractiveApprover) else None
    return _serve(args, agent, asks, label, interactive, limits)


def _serve(
    args: argparse.Namespace,
    agent: Agent,
    approver: Any,
    label: tuple[str, bool],
    interactive: bool,
    limits: TerminalLimits | None,
) -> int:
    import asyncio

    from ._console import Console, HeldStream, clean_strict, wants_color
    from ._input import LineReader
    from ._session import Session
    from ._view import TerminalLimits, TerminalView

    limits = limits or TerminalLimits()
    out, err = sys.stdout, sys.stderr
    if out is None:  # started with standard output closed (>&-)
        _error("standard output is closed: there is nowhere to show the runs")
        return 2
    if err is None:
        err = out
    if hasattr(out, "reconfigure"):
        out.reconfigure(errors="replace")  # text the locale cannot encode must not crash a run
    console = Console(out, err, color=wants_color(out), max_held_chars=limits.max_held_chars)
    view = TerminalView(console, limits, debug=args.debug)
    fd = _stdin_fd()
    encoding = getattr(sys.stdin, "encoding", None) or "utf-8"
    reader = LineReader(fd, max_chars=limits.max_input_chars, encoding=encoding)
    session = Session(
        agent,
        view,
        reader,
        approver=approver,
        echo_input=not _isatty(fd),
        show_prompts=len(args.prompt) > 1,
    )
    if interactive and not args.quiet:
        print_banner(console, agent, label, demo=not args.tools, approve=args.approve)
    if not _load_model(console, agent, debug=args.debug):
        return 2
    loop = asyncio.new_event_loop()
    sys.stdout, sys.stderr = HeldStream(console, out), HeldStream(console, err)
    try:
        status = loop.run_until_complete(session.serve(None if interactive else args.prompt))
    except KeyboardInterrupt:
        status = 130
    finally:
        sys.stdout, sys.stderr = out, err
    if console.lost is not None:
        _output_lost(console)
    still = view.still_running()  # tools the loop gave up on: their functions have not ended
    if not session.forced and not still:
        _close(loop)
    if session.forced or still:
        if still:
            names = list(dict.fromkeys(clean_strict(h.name) for h in still))
            them = "it, and it is" if len(names) == 1 else "them, and they are"
            print(
                f"(not waiting for {', '.join(names)}: the run gave up on {them} still running)",
                file=err,
            )
        console.flush(out)
        console.flush(err)
        os._exit(status)
    return status


def _output_lost(console: Console) -> None:
    """Say why the session ended early (a closed pipe needs no words), and point the broken
    stream at the null device so that the interpreter's last flush does not fail again."""
    lost, stream = console.lost, console.lost_stream
    if stream is not None:
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, stream.fileno())
            os.close(null)
        except (OSError, ValueError, AttributeError):
            pass
    if not isinstance(lost, BrokenPipeError):
        _error(f"the output could not be written ({lost}), so the run was stopped")


def _load_model(console: Any, agent: Agent, *, debug: bool) -> bool:
    """Load a model that loads once per process (``local:``) before the first prompt, saying so
    on stderr (a second or so; stdout stays the runs' own); False when it cannot load."""
    from ..errors import NbagentError

    generator = agent.generator
    load = getattr(generator, "load", None)
    if not callable(load) or getattr(generator, "loaded", True):
        return True
    console.line("loading the local model …", "dim", error=True)
    try:
        console.line(str(load()), "dim", error=True)
    except (NbagentError, OSError) as exc:
        _error(f"the local model could not load: {exc}", exc if debug else None, debug=debug)
        return False
    return True


def _close(loop: Any) -> None:
    import asyncio

    try:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()


def _stdin_fd() -> int:
    try:
        return sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):
        return os.open(os.devnull, os.O_RDONLY)  # no stdin at all: reads end at once


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False
