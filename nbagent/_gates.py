"""Gates on the model request path: the one point every model request of a process passes.

Every run's loop asks each installed :class:`RequestGate` before it sends a model request
(:func:`admit`: after step mode's pause, so the model a person switched to is the one asked
about, and for helpers' runs, map rows and forks alike), and tells it what the request spent
once its answer ended (:func:`settle`). A gate refuses by raising
:class:`~nbagent.errors.RequestRefusedError`: nothing is sent, and the run ends failed with
that error. Retries inside one request are the same request: the gate is asked once.

The front end that owns the person installs a gate (the notebook installs its course policy's
when its session is made: :mod:`nbagent.notebook.policy.coursegate`); the loop never imports it, the
dependency runs the other way, as it does for observers and the MCP sign-in presenter. No gate
installed costs one tuple check per request.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .generation import Generator, Request, Usage
    from .tools import Tool

__all__ = ["RequestAsked", "RequestGate", "admit", "install", "installed", "settle"]


@dataclass(frozen=True)
class RequestAsked:
    """One model request about to be sent: its run, step, the request itself, the model it
    goes to, what decides the run's calls, the tools it offers, and (a helper's run) the
    caller's run id and the id of the call that runs it."""

    run_id: str
    step: int
    request: Request
    generator: Generator
    approver: Any
    tools: Mapping[str, Tool]
    helper_of: tuple[str, str] | None = None


class RequestGate(Protocol):
    """What a gate does: refuse a request (raise RequestRefusedError) or let it go, and hear
    what a request it let go spent (``requests``: 1 and the retries it took)."""

    def admit(self, asked: RequestAsked) -> None: ...

    def settle(self, asked: RequestAsked, usage: Usage, requests: int) -> None: ...


_lock = threading.Lock()
_gates: tuple[RequestGate, ...] = ()


def install(gate: RequestGate) -> Callable[[], None]:
    """Ask ``gate`` about every model request from now on; returns the function that stops it."""
    global _gates
    with _lock:
        _gates = (*_gates, gate)

    def remove() -> None:
        global _gates
        with _lock:
            _gates = tuple(g for g in _gates if g is not gate)

    return remove


def installed() -> tuple[RequestGate, ...]:
    """The gates in force, in the order they were installed."""
    return _gates


def admit(asked: RequestAsked) -> None:
    """Ask every gate; the first refusal propagates (nothing is sent)."""
    for gate in _gates:
        gate.admit(asked)


def settle(asked: RequestAsked, usage: Usage, requests: int) -> None:
    """Tell every gate what a request it let go spent. A gate that fails here is logged: the
    answer already came back, and the run goes on."""
    for gate in _gates:
        try:
            gate.settle(asked, usage, requests)
        except Exception:
            import logging

            logging.getLogger("nbagent").exception("a request gate failed to settle a request")
