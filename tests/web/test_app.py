"""The one app (create_app): OpenAI-compatible /v1 in process, ops routes, the A2A card, bad input."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from psychoalign.config import DeploymentSettings, Settings
from psychoalign.traces import InMemoryTraceStore
from psychoalign.web import create_app
from tests.scenario import World, evaluation, proposals

BENIGN = "Boil the egg for nine minutes, then cool it in cold water."


def _benign_world() -> World:
    return World([proposals((BENIGN, 0.9))])


@pytest.fixture
async def client() -> AsyncIterator[tuple[httpx.AsyncClient, InMemoryTraceStore]]:
    store = InMemoryTraceStore()
    app = create_app(Settings(), store=store, negotiators={"psychoalign": _benign_world().negotiator(store)})
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            yield c, store


def _chat(content: str = "How do I boil an egg?", **kw: Any) -> dict[str, Any]:
    return {"model": "psychoalign", "messages": [{"role": "user", "content": content}], **kw}


async def test_completion_carries_the_gated_answer_and_the_decision(
    client: tuple[httpx.AsyncClient, InMemoryTraceStore],
) -> None:
    c, store = client
    r = await c.post("/v1/chat/completions", json=_chat(), headers={"x-request-id": "req-42"})
    assert r.status_code == 200
    body = r.json()
    assert body["choices"][0]["message"]["content"] == BENIGN
    info = body["psychoalign"]
    assert r.headers["x-psychoalign-trace-id"] == info["trace_id"]
    assert r.headers["x-psychoalign-state"] == info["state"] == "healthy_equilibrium"
    assert float(r.headers["x-psychoalign-tension"]) == pytest.approx(info["tension"], abs=1e-4)
    assert r.headers["x-psychoalign-defense"] == "none"
    assert r.headers["x-request-id"] == "req-42"
    # usage = tokens actually spent by all three agents
    per_role = info["usage"]
    assert set(per_role) == {"drive", "evaluator", "mediator"}
    assert body["usage"]["prompt_tokens"] == sum(u["prompt_tokens"] for u in per_role.values()) > 0
    trace = await store.get(info["trace_id"])
    assert trace is not None
    assert trace.request == "How do I boil an egg?"
    assert trace.metadata["request_id"] == "req-42" and trace.metadata["deployment"] == "psychoalign"
    # the models that produced the answer, one per role
    assert info["models"] == trace.models == {r: f"scripted:{r}" for r in ("drive", "evaluator", "mediator")}


def test_the_decisions_models_name_no_server_path_or_agent_address() -> None:
    from psychoalign.web.openai_reply import public_models

    got = public_models(
        {
            "drive": "local:/srv/models/qwen2.5-1.5b-q4.gguf",
            "evaluator": "a2a:https://evaluator.internal:8443/",
            "mediator": "openai:gpt-4o-mini",
            "judge": "classifier:C:\\weights\\harm.json",
        }
    )
    assert got == {
        "drive": "local:qwen2.5-1.5b-q4.gguf",
        "evaluator": "a2a",
        "mediator": "openai:gpt-4o-mini",
        "judge": "classifier:harm.json",
    }


async def test_models_healthz_metrics_and_agent_card(client: tuple[httpx.AsyncClient, InMemoryTraceStore]) -> None:
    c, _ = client
    models = (await c.get("/v1/models")).json()
    assert [m["id"] for m in models["data"]] == ["psychoalign"]
    assert (await c.get("/healthz")).json()["status"] == "ok"
    await c.post("/v1/chat/completions", json=_chat())
    metrics = (await c.get("/metrics")).text
    assert 'psychoalign_negotiations_total{deployment="psychoalign",status="completed"} 1.0' in metrics
    assert 'psychoalign_http_requests_total{method="POST",route="/v1/chat/completions",status="200"}' in metrics
    card = (await c.get("/.well-known/agent-card.json")).json()
    assert card["name"] == "PsychoAlign"
    assert any(i["url"].endswith("/a2a/jsonrpc") for i in card["supportedInterfaces"])


BAD_INPUT = [
    (b"{not json", None, "invalid_json"),
    (b"[1, 2]", None, "invalid_json"),
    # JSON has no NaN or Infinity (Python's parser took them), wherever they stand
    (json.dumps(_chat(metadata={"x": float("nan")})).encode(), None, "invalid_json"),
    (json.dumps(_chat(temperature=float("inf"))).encode(), None, "invalid_json"),
    (json.dumps({"model": "psychoalign"}).encode(), "messages", "missing_required_parameter"),
    (json.dumps({"model": "psychoalign", "messages": []}).encode(), "messages", "empty_array"),
    (json.dumps(_chat(n=2)).encode(), "n", "unsupported_parameter"),
    (json.dumps(_chat(n=0)).encode(), "n", "invalid_value"),  # below OpenAI's range: a bad value
    # n is an integer, as OpenAI's API takes it: no string, boolean or float read as 1
    (json.dumps(_chat(n="1")).encode(), "n", "invalid_type"),
    (json.dumps(_chat(n=True)).encode(), "n", "invalid_type"),
    (json.dumps(_chat(n=1.0)).encode(), "n", "invalid_type"),
    (json.dumps(_chat(top_logprobs="2")).encode(), "top_logprobs", "invalid_type"),
    (json.dumps(_chat(logprobs=True)).encode(), "logprobs", "unsupported_parameter"),
    (
        json.dumps(_chat(tools=[{"type": "function", "function": {"name": "f g"}}])).encode(),
        "tools[0].function.name",
        None,
    ),
    (json.dumps(_chat(response_format={"type": "xml"})).encode(), "response_format.type", None),
    (json.dumps(_chat(frobnicate=1)).encode(), "frobnicate", "unknown_parameter"),
    (json.dumps({**_chat(), "model": 3}).encode(), "model", "invalid_type"),
    (json.dumps(_chat("   ")).encode(), "messages[0].content", "invalid_value"),
    (json.dumps(_chat("x" * 9000)).encode(), "messages[0].content", "context_length_exceeded"),
    (json.dumps(_chat("nul \x00 byte")).encode(), "messages[0].content", "invalid_value"),
    (
        json.dumps({"model": "psychoalign", "messages": [{"role": "tool", "content": "x"}]}).encode(),
        "messages[0].role",
        None,
    ),
    (
        json.dumps({"model": "psychoalign", "messages": [{"role": "wizard", "content": "x"}]}).encode(),
        "messages[0].role",
        None,
    ),
    (
        json.dumps(
            {
                "model": "psychoalign",
                "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}],
            }
        ).encode(),
        "messages[1].role",
        None,
    ),
    (
        json.dumps(
            {
                "model": "psychoalign",
                "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}],
            }
        ).encode(),
        "messages[0].content[0].type",
        None,
    ),
    (json.dumps(_chat(psychoalign={"framework": "/etc/passwd"})).encode(), "psychoalign.framework", None),
    # the OpenAI API takes only JSON booleans: "yes", "true" or 1 is not a stream request
    (json.dumps(_chat(stream="yes")).encode(), "stream", "invalid_type"),
    (json.dumps(_chat(stream="true")).encode(), "stream", "invalid_type"),
    (json.dumps(_chat(stream=1)).encode(), "stream", "invalid_type"),
    (
        json.dumps(_chat(stream=True, stream_options={"include_usage": "yes"})).encode(),
        "stream_options.include_usage",
        "invalid_type",
    ),
    (json.dumps(_chat(logprobs="no")).encode(), "logprobs", "invalid_type"),
    # as OpenAI's API: stream_options belongs to a streamed request only
    (json.dumps(_chat(stream_options={"include_usage": True})).encode(), "stream_options", "invalid_value"),
    (
        json.dumps(
            {
                "model": "psychoalign",
                "messages": [{"role": "assistant", "content": None, "refusal": 3}, _chat()["messages"][0]],
            }
        ).encode(),
        "messages[0].refusal",
        "invalid_type",
    ),
]


@pytest.mark.parametrize(("body", "param", "code"), BAD_INPUT)
async def test_bad_input_is_a_400_naming_the_field(
    client: tuple[httpx.AsyncClient, InMemoryTraceStore], body: bytes, param: str | None, code: str | None
) -> None:
    c, store = client
    r = await c.post("/v1/chat/completions", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["type"] == "invalid_request_error" and err["param"] == param
    if code is not None:
        assert err["code"] == code
    assert "Traceback" not in r.text and "\n" not in err["message"]
    assert [t async for t in store.iter_all()] == []  # nothing ran


@pytest.mark.parametrize(
    ("fields", "param", "code", "message"),
    [
        # "model": "" or null is no model, as OpenAI's "you must provide a model parameter"
        ({"model": ""}, "model", "missing_required_parameter", "model is required: name a deployment"),
        ({"model": None}, "model", "missing_required_parameter", "model is required: name a deployment"),
        ({"model": 5}, "model", "invalid_type", "model: input should be a valid string: send a valid model"),
        (
            {"user": 5},
            "user",
            "invalid_type",
            "user: input should be a valid string: send a valid user or leave it out",
        ),
        # the empty stop sequence named as the client sent it: a string, not a list
        ({"stop": ""}, "stop", "invalid_value", "stop is empty: send non-empty stop sequences or none"),
        ({"stop": ["x", ""]}, "stop", "invalid_value", "stop[1] is empty: send non-empty stop sequences or none"),
    ],
)
def test_a_refused_field_is_named_with_its_fix_in_one_line(
    fields: dict[str, Any], param: str, code: str, message: str
) -> None:
    from psychoalign.web.errors import APIError
    from psychoalign.web.openai_schema import parse_request

    with pytest.raises(APIError) as caught:
        parse_request(json.dumps(_chat(**fields)).encode(), max_body_bytes=100_000)
    err = caught.value
    assert (err.status, err.param, err.code) == (400, param, code)
    assert err.message.startswith(message) and "\n" not in err.message


async def test_paths_and_methods_v1_does_not_serve_answer_in_the_openai_shape(
    client: tuple[httpx.AsyncClient, InMemoryTraceStore],
) -> None:
    """An unknown /v1 path is OpenAI's 404 "Invalid URL"; a wrong method a 405 naming the methods
    in ``Allow``; HEAD answers as GET without a body; OPTIONS lists what the resource allows."""
    c, _ = client
    for method, path in (("POST", "/v1/completions"), ("POST", "/v1/embeddings"), ("GET", "/v1/nowhere/at/all")):
        r = await c.request(method, path, json={"model": "psychoalign", "prompt": "hi"})
        assert r.status_code == 404, r.text
        err = r.json()["error"]
        assert set(err) == {"message", "type", "param", "code"} and err["code"] == "unknown_url"
        assert (
            err["message"].startswith(f"Invalid URL ({method} {path})")
            and "POST /v1/chat/completions" in err["message"]
        )
    for method, path, allow in (
        ("GET", "/v1/chat/completions", "POST"),
        ("PUT", "/v1/chat/completions", "POST"),
        ("DELETE", "/v1/models/psychoalign", "GET, HEAD"),
    ):
        r = await c.request(method, path)
        assert r.status_code == 405 and r.headers["allow"] == allow
        assert r.json()["error"]["code"] == "method_not_allowed" and method in r.json()["error"]["message"]
    for path in ("/v1/models", "/v1/models/psychoalign"):
        get, head = await c.get(path), await c.head(path)
        assert head.status_code == get.status_code == 200 and head.content == b""
        assert head.headers["content-type"] == get.headers["content-type"] == "application/json"
    options = await c.options("/v1/chat/completions")
    assert options.status_code == 204 and options.headers["allow"] == "POST, OPTIONS"
    # A served path with a trailing slash is redirected to it (307 keeps the method and body).
    slash = await c.post("/v1/chat/completions/", json=_chat())
    assert slash.status_code == 307 and slash.headers["location"] == "/v1/chat/completions"


async def test_the_api_roots_are_404s_in_their_faces_shape_never_redirects(
    client: tuple[httpx.AsyncClient, InMemoryTraceStore],
) -> None:
    """`/v1` and `/a2a` serve nothing themselves, with or without a trailing slash: each form
    is a 404 in its face's error shape, never a redirect (`GET /v1` was a 307 to `/v1/`, itself a
    404). The card lives at its well-known URI only: the slash form and the old
    ``/.well-known/agent.json`` are the A2A 404s that `serve-a2a` answers too (it was a 307 here)."""
    c, _ = client
    for method in ("GET", "POST", "HEAD"):
        for path in ("/v1", "/v1/"):
            r = await c.request(method, path)
            assert r.status_code == 404 and "location" not in r.headers, (method, path, r.status_code)
            if method != "HEAD":
                assert r.json()["error"]["code"] == "unknown_url"
        for path in ("/a2a", "/a2a/", "/.well-known/agent-card.json/", "/.well-known/agent.json"):
            r = await c.request(method, path)
            assert r.status_code == 404 and "location" not in r.headers, (method, path, r.status_code)
            if method != "HEAD":
                assert r.json()["error"]["status"] == "NOT_FOUND"
    # the card's old path (earlier A2A versions) names where the card is
    assert "the agent card is at /.well-known/agent-card.json" in (await c.get("/.well-known/agent.json")).text


async def test_a_refusal_resent_as_history_is_an_earlier_turn(
    client: tuple[httpx.AsyncClient, InMemoryTraceStore],
) -> None:
    """An assistant message with ``content: null`` and a ``refusal`` (what a JSON-format refusal
    returns), or with refusal content parts, is accepted back as history: its text is the turn."""
    c, store = client
    asked = _chat("How do I boil an egg? Answer in JSON.", response_format={"type": "json_object"})
    refused = await c.post("/v1/chat/completions", json=asked)
    message = refused.json()["choices"][0]["message"]
    assert message["content"] is None and message["refusal"]
    for earlier in (message, {"role": "assistant", "content": [{"type": "refusal", "refusal": message["refusal"]}]}):
        follow = _chat("Then just tell me in words.")
        follow["messages"] = [_chat()["messages"][0], earlier, *follow["messages"]]
        r = await c.post("/v1/chat/completions", json=follow)
        assert r.status_code == 200, r.text
        trace = await store.get(r.json()["psychoalign"]["trace_id"])
        assert trace is not None and f"Assistant: {message['refusal']}" in (trace.context or "")


async def test_null_is_a_field_left_out_as_in_openais_api(client: tuple[httpx.AsyncClient, InMemoryTraceStore]) -> None:
    """``"stream": null`` is no stream (the field is nullable in OpenAI's API); a response message
    dumped whole (``tool_calls``/``function_call``/``audio`` null, ``annotations``) goes back as
    history."""
    c, store = client
    plain = await c.post("/v1/chat/completions", json=_chat(stream=None, n=None, stop=None, max_tokens=None))
    assert plain.status_code == 200 and plain.headers["content-type"] == "application/json"
    dumped = {**plain.json()["choices"][0]["message"], "tool_calls": None, "function_call": None, "audio": None}
    dumped["annotations"] = []
    follow = _chat("And for a soft yolk?")
    follow["messages"] = [_chat()["messages"][0], dumped, *follow["messages"]]
    r = await c.post("/v1/chat/completions", json=follow)
    assert r.status_code == 200, r.text
    trace = await store.get(r.json()["psychoalign"]["trace_id"])
    assert trace is not None and f"Assistant: {BENIGN}" in (trace.context or "")


async def test_unknown_model_is_a_404_in_the_openai_shape(client: tuple[httpx.AsyncClient, InMemoryTraceStore]) -> None:
    c, _ = client
    r = await c.post("/v1/chat/completions", json={**_chat(), "model": "gpt-4o"})
    assert r.status_code == 404
    err = r.json()["error"]
    assert err["code"] == "model_not_found" and err["param"] == "model" and "psychoalign" in err["message"]


async def test_api_keys_are_checked_against_their_digests() -> None:
    key = "pa-test-key"
    settings = Settings(deployments={"clinic": DeploymentSettings(api_keys=[hashlib.sha256(key.encode()).hexdigest()])})
    store = InMemoryTraceStore()
    app = create_app(settings, store=store, negotiators={"clinic": _benign_world().negotiator(store)})
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
    client = httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")
    async with app.router.lifespan_context(app), client as c:
        body = {**_chat(), "model": "clinic"}
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic abc"}):
            r = await c.post("/v1/chat/completions", json=body, headers=headers)
            assert r.status_code == 401
            assert r.json()["error"]["code"] == "invalid_api_key"
        r = await c.post("/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == BENIGN
        trace = await store.get(r.headers["x-psychoalign-trace-id"])
        assert trace is not None and trace.metadata["api_key"] == hashlib.sha256(key.encode()).hexdigest()[:12]


async def test_keyless_deployment_answers_loopback_clients_only() -> None:
    store = InMemoryTraceStore()
    app = create_app(Settings(), store=store, negotiators={"psychoalign": _benign_world().negotiator(store)})
    remote = httpx.ASGITransport(app=app, client=("203.0.113.7", 5000))
    async with app.router.lifespan_context(app), httpx.AsyncClient(transport=remote, base_url="http://127.0.0.1") as c:
        r = await c.post("/v1/chat/completions", json=_chat())
        assert r.status_code == 401 and "loopback" in r.json()["error"]["message"]
        assert (await c.get("/metrics")).status_code == 403
        # the A2A agent without credentials follows the same rule (its card stays public)
        assert (await c.get("/.well-known/agent-card.json")).status_code == 200
        rpc = await c.post("/a2a/jsonrpc", json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {}})
        assert rpc.status_code == 401


async def test_conversation_is_context_and_linked_by_user() -> None:
    world = World([proposals((BENIGN, 0.9))], judge=lambda t: evaluation(95, "APPROVED"))
    store = InMemoryTraceStore()
    app = create_app(Settings(), store=store, negotiators={"psychoalign": world.negotiator(store)})
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
    first = [{"role": "system", "content": "You are a cooking assistant."}, {"role": "user", "content": "Eggs?"}]
    second = [*first, {"role": "assistant", "content": "Boil them."}, {"role": "user", "content": "How long?"}]
    client = httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")
    async with app.router.lifespan_context(app), client as c:
        r1 = await c.post("/v1/chat/completions", json={"model": "psychoalign", "messages": first, "user": "u1"})
        r2 = await c.post("/v1/chat/completions", json={"model": "psychoalign", "messages": second, "user": "u1"})
        r3 = await c.post(
            "/v1/chat/completions",
            json={"model": "psychoalign", "messages": second},
            headers={"x-psychoalign-conversation-id": "conv-7"},
        )
    t1, t2, t3 = [await store.get(r.headers["x-psychoalign-trace-id"]) for r in (r1, r2, r3)]
    assert t1 is not None and t2 is not None and t3 is not None
    assert t2.request == "How long?"
    assert "User: Eggs?\nAssistant: Boil them." in t2.context and "cooking assistant" in t2.context
    assert t1.metadata["conversation_id"] == t2.metadata["conversation_id"] is not None
    assert (t1.metadata["turn"], t2.metadata["turn"]) == (1, 2)
    assert t3.metadata["conversation_id"] == "conv-7" and t3.metadata["conversation_source"] == "header"


def test_serve_refuses_a_public_bind_without_credentials() -> None:
    from psychoalign.errors import ConfigError
    from psychoalign.web.server import check_exposure

    check_exposure(Settings(), "127.0.0.1")  # loopback: fine without keys
    with pytest.raises(ConfigError, match=r"refusing to listen on 0\.0\.0\.0: deployment\(s\) without api_keys"):
        check_exposure(Settings(), "0.0.0.0")
    keyed = Settings.model_validate({"deployments": {"d": {"api_keys": ["ab" * 32]}}})
    check_exposure(keyed, "0.0.0.0")


def test_serve_key_prints_a_key_and_its_digest() -> None:
    from tests.cli.test_main import cli

    out = cli("serve-key", "--deployment", "clinic").stdout
    key = out.split("API key (shown once): ")[1].split()[0]
    assert hashlib.sha256(key.encode()).hexdigest() in out and "[deployments.clinic]" in out


def _assert_too_large(r: httpx.Response) -> None:
    """HTTP 413 (Content Too Large), in the OpenAI error shape."""
    assert r.status_code == 413, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["type"] == "invalid_request_error" and err["code"] == "request_too_large"
    assert "serve.max_body_bytes" in err["message"] and "\n" not in err["message"]


async def test_oversized_bodies_are_refused_without_reading_them(
    client: tuple[httpx.AsyncClient, InMemoryTraceStore],
) -> None:
    c, _ = client
    huge = json.dumps(_chat("x" * 2_000_000)).encode()
    r = await c.post("/v1/chat/completions", content=huge, headers={"content-type": "application/json"})
    _assert_too_large(r)

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted while streaming
        for _ in range(30):
            yield b" " * 100_000

    r = await c.post("/v1/chat/completions", content=chunks(), headers={"content-type": "application/json"})
    _assert_too_large(r)


async def test_request_id_reaches_the_logs(
    client: tuple[httpx.AsyncClient, InMemoryTraceStore], caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    from psychoalign.web.ops import RequestIdFilter

    c, _ = client
    caplog.handler.addFilter(RequestIdFilter())
    with caplog.at_level(logging.INFO, logger="psychoalign.web.access"):
        await c.get("/healthz", headers={"x-request-id": "trace-me-1"})
        await c.get("/healthz", headers={"x-request-id": "bad id with spaces"})
    ids = [getattr(r, "request_id", None) for r in caplog.records if r.name == "psychoalign.web.access"]
    assert ids[0] == "trace-me-1"
    assert ids[1] not in (None, "-", "bad id with spaces") and len(ids[1]) == 32


async def test_a2a_negotiations_are_counted_in_metrics_with_their_tension() -> None:
    """/metrics counts the A2A system agent's negotiations as /v1's, and observes every completed
    negotiation's final tension in a histogram."""
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory

    from tests.a2a.test_system import user_text

    store = InMemoryTraceStore()
    app = create_app(Settings(), store=store, negotiators={"psychoalign": _benign_world().negotiator(store)}, lab=False)
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
    client = httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=60)
    async with app.router.lifespan_context(app), client as c:
        assert (await c.post("/v1/chat/completions", json=_chat())).status_code == 200
        card = await A2ACardResolver(c, "http://127.0.0.1").get_agent_card()
        agent = ClientFactory(ClientConfig(streaming=False, httpx_client=c)).create(card)
        tasks = [r.task async for r in agent.send_message(user_text("How do I boil an egg?")) if r.HasField("task")]
        assert tasks[-1].artifacts
        metrics = (await c.get("/metrics")).text
    traces = [t async for t in store.iter_all()]
    assert len(traces) == 2
    assert 'psychoalign_negotiations_total{deployment="psychoalign",status="completed"} 2.0' in metrics
    assert 'psychoalign_negotiation_tension_count{deployment="psychoalign"} 2.0' in metrics
    total = sum(t.final.tension for t in traces if t.final is not None and t.final.tension is not None)
    assert f'psychoalign_negotiation_tension_sum{{deployment="psychoalign"}} {total}' in metrics


async def test_the_agent_card_has_last_modified_and_answers_conditional_gets(
    client: tuple[httpx.AsyncClient, InMemoryTraceStore],
) -> None:
    from email.utils import format_datetime, parsedate_to_datetime

    c, _ = client
    first = await c.get("/.well-known/agent-card.json")
    assert first.status_code == 200 and first.json()["name"] == "PsychoAlign"
    modified = parsedate_to_datetime(first.headers["last-modified"])
    assert first.headers["last-modified"].endswith(" GMT")
    same = await c.get("/.well-known/agent-card.json", headers={"If-Modified-Since": first.headers["last-modified"]})
    assert same.status_code == 304 and same.content == b""
    assert same.headers["last-modified"] == first.headers["last-modified"]
    older = format_datetime(modified.replace(year=modified.year - 1), usegmt=True)
    assert (await c.get("/.well-known/agent-card.json", headers={"If-Modified-Since": older})).status_code == 200
    assert (await c.get("/.well-known/agent-card.json", headers={"If-Modified-Since": "garbage"})).status_code == 200


async def test_a_builtin_framework_is_read_once_and_a_framework_file_at_each_negotiation(tmp_path: Any) -> None:
    """The gateway hands the engine a built-in framework parsed once (its YAML was read and
    validated on every request); a framework file goes by name, so the engine reads it each time
    (an edit applies to the next negotiation) and a file gone missing fails that one closed."""
    from psychoalign.frameworks import Framework, load_framework
    from psychoalign.web.gateway import Gateway

    store = InMemoryTraceStore()
    gateway = Gateway(Settings(), store=store, negotiators={"psychoalign": _benign_world().negotiator(store)})
    first = gateway.framework("general")
    assert isinstance(first, Framework) and first is gateway.framework("general")
    assert first.stamp == load_framework("general").stamp
    path = str(tmp_path / "mine.yaml")
    assert gateway.framework(path) == path
    missing = await gateway.negotiate(
        "psychoalign", "How do I boil an egg?", framework=path, context=None, metadata={"source": "test"}
    )
    assert missing.failed and missing.trace is not None and "mine.yaml" in (missing.reason or "")
    done = await gateway.negotiate(
        "psychoalign", "How do I boil an egg?", framework="general", context=None, metadata={"source": "test"}
    )
    assert not done.failed and done.trace is not None and done.trace.framework == first.stamp
    await gateway.aclose()
