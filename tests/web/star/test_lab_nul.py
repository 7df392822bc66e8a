"""A NUL character in any of the lab's inputs (forms, paths, queries, uploaded files): refused
with 400 and a line naming the field, on SQLite and on PostgreSQL (whose text cannot hold a NUL:
it used to fail deep in a query, a 500); the session and the database go on working after."""

from __future__ import annotations

import httpx
from fastapi import FastAPI

from psychoalign.web.accounts import Role
from psychoalign.web.star import StarLab
from tests.web.star.test_lab import create_campaign, task_id
from tests.weblab import Browser, add_person

#: Every test runs on SQLite and PostgreSQL (the ``lab`` fixture, tests/web/star/conftest.py).
LAB_STORES = ("sqlite", "postgres")


def refused(r: httpx.Response, where: str) -> None:
    assert r.status_code == 400, f"{where}: {r.status_code}"
    assert "contains a NUL character" in r.text, f"{where}: {r.text[:200]}"


async def test_a_nul_anywhere_is_refused_and_nothing_breaks(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    person = await add_person(star, "p")
    anon = Browser(app)
    await anon.get("/login")
    refused(await anon.post("/login", {"username": "p\x00", "password": "x"}), "login")
    lead, p = Browser(app), Browser(app)
    assert (await lead.login("lead")).status_code == 303 and (await p.login("p")).status_code == 303
    await create_campaign(lead, "c", ["sexually-explicit"], n=1)
    tid = task_id((await p.post("/tasks/claim", {"kind": "red_team"})).headers["location"])
    await p.post(f"/tasks/{tid}/start")
    refused(await p.post(f"/tasks/{tid}/begin", {"topic": "t\x00"}), "topic")
    await p.post(f"/tasks/{tid}/begin", {"topic": "files"})
    for path, data in (
        (f"/tasks/{tid}/message", {"text": "he\x00llo"}),
        (f"/tasks/{tid}/draft", {"text": "dr\x00aft"}),
        ("/profile", {"race": "x\x00"}),
    ):
        refused(await p.post(path, data), path)
    refused(await p.client.get("/tasks/a%00b"), "a task id")
    pid = person.participant_id or ""
    await lead.get("/lead/participants")
    for path, data in (
        ("/lead/participants", {"display_name": "N\x00", "roles": ["annotator"]}),
        ("/lead/campaigns/c/members", {"participant_ids": "a\x00"}),
        ("/lead/campaigns/c/members/a%00b/remove", {}),
        ("/lead/accounts/a%00b/unlock", {}),
        (f"/lead/participants/{pid}/roles", {"roles": "annot\x00ator"}),
    ):
        refused(await lead.post(path, data), path)
    refused(await lead.client.get("/lead/campaigns/c%00"), "a campaign name")
    refused(await lead.client.get("/lead/campaigns/c?msg=%00"), "a query parameter")
    r = await lead.client.post(
        "/lead/participants/import",
        data={"csrf_token": lead.token},
        files={"file": ("people.jsonl", b'{"display_name": "a\\u0000b"}\n', "application/jsonl")},
    )
    assert r.status_code == 400 and "NUL character" in r.text, r.text[:300]
    r = await lead.client.post(
        "/lead/participants/import",
        data={"csrf_token": lead.token},
        files={"file": ("people.jsonl", b'{"display_name": "a\x00b"}\n', "application/jsonl")},
    )
    assert r.status_code == 400 and "contains a NUL character" in r.text, r.text[:300]
    # the same session and database go on: a message is sent, the lead's pages open
    r = await p.post(f"/tasks/{tid}/message", {"text": "hello"})
    assert r.status_code == 303, r.text[:300]
    assert (await lead.get("/lead/campaigns/c")).status_code == 200
    assert len(await star.accounts.list_accounts(Role.PARTICIPANT)) == 1  # nothing half-imported
    for b in (anon, lead, p):
        await b.aclose()
