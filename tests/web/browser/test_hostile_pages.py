"""The page types the phone walk does not reach, each through axe-core in headless Chromium, with
hostile text in every untrusted field: the arbitration page (a dialogue and two annotators'
reasons), the lead's campaign and participants pages (people's names), the error pages (400, 403,
404, the static 500 page), the login page after a failed login and the trace list with a refused
filter. Nothing critical or serious, no page wider than a phone, no script or dialog ran."""

from __future__ import annotations

from typing import Any

import pytest

from psychoalign.web.app import _ERROR_PAGE
from tests.web.browser.conftest import Lab, run_async
from tests.web.browser.test_lab import Session
from tests.web.browser.test_phone import axe_source, check
from tests.web.star.test_lab import task_id
from tests.weblab import PASSWORD, Browser

pytestmark = pytest.mark.browser

#: Markup, an attribute breaker, a bidi override, an isolate and a zero-width space.
HOSTILE = "<script>alert(1)</script>\"onmouseover=alert(2) x='\u202eevil\u202c\u2067iso\u2069\u200b"


async def _seed(url: str) -> None:
    """Over HTTP, as people do: named participants, a live campaign, a red-teaming dialogue and
    two annotations that disagree (so an arbitration waits)."""
    lead = Browser(base_url=url)
    assert (await lead.login("lead")).status_code == 303
    await lead.get("/lead/participants")
    for name in ("writer", "ann1", "ann2", "arb"):
        data = {"display_name": f"{name} {HOSTILE}", "username": name, "password": PASSWORD, "role": "participant"}
        r = await lead.post("/lead/participants", data)
        assert r.status_code == 200, r.text[:300]
    await lead.get("/lead/campaigns/new")
    form = {"name": "hostile", "instructions": "1", "target_kind": "model", "rules": ["sexually-explicit"]}
    assert (await lead.post("/lead/campaigns", form)).status_code == 303
    r = await lead.post("/lead/campaigns/hostile/status", {"action": "launch", "areas_ok": "yes", "anyway": "yes"})
    assert r.status_code == 303, r.text[:300]
    people = {}
    for name in ("writer", "ann1", "ann2"):
        people[name] = Browser(base_url=url)
        assert (await people[name].login(name)).status_code == 303
    writer = people["writer"]
    tid = task_id((await writer.post("/tasks/claim", {"kind": "red_team"})).headers["location"])
    await writer.post(f"/tasks/{tid}/start")
    await writer.post(f"/tasks/{tid}/begin", {"topic": f"topic {HOSTILE}"})
    await writer.post(f"/tasks/{tid}/message", {"text": f"hello {HOSTILE}"})
    assert (await writer.post(f"/tasks/{tid}/finish", {"assigned_rule_broken": "yes"})).status_code == 303
    for name, rating in (("ann1", 1), ("ann2", 4)):
        person = people[name]
        tid = task_id((await person.post("/tasks/claim", {"kind": "annotate"})).headers["location"])
        await person.post(f"/tasks/{tid}/start")
        r = await person.post(f"/tasks/{tid}/rate", {"rating": str(rating), "reasoning": f"{name} says {HOSTILE}"})
        assert r.status_code == 303, r.text[:300]
    for person in (lead, *people.values()):
        await person.aclose()


def test_hostile_pages_and_error_pages_pass_axe(chromium: Any, live_lab: Lab) -> None:
    run_async(_seed(live_lab.url))
    axe = axe_source()
    found: list[str] = []
    dialogs: list[str] = []

    anon = Session(chromium, live_lab, dialogs)
    anon.page.goto("/login")
    anon.page.fill("input[name=username]", f"nobody {HOSTILE}")
    anon.page.fill("input[name=password]", "wrong password")
    anon.page.click("#login")
    anon.page.wait_for_selector("p.error")
    check(anon.page, axe, "login after a failed login", found)

    arb = Session(chromium, live_lab, dialogs)
    arb.login("arb")
    page = arb.page
    page.click("#claim-arbitrate")
    page.wait_for_selector("#content-warning")
    page.click("#start")
    page.wait_for_selector("#rating-form")
    assert "ann1 says" in page.inner_text("main") and "⟨U+202E⟩" in page.inner_text("main")
    page.fill("#reasoning", f"draft {HOSTILE}")
    check(page, axe, "arbitration", found)
    arb.shot("hostile-arbitration")
    page.goto("/lead")
    page.wait_for_selector("p.error")
    check(page, axe, "403 page", found)
    page.goto("/tasks/no-such-task")
    page.wait_for_selector("p.error")
    check(page, axe, "404 page", found)

    lead = Session(chromium, live_lab, dialogs)
    lead.login("lead")
    page = lead.page
    page.goto("/lead/campaigns/hostile")
    check(page, axe, "campaign with hostile names", found)
    page.goto("/lead/participants")
    check(page, axe, "participants with hostile names", found)
    lead.shot("hostile-participants")
    page.goto("/traces?tension_min=7")
    page.wait_for_selector("p.error")
    check(page, axe, "trace list with a refused filter", found)
    page.goto("/lead/campaigns/hostile/export?format=xml")
    page.wait_for_selector("p.error")
    check(page, axe, "400 page", found)
    # the static 500 page (the crash handler's: no template), as a browser gets it
    blank = lead.context.new_page()
    blank.goto("/static/app.css")  # same origin, so its stylesheet link loads
    blank.set_content(_ERROR_PAGE.format(message="internal error (request id 42); the server log has the details"))
    check(blank, axe, "500 page", found)

    assert found == []
    assert [d for d in dialogs if "alert" in d or "page error" in d] == [], dialogs
    for person in (anon, arb, lead):
        person.close()
