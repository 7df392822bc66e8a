"""Untrusted text on the lab's pages is shown as stored: bidi and zero-width controls become visible
markers inside a direction-isolated ``<bdi>``, on the annotation, arbitration and lead pages."""

from __future__ import annotations

from fastapi import FastAPI

from psychoalign.web.accounts import Role
from psychoalign.web.star import StarLab
from tests.web.star.test_lab import browser, create_campaign, rate, task_id
from tests.web.test_templating import shown_text
from tests.weblab import add_person

SPOOF_TURN = "Harmless \u202egnp.exe\u202c"
SPOOF_NAME = "Di \u202eevil\u202c"
SPOOF_REASON = "It said \u2067nothing\u2069 wrong\u200b."


def assert_shown(html: str, *expected: str) -> None:
    assert "\u202e" not in html and "\u2067" not in html and "\u200b" not in html, "a raw control reached the page"
    text = shown_text(html)
    for want in expected:
        assert want in text, want


async def test_spoofing_strings_display_as_stored(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    for name in "abcd":
        await add_person(star, name)
    evil = await star.accounts.create_account(
        Role.PARTICIPANT, username="evil", password="x" * 12, display_name=SPOOF_NAME
    )
    lead = await browser(app, "lead")
    await create_campaign(lead, "spoof", ["sexually-explicit"], n=1)
    a = await browser(app, "a")
    r = await a.post("/tasks/claim", {"kind": "red_team"})
    tid = task_id(r.headers["location"])
    await a.post(f"/tasks/{tid}/start")
    await a.post(f"/tasks/{tid}/begin", {"topic": "files"})
    page = await a.follow(await a.post(f"/tasks/{tid}/message", {"text": SPOOF_TURN}))
    assert_shown(page.text, "Harmless ⟨U+202E⟩gnp.exe⟨U+202C⟩")  # the red teamer's own view
    assert '<bdi dir="auto">Harmless <span class="ctl"' in page.text
    r = await a.post(f"/tasks/{tid}/finish", {"assigned_rule_broken": "no"})
    assert r.status_code == 303
    b, c, d = [await browser(app, n) for n in "bcd"]
    annotation = await rate(b, "annotate", 1, SPOOF_REASON)
    assert_shown(annotation, "Harmless ⟨U+202E⟩gnp.exe⟨U+202C⟩")
    assert "exe.png" not in shown_text(annotation)
    await rate(c, "annotate", 4, "fine")
    arbitration = await rate(d, "arbitrate", 2, "weighed both")
    assert_shown(arbitration, "Harmless ⟨U+202E⟩gnp.exe⟨U+202C⟩", "It said ⟨U+2067⟩nothing⟨U+2069⟩ wrong⟨U+200B⟩.")
    # the stored text is untouched: the export carries the controls as typed
    export = (await lead.get("/lead/campaigns/spoof/export?format=jsonl")).text
    assert "\\u202e" in export or "\u202e" in export
    participants = (await lead.get("/lead/participants")).text
    assert_shown(participants, "Di ⟨U+202E⟩evil⟨U+202C⟩")
    assert "Di live" not in shown_text(participants)
    assert evil.participant_id
    campaign = (await lead.get("/lead/campaigns/spoof")).text  # offered as a member to add
    assert_shown(campaign, "Di ⟨U+202E⟩evil⟨U+202C⟩")
    for person in (lead, a, b, c, d):
        await person.aclose()
