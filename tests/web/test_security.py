"""Web security of the lab pages: headers and CSP, CSRF, sessions and logout, login throttling,
open redirects, and the route × role authorisation matrix."""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute

from psychoalign.web.accounts import Role
from psychoalign.web.security import require_lead, require_login, require_participant
from psychoalign.web.star import StarLab
from tests.web.star.test_lab import launch
from tests.weblab import PASSWORD, Browser, add_person, lab_app, lab_settings

PUBLIC = {"/", "/login", "/invite/{token}"}


@pytest.fixture
async def lab(tmp_path: Path) -> AsyncIterator[tuple[FastAPI, StarLab]]:
    app, lab = lab_app(lab_settings(tmp_path / "home"))
    yield app, lab
    await lab.close()


async def test_headers_and_strict_csp(lab: tuple[FastAPI, StarLab]) -> None:
    app, _ = lab
    b = Browser(app)
    r = await b.get("/login")
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
    assert "style-src 'self'" in csp and "object-src 'none'" in csp
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["x-frame-options"] == "DENY"
    assert r.headers["cache-control"] == "no-store"
    assert (await b.get("/static/app.css")).headers["content-security-policy"] == csp
    await b.aclose()


def test_templates_have_no_inline_script_style_or_handlers() -> None:
    root = resources.files("psychoalign.web") / "templates"
    names = list(Path(str(root)).rglob("*.html"))
    assert len(names) >= 10
    for path in names:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"\son[a-z]+\s*=", text, re.I), f"inline event handler in {path.name}"
        assert not re.search(r"<script(?![^>]*\ssrc=)[^>]*>", text, re.I), f"inline script in {path.name}"
        assert not re.search(r"\sstyle\s*=|<style", text, re.I), f"inline style in {path.name}"
        assert "|safe" not in text.replace(" ", "") and "autoescape false" not in text, path.name
        for form in re.findall(r"<form[^>]*method=\"post\"[^>]*>.*?</form>", text, re.S | re.I):
            assert 'name="csrf_token"' in form, f"a POST form without the CSRF token in {path.name}"


async def test_csrf_is_required_and_bound_to_the_session(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    await add_person(star, "alice")
    await add_person(star, "bob")
    a = Browser(app)
    await a.login("alice")
    b = Browser(app)
    await b.login("bob")
    assert a.token and b.token and a.token != b.token
    # no token, a wrong token, another session's token, a foreign origin: refused, session intact
    assert (await a.post("/logout", csrf=False)).status_code == 403
    assert (await a.client.post("/logout", data={"csrf_token": "0" * 64})).status_code == 403
    assert (await a.client.post("/logout", data={"csrf_token": b.token})).status_code == 403
    r = await a.client.post("/logout", data={"csrf_token": a.token}, headers={"origin": "https://evil.example"})
    assert r.status_code == 403
    assert (await a.get("/tasks")).status_code == 200
    # the header works for fetch clients
    assert (await a.client.post("/logout", headers={"x-csrf-token": a.token or ""})).status_code == 303
    # login itself needs the pre-session cookie and its token
    fresh = Browser(app)
    r = await fresh.client.post("/login", data={"username": "bob", "password": PASSWORD})
    assert r.status_code == 403
    for c in (a, b, fresh):
        await c.aclose()


async def test_logout_revokes_the_session_server_side(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    await add_person(star, "alice")
    a = Browser(app)
    r = await a.login("alice")
    cookie = r.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie and "Secure" not in cookie
    stolen = a.client.cookies.get("psa_session")
    assert stolen
    await a.post("/logout")
    thief = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver")
    thief.cookies.set("psa_session", stolen)
    r = await thief.get("/tasks")
    assert r.status_code == 303 and r.headers["location"].startswith("/login")
    await thief.aclose()
    await a.aclose()


async def test_secure_host_cookie_over_tls(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    await add_person(star, "alice")
    a = Browser(app, base_url="https://testserver")
    r = await a.login("alice")
    cookie = r.headers["set-cookie"]
    assert cookie.startswith("__Host-psa_session=") and "Secure" in cookie and "HttpOnly" in cookie
    assert "strict-transport-security" in r.headers
    assert (await a.get("/tasks")).status_code == 200
    await a.aclose()


async def test_login_is_throttled_per_username(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    await add_person(star, "alice")
    now = [datetime.now(UTC)]
    star.accounts.clock = lambda: now[0]  # type: ignore[attr-defined]
    b = Browser(app)
    await b.get("/login")
    for _ in range(5):
        r = await b.post("/login", {"username": "alice", "password": "wrong password!"})
        assert r.status_code == 401 and "Wrong username or password." in r.text
    r = await b.post("/login", {"username": "alice", "password": PASSWORD})
    assert r.status_code == 429 and "Retry-After" in r.headers
    now[0] += timedelta(minutes=16)
    r = await b.post("/login", {"username": "alice", "password": PASSWORD})
    assert r.status_code == 303
    await b.aclose()


async def _fail(b: Browser, username: str, times: int) -> httpx.Response:
    r = None
    for _ in range(times):
        r = await b.post("/login", {"username": username, "password": "wrong password!"})
    assert r is not None
    return r


async def test_login_backoff_doubles_per_failure_of_a_username_from_an_address(
    lab: tuple[FastAPI, StarLab],
) -> None:
    app, star = lab
    await add_person(star, "alice")
    now = [datetime.now(UTC)]
    star.accounts.clock = lambda: now[0]  # type: ignore[attr-defined]
    b = Browser(app, address="10.0.0.7")
    await b.get("/login")
    assert (await _fail(b, "alice", 5)).status_code == 401  # the free failures
    waits = []
    for _ in range(3):
        r = await b.post("/login", {"username": "alice", "password": PASSWORD})
        assert r.status_code == 429 and "Too many failed logins" in r.text  # even the right password waits
        waits.append(int(r.headers["Retry-After"]))
        now[0] += timedelta(seconds=waits[-1])
        assert (await _fail(b, "alice", 1)).status_code == 401  # tried again after the wait: counted
    assert waits == [1, 2, 4]
    now[0] += timedelta(minutes=15)  # the backoff never exceeds the window
    assert (await b.post("/login", {"username": "alice", "password": PASSWORD})).status_code == 303
    await b.aclose()


async def test_strangers_elsewhere_never_lock_a_user_out(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    attacker = Browser(app, address="203.0.113.9")
    await attacker.get("/login")
    assert (await _fail(attacker, "lead", 8)).status_code == 429  # the attacker is slowed down...
    lead = Browser(app, address="192.0.2.10")
    await lead.get("/login")
    assert (await lead.login("lead")).status_code == 303  # ...the lead, elsewhere, is not
    for person in (attacker, lead):
        await person.aclose()


async def test_address_limit_spares_known_browsers_and_the_lead_unlocks(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    await add_person(star, "alice")
    await add_person(star, "bob")
    office = "198.51.100.4"  # one address shared by alice, bob and a stranger
    alice = Browser(app, address=office)
    assert (await alice.login("alice")).status_code == 303  # her browser is now known
    await alice.post("/logout")
    stranger = Browser(app, address=office)
    await stranger.get("/login")
    for n in range(30):  # spraying usernames: the address's limit
        await _fail(stranger, f"user{n}", 1)
    assert (await _fail(stranger, "user99", 1)).status_code == 429
    bob = Browser(app, address=office)
    assert (await bob.login("bob")).status_code == 429  # a new browser at that address waits
    assert (await _fail(stranger, "alice", 1)).status_code == 429
    assert (await alice.login("alice")).status_code == 303  # alice's known browser never does
    await alice.post("/logout")
    await alice.get("/login")
    # a known browser is throttled by its own failures only
    assert (await _fail(alice, "alice", 5)).status_code == 401
    assert (await alice.login("alice")).status_code == 429
    lead = Browser(app, address="192.0.2.1")
    assert (await lead.login("lead")).status_code == 303
    accounts = {a.username: a.id for a in await star.accounts.list_accounts()}
    page = (await lead.get("/lead/participants")).text
    assert f'action="/lead/accounts/{accounts["alice"]}/unlock"' in page
    r = await lead.post(f"/lead/accounts/{accounts['alice']}/unlock")
    assert r.status_code == 303 and "msg=unlocked" in r.headers["location"]
    assert (await alice.login("alice")).status_code == 303
    # participants cannot unlock
    assert (await alice.post(f"/lead/accounts/{accounts['bob']}/unlock")).status_code == 403
    for person in (alice, stranger, bob, lead):
        await person.aclose()


async def test_unknown_user_and_wrong_password_look_the_same(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    await add_person(star, "alice")
    b = Browser(app)
    await b.get("/login")
    r1 = await b.post("/login", {"username": "alice", "password": "not the password"})
    r2 = await b.post("/login", {"username": "nobody", "password": "not the password"})
    assert r1.status_code == r2.status_code == 401
    assert "Wrong username or password." in r1.text and "Wrong username or password." in r2.text
    await b.aclose()


@pytest.mark.parametrize(
    "target",
    ["//evil.example/x", "https://evil.example", "/\\evil.example", "javascript:alert(1)", "/\t/evil.example"],
)
async def test_no_open_redirect_after_login(lab: tuple[FastAPI, StarLab], target: str) -> None:
    app, star = lab
    await add_person(star, "alice")
    b = Browser(app)
    await b.get("/login")
    r = await b.post("/login", {"username": "alice", "password": PASSWORD, "next": target})
    assert r.status_code == 303 and r.headers["location"] == "/tasks"
    await b.aclose()


async def test_login_returns_to_the_page_with_its_whole_query(lab: tuple[FastAPI, StarLab]) -> None:
    """``/login?next=`` carries the page's whole query, percent-encoded: a second parameter (and
    an encoded ``&`` inside a value) survives the round trip; open redirects stay refused."""
    app, star = lab
    await add_person(star, "alice")
    b = Browser(app)
    page = "/tasks?a=1&b=2&c=x%26y"
    r = await b.get(page)
    assert r.status_code == 303 and r.headers["location"] == "/login?next=/tasks%3Fa%3D1%26b%3D2%26c%3Dx%2526y"
    login = await b.get(r.headers["location"])
    hidden = re.search(r'name="next" value="([^"]*)"', login.text)
    assert hidden is not None and html.unescape(hidden.group(1)) == page
    r = await b.post("/login", {"username": "alice", "password": PASSWORD, "next": html.unescape(hidden.group(1))})
    assert r.status_code == 303 and r.headers["location"] == page
    other = Browser(app)
    foreign = await other.get("/login?" + urlencode({"next": "//evil.example/x?a=1&b=2"}))
    hidden = re.search(r'name="next" value="([^"]*)"', foreign.text)
    assert hidden is not None and hidden.group(1) == "/"
    for browser in (b, other):
        await browser.aclose()


def _role_dependency(route: APIRoute) -> set[Any]:
    found: set[Any] = set()

    def walk(dependant: Any) -> None:
        for dep in dependant.dependencies:
            if dep.call in (require_lead, require_participant, require_login):
                found.add(dep.call)
            walk(dep)

    walk(route.dependant)
    return found


def _lab_routes(app: FastAPI) -> list[APIRoute]:
    from psychoalign.web import auth
    from psychoalign.web.star import lead, lead_people, participant

    assert all(getattr(app.state, n, None) is not None for n in ("security", "star_lab"))  # installed
    return [r for m in (auth, lead, lead_people, participant) for r in m.router.routes if isinstance(r, APIRoute)]


async def test_every_lab_route_declares_who_may_see_it(lab: tuple[FastAPI, StarLab]) -> None:
    app, _ = lab
    routes = _lab_routes(app)
    assert len(routes) >= 25
    for route in routes:
        roles = _role_dependency(route)
        if route.path in PUBLIC:
            assert not roles or roles == {require_login}, route.path
            continue
        if route.path.startswith("/lead"):
            assert roles == {require_lead}, route.path
        elif route.path.startswith(("/tasks", "/profile")):
            assert roles == {require_participant}, route.path
        else:
            assert roles, f"{route.path} declares no role"


async def test_route_role_matrix(lab: tuple[FastAPI, StarLab]) -> None:
    """Every lab route × anonymous, the task's holder, another participant, a lead, a deactivated
    account (its old session cookie), and, at the end, everyone's session expired."""
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    owner = await add_person(star, "owner")
    await add_person(star, "other")
    gone = await add_person(star, "gone")
    victim = await add_person(star, "victim")  # the account the lead's account routes act on
    clients = {name: Browser(app) for name in ("anon", "owner", "other", "lead", "gone")}
    for name in ("owner", "other", "lead", "gone"):
        await clients[name].login(name)
    await clients["gone"].get("/tasks")  # a page with a CSRF token, before the account goes
    await star.accounts.set_active(gone.id, False)
    await clients["anon"].get("/login")
    lead = clients["lead"]
    await lead.get("/lead/campaigns/new")
    await lead.post(
        "/lead/campaigns", {"name": "m", "instructions": "2", "target_kind": "model", "rules": ["sexually-explicit"]}
    )
    await launch(lead, "m")
    r = await clients["owner"].post("/tasks/claim", {"kind": "red_team"})
    tid = r.headers["location"].rsplit("/", 1)[-1]
    values = {
        "task_id": tid,
        "name": "m",
        "token": "not-a-token",
        "participant_id": owner.participant_id or "",
        "account_id": victim.id,
    }
    checked = 0
    for route in _lab_routes(app):
        if route.path in PUBLIC or route.path == "/logout":
            continue
        path = route.path.format(**{k: values[k] for k in re.findall(r"{(\w+)}", route.path)})
        for method in sorted(route.methods or ()):
            for who, client in clients.items():
                if method == "GET":
                    r = await client.client.get(path)
                else:
                    if who != "gone":  # a deactivated account cannot load a page for a fresh token
                        await client.get("/login" if who == "anon" else ("/lead" if who == "lead" else "/tasks"))
                    r = await client.client.post(path, data={"csrf_token": client.token})
                if who == "gone":  # like anonymous: the login page, or the form refused; never the content
                    assert r.status_code in (303, 403), f"{method} {route.path} as gone: {r.status_code}"
                    assert r.status_code == 403 or r.headers["location"].startswith("/login")
                    assert tid not in r.text
                    checked += 1
                    continue
                lead_page = route.path.startswith("/lead")
                allowed = (
                    (who == "lead")
                    if lead_page
                    else (who == "owner" or (who == "other" and "{task_id}" not in route.path))
                )
                where = f"{method} {route.path} as {who}: {r.status_code}"
                if who == "anon":
                    assert r.status_code == 303 and r.headers["location"].startswith("/login"), where
                elif not allowed:
                    assert r.status_code in (403, 404), where
                    assert tid not in r.text and (who == "owner" or "owner" not in r.text), where
                else:  # allowed (the task may be gone after the holder's own skip: 404 is fine then)
                    assert r.status_code != 403, where
                    assert not r.headers.get("location", "").startswith("/login"), where
                checked += 1
    assert checked >= 140  # 28+ (route, method) pairs × 5 roles
    assert (await star.accounts.get(gone.id)).active is False  # type: ignore[union-attr]
    # every session expired (12 h): each route sends its old holder to the login page
    later = datetime.now(UTC) + timedelta(hours=13)
    star.accounts.clock = lambda: later  # type: ignore[attr-defined]
    for route in _lab_routes(app):
        if route.path in PUBLIC:
            continue
        path = route.path.format(**{k: values[k] for k in re.findall(r"{(\w+)}", route.path)})
        for who in ("owner", "lead"):
            client = clients[who]
            for method in sorted(route.methods or ()):
                if method == "GET":
                    r = await client.client.get(path)
                    assert r.status_code == 303 and r.headers["location"].startswith("/login"), (route.path, who)
                else:
                    r = await client.client.post(path, data={"csrf_token": client.token})
                    assert r.status_code in (303, 403), (route.path, who, r.status_code)
                assert tid not in r.text
    for client in clients.values():
        await client.aclose()


async def test_an_unhandled_error_is_a_page_with_the_security_headers(tmp_path: Path) -> None:
    """Starlette answers a crash outside every middleware: the served app's 500 must still carry
    the CSP and the other headers, be a page for a browser (JSON for an API client) and name the
    request id to look up in the log."""
    from tests.weblab import served_app

    app = served_app(lab_settings(tmp_path / "home"))

    @app.get("/boom")
    async def boom() -> None:
        raise RuntimeError("a bug")

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        page = await client.get("/boom", headers={"accept": "text/html", "x-request-id": "req-42"})
        api = await client.get("/boom", headers={"accept": "application/json"})

        async def broken(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("the templates failed too")

        app.state.templates.render = broken  # the layout cannot be rendered: the static page
        static = await client.get("/boom", headers={"accept": "text/html", "x-request-id": "req-43"})
    assert page.status_code == api.status_code == static.status_code == 500
    assert page.headers["content-type"].startswith("text/html") and "req-42" in page.text
    assert '<header class="top">' in page.text and "<title>Error 500" in page.text  # the site's layout
    assert "a bug" not in page.text and "Traceback" not in page.text
    assert "req-43" in static.text and "the templates failed" not in static.text and "Traceback" not in static.text
    assert api.json()["error"]["type"] == "server_error"
    for r in (page, api, static):
        assert "script-src 'self'" in r.headers["content-security-policy"]
        assert r.headers["x-content-type-options"] == "nosniff" and r.headers["x-frame-options"] == "DENY"
        assert r.headers["cache-control"] == "no-store"


async def test_exports_and_json_are_never_cached(lab: tuple[FastAPI, StarLab]) -> None:
    """Research data and live numbers: no-store on everything but /static."""
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    lead = Browser(app)
    await lead.login("lead")
    await lead.get("/lead/campaigns/new")
    await lead.post("/lead/campaigns", {"name": "m", "instructions": "1", "rules": ["sexually-explicit"]})
    for path in (
        "/lead/campaigns/m/export?format=jsonl",
        "/lead/campaigns/m/export?format=csv",
        "/lead/campaigns/m/progress.json",
        "/lead/campaigns/m/time.csv",
    ):
        r = await lead.get(path)
        assert r.status_code == 200 and r.headers["cache-control"] == "no-store", path
    assert "no-store" not in (await lead.get("/static/app.css")).headers.get("cache-control", "")
    await lead.aclose()


async def test_a_form_field_that_does_not_parse_is_a_page_for_a_browser_and_json_on_v1(tmp_path: Path) -> None:
    """A RequestValidationError (a number field sent as text, a missing field) on a lab form: the
    error page with the security headers, naming the field, never the input; /v1 keeps its
    OpenAI-shaped JSON error."""
    from tests.weblab import served_app

    app = served_app(lab_settings(tmp_path / "home"))
    async with app.router.lifespan_context(app):
        star: StarLab = app.state.star_lab
        await add_person(star, "lead", Role.LEAD)
        await add_person(star, "ann", roles=["red_teamer", "annotator", "arbitrator"])
        lead, ann = Browser(app), Browser(app)
        await lead.login("lead")
        await ann.login("ann")
        await lead.get("/lead/campaigns/new")
        bad = {"name": "c", "instructions": "2", "outgroup_share": "<script>x</script>", "rules": ["sexually-explicit"]}
        form = await lead.post("/lead/campaigns", bad)
        claim = await ann.post("/tasks/claim", {})  # no kind
        for r, field in ((form, "outgroup_share"), (claim, "kind")):
            assert r.status_code == 400 and r.headers["content-type"].startswith("text/html"), r.text[:200]
            assert f"{field}: " in r.text and "<script>x" not in r.text and '{"error"' not in r.text
            assert "script-src 'self'" in r.headers["content-security-policy"]
        assert await star.lab.campaigns() == []
        api = await lead.client.post(  # /v1 answers the server's own host names only (web/origin.py)
            "/v1/chat/completions",
            json={"model": "psychoalign"},
            headers={"accept": "application/json", "host": "localhost"},
        )
        assert api.status_code == 400 and api.json()["error"]["type"] == "invalid_request_error"
        await lead.aclose()
        await ann.aclose()


async def test_error_pages_are_in_the_sites_layout_with_the_input_escaped(tmp_path: Path) -> None:
    """The served app's 404 (an unknown page, its path hostile), 405 (a method a page does not
    serve) and 400 (a form field that does not parse, the lab's answer to FastAPI's 422) for a
    browser: the site's page with its header, the status in the title, one line of text, nothing
    of the input raw. (The 500: test_an_unhandled_error_is_a_page_with_the_security_headers.)"""
    from tests.weblab import served_app

    app = served_app(lab_settings(tmp_path / "home"))
    async with app.router.lifespan_context(app):
        await add_person(app.state.star_lab, "ann", roles=["red_teamer"])
        ann = Browser(app)
        await ann.login("ann")
        await ann.get("/tasks")
        answers = {
            404: await ann.client.get("/%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E"),
            405: await ann.client.delete("/tasks"),
            400: await ann.post("/tasks/claim", {"kind": "<script>alert(1)</script>"}),
        }
        await ann.aclose()
    for status, r in answers.items():
        assert r.status_code == status and r.headers["content-type"].startswith("text/html"), (status, r.text[:200])
        assert '<header class="top">' in r.text and f"<title>Error {status}" in r.text, status
        alert = r.text.split('role="alert">', 1)[1].split("</p>", 1)[0]
        assert alert and "\n" not in alert, (status, alert)
        assert "<img" not in r.text and "<script>alert" not in r.text and "Traceback" not in r.text, status
        assert "'unsafe-inline'" not in r.headers["content-security-policy"], status
