"""Step mode's pauses in the loop: wait for the person's Resume, apply what they changed.

A run started with ``step=True`` pauses before each model request (kind ``"request"``: the
person may edit the last results, the instructions or the model) and before each batch of calls
(kind ``"calls"``); see :mod:`nbagent.inspection.stepping` for what a Resume may say. An edit that
would break the history ends the run saying why, before anything changed.
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..errors import AgentError
from ..events import StepPaused, StepResumed
from ..generation import Generator, Request
from ..inspection.stepping import Resume, StepEditError, StepPause, edited_results
from ..messages import ToolMessage

if TYPE_CHECKING:
    from ._loopstate import LoopState

__all__ = ["history_problem", "pause", "pause_before_request"]


async def pause(run: LoopState, at: StepPause) -> Resume:
    """Wait at ``at`` for the approver's Resume (step mode); an edit that would break the
    history ends the run, saying why."""
    pauser = run._pauser
    assert pauser is not None
    run.emit(StepPaused(at))
    resume = pauser(at)
    if inspect.isawaitable(resume):
        resume = await resume
    try:
        resume = at.check(resume)
    except StepEditError as exc:
        raise AgentError(f"step mode, at step {at.step}: {exc}") from None
    if resume.action == "run":
        run._pauser = None  # to the end without pausing
    if at.kind == "calls":
        run.emit(StepResumed(at.id, at.step, resume.action, (), "calls"))
    return resume


async def pause_before_request(
    run: LoopState, step: int, request: Request, generator: Generator
) -> tuple[Request, Generator, list[str]]:
    """Pause before the request; apply what the person changed (and say what, for the
    exchange): edited results, instructions, another model."""
    last = request.messages[-1] if request.messages else None
    results = last.results if isinstance(last, ToolMessage) else ()
    at = StepPause(
        run.id,
        step,
        "request",
        request=request,
        results=results,
        model=str(getattr(generator, "model", "")),
    )
    resume = await pause(run, at)
    edits: list[str] = []
    if resume.action == "stop":
        raise asyncio.CancelledError
    edited = None
    if (resume.results or resume.remove) and isinstance(last, ToolMessage):
        edited, edits = edited_results(last, resume, run.limits)
        request = replace(request, messages=(*request.messages[:-1], edited))
    if resume.instructions is not None:
        request = replace(request, instructions=resume.instructions)
        edits.append("instructions changed for this request")
    if resume.model is not None:
        generator = _generator(resume.model)
        request = replace(request, model=getattr(generator, "model", ""))
        name = getattr(generator, "model", "") or type(generator).__name__
        problem = history_problem(generator, request)
        if problem:  # refused before anything changed: the history stays as it was
            raise AgentError(f"step mode, at step {step}: {name} cannot go on here: {problem}")
        edits.append(f"answered by {name}")
    if edited is not None:
        run.agent.messages[-1] = edited  # the history the model reads from now on
    run.emit(StepResumed(at.id, step, resume.action, tuple(edits), "request"))
    return request, generator, edits


def history_problem(generator: Any, request: Request) -> str | None:
    """Why ``generator``'s provider would refuse ``request``'s history (its ``history_problem``,
    for providers with rules beyond each message: Anthropic's thinking), or None."""
    check = getattr(generator, "history_problem", None)
    return check(request) if callable(check) else None


def _generator(model: Any) -> Generator:
    """A model for one step-mode request: a Generator, or a model string resolved as the
    agent resolves its own (``nbagent.providers``)."""
    if isinstance(model, str):
        from ..providers import resolve_generator

        return resolve_generator(model)
    if not hasattr(model, "stream"):
        raise AgentError(f"a model is a model string or a Generator, not {type(model).__name__}")
    generator: Generator = model
    return generator
