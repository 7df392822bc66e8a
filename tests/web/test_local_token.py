"""The per-start local token of keyless loopback deployments (serve.local_token): /v1 and the A2A
agent need it as a bearer token; without it they answer 401 in their own error shapes; with the
switch off (no token given to the app) loopback clients get in as before."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import openai
import pytest

from psychoalign.config import Settings
from psychoalign.traces import InMemoryTraceStore
from psychoalign.web import create_app
from tests.scenario import World, proposals
from tests.webserver import Running, run_app

TOKEN = "local-token-for-the-test"
ANSWER = "Boil the egg for nine minutes."
ASK = {"model": "psychoalign", "messages": [{"role": "user", "content": "How do I boil an egg?"}]}
RPC = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "no-such-task"}}
RPC_HEADERS = {"A2A-Version": "1.0"}


def _served(local_token: str | None) -> Iterator[Running]:
    store = InMemoryTraceStore()
    settings = Settings.model_validate({"deployments": {"psychoalign": {}}})
    negotiators = {"psychoalign": World([proposals((ANSWER, 0.9))] * 4).negotiator(store)}
    app = create_app(settings, store=store, negotiators=negotiators, lab=False, local_token=local_token)
    with run_app(app) as running:
        yield running


@pytest.fixture(scope="module")
def guarded() -> Iterator[Running]:
    yield from _served(TOKEN)


@pytest.fixture(scope="module")
def open_server() -> Iterator[Running]:
    yield from _served(None)


def test_the_token_opens_v1_to_the_official_client(guarded: Running) -> None:
    client = openai.OpenAI(base_url=f"{guarded.url}/v1", api_key=TOKEN, max_retries=0)
    assert client.chat.completions.create(**ASK).choices[0].message.content == ANSWER  # type: ignore[call-overload]
    assert [m.id for m in client.models.list()] == ["psychoalign"]


def test_a_wrong_or_missing_token_gets_401_in_openai_shape(guarded: Running) -> None:
    wrong = openai.OpenAI(base_url=f"{guarded.url}/v1", api_key="guessed", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as caught:
        wrong.chat.completions.create(**ASK)  # type: ignore[call-overload]
    assert caught.value.status_code == 401 and caught.value.code == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        wrong.models.list()
    missing = httpx.post(f"{guarded.url}/v1/chat/completions", json=ASK, timeout=30)
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    error = missing.json()["error"]
    assert error["code"] == "invalid_api_key" and error["type"] == "invalid_request_error"
    assert "local token" in error["message"] and "PSYCHOALIGN_TOKEN" in error["message"]


def test_the_a2a_agent_needs_the_token_too(guarded: Running) -> None:
    assert httpx.get(f"{guarded.url}/.well-known/agent-card.json", timeout=30).status_code == 200  # public
    bare = httpx.post(f"{guarded.url}/a2a/jsonrpc/", json=RPC, headers=RPC_HEADERS, timeout=30)
    assert bare.status_code == 401, bare.text
    wrong = {**RPC_HEADERS, "Authorization": "Bearer guessed"}
    assert httpx.post(f"{guarded.url}/a2a/jsonrpc/", json=RPC, headers=wrong, timeout=30).status_code == 401
    good = {**RPC_HEADERS, "Authorization": f"Bearer {TOKEN}"}
    answered = httpx.post(f"{guarded.url}/a2a/jsonrpc/", json=RPC, headers=good, timeout=30)
    assert answered.status_code != 401 and "error" in answered.json(), answered.text  # past auth: no such task
    assert answered.json()["error"]["code"] != bare.json()["error"]["code"]


def test_without_a_token_loopback_clients_get_in_as_before(open_server: Running) -> None:
    client = openai.OpenAI(base_url=f"{open_server.url}/v1", api_key="anything", max_retries=0)
    assert client.chat.completions.create(**ASK).choices[0].message.content == ANSWER  # type: ignore[call-overload]
    assert httpx.post(f"{open_server.url}/v1/chat/completions", json=ASK, timeout=30).status_code == 200
    bare = httpx.post(f"{open_server.url}/a2a/jsonrpc/", json=RPC, headers=RPC_HEADERS, timeout=30)
    assert bare.status_code != 401, bare.text


# -- the token in a browser: ?token= once on a page, then an HttpOnly SameSite=Strict cookie ------


@contextmanager
def _cookie_client(running: Running) -> Iterator[httpx.Client]:
    """A browser that opened the banner's page URL: it holds the cookie (and nothing else)."""
    with httpx.Client(base_url=running.url, timeout=30) as browser:
        opened = browser.get(f"/?token={TOKEN}", follow_redirects=False)
        assert opened.status_code == 303 and opened.headers["location"] == "/", opened.text
        yield browser


def test_a_page_url_with_the_token_sets_a_strict_cookie_and_redirects_to_the_clean_url(guarded: Running) -> None:
    opened = httpx.get(f"{guarded.url}/traces?status=failed&token={TOKEN}&q=egg", timeout=30)
    assert opened.status_code == 303
    assert opened.headers["location"] == "/traces?status=failed&q=egg"  # the token left the URL
    assert opened.headers["cache-control"] == "no-store" and opened.headers["referrer-policy"] == "no-referrer"
    cookie = opened.headers["set-cookie"].lower()
    assert cookie.startswith(f"psa_local_token={TOKEN.lower()};")
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/" in cookie
    assert "secure" not in cookie  # plain http on loopback: a Secure cookie would never come back


def test_a_wrong_token_on_a_page_gets_403_and_no_cookie(guarded: Running) -> None:
    wrong = httpx.get(f"{guarded.url}/?token=guessed", timeout=30)
    assert wrong.status_code == 403 and "set-cookie" not in wrong.headers
    assert "banner" in wrong.text


def test_the_redirect_never_leaves_the_server(guarded: Running) -> None:
    # A path that a browser would read as another host ("//evil.example/") goes to the start page.
    with httpx.Client(base_url=guarded.url, timeout=30) as client:
        request = client.build_request("GET", f"{guarded.url}/?token={TOKEN}")
        request.url = request.url.copy_with(raw_path=f"//evil.example/?token={TOKEN}".encode())
        evil = client.send(request)
    assert evil.status_code == 303 and evil.headers["location"] == "/"


def test_the_cookie_opens_v1_and_a2a_to_the_same_origin(guarded: Running) -> None:
    with _cookie_client(guarded) as browser:
        models = browser.get("/v1/models", headers={"Sec-Fetch-Site": "none"})  # typed in the address bar
        assert models.status_code == 200 and [m["id"] for m in models.json()["data"]] == ["psychoalign"]
        own_page = {"Origin": guarded.url, "Sec-Fetch-Site": "same-origin"}  # a fetch by one of its pages
        chat = browser.post("/v1/chat/completions", json=ASK, headers=own_page)
        assert chat.status_code == 200 and chat.json()["choices"][0]["message"]["content"] == ANSWER
        rpc = browser.post("/a2a/jsonrpc/", json=RPC, headers={**RPC_HEADERS, **own_page})
        assert rpc.status_code != 401 and "error" in rpc.json(), rpc.text  # past auth: no such task


def test_the_cookie_never_opens_v1_or_a2a_to_another_origin(guarded: Running) -> None:
    with _cookie_client(guarded) as browser:
        # Another origin, named (CORS-less fetch, form POST) or by the browser's Sec-Fetch-Site: 403 by the guard.
        for foreign in ({"Origin": "http://evil.example"}, {"Sec-Fetch-Site": "cross-site"}):
            chat = browser.post("/v1/chat/completions", json=ASK, headers=foreign)
            assert chat.status_code == 403 and chat.json()["error"]["code"] == "origin_not_allowed", chat.text
            rpc = browser.post("/a2a/jsonrpc/", json=RPC, headers={**RPC_HEADERS, **foreign})
            assert rpc.status_code == 403, rpc.text
        # A rebound name (DNS rebinding): the Host check refuses it whatever the cookie.
        rebound = browser.get("/v1/models", headers={"Host": "evil.example"})
        assert rebound.status_code == 403 and rebound.json()["error"]["code"] == "host_not_allowed"
        # A page on another port of this host is the same *site*: SameSite sends the cookie, so the
        # cookie alone must not count there (its Origin is refused too).
        sibling = browser.get("/v1/models", headers={"Sec-Fetch-Site": "same-site"})
        assert sibling.status_code == 401
        sibling_post = browser.post(
            "/v1/chat/completions", json=ASK, headers={"Origin": "http://127.0.0.1:1", "Sec-Fetch-Site": "same-site"}
        )
        assert sibling_post.status_code == 403


def test_a_wrong_cookie_or_an_explicit_bearer_is_not_helped_by_the_cookie(guarded: Running) -> None:
    forged = httpx.get(f"{guarded.url}/v1/models", cookies={"psa_local_token": "guessed"}, timeout=30)
    assert forged.status_code == 401
    with _cookie_client(guarded) as browser:
        # The client's own credential decides: a wrong bearer token stays wrong.
        assert browser.get("/v1/models", headers={"Authorization": "Bearer guessed"}).status_code == 401


def test_without_a_token_a_page_url_with_one_changes_nothing(open_server: Running) -> None:
    plain = httpx.get(f"{open_server.url}/healthz?token=anything", timeout=30)
    assert plain.status_code == 200 and "set-cookie" not in plain.headers
