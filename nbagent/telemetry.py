"""OpenTelemetry traces of runs: a span for the run, one per model request, one per tool call.

``instrument(agent)`` registers an observer on the agent (:meth:`nbagent.Agent.observe`), so every
later run is traced, whoever runs it (a script, ``%agent``, a batch). Needs the ``otel`` extra
(``pip install "nbagent[otel]"``, i.e. ``opentelemetry-api``); spans go to the tracer provider you
configured (an SDK with an exporter), or to OpenTelemetry's global one.

The spans follow the **OpenTelemetry GenAI semantic conventions, release 1.41.0** (still marked
"development" upstream; the span and attribute names below are the ones that release defines,
in ``docs/gen-ai/gen-ai-agent-spans.md`` and ``gen-ai-spans.md``):

* ``invoke_agent nbagent`` (INTERNAL, the conventions' "invoke agent internal span": the agent
  runs in this process): the run — ``gen_ai.operation.name="invoke_agent"``,
  ``gen_ai.provider.name`` (Required), ``gen_ai.agent.name``, ``gen_ai.conversation.id``,
  ``gen_ai.request.model``, the total ``gen_ai.usage.input_tokens`` / ``output_tokens``, and
  nbagent's stop reason (``nbagent.stop_reason``). Approvals are span events
  (``nbagent.approval.requested`` / ``.resolved``, with the tool and the decision, never the
  arguments).
* ``chat {model}`` (CLIENT), a child of the run: one model request —
  ``gen_ai.operation.name="chat"``, ``gen_ai.provider.name``, ``gen_ai.request.model``,
  ``gen_ai.conversation.id``, ``server.address`` / ``server.port`` (for an HTTP adapter),
  ``gen_ai.response.finish_reasons``, ``gen_ai.usage.*``; a retried request is a span event
  (an error that was retried is not the span's error).
* ``execute_tool {tool}`` (INTERNAL), a child of the run: one call that ran —
  ``gen_ai.operation.name="execute_tool"``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
  ``gen_ai.tool.type="function"``, ``gen_ai.conversation.id``.

``gen_ai.conversation.id`` is :attr:`nbagent.Agent.conversation_id`: a random id, the same for
every run of one conversation and unique across kernels, processes and batch workers.
``gen_ai.provider.name`` is the generator's ``telemetry_provider`` when it has one (an HTTP
adapter names the provider behind a known host, e.g. ``openai``, ``anthropic``,
``azure.ai.openai``, ``mistral_ai``, else the API it speaks; the local model is ``llama.cpp``),
else the class name.

Errors follow the conventions' "recording errors": a span whose operation failed has status
ERROR, a description (redacted, at most 500 characters) and ``error.type``; a span that ended
well has no status. The ``error.type`` values nbagent reports: on a ``chat`` span, the class
name of the error that failed the request (an :mod:`nbagent.errors` class such as
``RateLimitError``, ``ServerError``, ``StreamError``), or the finish reason of an answer that
ended abnormally (``content_filter``, ``error``); on a run span, the class name of the error
that failed the run; on a tool span, the call's status (``error``, ``timeout``,
``cancelled`` …); on any span still open when a run is cancelled, ``cancelled``.

**No content by default**: prompts, model text, arguments and results are not recorded unless
``capture_content=True`` (then ``gen_ai.input.messages`` on the run span, and
``gen_ai.tool.call.arguments`` / ``gen_ai.tool.call.result`` on tool spans, after
:func:`~nbagent.redact.redact_secrets`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._ground.extras import explained, missing
from .delegation import helper_call
from .errors import ConfigurationError
from .events import (
    AgentEvent,
    ApprovalRequested,
    ApprovalResolved,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunStarted,
    StepFinished,
    StepRetried,
    StepStarted,
    ToolFinished,
    ToolStarted,
)
from .redact import redact_secrets

if TYPE_CHECKING:
    from .agent import Agent

__all__ = ["SEMCONV_VERSION", "instrument"]

#: The GenAI semantic conventions these spans follow.
SEMCONV_VERSION = "1.41.0"
_LIMIT = 8_000  # characters of captured content per attribute


def _provider_name(generator: Any) -> str:
    """``gen_ai.provider.name`` for ``generator`` (see the module docs)."""
    named = getattr(generator, "telemetry_provider", None)
    if isinstance(named, str) and named:
        return named
    vendor = str(getattr(generator, "vendor", "") or getattr(generator, "provider", "")).lower()
    return vendor or type(generator).__name__


def _server(generator: Any) -> dict[str, Any]:
    """``server.address`` and ``server.port`` of an HTTP adapter's base URL (else nothing)."""
    from urllib.parse import urlsplit

    base = getattr(generator, "base_url", None)
    if not isinstance(base, str):
        return {}
    try:
        parts = urlsplit(base)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return {}
    return {"server.address": parts.hostname, "server.port": port} if parts.hostname else {}


def _error_status(trace: Any, span: Any, kind: str, description: str = "") -> None:
    """Mark ``span`` failed, as the conventions' "recording errors" say."""
    span.set_attribute("error.type", kind)
    span.set_status(trace.Status(trace.StatusCode.ERROR, description or None))


@dataclass
class _RunSpans:
    run: Any
    conversation: str = ""
    model: Any = None
    #: A model span whose answer failed, kept open until the run says why: (span, end time,
    #: finish reason)
    failed_model: tuple[Any, int, str | None] | None = None
    tools: dict[str, Any] = field(default_factory=dict)
    run_id: str = ""


#: The open tool spans of every traced run, by (run id, call id): a helper agent's run span
#: is opened inside the span of the call that runs it (see nbagent.delegation).
_TOOL_SPANS: dict[tuple[str, str], Any] = {}


class _Tracer:
    """The observer: opens and closes spans as a run's events arrive."""

    def __init__(self, agent: Agent, tracer: Any, capture_content: bool, name: str) -> None:
        from opentelemetry import trace

        self._trace = trace
        self.agent = agent
        self.tracer = tracer
        self.capture = capture_content
        self.name = name
        self.runs: dict[str, _RunSpans] = {}

    def __call__(self, run_id: str, event: AgentEvent) -> None:
        if isinstance(event, RunStarted):
            self._run_started(run_id, event)
            return
        spans = self.runs.get(run_id)
        if spans is None:
            return
        if isinstance(event, StepStarted):
            self._step_started(spans, event)
        elif isinstance(event, StepFinished):
            self._step_finished(spans, event)
        elif isinstance(event, StepRetried) and spans.model is not None:
            spans.model.add_event(
                "nbagent.step.retried", {"nbagent.retry.reason": event.reason[:500]}
            )
        elif isinstance(event, ToolStarted):
            self._tool_started(spans, event)
        elif isinstance(event, ToolFinished):
            self._tool_finished(spans, event)
        elif isinstance(event, ApprovalRequested):
            spans.run.add_event(
                "nbagent.approval.requested",
                {
                    "gen_ai.tool.name": event.request.call.name,
                    "gen_ai.tool.call.id": event.request.call.id,
                },
            )
        elif isinstance(event, ApprovalResolved):
            spans.run.add_event(
                "nbagent.approval.resolved",
                {
                    "gen_ai.tool.call.id": event.call_id,
                    "nbagent.approval.approved": event.decision.approved,
                    "nbagent.approval.by": event.decision.by or "",
                },
            )
        elif isinstance(event, (RunFinished, RunFailed, RunCancelled)):
            self._run_ended(run_id, spans, event)

    def _context(self, spans: _RunSpans) -> Any:
        return self._trace.set_span_in_context(spans.run)

    def _run_started(self, run_id: str, event: RunStarted) -> None:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": _provider_name(self.agent.generator),
            "gen_ai.agent.name": self.name,
            "gen_ai.request.model": event.model,
        }
        if event.conversation_id:
            attributes["gen_ai.conversation.id"] = event.conversation_id
        if self.capture:
            attributes["gen_ai.input.messages"] = json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": _clip(event.prompt)}]}]
            )
        parent = None
        tool_span = _TOOL_SPANS.get(helper_call() or ("", ""))
        if tool_span is not None:  # a helper agent's run: inside the call that runs it
            parent = self._trace.set_span_in_context(tool_span)
        span = self.tracer.start_span(
            f"invoke_agent {self.name}",
            context=parent,
            kind=self._trace.SpanKind.INTERNAL,
            attributes=attributes,
        )
        self.runs[run_id] = _RunSpans(span, event.conversation_id, run_id=run_id)

    def _step_started(self, spans: _RunSpans, event: StepStarted) -> None:
        self._end_failed_model(spans, None)
        generator = self.agent.generator
        model = str(getattr(generator, "model", "") or "")
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": _provider_name(generator),
            "gen_ai.request.model": model,
            "nbagent.step": event.step,
            **_server(generator),
        }
        if spans.conversation:
            attributes["gen_ai.conversation.id"] = spans.conversation
        spans.model = self.tracer.start_span(
            f"chat {model}".strip(),
            context=self._context(spans),
            kind=self._trace.SpanKind.CLIENT,
            attributes=attributes,
        )

    def _step_finished(self, spans: _RunSpans, event: StepFinished) -> None:
        span, spans.model = spans.model, None
        if span is None:
            return
        span.set_attribute("gen_ai.usage.input_tokens", event.usage.input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", event.usage.output_tokens)
        if event.finish_reason:
            span.set_attribute("gen_ai.response.finish_reasons", [event.finish_reason])
        if event.finish_reason in ("error", "content_filter", None):
            # failed: why is known when the run says (the error comes right after)
            spans.failed_model = (span, time.time_ns(), event.finish_reason)
            return
        span.end()

    def _end_failed_model(self, spans: _RunSpans, error: BaseException | None) -> None:
        """End the model span of a failed answer, with the error that failed it if known."""
        found, spans.failed_model = spans.failed_model, None
        if found is None:
            return
        span, ended, reason = found
        if error is not None:
            _error_status(self._trace, span, type(error).__name__, _describe(error))
        else:
            _error_status(self._trace, span, reason or "incomplete")
        span.end(end_time=ended)

    def _tool_started(self, spans: _RunSpans, event: ToolStarted) -> None:
        call = event.call
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
        }
        if spans.conversation:
            attributes["gen_ai.conversation.id"] = spans.conversation
        if self.capture:
            attributes["gen_ai.tool.call.arguments"] = _clip(call.arguments)
        spans.tools[call.id] = _TOOL_SPANS[(spans.run_id, call.id)] = self.tracer.start_span(
            f"execute_tool {call.name}",
            context=self._context(spans),
            kind=self._trace.SpanKind.INTERNAL,
            attributes=attributes,
        )

    def _tool_finished(self, spans: _RunSpans, event: ToolFinished) -> None:
        span = spans.tools.pop(event.call.id, None)
        _TOOL_SPANS.pop((spans.run_id, event.call.id), None)
        if span is None:
            return
        if self.capture:
            span.set_attribute("gen_ai.tool.call.result", _clip(event.result.text))
        if event.status != "done":
            _error_status(self._trace, span, event.status)
        span.end()

    def _run_ended(self, run_id: str, spans: _RunSpans, event: Any) -> None:
        result = event.result
        error = event.error if isinstance(event, RunFailed) else None
        self._end_failed_model(spans, error)
        if spans.model is not None:  # the request was under way when the run ended
            if error is not None:  # it failed the run (raised before any answer came)
                _error_status(self._trace, spans.model, type(error).__name__, _describe(error))
            else:
                _error_status(self._trace, spans.model, "cancelled", "the run was cancelled")
            spans.model.end()
        for call_id, leftover in spans.tools.items():
            _TOOL_SPANS.pop((spans.run_id, call_id), None)
            _error_status(self._trace, leftover, "cancelled", "the run ended first")
            leftover.end()
        run = spans.run
        run.set_attribute("gen_ai.usage.input_tokens", result.usage.input_tokens)
        run.set_attribute("gen_ai.usage.output_tokens", result.usage.output_tokens)
        run.set_attribute("nbagent.stop_reason", result.stop_reason)
        run.set_attribute("nbagent.steps", result.steps)
        if error is not None:
            _error_status(self._trace, run, type(error).__name__, _describe(error))
        run.end()
        self.runs.pop(run_id, None)


def _describe(error: BaseException) -> str:
    return redact_secrets(str(error))[:500]


def _clip(text: str) -> str:
    return redact_secrets(text)[:_LIMIT]


def instrument(
    agent: Agent,
    *,
    tracer_provider: Any = None,
    capture_content: bool = False,
    name: str = "nbagent",
) -> Callable[[], None]:
    """Trace every later run of ``agent`` (see the module docs); returns a function that stops.

    Raises :class:`~nbagent.errors.ConfigurationError` saying what to install when
    OpenTelemetry is missing.
    """
    lacking = missing("otel", "Tracing a run")
    if lacking is not None:
        raise ConfigurationError(f"{lacking}, plus an SDK and exporter of your choice")
    try:
        from opentelemetry import trace
    except ImportError as exc:  # installed, but broken
        raise ConfigurationError(explained(exc, "Tracing a run") or str(exc)) from None
    provider = tracer_provider or trace.get_tracer_provider()
    tracer = provider.get_tracer(
        "nbagent", schema_url=f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
    )
    return agent.observe(_Tracer(agent, tracer, capture_content, name))
