"""The STAR pipeline on the store: matching, claiming, turn-by-turn dialogues, annotation, arbitration."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from psychoalign.errors import InputError
from psychoalign.star import generate_instructions, load_parameters, load_policy
from psychoalign.star.model import Participant, PreAnnotation, TaskKind, Turn
from psychoalign.star.store import ClaimError, StarStore, arbitration_needed

from .helpers import PG_URL, pg_schema

POLICY = load_policy()
SPACE = load_parameters()
RACES = ["Asian", "Black or African American", "Hispanic or Latino", "White"]
GENDERS = ["Female", "Male", "Non-binary"]


def pool(n: int = 48) -> list[Participant]:
    people = []
    for i in range(n):
        people.append(
            Participant(
                id=f"p{i:03d}",
                demographics={"race": [RACES[i % 4]], "gender": [GENDERS[(i // 4) % 3]]},
                expertise=["medical"] if i % 5 == 0 else (["fact_checking"] if i % 5 == 1 else []),
            )
        )
    return people


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[StarStore]:
    s = StarStore(f"sqlite:///{tmp_path / 'star.db'}", POLICY)
    yield s
    await s.close()


async def red_team(store: StarStore, pid: str, campaign: str = "c1") -> str:
    task = await store.claim(pid, TaskKind.RED_TEAM, campaign=campaign)
    did = await store.start_dialogue(task.id, pid, target="scripted:target")
    for i in range(3):
        await store.add_turn(did, Turn(role="red_teamer", text=f"attack {i}"))
        await store.add_turn(
            did, Turn(role="target", text=f"reply {i}", tension=0.4, state="drive_dominant", trace_id="t" * 32)
        )
    await store.finish_dialogue(did, pid, PreAnnotation(assigned_rule_broken=True, groups_mentioned=["age"]))
    return did


async def test_full_pipeline_with_arbitration_and_export(store: StarStore) -> None:
    await store.add_participants(pool())
    items = generate_instructions(POLICY, SPACE, 14, seed=1, rules=["medical-advice"])
    await store.create_campaign("c1", items)
    did = await red_team(store, "p001")
    # medical rule: only medical experts may annotate (p000, p005, p010, …)
    with pytest.raises(ClaimError, match="medical expertise"):
        await store.claim("p002", TaskKind.ANNOTATE)
    a1 = await store.claim("p000", TaskKind.ANNOTATE)
    a2 = await store.claim("p005", TaskKind.ANNOTATE)
    assert a1.dialogue_id == a2.dialogue_id == did
    assert await store.submit_annotation(a1.id, "p000", 1, "clearly gives a dangerous dose") is None
    arb_id = await store.submit_annotation(a2.id, "p005", 4, "only general advice")
    assert arb_id is not None
    # p000 and p005 saw this dialogue already; p001 red-teamed it: none of them may arbitrate
    for pid in ("p000", "p005", "p001"):
        with pytest.raises(ClaimError):
            await store.claim(pid, TaskKind.ARBITRATE)
    arb = await store.claim("p010", TaskKind.ARBITRATE)
    assert [r for r, _ in await store.reasonings(did)] == [1, 4]
    await store.submit_arbitration(arb.id, "p010", 2, "the first reasoning is right about the dose")
    rows = await store.export_rows("c1")
    assert len(rows) == 1
    row = rows[0]
    assert (row["annotator1_rating"], row["annotator2_rating"], row["arbitrator_rating"]) == (1, 4, 2)
    assert row["arbitration_needed"] is True
    assert row["rule"] == "medical-advice" and len(row["turns"]) == 6
    assert row["turns"][1]["tension"] == 0.4
    assert row["pre_annotation"]["groups_mentioned"] == ["age"]


async def test_bad_submissions_are_refused_and_store_nothing(store: StarStore) -> None:
    await store.add_participants(pool())
    await store.create_campaign("c1", generate_instructions(POLICY, SPACE, 2, seed=1, rules=["sexually-explicit"]))
    did = await red_team(store, "p000")
    a1 = await store.claim("p002", TaskKind.ANNOTATE)
    with pytest.raises(InputError, match="outside the 4-point scale"):
        await store.submit_annotation(a1.id, "p002", 5, "x")
    with pytest.raises(InputError, match="not claimed by"):
        await store.submit_annotation(a1.id, "p003", 2, "x")
    await store.submit_annotation(a1.id, "p002", 2, "probably")
    a2 = await store.claim("p003", TaskKind.ANNOTATE)
    assert await store.submit_annotation(a2.id, "p003", 3, "probably not") is None  # 1 step apart: no arbitration
    assert (await store.export_rows())[0]["arbitrator_rating"] is None
    with pytest.raises(ClaimError):
        await store.claim("p004", TaskKind.ARBITRATE)
    with pytest.raises(InputError, match="already exists"):
        await store.add_participants([pool()[0], Participant(id="new-one")])
    assert "new-one" not in {p.id for p in await store.list_participants()}
    assert did


async def test_group_matching_half_in_half_out_and_annotators_in_group(store: StarStore) -> None:
    await store.add_participants(pool(96))
    items = generate_instructions(POLICY, SPACE, 720, seed=2, rules=["hate-speech"])
    await store.create_campaign("c1", items)
    # every cell of 4 instructions gets 2 in-group and 2 out-group attacker slots
    statuses: Counter[str] = Counter()
    per_group: dict[str, Counter[str]] = {}
    async with store.engine.connect() as conn:
        from sqlalchemy import select

        from psychoalign.star.store import tasks

        rows = (await conn.execute(select(tasks.c.requirement))).all()
    import json

    for (req,) in rows:
        r = json.loads(req)
        statuses[r["attacker"]] += 1
        per_group.setdefault(json.dumps(r["group"], sort_keys=True), Counter())[r["attacker"]] += 1
    assert abs(statuses["in"] - statuses["out"]) <= 1  # 50 % in-group within rounding
    assert all(abs(c["in"] - c["out"]) <= 1 for c in per_group.values())
    # an in-group red teamer gets only in-group tasks, an out-group one only out-group tasks
    dids = []
    for pid in ("p000", "p001", "p002", "p003"):
        task = await store.claim(pid, TaskKind.RED_TEAM)
        person = await store.participant(pid)
        assert person.in_group(task.requirement["group"]) is (task.requirement["attacker"] == "in")
        did = await store.start_dialogue(task.id, pid, "t")
        await store.add_turn(did, Turn(role="red_teamer", text="x"))
        await store.finish_dialogue(did, pid, PreAnnotation(assigned_rule_broken=False))
        dids.append((did, task.requirement["group"]))
    for _ in dids:
        for _ in range(2):
            for p in pool(96):
                try:
                    t = await store.claim(p.id, TaskKind.ANNOTATE)
                except ClaimError:
                    continue
                assert p.in_group(t.requirement["group"]) is True
                await store.submit_annotation(t.id, p.id, 2, "r")
                break


async def test_unknown_demographics_and_shortfall_and_relaxation(store: StarStore) -> None:
    shy = Participant(id="shy", demographics={"race": ["prefer not to say"], "gender": ["Female"]})
    await store.add_participants([shy])
    items = generate_instructions(POLICY, SPACE, 30, seed=3, rules=["stereotypes"])
    await store.create_campaign("c1", items)
    short = await store.shortfall("c1")
    assert short and all(s["eligible_participants"] == 0 for s in short)
    race_tasks = [s for s in short if "race" in s["requirement"]["group"]]
    assert race_tasks  # nobody can take race-targeted tasks: shortfall is reported per requirement
    taken = []
    reason = ""
    for _ in range(100):  # without relaxing she only ever gets gender-only tasks she matches
        try:
            taken.append(await store.claim("shy", TaskKind.RED_TEAM))
        except ClaimError as exc:
            reason = str(exc)
            break
    assert "demographics unknown" in reason
    assert taken and all("race" not in t.requirement["group"] for t in taken)
    relaxed = await store.claim("shy", TaskKind.RED_TEAM, relax=True)
    assert relaxed.relaxed is not None and relaxed.relaxed.startswith("relaxed:")


@settings(max_examples=40, deadline=None)
@given(a=st.integers(1, 4), b=st.integers(1, 4))
def test_arbitration_iff_two_steps_apart(a: int, b: int) -> None:
    assert arbitration_needed(a, b) == (abs(a - b) >= 2)


async def test_turns_survive_a_crash_before_submission(store: StarStore) -> None:
    await store.add_participants(pool())
    await store.create_campaign("c1", generate_instructions(POLICY, SPACE, 1, seed=1, rules=["dangerous-activities"]))
    task = await store.claim("p000", TaskKind.RED_TEAM)
    did = await store.start_dialogue(task.id, "p000", "t")
    await store.add_turn(did, Turn(role="red_teamer", text="first"))
    # the worker dies here; a new store (process) resumes the same dialogue
    again = StarStore(str(store.engine.url), POLICY)
    assert await again.start_dialogue(task.id, "p000", "t") == did
    assert [t.text for t in await again.dialogue_turns(did)] == ["first"]
    await again.close()


@pytest.mark.postgres
async def test_concurrent_claiming_on_postgres_never_double_assigns() -> None:
    async with pg_schema("s") as connect_args:
        store = StarStore(PG_URL, POLICY, connect_args=connect_args, pool_size=20)
        try:
            people = [Participant(id=f"w{i}") for i in range(24)]
            await store.add_participants(people)
            await store.create_campaign(
                "c", generate_instructions(POLICY, SPACE, 60, seed=4, rules=["sexually-explicit"])
            )

            async def worker(pid: str) -> list[str]:
                got = []
                while True:
                    try:
                        got.append((await store.claim(pid, TaskKind.RED_TEAM)).id)
                    except ClaimError:
                        return got

            results = await asyncio.gather(*(worker(p.id) for p in people))
            claimed = [t for r in results for t in r]
            assert len(claimed) == 60
            assert len(set(claimed)) == 60  # nobody got a task someone else holds
        finally:
            await store.close()


async def test_batch_assignment_respects_matching_and_balances_load(store: StarStore) -> None:
    people = pool(60)
    await store.add_participants(people)
    items = generate_instructions(POLICY, SPACE, 400, seed=9)
    await store.create_campaign("c1", items)
    result = await store.assign_all(TaskKind.RED_TEAM, campaign="c1")
    assert result["assigned"] + sum(s["open_tasks"] for s in result["shortfall"]) == 400
    by_id = {p.id: p for p in people}
    from sqlalchemy import select

    from psychoalign.star.store import tasks

    async with store.engine.connect() as conn:
        rows = (await conn.execute(select(tasks.c.participant_id, tasks.c.requirement, tasks.c.status))).all()
    import json

    loads = Counter(pid for pid, _, status in rows if status == "claimed")
    for pid, req, status in rows:
        if status == "claimed":
            r = json.loads(req)
            if "attacker" in r:
                assert by_id[pid].in_group(r["group"]) is (r["attacker"] == "in")
    assert max(loads.values()) - min(loads.values()) <= max(loads.values()) // 2 + 2
    again = await store.assign_all(TaskKind.RED_TEAM, campaign="c1")
    assert again["assigned"] == 0  # nothing assigned twice


async def test_the_export_streams_in_batches_with_the_same_rows(store: StarStore) -> None:
    await store.add_participants(pool())
    await store.create_campaign("c1", generate_instructions(POLICY, SPACE, 5, seed=3, rules=["medical-advice"]))
    dialogues = [await red_team(store, f"p00{i}") for i in (1, 2, 3, 4, 6)]
    a = await store.claim("p000", TaskKind.ANNOTATE)
    await store.submit_annotation(a.id, "p000", 2, "borderline")
    whole = await store.export_rows("c1")
    assert [r["dialogue_id"] for r in whole] == dialogues  # oldest first, each once
    for batch in (1, 2, 4):  # pages that split the campaign every way
        assert [r async for r in store.iter_export_rows("c1", batch=batch)] == whole
    rated = next(r for r in whole if r["dialogue_id"] == a.dialogue_id)
    assert rated["annotator1_rating"] == 2 and rated["annotator1_required"] is None
    assert all(len(r["turns"]) == 6 for r in whole)
