"""OpenTelemetry spans of the gateway's negotiations (``serve.otel_spans``, off by default).

Built from the engine's progress events and its agent-call observer (the bus's ``CallObserver``),
so the negotiation code carries no tracing: one ``psychoalign.negotiation`` span per negotiation
(the current span while it runs), a ``psychoalign.round`` child per round, a
``psychoalign.decide`` child for the decision, and under them a ``psychoalign.<role>`` span per
agent call (``psychoalign.drive``, ``.evaluator``, ``.mediator``; the current span during the
call, so spans that auto-instrumentation makes for model calls nest under it) with ``gen_ai.*``
attributes of that call (response model, input and output tokens). The negotiation span carries
the outcome (``psychoalign.status``, ``.tension``, ``.state``, ``.defense``, ``.trace_id``) and
``gen_ai.*`` usage of all three agents.

Spans go to the process's tracer provider (``opentelemetry-instrument``, or the application's
own SDK set-up), or, with ``serve.otlp_endpoint``, to a provider of the gateway's own that
exports them by OTLP over HTTP (the ``otel`` extra). With the setting off no tracer is touched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode, Tracer

from ..agents.messages import AgentReply
from ..config import ServeSettings
from ..errors import ConfigError
from ..negotiation.events import NegotiationEvent
from .outcome import GatewayOutcome


@dataclass
class Tracing:
    """The gateway's tracer (``None``: spans off) and the provider it owns, if any (OTLP)."""

    tracer: Tracer | None
    provider: Any = None

    def shutdown(self) -> None:
        """Flush and stop the gateway's own exporter (the process's provider is not ours)."""
        if self.provider is not None:
            self.provider.shutdown()
            self.provider = None


def gateway_tracing(serve: ServeSettings) -> Tracing:
    if serve.otlp_endpoint:
        return _otlp(serve.otlp_endpoint)
    return Tracing(trace.get_tracer("psychoalign") if serve.otel_spans else None)


def _otlp(endpoint: str) -> Tracing:
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise ConfigError(
            "serve.otlp_endpoint is set, but the OpenTelemetry SDK and OTLP exporter are not installed",
            hint="pip install 'psychoalign[otel]', or unset serve.otlp_endpoint",
        ) from None
    provider = TracerProvider(resource=Resource.create({"service.name": "psychoalign"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    return Tracing(provider.get_tracer("psychoalign"), provider)


class NegotiationSpans:
    """The spans of one negotiation: :meth:`active` around starting it, :meth:`on_event` for each
    progress event, :meth:`finish` with the outcome."""

    def __init__(
        self, tracer: Tracer, deployment: str, framework: str, source: str, *, start_time: int | None = None
    ) -> None:
        self.tracer = tracer
        self.root: Span = tracer.start_span(
            "psychoalign.negotiation",
            start_time=start_time,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": deployment,
                "psychoalign.deployment": deployment,
                "psychoalign.framework": framework,
                "psychoalign.source": source,
            },
        )
        self._context = trace.set_span_in_context(self.root)
        self._phase: Span | None = None

    @contextmanager
    def active(self) -> Iterator[None]:
        """The negotiation span as the current span (tasks created inside inherit it)."""
        with trace.use_span(self.root, end_on_exit=False):
            yield

    def _start(self, name: str, **attributes: Any) -> None:
        self._end_phase()
        self._phase = self.tracer.start_span(name, context=self._context, attributes=attributes)

    def _end_phase(self, **attributes: Any) -> None:
        if self._phase is not None:
            self._phase.set_attributes(attributes)
            self._phase.end()
            self._phase = None

    def on_event(self, event: NegotiationEvent) -> None:
        if event.stage == "started":
            self.root.set_attribute("psychoalign.trace_id", event.trace_id)
        elif event.stage == "round":
            self._start("psychoalign.round", **{"psychoalign.round": event.round or 0})
        elif event.stage == "evaluated":
            extra = {
                k: v
                for k, v in (
                    ("psychoalign.proposals", event.proposals),
                    ("psychoalign.admissible", event.admissible),
                    ("psychoalign.tension", event.tension),
                )
                if v is not None
            }
            self._end_phase(**extra)
        elif event.stage == "deciding":
            self._start("psychoalign.decide")
        elif self._phase is not None:  # final_gate and later stages: marks on the current phase
            self._phase.add_event(f"psychoalign.{event.stage}")

    @contextmanager
    def call(self, role: str, kind: str) -> Iterator[Callable[[AgentReply[Any]], None]]:
        """One agent call (the bus's ``CallObserver``): a ``psychoalign.<role>`` span under the
        current round or decision, current while the call runs."""
        parent = trace.set_span_in_context(self._phase) if self._phase is not None else self._context
        span = self.tracer.start_span(
            f"psychoalign.{role}",
            context=parent,
            attributes={"gen_ai.operation.name": "chat", "gen_ai.agent.name": role, "psychoalign.task": kind},
        )

        def done(reply: AgentReply[Any]) -> None:
            span.set_attributes(
                {
                    "gen_ai.response.model": reply.model,
                    "gen_ai.usage.input_tokens": reply.usage.prompt_tokens,
                    "gen_ai.usage.output_tokens": reply.usage.completion_tokens,
                }
            )

        try:
            with trace.use_span(span, end_on_exit=False):
                yield done
        except BaseException as exc:
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
        finally:
            span.end()

    def finish(
        self, outcome: GatewayOutcome | None, *, error: BaseException | None = None, end_time: int | None = None
    ) -> None:
        self._end_phase()
        root = self.root
        if outcome is not None:
            final = outcome.trace.final if outcome.trace is not None else None
            attributes: dict[str, Any] = {
                "psychoalign.status": "failed" if outcome.failed else "completed",
                "psychoalign.composed_by": final.composed_by if final is not None else "fallback",
                "gen_ai.usage.input_tokens": outcome.prompt_tokens,
                "gen_ai.usage.output_tokens": outcome.completion_tokens,
            }
            if outcome.trace_id:
                attributes["psychoalign.trace_id"] = outcome.trace_id
            if outcome.trace is not None:
                attributes["psychoalign.rounds"] = len(outcome.trace.rounds)
            if final is not None and not outcome.failed:
                if final.tension is not None:
                    attributes["psychoalign.tension"] = final.tension
                attributes["psychoalign.state"] = final.state.value if final.state else "none"
                attributes["psychoalign.defense"] = final.defense.value if final.defense else "none"
            if outcome.failed:
                attributes["psychoalign.failure"] = outcome.failure or "internal"
                root.set_status(Status(StatusCode.ERROR, outcome.failure or "failed"))
            root.set_attributes(attributes)
        if error is not None:
            root.set_status(Status(StatusCode.ERROR, type(error).__name__))
        root.end(end_time=end_time)


def _ns(moment: datetime | None) -> int | None:
    return int(moment.timestamp() * 1e9) if moment is not None else None


def record_finished(tracer: Tracer, outcome: GatewayOutcome, source: str) -> None:
    """A span for a negotiation that ran elsewhere (the A2A system agent), from its trace's start
    and end times and outcome; no round spans (their times are not recorded)."""
    trace_ = outcome.trace
    framework = trace_.framework.name if trace_ is not None and trace_.framework is not None else ""
    start = _ns(trace_.created_at) if trace_ is not None else None
    spans = NegotiationSpans(tracer, outcome.deployment, framework, source, start_time=start)
    spans.finish(outcome, end_time=_ns(trace_.finished_at) if trace_ is not None else None)
