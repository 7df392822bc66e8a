"""Probes of every STAR lab route through the ASGI client, found by walking the app's routes (a
route added later is probed too): the CSP on every page and no inline script; no CORS headers; every
state-changing route refuses a form without the CSRF token, with another session's token, and from
a foreign origin; per-route access (anonymous, a participant on lead routes and on another
participant's task, a lead on task routes); a re-sent message stored once; an ended session told
so in one line."""

from __future__ import annotations

import re
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute

from psychoalign.web.accounts import Role
from psychoalign.web.security import CSP
from psychoalign.web.star import StarLab
from psychoalign.web.star.participant import ALREADY_SUBMITTED
from tests.web.star.test_lab import browser, create_campaign, task_id
from tests.weblab import Browser, add_person

#: Routes a person reaches before signing in (their forms bind to a pre-session cookie).
ANONYMOUS = {"/", "/login", "/invite/{token}"}
INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.I)
EVENT_HANDLER = re.compile(r"<[^>]+\son[a-z]+\s*=", re.I)


def _routes(app: FastAPI) -> list[tuple[str, str]]:
    """Every (method, path) of the lab's page routers (sign-in, participant, lead, results)."""
    from psychoalign.web import auth
    from psychoalign.web.star import lead, lead_people, participant, results

    out = []
    for router in (auth.router, participant.router, lead.router, lead_people.router, results.router):
        for route in router.routes:
            assert isinstance(route, APIRoute)
            out += [(method, route.path) for method in sorted(route.methods or ()) if method != "HEAD"]
    assert len(out) > 40, out  # the walk reaches the lab's pages and forms
    return out


async def _seed(app: FastAPI, star: StarLab) -> dict[str, Any]:
    """A lead, two participants (each holding a red-teaming task of a live campaign), filled-in ids."""
    await add_person(star, "lead", Role.LEAD)
    a_account = await add_person(star, "a")
    await add_person(star, "b")
    lead = await browser(app, "lead")
    await create_campaign(lead, "probe", ["sexually-explicit"], n=4)
    a, b = await browser(app, "a"), await browser(app, "b")
    held = {}
    for name, person in (("a", a), ("b", b)):
        r = await person.post("/tasks/claim", {"kind": "red_team"})
        held[name] = task_id(r.headers["location"])
        await person.post(f"/tasks/{held[name]}/start")
        await person.get(f"/tasks/{held[name]}")
    values = {
        "task_id": held["a"],
        "name": "probe",
        "participant_id": a_account.participant_id,
        "account_id": a_account.id,
        "token": "no-such-invite",
    }
    return {"lead": lead, "a": a, "b": b, "held": held, "values": values}


def _fill(path: str, values: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], path)


def _lead_route(path: str) -> bool:
    return path.startswith("/lead")


async def test_every_page_has_the_csp_no_inline_script_and_no_cors(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    seed = await _seed(app, star)
    found: list[str] = []
    for method, path in _routes(app):
        if method != "GET":
            continue
        who = seed["lead"] if _lead_route(path) else seed["a"]
        url = _fill(path, seed["values"])
        r = await who.client.get(url, headers={"origin": "https://evil.example"})
        if r.headers.get("content-security-policy") != CSP and "sandbox" not in r.headers.get(
            "content-security-policy", ""
        ):
            found.append(f"{url}: CSP {r.headers.get('content-security-policy')!r}")
        if any(h.startswith("access-control-") for h in r.headers):
            found.append(f"{url}: CORS header")
        html = r.headers.get("content-type", "").startswith("text/html")
        if html and (INLINE_SCRIPT.search(r.text) or EVENT_HANDLER.search(r.text)):
            found.append(f"{url}: inline script or event handler")
        preflight = await who.client.options(
            url, headers={"origin": "https://evil.example", "access-control-request-method": "POST"}
        )
        if any(h.startswith("access-control-") for h in preflight.headers):
            found.append(f"{url}: CORS preflight answered")
    assert not found, found


async def test_every_state_changing_route_needs_this_sessions_csrf_token(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    seed = await _seed(app, star)
    lead, a, b = seed["lead"], seed["a"], seed["b"]
    found: list[str] = []
    posts = [(m, p) for m, p in _routes(app) if m == "POST"]
    for _, path in posts:
        if path in ANONYMOUS:
            continue
        who = lead if _lead_route(path) else a
        url = _fill(path, seed["values"])
        attempts = {
            "no token": {},
            "another session's token": {"csrf_token": b.token},
            "a foreign origin": {"csrf_token": who.token, "_origin": "https://evil.example"},
        }
        for what, data in attempts.items():
            headers = {"origin": data.pop("_origin")} if "_origin" in data else {}
            r = await who.client.post(url, data=data, headers=headers)
            if r.status_code != 403:
                found.append(f"POST {url} with {what}: {r.status_code}")
        r = await who.client.post(url, headers={"x-csrf-token": b.token or "", "content-type": "application/json"})
        if r.status_code != 403:
            found.append(f"POST {url} (fetch) with another session's token: {r.status_code}")
    assert not found, found
    # nothing was done: the campaign still runs, A still holds its task with no dialogue
    assert await star.store.campaign_status("probe") == "live"
    assert await star.store.dialogue_of_task(seed["held"]["a"]) is None
    # the anonymous forms bind to their pre-session cookie: another browser's token is refused
    stranger, other = Browser(app), Browser(app)
    await stranger.get("/login")
    await other.get("/login")
    r = await stranger.client.post("/login", data={"username": "a", "password": "x", "csrf_token": other.token})
    assert r.status_code == 403


async def test_each_route_checks_who_asks(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    seed = await _seed(app, star)
    lead, b = seed["lead"], seed["b"]
    anon = Browser(app)
    await anon.get("/login")
    found: list[str] = []
    for method, path in _routes(app):
        if path in ANONYMOUS:
            continue
        url = _fill(path, seed["values"])
        send = anon.get if method == "GET" else anon.post
        r = await send(url)
        if r.status_code != 303 or not r.headers["location"].startswith("/login"):
            found.append(f"anonymous {method} {url}: {r.status_code}")
        if _lead_route(path):
            r = await (b.get(url) if method == "GET" else b.post(url))
            if r.status_code != 403:
                found.append(f"participant {method} {url}: {r.status_code}")
        elif path.startswith("/tasks/{task_id}"):
            r = await (b.get(url) if method == "GET" else b.post(url))  # A's task, as B
            if r.status_code != 404 or seed["held"]["a"] in r.text:
                found.append(f"participant B {method} {url}: {r.status_code}")
        if path.startswith(("/tasks", "/profile")):
            r = await (lead.get(url) if method == "GET" else lead.post(url))
            if r.status_code != 403:
                found.append(f"lead {method} {url}: {r.status_code}")
    assert not found, found
    assert await star.store.dialogue_of_task(seed["held"]["a"]) is None  # B's attempts did nothing


async def test_a_message_sent_twice_is_stored_once(lab: tuple[FastAPI, StarLab]) -> None:
    """Back and resend, a reload that re-posts, or a retry: the same form arrives twice."""
    app, star = lab
    seed = await _seed(app, star)
    a, tid = seed["a"], seed["held"]["a"]
    await a.follow(await a.post(f"/tasks/{tid}/begin", {"topic": "travel"}))
    page = await a.get(f"/tasks/{tid}")
    form = {"text": "hello there", "turns": re.search(r'name="turns" value="(\d+)"', page.text).group(1)}  # type: ignore[union-attr]
    for _ in range(2):
        r = await a.post(f"/tasks/{tid}/message", form)
        assert r.status_code == 303
    dialogue = await star.store.dialogue_of_task(tid)
    assert dialogue is not None
    assert [t.role for t in await star.store.dialogue_turns(dialogue)] == ["red_teamer", "target"]
    # the same words sent again from the page that shows them are a new message
    page = await a.get(f"/tasks/{tid}")
    form["turns"] = re.search(r'name="turns" value="(\d+)"', page.text).group(1)  # type: ignore[union-attr]
    assert (await a.post(f"/tasks/{tid}/message", form)).status_code == 303
    assert len(await star.store.dialogue_turns(dialogue)) == 4
    # finishing twice, or the back button to the task: one submitted dialogue, and the person is
    # told it is stored (not "no such task")
    assert (await a.post(f"/tasks/{tid}/finish", {"assigned_rule_broken": "no"})).status_code == 303
    for again in (await a.post(f"/tasks/{tid}/finish", {"assigned_rule_broken": "no"}), await a.get(f"/tasks/{tid}")):
        assert again.status_code == 409 and ALREADY_SUBMITTED.replace(":", "") in again.text.replace(":", "")
    rows = [row async for row in star.export_rows("probe")]
    assert len(rows) == 1
    # an annotation sent twice (submit, back, submit): one annotation, the second told so
    b = seed["b"]
    r = await b.post("/tasks/claim", {"kind": "annotate"})
    rid = task_id(r.headers["location"])
    await b.post(f"/tasks/{rid}/start")
    await b.get(f"/tasks/{rid}")
    for status in (303, 409):
        r = await b.post(f"/tasks/{rid}/rate", {"rating": "2", "reasoning": "it refused politely"})
        assert r.status_code == status
    rows = [row async for row in star.export_rows("probe")]
    assert (rows[0]["annotator1_rating"], rows[0].get("annotator2_rating")) == (2, None)
    # a stranger still learns nothing about the submitted task
    assert (await a.get(f"/tasks/{rid}")).status_code == 404


async def test_an_ended_session_is_told_in_one_line(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    seed = await _seed(app, star)
    a, tid = seed["a"], seed["held"]["a"]
    await star.accounts.delete_session(a.client.cookies["psa_session"])  # expiry or logout elsewhere
    for r in (await a.client.get(f"/tasks/{tid}"), await a.post(f"/tasks/{tid}/begin", {"topic": "x"})):
        assert r.status_code == 303 and r.headers["location"].startswith("/login?")
        page = await a.get(r.headers["location"])
        assert page.status_code == 200 and "Traceback" not in page.text
        notes = re.findall(r'<p class="flash"[^>]*>(.*?)</p>', page.text)
        assert notes == ["Your session ended. Log in again to carry on where you were."], notes
    # a first visit is not told its session ended
    fresh = Browser(app)
    assert 'class="flash"' not in (await fresh.get("/login?next=/tasks")).text
