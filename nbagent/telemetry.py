"""OpenTelemetry traces of runs: a span for the run, one per model request, one per tool call.

``instrument(agent)`` registers an observer on the agent (:meth:`nbagent.Agent.observe`), so every
later run is traced, whoever runs it (a script, ``%agent``, a batch). Needs the ``otel`` extra
(``pip install "nbagent[otel]"``, i.e. ``opentelemetry-api``); spans go to the tracer provider you
configured (an SDK with an exporter), or to OpenTelemetry's global one.

The spans follow the **OpenTelemetry GenAI semantic conventions, version 1.37.0** (still marked
"development" upstream; the attribute names below are the ones that version defines):

* ``invoke_agent nbagent`` (INTERNAL): the run — ``gen_ai.operation.name="invoke_agent"``,
  ``gen_ai.agent.name``, ``gen_ai.conversation.id`` (the run's id), the total
  ``gen_ai.usage.input_tokens`` / ``output_tokens``, and nbagent's stop reason
  (``nbagent.stop_reason``). Approvals are span events (``nbagent.approval.requested`` /
  ``.resolved``, with the tool and the decision, never the arguments).
* ``chat {model}`` (CLIENT), a child of the run: one model request —
  ``gen_ai.operation.name="chat"``, ``gen_ai.provider.name``, ``gen_ai.request.model``,
  ``gen_ai.response.finish_reasons``, ``gen_ai.usage.*``; a retried answer is a span event.
* ``execute_tool {tool}`` (INTERNAL), a child of the run: one call that ran —
  ``gen_ai.operation.name="execute_tool"``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
  ``gen_ai.tool.type="function"``; a failed call has status ERROR and ``error.type``.

**No content by default**: prompts, model text, arguments and results are not recorded unless
``capture_content=True`` (then ``gen_ai.input.messages`` on the run span, and
``gen_ai.tool.call.arguments`` / ``gen_ai.tool.call.result`` on tool spans, after
:func:`~nbagent.redact.redact_secrets`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

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
SEMCONV_VERSION = "1.37.0"
_LIMIT = 8_000  # characters of captured content per attribute


def _provider_name(generator: Any) -> str:
    """``openai``, ``anthropic`` … as the conventions name providers (else the class name)."""
    vendor = str(getattr(generator, "vendor", "") or getattr(generator, "provider", "")).lower()
    for known in ("openai", "anthropic", "ollama", "deepseek", "mistral"):
        if known in vendor:
            return known
    return vendor or type(generator).__name__


@dataclass
class _RunSpans:
    run: Any
    model: Any = None
    tools: dict[str, Any] = field(default_factory=dict)


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
            "gen_ai.agent.name": self.name,
            "gen_ai.conversation.id": run_id,
            "gen_ai.request.model": event.model,
        }
        if self.capture:
            attributes["gen_ai.input.messages"] = json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": _clip(event.prompt)}]}]
            )
        span = self.tracer.start_span(
            f"invoke_agent {self.name}", kind=self._trace.SpanKind.INTERNAL, attributes=attributes
        )
        self.runs[run_id] = _RunSpans(span)

    def _step_started(self, spans: _RunSpans, event: StepStarted) -> None:
        generator = self.agent.generator
        model = str(getattr(generator, "model", "") or "")
        spans.model = self.tracer.start_span(
            f"chat {model}".strip(),
            context=self._context(spans),
            kind=self._trace.SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": _provider_name(generator),
                "gen_ai.request.model": model,
                "nbagent.step": event.step,
            },
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
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR))
        span.end()

    def _tool_started(self, spans: _RunSpans, event: ToolStarted) -> None:
        call = event.call
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
        }
        if self.capture:
            attributes["gen_ai.tool.call.arguments"] = _clip(call.arguments)
        spans.tools[call.id] = self.tracer.start_span(
            f"execute_tool {call.name}",
            context=self._context(spans),
            kind=self._trace.SpanKind.INTERNAL,
            attributes=attributes,
        )

    def _tool_finished(self, spans: _RunSpans, event: ToolFinished) -> None:
        span = spans.tools.pop(event.call.id, None)
        if span is None:
            return
        if self.capture:
            span.set_attribute("gen_ai.tool.call.result", _clip(event.result.text))
        if event.status != "done":
            span.set_attribute("error.type", event.status)
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, event.status))
        span.end()

    def _run_ended(self, run_id: str, spans: _RunSpans, event: Any) -> None:
        result = event.result
        for leftover in (spans.model, *spans.tools.values()):
            if leftover is not None:
                leftover.set_status(self._trace.Status(self._trace.StatusCode.ERROR, "cancelled"))
                leftover.end()
        run = spans.run
        run.set_attribute("gen_ai.usage.input_tokens", result.usage.input_tokens)
        run.set_attribute("gen_ai.usage.output_tokens", result.usage.output_tokens)
        run.set_attribute("nbagent.stop_reason", result.stop_reason)
        run.set_attribute("nbagent.steps", result.steps)
        if isinstance(event, RunFailed):
            run.set_attribute("error.type", type(event.error).__name__)
            message = redact_secrets(str(event.error))[:500]
            run.set_status(self._trace.Status(self._trace.StatusCode.ERROR, message))
        run.end()
        self.runs.pop(run_id, None)


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
    try:
        from opentelemetry import trace
    except ImportError:
        raise ConfigurationError(
            'tracing needs OpenTelemetry: pip install "nbagent[otel]" (opentelemetry-api), '
            "plus an SDK and exporter of your choice"
        ) from None
    provider = tracer_provider or trace.get_tracer_provider()
    tracer = provider.get_tracer(
        "nbagent", schema_url=f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
    )
    return agent.observe(_Tracer(agent, tracer, capture_content, name))
