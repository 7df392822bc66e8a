"""Lead people pages (web/star/lead_people.py): a forged account role or task role on a form is
refused with a 400 naming the field and the allowed values; nothing is created or changed."""

from __future__ import annotations

from fastapi import FastAPI

from psychoalign.web.accounts import Role
from psychoalign.web.star import StarLab
from tests.weblab import Browser, add_person


async def _lead(app: FastAPI, star: StarLab) -> Browser:
    await add_person(star, "lead", Role.LEAD)
    lead = Browser(app)
    assert (await lead.login("lead")).status_code == 303
    await lead.get("/lead/participants")
    return lead


async def test_a_forged_account_role_is_refused(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    lead = await _lead(app, star)
    before = len(await star.accounts.list_accounts())
    r = await lead.post("/lead/participants", {"display_name": "Eve", "role": "admin", "roles": ["annotator"]})
    assert r.status_code == 400
    assert "role: &#39;admin&#39; is not an account role; choose lead or participant" in r.text
    assert len(await star.accounts.list_accounts()) == before


async def test_a_forged_task_role_is_refused(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    lead = await _lead(app, star)
    r = await lead.post("/lead/participants", {"display_name": "Eve", "roles": ["annotator", "boss"]})
    assert r.status_code == 400
    assert "roles: &#39;boss&#39; is not a task role; choose from red_teamer, annotator, arbitrator" in r.text
    assert await star.store.list_participants() == []
    # the known roles still work: the participant is created with exactly them
    r = await lead.post("/lead/participants", {"display_name": "Ann", "roles": ["annotator"]})
    assert r.status_code == 200
    assert [p.roles for p in await star.store.list_participants()] == [["annotator"]]


async def test_a_forged_task_role_on_the_roles_form_changes_nothing(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    lead = await _lead(app, star)
    await add_person(star, "p")
    person = (await star.store.list_participants())[0]
    r = await lead.post(f"/lead/participants/{person.id}/roles", {"roles": ["red_teamer", "boss"]})
    assert r.status_code == 400 and "roles: &#39;boss&#39; is not a task role" in r.text
    assert (await star.store.participant(person.id)).roles == person.roles
