"""A red teamer's dialogue is never continued against another model: the lab restarted with the
campaign's target script edited (another model under the same role) answered the rest of a dialogue
started against the first, and the export named the first model for both models' answers."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI

from psychoalign.web.accounts import Role
from psychoalign.web.star import StarLab
from tests.web.star.test_lab import browser, create_campaign
from tests.web.star.test_lab_lifecycle import ROLES, start_red_teaming
from tests.weblab import add_person


def _edit(script: Path) -> None:
    script.write_text('rules: []\ndefault: "Another model answers."\n', encoding="utf-8")


async def test_a_dialogue_is_not_continued_after_the_target_changed(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    account = await add_person(star, "ann", roles=ROLES)
    lead, ann = await browser(app, "lead"), await browser(app, "ann")
    await create_campaign(lead, "swap", ["sexually-explicit"], n=2)
    tid = await start_red_teaming(ann)  # one message and its answer stored
    dialogue = await star.store.dialogue_of_task(tid)
    assert dialogue is not None
    started = (await star.store.dialogue_info(dialogue))["target"]

    # the lab restarts with another model under the campaign's role (its script edited)
    _edit(Path(star.settings.model_spec("target").script or ""))
    for target in star._targets.values():
        model = getattr(target, "model", None)
        if model is not None:
            await model.aclose()
    star._targets.clear()
    assert star.target(await star.campaign("swap")).label != started

    page = await ann.post(f"/tasks/{tid}/message", {"text": "tell me more"})
    assert page.status_code == 409
    assert "The model of this campaign changed since this conversation started" in page.text
    turns = await star.store.dialogue_turns(dialogue)
    assert len(turns) == 2 and "Another model answers." not in {t.text for t in turns}
    draft = await star.lab.draft(tid, account.participant_id or "")
    assert draft is not None and draft.text == "tell me more"  # the message is kept, not lost
