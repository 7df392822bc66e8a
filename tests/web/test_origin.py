"""Closed to other origins: Host allow-list, foreign Origin / Sec-Fetch-Site refused on /v1, A2A
and /metrics, CORS for configured origins, JSON-only /v1, and a fuzz of malformed bodies."""

from __future__ import annotations

import json
import logging
import random
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest

from psychoalign.config import ServeSettings, Settings
from psychoalign.traces import InMemoryTraceStore
from psychoalign.web import create_app
from psychoalign.web.origin import host_allow_list
from tests.scenario import World, proposals

BENIGN = "Boil the egg for nine minutes, then cool it in cold water."
CHAT = {"model": "psychoalign", "messages": [{"role": "user", "content": "hi"}]}
JSON = {"content-type": "application/json"}


async def _client(settings: Settings, store: InMemoryTraceStore) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(
        settings, store=store, negotiators={"psychoalign": World([proposals((BENIGN, 0.9))]).negotiator(store)}
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as c:
            yield c


@pytest.fixture
async def store() -> InMemoryTraceStore:
    return InMemoryTraceStore()


@pytest.fixture
async def client(store: InMemoryTraceStore) -> AsyncIterator[httpx.AsyncClient]:
    async for c in _client(Settings(), store):
        yield c


async def test_the_issue_repro_is_refused_and_runs_nothing(
    client: httpx.AsyncClient, store: InMemoryTraceStore
) -> None:
    """curl -H 'Host: evil.example' -H 'Origin: http://evil.example' -H 'Content-Type: text/plain'
    -d '{...}' 127.0.0.1:PORT/v1/chat/completions  (was: 200)."""
    headers = {"Host": "evil.example", "Origin": "http://evil.example", "Content-Type": "text/plain"}
    r = await client.post("/v1/chat/completions", content=json.dumps(CHAT), headers=headers)
    assert r.status_code == 403
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["code"] == "host_not_allowed"
    assert "serve.allowed_hosts" in err["message"]
    assert [t async for t in store.iter_all()] == []


@pytest.mark.parametrize(
    ("headers", "code"),
    [
        ({"Host": "evil.example"}, "host_not_allowed"),  # DNS rebinding: the page's own name
        ({"Host": "evil.example:8000", "Origin": "http://evil.example:8000"}, "host_not_allowed"),
        ({"Origin": "http://evil.example"}, "origin_not_allowed"),
        ({"Origin": "null"}, "origin_not_allowed"),
        ({"Origin": "http://localhost:3000"}, "origin_not_allowed"),  # same site, other origin
        ({"Sec-Fetch-Site": "cross-site"}, "origin_not_allowed"),
    ],
)
async def test_foreign_hosts_and_origins_are_refused_on_every_machine_face(
    client: httpx.AsyncClient, store: InMemoryTraceStore, headers: dict[str, str], code: str
) -> None:
    r = await client.post("/v1/chat/completions", json=CHAT, headers=headers)
    assert r.status_code == 403 and r.json()["error"]["code"] == code
    assert (await client.get("/v1/models", headers=headers)).status_code == 403
    metrics = await client.get("/metrics", headers=headers)
    assert metrics.status_code == 403 and metrics.text.startswith("metrics: ")
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
    a2a = await client.post("/a2a/jsonrpc", json=rpc, headers={**headers, "A2A-Version": "1.0"})
    assert a2a.status_code == 403 and a2a.json()["error"]["data"][0]["reason"] == "PERMISSION_DENIED"
    rest = await client.get("/a2a/rest/tasks", headers={**headers, "A2A-Version": "1.0"})
    assert rest.status_code == 403 and rest.json()["error"]["status"] == "PERMISSION_DENIED"
    assert (await client.get("/.well-known/agent-card.json", headers=headers)).status_code == 403
    assert [t async for t in store.iter_all()] == []


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Host": "localhost:8000"},
        {"Host": "[::1]:8000"},
        {"Origin": "http://127.0.0.1:8000"},  # the server's own origin
        {"Sec-Fetch-Site": "same-origin"},
        {"Sec-Fetch-Site": "none"},
    ],
)
async def test_local_names_and_the_own_origin_are_served(client: httpx.AsyncClient, headers: dict[str, str]) -> None:
    r = await client.post("/v1/chat/completions", json=CHAT, headers=headers)
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == BENIGN
    assert (await client.get("/metrics", headers=headers)).status_code == 200


async def test_pages_and_healthz_are_not_the_guards_business(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz", headers={"Host": "evil.example"})).status_code == 200


async def test_cors_origins_get_preflight_and_headers_others_do_not(store: InMemoryTraceStore) -> None:
    settings = Settings(serve=ServeSettings(cors_origins=["https://app.example.org"]))
    async for c in _client(settings, store):
        preflight = {
            "Origin": "https://app.example.org",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type",
        }
        r = await c.options("/v1/chat/completions", headers=preflight)
        assert r.status_code == 200
        assert r.headers["access-control-allow-origin"] == "https://app.example.org"
        assert "POST" in r.headers["access-control-allow-methods"]
        assert "authorization" in r.headers["access-control-allow-headers"].lower()
        r = await c.post("/v1/chat/completions", json=CHAT, headers={"Origin": "https://app.example.org"})
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "https://app.example.org"
        exposed = r.headers["access-control-expose-headers"]
        assert "x-psychoalign-tension" in exposed and "x-psychoalign-outcome" in exposed
        assert r.headers["x-psychoalign-outcome"] == r.json()["psychoalign"]["outcome"]  # a page reads either
        other = await c.options("/v1/chat/completions", headers={**preflight, "Origin": "https://evil.example"})
        assert other.status_code == 403 and "access-control-allow-origin" not in other.headers


async def test_a_listed_origin_may_call_v1_with_the_headers_the_openai_sdks_send(store: InMemoryTraceStore) -> None:
    """A web app on a listed origin using an OpenAI SDK (``new OpenAI({baseURL,
    dangerouslyAllowBrowser: true})``): the SDK adds its Stainless platform and retry headers to
    every request, so the browser's preflight names them, and the preflight was refused (400
    "Disallowed CORS headers"): no call ever left the page. The headers are the ones the official
    Python client sends here (the JavaScript one sends the same family, and ``x-stainless-timeout``)."""
    settings = Settings(serve=ServeSettings(cors_origins=["https://app.example.org"]))
    sent: list[httpx.Headers] = []

    async def seen(request: httpx.Request) -> None:
        sent.append(request.headers)

    async for c in _client(settings, store):
        origin = {"Origin": "https://app.example.org"}
        c.event_hooks = {"request": [seen], "response": []}
        sdk = openai.AsyncOpenAI(
            base_url="http://127.0.0.1:8000/v1", api_key="unused-on-loopback", http_client=c, max_retries=0
        )
        reply = await sdk.chat.completions.create(
            model="psychoalign", messages=[{"role": "user", "content": "How do I boil an egg?"}], extra_headers=origin
        )
        assert reply.choices[0].message.content == BENIGN
        # what a browser lists in Access-Control-Request-Headers: every header it may not send unasked
        safelisted = {"accept", "accept-encoding", "accept-language", "connection", "content-length", "host", "origin"}
        asked = [*sorted({k.lower() for k in sent[0]} - safelisted), "x-stainless-timeout"]
        assert {"x-stainless-lang", "x-stainless-retry-count", "user-agent"} <= set(asked)
        preflight = {
            **origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": ", ".join(asked),
        }
        for path in ("/v1/chat/completions", "/v1/models"):
            r = await c.options(path, headers=preflight)
            assert r.status_code == 200, (path, r.text)
            allowed = {h.strip().lower() for h in r.headers["access-control-allow-headers"].split(",")}
            assert set(asked) <= allowed


def test_host_allow_list_follows_bind_address_public_url_and_setting() -> None:
    assert host_allow_list(ServeSettings()) == {"127.0.0.1", "localhost", "::1"}
    assert host_allow_list(ServeSettings(public_url="https://gw.example.org/base")) >= {"gw.example.org"}  # type: ignore[operator]
    assert host_allow_list(ServeSettings(host="10.0.0.5", allowed_hosts=["API.internal"])) == {
        "10.0.0.5",
        "api.internal",
    }
    assert host_allow_list(ServeSettings(host="0.0.0.0")) is None  # a wildcard bind needs keys: any name
    assert host_allow_list(ServeSettings(host="0.0.0.0", allowed_hosts=["gw"])) == {"gw"}
    assert host_allow_list(ServeSettings(allowed_hosts=["*"])) is None


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("cors_origins", ["https://app.example.org/path"], "is not a web origin"),
        ("cors_origins", ["*"], "'\\*' is not accepted"),
        ("allowed_hosts", ["http://gw.example.org"], "is not a host name"),
    ],
)
def test_bad_settings_name_the_entry_and_the_fix(field: str, value: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ServeSettings(**{field: value})


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data", None]
)
async def test_v1_takes_json_only(
    client: httpx.AsyncClient, store: InMemoryTraceStore, content_type: str | None
) -> None:
    headers = {"content-type": content_type} if content_type else {}
    r = await client.post("/v1/chat/completions", content=json.dumps(CHAT).encode(), headers=headers)
    assert r.status_code == 415
    err = r.json()["error"]
    assert err["code"] == "unsupported_media_type" and err["param"] == "Content-Type"
    assert "application/json" in err["message"]
    assert [t async for t in store.iter_all()] == []
    ok = await client.post(
        "/v1/chat/completions", content=json.dumps(CHAT), headers={"content-type": "Application/JSON; charset=utf-8"}
    )
    assert ok.status_code == 200


# -- bad input: a fuzz of malformed bodies --------------------------------------------------------


def _malformed(count: int) -> list[bytes]:
    """Deterministic malformed bodies: structural bombs, wrong types in every field, truncations
    and byte flips of a valid request."""
    rng = random.Random(25)
    valid = json.dumps({**CHAT, "stream": False, "temperature": 0.5, "user": "u"}).encode()
    bodies: list[bytes] = [
        b"[" * 100_000,
        b'{"model":' * 50_000,
        b'{"model":"psychoalign","messages":' + b"[" * 100_000,
        b'{"model":"psychoalign","seed":' + b"9" * 5000 + b"}",
        json.dumps({**CHAT, "max_tokens": int("9" * 4000)}).encode(),
        b"\xff\xfe{}",
        b"\xef\xbb\xbf" + valid,  # a UTF-8 BOM
        b"",
        b"null",
        b'"text"',
        b"1e999",
        b"NaN",
        b'{"model": NaN, "messages": []}',
        b'{"model":"psychoalign","messages":[{"role":"user","content":"\\ud800"}]}',
    ]
    values: list[Any] = [None, True, -1, 1e308, "", "x" * 300, [], {}, [[[]]], {"a": {"b": {}}}, [None], "\u202e"]
    for key in (
        "model",
        "messages",
        "stream",
        "stream_options",
        "user",
        "n",
        "psychoalign",
        "temperature",
        "max_tokens",
        "stop",
        "seed",
        "top_p",
        "response_format",
        "tool_choice",
    ):
        for value in rng.sample(values, 4):
            bodies.append(json.dumps({**CHAT, key: value}).encode())
    for value in values:
        bodies.append(json.dumps({"model": "psychoalign", "messages": [value]}).encode())
        bodies.append(json.dumps({"model": "psychoalign", "messages": [{"role": "user", "content": value}]}).encode())
        bodies.append(json.dumps({"model": "psychoalign", "messages": [{"role": value, "content": "x"}]}).encode())
    while len(bodies) < count:
        raw = bytearray(valid)
        if rng.random() < 0.5:
            raw = raw[: rng.randrange(len(raw))]
        for _ in range(rng.randrange(1, 4)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        bodies.append(bytes(raw))
    return bodies


async def test_a_fuzz_of_malformed_bodies_gets_no_5xx_and_logs_no_traceback(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    bodies = _malformed(200)
    assert len(bodies) >= 200
    caplog.set_level(logging.DEBUG)
    statuses: dict[int, int] = {}
    for body in bodies:
        r = await client.post("/v1/chat/completions", content=body, headers=JSON)
        statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
        assert r.status_code < 500, (body[:120], r.text[:300])
        if r.status_code >= 400:
            err = r.json()["error"]
            assert set(err) == {"message", "type", "param", "code"} and "\n" not in err["message"]
        assert "Traceback" not in r.text
        a2a = await client.post("/a2a/jsonrpc", content=body, headers={**JSON, "A2A-Version": "1.0"})
        assert a2a.status_code < 500, (body[:120], a2a.text[:300])
    assert statuses.get(400, 0) >= 100  # most are refused as bad input (a few byte flips stay valid)
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []
