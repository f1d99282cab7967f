"""The terminal's parts in-process: reading lines, writing safely, rendering events, answers."""

from __future__ import annotations

import asyncio
import io
import os
import tempfile
import threading

import pytest

from nbagent import Agent, AutoApprove, ToolContext, tool
from nbagent.content import text_result
from nbagent.events import (
    CallStatus,
    RunCancelled,
    RunResult,
    StepFinished,
    ToolCallReady,
    ToolFinished,
    ToolProgress,
)
from nbagent.generation import Usage
from nbagent.models import Call, ScriptedModel, Turn
from nbagent.terminal import Console, TerminalLimits, TerminalView
from nbagent.terminal._console import HeldStream, clean, clean_strict, wants_color
from nbagent.terminal._input import InputInterrupted, LineReader, LineTooLong
from nbagent.terminal._session import parse_answer

from ..conftest import assert_history_valid
from .process import PATIENCE

# --- LineReader on a real pipe ---------------------------------------------------------------


async def test_lines_arrive_whole_across_chunks_and_end_with_none() -> None:
    read_fd, write_fd = os.pipe()
    reader = LineReader(read_fd)
    os.write(write_fd, b"first li")
    pending = asyncio.ensure_future(reader.read_line())
    await asyncio.sleep(0.01)
    assert not pending.done()  # half a line is not a line
    os.write(write_fd, "ne\r\nsecond é\nthird".encode())
    assert await pending == "first line"
    assert await reader.read_line() == "second é"
    os.close(write_fd)
    assert await reader.read_line() == "third"
    assert await reader.read_line() is None
    os.close(read_fd)


async def test_an_overlong_line_is_refused_and_the_next_one_read() -> None:
    read_fd, write_fd = os.pipe()
    reader = LineReader(read_fd, max_chars=10)
    os.write(write_fd, b"x" * 30)
    os.write(write_fd, b"y" * 30 + b"\nok\n")
    with pytest.raises(LineTooLong):
        await reader.read_line()
    assert await reader.read_line() == "ok"
    os.write(write_fd, b"z" * 11 + b"\n")
    with pytest.raises(LineTooLong):
        await reader.read_line()
    os.close(write_fd)
    assert await reader.read_line() is None
    os.close(read_fd)


async def test_a_wait_for_a_line_ends_at_once_on_interrupt() -> None:
    read_fd, write_fd = os.pipe()
    reader = LineReader(read_fd)
    pending = asyncio.ensure_future(reader.read_line())
    await asyncio.sleep(0.01)
    assert reader.waiting
    assert reader.interrupt()
    with pytest.raises(InputInterrupted):
        await pending
    assert not reader.interrupt()  # nobody waits any more
    os.write(write_fd, b"later\n")
    assert await reader.read_line() == "later"
    os.close(write_fd)
    os.close(read_fd)


async def test_a_regular_file_is_read_through_the_fallback() -> None:
    with tempfile.TemporaryFile() as file:  # epoll cannot watch a regular file
        file.write(b"one\ntwo")
        file.seek(0)
        reader = LineReader(file.fileno())
        assert [await reader.read_line() for _ in range(3)] == ["one", "two", None]


# --- Console --------------------------------------------------------------------------------


def test_clean_makes_controls_visible() -> None:
    assert clean("a\x1b[2Jb\rc\x07\td\n") == "a\\x1b[2Jbc\\x07\td\n"
    assert clean("\u202eevil") == "\\u202eevil"
    assert clean_strict("rm\u200b -rf") == "rm\\u200b -rf"
    assert clean("👩\u200d💻") == "👩\u200d💻"  # joiners stay in ordinary text


async def test_what_a_tool_prints_cannot_drive_the_terminal_either() -> None:
    # a tool may print what the model sent it: cursor up, erase the line, switch text off
    printed = "path A\x1b[1A\x1b[2K\x1b]0;t\x07 \x1b[8mhidden\rredrawn\n"
    for color, expected in (
        (False, "path A\\x1b[1A\\x1b[2K\\x1b]0;t\\x07 \\x1b[8mhidden\rredrawn\n"),
        (True, "path A\\x1b[1A\\x1b[2K\\x1b]0;t\\x07 \x1b[8mhidden\rredrawn\x1b[0m\n"),
    ):
        out = io.StringIO()
        console = Console(out, color=color)
        console.attach(asyncio.get_running_loop())
        HeldStream(console, out).write(printed)
        await asyncio.sleep(0)
        console.line("ours")
        console.attach(None)
        assert out.getvalue() == expected + "ours\n"  # colors stay, reset before our lines


def test_text_a_stream_cannot_encode_is_replaced_and_the_stream_is_not_lost() -> None:
    raw = io.BytesIO()
    strict = io.TextIOWrapper(raw, encoding="ascii", errors="strict")
    console = Console(strict)
    console.line("caf\u00e9 \u4f60")
    console.line("next")
    assert console.lost is None
    assert raw.getvalue() == b"caf? ?\nnext\n"


def test_wants_color_only_on_a_terminal_without_no_color() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert wants_color(Tty(), {})
    assert not wants_color(Tty(), {"NO_COLOR": "1"})
    assert not wants_color(io.StringIO(), {})


def test_reasoning_is_prefixed_per_line_without_color() -> None:
    out = io.StringIO()
    console = Console(out)
    console.stream("reasoning", "a\nb")
    console.stream("reasoning", "c\n")
    console.stream("text", "answer")
    console.line("done")
    assert out.getvalue() == "thinking: a\nthinking: bc\nanswer\ndone\n"


async def test_outside_output_waits_for_the_answer_and_is_bounded() -> None:
    out = io.StringIO()
    console = Console(out, max_held_chars=10)
    console.attach(asyncio.get_running_loop())
    held = HeldStream(console, out)
    console.ask("? ")
    held.write("0123456789abcdef\n")
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert out.getvalue() == "? "
    console.answered("y")
    await asyncio.sleep(0)
    assert out.getvalue() == ("? y\n0123456789\n(7 characters of tool output were dropped)\n")
    console.attach(None)


async def test_a_question_never_splits_a_tools_line() -> None:
    out = io.StringIO()
    console = Console(out)
    console.attach(asyncio.get_running_loop())
    held = HeldStream(console, out)
    held.write("chatty says")  # print() writes the text, then the newline: a gap between
    await asyncio.sleep(0)
    console.ask("? ")
    held.write(" hi\n")
    await asyncio.sleep(0)
    assert out.getvalue() == "? "
    console.answered("y")
    await asyncio.sleep(0)
    assert out.getvalue() == "? y\nchatty says hi\n"
    console.attach(None)


async def test_an_unfinished_line_is_passed_on_when_flushed_or_at_the_end() -> None:
    out = io.StringIO()
    console = Console(out)
    console.attach(asyncio.get_running_loop())
    held = HeldStream(console, out)
    held.write("working 50%")
    await asyncio.sleep(0)
    assert out.getvalue() == ""  # a line-buffered terminal would not show it yet either
    held.flush()
    await asyncio.sleep(0)
    assert out.getvalue() == "working 50%"
    held.write(" 100%")
    console.line("→ next")  # our line starts on its own line
    console.attach(None)  # the end: what is left is shown
    assert out.getvalue() == "working 50%\n→ next\n 100%"


async def test_notes_from_a_thread_wait_for_a_question_but_not_for_the_prompt() -> None:
    import threading

    out = io.StringIO()
    console = Console(out)
    console.attach(asyncio.get_running_loop())

    def from_a_thread(text: str) -> None:
        thread = threading.Thread(target=console.note, args=(text,))
        thread.start()
        thread.join()

    console.ask("  ? Run it? ")
    from_a_thread("  (first ended)")
    await asyncio.sleep(0)
    assert out.getvalue() == "  ? Run it? "
    console.answered("n")
    await asyncio.sleep(0)
    assert out.getvalue() == "  ? Run it? n\n  (first ended)\n"
    console.ask("you> ", interruptible=True)
    from_a_thread("  (second ended)")
    await asyncio.sleep(0)
    assert out.getvalue().endswith("  (first ended)\nyou> \n  (second ended)\nyou> ")
    console.answered("check")
    assert out.getvalue().endswith("\n  (second ended)\nyou> check\n")
    console.attach(None)


# --- answers ---------------------------------------------------------------------------------


def test_answers() -> None:
    assert parse_answer("Y").approved and not parse_answer("y").always
    assert parse_answer(" always ").always and parse_answer("a").approved
    assert parse_answer("") == parse_answer("no") == parse_answer("N")
    assert not parse_answer("").approved and parse_answer("").reason is None
    denied = parse_answer("yes please, but not now")
    assert not denied.approved and denied.reason == "yes please, but not now"


# --- TerminalView on a real run ------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_progress_is_shown_at_a_bounded_rate() -> None:
    out = io.StringIO()
    clock = Clock()
    view = TerminalView(Console(out), TerminalLimits(progress_interval=1.0), clock=clock)
    for index in range(10):
        clock.now = index * 0.25
        view.show(ToolProgress("call_1", text_result(f"{index}"), clock.now))
    shown = [line.split(": ")[1].split(" (")[0] for line in out.getvalue().splitlines()]
    assert shown == ["0", "4", "8"]


def test_a_length_stop_is_explained() -> None:
    out = io.StringIO()
    TerminalView(Console(out)).show(StepFinished(1, Usage(), "length", 0))
    assert "output token limit" in out.getvalue()


async def test_a_whole_run_renders_in_order() -> None:
    @tool
    async def work(context: ToolContext) -> str:
        """Work."""
        context.update(0.5)
        return "worked\nsecond line"

    agent = Agent(
        ScriptedModel([Turn("Working.", Call("work")), "All done."]),
        [work],
        approver=AutoApprove(),
    )
    out = io.StringIO()
    view = TerminalView(Console(out))
    async for event in agent.stream("go"):
        view.show(event)
    lines = out.getvalue().splitlines()
    assert lines[:5] == [
        "Working.",
        "→ work()",
        "  … work: 50% (0.0 s)",
        "  ← worked",
        "    second line",
    ]
    assert lines[5] == "All done."
    assert lines[6].startswith("[done · 2 steps · ")


def _finished(call_id: str, name: str, status: CallStatus, text: str) -> ToolFinished:
    from nbagent.content import error_result
    from nbagent.tools import ToolCall

    return ToolFinished(ToolCall(call_id, name, "{}"), error_result(text), status)


def test_calls_answered_as_cancelled_are_one_line_with_the_runs_end() -> None:
    out = io.StringIO()
    view = TerminalView(Console(out))
    result = RunResult("", (), 1, Usage(), "cancelled")
    view.show(_finished("c1", "remove", "cancelled", "the run was cancelled before this call"))
    view.show(_finished("c2", "search", "cancelled", "the run was cancelled before this call"))
    view.show(_finished("c3", "search", "cancelled", "the run was cancelled before this call"))
    view.show(RunCancelled(result))
    lines = out.getvalue().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].endswith(
        "(every pending call was answered as cancelled: remove, search (2 calls))"
    )


def test_a_call_cancelled_while_the_run_goes_on_is_shown_on_its_own() -> None:
    from nbagent.tools import ToolCall

    out = io.StringIO()
    view = TerminalView(Console(out))
    view.show(ToolCallReady(1, ToolCall("c1", "remove", "{}"), {}))
    view.show(ToolCallReady(1, ToolCall("c2", "search", "{}"), {}))
    view.show(_finished("c1", "remove", "cancelled", "remove was cancelled."))
    assert out.getvalue().count("\n") == 2  # the run's end may follow, and would say it
    view.show(_finished("c2", "search", "done", "found"))
    view.show(RunCancelled(RunResult("", (), 1, Usage(), "cancelled")))
    lines = out.getvalue().splitlines()
    assert lines[:4] == [
        "→ remove()",
        "→ search()",
        "  ✗ remove(): remove was cancelled.",
        "  ← search(): found",
    ]
    assert lines[4].startswith("✗ cancelled · ") and "every pending call" not in lines[4]


# --- Session in-process ----------------------------------------------------------------------


async def test_a_question_is_withdrawn_when_its_approval_times_out() -> None:
    from nbagent import InteractiveApprover
    from nbagent.terminal._session import Session

    @tool(needs_approval=True)
    def remove(path: str) -> str:
        """Remove a file (pretend)."""
        return f"removed {path}"

    approver = InteractiveApprover()
    agent = Agent(
        ScriptedModel([Turn(Call("remove", {"path": "a.txt"})), "Fine."]),
        [remove],
        approver=approver,
        approval_timeout=0.05,
    )
    out = io.StringIO()
    read_fd, write_fd = os.pipe()  # nobody types: only the timeout can settle the call
    session = Session(
        agent, TerminalView(Console(out)), LineReader(read_fd), approver=approver, echo_input=True
    )
    status = await asyncio.wait_for(session.serve(["go"]), PATIENCE)
    os.close(read_fd)
    os.close(write_fd)
    assert status == 0
    lines = out.getvalue().splitlines()
    question = next(i for i, line in enumerate(lines) if line.startswith("  ? Run remove("))
    assert lines[question].endswith("or type why not: ")
    assert lines[question + 1] == "  (no answer needed any more: this call was settled without it)"
    assert lines[question + 2] == "  ✗ denied: approval timed out after 0.05 s"
    assert "Fine." in lines
    assert_history_valid(agent.messages)


async def test_a_rendering_bug_cancels_the_run_and_is_reported() -> None:
    from nbagent.models import Pause
    from nbagent.terminal._session import Session

    class BrokenView(TerminalView):
        def _on_ToolCallReady(self, event: object) -> None:
            raise RuntimeError("cannot draw this")

    never = threading.Event()

    @tool
    def noop() -> str:
        """Nothing, until the run that called it is cancelled (then it is abandoned): the
        cancel must land first whatever the loop's number of turns before a result is taken."""
        never.wait(10)
        return "ok"

    agent = Agent(ScriptedModel([Turn(Call("noop"), Pause(0.05))]), [noop])
    out, err = io.StringIO(), io.StringIO()
    read_fd, write_fd = os.pipe()
    session = Session(
        agent, BrokenView(Console(out, err)), LineReader(read_fd), approver=None, echo_input=True
    )
    assert await session.serve(["go"]) == 1
    assert err.getvalue() == (
        "error: the terminal could not show the run, so it was cancelled: "
        "RuntimeError: cannot draw this\n"
    )
    assert not agent._running  # the run ended; the agent takes the next prompt
    assert_history_valid(agent.messages)
    assert agent.messages[-1].results[0].is_error  # type: ignore[union-attr]
    never.set()
    os.close(read_fd)
    os.close(write_fd)


# --- the package surface -------------------------------------------------------------------


def test_public_names_resolve_and_importing_stays_cheap() -> None:
    import subprocess
    import sys

    import nbagent.terminal as terminal

    assert terminal.__all__ == sorted(terminal.__all__)
    for name in terminal.__all__:
        assert getattr(terminal, name) is not None, name
        assert name in dir(terminal)
    code = (
        "import sys, nbagent.terminal\n"
        "heavy = ('asyncio', 'nbagent.agent', 'httpx2', 'IPython', 'ipywidgets')\n"
        "print(','.join(m for m in heavy if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "", done.stdout


async def test_hooks_and_rules_show_what_they_changed() -> None:
    from nbagent import RuleApprover
    from nbagent.approvals.hooks import veto

    @tool(needs_approval=True)
    def save(path: str) -> str:
        """Save."""
        return f"saved {path} for alice@example.com"

    def into_data(call, arguments):  # type: ignore[no-untyped-def]
        if arguments["path"] == "/etc":
            return veto("not there")
        return {"path": "data/" + arguments["path"]}

    approver = RuleApprover(fallback=AutoApprove())
    approver.allow("save", path="data/*")
    agent = Agent(
        ScriptedModel([Turn(Call("save", {"path": "a"}), Call("save", {"path": "/etc"})), "ok"]),
        [save],
        approver=approver,
        before_tool=[into_data],
        after_tool=[lambda call, args, result: result.text.replace("alice@example.com", "[email]")],
    )
    out = io.StringIO()
    view = TerminalView(Console(out))
    async for event in agent.stream("go"):
        view.show(event)
    text = out.getvalue()
    assert 'changed by the hook into_data: now save(path="data/a")' in text
    assert "allowed by rule: allow save path=data/*" in text
    assert "before-tool hook into_data vetoed: not there" in text
    assert "after-tool hook <lambda> rewrote the result" in text
    assert "← saved data/a for alice@example.com" in text  # the person sees the tool's own


async def test_a_helper_agents_call_is_asked_in_the_terminal_too() -> None:
    from nbagent import InteractiveApprover
    from nbagent.terminal._session import Session

    ran: list[str] = []

    @tool(needs_approval=True)
    def remove(path: str) -> str:
        """Remove a file (pretend)."""
        ran.append(path)
        return f"removed {path}"

    helper = Agent(
        ScriptedModel([Turn(Call("remove", {"path": "a.txt"})), "Removed it."]),
        [remove],
        name="cleaner",
        description="Cleans up.",
    )
    approver = InteractiveApprover()
    agent = Agent(
        ScriptedModel([Turn(Call("cleaner", {"prompt": "remove a.txt"})), "All clean."]),
        [helper],
        approver=approver,
    )
    out = io.StringIO()
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"y\n")  # the person's answer, waiting for the question
    session = Session(
        agent, TerminalView(Console(out)), LineReader(read_fd), approver=approver, echo_input=True
    )
    status = await asyncio.wait_for(session.serve(["go"]), PATIENCE)
    os.close(read_fd)
    os.close(write_fd)
    assert status == 0 and ran == ["a.txt"]
    lines = out.getvalue().splitlines()
    # asked under the call that runs the helper, indented like the rest of its run
    assert any(line.startswith("  │   ? Run remove(") for line in lines), lines
    assert '  │ → remove(path="a.txt")' in lines and "  │ Removed it." in lines
    assert "All clean." in lines
    assert_history_valid(agent.messages)
