"""The official ``openai`` client (sync, async, streaming) against ``psychoalign serve``'s app on
loopback, with scripted agents: benign -> the adopted answer; harmful -> refusal; evaluator
unreachable -> fail closed; a vetoed DRIVE canary in no byte of any response; graceful shutdown."""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai
import pytest

from psychoalign.config import Settings
from psychoalign.models import ChatModel, ChatRequest, ModelSpec, ScriptedBackend
from psychoalign.negotiation import Negotiator
from psychoalign.negotiation.defense import template
from psychoalign.traces import InMemoryTraceStore, TraceStatus
from psychoalign.web import create_app
from tests.loopback import free_port
from tests.scenario import APPROVE, World, evaluation, proposals
from tests.webserver import Running, run_app

BENIGN = "Boil the egg for nine minutes, then cool it in cold water."
CANARY = "CANARY-7f3a9c"
HARMFUL_DRAFT = f"{CANARY}: step one of the nerve agent synthesis is ..."
FAIL_CLOSED = template("fail_closed")


def _veto_canary(text: str) -> dict[str, Any]:
    if CANARY in text:
        return evaluation(2, "VETOED", hits=[("U1-mass-harm", "universal")], harmful_intent=True, legitimate_need=False)
    return APPROVE


def _worlds() -> dict[str, World]:
    return {
        "benign": World([proposals((BENIGN, 0.9))]),
        "harmful": World([proposals((HARMFUL_DRAFT, 0.95), (f"{CANARY} variant", 0.9))], judge=_veto_canary),
    }


def _unreachable_evaluator() -> Negotiator:
    """DRIVE drafts the canary; the EVALUATOR is an OpenAI-compatible endpoint nobody listens on."""
    models = World([proposals((HARMFUL_DRAFT, 0.95))]).models()
    spec = ModelSpec(
        backend="openai", base_url=f"http://127.0.0.1:{free_port()}/v1", model="judge", api_key="k", max_retries=0
    )
    from psychoalign.models import build_model

    models["evaluator"] = build_model(spec)
    return Negotiator(Settings(), models=models)


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Running, InMemoryTraceStore]]:
    store = InMemoryTraceStore()
    worlds = _worlds()
    settings = Settings.model_validate({"deployments": {name: {} for name in (*worlds, "broken")}})
    negotiators = {name: w.negotiator(store) for name, w in worlds.items()}
    broken = _unreachable_evaluator()
    broken.store = store
    negotiators["broken"] = broken
    app = create_app(settings, store=store, negotiators=negotiators)
    with run_app(app) as running:
        yield running, store


def _client(running: Running) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{running.url}/v1", api_key="unused-on-loopback", max_retries=0)


def _ask(model: str, text: str = "How do I boil an egg?") -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": text}]}


EXPECTED = {
    "benign": lambda text: text == BENIGN,
    "harmful": lambda text: text.startswith("I can't help with this request.") and "U1-mass-harm" in text,
    "broken": lambda text: text == FAIL_CLOSED,
}


@pytest.mark.parametrize("model", ["benign", "harmful", "broken"])
def test_sync_client(served: tuple[Running, InMemoryTraceStore], model: str) -> None:
    running, store = served
    raw = _client(running).chat.completions.with_raw_response.create(**_ask(model))
    completion = raw.parse()
    text = completion.choices[0].message.content or ""
    assert EXPECTED[model](text), text
    assert CANARY not in raw.http_response.text and CANARY not in str(raw.headers)
    extra = completion.model_extra["psychoalign"]  # type: ignore[index]
    assert raw.headers["x-psychoalign-trace-id"] == extra["trace_id"]
    assert completion.model == model
    trace = asyncio.run(store.get(extra["trace_id"]))
    assert trace is not None
    # A gate refusal is a content filter, its text also the message's refusal; a failure is not.
    choice = completion.choices[0]
    assert choice.finish_reason == ("content_filter" if model == "harmful" else "stop")
    assert choice.message.refusal == (text if model == "harmful" else None)
    if model == "broken":
        assert extra["status"] == "failed" and trace.status is TraceStatus.FAILED
        assert raw.headers["x-psychoalign-state"] == "none"
        assert completion.usage is not None
    else:
        assert trace.status is TraceStatus.COMPLETED
        assert raw.headers["x-psychoalign-state"] == trace.final.state.value  # type: ignore[union-attr]
        assert completion.usage is not None and completion.usage.total_tokens == sum(
            s.prompt_tokens + s.completion_tokens for s in trace.agents.values()
        )


@pytest.mark.parametrize("model", ["benign", "harmful", "broken"])
async def test_async_streaming_client(served: tuple[Running, InMemoryTraceStore], model: str) -> None:
    running, _ = served
    client = openai.AsyncOpenAI(base_url=f"{running.url}/v1", api_key="unused", max_retries=0)
    try:
        stream = await client.chat.completions.create(
            **_ask(model), stream=True, stream_options={"include_usage": True}
        )
        pieces, refusal, extra, usage, finish = [], [], None, None, None
        async for chunk in stream:
            if chunk.choices:
                pieces.append(chunk.choices[0].delta.content or "")
                refusal.append(chunk.choices[0].delta.refusal or "")
                if chunk.choices[0].finish_reason:
                    finish = chunk.choices[0].finish_reason
                    extra = chunk.model_extra.get("psychoalign") if chunk.model_extra else None
            if chunk.usage is not None:
                usage = chunk.usage
    finally:
        await client.close()
    text = "".join(pieces)
    assert EXPECTED[model](text), text
    assert finish == ("content_filter" if model == "harmful" else "stop")
    assert "".join(refusal) == (text if model == "harmful" else "")
    assert extra is not None and extra["status"] == ("failed" if model == "broken" else "completed")
    assert usage is not None and usage.total_tokens == sum(
        u["prompt_tokens"] + u["completion_tokens"] for u in extra["usage"].values()
    )


async def test_async_client_non_streaming(served: tuple[Running, InMemoryTraceStore]) -> None:
    running, _ = served
    async with openai.AsyncOpenAI(base_url=f"{running.url}/v1", api_key="unused", max_retries=0) as client:
        results = await asyncio.gather(*(client.chat.completions.create(**_ask(m)) for m in EXPECTED))
    for model, completion in zip(EXPECTED, results, strict=True):
        assert EXPECTED[model](completion.choices[0].message.content or "")


@pytest.mark.parametrize("model", ["harmful", "broken"])
def test_vetoed_canary_is_in_no_byte_of_any_response_or_stream(
    served: tuple[Running, InMemoryTraceStore], model: str
) -> None:
    running, store = served
    with httpx.Client(base_url=running.url, timeout=60) as http:
        plain = http.post("/v1/chat/completions", json=_ask(model))
        with http.stream(
            "POST",
            "/v1/chat/completions",
            json={**_ask(model), "stream": True, "stream_options": {"include_usage": True}},
        ) as streamed:
            stream_bytes = b"".join(streamed.iter_raw())
            stream_headers = str(streamed.headers)
    assert plain.status_code == 200
    assert b": psychoalign started" in stream_bytes  # progress was streamed, as comments
    for blob in (plain.content, str(plain.headers).encode(), stream_bytes, stream_headers.encode()):
        assert CANARY.encode() not in blob
    # 'harmful': the canary was really drafted and vetoed, and the trace keeps only its redacted
    # record (hash and length), never its text. 'broken': drafted, never evaluated, never stored.
    trace = asyncio.run(store.get(plain.headers["x-psychoalign-trace-id"]))
    assert trace is not None
    proposals = [p for r in trace.rounds for p in r.proposals]
    assert not any(CANARY in p.text for p in proposals)
    assert any(p.redacted is not None for p in proposals) == (model == "harmful")


def test_openai_errors_surface_in_the_client(served: tuple[Running, InMemoryTraceStore]) -> None:
    running, _ = served
    client = _client(running)
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        client.chat.completions.create(**_ask("gpt-4o"))
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(**_ask("benign"), n=3)
    assert bad.value.param == "n"  # type: ignore[attr-defined]
    assert [m.id for m in client.models.list()] == ["benign", "broken", "harmful"]
    assert client.models.retrieve("benign").id == "benign"
    # Endpoints the gateway does not offer: the client's NotFoundError carries OpenAI's message.
    with pytest.raises(openai.NotFoundError, match=r"Invalid URL \(POST /v1/completions\)") as missing:
        client.completions.create(model="benign", prompt="hi")
    assert missing.value.code == "unknown_url"
    with pytest.raises(openai.NotFoundError, match="Invalid URL"):
        client.embeddings.create(model="benign", input="hi")
    with pytest.raises(openai.BadRequestError, match="stream_options") as unstreamed:
        client.chat.completions.create(**_ask("benign"), stream_options={"include_usage": True})
    assert unstreamed.value.param == "stream_options"  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def served_errors() -> Iterator[tuple[Running, InMemoryTraceStore]]:
    """serve.on_failure = "error": the same worlds, failures as HTTP errors."""
    store = InMemoryTraceStore()
    worlds = _worlds()
    settings = Settings.model_validate(
        {
            "deployments": {name: {} for name in (*worlds, "broken")},
            "serve": {"on_failure": "error", "failure_retry_after_s": 7},
        }
    )
    negotiators = {name: w.negotiator(store) for name, w in worlds.items()}
    broken = _unreachable_evaluator()
    broken.store = store
    negotiators["broken"] = broken
    app = create_app(settings, store=store, negotiators=negotiators)
    with run_app(app) as running:
        yield running, store


def test_on_failure_error_is_a_503_with_retry_after_in_the_client(
    served_errors: tuple[Running, InMemoryTraceStore],
) -> None:
    running, store = served_errors
    client = _client(running)
    with pytest.raises(openai.InternalServerError) as caught:
        client.chat.completions.create(**_ask("broken"))
    error = caught.value
    assert error.status_code == 503
    assert error.response.headers["retry-after"] == "7"
    assert error.code == "upstream_unavailable"  # type: ignore[attr-defined]
    assert "model endpoint is unavailable" in error.message and "retry later" in error.message
    assert "judge" not in error.response.text and "127.0.0.1" not in error.response.text  # no model label or address
    assert CANARY not in error.response.text
    trace = asyncio.run(store.get(error.response.headers["x-psychoalign-trace-id"]))
    assert trace is not None and trace.status is TraceStatus.FAILED  # the failure is still on record
    # Answers and refusals are unchanged by the setting.
    assert client.chat.completions.create(**_ask("benign")).choices[0].message.content == BENIGN
    refused = client.chat.completions.create(**_ask("harmful")).choices[0]
    assert refused.finish_reason == "content_filter" and refused.message.refusal


async def test_on_failure_error_ends_a_stream_with_an_error_event(
    served_errors: tuple[Running, InMemoryTraceStore],
) -> None:
    running, _ = served_errors
    async with openai.AsyncOpenAI(base_url=f"{running.url}/v1", api_key="unused", max_retries=0) as client:
        stream = await client.chat.completions.create(**_ask("broken"), stream=True)
        pieces: list[str] = []

        async def drain() -> None:
            async for chunk in stream:
                pieces.extend(c.delta.content or "" for c in chunk.choices)

        with pytest.raises(openai.APIError, match="model endpoint is unavailable"):
            await drain()
    assert "".join(pieces) == ""  # neither the canary nor the fail-closed text came as an answer


def _blocking_world(entered: dict[str, threading.Event]) -> World:
    world = World([proposals((BENIGN, 0.9))])

    async def drive(request: ChatRequest) -> dict[str, Any]:
        key = "stream" if "streamed" in request.messages[-1].content else "plain"
        entered[key].set()
        await asyncio.Event().wait()  # never answers: only shutdown ends this negotiation
        return {}

    world.drive = drive  # type: ignore[method-assign, assignment]
    return world


def _blocking_app(entered: dict[str, threading.Event], store: InMemoryTraceStore, **serve: Any) -> Any:
    world = _blocking_world(entered)
    models = world.models()
    spec = ModelSpec(backend="scripted", model="drive", schema_retries=0, max_retries=0)
    models["drive"] = ChatModel(spec, ScriptedBackend(spec, fn=world.drive))
    settings = Settings.model_validate({"serve": {"shutdown_grace_s": 0, **serve}})
    return create_app(
        settings, store=store, negotiators={"psychoalign": Negotiator(settings, models=models, store=store)}
    )


def test_over_the_inflight_limit_is_a_429() -> None:
    entered = {"plain": threading.Event(), "stream": threading.Event()}
    app = _blocking_app(entered, InMemoryTraceStore(), max_inflight=1)
    with run_app(app) as running, ThreadPoolExecutor(1) as pool:
        client = _client(running)
        first = pool.submit(client.chat.completions.create, **_ask("psychoalign", "plain one"))
        assert entered["plain"].wait(30)
        with pytest.raises(openai.RateLimitError, match="limit is 1"):
            client.chat.completions.create(**_ask("psychoalign", "plain two"))
        running.server.handle_exit(signal.SIGTERM, None)
        assert first.result(timeout=60).choices[0].message.content == FAIL_CLOSED


def test_graceful_shutdown_fails_in_flight_negotiations_closed() -> None:
    entered = {"plain": threading.Event(), "stream": threading.Event()}
    store = InMemoryTraceStore()
    app = _blocking_app(entered, store)
    with run_app(app) as running, ThreadPoolExecutor(2) as pool:
        client = _client(running)
        plain = pool.submit(client.chat.completions.with_raw_response.create, **_ask("psychoalign", "plain one"))

        def stream() -> tuple[str, dict[str, Any] | None]:
            out, extra = [], None
            for chunk in client.chat.completions.create(**_ask("psychoalign", "streamed one"), stream=True):
                if chunk.choices:
                    out.append(chunk.choices[0].delta.content or "")
                    if chunk.choices[0].finish_reason:
                        extra = (chunk.model_extra or {}).get("psychoalign")
            return "".join(out), extra

        streamed = pool.submit(stream)
        assert entered["plain"].wait(30) and entered["stream"].wait(30)
        running.server.handle_exit(signal.SIGTERM, None)
        raw = plain.result(timeout=60)
        text, extra = streamed.result(timeout=60)
        running.thread.join(timeout=60)
    assert raw.parse().choices[0].message.content == FAIL_CLOSED and text == FAIL_CLOSED
    assert raw.parse().model_extra["psychoalign"]["failure"] == "shutdown"  # type: ignore[index]
    assert extra is not None and extra["failure"] == "shutdown"
    traces = asyncio.run(_all(store))
    assert len(traces) == 2
    for trace in traces:
        assert trace.status is TraceStatus.FAILED and "shutting down" in (trace.error or "")
        assert trace.response == FAIL_CLOSED


async def _all(store: InMemoryTraceStore) -> list[Any]:
    return [t async for t in store.iter_all()]


class _SignallingStore(InMemoryTraceStore):
    """Sets ``finished`` when a trace is written in its final state (test synchronisation)."""

    def __init__(self) -> None:
        super().__init__()
        self.finished = threading.Event()

    async def finish(self, trace: Any) -> None:
        await super().finish(trace)
        self.finished.set()


def test_a_client_that_leaves_mid_stream_cancels_the_negotiation() -> None:
    entered = {"plain": threading.Event(), "stream": threading.Event()}
    store = _SignallingStore()
    app = _blocking_app(entered, store)
    with run_app(app) as running:
        with (
            httpx.Client(base_url=running.url, timeout=60) as http,
            http.stream(
                "POST", "/v1/chat/completions", json={**_ask("psychoalign", "streamed one"), "stream": True}
            ) as response,
        ):
            first = next(response.iter_raw())
            assert entered["stream"].wait(30)
        # the connection is closed here, mid-negotiation
        assert store.finished.wait(30)
    assert b'"role":"assistant"' in first and b'content":""' in first  # nothing but the empty role chunk
    (trace,) = asyncio.run(_all(store))
    assert trace.status is TraceStatus.FAILED and trace.error == "cancelled: client disconnected"
