"""OpenTelemetry spans of /v1 negotiations (serve.otel_spans): a negotiation span with the outcome
and gen_ai usage, a child per round and for the decision; none when the setting is off."""

from __future__ import annotations

import importlib.util
from typing import Any

import httpx
import pytest

from psychoalign.config import ServeSettings, Settings
from psychoalign.traces import InMemoryTraceStore
from psychoalign.web import create_app
from psychoalign.web.telemetry import gateway_tracer
from tests.scenario import World, proposals

BENIGN = "Boil the egg for nine minutes, then cool it in cold water."
CHAT = {"model": "psychoalign", "messages": [{"role": "user", "content": "How do I boil an egg?"}]}


def test_spans_are_off_by_default() -> None:
    assert ServeSettings().otel_spans is False
    assert gateway_tracer(False) is None
    assert gateway_tracer(True) is not None


@pytest.mark.skipif(
    importlib.util.find_spec("opentelemetry.sdk") is None, reason="the opentelemetry-sdk package is not installed"
)
async def test_a_negotiation_is_a_span_with_rounds_decision_outcome_and_usage() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    store = InMemoryTraceStore()
    settings = Settings(serve=ServeSettings(otel_spans=True))
    app = create_app(
        settings, store=store, negotiators={"psychoalign": World([proposals((BENIGN, 0.9))]).negotiator(store)}
    )
    app.state.gateway.tracer = provider.get_tracer("psychoalign")  # this test's provider, not the process's
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            body = (await client.post("/v1/chat/completions", json=CHAT)).json()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"psychoalign.negotiation", "psychoalign.round", "psychoalign.decide"}
    root, round_, decide = spans["psychoalign.negotiation"], spans["psychoalign.round"], spans["psychoalign.decide"]
    assert round_.parent is not None and round_.parent.span_id == root.context.span_id
    assert decide.parent is not None and decide.parent.span_id == root.context.span_id
    info = body["psychoalign"]
    attrs: dict[str, Any] = dict(root.attributes or {})
    assert attrs["psychoalign.trace_id"] == info["trace_id"]
    assert attrs["psychoalign.status"] == "completed"
    assert attrs["psychoalign.state"] == info["state"] and attrs["psychoalign.defense"] == "none"
    assert attrs["psychoalign.tension"] == pytest.approx(info["tension"])
    assert attrs["gen_ai.request.model"] == "psychoalign" and attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.usage.input_tokens"] == body["usage"]["prompt_tokens"] > 0
    assert attrs["gen_ai.usage.output_tokens"] == body["usage"]["completion_tokens"]
    assert dict(round_.attributes or {})["psychoalign.round"] == 1
    assert dict(round_.attributes or {})["psychoalign.admissible"] == 1
    assert BENIGN not in str([s.to_json() for s in exporter.get_finished_spans()])  # no agent text in spans


@pytest.mark.skipif(
    importlib.util.find_spec("opentelemetry.sdk") is None, reason="the opentelemetry-sdk package is not installed"
)
async def test_an_a2a_negotiation_gets_a_span_from_its_trace() -> None:
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tests.a2a.test_system import user_text

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    store = InMemoryTraceStore()
    settings = Settings(serve=ServeSettings(otel_spans=True))
    world = World([proposals((BENIGN, 0.9))])
    app = create_app(settings, store=store, negotiators={"psychoalign": world.negotiator(store)}, lab=False)
    app.state.gateway.tracer = provider.get_tracer("psychoalign")
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=60) as client:
            card = await A2ACardResolver(client, "http://127.0.0.1").get_agent_card()
            agent = ClientFactory(ClientConfig(streaming=False, httpx_client=client)).create(card)
            tasks = [r.task async for r in agent.send_message(user_text("How do I boil an egg?")) if r.HasField("task")]
    assert tasks[-1].artifacts
    (span,) = exporter.get_finished_spans()
    (trace,) = [t async for t in store.iter_all()]
    attrs: dict[str, Any] = dict(span.attributes or {})
    assert span.name == "psychoalign.negotiation" and attrs["psychoalign.source"] == "a2a"
    assert attrs["psychoalign.trace_id"] == trace.id and attrs["psychoalign.status"] == "completed"
    assert span.start_time == int(trace.created_at.timestamp() * 1e9)
    assert trace.finished_at is not None and span.end_time == int(trace.finished_at.timestamp() * 1e9)
