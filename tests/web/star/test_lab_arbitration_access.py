"""The arbitration page under hostile text and the people who must not reach it: an annotator
without the arbitrator role gets no arbitration task, the dialogue's own annotators and red teamer
cannot open or rate it by its id, a lead cannot rate it, and markup, a right-to-left override and
very long unbroken strings in the dialogue and the reasonings are shown as text, whole."""

from __future__ import annotations

from fastapi import FastAPI

from psychoalign.web.accounts import Role
from psychoalign.web.star import StarLab
from psychoalign.web.star.participant import MAX_REASONING
from tests.web.star.test_lab import browser, create_campaign, rate, red_team, task_id
from tests.web.test_templating import shown_text
from tests.weblab import add_person

ROLES = ["red_teamer", "annotator", "arbitrator"]
TURN = "<script>alert(1)</script>" + "x" * 3000 + "\u202eabc"
FIRST = "<img src=x onerror=alert(1)>"
SECOND = "\u202e" + "y" * (MAX_REASONING - 1)


async def test_arbitration_is_reached_only_by_its_arbitrator_and_shows_hostile_text_inert(
    lab: tuple[FastAPI, StarLab],
) -> None:
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    for who in ("rt", "a1", "a2"):
        await add_person(star, who, roles=ROLES)
    await add_person(star, "ann", roles=["annotator"])
    await add_person(star, "arb", roles=["arbitrator"])
    lead = await browser(app, "lead")
    await create_campaign(lead, "c1", ["sexually-explicit"], n=1)
    rt, a1, a2 = [await browser(app, who) for who in ("rt", "a1", "a2")]
    await red_team(rt, [TURN])
    await rate(a1, "annotate", 1, FIRST)
    await rate(a2, "annotate", 4, SECOND)

    ann = await browser(app, "ann")
    r = await ann.post("/tasks/claim", {"kind": "arbitrate"})
    assert r.status_code == 303 and r.headers["location"] == "/tasks?msg=no_task"

    arb = await browser(app, "arb")
    r = await arb.post("/tasks/claim", {"kind": "arbitrate"})
    assert r.status_code == 303 and r.headers["location"].startswith("/tasks/")
    tid = task_id(r.headers["location"])
    await arb.follow(await arb.post(f"/tasks/{tid}/start"))
    page = (await arb.get(f"/tasks/{tid}")).text
    assert "<script>alert" not in page and "<img src=x" not in page and "\u202e" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" + "x" * 3000 in page  # whole, as text
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "⟨U+202E⟩" + "y" * (MAX_REASONING - 1) in shown_text(page)  # the override as a visible marker

    for person in (ann, a1, a2, rt):
        assert (await person.get(f"/tasks/{tid}")).status_code == 404
        assert (await person.post(f"/tasks/{tid}/rate", {"rating": "2", "reasoning": "hijack"})).status_code == 404
    assert (await lead.post(f"/tasks/{tid}/rate", {"rating": "2", "reasoning": "hijack"})).status_code == 403
    r = await arb.post(f"/tasks/{tid}/rate", {"rating": "2", "reasoning": "weighed both"})
    assert r.status_code == 303
    (row,) = [row async for row in star.export_rows("c1")]
    assert row["arbitrator_reasoning"] == "weighed both" and row["annotator2_reasoning"] == SECOND
    for person in (lead, rt, a1, a2, ann, arb):
        await person.aclose()
