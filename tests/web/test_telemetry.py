"""OpenTelemetry spans of /v1 negotiations (serve.otel_spans): a negotiation span with the outcome
and gen_ai usage, a child per round and for the decision, a span per agent call under them; none
when the setting is off; serve.otlp_endpoint exports them by OTLP (or names the missing extra)."""

from __future__ import annotations

import importlib.util
from typing import Any

import httpx
import pytest

from psychoalign.config import ServeSettings, Settings
from psychoalign.errors import ConfigError
from psychoalign.traces import InMemoryTraceStore
from psychoalign.web import create_app
from psychoalign.web.telemetry import gateway_tracing
from tests.scenario import World, proposals


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


BENIGN = "Boil the egg for nine minutes, then cool it in cold water."
CHAT = {"model": "psychoalign", "messages": [{"role": "user", "content": "How do I boil an egg?"}]}


def test_spans_are_off_by_default() -> None:
    assert ServeSettings().otel_spans is False
    assert gateway_tracing(ServeSettings()).tracer is None
    assert gateway_tracing(ServeSettings(otel_spans=True)).tracer is not None


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
    finished = exporter.get_finished_spans()
    spans = {s.name: s for s in finished}
    roles = ("psychoalign.drive", "psychoalign.evaluator", "psychoalign.mediator")
    assert set(spans) == {"psychoalign.negotiation", "psychoalign.round", "psychoalign.decide", *roles}
    root, round_, decide = spans["psychoalign.negotiation"], spans["psychoalign.round"], spans["psychoalign.decide"]
    assert round_.parent is not None and round_.parent.span_id == root.context.span_id
    assert decide.parent is not None and decide.parent.span_id == root.context.span_id
    # One span per agent call, under its round or the decision: DRIVE, EVALUATOR (the batch) and
    # the MEDIATOR's assessment in the round; the final gate's EVALUATOR call in the decision (the
    # approved draft is adopted as it is: no composition call).
    calls = [
        (s.name, s.parent.span_id if s.parent else None, dict(s.attributes or {})) for s in finished if s.name in roles
    ]
    assert [(n, p, a["psychoalign.task"]) for n, p, a in calls] == [
        ("psychoalign.drive", round_.context.span_id, "drive"),
        ("psychoalign.evaluator", round_.context.span_id, "evaluate_batch"),
        ("psychoalign.mediator", round_.context.span_id, "assess"),
        ("psychoalign.evaluator", decide.context.span_id, "evaluate"),
    ]
    for name, _, call in calls:
        assert call["gen_ai.agent.name"] == name.split(".")[1] and call["gen_ai.response.model"]
        assert call["gen_ai.usage.input_tokens"] > 0
    spent = sum(call["gen_ai.usage.input_tokens"] for _, _, call in calls)
    info = body["psychoalign"]
    attrs: dict[str, Any] = dict(root.attributes or {})
    assert attrs["psychoalign.trace_id"] == info["trace_id"]
    assert attrs["psychoalign.status"] == "completed"
    assert attrs["psychoalign.state"] == info["state"] and attrs["psychoalign.defense"] == "none"
    assert attrs["psychoalign.tension"] == pytest.approx(info["tension"])
    assert attrs["gen_ai.request.model"] == "psychoalign" and attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.usage.input_tokens"] == body["usage"]["prompt_tokens"] == spent
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


def test_an_otlp_endpoint_without_the_exporter_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real = builtins.__import__

    def no_exporter(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("opentelemetry.exporter"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_exporter)
    with pytest.raises(ConfigError) as error:
        gateway_tracing(ServeSettings(otlp_endpoint="http://127.0.0.1:4318/v1/traces"))
    assert "psychoalign[otel]" in error.value.hint  # type: ignore[operator]
    assert "\n" not in str(error.value)


@pytest.mark.skipif(
    not _installed("opentelemetry.exporter.otlp.proto.http"),
    reason="the otel extra (opentelemetry-exporter-otlp-proto-http) is not installed",
)
async def test_spans_are_exported_to_the_otlp_endpoint() -> None:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from tests.loopback import serve

    received: list[bytes] = []

    async def collect(request: Request) -> Response:
        received.append(await request.body())
        return Response(b"", media_type="application/x-protobuf")

    with serve(Starlette(routes=[Route("/v1/traces", collect, methods=["POST"])])) as url:
        store = InMemoryTraceStore()
        settings = Settings(serve=ServeSettings(otlp_endpoint=f"{url}/v1/traces"))
        negotiator = World([proposals((BENIGN, 0.9))]).negotiator(store)
        app = create_app(settings, store=store, negotiators={"psychoalign": negotiator}, lab=False)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
                assert (await client.post("/v1/chat/completions", json=CHAT)).status_code == 200
        # Leaving the lifespan shut the exporter down, which flushed every span to the collector.
        exported = b"".join(received)
    assert b"psychoalign.negotiation" in exported and b"psychoalign.drive" in exported
    assert BENIGN.encode() not in exported
