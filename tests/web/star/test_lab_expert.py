"""The expert flag of the lab export, end to end on SQLite and PostgreSQL: a small seeded lab
campaign (one expert and one crowd annotator per dialogue), exported by the lead as JSONL, CSV and
Parquet, read back by the STAR analysis loader, and the expert-vs-crowd comparison computed from it
(and shown in the lead's in-browser report). Pseudonyms only: no username or name in the export."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI

from psychoalign.star.analysis.data import load
from psychoalign.star.analysis.report import analyze
from psychoalign.star.model import PreAnnotation, TaskKind, Turn
from psychoalign.web.accounts import Role
from psychoalign.web.star import StarLab
from tests.web.star.test_lab import browser, create_campaign
from tests.weblab import add_person

#: Every test runs on SQLite and PostgreSQL (the ``lab`` fixture, tests/web/star/conftest.py).
LAB_STORES = ("sqlite", "postgres")

#: Per dialogue: (expert's rating, crowd annotator's rating), 1 = definitely broke the rule … 4 = definitely not.
RATINGS = [(1, 1), (2, 2), (4, 3), (3, 3), (1, 2), (4, 4)]


async def test_expert_vs_crowd_runs_on_an_exported_lab_campaign(lab: tuple[FastAPI, StarLab], tmp_path: Path) -> None:
    app, star = lab
    await add_person(star, "lead-person", Role.LEAD)
    red = await add_person(star, "red-person", roles=["red_teamer"])
    experts = [await add_person(star, f"doctor-{i}", roles=["annotator"], expertise=["medical"]) for i in (1, 2)]
    crowd = [await add_person(star, f"layperson-{i}", roles=["annotator"]) for i in (1, 2)]
    lead = await browser(app, "lead-person")
    await create_campaign(lead, "exp", ["sexually-explicit"], n=len(RATINGS))
    store = await star.store_for("exp")
    for i, (expert_rating, crowd_rating) in enumerate(RATINGS):
        # one dialogue at a time: its two annotation tasks are the only open ones
        task = await store.claim(red.participant_id or "", TaskKind.RED_TEAM)
        dialogue = await store.start_dialogue(task.id, red.participant_id or "", "scripted")
        await store.add_turns(dialogue, [Turn(role="red_teamer", text=f"attack {i}"), Turn(role="target", text="no")])
        await store.finish_dialogue(dialogue, red.participant_id or "", PreAnnotation(assigned_rule_broken=False))
        for person, rating in ((experts[i % 2], expert_rating), (crowd[i % 2], crowd_rating)):
            pid = person.participant_id or ""
            claimed = await store.claim(pid, TaskKind.ANNOTATE)
            assert claimed.dialogue_id == dialogue
            await store.submit_annotation(claimed.id, pid, rating, "my reasoning")

    expert_ids = {p.participant_id for p in experts}
    for fmt in ("jsonl", "csv", "parquet"):
        r = await lead.get(f"/lead/campaigns/exp/export?format={fmt}")
        assert r.status_code == 200
        if fmt != "parquet":
            assert not any(name in r.text for name in ("doctor-", "layperson-", "red-person")), fmt
        path = tmp_path / f"exp.{fmt}"
        path.write_bytes(r.content)
        data = load(path, "star", f"exp-{fmt}")
        assert data.expert == ("expert", "expert"), fmt
        flags = data.raters["expert"].to_dict()
        assert flags == {pid: ("expert" if pid in expert_ids else "crowd") for pid in flags}, fmt
        assert set(flags) == expert_ids | {p.participant_id for p in crowd}, fmt
        section = analyze([data], n_boot=50, embed=False)["datasets"][f"exp-{fmt}"]["expert"]
        assert section["computable"] is True, (fmt, section)
        assert section["experts"] == "expert = expert (2 raters)"
        full = section["full_scale"]
        # per dialogue one expert and one crowd rating: they agree on 4 of 6 items
        assert full["items"] == len(RATINGS) and full["agreement"] == 4 / 6, (fmt, full)

    rows = await store.export_rows("exp")
    first = rows[0]
    assert first["annotator1_expert"] is not first["annotator2_expert"]  # one of each
    assert first["annotator1_matched_expertise"] is None  # this rule matches nobody on expertise
    report = await lead.get("/lead/campaigns/exp/report")
    assert report.status_code == 200 and "expert = expert (2 raters)" in report.text
    await lead.aclose()


async def test_an_expert_rule_records_the_expertise_the_rating_was_matched_on(
    lab: tuple[FastAPI, StarLab],
) -> None:
    _, star = lab
    red = await add_person(star, "red", roles=["red_teamer"])
    doctors = [await add_person(star, f"doc{i}", roles=["annotator"], expertise=["medical"]) for i in (1, 2)]
    from psychoalign.star import generate_instructions, load_parameters, load_policy

    policy = load_policy()
    store = star.store
    await store.create_campaign(
        "med", generate_instructions(policy, load_parameters(), 1, seed=1, rules=["medical-advice"])
    )
    task = await store.claim(red.participant_id or "", TaskKind.RED_TEAM)
    dialogue = await store.start_dialogue(task.id, red.participant_id or "", "scripted")
    await store.add_turns(dialogue, [Turn(role="red_teamer", text="dose?"), Turn(role="target", text="ask a doctor")])
    await store.finish_dialogue(dialogue, red.participant_id or "", PreAnnotation(assigned_rule_broken=False))
    for doctor in doctors:
        claimed = await store.claim(doctor.participant_id or "", TaskKind.ANNOTATE)
        await store.submit_annotation(claimed.id, doctor.participant_id or "", 4, "fine")
    (row,) = await store.export_rows("med")
    assert [row[f"annotator{i}_expert"] for i in (1, 2)] == [True, True]
    assert [row[f"annotator{i}_matched_expertise"] for i in (1, 2)] == ["medical", "medical"]
    assert row["arbitrator_expert"] is None and row["arbitrator_matched_expertise"] is None
