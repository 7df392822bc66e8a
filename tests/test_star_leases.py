"""STAR store: leases that expire, re-queueing, out-group annotator slots, honest shortfall."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select

from psychoalign.errors import InputError
from psychoalign.star import generate_instructions, load_parameters, load_policy
from psychoalign.star.model import Participant, PreAnnotation, TaskKind, TaskStatus, Turn
from psychoalign.star.store import ClaimError, StarStore, tasks

from .helpers import PG_URL, pg_schema

POLICY = load_policy()
SPACE = load_parameters()


class Clock:
    """A clock the test moves: no sleeping, no timing."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path, clock: Clock) -> AsyncIterator[StarStore]:
    if request.param == "sqlite":
        s = StarStore(f"sqlite:///{tmp_path / 'star.db'}", POLICY, lease_s=60, clock=clock)
        yield s
        await s.close()
        return
    async with pg_schema("l") as connect_args:
        s = StarStore(PG_URL, POLICY, lease_s=60, clock=clock, connect_args=connect_args)
        try:
            yield s
        finally:
            await s.close()


def person(pid: str, race: str = "White", gender: str = "Female") -> Participant:
    return Participant(id=pid, demographics={"race": [race], "gender": [gender]})


async def test_an_expired_red_team_lease_requeues_the_instruction(store: StarStore, clock: Clock) -> None:
    await store.add_participants([person("a"), person("b")])
    await store.create_campaign("c", generate_instructions(POLICY, SPACE, 1, seed=1, rules=["sexually-explicit"]))
    task = await store.claim("a", TaskKind.RED_TEAM, campaign="c")
    assert task.lease_expires_at == clock.now + timedelta(seconds=60)
    did = await store.start_dialogue(task.id, "a", "t")
    await store.add_turn(did, Turn(role="red_teamer", text="first"))
    clock.advance(59)  # a turn renewed the lease: still held
    with pytest.raises(ClaimError):
        await store.claim("b", TaskKind.RED_TEAM, campaign="c")
    clock.advance(61)  # the holder vanished (kill -9, closed tab)
    again = await store.claim("b", TaskKind.RED_TEAM, campaign="c")
    assert again.id != task.id and again.instruction_id == task.instruction_id
    assert (await store.task(task.id)).status is TaskStatus.RELEASED
    with pytest.raises(InputError, match="not in progress"):
        await store.add_turn(did, Turn(role="red_teamer", text="too late"))
    with pytest.raises(InputError):
        await store.finish_dialogue(did, "a", PreAnnotation(assigned_rule_broken=False))
    rows = await store.export_rows("c")
    assert [r["status"] for r in rows] == ["abandoned"]
    assert [t["text"] for t in rows[0]["turns"]] == ["first"]  # nothing stored is lost


async def test_an_expired_annotation_goes_back_to_others_but_not_to_its_holder(store: StarStore, clock: Clock) -> None:
    await store.add_participants([person(p) for p in ("a", "b", "c", "d")])
    await store.create_campaign("c", generate_instructions(POLICY, SPACE, 1, seed=1, rules=["sexually-explicit"]))
    task = await store.claim("a", TaskKind.RED_TEAM, campaign="c")
    did = await store.start_dialogue(task.id, "a", "t")
    await store.add_turns(did, [Turn(role="red_teamer", text="x"), Turn(role="target", text="y")])
    await store.finish_dialogue(did, "a", PreAnnotation(assigned_rule_broken=False))
    held = await store.claim("b", TaskKind.ANNOTATE, campaign="c")
    await store.claim("c", TaskKind.ANNOTATE, campaign="c")
    clock.advance(120)
    assert await store.expire_leases("c") == 2
    assert (await store.task(held.id)).status is TaskStatus.OPEN
    with pytest.raises(ClaimError, match="already saw"):
        await store.claim("b", TaskKind.ANNOTATE, campaign="c")
    got = await store.claim("d", TaskKind.ANNOTATE, campaign="c")
    assert got.dialogue_id == did
    short = await store.shortfall("c")
    assert short == [
        {
            "kind": "annotate",
            "requirement": {"matching": "none"},
            "reason": "every eligible participant has already seen the dialogue",
            "open_tasks": 1,
            "eligible_participants": 4,
        }
    ]


async def test_outgroup_annotator_share_opens_in_and_out_slots(store: StarStore) -> None:
    people = [person(f"w{i}", "White", "Female") for i in range(4)] + [
        person(f"b{i}", "Black or African American", "Male") for i in range(4)
    ]
    await store.add_participants(people)
    items = [i for i in generate_instructions(POLICY, SPACE, 200, seed=5, rules=["hate-speech"]) if i.target_group]
    items = [i for i in items if i.target_group == {"race": "White"}][:4]
    await store.create_campaign("c", items, outgroup_annotator_share=0.5)
    assert (await store.campaign_settings("c")).outgroup_annotator_share == 0.5
    dialogues = []
    for pid in ("w0", "b0", "w1", "b1"):
        task = await store.claim(pid, TaskKind.RED_TEAM, campaign="c")
        did = await store.start_dialogue(task.id, pid, "t")
        await store.add_turn(did, Turn(role="red_teamer", text="x"))
        await store.finish_dialogue(did, pid, PreAnnotation(assigned_rule_broken=False))
        dialogues.append(did)
    async with store.engine.connect() as conn:
        reqs = [
            json.loads(r[0])
            for r in (await conn.execute(select(tasks.c.requirement).where(tasks.c.kind == "annotate"))).all()
        ]
    assert sorted(r["annotator"] for r in reqs) == ["in"] * 4 + ["out"] * 4  # 50/50, one of each per dialogue
    result = await store.assign_all(TaskKind.ANNOTATE, campaign="c")
    assert result["assigned"] == 8 and result["shortfall"] == []
    for task_id, pid in result["assignments"].items():
        await store.submit_annotation(task_id, pid, 3, "probably fine")
    for row in await store.export_rows("c"):
        for i in (1, 2):
            assert row[f"annotator{i}_in_group"] is (row[f"annotator{i}_required"] == "in")
        assert {row["annotator1_required"], row["annotator2_required"]} == {"in", "out"}


async def test_unknown_demographics_take_neither_slot(store: StarStore) -> None:
    from psychoalign.star.matching import eligible

    shy = Participant(id="shy", demographics={"race": ["prefer not to say"]})
    out_slot = {"matching": "demographic", "group": {"race": "White"}, "annotator": "out"}
    assert eligible(shy, TaskKind.ANNOTATE, out_slot) == (False, "demographics unknown for the targeted group")
    assert eligible(person("w"), TaskKind.ANNOTATE, out_slot) == (False, "task needs an out-group annotator")
    assert eligible(person("b", "Asian"), TaskKind.ANNOTATE, out_slot) == (True, "")
    assert (
        eligible(person("b", "Asian"), TaskKind.ARBITRATE, {k: v for k, v in out_slot.items() if k != "annotator"})[0]
        is False
    )


async def test_balanced_batch_assignment_with_a_cap(store: StarStore) -> None:
    await store.add_participants([person(f"p{i}") for i in range(7)])
    await store.create_campaign("c", generate_instructions(POLICY, SPACE, 30, seed=2, rules=["sexually-explicit"]))
    result = await store.assign_all(TaskKind.RED_TEAM, campaign="c", participant_ids=[f"p{i}" for i in range(6)])
    loads = {pid: list(result["assignments"].values()).count(pid) for pid in (f"p{i}" for i in range(7))}
    assert loads["p6"] == 0 and {loads[f"p{i}"] for i in range(6)} == {5}
    await store.create_campaign("d", generate_instructions(POLICY, SPACE, 10, seed=3, rules=["sexually-explicit"]))
    capped = await store.assign_all(TaskKind.RED_TEAM, campaign="d", max_per_participant=1)
    assert capped["assigned"] == 7
    assert capped["shortfall"][0]["reason"] == "every eligible participant is at the per-participant limit"
    await store.create_campaign("e", generate_instructions(POLICY, SPACE, 10, seed=5, rules=["sexually-explicit"]))
    first = await store.assign_all(TaskKind.RED_TEAM, campaign="e", limit=4)
    assert first["assigned"] == 4 and len(set(first["assignments"].values())) == 4  # a round: one each


async def test_a_store_from_before_leases_gains_the_column(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    first = StarStore(f"sqlite:///{path}", POLICY)
    await first.init()
    await first.close()
    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:  # an old store had neither the column nor the indexes on it
        conn.exec_driver_sql("DROP INDEX ix_star_tasks_lease")
        conn.exec_driver_sql("ALTER TABLE star_tasks DROP COLUMN lease_expires_at")
    again = StarStore(f"sqlite:///{path}", POLICY)
    await again.add_participants([person("a")])
    await again.create_campaign("c", generate_instructions(POLICY, SPACE, 1, seed=1, rules=["sexually-explicit"]))
    assert (await again.claim("a", TaskKind.RED_TEAM)).lease_expires_at is not None
    await again.close()
    with engine.connect() as conn:  # and gains the index too
        names = {r[0] for r in conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'index'")}
    engine.dispose()
    assert {"ix_star_tasks_lease", "ix_star_tasks_queue", "ix_star_tasks_holder"} <= names


async def test_declines_quotas_and_people_shortfall(store: StarStore) -> None:
    """On both databases: a declined instruction is never offered to its decliner again (claim and
    batch), a per-person quota moves the next claim to another campaign, and a dialogue's two
    annotation tasks count as a shortfall of one when one eligible annotator is left."""
    doc = Participant(id="doc", expertise=["medical"], roles=["annotator"])
    await store.add_participants([person("a"), person("b"), doc])
    await store.create_campaign("c", generate_instructions(POLICY, SPACE, 2, seed=1, rules=["sexually-explicit"]))
    first = await store.claim("a", TaskKind.RED_TEAM, campaign="c")
    await store.release(first.id, "a", decline=True)
    second = await store.claim("a", TaskKind.RED_TEAM, campaign="c")
    assert second.instruction_id != first.instruction_id
    await store.release(second.id, "a", decline=True)
    with pytest.raises(ClaimError, match="skipped this instruction"):
        await store.claim("a", TaskKind.RED_TEAM, campaign="c")
    assert (await store.assign_all(TaskKind.RED_TEAM, campaign="c", participant_ids=["a"]))["assigned"] == 0
    await store.create_campaign(
        "q",
        generate_instructions(POLICY, SPACE, 3, seed=2, rules=["medical-advice"]),
        quota={"red_team": 1},
    )
    for pid in ("b", "a"):
        mine = await store.claim(pid, TaskKind.RED_TEAM, campaign="q")
        did = await store.start_dialogue(mine.id, pid, "t")
        await store.add_turns(did, [Turn(role="red_teamer", text="q"), Turn(role="target", text="a")])
        await store.finish_dialogue(did, pid, PreAnnotation(assigned_rule_broken=False))
    nxt = await store.claim("b", TaskKind.RED_TEAM)  # q's quota reached: c's task instead
    assert nxt.campaign == "c"
    short = await store.shortfall("q")
    assert {(s["kind"], s["open_tasks"], s["reason"]) for s in short} == {
        (
            "annotate",
            2,
            "too few eligible participants who have not seen the dialogue (each task needs another person)",
        ),
        ("red_team", 1, "every eligible participant reached the campaign's per-person quota"),
    }
    with pytest.raises(InputError, match="set when it is created"):
        await store.update_campaign_settings("q", quota={})
