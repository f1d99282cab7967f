"""Putting a sign-in link in front of a person, from the thread that waits for the server.

An MCP server's connection runs on a thread of its own, but the link must appear where the
person is: in the cell that ran ``%agent mcp add`` (its output belongs to the kernel's main
thread), on the terminal that started the script, or in the hands of a script's own hook. So
the thread that waits for the server (:meth:`Connection.start`, :meth:`Connection.sign_in`)
holds an :class:`Attendant`; the connection hands it each link and the attendant's
:class:`Presenter` shows it there. With no attendant (a tool call in the middle of a run),
nobody is there to sign in, and the request fails at once, saying how to sign in again.

Presenters:

* :class:`HookPresenter`: the ``open_link`` a script gave :class:`~nbagent.mcp.OAuth` (a test
  that follows the link with an HTTP client, a helper that opens a browser, a prompt for the
  address the browser landed on);
* a front end's own: a front end that owns the person hands its presenter over with
  :func:`present_with` (the notebook's extension does, in a kernel: a plain link in the cell;
  a headless run refuses at once). This package never imports a front end;
* :class:`TerminalPresenter`: the link on stderr, when someone is at a terminal; refused
  otherwise. It is the presenter when no front end offers one.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from ._link import SignInLink, where_loopback_fails

__all__ = [
    "Attendant",
    "SelfAttendant",
    "in_a_worker",
    "HookPresenter",
    "Presenter",
    "SignInLink",
    "TerminalPresenter",
    "default_presenter",
    "present_with",
    "where_loopback_fails",
]


class Presenter(Protocol):
    """Shows sign-in links to someone; see the module docstring."""

    def refusal(self) -> str | None:
        """Why nobody can sign in here (a headless run …), or None."""

    def show(self, link: SignInLink) -> str | None:
        """Put ``link`` in front of the person; return the address the browser came back to
        when the person gave it (else None: the loopback receives it)."""

    def finish(self, problem: str | None) -> None:
        """The sign-in ended: ``problem`` is None when it succeeded."""


class HookPresenter:
    """A script's own ``open_link(url)``: it may follow the link itself (return anything), or
    return the address the browser was sent back to (a ``str``)."""

    def __init__(self, open_link: Callable[[str], object]) -> None:
        self.open_link = open_link

    def refusal(self) -> str | None:
        return None

    def show(self, link: SignInLink) -> str | None:
        answer = self.open_link(link.url)
        return answer if isinstance(answer, str) and answer.strip() else None

    def finish(self, problem: str | None) -> None:
        pass


class TerminalPresenter:
    """The link on stderr, for a person at a terminal (a script run by hand)."""

    def refusal(self) -> str | None:
        if os.environ.get("NBAGENT_MODE", "").strip().lower() == "headless":
            return "this run is headless (NBAGENT_MODE=headless): nobody can follow a sign-in link"
        try:
            attended = sys.stdin.isatty() and sys.stderr.isatty()
        except (AttributeError, ValueError):
            attended = False
        if not attended:
            if "ipykernel" in sys.modules:  # a kernel where nbagent's extension is not loaded
                return (
                    "nobody can follow a sign-in link here: in a notebook, run "
                    "%load_ext nbagent first (the link then shows in the cell), or pass a "
                    "token with headers=, or OAuth(open_link=...)"
                )
            return (
                "nobody can follow a sign-in link here (not a notebook, and no terminal): pass "
                "a token with headers=, or OAuth(open_link=...)"
            )
        return None

    def show(self, link: SignInLink) -> str | None:
        print(
            f"To sign in to the MCP server {link.server!r} ({link.host}), open this link in a "
            f"browser on this machine:\n\n  {link.url}\n\n{where_loopback_fails(link)}\n"
            f"Waiting up to {link.timeout:g} s (MCPLimits.sign_in_timeout); Ctrl-C stops.",
            file=sys.stderr,
            flush=True,
        )
        return None

    def finish(self, problem: str | None) -> None:
        if problem is None:
            print("Signed in.", file=sys.stderr, flush=True)


#: What front ends offered, newest last: each gives its presenter, or None when the person
#: is not theirs (the notebook's, outside a kernel's cell).
_offered: tuple[Callable[[], Presenter | None], ...] = ()
_offered_lock = threading.Lock()


def present_with(offer: Callable[[], Presenter | None]) -> Callable[[], None]:
    """Show sign-in links through the presenter ``offer()`` gives, whenever it gives one: how a
    front end that owns the person (the notebook's extension) hands its presenter to the MCP
    client. The newest offer is asked first. Returns a function that withdraws it."""
    global _offered
    with _offered_lock:
        _offered = (*_offered, offer)

    def withdraw() -> None:
        global _offered
        with _offered_lock:
            _offered = tuple(o for o in _offered if o is not offer)

    return withdraw


def default_presenter() -> Presenter:
    """The presenter of the newest front end that offers one here, else the terminal's."""
    for offer in reversed(_offered):
        found = offer()
        if found is not None:
            return found
    return TerminalPresenter()


def _settle(
    answer: concurrent.futures.Future[str | None], value: str | None, error: BaseException | None
) -> None:
    """Give the connection the presenter's answer, unless it stopped waiting (the browser
    came back while a hook was still following the link)."""
    if answer.done():
        return
    if error is not None:
        answer.set_exception(error)
    else:
        answer.set_result(value)


_Ask = tuple[SignInLink, "concurrent.futures.Future[str | None]"]
_T = TypeVar("_T")
#: Set while the work of :func:`in_a_worker` runs: the waiter it gives up on.
_interruption: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "nbagent_mcp_interruption", default=None
)
_POLL = 0.2  # seconds between looks at an interruption (a person's pace, not the server's)


async def in_a_worker(work: Callable[[], _T], join: float) -> _T:
    """Run ``work`` (which may wait for a sign-in) on a worker thread, and await it.

    A kernel interrupts an awaiting cell by cancelling its coroutine, which code blocking the
    kernel's thread never sees: an ``%agent mcp add`` waiting five minutes for a sign-in could
    not be stopped. Here the wait is on a worker (with the cell's context, so the link shows
    in the cell); a cancellation tells its :class:`Attendant` to stop waiting (it raises
    KeyboardInterrupt there, and the server is stopped as on an interrupt), waits up to
    ``join`` seconds for it, then goes on as cancelled.
    """
    interrupted = threading.Event()
    token = _interruption.set(interrupted)
    try:
        context = contextvars.copy_context()
    finally:
        _interruption.reset(token)
    loop = asyncio.get_running_loop()
    future = loop.run_in_executor(None, context.run, work)
    try:
        # ipykernel 7.4 turns the interrupt into a callback that runs only when the loop next
        # wakes (measured: a cell awaiting `asyncio.sleep(20)` was cancelled after 20 s), so
        # the loop is woken at a person's pace while it waits
        while not future.done():
            await asyncio.wait({future}, timeout=_POLL)
        return future.result()
    except asyncio.CancelledError:
        interrupted.set()
        await asyncio.wait({future}, timeout=join)
        if future.done() and not future.cancelled():
            future.exception()  # retrieved: the interrupt is what the cell reports
        raise


class Attendant:
    """The thread waiting for a server, able to show a sign-in link (see the module)."""

    def __init__(self, presenter: Presenter) -> None:
        self.presenter = presenter
        self.refusal = presenter.refusal()  # decided here, on the waiting thread
        self.failed: str | None = None  # why a sign-in during this wait failed
        self.shown = False
        self._asks: queue.Queue[_Ask | None] = queue.Queue()
        self._interrupted = _interruption.get()  # set when waiting on a worker for a cell

    # --- from the connection's thread ------------------------------------------------------

    def ask(self, link: SignInLink) -> concurrent.futures.Future[str | None]:
        """Have the waiting thread show ``link``; the future holds a pasted address or None."""
        answer: concurrent.futures.Future[str | None] = concurrent.futures.Future()
        self._asks.put((link, answer))
        return answer

    def wake(self, *_args: Any) -> None:
        """Make :meth:`serve_until` look at its condition again."""
        self._asks.put(None)

    # --- on the waiting thread -------------------------------------------------------------

    def serve_until(self, done: Callable[[], bool], timeout: float) -> bool:
        """Show the links asked for until ``done()``; False if ``timeout`` passed first (each
        link shown gives its own wait on top)."""
        deadline = time.monotonic() + timeout
        interrupted = self._interrupted
        while not done():
            if interrupted is not None and interrupted.is_set():
                raise KeyboardInterrupt("the cell was interrupted")
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                item = self._asks.get(timeout=left if interrupted is None else min(left, _POLL))
            except queue.Empty:
                continue
            if item is None:
                continue
            link, answer = item
            deadline += link.timeout
            self.shown = True
            try:
                _settle(answer, self.presenter.show(link), None)
            except Exception as exc:  # the hook's failure ends that sign-in, saying so
                _settle(answer, None, exc)
            except BaseException as exc:  # an interrupt: the sign-in ends, and so does the wait
                _settle(answer, None, exc)
                raise
        return True

    def finish(self, problem: str | None) -> None:
        if self.shown:
            self.presenter.finish(problem)


class SelfAttendant(Attendant):
    """For a script's own ``open_link`` when nobody waits for the server (a sign-in the server
    asks for in the middle of a session: a refresh refused, more scope): the hook runs on a
    thread of its own. Each request gets its own sign-in: a failure does not stick."""

    def __init__(self, presenter: HookPresenter) -> None:
        super().__init__(presenter)

    @property
    def failed(self) -> str | None:
        return None

    @failed.setter
    def failed(self, _problem: str | None) -> None:
        pass

    def ask(self, link: SignInLink) -> concurrent.futures.Future[str | None]:
        answer: concurrent.futures.Future[str | None] = concurrent.futures.Future()

        def show() -> None:
            try:
                _settle(answer, self.presenter.show(link), None)
            except BaseException as exc:  # reported by the sign-in that asked
                _settle(answer, None, exc)

        threading.Thread(target=show, name=f"nbagent-sign-in-{link.server}", daemon=True).start()
        return answer
