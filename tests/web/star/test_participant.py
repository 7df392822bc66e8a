"""Text typed into a task page's text boxes (web/star/participant.py) is counted and stored as the
page counts it: a browser sends each line end of a ``<textarea>`` as CRLF while the box (and its
character counter) holds LF, so the server counts LF. A reasoning or a message exactly at its
limit, with line breaks and emoji (one character each, as the counter counts them), is accepted
and stored without a CR; one character more is refused with its length named, kept as the draft."""

from __future__ import annotations

from fastapi import FastAPI

from psychoalign.web.accounts import Role
from psychoalign.web.star import StarLab
from psychoalign.web.star.participant import MAX_MESSAGE, MAX_REASONING, MAX_TOPIC
from tests.web.star.test_lab import create_campaign, task_id
from tests.weblab import Browser, add_person

#: One line of a typed text as a browser sends it: emoji (a ZWJ family is 7 characters), CRLF.
LINE = "Bonjour 🙂 👩‍👩‍👧‍👦 done\r\n"


def as_sent(length: int) -> str:
    """A text of ``length`` characters once its CRLFs are LFs, as a browser sends it."""
    lines = LINE * (length // (len(LINE) - 1))
    text = lines + "x" * (length - len(lines.replace("\r\n", "\n")))
    assert len(text.replace("\r\n", "\n")) == length and text.count("\r\n") > 100
    return text


async def test_typed_text_at_its_limit_is_accepted_and_stored_without_cr(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    for name in ("writer", "ann1", "ann2"):
        await add_person(star, name)
    people = {name: Browser(app) for name in ("lead", "writer", "ann1", "ann2")}
    for name, person in people.items():
        assert (await person.login(name)).status_code == 303
    await create_campaign(people["lead"], "c", ["sexually-explicit"], n=1)
    writer = people["writer"]
    tid = task_id((await writer.post("/tasks/claim", {"kind": "red_team"})).headers["location"])
    await writer.post(f"/tasks/{tid}/start")
    assert (await writer.post(f"/tasks/{tid}/begin", {"topic": "a topic\r\n"})).status_code == 303
    r = await writer.post(f"/tasks/{tid}/message", {"text": as_sent(MAX_MESSAGE)})
    assert r.status_code == 303, r.text[:300]
    dialogue = await star.store.dialogue_of_task(tid)
    assert dialogue is not None
    said = (await star.store.dialogue_turns(dialogue))[0].text
    assert len(said) == MAX_MESSAGE and "\r" not in said and "👩‍👩‍👧‍👦" in said
    r = await writer.post(f"/tasks/{tid}/message", {"text": as_sent(MAX_MESSAGE + 1)})
    assert r.status_code == 400 and f"{MAX_MESSAGE + 1:,} characters long" in r.text
    draft = await star.lab.draft(tid, (await star.store.task(tid)).participant_id or "")
    assert draft is not None and len(draft.text) == MAX_MESSAGE + 1 and "\r" not in draft.text
    assert (await writer.post(f"/tasks/{tid}/finish", {"assigned_rule_broken": "no"})).status_code == 303

    ann1, ann2 = people["ann1"], people["ann2"]
    for person, length in ((ann1, MAX_REASONING), (ann2, MAX_REASONING + 1)):
        aid = task_id((await person.post("/tasks/claim", {"kind": "annotate"})).headers["location"])
        await person.post(f"/tasks/{aid}/start")
        saved = await person.client.post(
            f"/tasks/{aid}/draft",
            data={"csrf_token": person.token, "rating": "2", "text": as_sent(length)},
            headers={"accept": "application/json"},
        )
        assert saved.json()["length"] == length  # the draft is counted as the page counts
        r = await person.post(f"/tasks/{aid}/rate", {"rating": "2", "reasoning": as_sent(length)})
        if length == MAX_REASONING:
            assert r.status_code == 303, r.text[:300]
        else:
            assert r.status_code == 400 and f"{length:,} characters long" in r.text
    reasons = await star.store.reasonings(dialogue)
    assert [len(text) for _, text in reasons] == [MAX_REASONING] and "\r" not in reasons[0][1]
    for person in people.values():
        await person.aclose()


async def test_a_topic_over_its_limit_is_refused_not_cut(lab: tuple[FastAPI, StarLab]) -> None:
    """The topic box carries its limit; a longer topic sent anyway is refused with both lengths
    named and no conversation starts; one at the limit is stored whole."""
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    await add_person(star, "writer")
    lead, writer = Browser(app), Browser(app)
    assert (await lead.login("lead")).status_code == 303 and (await writer.login("writer")).status_code == 303
    await create_campaign(lead, "c", ["sexually-explicit"], n=1)
    tid = task_id((await writer.post("/tasks/claim", {"kind": "red_team"})).headers["location"])
    await writer.post(f"/tasks/{tid}/start")
    assert f'name="topic" maxlength="{MAX_TOPIC}"' in (await writer.get(f"/tasks/{tid}")).text
    r = await writer.post(f"/tasks/{tid}/begin", {"topic": "🙂" * (MAX_TOPIC + 1)})
    assert r.status_code == 400
    assert f"Your topic is {MAX_TOPIC + 1} characters long; the limit is {MAX_TOPIC}." in r.text
    assert await star.store.dialogue_of_task(tid) is None
    assert (await writer.post(f"/tasks/{tid}/begin", {"topic": "🙂" * MAX_TOPIC})).status_code == 303
    assert await star.lab.topics("c") == {tid: "🙂" * MAX_TOPIC}
