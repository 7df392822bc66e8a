"""Annotation at speed and without loss, through the ASGI client: submit & next, the content
warning once per session per rule and target group, the progress line and no dead-end button,
server-side drafts that survive a reload and an ended session, and over-long text refused with
its length named and kept as the draft (never cut)."""

from __future__ import annotations

import html
import re

from fastapi import FastAPI

from psychoalign.web.accounts import Role
from psychoalign.web.star import StarLab
from tests.web.star.test_lab import browser, create_campaign, red_team, task_id
from tests.weblab import PASSWORD, Browser, add_person


def progress(page: str) -> str:
    """The progress line's text, tags dropped."""
    found = re.search(r'<p id="progress-line">(.*?)</p>', page, re.S)
    assert found is not None
    return " ".join(re.sub(r"<[^>]+>", "", found.group(1)).split())


async def two_dialogues(app: FastAPI, star: StarLab) -> Browser:
    """A campaign of one rule with two finished dialogues and one instruction left; returns the lead's client."""
    await add_person(star, "lead", Role.LEAD)
    for name in ("red", "ann", "other"):
        await add_person(star, name)
    lead = await browser(app, "lead")
    await create_campaign(lead, "fast", ["sexually-explicit"], n=3)  # one instruction stays for red teaming
    red = await browser(app, "red")
    for _ in range(2):
        await red_team(red, ["hello"])
    await red.aclose()
    return lead


async def test_submit_and_next_with_the_warning_once_per_rule(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    lead = await two_dialogues(app, star)
    ann = await browser(app, "ann")
    tasks = (await ann.get("/tasks")).text
    assert "Done today: 0 red-teaming dialogues · 0 annotations · 0 arbitrations." in progress(tasks)
    assert "Available to you now: 1 red-teaming dialogue · 2 annotations · 0 arbitrations." in progress(tasks)
    r = await ann.post("/tasks/claim", {"kind": "annotate"})
    first = task_id(r.headers["location"])
    warning = (await ann.follow(r)).text
    assert 'id="content-warning"' in warning and "sexually explicit" in warning.lower()  # names the rule
    await ann.post(f"/tasks/{first}/start")
    page = (await ann.get(f"/tasks/{first}")).text
    assert 'id="submit-next"' in page and "maxlength" not in page and 'data-max="4000"' in page
    r = await ann.post(f"/tasks/{first}/rate", {"rating": "2", "reasoning": "It went along.", "next": "1"})
    second = task_id(r.headers["location"])
    assert r.status_code == 303 and second != first
    page = (await ann.get(f"/tasks/{second}")).text  # same rule: straight into the task, no warning
    assert 'id="rating-form"' in page and 'id="content-warning"' not in page
    r = await ann.post(f"/tasks/{second}/rate", {"rating": "4", "reasoning": "It refused.", "next": "1"})
    assert r.headers["location"] == "/tasks?msg=submitted_none"
    tasks = (await ann.get(r.headers["location"])).text
    assert "No further task of that kind is available" in tasks
    assert "0 red-teaming dialogues · 2 annotations · 0 arbitrations." in progress(tasks)
    assert 'id="claim-annotate"' not in tasks and 'id="none-annotate"' in tasks  # no dead-end button
    # the warnings read end with the session
    r = await ann.post("/logout")
    assert any(c.startswith("psa_warned=") for c in r.headers.get_list("set-cookie"))
    for person in (lead, ann):
        await person.aclose()


async def test_a_draft_survives_a_reload_and_an_ended_session(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    lead = await two_dialogues(app, star)
    ann = await browser(app, "ann")
    r = await ann.post("/tasks/claim", {"kind": "annotate"})
    tid = task_id(r.headers["location"])
    await ann.post(f"/tasks/{tid}/start")
    await ann.get(f"/tasks/{tid}")
    saved = await ann.post(f"/tasks/{tid}/draft", {"rating": "3", "text": "Half a thought <b>so far</b>"})
    assert saved.status_code == 200 and saved.json()["length"] == len("Half a thought <b>so far</b>")
    page = (await ann.get(f"/tasks/{tid}")).text  # a reload
    assert ">Half a thought &lt;b&gt;so far&lt;/b&gt;</textarea>" in page
    assert re.search(r'id="rating-3" checked', page) and "Draft restored" in page
    # nobody else reaches the draft
    other = await browser(app, "other")
    assert (await other.post(f"/tasks/{tid}/draft", {"text": "mine now"})).status_code == 404
    # logged out in another tab: the form's submit leads to login and back to the task, draft kept
    token = ann.token
    await ann.post("/logout")
    r = await ann.client.post(f"/tasks/{tid}/rate", data={"csrf_token": token, "rating": "3", "reasoning": "x"})
    assert r.status_code == 303 and r.headers["location"] == f"/login?next=/tasks/{tid}"
    await ann.get("/login")
    r = await ann.post("/login", {"username": "ann", "password": PASSWORD, "next": f"/tasks/{tid}"})
    assert r.status_code == 303 and r.headers["location"] == f"/tasks/{tid}"
    page = (await ann.get(r.headers["location"])).text
    assert "Half a thought &lt;b&gt;so far&lt;/b&gt;</textarea>" in page
    # submitted: the draft is gone
    await ann.post(f"/tasks/{tid}/rate", {"rating": "3", "reasoning": "A whole thought."})
    assert await star.lab.draft(tid, (await star.accounts.list_accounts())[0].participant_id or "") is None
    for person in (lead, ann, other):
        await person.aclose()


async def test_over_long_text_is_refused_with_its_length_and_kept(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    lead = await two_dialogues(app, star)
    ann = await browser(app, "ann")
    r = await ann.post("/tasks/claim", {"kind": "annotate"})
    tid = task_id(r.headers["location"])
    await ann.post(f"/tasks/{tid}/start")
    await ann.get(f"/tasks/{tid}")
    long = "because " * 530  # 4,240 characters, 4,239 once stripped
    r = await ann.post(f"/tasks/{tid}/rate", {"rating": "1", "reasoning": long})
    assert r.status_code == 400
    text = html.unescape(r.text)
    assert "Your reasoning is 4,239 characters long; the limit is 4,000." in text
    assert "shorten it by 239 characters" in text and f'href="/tasks/{tid}"' in r.text
    page = (await ann.get(f"/tasks/{tid}")).text
    assert long.strip() + "</textarea>" in page  # every character kept, nothing submitted
    assert (await star.store.task(tid)).status.value == "claimed"
    # a red teamer's message over 8,000 characters: refused with its length, kept as the draft, not sent
    red = await browser(app, "other")
    r = await red.post("/tasks/claim", {"kind": "red_team"})
    rid = task_id(r.headers["location"])
    await red.post(f"/tasks/{rid}/start")
    await red.follow(await red.post(f"/tasks/{rid}/begin", {"topic": "long letters"}))
    letter = "Dear model, " + "a" * 8000
    r = await red.post(f"/tasks/{rid}/message", {"text": letter})
    assert r.status_code == 400 and "Your message is 8,012 characters long; the limit is 8,000." in html.unescape(
        r.text
    )
    page = (await red.get(f"/tasks/{rid}")).text
    assert letter + "</textarea>" in page and "0 messages sent" in page
    for person in (lead, ann, red):
        await person.aclose()
