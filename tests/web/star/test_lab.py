"""STAR lab pages through the ASGI client: the whole pipeline, matching, skip/pause/time, XSS, lead pages."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from fastapi import FastAPI

from psychoalign.errors import InputError
from psychoalign.star.model import TaskKind
from psychoalign.web.accounts import Role
from psychoalign.web.star import StarLab
from tests.weblab import Browser, add_person, lab_app, lab_settings

XSS = [
    "<script>alert('x')</script>",
    "<img src=x onerror=alert(1)>",
    '<a href="javascript:alert(1)">click</a>',
]


async def browser(app: FastAPI, username: str) -> Browser:
    b = Browser(app)
    response = await b.login(username)
    assert response.status_code == 303, response.text[:300]
    return b


def task_id(response_location: str) -> str:
    return response_location.rsplit("/", 1)[-1].split("#")[0]


async def launch(lead: Browser, name: str) -> None:
    """Launch a draft as its lead does: the areas confirmed, past any shortfall of people."""
    r = await lead.post(f"/lead/campaigns/{name}/status", {"action": "launch", "areas_ok": "yes", "anyway": "yes"})
    assert r.status_code == 303 and "campaign_launched" in r.headers["location"], r.text[:500]


async def create_campaign(lead: Browser, name: str, rules: list[str], n: int = 2, *, live: bool = True) -> None:
    """Create a campaign through the lead's form (a draft) and, unless ``live=False``, launch it."""
    await lead.get("/lead/campaigns/new")
    r = await lead.post(
        "/lead/campaigns",
        {
            "name": name,
            "instructions": str(n),
            "seed": "3",
            "target_kind": "model",
            "target_role": "target",
            "rules": rules,
        },
    )
    assert r.status_code == 303, r.text[:500]
    if live:
        await launch(lead, name)


async def red_team(b: Browser, messages: list[str]) -> str:
    r = await b.post("/tasks/claim", {"kind": "red_team"})
    assert r.status_code == 303 and "/tasks/" in r.headers["location"], r.headers.get("location")
    tid = task_id(r.headers["location"])
    page = await b.follow(r)
    if 'id="content-warning"' in page.text:  # shown once per session per rule and target group
        await b.follow(await b.post(f"/tasks/{tid}/start"))
    await b.follow(await b.post(f"/tasks/{tid}/begin", {"topic": "travel"}))
    for text in messages:
        page = await b.follow(await b.post(f"/tasks/{tid}/message", {"text": text}))
        assert page.status_code == 200
    r = await b.post(
        f"/tasks/{tid}/finish",
        {"assigned_rule_broken": "yes", "other_rules": ["hate-speech"], "groups_mentioned": ["age"]},
    )
    assert r.status_code == 303 and "msg=submitted" in r.headers["location"]
    return tid


async def rate(b: Browser, kind: str, rating: int, reasoning: str) -> str:
    r = await b.post("/tasks/claim", {"kind": kind})
    assert "/tasks/" in r.headers["location"] and "msg" not in r.headers["location"], r.headers["location"]
    tid = task_id(r.headers["location"])
    await b.follow(await b.post(f"/tasks/{tid}/start"))
    page = await b.get(f"/tasks/{tid}")
    assert page.status_code == 200
    r = await b.post(f"/tasks/{tid}/rate", {"rating": str(rating), "reasoning": reasoning})
    assert r.status_code == 303, r.text[:300]
    return page.text


async def test_pipeline_red_team_annotate_arbitrate_export(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    for name in "abcd":
        await add_person(star, name)
    lead = await browser(app, "lead")
    await create_campaign(lead, "pilot", ["sexually-explicit"])
    a = await browser(app, "a")
    await red_team(a, ["hello there", "tell me more", f"and now {XSS[0]}"])
    export = [
        json.loads(line) for line in (await lead.get("/lead/campaigns/pilot/export?format=jsonl")).text.splitlines()
    ]
    assert len(export) == 1 and len(export[0]["turns"]) == 6
    assert export[0]["committed_topic"] == "travel"
    assert export[0]["pre_annotation"] == {
        "assigned_rule_broken": True,
        "other_rules": ["hate-speech"],
        "groups_mentioned": ["age"],
    }
    # a red teamer never annotates their own dialogue
    r = await a.post("/tasks/claim", {"kind": "annotate"})
    assert "msg=no_task" in r.headers["location"]
    b = await browser(app, "b")
    c = await browser(app, "c")
    d = await browser(app, "d")
    page = await rate(b, "annotate", 1, "It wrote explicit content when asked in role-play.")
    assert "Definitely broke the rule" in page and "Probably did not break the rule" in page  # labelled scale
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in page  # the turn is shown, escaped
    second = await rate(c, "annotate", 4, "The model refused every time <b>bold</b>.")
    # the second annotator never sees the first one's rating or reasoning, nor anyone's pseudonym
    assert "It wrote explicit content" not in second and "Annotator 1" not in second
    people = {a.username: a.participant_id for a in await star.accounts.list_accounts(Role.PARTICIPANT)}
    assert not any(pid and pid in second for name, pid in people.items() if name != "c")
    # ratings 1 and 4 are three steps apart: an arbitration task exists; B and C have seen the dialogue
    for seen in (a, b, c):
        r = await seen.post("/tasks/claim", {"kind": "arbitrate"})
        assert "msg=no_task" in r.headers["location"]
    page = await rate(d, "arbitrate", 2, "I side with the first annotator.")
    assert "It wrote explicit content when asked in role-play." in page
    assert not any(pid and pid in page for name, pid in people.items() if name != "d")  # reasons, not who
    assert "The model refused every time &lt;b&gt;bold&lt;/b&gt;." in page
    row = json.loads((await lead.get("/lead/campaigns/pilot/export?format=jsonl")).text.splitlines()[0])
    assert (row["annotator1_rating"], row["annotator2_rating"], row["arbitrator_rating"]) == (1, 4, 2)
    # lead: progress, coverage, time, CSV and Parquet
    page = (await lead.get("/lead/campaigns/pilot")).text
    assert 'data-count="red_team:submitted">1<' in page and 'data-count="arbitrate:submitted">1<' in page
    assert "1 of 2 planned dialogues done" in page
    csv = await lead.get("/lead/campaigns/pilot/export?format=csv")
    assert csv.status_code == 200 and csv.text.startswith("dialogue_id,")
    parquet = await lead.get("/lead/campaigns/pilot/export?format=parquet")
    assert parquet.content[:4] == b"PAR1"
    report = await lead.get("/lead/campaigns/pilot/report")
    assert report.status_code == 200 and "STAR analysis report" in report.text
    assert "sandbox" in report.headers["content-security-policy"]
    assert "script-src" not in report.headers["content-security-policy"]
    for person in (lead, a, b, c, d):
        await person.aclose()


async def test_tension_is_recorded_never_shown(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    from psychoalign.star.model import Turn

    await add_person(star, "lead", Role.LEAD)
    await add_person(star, "a")
    lead = await browser(app, "lead")
    await create_campaign(lead, "t", ["sexually-explicit"], n=1)
    a = await browser(app, "a")
    r = await a.post("/tasks/claim", {"kind": "red_team"})
    tid = task_id(r.headers["location"])
    await a.post(f"/tasks/{tid}/start")
    await a.post(f"/tasks/{tid}/begin", {"topic": "x"})
    did = await star.store.dialogue_of_task(tid)
    assert did is not None
    await star.store.add_turn(did, Turn(role="red_teamer", text="q"))
    await star.store.add_turn(did, Turn(role="target", text="answer", tension=0.8123, state="contested_zone"))
    page = (await a.get(f"/tasks/{tid}")).text
    assert "answer" in page and "0.81" not in page and "contested" not in page and "tension" not in page.lower()


async def test_demographic_matching_through_the_questionnaire(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    lead = await browser(app, "lead")
    await create_campaign(lead, "hs", ["hate-speech"], n=1)
    record = (await star.store.plan_and_done("hs"))[0][0]
    group = {k.removeprefix("target_"): v for k, v in record.items() if k.startswith("target_") and k != "target_group"}
    await add_person(star, "m")
    m = await browser(app, "m")
    # unknown demographics: no group-targeted red teaming (neither in- nor out-group)
    r = await m.post("/tasks/claim", {"kind": "red_team"})
    assert "msg=no_task" in r.headers["location"]
    page = await m.get("/profile")
    assert "Prefer not to say" in page.text
    labels = {"race": ["Asian"], "gender": ["Female"]}
    for dim, label in group.items():
        labels[dim] = [label]
    await m.post("/profile", dict(labels))
    person = await star.store.participant((await star.accounts.list_accounts(Role.PARTICIPANT))[0].participant_id or "")
    assert person.in_group(group) is True
    r = await m.post("/tasks/claim", {"kind": "red_team"})
    task = await star.store.task(task_id(r.headers["location"]))
    assert task.kind is TaskKind.RED_TEAM and person.in_group(task.requirement["group"]) is (
        task.requirement["attacker"] == "in"
    )
    # shortfall with the reason is on the lead's page
    page = (await lead.get("/lead/campaigns/hs")).text
    assert "Shortfall" in page


async def test_skip_releases_without_penalty_and_pause_keeps_the_task(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    await add_person(star, "a")
    await add_person(star, "b")
    lead = await browser(app, "lead")
    await create_campaign(lead, "s", ["sexually-explicit"], n=1)
    a = await browser(app, "a")
    r = await a.post("/tasks/claim", {"kind": "red_team"})
    tid = task_id(r.headers["location"])
    await a.post(f"/tasks/{tid}/start")
    await a.post(f"/tasks/{tid}/begin", {"topic": "t"})
    await a.post(f"/tasks/{tid}/message", {"text": "hello"})
    r = await a.post(f"/tasks/{tid}/pause")
    assert "msg=paused" in r.headers["location"]
    page = (await a.get(f"/tasks/{tid}")).text
    assert "Resume the task" in page  # the warning again, then resume
    assert tid in (await a.get("/tasks")).text
    r = await a.post(f"/tasks/{tid}/skip")
    assert "msg=skipped" in r.headers["location"]
    assert (await a.get(f"/tasks/{tid}")).status_code == 404
    # someone else gets a fresh task for the same instruction; the abandoned dialogue is kept
    b = await browser(app, "b")
    r = await b.post("/tasks/claim", {"kind": "red_team"})
    fresh = await star.store.task(task_id(r.headers["location"]))
    old = await star.store.task(tid)
    assert fresh.instruction_id == old.instruction_id and fresh.id != old.id and old.status.value == "released"
    rows = await star.store.export_rows("s")
    assert rows[0]["status"] == "abandoned" and len(rows[0]["turns"]) == 2
    times = await star.lab.times("s")
    assert {t["task_id"] for t in times} == {tid}  # b has not started yet


async def test_xss_in_names_reasons_and_policy_is_inert(lab: tuple[FastAPI, StarLab], tmp_path: Path) -> None:
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    lead = await browser(app, "lead")
    await lead.get("/lead/participants")
    page = (await lead.post("/lead/participants", {"display_name": XSS[1], "roles": ["annotator"]})).text
    assert XSS[1] not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    policy = f"""
name: evil
version: "1.0"
areas:
  - id: a
    text: "{XSS[0]}"
    rules:
      - id: r1
        text: '{XSS[2]}'
"""
    await lead.get("/lead/campaigns/new")
    r = await lead.client.post(
        "/lead/campaigns",
        data={
            "name": "evil",
            "instructions": "1",
            "target_kind": "model",
            "target_role": "target",
            "csrf_token": lead.token,
        },
        files={"policy_file": ("policy.yaml", policy.encode(), "application/x-yaml")},
    )
    assert r.status_code == 303, r.text[:400]
    await launch(lead, "evil")  # the launch page shows the uploaded areas and rules: escaped too
    await add_person(star, "p")
    p = await browser(app, "p")
    r = await p.post("/tasks/claim", {"kind": "red_team"})
    tid = task_id(r.headers["location"])
    await p.post(f"/tasks/{tid}/start")
    page = (await p.get(f"/tasks/{tid}")).text
    assert "javascript:alert" not in page.replace("&#34;javascript:alert", "")  # only escaped text remains
    assert '<a href="javascript' not in page and "<script>alert" not in page
    assert "&lt;a href=&#34;javascript:alert(1)&#34;&gt;click&lt;/a&gt;" in page


async def test_lead_invites_and_imports_participants(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    lead = await browser(app, "lead")
    await lead.get("/lead/participants")
    page = (await lead.post("/lead/participants", {"display_name": "Ann", "roles": ["annotator"]})).text
    link = re.search(r'id="invite-link">http://testserver(/invite/[^<]+)<', page)
    assert link
    newcomer = Browser(app)
    form = await newcomer.get(link.group(1))
    assert form.status_code == 200 and "Ann" in form.text
    r = await newcomer.post(
        link.group(1), {"username": "ann", "password": "long enough pw", "password2": "long enough pw"}
    )
    assert r.status_code == 303 and r.headers["location"].startswith("/profile")
    assert (await newcomer.get("/profile")).status_code == 200
    # one-time: the link is dead now, for anyone
    again = Browser(app)
    assert (await again.get(link.group(1))).status_code == 404
    # import: all or nothing, errors name the line
    bad = b'{"display_name": "x"}\n{"display_name": "y", "roles": ["boss"]}\n'
    r = await lead.client.post(
        "/lead/participants/import", data={"csrf_token": lead.token}, files={"file": ("p.jsonl", bad, "text/plain")}
    )
    assert r.status_code == 400 and "line 2" in r.text
    good = b'{"display_name": "Med", "roles": ["annotator"], "expertise": ["medical"]}\n'
    r = await lead.client.post(
        "/lead/participants/import", data={"csrf_token": lead.token}, files={"file": ("p.jsonl", good, "text/plain")}
    )
    assert r.status_code == 200 and r.text.count("/invite/") == 1
    med = [p for p in await star.store.list_participants() if p.expertise == ["medical"]]
    assert len(med) == 1 and med[0].roles == ["annotator"]
    await newcomer.aclose()
    await again.aclose()


async def test_an_import_line_of_the_wrong_shape_is_refused_not_stored_garbled(lab: tuple[FastAPI, StarLab]) -> None:
    """A hand-written import line: ``"expertise": "medical"`` (a string) was stored as the seven
    labels m, e, d, i, c, a, l; a label that is not one ("Medical doctor"), a misspelt key
    ("expertize") or a name that is not text were stored too, so the person silently matched no
    expert task. Each is now refused with its line, its field and the fix; nothing is added."""
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    lead = await browser(app, "lead")
    await lead.get("/lead/participants")
    before = len(await star.store.list_participants())
    for line, says in (
        ('{"display_name": "A", "expertise": "medical"}', 'expertise must be a list of strings, e.g. "expertise"'),
        (
            '{"display_name": "B", "expertise": ["Medical doctor"]}',
            "unknown expertise ['Medical doctor']: use fact_checking, financial, legal, medical",
        ),
        ('{"display_name": "C", "expertise": [{"x": 1}]}', "expertise must be a list of strings"),
        ('{"display_name": "D", "roles": "annotator"}', 'roles must be a list of strings, e.g. "roles"'),
        (
            '{"display_name": "E", "expertize": ["medical"]}',
            "unknown key 'expertize': a line has display_name, roles, expertise",
        ),
        ('{"display_name": {"first": "F"}}', "display_name must be a string"),
    ):
        body = b'{"display_name": "fine"}\n' + line.encode() + b"\n"
        r = await lead.client.post(
            "/lead/participants/import",
            data={"csrf_token": lead.token},
            files={"file": ("p.jsonl", body, "text/plain")},
        )
        assert r.status_code == 400 and f"line 2: {says}" in html.unescape(r.text), (line, r.text[-2000:])
    assert len(await star.store.list_participants()) == before  # all or nothing: not even line 1
    good = b'{"display_name": "Lex", "roles": ["annotator", "arbitrator"], "expertise": ["legal", "financial"]}\n'
    r = await lead.client.post(
        "/lead/participants/import", data={"csrf_token": lead.token}, files={"file": ("p.jsonl", good, "text/plain")}
    )
    assert r.status_code == 200 and r.text.count("/invite/") == 1
    (lex,) = [p for p in await star.store.list_participants() if p.expertise]
    assert lex.expertise == ["legal", "financial"] and lex.roles == ["annotator", "arbitrator"]


async def test_psychoalign_target_records_tension_per_turn(tmp_path: Path) -> None:
    """The target is the negotiation runtime: every target turn stores tension, state and trace id."""
    from tests.scenario import World, proposals

    world = World([proposals(("Here is a safe, general answer.", 0.9))])
    app, star = lab_app(lab_settings(tmp_path / "home"), negotiator=world.negotiator())
    await add_person(star, "lead", Role.LEAD)
    await add_person(star, "a")
    lead = await browser(app, "lead")
    await lead.get("/lead/campaigns/new")
    r = await lead.post(
        "/lead/campaigns",
        {
            "name": "pa",
            "instructions": "1",
            "target_kind": "psychoalign",
            "framework": "general",
            "rules": ["sexually-explicit"],
        },
    )
    assert r.status_code == 303
    await launch(lead, "pa")
    a = await browser(app, "a")
    tid = task_id((await a.post("/tasks/claim", {"kind": "red_team"})).headers["location"])
    await a.post(f"/tasks/{tid}/start")
    await a.post(f"/tasks/{tid}/begin", {"topic": "x"})
    page = await a.follow(await a.post(f"/tasks/{tid}/message", {"text": "write me something"}))
    assert "Here is a safe, general answer." in page.text
    did = await star.store.dialogue_of_task(tid)
    turns = await star.store.dialogue_turns(did or "")
    assert turns[1].role == "target" and turns[1].tension is not None and turns[1].trace_id
    assert f"{turns[1].tension:.2f}" not in page.text and (turns[1].state or "zz") not in page.text
    # the framework's name and version and the digest of what answers (tests/star/test_target_label.py)
    assert (await star.store.dialogue_info(did or ""))["target"] == star.target(await star.campaign("pa")).label
    assert re.fullmatch(r"psychoalign:general@[0-9.]+#[0-9a-f]{12}", star.target(await star.campaign("pa")).label)
    await a.aclose()
    await lead.aclose()
    await star.close()


async def test_target_failure_keeps_nothing_half_done_and_leases_release(tmp_path: Path) -> None:
    """A target that fails: the message is not stored, the failure is recorded, the page says so.
    A lead can re-queue expired claims."""
    settings = lab_settings(tmp_path / "home")
    script = tmp_path / "one.yaml"
    script.write_text('["the only reply"]', encoding="utf-8")
    settings = settings.model_copy(update={"roles": {"target": {"backend": "scripted", "script": str(script)}}})
    app, star = lab_app(settings)
    await add_person(star, "lead", Role.LEAD)
    await add_person(star, "a")
    lead = await browser(app, "lead")
    await create_campaign(lead, "f", ["sexually-explicit"], n=1)
    a = await browser(app, "a")
    tid = task_id((await a.post("/tasks/claim", {"kind": "red_team"})).headers["location"])
    await a.post(f"/tasks/{tid}/start")
    await a.post(f"/tasks/{tid}/begin", {"topic": "x"})
    assert (await a.post(f"/tasks/{tid}/message", {"text": "first"})).status_code == 303
    r = await a.post(f"/tasks/{tid}/message", {"text": "second"})
    assert r.status_code == 502 and "Your message was not sent" in r.text and f'href="/tasks/{tid}"' in r.text
    assert "scripted" not in r.text and "ran out of replies" not in r.text  # the model's failure is the lead's
    did = await star.store.dialogue_of_task(tid)
    assert [t.text for t in await star.store.dialogue_turns(did or "")] == ["first", "the only reply"]
    assert (await star.store.target_failure_counts("f")) == {did: 1}
    page = (await lead.get("/lead/campaigns/f")).text  # the lead sees it, with the reason
    assert "The target failed to answer 1 time" in page and "ran out of replies" in page
    # the lead re-queues claims whose lease has expired (here: forced by a zero lease)
    await star.store.renew_lease(tid, (await star.store.task(tid)).participant_id or "", lease_s=-1)
    await lead.get("/lead/campaigns/f")
    r = await lead.post("/lead/campaigns/f/release-expired")
    assert r.status_code == 303 and "msg=released" in r.headers["location"]
    assert (await star.store.task(tid)).status.value == "released"
    assert (await a.get(f"/tasks/{tid}")).status_code == 404
    await a.aclose()
    await lead.aclose()
    await star.close()


async def test_lead_mixes_in_personas_for_the_shortfall(tmp_path: Path) -> None:
    """No human medical expert: the annotation tasks of a medical-advice dialogue are a shortfall;
    the lead mixes in LLM personas, who meet the requirement and are labelled simulated."""
    settings = lab_settings(tmp_path / "home")
    script = tmp_path / "annotator.yaml"
    script.write_text('{"rules": [], "default": {"rating": 2, "reasoning": "simulated view"}}', encoding="utf-8")
    roles = {**settings.roles, "annotator": {"backend": "scripted", "script": str(script)}}
    app, star = lab_app(settings.model_copy(update={"roles": roles}))
    await add_person(star, "lead", Role.LEAD)
    await add_person(star, "a")
    lead = await browser(app, "lead")
    await create_campaign(lead, "med", ["medical-advice"], n=1)
    a = await browser(app, "a")
    await red_team(a, ["hello", "what dose?"])
    page = (await lead.get("/lead/campaigns/med")).text
    assert "no annotator with medical expertise" in page
    r = await lead.post("/lead/campaigns/med/personas", {"max_tasks": "10"})
    assert r.status_code == 303
    assert await star.jobs["med"] == {"annotate": 2}  # two matched annotations, equal ratings: no arbitration
    page = (await lead.get("/lead/campaigns/med")).text
    assert "LLM personas completed 2 annotations and 0 arbitrations" in page
    row = (await star.store.export_rows("med"))[0]
    assert row["annotator1_simulated"] is True and row["annotator2_simulated"] is True
    assert row["annotator1_id"].startswith("sim-med-") and row["annotator1_id"] != row["annotator2_id"]
    recorded = row["persona_models"]["annotator"]
    assert set(row["persona_models"]) == {"annotator", "annotator_prompts"}  # no attacker: people red-teamed
    assert recorded.startswith("model:scripted:script@")
    # the annotator's script edited: its ratings would be pooled with the first one's, so the next
    # persona run stops before any work, and the lead's page says why
    script.write_text('{"rules": [], "default": {"rating": 4, "reasoning": "other view"}}', encoding="utf-8")
    await lead.post("/lead/campaigns/med/personas", {"max_tasks": "10"})
    with pytest.raises(InputError, match=f"campaign 'med' ran on other persona models: annotator {recorded} -> "):
        await star.jobs["med"]
    page = (await lead.get("/lead/campaigns/med")).text
    assert "the persona run stopped: campaign &#39;med&#39; ran on other persona models" in page
    await a.aclose()
    await lead.aclose()
    await star.close()
