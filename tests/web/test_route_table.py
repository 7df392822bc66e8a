"""Who may reach each route of the served app (``create_app``: lab, trace and experiment viewers,
/v1, A2A, ops, /static), as one explicit table: every (method, path) the app serves has a row
giving the answer each kind of visitor gets, and a route without a row (or a row without a route)
fails the test, so a new route cannot ship without someone deciding who may use it.

The visitors: anonymous; a red teamer holding a red-teaming task of campaign ``camp``; an
annotator holding one of its annotation tasks; an arbitrator holding one of its arbitrations; a
lead (the lab's administrators: a lead is the one role that manages campaigns and people); and a
participant of ANOTHER campaign (``other``, members only; ``camp`` is members only too, without
them) holding a task there; a program holding the local token alone (``api_token``: the bearer
header on every request, no session; to the pages it is anonymous); and the server's owner, who
opened the banner's token link (``owner``: the owner's lead session and the token's cookie).
Task routes are asked about the red teamer's task; every held task is
then checked against every participant (its holder alone sees it; to the others it does not exist).

A row's cell is the status that visitor gets (``LOGIN``: a redirect to the login page). ``MUTATES``
marks the visitor a form is for: that request changes the lab (the functional tests in
tests/web/star cover what it does), so it is not sent here; everyone else's request is sent, with
that visitor's own valid CSRF token, so the refusal measured is the route's access check and not
the CSRF check (tests/web/test_probes.py covers that). HEAD is checked on every GET route: it
answers what GET answers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute

from psychoalign.star.model import Participant
from psychoalign.traces import open_store
from psychoalign.traces.model import NegotiationParams, Trace
from psychoalign.web import create_app
from psychoalign.web.accounts import Role
from psychoalign.web.origin import face_of
from psychoalign.web.security import UNSAFE_METHODS, csrf_protect
from psychoalign.web.star import StarLab
from tests.web.star.test_lab import create_campaign, task_id
from tests.weblab import PASSWORD, Browser, lab_settings

ROLES = ("anon", "red_teamer", "annotator", "arbitrator", "lead", "outsider", "api_token", "owner")
PARTICIPANTS = ("red_teamer", "annotator", "arbitrator", "outsider")
LOGIN = "login"  # 303 to /login?next=…
HOME = {"anon": "/login", "api_token": "/login", "lead": "/lead", "owner": "/lead"}  # the page a visitor's forms are on
MUTATES = "mutates"  # the visitor the form is for: not sent (see the module docstring)
LOCAL_TOKEN = "route-table-token"
BASE = "http://localhost:8000"  # a name a loopback server answers (the origin guard refuses others)

#: A lead's form: the lead's and the owner's own request changes the lab; everyone else is refused.
LEAD_FORM: tuple[int | str, ...] = (LOGIN, 403, 403, 403, MUTATES, 403, LOGIN, MUTATES)
#: Route -> the answer (anon, red_teamer, annotator, arbitrator, lead, outsider, api_token, owner).
#: ``{task_id}`` is the red teamer's held task of ``camp``; ``{name}`` is ``camp``.
TABLE: dict[tuple[str, str], tuple[int | str, ...]] = {
    # ops: loopback answers (every visitor here is on a loopback address)
    ("GET", "/healthz"): (200, 200, 200, 200, 200, 200, 200, 200),
    ("GET", "/metrics"): (200, 200, 200, 200, 200, 200, 200, 200),
    # /v1: an API key or the local token (its bearer header, or the owner's cookie from the token
    # link), never a session cookie; past the token, a form body is 415 and model "camp" a 404
    ("GET", "/v1/models"): (401, 401, 401, 401, 401, 401, 200, 200),
    ("HEAD", "/v1/models"): (401, 401, 401, 401, 401, 401, 200, 200),
    ("GET", "/v1/models/{name:path}"): (401, 401, 401, 401, 401, 401, 404, 404),
    ("HEAD", "/v1/models/{name:path}"): (401, 401, 401, 401, 401, 401, 404, 404),
    ("POST", "/v1/chat/completions"): (401, 401, 401, 401, 401, 401, 415, 415),
    ("POST", "/v1/guardrail/checks"): (401, 401, 401, 401, 401, 401, 415, 415),
    ("POST", "/v1/guardrail/beta/litellm_basic_guardrail_api"): (401, 401, 401, 401, 401, 401, 415, 415),
    # the API's catch-alls: OpenAI's 404 for an unknown URL, one row per method
    **{(m, "/v1/{path:path}"): (404,) * 8 for m in ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")},
    **{(m, "/v1"): (404,) * 8 for m in ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")},
    # sign-in
    ("GET", "/"): (LOGIN, 303, 303, 303, 303, 303, LOGIN, 303),  # to the login page, or to their home page
    ("GET", "/login"): (200, 303, 303, 303, 303, 303, 200, 303),  # signed in: to their home page
    ("POST", "/login"): (401, 401, 401, 401, 401, 401, 401, 401),  # sent with a wrong password
    ("POST", "/logout"): (LOGIN, MUTATES, MUTATES, MUTATES, MUTATES, MUTATES, LOGIN, MUTATES),
    ("GET", "/invite/{token}"): (404, 404, 404, 404, 404, 404, 404, 404),  # an unknown token
    ("POST", "/invite/{token}"): (404, 404, 404, 404, 404, 404, 404, 404),
    # participants' pages
    ("GET", "/tasks"): (LOGIN, 200, 200, 200, 403, 200, LOGIN, 403),
    ("POST", "/tasks/claim"): (LOGIN, MUTATES, MUTATES, MUTATES, 403, MUTATES, LOGIN, 403),
    ("GET", "/tasks/{task_id}"): (LOGIN, 200, 404, 404, 403, 404, LOGIN, 403),
    **{
        ("POST", f"/tasks/{{task_id}}/{action}"): (LOGIN, MUTATES, 404, 404, 403, 404, LOGIN, 403)
        for action in ("start", "pause", "skip", "begin", "message", "finish", "rate", "draft")
    },
    ("GET", "/profile"): (LOGIN, 200, 200, 200, 403, 200, LOGIN, 403),
    ("POST", "/profile"): (LOGIN, MUTATES, MUTATES, MUTATES, 403, MUTATES, LOGIN, 403),
    # the lead's pages
    ("GET", "/lead"): (LOGIN, 403, 403, 403, 200, 403, LOGIN, 200),
    ("GET", "/lead/campaigns/new"): (LOGIN, 403, 403, 403, 200, 403, LOGIN, 200),
    ("POST", "/lead/campaigns"): (LOGIN, 403, 403, 403, MUTATES, 403, LOGIN, MUTATES),
    ("GET", "/lead/campaigns/{name}"): (LOGIN, 403, 403, 403, 200, 403, LOGIN, 200),
    ("GET", "/lead/campaigns/{name}/progress.json"): (LOGIN, 403, 403, 403, 200, 403, LOGIN, 200),
    ("GET", "/lead/campaigns/{name}/export"): (LOGIN, 403, 403, 403, 200, 403, LOGIN, 200),
    ("GET", "/lead/campaigns/{name}/time.csv"): (LOGIN, 403, 403, 403, 200, 403, LOGIN, 200),
    ("GET", "/lead/campaigns/{name}/results.json"): (LOGIN, 403, 403, 403, 200, 403, LOGIN, 200),
    ("GET", "/lead/campaigns/{name}/report"): (LOGIN, 403, 403, 403, 200, 403, LOGIN, 200),
    **{
        ("POST", f"/lead/campaigns/{{name}}/{action}"): (LOGIN, 403, 403, 403, MUTATES, 403, LOGIN, MUTATES)
        for action in ("relax", "release-expired", "personas", "status", "access", "members")
    },
    ("POST", "/lead/campaigns/{name}/members/{participant_id}/remove"): LEAD_FORM,
    ("GET", "/lead/participants"): (LOGIN, 403, 403, 403, 200, 403, LOGIN, 200),
    ("POST", "/lead/participants"): (LOGIN, 403, 403, 403, MUTATES, 403, LOGIN, MUTATES),
    ("POST", "/lead/participants/import"): (LOGIN, 403, 403, 403, MUTATES, 403, LOGIN, MUTATES),
    ("POST", "/lead/participants/{participant_id}/roles"): (LOGIN, 403, 403, 403, MUTATES, 403, LOGIN, MUTATES),
    **{
        ("POST", f"/lead/accounts/{{account_id}}/{action}"): (LOGIN, 403, 403, 403, MUTATES, 403, LOGIN, MUTATES)
        for action in ("deactivate", "activate", "invite", "unlock")
    },
    # the trace and experiment viewers: leads only
    ("GET", "/traces"): (LOGIN, 403, 403, 403, 200, 403, LOGIN, 200),
    ("GET", "/traces/export.jsonl"): (LOGIN, 403, 403, 403, 200, 403, LOGIN, 200),
    ("GET", "/traces/{trace_id}"): (LOGIN, 403, 403, 403, 200, 403, LOGIN, 200),
    ("GET", "/traces/{trace_id}/export.json"): (LOGIN, 403, 403, 403, 200, 403, LOGIN, 200),
    ("GET", "/experiments"): (LOGIN, 403, 403, 403, 200, 403, LOGIN, 200),
    ("GET", "/experiments/{run_id}"): (LOGIN, 403, 403, 403, 404, 403, LOGIN, 404),  # no run stored: the lead's 404
    ("GET", "/experiments/{run_id}/cells/{key:path}"): (LOGIN, 403, 403, 403, 404, 403, LOGIN, 404),
    # mounts (not API routes): the request sent stands for the mount
    ("GET", "/static"): (200, 200, 200, 200, 200, 200, 200, 200),  # GET /static/app.css
    ("GET", "/a2a"): (200, 200, 200, 200, 200, 200, 200, 200),  # GET the agent card
    ("POST", "/a2a"): (401, 401, 401, 401, 401, 401, 415, 415),  # a form, with or without the agent's token
}
#: The request each mount row sends.
MOUNT_PATHS = {("GET", "/static"): "/static/app.css", ("GET", "/a2a"): "/.well-known/agent-card.json"}
MOUNT_PATHS[("POST", "/a2a")] = "/a2a/v1/message:send"


@dataclass
class Lab:
    app: FastAPI
    star: StarLab
    people: dict[str, Browser]
    ids: dict[str, str]
    held: dict[str, str] = field(default_factory=dict)  # role -> the task it holds


def served_routes(app: FastAPI) -> set[tuple[str, str]]:
    """Every (method, path) the app serves: its API routes (through included routers) and its mounts."""
    found: set[tuple[str, str]] = set()

    def walk(routes: list[Any]) -> None:
        for route in routes:
            inner = getattr(route, "original_router", None)
            if inner is not None:
                walk(inner.routes)
            elif isinstance(route, APIRoute):
                found.update((m, route.path) for m in route.methods or ())
            else:  # a mount (/static, the A2A app): one row per method the table gives it
                path = getattr(route, "path", None)
                assert path, f"a route without a path: {route!r}"
                rows = {key for key in TABLE if key[1] == path}
                found.update(rows or {("?", path)})

    walk(app.routes)
    return found


async def _person(star: StarLab, username: str, roles: list[str], ids: dict[str, str]) -> None:
    account = await star.accounts.create_account(
        Role.PARTICIPANT, username=username, password=PASSWORD, display_name=username
    )
    await star.store.add_participants([Participant(id=account.participant_id or "", roles=roles)])
    ids[f"pid:{username}"] = account.participant_id or ""
    ids[f"account:{username}"] = account.id


async def _login(app: FastAPI, username: str, n: int) -> Browser:
    person = Browser(app, BASE, address=f"127.0.0.{n}")  # one address each: login throttling is per address
    assert (await person.login(username)).status_code == 303
    return person


async def _take(person: Browser, kind: str) -> str:
    """Claim a task of ``kind`` and start it (past the content warning): the person holds it."""
    r = await person.post("/tasks/claim", {"kind": kind})
    assert r.status_code == 303 and "msg=" not in r.headers["location"], r.headers["location"]
    tid = task_id(r.headers["location"])
    await person.post(f"/tasks/{tid}/start")
    assert (await person.get(f"/tasks/{tid}")).status_code == 200
    return tid


async def _finish_dialogue(person: Browser) -> None:
    tid = await _take(person, "red_team")
    await person.follow(await person.post(f"/tasks/{tid}/begin", {"topic": "travel"}))
    await person.follow(await person.post(f"/tasks/{tid}/message", {"text": "hello"}))
    assert (await person.post(f"/tasks/{tid}/finish", {"assigned_rule_broken": "no"})).status_code == 303


@pytest.fixture
async def lab(tmp_path: Path) -> AsyncIterator[Lab]:
    """Campaign ``camp`` (members only): a submitted dialogue two annotators rated 1 and 4 (so an
    arbitration waits), a second one; the red teamer, an annotator and the arbitrator each hold a
    task of it. Campaign ``other`` (members only): the outsider holds its red-teaming task."""
    home = tmp_path / "home"
    url = f"sqlite+aiosqlite:///{tmp_path / 'app.db'}"
    app = create_app(lab_settings(home, url), store=open_store(url), a2a=True, local_token=LOCAL_TOKEN)
    star: StarLab = app.state.star_lab
    async with app.router.lifespan_context(app):
        ids: dict[str, str] = {}
        await star.accounts.create_account(Role.LEAD, username="lead", password=PASSWORD, display_name="Lead")
        for name, roles in (
            ("writer", ["red_teamer"]),
            ("red_teamer", ["red_teamer"]),
            ("first", ["annotator"]),
            ("annotator", ["annotator"]),
            ("arbitrator", ["arbitrator"]),
            ("outsider", ["red_teamer", "annotator", "arbitrator"]),
        ):
            await _person(star, name, roles, ids)
        n = iter(range(2, 100))
        lead = await _login(app, "lead", next(n))
        for campaign, size, members in (
            ("camp", 4, ("writer", "red_teamer", "first", "annotator", "arbitrator")),
            ("other", 1, ("outsider",)),
        ):
            await create_campaign(lead, campaign, ["sexually-explicit"], n=size, live=False)
            store = await star.store_for(campaign)
            await store.set_members_only(campaign, True)
            await store.add_members(campaign, [ids[f"pid:{m}"] for m in members])
            r = await lead.post(
                f"/lead/campaigns/{campaign}/status", {"action": "launch", "areas_ok": "yes", "anyway": "yes"}
            )
            assert r.status_code == 303 and "campaign_launched" in r.headers["location"], r.text[:300]
        people = {"lead": lead}
        for name in ("writer", "first", *PARTICIPANTS):
            people[name] = await _login(app, name, next(n))
        await _finish_dialogue(people["writer"])
        await _finish_dialogue(people["writer"])
        for name, rating in (("first", 1), ("annotator", 4)):  # two steps or more apart: an arbitration
            tid = await _take(people[name], "annotate")
            r = await people[name].post(f"/tasks/{tid}/rate", {"rating": str(rating), "reasoning": "because"})
            assert r.status_code == 303, r.text[:300]
        held = {
            "red_teamer": await _take(people["red_teamer"], "red_team"),
            "annotator": await _take(people["annotator"], "annotate"),
            "arbitrator": await _take(people["arbitrator"], "arbitrate"),
            "outsider": await _take(people["outsider"], "red_team"),
        }
        assert (await star.store.task(held["outsider"])).campaign == "other"
        traces = app.state.gateway.store
        trace = Trace(request="a stored request", params=NegotiationParams())
        await traces.start(trace)
        ids["trace"] = trace.id
        people["anon"] = Browser(app, BASE, address="127.0.0.99")
        await people["anon"].get("/login")
        people["api_token"] = Browser(app, BASE, address="127.0.0.98")
        people["api_token"].client.headers["authorization"] = f"Bearer {LOCAL_TOKEN}"
        await people["api_token"].get("/login")
        people["owner"] = Browser(app, BASE, address="127.0.0.97")
        assert (await people["owner"].get(f"/?token={LOCAL_TOKEN}")).status_code == 303
        await people["owner"].get("/lead")
        yield Lab(app, star, people, ids, held)
        for person in people.values():
            await person.aclose()


def _fill(path: str, lab: Lab, task: str) -> str:
    values = {
        "task_id": task,
        "name": "camp",
        "token": "no-such-invite",
        "participant_id": lab.ids["pid:outsider"],
        "account_id": lab.ids["account:outsider"],
        "trace_id": lab.ids["trace"],
        "run_id": "no-such-run",
        "key": "no-such-cell",
        "path": "no-such-endpoint",
    }
    for key, value in values.items():
        path = path.replace(f"{{{key}:path}}", value).replace(f"{{{key}}}", value)
    return path


def _got(r: Any) -> int | str:
    location = r.headers.get("location", "")
    return LOGIN if r.status_code == 303 and location.startswith("/login") else r.status_code


async def _ask(person: Browser, method: str, url: str) -> int | str:
    """The answer to one request, sent with this visitor's own CSRF token (a valid one)."""
    if method in ("GET", "HEAD", "OPTIONS"):
        return _got(await person.client.request(method, url))
    form = {"csrf_token": person.token or "", "username": "lead", "password": "not the password"}
    return _got(await person.client.request(method, url, data=form))


def test_the_table_has_a_row_for_every_route_and_no_other(tmp_path: Path) -> None:
    app = create_app(lab_settings(tmp_path / "home"), a2a=True, local_token=LOCAL_TOKEN)
    served = served_routes(app)
    missing = sorted(served - TABLE.keys())
    assert not missing, f"routes nobody decided the access of (add a row to TABLE): {missing}"
    stale = sorted(TABLE.keys() - served)
    assert not stale, f"rows for routes the app no longer serves: {stale}"
    for key, row in TABLE.items():
        assert len(row) == len(ROLES), key


async def test_each_route_answers_each_visitor_as_the_table_says(lab: Lab) -> None:
    found: list[str] = []
    sent = 0
    for (method, path), row in sorted(TABLE.items()):
        url = MOUNT_PATHS.get((method, path)) or _fill(path, lab, lab.held["red_teamer"])
        for role, expected in zip(ROLES, row, strict=True):
            if expected == MUTATES:
                continue
            person = lab.people[role]
            if method not in ("GET", "HEAD", "OPTIONS"):  # a fresh token for this visitor
                await person.get(HOME.get(role, "/tasks"))
            got = await _ask(person, method, url)
            sent += 1
            if got != expected:
                found.append(f"{method} {url} as {role}: {got}, the table says {expected}")
            if method == "GET" and (method, path) not in MOUNT_PATHS:
                head = await _ask(person, "HEAD", url)
                if head != got:
                    found.append(f"HEAD {url} as {role}: {head}, GET answered {got}")
    assert not found, "\n".join(found)
    assert sent > 300
    # nothing the refused requests asked for happened: every held task is still held, unchanged
    for role, tid in lab.held.items():
        assert (await lab.people[role].client.get(f"/tasks/{tid}")).status_code == 200, role
    assert await lab.star.store.dialogue_of_task(lab.held["red_teamer"]) is None
    assert await lab.star.store.campaign_status("camp") == "live"


async def test_a_held_task_exists_for_its_holder_alone(lab: Lab) -> None:
    """Each held task (red teaming, annotation, arbitration, another campaign's) against every
    participant: its page opens for its holder; to every other participant each task route
    answers 404, and the page never names the task."""
    found: list[str] = []
    task_routes = sorted(key for key in TABLE if key[1].startswith("/tasks/{task_id}"))
    assert len(task_routes) == 9
    for holder, tid in lab.held.items():
        for role in PARTICIPANTS:
            person = lab.people[role]
            for method, path in task_routes:
                if role == holder and method != "GET":
                    continue  # the holder's forms change the task: the functional tests cover them
                url = _fill(path, lab, tid)
                if method != "GET":
                    await person.get("/tasks")
                r = await person.client.request(
                    method, url, data=None if method == "GET" else {"csrf_token": person.token or ""}
                )
                expected = 200 if role == holder else 404
                if r.status_code != expected:
                    found.append(f"{method} {url} ({holder}'s task) as {role}: {r.status_code}, expected {expected}")
                if role != holder and tid in r.text:
                    found.append(f"{method} {url} ({holder}'s task) as {role}: the answer names the task")
    assert not found, "\n".join(found)


def _api_routes(app: FastAPI) -> list[APIRoute]:
    found: list[APIRoute] = []

    def walk(routes: list[Any]) -> None:
        for route in routes:
            inner = getattr(route, "original_router", None)
            if inner is not None:
                walk(inner.routes)
            elif isinstance(route, APIRoute):
                found.append(route)

    walk(app.routes)
    return found


def _calls(dependant: Any) -> set[Any]:
    """Every dependency a route runs, nested ones included."""
    found = {dependant.call}
    for dep in dependant.dependencies:
        found |= _calls(dep)
    return found


def test_every_state_changing_page_route_checks_the_csrf_token(tmp_path: Path) -> None:
    """Every POST/PUT/PATCH/DELETE route outside the machine faces runs :func:`csrf_protect`, so a
    new form route (or a new method on an old one) without it fails here. The machine faces take
    bearer credentials, never a session: /v1 and A2A refuse other origins (web/origin.py) and the
    local token's cookie counts there only for same-origin requests (web/local_token.py)."""
    app = create_app(lab_settings(tmp_path / "home"), a2a=True, local_token=LOCAL_TOKEN)
    checked, unchecked = 0, []
    for route in _api_routes(app):
        unsafe = sorted((route.methods or set()) & UNSAFE_METHODS)
        if not unsafe or face_of(route.path) is not None:
            continue
        checked += 1
        if csrf_protect not in _calls(route.dependant):
            unchecked.append(f"{'/'.join(unsafe)} {route.path}")
    assert not unchecked, f"state-changing routes without the CSRF check: {unchecked}"
    assert checked >= 28


async def test_a_request_without_the_csrf_token_is_refused_with_a_one_line_page(lab: Lab) -> None:
    """Each state-changing page route, sent by the visitor its form is for (anonymous for the
    public forms) without a token, with a wrong one, and with the right one from another site's
    page: 403, a page in the site's layout whose message is one line, no CORS header; nothing ran."""
    sent = 0
    for (method, path), row in sorted(TABLE.items()):
        if method not in UNSAFE_METHODS or face_of(path) is not None or path == "/a2a":
            continue
        role = ROLES[row.index(MUTATES)] if MUTATES in row else "anon"
        person, url = lab.people[role], _fill(path, lab, lab.held["red_teamer"])
        await person.get(HOME.get(role, "/tasks"))
        form = {"username": "lead", "password": PASSWORD, "text": "x", "kind": "red_team", "action": "pause"}
        for what, data, headers in (
            ("no token", form, {}),
            ("a wrong token", {**form, "csrf_token": "0" * 64}, {}),
            ("another site's page", {**form, "csrf_token": person.token or ""}, {"origin": "https://evil.example"}),
        ):
            r = await person.client.request(method, url, data=data, headers=headers)
            where = f"{method} {url} as {role} with {what}"
            assert r.status_code == 403, f"{where}: {r.status_code} {r.headers.get('location')}"
            assert r.headers["content-type"].startswith("text/html"), where
            assert '<header class="top">' in r.text and "<title>Error 403" in r.text, where
            alert = r.text.split('role="alert">', 1)[1].split("</p>", 1)[0]
            assert alert and "\n" not in alert and len(alert) < 300, f"{where}: {alert!r}"
            assert not [k for k in r.headers if k.startswith("access-control-")], where
            sent += 1
    assert sent >= 3 * 28
    for role, tid in lab.held.items():  # nothing the refused forms asked for happened
        assert (await lab.people[role].client.get(f"/tasks/{tid}")).status_code == 200, role
    assert await lab.star.store.campaign_status("camp") == "live"
    assert (await lab.people["lead"].client.get("/lead")).status_code == 200  # not logged out
