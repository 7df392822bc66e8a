"""The per-start local token of keyless loopback deployments (serve.local_token): /v1 and the A2A
agent need it as a bearer token; without it they answer 401 in their own error shapes; with the
switch off (no token given to the app) loopback clients get in as before."""

from __future__ import annotations

from collections.abc import Iterator

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
