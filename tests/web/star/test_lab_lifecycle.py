"""The campaign lifecycle through the lab's pages, on SQLite and PostgreSQL: the lead pauses,
resumes and closes (CSRF, confirmation, lead only), participants get no new task of a paused
campaign but finish the one they hold, and a submission to a closed campaign is refused with a
page that says why."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fastapi import FastAPI

from psychoalign.web.accounts import Role
from psychoalign.web.star import StarLab
from tests.web.star.test_lab import browser, create_campaign, launch, task_id
from tests.weblab import PASSWORD, Browser, add_person

ROLES = ["red_teamer", "annotator", "arbitrator"]


#: Every test runs on SQLite and PostgreSQL (the ``lab`` fixture, tests/web/star/conftest.py).
LAB_STORES = ("sqlite", "postgres")


async def start_red_teaming(b: Browser) -> str:
    r = await b.post("/tasks/claim", {"kind": "red_team"})
    assert "/tasks/" in r.headers["location"] and "msg" not in r.headers["location"], r.headers["location"]
    tid = task_id(r.headers["location"])
    await b.follow(await b.post(f"/tasks/{tid}/start"))
    await b.follow(await b.post(f"/tasks/{tid}/begin", {"topic": "travel"}))
    page = await b.follow(await b.post(f"/tasks/{tid}/message", {"text": "hello"}))
    assert page.status_code == 200
    return tid


def hold_target_reply(star: StarLab, monkeypatch: pytest.MonkeyPatch) -> tuple[asyncio.Event, asyncio.Event]:
    """The target's next replies wait mid-answer: ``answering`` is set once one has started,
    and each goes on (and is stored as usual) only once ``release`` is set."""
    answering, release = asyncio.Event(), asyncio.Event()
    original = star.reply

    async def slow_reply(campaign: Any, turns: Any) -> Any:
        answering.set()
        await release.wait()
        return await original(campaign, turns)

    monkeypatch.setattr(star, "reply", slow_reply)
    return answering, release


async def test_pause_resume_close_through_the_pages(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    accounts = {name: await add_person(star, name, roles=ROLES) for name in ("ann", "bob", "cat")}
    lead = await browser(app, "lead")
    ann, bob, cat = [await browser(app, n) for n in ("ann", "bob", "cat")]
    await create_campaign(lead, "life", ["sexually-explicit"], n=3)
    page = await lead.get("/lead/campaigns/life")
    assert 'id="campaign-status">live<' in page.text and 'id="pause-campaign"' in page.text

    held = await start_red_teaming(ann)  # held before the pause: may be finished

    # only a lead changes the status, and only with the session's CSRF token
    await bob.get("/tasks")
    r = await bob.post("/lead/campaigns/life/status", {"action": "pause"})
    assert r.status_code == 403
    r = await lead.client.post("/lead/campaigns/life/status", data={"action": "pause"})
    assert r.status_code == 403
    r = await lead.client.post("/lead/campaigns/life/status", data={"action": "pause", "csrf_token": bob.token})
    assert r.status_code == 403  # another session's token
    assert await star.store.campaign_status("life") == "live"
    await lead.get("/lead/campaigns/life")
    assert (await lead.post("/lead/campaigns/life/status", {"action": "archive"})).status_code == 400

    page = await lead.follow(await lead.post("/lead/campaigns/life/status", {"action": "pause"}))
    assert 'id="campaign-status">paused<' in page.text and 'id="resume-campaign"' in page.text
    assert 'id="not-open"' in page.text and 'id="mix-personas"' not in page.text
    assert "The campaign is paused" in page.text
    home = await lead.get("/lead")
    assert '<td class="campaign-status">paused</td>' in home.text
    # no new claim from the paused campaign
    r = await bob.post("/tasks/claim", {"kind": "red_team"})
    assert r.headers["location"] == "/tasks?msg=no_task"
    # personas do not run on it
    await lead.get("/lead/campaigns/life")
    assert (await lead.post("/lead/campaigns/life/personas", {"max_tasks": "5"})).status_code == 409
    # the held task is finished and submitted
    r = await ann.post(f"/tasks/{held}/finish", {"assigned_rule_broken": "yes"})
    assert r.status_code == 303 and "msg=submitted" in r.headers["location"]

    page = await lead.follow(await lead.post("/lead/campaigns/life/status", {"action": "resume"}))
    assert 'id="campaign-status">live<' in page.text
    r = await bob.post("/tasks/claim", {"kind": "annotate"})
    annotation = task_id(r.headers["location"])
    await bob.follow(await bob.post(f"/tasks/{annotation}/start"))
    cat_task = await start_red_teaming(cat)

    # closing needs the confirmation box; without it nothing changes
    await lead.get("/lead/campaigns/life")
    r = await lead.post("/lead/campaigns/life/status", {"action": "close"})
    assert r.status_code == 400 and "tick the box" in r.text
    assert await star.store.campaign_status("life") == "live"
    await lead.get("/lead/campaigns/life")
    page = await lead.follow(await lead.post("/lead/campaigns/life/status", {"action": "close", "confirm": "yes"}))
    assert 'id="campaign-status">closed<' in page.text and 'id="close-campaign"' not in page.text
    assert await star.store.claimed_tasks(accounts["bob"].participant_id or "") == []  # released

    # the holders' submissions are refused with a page saying why; the clocks stopped
    r = await bob.post(f"/tasks/{annotation}/rate", {"rating": "2", "reasoning": "probably broke it"})
    assert r.status_code == 409 and "was closed by its lead" in r.text and "life" in r.text
    r = await cat.post(f"/tasks/{cat_task}/message", {"text": "more"})
    assert r.status_code == 409 and "was closed by its lead" in r.text
    times = {t["task_id"]: t for t in await star.lab.times("life")}
    assert times[annotation]["running"] is False and times[cat_task]["running"] is False
    # anyone else asking about the task learns nothing
    r = await ann.post(f"/tasks/{annotation}/rate", {"rating": "2", "reasoning": "x"})
    assert r.status_code == 404 and "closed" not in r.text
    # final: no resume, no new claims
    await lead.get("/lead/campaigns/life")
    assert (await lead.post("/lead/campaigns/life/status", {"action": "resume"})).status_code == 409
    assert (await bob.post("/tasks/claim", {"kind": "annotate"})).headers["location"] == "/tasks?msg=no_task"
    for b in (lead, ann, bob, cat):
        await b.aclose()


async def test_members_only_campaign_through_the_pages(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    accounts = {name: await add_person(star, name, roles=ROLES) for name in ("ann", "bob")}
    ann_pid, bob_pid = (accounts[n].participant_id or "" for n in ("ann", "bob"))
    lead = await browser(app, "lead")
    ann, bob = await browser(app, "ann"), await browser(app, "bob")
    await lead.get("/lead/campaigns/new")
    r = await lead.post(
        "/lead/campaigns",
        {
            "name": "club",
            "instructions": "2",
            "target_kind": "model",
            "rules": ["sexually-explicit"],
            "members_only": "on",
        },
    )
    assert r.status_code == 303
    await launch(lead, "club")
    page = await lead.get("/lead/campaigns/club")
    assert 'id="open-to-all"' in page.text and f'value="{ann_pid}"' in page.text  # ann offered for adding
    assert "is a member of the campaign" in page.text  # the shortfall says why nobody takes it
    assert (await ann.post("/tasks/claim", {"kind": "red_team"})).headers["location"] == "/tasks?msg=no_task"

    # lead only, CSRF required
    await bob.get("/tasks")
    assert (await bob.post("/lead/campaigns/club/members", {"participant_ids": [bob_pid]})).status_code == 403
    r = await lead.client.post("/lead/campaigns/club/members", data={"participant_ids": [bob_pid]})
    assert r.status_code == 403
    assert await star.store.members("club") == []
    await lead.get("/lead/campaigns/club")
    bad = await lead.post("/lead/campaigns/club/members", {"participant_ids": ["p-nobody", bob_pid, "<b>x</b>"]})
    assert bad.status_code == 400
    # a plain, escaped list of the unknown ones (not a Python list repr); nobody was added
    assert "unknown participants &lt;b&gt;x&lt;/b&gt;, p-nobody; nobody was added" in bad.text, bad.text[-600:]
    assert "[" not in bad.text.split("unknown participants")[1].split(";")[0] and "<b>x" not in bad.text
    assert await star.store.members("club") == []

    await lead.get("/lead/campaigns/club")
    page = await lead.follow(await lead.post("/lead/campaigns/club/members", {"participant_ids": [ann_pid]}))
    assert 'id="member-list"' in page.text and f"<code>{ann_pid}</code>" in page.text
    r = await ann.post("/tasks/claim", {"kind": "red_team"})
    assert "/tasks/" in r.headers["location"] and "msg" not in r.headers["location"]
    held = r.headers["location"].rsplit("/", 1)[-1]
    assert (await bob.post("/tasks/claim", {"kind": "red_team"})).headers["location"] == "/tasks?msg=no_task"

    # removing ann releases her task; opening the campaign to all lets bob in
    await lead.get("/lead/campaigns/club")
    r = await lead.post(f"/lead/campaigns/club/members/{ann_pid}/remove")
    assert r.status_code == 303 and await star.store.members("club") == []
    assert await star.store.claimed_tasks(ann_pid) == []
    # removing her again, or someone who never was a member, is a 404 saying so, not "removed"
    for nobody in (ann_pid, "p-nobody", "<b>lead"):
        await lead.get("/lead/campaigns/club")
        r = await lead.post(f"/lead/campaigns/club/members/{nobody}/remove")
        assert r.status_code == 404 and "is not a member of campaign" in r.text, r.text[:300]
        assert "<b>lead" not in r.text and "Removed from the campaign" not in r.text
    assert (await ann.get(f"/tasks/{held}")).status_code == 404
    await lead.get("/lead/campaigns/club")
    page = await lead.follow(await lead.post("/lead/campaigns/club/access", {"members_only": "off"}))
    assert 'id="members-only"' in page.text
    r = await bob.post("/tasks/claim", {"kind": "red_team"})
    assert "/tasks/" in r.headers["location"] and "msg" not in r.headers["location"]
    for b in (lead, ann, bob):
        await b.aclose()


async def test_closing_while_the_target_answers_stores_neither_the_message_nor_the_reply(
    lab: tuple[FastAPI, StarLab], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A red teamer's message is in flight (the target answering) when the lead closes the
    campaign: the sender gets the page saying the campaign was closed, the dialogue keeps only
    the turns stored before, and the task is released with its clock stopped."""
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    ann_account = await add_person(star, "ann", roles=ROLES)
    lead, ann = await browser(app, "lead"), await browser(app, "ann")
    await create_campaign(lead, "midturn", ["sexually-explicit"], n=1)
    tid = await start_red_teaming(ann)  # one exchange stored
    dialogue = await star.store.dialogue_of_task(tid)
    assert dialogue is not None
    before = await star.store.dialogue_turns(dialogue)
    answering, release = hold_target_reply(star, monkeypatch)
    sending = asyncio.create_task(ann.post(f"/tasks/{tid}/message", {"text": "and now?"}))
    await answering.wait()
    await lead.get("/lead/campaigns/midturn")
    r = await lead.post("/lead/campaigns/midturn/status", {"action": "close", "confirm": "yes"})
    assert r.status_code == 303
    release.set()
    r = await sending
    assert r.status_code == 409 and "was closed by its lead" in r.text and "not stored" in r.text
    assert await star.store.dialogue_turns(dialogue) == before
    assert await star.store.claimed_tasks(ann_account.participant_id or "") == []
    times = {t["task_id"]: t for t in await star.lab.times("midturn")}
    assert times[tid]["running"] is False
    await lead.aclose()
    await ann.aclose()


async def test_removing_a_member_while_the_target_answers_stores_nothing_and_says_why(
    lab: tuple[FastAPI, StarLab], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lead removes a red teamer from a members-only campaign while the target answers their
    message: their task is released, the message and reply are not stored, and the page says so
    in words (it showed "dialogue '<id>' is not in progress (abandoned)")."""
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    ann_account = await add_person(star, "ann", roles=ROLES)
    ann_pid = ann_account.participant_id or ""
    lead, ann = await browser(app, "lead"), await browser(app, "ann")
    await lead.get("/lead/campaigns/new")
    form = {"name": "club2", "instructions": "1", "rules": ["sexually-explicit"], "members_only": "on"}
    assert (await lead.post("/lead/campaigns", form)).status_code == 303
    await launch(lead, "club2")
    await lead.get("/lead/campaigns/club2")
    assert (await lead.post("/lead/campaigns/club2/members", {"participant_ids": [ann_pid]})).status_code == 303
    tid = await start_red_teaming(ann)
    dialogue = await star.store.dialogue_of_task(tid)
    assert dialogue is not None
    before = await star.store.dialogue_turns(dialogue)
    answering, release = hold_target_reply(star, monkeypatch)
    sending = asyncio.create_task(ann.post(f"/tasks/{tid}/message", {"text": "and now?"}))
    await answering.wait()
    await lead.get("/lead/campaigns/club2")
    assert (await lead.post(f"/lead/campaigns/club2/members/{ann_pid}/remove")).status_code == 303
    release.set()
    r = await sending
    # said in words, not as "dialogue '<id>' is not in progress (abandoned)"
    assert r.status_code == 409 and "This task was released while the model was answering" in r.text
    assert "not stored" in r.text and dialogue not in r.text and "abandoned" not in r.text
    assert await star.store.dialogue_turns(dialogue) == before
    assert await star.store.claimed_tasks(ann_pid) == []
    await lead.aclose()
    await ann.aclose()


async def test_a_form_sent_after_the_session_ended_returns_to_its_page_after_login(
    lab: tuple[FastAPI, StarLab],
) -> None:
    """The lead's session ends while the campaign page is open; they click Pause: the login
    page leads back to the campaign page, not to the POST-only action (a 405 page before)."""
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    lead = await browser(app, "lead")
    await create_campaign(lead, "gone", ["sexually-explicit"], n=1)
    await lead.get("/lead/campaigns/gone")
    await lead.post("/logout")
    anon = Browser(app)
    await anon.get("/login")
    for action, page in (
        ("/lead/campaigns/gone/status", "/lead/campaigns/gone"),
        ("/lead/campaigns/gone/members/p-x/remove", "/lead/campaigns/gone"),
        ("/tasks/claim", "/tasks"),
        ("/lead/participants/import", "/lead/participants"),
    ):
        r = await anon.post(action, {"action": "pause"})
        assert (r.status_code, r.headers["location"]) == (303, f"/login?next={page}"), action
    r = await anon.get("/lead/campaigns/gone")  # a page keeps its own address, query included
    assert r.headers["location"] == "/login?next=/lead/campaigns/gone"
    await anon.get("/login?next=/lead/campaigns/gone")
    r = await anon.post("/login", {"username": "lead", "password": PASSWORD, "next": "/lead/campaigns/gone"})
    page = await anon.follow(r)
    assert page.status_code == 200 and 'id="campaign-status">live<' in page.text
    assert await star.store.campaign_status("gone") == "live"  # the lost click changed nothing
    await lead.aclose()
    await anon.aclose()
