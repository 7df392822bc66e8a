"""Time on task and break prompts through the ASGI client: the page carries the seconds already
spent (the static script counts on from them; no timer here), a break prompt is rendered once the
stored time passes the lab's ``break_minutes`` and otherwise waits hidden for the script, and the
policy's support resources appear, isolated, in the content warning and the prompt."""

from __future__ import annotations

import html
import json
import re

import pytest
from fastapi import FastAPI
from sqlalchemy import update

from psychoalign.config import LabSettings
from psychoalign.star.lab_store import SQLLabStore, task_time_table
from psychoalign.star.policy import Policy, load_policy
from psychoalign.web.accounts import Role
from psychoalign.web.star import StarLab
from tests.web.star.test_lab import browser, task_id
from tests.web.star.test_lab_annotation import two_dialogues
from tests.web.star.test_lab_campaign import POLICY, upload_campaign
from tests.weblab import Browser, add_person

#: The ``lab`` fixture (tests/web/star/conftest.py) with a 20-minute break rule.
LAB_SETTINGS = LabSettings(break_minutes=20)


def clock(page: str) -> dict[str, str]:
    """The time-on-task element's data attributes and the minutes it shows."""
    found = re.search(r'<span class="muted" id="time-on-task"([^>]*)>.*?<span class="minutes">(\d+)</span> min', page)
    assert found is not None, "no time-on-task element"
    attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', found.group(1)))
    return {**attrs, "minutes": found.group(2)}


def break_prompt(page: str) -> tuple[bool, str]:
    """(hidden?, text without tags) of the break prompt."""
    found = re.search(r'<section class="warning break-prompt" id="break-prompt"([^>]*)>(.*?)</section>', page, re.S)
    assert found is not None, "no break prompt element"
    return "hidden" in found.group(1), html.unescape(" ".join(re.sub(r"<[^>]+>", " ", found.group(2)).split()))


async def set_spent(star: StarLab, task: str, seconds: float) -> None:
    """Move the task's stored time on task (the time already counted before the running stretch)."""
    assert isinstance(star.lab, SQLLabStore)
    async with star.lab.engine.begin() as conn:
        await conn.execute(update(task_time_table).where(task_time_table.c.task_id == task).values(seconds=seconds))


async def started_annotation(app: FastAPI, star: StarLab) -> tuple[Browser, Browser, str, str]:
    """The lead, an annotator on a started annotation task, its id and the content warning shown before."""
    lead = await two_dialogues(app, star)
    ann = await browser(app, "ann")
    r = await ann.post("/tasks/claim", {"kind": "annotate"})
    task = task_id(r.headers["location"])
    warning = (await ann.follow(r)).text
    await ann.post(f"/tasks/{task}/start")
    return lead, ann, task, warning


async def test_the_page_carries_the_time_spent_and_a_hidden_prompt(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    lead, ann, task, _ = await started_annotation(app, star)
    page = (await ann.get(f"/tasks/{task}")).text
    shown = clock(page)
    assert shown["break-seconds"] == "1200" and shown["task"] == task  # [lab] break_minutes = 20
    assert 0 <= int(shown["seconds"]) < 60 and shown["minutes"] == "0"
    hidden, text = break_prompt(page)
    assert hidden and "over 20 minutes" in text  # waits for the script to show it
    assert '<script src="/static/app.js"' in page and "<script>" not in page  # CSP: no inline script
    # 12 minutes already spent: the page starts from them, not from 0
    await set_spent(star, task, 12 * 60 + 5)
    shown = clock((await ann.get(f"/tasks/{task}")).text)
    assert shown["minutes"] == "12" and 725 <= int(shown["seconds"]) < 785
    for person in (lead, ann):
        await person.aclose()


async def test_past_the_threshold_the_server_renders_the_prompt(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    lead, ann, task, _ = await started_annotation(app, star)
    await set_spent(star, task, 21 * 60)
    page = (await ann.get(f"/tasks/{task}")).text
    hidden, text = break_prompt(page)
    assert not hidden and text.startswith("Time for a break?")
    assert "Pause keeps the task yours for 24 hours" in text
    assert "call your local emergency number or a crisis helpline" in text  # the built-in support list
    assert 'id="rating-form"' in page  # non-blocking: the task stays on the page
    assert clock(page)["minutes"] == "21"
    for person in (lead, ann):
        await person.aclose()


async def test_the_red_team_page_has_the_clock_and_prompt(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    lead, _, _, _ = await started_annotation(app, star)
    red = await browser(app, "red")
    r = await red.post("/tasks/claim", {"kind": "red_team"})
    task = task_id(r.headers["location"])
    await red.post(f"/tasks/{task}/start")
    await set_spent(star, task, 45 * 60)
    page = (await red.get(f"/tasks/{task}")).text
    assert clock(page)["minutes"] == "45" and not break_prompt(page)[0]
    for person in (lead, red):
        await person.aclose()


async def test_the_warning_lists_the_support_resources(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    lead, ann, _, warning = await started_annotation(app, star)
    found = re.search(r'<ul id="support-resources">(.*?)</ul>', warning, re.S)
    assert found is not None
    items = re.findall(r"<li>(.*?)</li>", found.group(1))
    assert len(items) == len(load_policy().support) == 3
    assert all(i.startswith('<bdi dir="auto">') for i in items)  # untrusted: isolated and escaped
    for person in (lead, ann):
        await person.aclose()


def test_support_is_optional_and_checked() -> None:
    base = load_policy().model_dump(mode="json")
    assert Policy.model_validate({**base, "support": []}).support == ()
    assert Policy.model_validate({**base, "support": ["  Call Sam <ext. 12>  "]}).support == ("Call Sam <ext. 12>",)
    with pytest.raises(ValueError, match=r"support\[1\] is empty"):
        Policy.model_validate({**base, "support": ["ok", " "]})


async def test_an_uploaded_policys_support_is_shown_escaped_and_isolated(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    await add_person(star, "red")
    lead = await browser(app, "lead")
    support = ["Call Di \u202eevil\u202c on 4400", "<script>alert(1)</script> is text"]
    policy = POLICY.rstrip() + "\nsupport:\n" + "".join(f"  - {json.dumps(line)}\n" for line in support)
    await upload_campaign(lead, "own", policy)
    red = await browser(app, "red")
    warning = (await red.follow(await red.post("/tasks/claim", {"kind": "red_team"}))).text
    found = re.search(r'<ul id="support-resources">(.*?)</ul>', warning, re.S)
    assert found is not None
    shown = html.unescape(re.sub(r"<[^>]+>", "", found.group(1)))
    assert "Call Di ⟨U+202E⟩evil⟨U+202C⟩ on 4400" in shown and "\u202e" not in shown  # the stored text, visible
    assert "&lt;script&gt;alert(1)&lt;/script&gt; is text" in found.group(1) and "<script>" not in warning
    for person in (lead, red):
        await person.aclose()
