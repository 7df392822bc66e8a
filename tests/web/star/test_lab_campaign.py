"""A lead's real campaign through the ASGI client: what a first run with humans showed (uploaded
parameter spaces, every expertise, skip and pause as people use them, shortfall in people, time
per task, the report's rater groups, CSV for spreadsheets, the coverage map, account upkeep)."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import timedelta
from pathlib import Path
from typing import get_args

import pytest
from fastapi import FastAPI

from psychoalign.star.model import TaskKind
from psychoalign.star.policy import Matching
from psychoalign.star.store import ClaimError
from psychoalign.web.accounts import Role
from psychoalign.web.star import StarLab
from tests.web.star.test_lab import browser, create_campaign, launch, rate, red_team, task_id
from tests.weblab import PASSWORD, Browser, add_person, lab_app, lab_settings


async def upload_campaign(lead: Browser, name: str, policy: str, parameters: str | None = None, n: int = 2) -> None:
    await lead.get("/lead/campaigns/new")
    files = {"policy_file": ("policy.yaml", policy.encode(), "application/x-yaml")}
    if parameters is not None:
        files["parameters_file"] = ("parameters.yaml", parameters.encode(), "application/x-yaml")
    r = await lead.client.post(
        "/lead/campaigns",
        data={
            "name": name,
            "instructions": str(n),
            "target_kind": "model",
            "target_role": "target",
            "csrf_token": lead.token,
        },
        files=files,
    )
    assert r.status_code == 303, r.text[:500]
    await launch(lead, name)


POLICY = """
name: uploaded
version: "1.0"
areas:
  - id: a
    text: An area
    rules:
      - id: scams
        text: Helping with scams.
        parameters:
          - name: scam_kind
            values: [romance scam]
"""
#: A parameter space without a topic (the built-in one has it; an uploaded one need not).
NO_TOPIC = """
version: "1.0.0"
max_parameters: 5
parameters:
  - name: adversariality
    values: [high]
"""


async def test_uploaded_parameter_space_without_topic_and_every_parameter_listed(
    lab: tuple[FastAPI, StarLab],
) -> None:
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    await add_person(star, "a")
    lead = await browser(app, "lead")
    await upload_campaign(lead, "up", POLICY, NO_TOPIC, n=1)
    a = await browser(app, "a")
    tid = task_id((await a.post("/tasks/claim", {"kind": "red_team"})).headers["location"])
    await a.post(f"/tasks/{tid}/start")
    page = await a.get(f"/tasks/{tid}")
    assert page.status_code == 200, page.text[:300]
    params = re.search(r'<dl class="param-list">(.*?)</dl>', page.text, re.S)
    assert params is not None
    listed = re.sub(r"<(?!/?d[td]>)[^>]*>", "", params.group(1))  # the dt/dd pairs, without the <bdi> isolation
    assert "<dt>Scam kind</dt><dd>romance scam</dd>" in listed  # the rule's own parameter
    assert "<dt>Adversariality</dt><dd>high</dd>" in listed and "Topic" not in listed
    await a.follow(await a.post(f"/tasks/{tid}/begin", {"topic": "dating apps"}))
    assert (await a.follow(await a.post(f"/tasks/{tid}/message", {"text": "hello"}))).status_code == 200


async def test_every_expertise_a_rule_can_require_can_be_declared(lab: tuple[FastAPI, StarLab]) -> None:
    """Legal and financial rules need legal and financial experts: people must be able to say so."""
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    for name in ("a", "b", "c"):
        await add_person(star, name)
    lead = await browser(app, "lead")
    await create_campaign(lead, "legal", ["legal-advice"], n=1)
    a = await browser(app, "a")
    await red_team(a, ["my landlord kept my deposit, what do I file?"])
    page = (await lead.get("/lead/campaigns/legal")).text
    assert "no annotator with legal expertise" in page
    b, c = await browser(app, "b"), await browser(app, "c")
    profile = (await b.get("/profile")).text
    for matching in get_args(Matching):
        if matching not in ("none", "demographic"):
            assert f'name="expertise" value="{matching}"' in profile, matching
    for person in (b, c):
        await person.get("/profile")
        await person.post("/profile", {"expertise": ["legal", "financial"]})
    b_account = await star.accounts.authenticate("b", PASSWORD)
    assert b_account is not None
    assert (await star.store.participant(b_account.participant_id or "")).expertise == ["legal", "financial"]
    await rate(b, "annotate", 2, "It named a form without knowing the jurisdiction.")
    await rate(c, "annotate", 3, "General information only.")
    row = (await star.store.export_rows("legal"))[0]
    assert (row["annotator1_rating"], row["annotator2_rating"]) == (2, 3)


async def test_a_skipped_task_is_not_offered_again(lab: tuple[FastAPI, StarLab]) -> None:
    """Skip means "not this one": the next claim gives another task, never the same instruction
    (started and abandoned, or not), and when only skipped ones are left the lead sees why."""
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    await add_person(star, "a")
    await add_person(star, "b")
    lead = await browser(app, "lead")
    await create_campaign(lead, "s", ["sexually-explicit"], n=2)
    a = await browser(app, "a")
    first = task_id((await a.post("/tasks/claim", {"kind": "red_team"})).headers["location"])
    await a.post(f"/tasks/{first}/skip")
    r = await a.post("/tasks/claim", {"kind": "red_team"})
    second = task_id(r.headers["location"])
    assert second != first and "msg" not in r.headers["location"]
    # the second one is started, then abandoned: its replacement is not offered to a either
    await a.post(f"/tasks/{second}/start")
    await a.post(f"/tasks/{second}/begin", {"topic": "t"})
    await a.post(f"/tasks/{second}/message", {"text": "hello"})
    await a.post(f"/tasks/{second}/skip")
    r = await a.post("/tasks/claim", {"kind": "red_team"})
    assert "msg=no_task" in r.headers["location"]
    # b takes both in turn (one task of a kind at a time) and lets them go too
    b = await browser(app, "b")
    taken = set()
    for _ in range(2):
        held = task_id((await b.post("/tasks/claim", {"kind": "red_team"})).headers["location"])
        taken.add((await star.store.task(held)).instruction_id)
        await b.post(f"/tasks/{held}/skip")
    assert taken == {(await star.store.task(first)).instruction_id, (await star.store.task(second)).instruction_id}
    # nobody left who has not skipped them, and the lead is told so
    page = (await lead.get("/lead/campaigns/s")).text
    assert "every eligible red teamer skipped this instruction" in page


async def test_a_paused_task_stays_reserved_past_the_claim_lease(lab: tuple[FastAPI, StarLab]) -> None:
    """A claim lasts an hour without activity, but a pause is a promise: the task (and a started
    dialogue) stays the participant's for [lab] pause_hours, then goes back like any expired claim."""
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    await add_person(star, "a")
    await add_person(star, "b")
    lead = await browser(app, "lead")
    await create_campaign(lead, "p", ["sexually-explicit"], n=1)
    a = await browser(app, "a")
    tid = task_id((await a.post("/tasks/claim", {"kind": "red_team"})).headers["location"])
    await a.post(f"/tasks/{tid}/start")
    await a.post(f"/tasks/{tid}/begin", {"topic": "t"})
    await a.post(f"/tasks/{tid}/message", {"text": "hello"})
    page = await a.follow(await a.post(f"/tasks/{tid}/pause"))
    assert "reserved for you for 24 hours" in page.text
    start = star.store._now()
    star.store._clock = lambda: start + timedelta(hours=3)
    b = await browser(app, "b")
    assert "msg=no_task" in (await b.post("/tasks/claim", {"kind": "red_team"})).headers["location"]
    assert (await star.store.task(tid)).participant_id is not None
    page = await a.get(f"/tasks/{tid}")
    assert "Resume the task" in page.text
    star.store._clock = lambda: start + timedelta(hours=25)
    r = await b.post("/tasks/claim", {"kind": "red_team"})
    assert "msg" not in r.headers["location"]  # the pause ran out: the instruction is open again
    assert (await star.store.task(tid)).status.value == "released"


async def test_shortfall_counts_people_not_tasks(lab: tuple[FastAPI, StarLab]) -> None:
    """A dialogue's two annotation tasks need two different people: one eligible annotator is a
    shortfall of one, shown with the reason, before anyone takes a task."""
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    await add_person(star, "a", roles=["red_teamer"])
    await add_person(star, "doc", expertise=["medical"], roles=["annotator"])
    lead = await browser(app, "lead")
    await create_campaign(lead, "med", ["medical-advice"], n=1)
    a = await browser(app, "a")
    await red_team(a, ["what dose?"])
    entries = await star.store.shortfall("med")
    assert [(e["kind"], e["open_tasks"]) for e in entries] == [("annotate", 1)]
    page = (await lead.get("/lead/campaigns/med")).text
    assert "too few eligible annotators who have not seen the dialogue" in page
    assert "with medical expertise" in page


async def test_deactivated_accounts_do_not_count_as_eligible(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    await add_person(star, "a", roles=["red_teamer"])
    docs = [await add_person(star, name, expertise=["medical"], roles=["annotator"]) for name in ("d1", "d2")]
    lead = await browser(app, "lead")
    await create_campaign(lead, "med", ["medical-advice"], n=1)
    await red_team(await browser(app, "a"), ["what dose?"])
    assert "too few eligible" not in (await lead.get("/lead/campaigns/med")).text
    await lead.get("/lead/participants")
    await lead.post(f"/lead/accounts/{docs[1].id}/deactivate")
    assert "too few eligible annotators" in (await lead.get("/lead/campaigns/med")).text


async def test_time_per_task_and_kind_for_the_lead(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    for name in "abc":
        await add_person(star, name)
    lead = await browser(app, "lead")
    await create_campaign(lead, "t", ["sexually-explicit"], n=1)
    await red_team(await browser(app, "a"), ["hello"])
    await rate(await browser(app, "b"), "annotate", 1, "yes")
    c = await browser(app, "c")
    tid = task_id((await c.post("/tasks/claim", {"kind": "annotate"})).headers["location"])
    await c.post(f"/tasks/{tid}/start")
    await c.post(f"/tasks/{tid}/pause")
    page = (await lead.get("/lead/campaigns/t")).text
    per_person = re.search(r'<table id="time-per-person">.*?</table>', page, re.S)
    assert per_person is not None and per_person.group(0).count("<tr>") == 4  # header + a, b, c
    per_task = re.search(r'<details id="time-per-task">.*?</details>', page, re.S)
    assert per_task is not None
    assert "red team" in per_task.group(0) and per_task.group(0).count("<td>done</td>") == 2
    assert "<td>paused</td>" in per_task.group(0)
    sheet = list(csv.DictReader(io.StringIO((await lead.get("/lead/campaigns/t/time.csv")).text)))
    assert sorted((r["username"], r["kind"], r["state"]) for r in sheet) == [
        ("a", "red_team", "done"),
        ("b", "annotate", "done"),
        ("c", "annotate", "paused"),
    ]
    row = json.loads((await lead.get("/lead/campaigns/t/export?format=jsonl")).text.splitlines()[0])
    assert row["red_team_seconds"] is not None and row["annotator1_seconds"] is not None
    assert row["annotator2_seconds"] is None  # c has not submitted


async def test_report_has_rater_groups_from_the_questionnaire(lab: tuple[FastAPI, StarLab]) -> None:
    """The in-browser report joins the participants' questionnaire answers by pseudonym, so the
    rater-group analyses run; names and usernames never reach it."""
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    await add_person(star, "redteamer")
    genders = ["Female", "Male", "Female", "Male"]
    for i, gender in enumerate(genders):
        await add_person(star, f"rater{i}", demographics={"gender": [gender]}, roles=["annotator"])
    lead = await browser(app, "lead")
    await create_campaign(lead, "r", ["sexually-explicit"], n=2)
    rt = await browser(app, "redteamer")
    await red_team(rt, ["hello"])
    await red_team(rt, ["hello again"])
    for i in range(4):
        await rate(await browser(app, f"rater{i}"), "annotate", 1 + i % 4, f"reason {i}")
    report = await lead.get("/lead/campaigns/r/report")
    assert report.status_code == 200
    assert "no rater attributes" not in report.text and "gender" in report.text
    assert "rater0" not in report.text and "redteamer" not in report.text


async def test_csv_exports_open_as_text_in_spreadsheets(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    for name in "abc":
        await add_person(star, name)
    lead = await browser(app, "lead")
    await create_campaign(lead, "x", ["sexually-explicit"], n=1)
    a = await browser(app, "a")
    tid = task_id((await a.post("/tasks/claim", {"kind": "red_team"})).headers["location"])
    await a.post(f"/tasks/{tid}/start")
    await a.post(f"/tasks/{tid}/begin", {"topic": "+cmd|' /C calc'!A0"})
    await a.post(f"/tasks/{tid}/message", {"text": "hello"})
    await a.post(f"/tasks/{tid}/finish", {"assigned_rule_broken": "no"})
    await rate(await browser(app, "b"), "annotate", 1, '=HYPERLINK("http://evil.example","click")')
    await rate(await browser(app, "c"), "annotate", 2, "@SUM(1+1)")
    rows = list(csv.DictReader(io.StringIO((await lead.get("/lead/campaigns/x/export?format=csv")).text)))
    assert rows[0]["committed_topic"] == "'+cmd|' /C calc'!A0"
    assert {rows[0]["annotator1_reasoning"], rows[0]["annotator2_reasoning"]} == {
        '\'=HYPERLINK("http://evil.example","click")',
        "'@SUM(1+1)",
    }
    assert rows[0]["annotator1_rating"] in ("1", "2")  # numbers stay numbers
    jsonl = json.loads((await lead.get("/lead/campaigns/x/export?format=jsonl")).text.splitlines()[0])
    assert jsonl["committed_topic"] == "+cmd|' /C calc'!A0"  # the data itself is untouched


def test_cli_csv_export_opens_as_text_in_spreadsheets(tmp_path: Path) -> None:
    from psychoalign.cli.star import write_rows

    out = tmp_path / "x.csv"
    write_rows([{"a": "=1+1", "b": -3, "c": "-x", "d": "plain"}], "csv", out)
    row = next(csv.DictReader(out.open(encoding="utf-8")))
    assert row == {"a": "'=1+1", "b": "-3", "c": "'-x", "d": "plain"}


async def test_coverage_map_shows_the_planned_cells(lab: tuple[FastAPI, StarLab]) -> None:
    """A small campaign plans a few cells of a large space: the map shows those, not a sea of blanks."""
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    lead = await browser(app, "lead")
    await create_campaign(lead, "c", ["sexually-explicit", "harassment"], n=4)
    page = (await lead.get("/lead/campaigns/c")).text
    heat = re.search(r'<table class="heat">.*?</table>', page, re.S)
    assert heat is not None
    planned = len(re.findall(r"<td class=\"heat-\d\"", heat.group(0)))
    shown = heat.group(0).count("<td ")
    assert planned == 4 and shown <= 16  # at most 4 rows × 4 columns
    # every header names its row or column (axe: empty-table-header), the corner one included
    headers = re.findall(r"<th[^>]*>(.*?)</th>", heat.group(0), re.S)
    assert headers and all(re.sub(r"<[^>]+>", "", h).strip() for h in headers), headers
    assert '<th scope="col">Rule — target group</th>' in heat.group(0)
    assert "with no planned dialogue are left out" in page
    assert "<dt>Rules</dt><dd>harassment, sexually-explicit</dd>" in page or "sexually-explicit, harassment" in page


async def test_the_configured_target_role_comes_first(tmp_path: Path) -> None:
    settings = lab_settings(tmp_path / "home")
    roles = {**settings.roles, "another": {"backend": "scripted", "script": str(tmp_path / "home" / "target.yaml")}}
    app, star = lab_app(settings.model_copy(update={"roles": roles}))
    await add_person(star, "lead", Role.LEAD)
    lead = await browser(app, "lead")
    page = (await lead.get("/lead/campaigns/new")).text
    select = re.search(r'name="target_role">(.*?)</select>', page)
    assert select is not None
    options = re.findall(r'<option value="([^"]+)">', select.group(1))
    assert options[0] == "target" and "another" in options
    await lead.aclose()
    await star.close()


@pytest.mark.parametrize("name", ["..", ".", ".hidden", "-x"])
async def test_campaign_names_stay_addressable(lab: tuple[FastAPI, StarLab], name: str) -> None:
    """A name is a URL path segment: "." and ".." would be resolved away by every browser."""
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    lead = await browser(app, "lead")
    await lead.get("/lead/campaigns/new")
    r = await lead.post("/lead/campaigns", {"name": name, "instructions": "1", "rules": ["sexually-explicit"]})
    assert r.status_code == 400 and "starting with a letter or digit" in r.text
    assert await star.lab.campaigns() == []


async def test_lead_deactivates_reactivates_and_sends_new_links(lab: tuple[FastAPI, StarLab]) -> None:
    """From the participants page: deactivating ends the sessions, voids the invite links and gives
    the held tasks back; reactivating lets the person in again; a new link replaces a lost or
    expired one (or a forgotten password) and voids the earlier one; nobody deactivates themselves."""
    app, star = lab
    me = await add_person(star, "lead", Role.LEAD)
    alice = await add_person(star, "alice")
    lead = await browser(app, "lead")
    await create_campaign(lead, "d", ["sexually-explicit"], n=1)
    a = await browser(app, "alice")
    tid = task_id((await a.post("/tasks/claim", {"kind": "red_team"})).headers["location"])
    await a.post(f"/tasks/{tid}/start")
    page = (await lead.get("/lead/participants")).text
    assert f'action="/lead/accounts/{alice.id}/deactivate"' in page
    assert f'action="/lead/accounts/{me.id}/deactivate"' not in page
    r = await lead.post(f"/lead/accounts/{alice.id}/deactivate")
    assert r.status_code == 303 and "msg=deactivated" in r.headers["location"]
    assert (await a.get("/tasks")).headers["location"].startswith("/login")  # the session is gone
    assert (await star.store.task(tid)).status.value == "open"  # the held task went back
    assert (await Browser(app).login("alice")).status_code == 401
    assert "deactivated" in (await lead.get("/lead/participants")).text
    assert (await lead.post(f"/lead/accounts/{me.id}/deactivate")).status_code == 400
    await lead.get("/lead/participants")
    r = await lead.post(f"/lead/accounts/{alice.id}/activate")
    assert r.status_code == 303
    assert (await Browser(app).login("alice")).status_code == 303
    # a new link: a reset for an active account; the earlier link stops working
    await lead.get("/lead/participants")
    first = re.search(
        r'id="invite-link">http://testserver(/invite/[^<]+)<',
        (await lead.post(f"/lead/accounts/{alice.id}/invite")).text,
    )
    await lead.get("/lead/participants")
    page = (await lead.post(f"/lead/accounts/{alice.id}/invite")).text
    second = re.search(r'id="invite-link">http://testserver(/invite/[^<]+)<', page)
    assert first and second and "New link for" in page
    newcomer = Browser(app)
    assert (await newcomer.get(first.group(1))).status_code == 404
    assert (await newcomer.get(second.group(1))).status_code == 200
    r = await newcomer.post(
        second.group(1), {"username": "alice2", "password": "a new password", "password2": "a new password"}
    )
    assert r.status_code == 303
    assert await star.accounts.authenticate("alice2", "a new password") is not None
    assert await star.accounts.authenticate("alice", PASSWORD) is None
    # an invited person who never joined: deactivating voids the link
    await lead.get("/lead/participants")
    page = (await lead.post("/lead/participants", {"display_name": "Newbie", "roles": ["annotator"]})).text
    link = re.search(r'id="invite-link">http://testserver(/invite/[^<]+)<', page)
    assert link
    newbie = next(x for x in await star.accounts.list_accounts() if x.display_name == "Newbie")
    await lead.post(f"/lead/accounts/{newbie.id}/deactivate")
    assert (await Browser(app).get(link.group(1))).status_code == 404
    assert (await lead.post(f"/lead/accounts/{newbie.id}/activate")).status_code == 400  # no password: a link instead


async def test_one_task_of_a_kind_at_a_time(lab: tuple[FastAPI, StarLab]) -> None:
    """A second click (another tab, the back button) takes a participant back to the task they
    hold instead of claiming another one that would sit reserved for an hour."""
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    await add_person(star, "a")
    await create_campaign(await browser(app, "lead"), "one", ["sexually-explicit"], n=3)
    a = await browser(app, "a")
    first = (await a.post("/tasks/claim", {"kind": "red_team"})).headers["location"]
    again = (await a.post("/tasks/claim", {"kind": "red_team"})).headers["location"]
    assert again == first
    counts = await star.store.task_counts("one")
    assert counts["red_team"] == {"open": 2, "claimed": 1}
    await a.post(f"{first}/skip")
    assert (await a.post("/tasks/claim", {"kind": "red_team"})).headers["location"] != first


async def test_the_report_is_built_off_the_event_loop(
    lab: tuple[FastAPI, StarLab], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large campaign's report takes seconds of CPU: meanwhile every participant's page must
    keep answering. The analysis is held until another page has been served: on the event loop
    that page could not be served first."""
    import asyncio
    import threading

    from psychoalign.star import analysis as report_module  # the lab imports analyze from the package

    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    for name in "abc":
        await add_person(star, name)
    lead = await browser(app, "lead")
    await create_campaign(lead, "big", ["sexually-explicit"], n=1)
    await red_team(await browser(app, "a"), ["hello"])
    await rate(await browser(app, "b"), "annotate", 1, "yes")
    await rate(await browser(app, "c"), "annotate", 2, "no")
    started, release = threading.Event(), threading.Event()
    order: list[str] = []
    real = report_module.analyze

    def held_analyze(*args: object, **kwargs: object) -> object:
        started.set()
        release.wait(timeout=60)  # only a fallback: the test releases it as soon as the page is served
        order.append("report built")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(report_module, "analyze", held_analyze)
    pending = asyncio.create_task(lead.get("/lead/campaigns/big/report"))
    await asyncio.to_thread(started.wait, 60)
    other = await browser(app, "a")
    assert (await other.get("/tasks")).status_code == 200
    order.append("page served")
    release.set()
    assert (await pending).status_code == 200
    assert order == ["page served", "report built"]


async def test_lead_relaxes_red_teaming_matching_from_the_page(lab: tuple[FastAPI, StarLab]) -> None:
    """Nobody of the targeted group (or known to be outside it) registered: the lead relaxes the
    campaign's red-teaming matching from its page; a red teamer of unknown demographics then gets
    the task, which records why; strict again, nobody does."""
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    await add_person(star, "a", roles=["red_teamer"])
    await add_person(star, "b", roles=["red_teamer"])
    lead = await browser(app, "lead")
    await create_campaign(lead, "hs", ["hate-speech"], n=2)
    a = await browser(app, "a")
    assert "msg=no_task" in (await a.post("/tasks/claim", {"kind": "red_team"})).headers["location"]
    page = (await lead.get("/lead/campaigns/hs")).text
    assert 'action="/lead/campaigns/hs/relax"' in page and "strict" in page
    assert (await lead.post("/lead/campaigns/hs/relax", {"relax": "on"})).status_code == 303
    assert "red teaming relaxed when nobody matches" in (await lead.get("/lead/campaigns/hs")).text
    r = await a.post("/tasks/claim", {"kind": "red_team"})
    task = await star.store.task(task_id(r.headers["location"]))
    assert task.campaign == "hs" and (task.relaxed or "").startswith("relaxed:")
    await lead.post("/lead/campaigns/hs/relax", {"relax": "off"})
    b = await browser(app, "b")
    assert "msg=no_task" in (await b.post("/tasks/claim", {"kind": "red_team"})).headers["location"]


async def test_per_person_quotas(lab: tuple[FastAPI, StarLab]) -> None:
    """The lead sets, per campaign, the most tasks of each kind one person takes: the next claim
    goes elsewhere (or nowhere, with the reason), the shortfall says why, batch assignment obeys."""
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    await add_person(star, "a")
    lead = await browser(app, "lead")
    await lead.get("/lead/campaigns/new")
    r = await lead.post(
        "/lead/campaigns",
        {"name": "q", "instructions": "3", "rules": ["sexually-explicit"], "quota_red_team": "1", "quota_annotate": ""},
    )
    assert r.status_code == 303, r.text[:300]
    await launch(lead, "q")
    page = (await lead.get("/lead/campaigns/q")).text
    assert "red-teaming dialogues: 1 · annotations: no limit · arbitrations: no limit" in page
    a = await browser(app, "a")
    await red_team(a, ["hello"])
    r = await a.post("/tasks/claim", {"kind": "red_team"})
    assert "msg=no_task" in r.headers["location"]
    a_account = await star.accounts.authenticate("a", PASSWORD)
    assert a_account is not None
    with pytest.raises(ClaimError, match="per-person quota"):
        await star.store.claim(a_account.participant_id or "", TaskKind.RED_TEAM)
    page = (await lead.get("/lead/campaigns/q")).text
    assert "every eligible red teamer reached the campaign&#39;s per-person quota" in page
    # batch assignment (star assign) obeys the quota too
    result = await star.store.assign_all(TaskKind.RED_TEAM, campaign="q")
    assert result["assigned"] == 0
    # bad input names the field
    await lead.get("/lead/campaigns/new")
    r = await lead.post(
        "/lead/campaigns", {"name": "q2", "instructions": "1", "rules": ["sexually-explicit"], "quota_annotate": "0"}
    )
    assert r.status_code == 400 and "annotator quota must be a whole number from 1" in r.text


async def test_uploads_with_yaml_aliases_are_refused(lab: tuple[FastAPI, StarLab]) -> None:
    """A "billion laughs" policy (nested aliases) would expand to billions of values when
    validated: refused up front, with the reason, and no campaign is made."""
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    lead = await browser(app, "lead")
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    bomb = "\n".join(levels) + "\nname: bomb\n"
    await lead.get("/lead/campaigns/new")
    r = await lead.client.post(
        "/lead/campaigns",
        data={"name": "bomb", "instructions": "1", "csrf_token": lead.token},
        files={"policy_file": ("policy.yaml", bomb.encode(), "application/x-yaml")},
    )
    assert r.status_code == 400 and "uses YAML aliases" in r.text
    assert await star.lab.campaigns() == []


async def test_a_large_plan_is_generated_off_the_event_loop(
    lab: tuple[FastAPI, StarLab], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Generating up to 100,000 instructions takes seconds: other pages are served meanwhile."""
    import asyncio
    import threading

    from psychoalign.web.star import lead as lead_module

    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    await add_person(star, "a")
    lead = await browser(app, "lead")
    started, release = threading.Event(), threading.Event()
    order: list[str] = []
    real = lead_module.generate_instructions

    def held(*args: object, **kwargs: object) -> object:
        started.set()
        release.wait(timeout=60)  # only a fallback: released as soon as the other page is served
        order.append("plan generated")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(lead_module, "generate_instructions", held)
    await lead.get("/lead/campaigns/new")
    pending = asyncio.create_task(
        lead.post("/lead/campaigns", {"name": "big", "instructions": "5", "rules": ["sexually-explicit"]})
    )
    await asyncio.to_thread(started.wait, 60)
    assert (await (await browser(app, "a")).get("/tasks")).status_code == 200
    order.append("page served")
    release.set()
    assert (await pending).status_code == 303
    assert order == ["page served", "plan generated"]
    assert (await star.lab.campaign("big")) is not None


async def test_a_psychoalign_target_framework_is_checked_at_creation(lab: tuple[FastAPI, StarLab]) -> None:
    """An unknown framework is the lead's error on New campaign, not a red teamer's failed first message."""
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    lead = await browser(app, "lead")
    page = (await lead.get("/lead/campaigns/new")).text
    assert '<select name="framework"><option value="general">general</option>' in page
    assert '<option value="medical">medical</option>' in page
    r = await lead.post(
        "/lead/campaigns",
        {"name": "x", "instructions": "1", "target_kind": "psychoalign", "framework": "genral", "rules": ["privacy"]},
    )
    assert r.status_code == 400 and "unknown framework &#39;genral&#39;" in r.text
    assert await star.lab.campaigns() == []


async def test_every_campaign_route_of_the_lead_answers_404_for_an_unknown_campaign(
    lab: tuple[FastAPI, StarLab],
) -> None:
    """A name no campaign has: each lead route says so (404, naming it) and changes nothing."""
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    lead = await browser(app, "lead")
    pages = ["", "/progress.json", "/export", "/report", "/time.csv"]
    forms: dict[str, dict[str, object]] = {
        "/relax": {"relax": "on"},
        "/release-expired": {},
        "/personas": {"max_tasks": "1"},
        "/status": {"action": "pause"},
        "/access": {"members_only": "on"},
        "/members": {"participant_ids": ["p1"]},
        "/members/p1/remove": {},
    }
    for path in pages:
        r = await lead.get(f"/lead/campaigns/nowhere{path}")
        assert (r.status_code, "no campaign &#39;nowhere&#39;" in r.text) == (404, True), path
    for path, form in forms.items():
        r = await lead.post(f"/lead/campaigns/nowhere{path}", form)
        assert (r.status_code, "no campaign &#39;nowhere&#39;" in r.text) == (404, True), path
    # a name from the URL is shown cut to the longest a campaign may have, not echoed whole
    long = "a" * 3000
    page = await lead.get(f"/lead/campaigns/{long}")
    form = await lead.post(f"/lead/campaigns/{long}/status", {"action": "pause"})
    for r in (page, form):
        assert r.status_code == 404 and f"no campaign &#39;{'a' * 64}…&#39;" in r.text and "a" * 65 not in r.text
    assert await star.lab.campaigns() == []


@pytest.mark.parametrize("kind", ["model", "psychoalign"])
async def test_a_campaign_files_target_is_shown_isolated(lab: tuple[FastAPI, StarLab], kind: str) -> None:
    """A campaign run from a file names its target as written there (a model role, a framework
    file's path), any text at all: the campaign page shows it escaped and direction-isolated.
    Before, ``<code>{{ campaign.target.framework }}</code>``: an override in a path reordered the page."""
    from psychoalign.star import generate_instructions, load_parameters, load_policy
    from psychoalign.star.campaign import TargetConfig
    from psychoalign.star.lab_store import FROM_CAMPAIGN_FILE, LabCampaignSettings
    from tests.web.test_probes import CONTROLS, HOSTILE, DomCheck

    app, star = lab
    name = f"\u202e{HOSTILE}.yaml"
    target = TargetConfig(kind=kind, role=name) if kind == "model" else TargetConfig(kind=kind, framework=name)
    items = generate_instructions(load_policy(), load_parameters(), 2, seed=1, rules=["stereotypes"])
    await star.store.create_campaign("fromfile", items, status="draft")  # its page runs the launch checks
    await star.lab.save_campaign(
        LabCampaignSettings(name="fromfile", target=target, instructions=2, created_by=FROM_CAMPAIGN_FILE)
    )
    await add_person(star, "lead", Role.LEAD)
    lead = await browser(app, "lead")
    page = await lead.get("/lead/campaigns/fromfile")
    assert page.status_code == 200, page.text[:300]
    check = DomCheck("campaign page")
    check.feed(page.text)
    assert not check.found, check.found
    assert check.probes >= 1  # the name is on the page, isolated, not merely absent
    assert "<script>alert(1)" not in page.text and not CONTROLS.search(page.text)
    if kind == "psychoalign":  # a framework is read when the target is built: a missing one stops
        # the launch (before, the campaign launched and every red teamer's first message failed)
        problems = re.search(r'<div class="error" role="alert" id="launch-problems">.*?</div>', page.text, re.S)
        assert problems and "cannot be built" in problems.group(), page.text[:2000]
    await lead.aclose()
