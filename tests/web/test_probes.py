"""Outside testers' probes of the served app (``create_app``: lab, trace viewer, experiment viewer,
/v1, A2A, ops), all through its real route table:

* every route of every face × anonymous, a participant who does not hold the task, the holder and
  a lead: the status each gets, the security headers on every answer, no traceback or internal
  path in any body; a route nobody classified fails the test (fail closed);
* every unsafe route refuses a request without the CSRF token, with a foreign ``Origin``, from
  ``Sec-Fetch-Site: cross-site``, as JSON without the header token or with another session's, and
  with the token in a ``text/plain`` body; nothing changed after;
* a cross-origin preflight or request to any route gets no CORS header on a page, even with
  ``serve.cors_origins`` set (CORS is the machine faces' alone);
* hostile text (markup, attribute breakers, an injected image, a ``javascript:`` URL, bidi
  overrides and isolates, zero-width characters) in every untrusted field a person or a model can
  fill, in every query parameter a page reads and in every path parameter (the 404, 405, 400 and
  422 pages), checked on the parsed DOM of every page: no event-handler attribute, no inline
  script, no raw direction control outside a form control, the text inside a direction-isolated
  element.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from fastapi import FastAPI
from fastapi.routing import APIRoute

from psychoalign.star.model import Participant
from psychoalign.traces import TraceStore, open_store
from psychoalign.web import create_app
from psychoalign.web.accounts import Role
from psychoalign.web.origin import face_of
from psychoalign.web.security import require_lead, require_login, require_participant
from psychoalign.web.star import StarLab
from tests.scenario import World, evaluation, proposals
from tests.web.star.test_lab import launch, task_id
from tests.weblab import PASSWORD, Browser, lab_settings

#: What a hostile person or model writes: markup, an attribute breaker, a bidi override and an
#: isolate, a zero-width space. ``PROBE`` marks it in the text a reader gets.
HOSTILE = (
    'PROBE<script>alert(1)</script>"onmouseover=alert(2) x=\'"><img src=x onerror=alert(3)>javascript:alert(4)'
    "\u202eevil\u202c\u2067rli\u2069\u2066lri\u2069\u200b\u200dzwj"
)
#: Characters that reorder or hide text: never raw on a page outside a form control.
CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069\u200b\u200e\u200f\u061c]")
LOCAL_TOKEN = "probe-local-token"
BASE = "http://localhost:8000"
SECURITY_HEADERS = ("content-security-policy", "x-frame-options", "x-content-type-options", "referrer-policy")
VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"})
POLICY = yaml.safe_dump(
    {
        "name": "hostile",
        "version": "1.0",
        "areas": [
            {
                "id": "a",
                "text": f"Area {HOSTILE}",
                "rules": [
                    {"id": "scams", "text": f"Rule {HOSTILE}", "parameters": [{"name": "kind", "values": ["x"]}]}
                ],
            }
        ],
    }
)


@dataclass
class Served:
    app: FastAPI
    lab: StarLab
    store: TraceStore
    home: Path
    ids: dict[str, str] = field(default_factory=dict)
    people: dict[str, Browser] = field(default_factory=dict)


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    """The served app with every kind of untrusted text stored: a campaign from an uploaded policy,
    a red-teaming dialogue (the red teamer's messages and the target's replies), two annotations
    and an arbitration, people's display names, a trace whose request, answer, conversation id and
    EVALUATOR rule hits are hostile. ``holder`` holds a red-teaming task in progress."""
    home = tmp_path / "home"
    url = f"sqlite+aiosqlite:///{tmp_path / 'app.db'}"
    settings = lab_settings(home, url)
    (home / "target.yaml").write_text(yaml.safe_dump({"rules": [], "default": f"Reply {HOSTILE}"}), encoding="utf-8")
    store = open_store(url)
    judge = evaluation(95, "APPROVED", hits=[(f"R\u202e{HOSTILE}"[:60], "contextual")])
    negotiator = World([proposals((f"Answer {HOSTILE}", 0.9))], judge=lambda _: judge).negotiator(store)
    app = create_app(settings, store=store, negotiators={"psychoalign": negotiator}, a2a=True, local_token=LOCAL_TOKEN)
    star: StarLab = app.state.star_lab
    ids = {"trace": (await negotiator.negotiate(f"Ask {HOSTILE}", metadata={"conversation_id": HOSTILE})).id}
    await star.accounts.create_account(Role.LEAD, username="lead", password=PASSWORD, display_name=HOSTILE)
    for name in ("writer", "holder", "intruder", "ann1", "ann2", "arb"):
        account = await star.accounts.create_account(
            Role.PARTICIPANT, username=name, password=PASSWORD, display_name=f"{name} {HOSTILE}"
        )
        await star.store.add_participants([Participant(id=account.participant_id or "")])
        ids[f"pid:{name}"] = account.participant_id or ""
        ids[f"account:{name}"] = account.id
    async with app.router.lifespan_context(app):
        served = Served(app, star, store, home, ids)
        lead = served.people["lead"] = await browser(app, "lead")
        await lead.get("/lead/campaigns/new")
        files = {"policy_file": ("policy.yaml", POLICY.encode(), "application/x-yaml")}
        form = {"name": "camp", "instructions": "2", "target_kind": "model", "target_role": "target"}
        r = await lead.client.post("/lead/campaigns", data={**form, "csrf_token": lead.token}, files=files)
        assert r.status_code == 303, r.text[:300]
        await launch(lead, "camp")
        for name in ("writer", "holder", "intruder", "ann1", "ann2", "arb"):
            served.people[name] = await browser(app, name)
        writer, holder = served.people["writer"], served.people["holder"]
        for person in (writer, holder):
            tid = task_id((await person.post("/tasks/claim", {"kind": "red_team"})).headers["location"])
            await person.post(f"/tasks/{tid}/start")
            await person.post(f"/tasks/{tid}/begin", {"topic": f"Topic {HOSTILE}"})
            await person.follow(await person.post(f"/tasks/{tid}/message", {"text": f"Message {HOSTILE}"}))
            ids[(person is holder and "task") or "done"] = tid
        r = await writer.post(f"/tasks/{ids['done']}/finish", {"assigned_rule_broken": "yes"})
        assert r.status_code == 303, r.text[:300]
        served.ids = ids
        yield served
        for person in served.people.values():
            await person.aclose()


async def browser(app: FastAPI, username: str | None = None) -> Browser:
    """A browser on a name the machine faces answer too (a loopback server's ``localhost``)."""
    person = Browser(app, base_url=BASE)
    if username is None:
        await person.get("/login")
    else:
        assert (await person.login(username)).status_code == 303
    return person


def all_routes(app: FastAPI) -> list[APIRoute]:
    """Every API route the app serves, through included routers (FastAPI keeps them nested)."""
    found: list[APIRoute] = []

    def walk(routes: list[Any]) -> None:
        for route in routes:
            inner = getattr(route, "original_router", None)
            if inner is not None:
                assert not getattr(getattr(route, "include_context", None), "prefix", ""), "a prefix outside the router"
                walk(inner.routes)
            elif isinstance(route, APIRoute):
                found.append(route)

    walk(app.routes)
    return found


def role_of(route: APIRoute) -> str:
    """Who a route is for, from what it declares (its dependencies) or the face it belongs to."""
    roles: set[Any] = set()

    def walk(dependant: Any) -> None:
        for dep in dependant.dependencies:
            if dep.call in (require_lead, require_participant, require_login):
                roles.add(dep.call)
            walk(dep)

    walk(route.dependant)
    if route.path.startswith("/v1"):
        assert not roles, route.path
        return "api"
    if route.path in ("/healthz", "/metrics"):
        return "ops"
    if route.path in ("/", "/login", "/invite/{token}"):
        return "public"
    assert len(roles) == 1, f"{sorted(route.methods)} {route.path} declares no single role: {roles}"
    return {require_lead: "lead", require_participant: "participant", require_login: "login"}[roles.pop()]


def assert_safe_answer(r: httpx.Response, where: str, home: Path) -> None:
    """Security headers on the answer; no traceback, module path or server path in its body."""
    for name in SECURITY_HEADERS:
        assert name in r.headers, f"{where}: no {name}"
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"], where
    assert "access-control-allow-origin" not in r.headers, where
    text = r.text
    for leak in ("Traceback", 'File "', "site-packages", "psychoalign/", str(home.parent)):
        assert leak not in text, f"{where}: the body leaks {leak!r}"


def allowed(role: str, who: str, path: str) -> bool:
    """Whether ``who`` is a visitor the route is for (the task routes: the holder alone)."""
    if role in ("public", "ops"):
        return True
    if role == "login":
        return who != "anon"
    if role == "participant":
        return who == "holder" or (who == "intruder" and "{task_id}" not in path)
    return who == role


def fill(route: APIRoute, ids: dict[str, str]) -> str:
    values = {
        "task_id": ids["task"],
        "name": "camp",
        "token": "not-a-token",
        "participant_id": ids["pid:holder"],
        "account_id": ids["account:writer"],
        "trace_id": ids["trace"],
        "run_id": "no-such-run",
        "key": "no-such-cell",
        "path": "no-such-endpoint",  # the API's catch-all: OpenAI's 404 body for an unknown URL
    }
    return re.sub(r"{(\w+)(:\w+)?}", lambda m: values[m.group(1)], route.path)


async def test_every_route_of_every_face_answers_each_kind_of_visitor(served: Served) -> None:
    app, ids = served.app, served.ids
    anon = await browser(app)
    visitors = {"anon": anon, **{k: served.people[k] for k in ("intruder", "holder", "lead")}}
    routes = all_routes(app)
    assert len(routes) >= 55
    checked = 0
    for route in routes:
        role = role_of(route)
        path = fill(route, ids)
        for method in sorted(route.methods or ()):
            for who, client in visitors.items():
                if method not in ("GET", "HEAD") and allowed(role, who, route.path):
                    continue  # the allowed visitor's own POST changes things: test_csrf_* covers them
                where = f"{method} {route.path} as {who}"
                if method in ("GET", "HEAD"):  # HEAD answers as GET does, without a body
                    r = await client.client.request(method, path)
                else:
                    await client.get("/login" if who == "anon" else ("/lead" if who == "lead" else "/tasks"))
                    r = await client.client.post(path, data={"csrf_token": client.token or ""})
                assert_safe_answer(r, where, served.home)
                status, location = r.status_code, r.headers.get("location", "")
                if role == "api" and (route.path.endswith("{path:path}") or route.path == "/v1"):  # catch-all
                    assert status == 404 and r.headers["content-type"].startswith("application/json"), where
                elif role == "api":  # a session cookie never stands for an API key or the local token
                    assert status == 401, f"{where}: {status}"
                elif role == "ops":
                    assert status == 200, f"{where}: {status}"  # loopback: /healthz and /metrics
                elif role == "public":
                    assert status in (200, 303, 400, 401, 403, 404), f"{where}: {status}"
                elif who == "anon":
                    assert (status == 303 and location.startswith("/login")) or status == 403, f"{where}: {status}"
                elif (role == "lead" and who != "lead") or (role == "participant" and who == "lead"):
                    assert status == 403, f"{where}: {status}"
                elif role == "participant" and who == "intruder" and "{task_id}" in route.path:
                    assert status == 404, f"{where}: {status}"  # another's task: not even its existence
                    assert ids["task"] not in r.text and "Message PROBE" not in r.text, where
                else:  # the visitor the route is for
                    assert status < 400 or (status == 404 and route.path.startswith("/experiments/")), (
                        f"{where}: {status}"
                    )
                    assert not location.startswith("/login"), where
                checked += 1
    assert checked >= 180
    await anon.aclose()


async def test_every_kind_of_answer_carries_the_security_headers(served: Served) -> None:
    """The answers no route makes: the origin guard's refusals, the local token's exchange, 404 and
    405, /static, the A2A card, CORS preflights from a foreign page (refused, no CORS headers)."""
    transport = httpx.ASGITransport(app=served.app, client=("127.0.0.1", 4000))
    evil = {"origin": "https://evil.example"}
    requests: list[tuple[str, str, dict[str, str]]] = [
        ("GET", "/healthz", {}),
        ("GET", "/metrics", evil),
        ("GET", "/v1/models", {}),
        ("GET", "/v1/models", evil),
        ("GET", "/v1/models", {"host": "rebound.example"}),
        ("OPTIONS", "/v1/chat/completions", {**evil, "access-control-request-method": "POST"}),
        ("POST", "/v1/chat/completions", {"sec-fetch-site": "cross-site"}),
        ("GET", "/.well-known/agent-card.json", {}),
        ("POST", "/a2a/v1/message:send", evil),
        ("GET", f"/login?token={LOCAL_TOKEN}", {}),
        ("GET", "/login?token=wrong", {}),
        ("GET", "/no-such-page", {"accept": "text/html"}),
        ("GET", "/no-such-page", {}),
        ("DELETE", "/login", {}),
        ("GET", "/static/app.css", {}),
        ("GET", "/static/no-such.css", {}),
        ("POST", "/logout", {}),
    ]
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        for method, path, headers in requests:
            r = await client.request(method, path, headers=headers)
            assert_safe_answer(r, f"{method} {path} {headers}", served.home)
            assert "access-control-allow-credentials" not in r.headers
        plain = create_app(lab_settings(served.home), a2a=False, lab=False)  # no lab: /v1 alone
        bare = httpx.ASGITransport(app=plain, client=("127.0.0.1", 4000))
        async with httpx.AsyncClient(transport=bare, base_url=BASE) as alone:
            for path in ("/v1/models", "/healthz", "/nope"):
                assert_safe_answer(await alone.get(path), f"lab=False {path}", served.home)
            assert_safe_answer(await alone.get("/v1/models", headers=evil), "lab=False refusal", served.home)


async def test_the_experiment_viewers_refusals_carry_the_security_headers(tmp_path: Path) -> None:
    """``experiment view`` alone: its origin guard refuses a rebound host and a foreign page, and
    those refusals carry the headers its pages do."""
    from psychoalign.config import ServeSettings
    from psychoalign.experiments.harness.store import SQLResultStore
    from psychoalign.web.experiments import ExperimentSource, create_viewer_app

    url = f"sqlite+aiosqlite:///{tmp_path / 'runs.db'}"
    viewer = create_viewer_app(ExperimentSource(SQLResultStore(url), None), ServeSettings())
    async with viewer.router.lifespan_context(viewer):
        transport = httpx.ASGITransport(app=viewer, client=("127.0.0.1", 4000))
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
            for headers in ({"host": "rebound.example"}, {"origin": "https://evil.example"}, {}):
                r = await client.get("/experiments", headers=headers)
                assert r.status_code == (200 if not headers else 403), headers
                assert_safe_answer(r, f"viewer {headers}", tmp_path)


class DomCheck(HTMLParser):
    """What a browser would build from a page, checked as it is parsed: no event-handler attribute,
    no inline or foreign script, no raw direction control outside a form control's value, and
    every piece of text marked ``PROBE`` inside a direction-isolated element."""

    def __init__(self, where: str) -> None:
        super().__init__(convert_charrefs=True)
        self.where = where
        self.stack: list[tuple[str, bool]] = []
        self.found: list[str] = []
        self.probes = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name.startswith("on") or name in ("style", "srcdoc", "formaction"):
                self.found.append(f"<{tag} {name}=…>")
            if value and CONTROLS.search(value) and name != "value":
                self.found.append(f"a raw direction control in <{tag} {name}>")
            scheme = (value or "").strip().lower()
            if name in ("href", "src", "action") and scheme.startswith(("javascript:", "data:")) and value != "data:,":
                self.found.append(f"<{tag} {name}={scheme[:30]}>")  # data:, is the empty icon every page links
        named = dict(attrs)
        if tag in ("input", "textarea") and "PROBE" in (named.get("value") or ""):
            self.probes += 1
        shows_text = named.get("type") in (None, "text", "search")  # a number field drops non-numbers
        if tag == "input" and shows_text and "PROBE" in (named.get("value") or "") and named.get("dir") != "auto":
            self.found.append(f"a text field holding untrusted text without dir=auto: {named.get('name')}")
        if tag == "script" and not (named.get("src") or "").startswith("/static/"):
            self.found.append("a script not from /static")
        isolated = (self.stack[-1][1] if self.stack else False) or tag == "bdi" or named.get("dir") == "auto"
        if tag not in VOID:
            self.stack.append((tag, isolated))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        tag, isolated = self.stack[-1] if self.stack else ("", False)
        if tag == "textarea":  # a form control: its text cannot reorder the page around it
            if "PROBE" in data:
                self.probes += 1
                if not isolated:
                    self.found.append("a text area holding untrusted text without dir=auto")
            return
        if CONTROLS.search(data):
            self.found.append(f"a raw direction control in <{tag}>: {data[:40]!r}")
        if "PROBE" in data:
            self.probes += 1
            if not isolated and tag not in ("title", "option"):
                self.found.append(f"untrusted text not direction-isolated in <{tag}>: {data[:40]!r}")


def check_page(r: httpx.Response, where: str, home: Path) -> int:
    """The page's DOM checks (see :class:`DomCheck`); how many pieces of hostile text it shows."""
    assert_safe_answer(r, where, home)
    assert r.status_code < 500, f"{where}: {r.status_code}"
    if not r.headers.get("content-type", "").startswith("text/html"):
        return 0
    check = DomCheck(where)
    check.feed(r.text)
    assert not check.found, f"{where}: {check.found}"
    return check.probes


#: Every query parameter a page reads, each set to the hostile text.
HOSTILE_QUERY = dict.fromkeys(("msg", "q", "page", "next", "status", "conversation", "since", "tension_min"), HOSTILE)


async def test_hostile_text_is_escaped_and_isolated_on_every_page(served: Served) -> None:
    app, ids, home = served.app, served.ids, served.home
    lead, holder = served.people["lead"], served.people["holder"]
    shown: dict[str, int] = {}

    async def visit(person: Browser, path: str, name: str | None = None) -> str:
        for query in ({}, HOSTILE_QUERY):
            r = await person.client.get(path, params=query)
            shown[name or path] = shown.get(name or path, 0) + check_page(r, f"GET {path} {query and 'hostile'}", home)
        return r.text

    # the annotators' and the arbitrator's pages show the dialogue, then their reasons go in
    for name, kind, rating in (("ann1", "annotate", 1), ("ann2", "annotate", 4), ("arb", "arbitrate", 2)):
        person = served.people[name]
        r = await person.post("/tasks/claim", {"kind": kind})
        tid = task_id(r.headers["location"])
        check_page(await person.get(f"/tasks/{tid}"), f"{kind} warning", home)
        await person.post(f"/tasks/{tid}/start")
        await visit(person, f"/tasks/{tid}", kind)
        await person.post(f"/tasks/{tid}/draft", {"rating": str(rating), "text": f"Draft {HOSTILE}"})
        await visit(person, f"/tasks/{tid}", f"{kind} with draft")
        r = await person.post(f"/tasks/{tid}/rate", {"rating": str(rating), "reasoning": f"Reason {HOSTILE}"})
        assert r.status_code == 303, r.text[:300]
        await visit(person, "/tasks")
        await visit(person, "/profile")
    await visit(holder, f"/tasks/{ids['task']}", "red_team")
    for path in ("/lead", "/lead/campaigns/new", "/lead/campaigns/camp", "/lead/participants", "/traces"):
        await visit(lead, path)
    await visit(lead, f"/traces/{ids['trace']}", "trace")
    await visit(lead, "/experiments")
    for path in ("/lead/campaigns/no-such", f"/lead/campaigns/{HOSTILE[:40]}", "/experiments/" + HOSTILE[:40]):
        check_page(await lead.client.get(path), f"GET {path}", home)  # the error pages echo the name
    anon = await browser(app)
    await visit(anon, "/login")
    check_page(await anon.client.get(f"/invite/{HOSTILE[:40]}"), "invite", home)
    await anon.aclose()
    # the hostile text is on these pages (the checks above saw it), not merely absent
    for page in ("annotate", "arbitrate", "red_team", "/lead/campaigns/camp", "/lead/participants", "trace", "/traces"):
        assert shown.get(page, 0) > 0, (page, shown)


@pytest.mark.parametrize(
    ("html", "finding"),
    [
        ('<p><img src=x onerror="alert(1)"></p>', "onerror"),
        ("<p><script>alert(1)</script></p>", "script not from /static"),
        ('<a href="javascript:alert(1)">x</a>', "javascript:"),
        ("<p>Harmless \u202egnp.exe</p>", "raw direction control"),
        ("<td>PROBE text</td>", "not direction-isolated"),
        ('<input name="q" value="PROBE">', "without dir=auto"),
        ("<textarea>PROBE</textarea>", "without dir=auto"),
        ('<p title="a\u202eb">x</p>', "raw direction control"),
    ],
)
def test_the_dom_check_finds_what_it_looks_for(html: str, finding: str) -> None:
    check = DomCheck("sample")
    check.feed(html)
    assert any(finding in f for f in check.found), check.found


def test_the_dom_check_passes_isolated_text() -> None:
    check = DomCheck("sample")
    check.feed('<td><bdi dir="auto">PROBE</bdi></td><textarea dir="auto">PROBE\u202e</textarea><p dir="auto">PROBE</p>')
    assert not check.found and check.probes == 3


async def test_every_unsafe_route_refuses_a_forged_request(served: Served) -> None:
    """Each POST route, as the visitor it is for: no token, another session's token, a foreign
    Origin, a cross-site fetch, the token in a JSON body instead of the header: all 403, and
    nothing changed (the holder still holds the task and is logged in, the campaign is live, the
    login without a token did not log anyone in)."""
    app, ids = served.app, served.ids
    lead, holder, intruder = served.people["lead"], served.people["holder"], served.people["intruder"]
    anon, stranger = await browser(app), await browser(app)
    visitor = {"lead": lead, "participant": holder, "login": holder, "public": anon}
    foreign = {"lead": intruder, "participant": intruder, "login": intruder, "public": stranger}
    refused = 0
    for route in all_routes(app):
        role = role_of(route)
        if "POST" not in (route.methods or ()) or role in ("api", "ops"):
            continue
        path, client = fill(route, ids), visitor[role]
        await client.get("/login" if client is anon else ("/lead" if client is lead else "/tasks"))
        await foreign[role].get("/login" if role == "public" else "/tasks")
        form = {"username": "holder", "password": PASSWORD, "action": "pause", "kind": "red_team", "text": "x"}
        token = client.token or ""
        attempts: list[tuple[str, dict[str, Any]]] = [
            ("no token", {"data": form}),
            ("another session's token", {"data": {**form, "csrf_token": foreign[role].token}}),
            (
                "a foreign origin",
                {"data": {**form, "csrf_token": token}, "headers": {"origin": "https://evil.example"}},
            ),
            (
                "a cross-site fetch",
                {"data": {**form, "csrf_token": token}, "headers": {"sec-fetch-site": "cross-site"}},
            ),
            ("the token in a JSON body", {"json": {**form, "csrf_token": token}}),
            ("another session's token in the header", {"json": form, "headers": {"x-csrf-token": foreign[role].token}}),
            (  # the enctype a cross-site form may send without a preflight
                "the token in a text/plain body",
                {"content": f"csrf_token={token}", "headers": {"content-type": "text/plain"}},
            ),
        ]
        for what, kwargs in attempts:
            r = await client.client.post(path, **kwargs)
            where = f"POST {route.path} as {role} with {what}"
            assert_safe_answer(r, where, served.home)
            assert r.status_code == 403, f"{where}: {r.status_code} {r.headers.get('location')}"
            refused += 1
    assert refused >= 7 * 28
    assert (await holder.get(f"/tasks/{ids['task']}")).status_code == 200  # not skipped, paused, logged out
    assert (await lead.get("/lead/campaigns/camp")).status_code == 200
    assert await served.lab.store.campaign_status("camp") == "live"
    assert (await anon.client.get("/tasks")).headers["location"].startswith("/login")  # no forged login
    for person in (anon, stranger):
        await person.aclose()


FORMULAS = ("=cmd|' /C calc'!A0", "+SUM(1,1)", "-2+3", "@SUM(1)", "\t=1+1", "\r=1+1")


async def test_downloads_are_attachments_with_safe_names_and_inert_cells(served: Served) -> None:
    """Every download: an attachment with a plain file name, never sniffed; in a CSV no cell that
    a spreadsheet would run as a formula, though people and the target wrote formulas."""
    import csv
    import io

    app, star, ids = served.app, served.lab, served.ids
    lead = served.people["lead"]
    spreadsheet = await star.accounts.create_account(
        Role.PARTICIPANT, username="sheet", password=PASSWORD, display_name='=HYPERLINK("https://evil.example")'
    )
    await star.store.add_participants([Participant(id=spreadsheet.participant_id or "")])
    sheet = served.people["sheet"] = await browser(app, "sheet")
    holder = served.people["holder"]
    for text in FORMULAS:
        await holder.follow(await holder.post(f"/tasks/{ids['task']}/message", {"text": text}))
    await holder.post(f"/tasks/{ids['task']}/finish", {"assigned_rule_broken": "no"})
    for person, reasoning in ((sheet, FORMULAS[0]), (served.people["ann1"], FORMULAS[1])):
        claimed = await person.post("/tasks/claim", {"kind": "annotate"})
        tid = task_id(claimed.headers["location"])
        await person.post(f"/tasks/{tid}/start")  # a row in the time sheet
        r = await person.post(f"/tasks/{tid}/rate", {"rating": "2", "reasoning": reasoning})
        assert r.status_code == 303, r.text[:300]
    downloads = {
        "/lead/campaigns/camp/export?format=csv": "text/csv",
        "/lead/campaigns/camp/export?format=jsonl": "application/x-ndjson",
        "/lead/campaigns/camp/export?format=parquet": "application/vnd.apache.parquet",
        "/lead/campaigns/camp/time.csv": "text/csv",
        "/traces/export.jsonl": "application/x-ndjson",
        f"/traces/{ids['trace']}/export.json": "application/json",
    }
    cells = 0
    for path, media in downloads.items():
        r = await lead.client.get(path)
        assert_safe_answer(r, path, served.home)
        assert r.status_code == 200 and r.headers["content-type"].startswith(media), path
        assert r.headers["x-content-type-options"] == "nosniff" and r.headers["cache-control"] == "no-store"
        assert re.fullmatch(r'attachment; filename="[A-Za-z0-9][A-Za-z0-9._-]*"', r.headers["content-disposition"]), (
            path
        )
        if media == "text/csv":
            for row in csv.reader(io.StringIO(r.text)):
                for cell in row:
                    assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), (path, cell[:40])
                    cells += 1
    export = (await lead.client.get("/lead/campaigns/camp/export?format=csv")).text
    assert "'=cmd|" in export and "'+SUM(1,1)" in export  # kept, made inert
    assert "'=HYPERLINK" in (await lead.client.get("/lead/campaigns/camp/time.csv")).text
    assert cells > 20


async def test_a_nul_in_any_page_input_is_refused_in_one_line(served: Served) -> None:
    """The trace and experiment viewers' query parameters and paths (the lab's forms:
    tests/web/star/test_lab_nul.py, on PostgreSQL too)."""
    lead = served.people["lead"]
    for path in ("/traces?q=a%00b", "/traces?conversation=%00", "/experiments/a%00b", "/experiments?x%00=1"):
        r = await lead.client.get(path)
        assert_safe_answer(r, path, served.home)
        assert r.status_code == 400 and "contains a NUL character" in r.text, (path, r.status_code)


async def test_a_persona_runs_error_is_shown_isolated(served: Served) -> None:
    """The persona run's error names what failed, which may quote a model's or a provider's text."""
    from psychoalign.errors import PsychoAlignError

    async def fail() -> dict[str, int]:
        raise PsychoAlignError(f"provider said {HOSTILE}")

    job = served.lab.jobs["camp"] = asyncio.create_task(fail())
    with pytest.raises(PsychoAlignError):
        await job
    r = await served.people["lead"].client.get("/lead/campaigns/camp")
    assert check_page(r, "campaign with a failed persona run", served.home) > 0
    assert "the persona run stopped: provider said PROBE" in r.text.replace("&lt;", "<")


async def test_every_cookie_is_httponly_and_same_site(served: Served) -> None:
    """Each cookie the app sets on the way through login, a task's content warning, the local
    token's exchange (the token's cookie and the owner's session) and logout: HttpOnly, SameSite
    Lax or Strict, the whole site's path."""
    person = await browser(served.app)
    seen: list[str] = []

    def keep(r: httpx.Response) -> httpx.Response:
        seen.extend(r.headers.get_list("set-cookie"))
        return r

    keep(await person.client.get("/login"))
    r = keep(
        await person.client.post(
            "/login", data={"username": "intruder", "password": PASSWORD, "csrf_token": person.token}
        )
    )
    assert r.status_code == 303
    await person.get("/tasks")
    tid = task_id(keep(await person.post("/tasks/claim", {"kind": "annotate"})).headers["location"])
    keep(await person.post(f"/tasks/{tid}/start"))
    keep(await person.client.get(f"/login?token={LOCAL_TOKEN}"))  # the owner's session from here
    await person.get("/lead")
    keep(await person.post("/logout"))
    names = {c.split("=", 1)[0] for c in seen}
    assert {"psa_pre", "psa_session", "psa_known", "psa_warned", "psa_local_token"} <= names, names
    for cookie in seen:
        attributes = {a.strip().split("=", 1)[0].lower(): a.strip() for a in cookie.split(";")[1:]}
        if attributes.get("max-age") == "Max-Age=0":
            continue  # a deletion: nothing is stored
        assert "httponly" in attributes, cookie
        assert attributes.get("samesite", "").lower() in ("samesite=lax", "samesite=strict"), cookie
        assert attributes.get("path") == "Path=/", cookie
    await person.aclose()


async def test_the_experiment_pages_show_hostile_cells_inert(served: Served, tmp_path: Path) -> None:
    """A run whose every stored field holds markup and a bidi override (tests/web/test_experiments.py's
    seed), in the served app's own database: the run list, the cell list (with hostile filters)
    and the hostile cell pass the DOM checks."""
    from urllib.parse import quote

    from tests.web.test_experiments import EVIL_KEY, seed
    from tests.web.test_templating import shown_text

    run = await seed(f"sqlite+aiosqlite:///{tmp_path / 'app.db'}", plain=3)
    lead = served.people["lead"]
    pages = ["/experiments", f"/experiments/{run}", f"/experiments/{run}/cells/{quote(EVIL_KEY, safe='|/')}"]
    for path in pages:
        for query in ({}, dict.fromkeys(("q", "system", "benchmark", "status", "category", "page"), HOSTILE)):
            r = await lead.client.get(path, params=query)
            check_page(r, f"GET {path} {query and 'hostile'}", served.home)
    cell = await lead.client.get(pages[-1])
    assert cell.status_code == 200 and "⟨U+202E⟩gnp.exe" in shown_text(cell.text)  # there, and inert


async def test_head_answers_every_page_as_get_does_without_a_body(served: Served) -> None:
    """A route that declares GET alone answers HEAD with GET's status, redirect and headers, to
    every kind of visitor (the same sign-in and role checks), and no body."""
    app, ids = served.app, served.ids
    anon = await browser(app)
    visitors = {"anon": anon, **{k: served.people[k] for k in ("intruder", "holder", "lead")}}
    pages = [r for r in all_routes(app) if "GET" in (r.methods or ()) and "HEAD" not in (r.methods or ())]
    assert len(pages) >= 20
    checked = 0
    for route in pages:
        path = fill(route, ids)
        for who, client in visitors.items():
            get = await client.client.get(path)
            head = await client.client.head(path)
            where = f"HEAD {route.path} as {who}"
            assert head.status_code == get.status_code != 405, f"{where}: {head.status_code} vs GET {get.status_code}"
            assert head.headers.get("location") == get.headers.get("location"), where
            assert head.headers.get("content-type") == get.headers.get("content-type"), where
            assert head.content == b"", where
            for name in SECURITY_HEADERS:
                assert name in head.headers, f"{where}: no {name}"
            checked += 1
    assert checked >= 80
    await anon.aclose()


async def test_no_page_answers_a_cross_origin_preflight_even_with_cors_configured(served: Served) -> None:
    """A preflight and a simple request from another page's origin, to every route and method, as
    a signed-in lead: no ``Access-Control-*`` header on any page, whatever ``serve.cors_origins``
    lists (CORS is for the machine faces alone, and never with credentials); the faces answer the
    listed origin and refuse every other."""
    listed, evil = "https://app.example.org", "https://evil.example"
    settings = lab_settings(served.home, f"sqlite+aiosqlite:///{served.home.parent / 'cors.db'}")
    settings = settings.model_copy(update={"serve": settings.serve.model_copy(update={"cors_origins": [listed]})})
    app = create_app(settings, store=served.store, a2a=True, local_token=LOCAL_TOKEN)
    async with app.router.lifespan_context(app):
        await app.state.star_lab.accounts.create_account(Role.LEAD, username="lead", password=PASSWORD)
        lead = await browser(app, "lead")
        sent = 0
        for route in all_routes(app):
            path, face = fill(route, served.ids), face_of(route.path) is not None  # /v1, /metrics
            for method in sorted(route.methods or ()):
                for origin in (listed, evil):
                    preflight = {
                        "origin": origin,
                        "access-control-request-method": method,
                        "access-control-request-headers": "x-csrf-token, content-type",
                    }
                    for r in (
                        await lead.client.options(path, headers=preflight),
                        await lead.client.get(path, headers={"origin": origin}),
                    ):
                        where = f"{r.request.method} {route.path} ({method}) from {origin}"
                        cors = sorted(k for k in r.headers if k.startswith("access-control-"))
                        assert "access-control-allow-credentials" not in r.headers, where
                        if face and origin == listed:
                            assert r.headers.get("access-control-allow-origin") == listed, f"{where}: {cors}"
                        else:
                            assert not cors, f"{where}: {cors}"
                        sent += 1
        assert sent >= 4 * 60
        await lead.aclose()


async def test_error_pages_echo_hostile_input_inert(served: Served) -> None:
    """404, 405, 400 and 422 answers to hostile text in every path parameter of every route, in
    an unknown path, and in form fields that do not parse: each is a page with the security
    headers and a CSP, no traceback, and whatever of the input it echoes escaped and isolated."""
    from urllib.parse import quote

    lead, holder = served.people["lead"], served.people["holder"]
    hostile = quote(HOSTILE[:90], safe="")
    statuses: set[int] = set()
    checked = 0
    for route in all_routes(served.app):
        if "{" not in route.path:
            continue
        path = re.sub(r"{(\w+)(:\w+)?}", hostile, route.path)
        person = holder if role_of(route) == "participant" else lead
        for method in sorted(route.methods or ()):
            if method not in ("GET", "HEAD"):
                await person.get("/lead" if person is lead else "/tasks")
            kwargs: dict[str, Any] = {"headers": {"accept": "text/html"}}
            if method == "POST":
                kwargs["data"] = {"csrf_token": person.token or ""}
            r = await person.client.request(method, path, **kwargs)
            check_page(r, f"{method} {route.path} with hostile parameters", served.home)
            statuses.add(r.status_code)
            checked += 1
    for method in ("GET", "PUT", "PATCH", "DELETE"):  # an unknown page, and a known one's unserved methods
        for path in (f"/{hostile}", f"/tasks/{served.ids['task']}", f"/lead/campaigns/camp?x={hostile}"):
            r = await lead.client.request(method, path, headers={"accept": "text/html"})
            check_page(r, f"{method} {path}", served.home)
            assert "'unsafe-inline'" not in r.headers["content-security-policy"], f"{method} {path}"
            statuses.add(r.status_code)
    await holder.get(f"/tasks/{served.ids['task']}")
    for path, form in (  # form fields that do not parse: a page naming the field, the input inert
        ("/tasks/claim", {"kind": HOSTILE}),
        (f"/tasks/{served.ids['task']}/draft", {"rating": HOSTILE, "text": HOSTILE}),
    ):
        r = await holder.post(path, form)
        check_page(r, f"POST {path} {sorted(form)}", served.home)
        statuses.add(r.status_code)
    assert checked >= 30
    assert {404, 405} <= statuses and statuses & {400, 422}, statuses
