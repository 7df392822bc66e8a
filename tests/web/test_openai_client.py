"""The official ``openai`` client (sync, async, streaming) against ``psychoalign serve``'s app on
loopback, with scripted agents: benign -> the adopted answer; harmful -> refusal; evaluator
unreachable -> fail closed; a vetoed DRIVE canary in no byte of any response; graceful shutdown."""

from __future__ import annotations

import asyncio
import importlib.util
import signal
import threading
import time
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
from tests.scenario import APPROVE, World, evaluation, proposals, scripted_crisis
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


OUTCOME = {"benign": "answered", "harmful": "refused", "broken": "failed"}
EXPECTED = {
    "benign": lambda text: text == BENIGN,
    "harmful": lambda text: text.startswith("I can't help with this request.") and "U1-mass-harm" in text,
    "broken": lambda text: text == FAIL_CLOSED,
}


def test_models_list_and_retrieve_in_openais_shape_with_a_unix_created_time() -> None:
    """``GET /v1/models`` and ``/v1/models/{id}`` through the official client: OpenAI's model
    object, ``created`` a Unix time (when the server began serving the deployment; it was 0), and
    an unknown id ``NotFoundError`` ``model_not_found`` naming ``model``."""
    store = InMemoryTraceStore()
    settings = Settings.model_validate({"deployments": {"alpha": {}, "beta": {}}})
    before = int(time.time())
    app = create_app(settings, store=store, negotiators={n: World([]).negotiator(store) for n in ("alpha", "beta")})
    after = int(time.time())
    with run_app(app) as running:
        client = _client(running)
        listed = client.models.list().data
        assert [m.id for m in listed] == ["alpha", "beta"]
        for m in listed:
            assert m.object == "model" and m.owned_by == "psychoalign" and before <= m.created <= after
        assert client.models.retrieve("beta").model_dump() == listed[1].model_dump()
        with pytest.raises(openai.NotFoundError) as caught:
            client.models.retrieve("gpt-4o")
        assert caught.value.code == "model_not_found" and caught.value.param == "model"  # type: ignore[attr-defined]


def test_a_listed_model_whose_id_holds_a_slash_is_retrieved_by_that_id() -> None:
    """A deployment named "org/guard" is listed by ``GET /v1/models`` and retrieved by
    ``GET /v1/models/org/guard`` (it was an "Invalid URL" 404, though the list named it); an
    unknown id with a slash is ``model_not_found``, a trailing slash a 307 to the path without
    it, and another method a 405 naming GET and HEAD."""
    store = InMemoryTraceStore()
    names = ("org/guard", "alpha")
    settings = Settings.model_validate({"deployments": {n: {} for n in names}})
    app = create_app(settings, store=store, negotiators={n: World([]).negotiator(store) for n in names})
    with run_app(app) as running:
        client = _client(running)
        listed = {m.id: m.model_dump() for m in client.models.list().data}
        assert sorted(listed) == ["alpha", "org/guard"]
        for name in names:
            assert client.models.retrieve(name).model_dump() == listed[name]
        with pytest.raises(openai.NotFoundError) as caught:
            client.models.retrieve("org/nope")
        assert caught.value.code == "model_not_found" and caught.value.param == "model"  # type: ignore[attr-defined]
        with httpx.Client(base_url=running.url, timeout=60) as http:
            slash = http.get("/v1/models/org/guard/?x=1")
            assert slash.status_code == 307 and slash.headers["location"] == "/v1/models/org/guard?x=1"
            assert http.get("/v1/models/").headers["location"] == "/v1/models"
            head = http.head("/v1/models/org/guard")
            assert head.status_code == 200 and not head.content
            delete = http.delete("/v1/models/org/guard")
            assert delete.status_code == 405 and delete.headers["allow"] == "GET, HEAD"
            assert delete.json()["error"]["code"] == "method_not_allowed"


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
    # What the client received, machine-readable: the body's outcome, its rules, and a header.
    assert extra["outcome"] == raw.headers["x-psychoalign-outcome"] == OUTCOME[model]
    assert extra["rules"] == (["U1-mass-harm"] if model == "harmful" else [])
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
    assert extra["outcome"] == OUTCOME[model]
    assert usage is not None and usage.total_tokens == sum(
        u["prompt_tokens"] + u["completion_tokens"] for u in extra["usage"].values()
    )


SELF_HARM = "I want to kill myself, how many of my pills would it take?"


@pytest.mark.parametrize("stream", [False, True])
def test_a_redirect_says_so_in_machine_readable_fields_and_no_draft_leaves(
    served: tuple[Running, InMemoryTraceStore], stream: bool
) -> None:
    """A self-harm request on the world whose DRIVE drafts the vetoed canary: the client gets the
    framework's supportive message (no model wrote it: ``content_filter``, the text also as
    ``refusal``), and ``psychoalign`` says ``outcome: "redirected"`` with the crisis channel and
    the self-harm rule; streamed, the last chunk says the same, and no byte of a draft is sent."""
    running, store = served
    client = _client(running)
    if stream:
        chunks = list(client.chat.completions.create(**_ask("harmful", SELF_HARM), stream=True))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        refusal = "".join(c.choices[0].delta.refusal or "" for c in chunks if c.choices)
        (finish,) = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        extra = chunks[-1].model_extra["psychoalign"]  # type: ignore[index]
        wire = "".join(c.model_dump_json() for c in chunks)
    else:
        completion = client.chat.completions.create(**_ask("harmful", SELF_HARM))
        text, refusal = completion.choices[0].message.content or "", completion.choices[0].message.refusal
        finish, extra = completion.choices[0].finish_reason, completion.model_extra["psychoalign"]  # type: ignore[index]
        wire = completion.model_dump_json()
    assert (finish, refusal) == ("content_filter", text) and "988" in text
    assert extra["outcome"] == "redirected" and extra["defense"] == "sublimation"
    assert extra["channels"] == ["crisis"] and extra["rules"] and all(r.startswith("U") for r in extra["rules"])
    assert CANARY not in wire
    trace = asyncio.run(store.get(extra["trace_id"]))
    assert trace is not None and trace.final is not None and trace.final.response == text


@pytest.mark.parametrize("model", ["benign", "harmful"])
async def test_every_stream_chunk_names_the_system_fingerprint_of_the_completion(
    served: tuple[Running, InMemoryTraceStore], model: str
) -> None:
    """OpenAI's chunks carry the completion's ``system_fingerprint``; streamed chunks here said
    null where the same request unstreamed named the framework's version and hash."""
    running, _ = served
    async with openai.AsyncOpenAI(base_url=f"{running.url}/v1", api_key="unused", max_retries=0) as client:
        whole = await client.chat.completions.create(**_ask(model))
        stream = await client.chat.completions.create(
            **_ask(model), stream=True, stream_options={"include_usage": True}
        )
        prints = [chunk.system_fingerprint async for chunk in stream]
    assert whole.system_fingerprint is not None and whole.system_fingerprint.startswith("psychoalign-general-")
    assert len(prints) >= 4 and set(prints) == {whole.system_fingerprint}


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
        # the scripted crisis screen of tests.scenario.World: the gateway's life cycle is under test, not the check
        settings,
        store=store,
        negotiators={"psychoalign": Negotiator(settings, models=models, store=store, crisis=scripted_crisis())},
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


@pytest.fixture(scope="module")
def served_with_token() -> Iterator[Running]:
    """A keyless deployment behind the local token (as ``psychoalign serve`` starts), a small body
    limit: the errors a client can meet, each with its own status."""
    settings = Settings.model_validate({"serve": {"max_body_bytes": 20_000}})
    world = World([proposals((BENIGN, 0.9))])
    app = create_app(
        settings, store=InMemoryTraceStore(), negotiators={"psychoalign": world.negotiator()}, local_token="tok"
    )
    with run_app(app) as running:
        yield running


def test_the_openai_client_raises_each_error_by_its_status_with_openais_body(served_with_token: Running) -> None:
    """400 bad parameter, 401 wrong token, 404 unknown model, 413 body over the limit: the
    client's own exception class for each, and OpenAI's error object (message, type, param,
    code) in every one."""
    base = f"{served_with_token.url}/v1"
    good = openai.OpenAI(base_url=base, api_key="tok", max_retries=0)
    cases: list[tuple[Any, type[openai.APIStatusError], int, str, str | None]] = [
        (
            lambda: good.chat.completions.create(**_ask("psychoalign"), n=2),
            openai.BadRequestError,
            400,
            "unsupported_parameter",
            "n",
        ),
        (
            lambda: good.chat.completions.create(**_ask("psychoalign"), max_tokens=0),
            openai.BadRequestError,
            400,
            "invalid_value",
            "max_tokens",
        ),
        (
            lambda: openai.OpenAI(base_url=base, api_key="wrong", max_retries=0).chat.completions.create(
                **_ask("psychoalign")
            ),
            openai.AuthenticationError,
            401,
            "invalid_api_key",
            None,
        ),
        (lambda: good.chat.completions.create(**_ask("gpt-4o")), openai.NotFoundError, 404, "model_not_found", "model"),
        (
            lambda: good.chat.completions.create(**_ask("psychoalign", "x" * 30_000)),
            openai.APIStatusError,
            413,
            "request_too_large",
            None,
        ),
    ]
    for call, kind, status, code, param in cases:
        with pytest.raises(kind) as caught:
            call()
        error = caught.value
        assert error.status_code == status and error.code == code and error.param == param, error.body  # type: ignore[attr-defined]
        assert isinstance(error.body, dict) and set(error.body) == {"message", "type", "param", "code"}
        assert error.body["type"] == "invalid_request_error" and error.body["message"]
    for stream in (False, True):  # a bad request is refused before any stream starts
        with pytest.raises(openai.NotFoundError):
            good.chat.completions.create(**_ask("gpt-4o"), stream=stream)


@pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="the litellm package is not installed")
def test_litellm_talks_to_v1_as_to_an_openai_endpoint(
    served_with_token: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LiteLLM's OpenAI provider against ``/v1``: the answer, sync and async, streamed and not,
    ``max_tokens`` and ``stop`` applied, and our statuses mapped to LiteLLM's own exceptions."""
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download at import
    import litellm

    call: dict[str, Any] = {
        "model": "openai/psychoalign",
        "api_base": f"{served_with_token.url}/v1",
        "api_key": "tok",
        "messages": [{"role": "user", "content": "How do I boil an egg?"}],
        "num_retries": 0,
    }
    whole = litellm.completion(**call)
    assert whole.choices[0].message.content == BENIGN and whole.choices[0].finish_reason == "stop"
    assert whole.system_fingerprint.startswith("psychoalign-general-")
    cut = litellm.completion(**call, max_tokens=2)
    assert (cut.choices[0].message.content, cut.choices[0].finish_reason) == ("Boil the", "length")
    stopped = litellm.completion(**call, stop=["nine"])
    assert stopped.choices[0].message.content == "Boil the egg for "
    streamed = "".join(c.choices[0].delta.content or "" for c in litellm.completion(**call, stream=True))
    assert streamed == BENIGN

    async def async_calls() -> tuple[str, str]:
        plain = await litellm.acompletion(**call)
        stream = await litellm.acompletion(**call, stream=True)
        return plain.choices[0].message.content, "".join([c.choices[0].delta.content or "" async for c in stream])

    assert asyncio.run(async_calls()) == (BENIGN, BENIGN)
    for kwargs, kind in (
        ({"api_key": "wrong"}, litellm.AuthenticationError),
        ({"model": "openai/gpt-4o"}, litellm.NotFoundError),
        ({"n": 2}, litellm.BadRequestError),
        ({"temperature": 5}, litellm.BadRequestError),
    ):
        with pytest.raises(kind):
            litellm.completion(**{**call, **kwargs})


def test_the_stream_helper_carries_a_gate_refusal_in_its_events(served: tuple[Running, InMemoryTraceStore]) -> None:
    """docs/gateway.md: the official client's ``stream`` helper reads a gate refusal as OpenAI's
    content filter. Its events carry the refusal (``content.done`` and ``refusal.done``, the
    text ``create`` returns), and ``get_final_completion()`` raises
    ``ContentFilterFinishReasonError``, with no response format too."""
    running, _ = served
    client = _client(running)
    said = client.chat.completions.create(**_ask("harmful")).choices[0].message.content
    done: dict[str, str] = {}
    with client.chat.completions.stream(**_ask("harmful")) as stream:
        for event in stream:
            if event.type == "content.done":
                done["content"] = event.content
            elif event.type == "refusal.done":
                done["refusal"] = event.refusal
        with pytest.raises(openai.ContentFilterFinishReasonError):
            stream.get_final_completion()
    assert said is not None and EXPECTED["harmful"](said)
    assert done == {"content": said, "refusal": said}
