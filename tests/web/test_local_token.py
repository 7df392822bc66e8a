"""The per-start local token of keyless loopback deployments (serve.local_token): /v1 and the A2A
agent need it as a bearer token; without it they answer 401 in their own error shapes; with the
switch off (no token given to the app) loopback clients get in as before. The page link the
banner prints: the token's cookie, and with the lab the server owner's lead session."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import openai
import pytest
from fastapi import FastAPI

from psychoalign.config import Settings
from psychoalign.errors import InputError
from psychoalign.traces import InMemoryTraceStore, open_store
from psychoalign.web import create_app
from psychoalign.web.accounts import OWNER_ID, Role
from psychoalign.web.star import StarLab
from tests.scenario import World, proposals
from tests.weblab import CSRF, PASSWORD, Browser, lab_settings
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


# -- the page link and the lab: the server owner's session ---------------------------------------


@pytest.fixture
async def lab_app(tmp_path: Path) -> AsyncIterator[FastAPI]:
    """The served app with the lab, on its own database, with the local token."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'lab.db'}"
    app = create_app(lab_settings(tmp_path / "home", url), store=open_store(url), a2a=False, local_token=TOKEN)
    async with app.router.lifespan_context(app):
        yield app


def _browser(app: FastAPI, base: str = "http://localhost:8000", address: str = "127.0.0.1") -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(address, 4000))
    return httpx.AsyncClient(transport=transport, base_url=base, headers={"accept": "text/html"})


def _cookies(r: httpx.Response) -> dict[str, str]:
    """Set-Cookie headers by cookie name, lower-cased."""
    return {v.split("=", 1)[0]: v.lower() for v in r.headers.get_list("set-cookie")}


async def test_the_page_link_signs_the_owner_in_to_the_lab_and_the_trace_viewer(lab_app: FastAPI) -> None:
    async with _browser(lab_app) as browser:
        assert (await browser.get("/traces")).headers["location"].startswith("/login")  # the wall before
        opened = await browser.get(f"/traces?token={TOKEN}")
        assert opened.status_code == 303 and opened.headers["location"] == "/traces"
        session = _cookies(opened)["psa_session"]
        assert "httponly" in session and "samesite=lax" in session and "path=/" in session
        assert "psa_local_token" in _cookies(opened)  # and the token's own cookie, for /v1 from this browser
        page = await browser.get("/traces")
        assert page.status_code == 200 and "Server owner (local token link)</bdi> (lead)" in page.text
        assert (await browser.get("/")).headers["location"] == "/lead"
        assert (await browser.get("/lead")).status_code == 200
        assert (await browser.get("/v1/models")).status_code == 200
        # its forms carry the session's CSRF token: without it a form is refused, with it it works
        new = await browser.get("/lead/campaigns/new")
        match = CSRF.search(new.text)
        assert match
        form: dict[str, str | list[str]] = {"name": "owned", "instructions": "2", "seed": "3"}
        form |= {"target_kind": "model", "target_role": "target", "rules": ["sexually-explicit"]}
        assert (await browser.post("/lead/campaigns", data=form)).status_code == 403
        made = await browser.post("/lead/campaigns", data={**form, "csrf_token": match.group(1)})
        assert made.status_code == 303, made.text[:300]
    star: StarLab = lab_app.state.star_lab
    assert [c.name for c in await star.lab.campaigns()] == ["owned"]
    owner = await star.accounts.get(OWNER_ID)
    assert owner is not None and owner.role is Role.LEAD and owner.username is None and not owner.has_password


async def test_over_tls_the_owners_session_cookie_is_secure_and_host_only(lab_app: FastAPI) -> None:
    async with _browser(lab_app, base="https://localhost") as browser:
        opened = await browser.get(f"/?token={TOKEN}")
        session = _cookies(opened)["__Host-psa_session"]
        assert "secure" in session and "httponly" in session and "samesite=lax" in session and "domain" not in session
        assert (await browser.get("/traces")).status_code == 200


async def test_each_opening_is_a_new_session_and_logout_ends_it(lab_app: FastAPI) -> None:
    async with _browser(lab_app) as browser, _browser(lab_app) as other:
        first = _cookies(await browser.get(f"/?token={TOKEN}"))["psa_session"]
        second = _cookies(await other.get(f"/?token={TOKEN}"))["psa_session"]
        assert first.split(";")[0] != second.split(";")[0]  # a fresh token each time (no fixation)
        lead = await browser.get("/lead")
        match = CSRF.search(lead.text)
        assert match
        assert (await browser.post("/logout", data={"csrf_token": match.group(1)})).status_code == 303
        assert (await browser.get("/traces")).headers["location"].startswith("/login")
        assert (await other.get("/traces")).status_code == 200  # the other browser's session stays
        await browser.get(f"/?token={TOKEN}")  # the link again: signed in again
        assert (await browser.get("/traces")).status_code == 200


async def test_a_wrong_token_or_a_remote_client_gets_no_session(lab_app: FastAPI) -> None:
    async with _browser(lab_app) as guesser, _browser(lab_app, address="203.0.113.7") as remote:
        wrong = await guesser.get("/traces?token=guessed")
        assert wrong.status_code == 403 and "set-cookie" not in wrong.headers
        assert (await guesser.get("/traces")).headers["location"].startswith("/login")
        assert await lab_app.state.star_lab.accounts.get(OWNER_ID) is None  # nothing made for a guess
        opened = await remote.get(f"/traces?token={TOKEN}")  # only a loopback client is the owner
        assert opened.status_code == 303 and "psa_session" not in _cookies(opened)
        assert (await remote.get("/traces")).headers["location"].startswith("/login")


async def test_the_owners_account_takes_no_invite_and_is_not_locked_out_from_the_page(lab_app: FastAPI) -> None:
    star: StarLab = lab_app.state.star_lab
    await star.accounts.create_account(Role.LEAD, username="lead", password=PASSWORD, display_name="Lead")
    async with _browser(lab_app) as owner:
        await owner.get(f"/?token={TOKEN}")
    lead = Browser(lab_app, "http://localhost:8000")
    await lead.login("lead")
    people = await lead.get("/lead/participants")
    assert "(local token link)" in people.text and f"/lead/accounts/{OWNER_ID}/" not in people.text
    for action in ("invite", "deactivate"):
        await lead.get("/lead/participants")
        r = await lead.post(f"/lead/accounts/{OWNER_ID}/{action}")
        assert r.status_code == 400 and "server owner" in r.text, (action, r.status_code)
    with pytest.raises(InputError, match="no invite"):
        await star.accounts.create_invite(OWNER_ID)
    owner_account = await star.accounts.get(OWNER_ID)
    assert owner_account is not None and owner_account.active
    await lead.aclose()


async def test_the_link_reopens_an_owner_account_found_deactivated(lab_app: FastAPI) -> None:
    """Holding the token is what proves the owner: a deactivated owner account (the store allows it)
    is active again after the link, and its old sessions stay ended."""
    star: StarLab = lab_app.state.star_lab
    async with _browser(lab_app) as browser:
        await browser.get(f"/?token={TOKEN}")
        await star.accounts.set_active(OWNER_ID, False)
        assert (await browser.get("/traces")).headers["location"].startswith("/login")
        await browser.get(f"/?token={TOKEN}")
        assert (await browser.get("/traces")).status_code == 200
