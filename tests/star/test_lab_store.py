"""The lab store's contract (:class:`~psychoalign.star.lab_store.LabStore`), held against both
implementations beside their STAR store: in memory, on SQLite and on PostgreSQL. Campaign
settings are stored once and listed oldest first; a participant's time on a task runs from start
to stop, resumes, ignores a stale stop, and reads as working, paused, done or skipped."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from psychoalign.errors import InputError
from psychoalign.star import generate_instructions, load_parameters, load_policy
from psychoalign.star.lab_store import (
    MAX_DRAFT,
    InMemoryLabStore,
    LabCampaignSettings,
    LabStore,
    SQLLabStore,
    TaskTime,
)
from psychoalign.star.model import Participant, PreAnnotation, TaskKind, Turn
from psychoalign.star.store import InMemoryStarStore, SQLStarStore, StarStore
from tests.helpers import PG_URL, pg_schema

POLICY = load_policy()
SPACE = load_parameters()


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[StarStore, LabStore]]:
    if request.param == "memory":
        star = InMemoryStarStore(POLICY)
        yield star, InMemoryLabStore(star)
        return
    if request.param == "sqlite":
        sql = SQLStarStore(f"sqlite:///{tmp_path / 'lab.db'}", POLICY)
        yield sql, SQLLabStore(sql.engine)
        await sql.close()
        return
    async with pg_schema("lab") as connect_args:
        sql = SQLStarStore(PG_URL, POLICY, connect_args=connect_args)
        try:
            yield sql, SQLLabStore(sql.engine)
        finally:
            await sql.close()


async def _campaign(star: StarStore, *people: str, instructions: int = 4) -> None:
    await star.add_participants([Participant(id=p) for p in people])
    rules = ["sexually-explicit"]  # anyone with the role may take every task
    await star.create_campaign("c", generate_instructions(POLICY, SPACE, instructions, seed=1, rules=rules))


async def test_campaign_settings_are_stored_once_and_listed_oldest_first(stores: tuple[StarStore, LabStore]) -> None:
    _, lab = stores
    await lab.init()
    first = datetime(2026, 1, 1, tzinfo=UTC)
    newer = LabCampaignSettings(name="newer", seed=2, rules=["hate-speech"], created_at=first + timedelta(days=1))
    older = LabCampaignSettings(name="older", instructions=8, created_by="lead", created_at=first)
    await lab.save_campaign(newer)
    await lab.save_campaign(older)
    assert await lab.campaign("older") == older and await lab.campaign("nowhere") is None
    assert [c.name for c in await lab.campaigns()] == ["older", "newer"]
    with pytest.raises(InputError, match="a campaign named 'older' exists"):
        await lab.save_campaign(LabCampaignSettings(name="older"))
    assert await lab.campaign("older") == older  # unchanged


async def test_time_runs_from_start_to_stop_resumes_and_ignores_a_stale_stop(
    stores: tuple[StarStore, LabStore],
) -> None:
    star, lab = stores
    await _campaign(star, "a", "b")
    task = await star.claim("a", TaskKind.RED_TEAM, campaign="c")
    assert await lab.held(task.id, "a") == (task, None)  # held, not started
    assert await lab.held(task.id, "b") is None and await lab.held("nope", "a") is None
    assert await lab.time(task.id, "a") is None
    await lab.start(task.id, "a", "c", "red_team")
    running = await lab.time(task.id, "a")
    assert running is not None and running.active_since is not None and running.campaign == "c"
    held = await lab.held(task.id, "a")
    assert held is not None and held[0] == task
    assert held[1] is not None and held[1].active_since == running.active_since and held[1].campaign == ""
    await lab.start(task.id, "a", "c", "red_team")  # started again: the running clock is kept
    assert await lab.time(task.id, "a") == running
    await lab.stop(task.id, "a", running)
    paused = await lab.time(task.id, "a")
    assert paused is not None and paused.active_since is None and paused.seconds >= 0.0
    await lab.stop(task.id, "a")  # nothing runs: a no-op
    assert await lab.time(task.id, "a") == paused
    await lab.start(task.id, "a", "c", "red_team", paused)  # resume
    resumed = await lab.time(task.id, "a")
    assert resumed is not None and resumed.active_since is not None and resumed.started_at == running.started_at
    stale = resumed.model_copy(update={"active_since": datetime(2000, 1, 1, tzinfo=UTC)})
    await lab.stop(task.id, "a", stale)  # read before the resume: changes nothing
    assert await lab.time(task.id, "a") == resumed
    await star.release(task.id, "a")
    assert await lab.held(task.id, "a") is None  # given back: no longer theirs


async def test_times_say_where_each_task_stands_and_topics_are_kept(stores: tuple[StarStore, LabStore]) -> None:
    star, lab = stores
    await _campaign(star, "done", "skip", "work", "pause")
    tasks = {pid: await star.claim(pid, TaskKind.RED_TEAM, campaign="c") for pid in ("done", "skip", "work", "pause")}
    for pid, task in tasks.items():
        await lab.start(task.id, pid, "c", "red_team")
    await lab.set_topic(tasks["done"].id, "done", "a joke about age")
    await lab.set_topic("not-started", "done", "ignored")  # no time row: a no-op
    dialogue = await star.start_dialogue(tasks["done"].id, "done", "scripted")
    await star.add_turns(dialogue, [Turn(role="red_teamer", text="hi"), Turn(role="target", text="no")])
    await star.finish_dialogue(dialogue, "done", PreAnnotation(assigned_rule_broken=False))
    await lab.stop(tasks["done"].id, "done")
    await star.release(tasks["skip"].id, "skip")
    await lab.stop(tasks["pause"].id, "pause")
    rows = {r["participant_id"]: r for r in await lab.times("c")}
    assert {p: (r["state"], r["running"]) for p, r in rows.items()} == {
        "done": ("done", False),
        "skip": ("skipped", True),
        "work": ("working", True),
        "pause": ("paused", False),
    }
    assert all(r["kind"] == "red_team" and r["task_id"] == tasks[p].id for p, r in rows.items())
    assert all(r["dialogue_id"] is None and r["seconds"] >= 0.0 for r in rows.values())
    assert all(isinstance(r["started_at"], datetime) and r["started_at"].tzinfo for r in rows.values())
    assert rows["done"]["topic"] == "a joke about age" and rows["work"]["topic"] is None
    assert await lab.topics("c") == {tasks["done"].id: "a joke about age"}
    assert await lab.times("other") == [] and await lab.topics("other") == {}


def test_task_time_counts_the_running_stretch() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    time = TaskTime(task_id="t", participant_id="p", started_at=start, active_since=start, seconds=5.0)
    assert time.total(start + timedelta(seconds=10)) == 15.0
    assert time.model_copy(update={"active_since": None}).total(start + timedelta(days=1)) == 5.0


async def test_a_draft_is_kept_replaced_and_forgotten_per_task_and_person(stores: tuple[StarStore, LabStore]) -> None:
    _, lab = stores
    await lab.init()
    assert await lab.draft("t1", "p1") is None
    first = await lab.save_draft("t1", "p1", None, "half a thought")
    assert (await lab.draft("t1", "p1")) == first and first.rating is None
    await lab.save_draft("t1", "p1", 3, "a whole thought \u202e kept as typed")
    await lab.save_draft("t1", "p2", 1, "someone else's")
    mine = await lab.draft("t1", "p1")
    assert mine is not None and (mine.rating, mine.text) == (3, "a whole thought \u202e kept as typed")
    assert mine.updated_at.tzinfo is not None
    huge = await lab.save_draft("t2", "p1", None, "x" * (MAX_DRAFT + 10))
    assert len(huge.text) == MAX_DRAFT
    await lab.delete_draft("t1", "p1")
    assert await lab.draft("t1", "p1") is None and await lab.draft("t1", "p2") is not None


async def test_done_since_counts_submitted_tasks_per_kind(stores: tuple[StarStore, LabStore]) -> None:
    star, lab = stores
    await _campaign(star, "red", "ann")
    task = await star.claim("red", TaskKind.RED_TEAM, campaign="c")
    dialogue = await star.start_dialogue(task.id, "red", "scripted")
    await star.add_turns(dialogue, [Turn(role="red_teamer", text="hi"), Turn(role="target", text="no")])
    before = datetime.now(UTC) - timedelta(minutes=1)
    assert await lab.done_since("red", before) == {}
    await star.finish_dialogue(dialogue, "red", PreAnnotation(assigned_rule_broken=False))
    annotation = await star.claim("ann", TaskKind.ANNOTATE, campaign="c")
    await star.submit_annotation(annotation.id, "ann", 2, "it refused")
    assert await lab.done_since("red", before) == {"red_team": 1}
    assert await lab.done_since("ann", before) == {"annotate": 1}


async def test_lab_export_rows_carry_the_topic_and_each_persons_seconds(stores: tuple[StarStore, LabStore]) -> None:
    """The lab's columns on the store's rows, per campaign: the red teamer's topic and seconds, each
    annotator's seconds on the dialogue, null where nothing was recorded; a campaign the lab never
    timed still carries every column, so the export has one schema."""
    from psychoalign.star.lab_store import LAB_EXPORT_COLUMNS, lab_export_rows

    star, lab = stores
    await _campaign(star, "red", "ann", "other", instructions=1)
    task = await star.claim("red", TaskKind.RED_TEAM, campaign="c")
    await lab.start(task.id, "red", "c", "red_team")
    await lab.set_topic(task.id, "red", "a joke about age")
    dialogue = await star.start_dialogue(task.id, "red", "scripted")
    await star.add_turns(dialogue, [Turn(role="red_teamer", text="hi"), Turn(role="target", text="no")])
    await star.finish_dialogue(dialogue, "red", PreAnnotation(assigned_rule_broken=False))
    await lab.stop(task.id, "red")
    rating = await star.claim("ann", TaskKind.ANNOTATE, campaign="c")
    await lab.start(rating.id, "ann", "c", "annotate")
    await star.submit_annotation(rating.id, "ann", 2, "it refused")
    await lab.stop(rating.id, "ann")
    times = {t["participant_id"]: t["seconds"] for t in await lab.times("c")}
    await star.create_campaign("untimed", generate_instructions(POLICY, SPACE, 1, seed=2, rules=["sexually-explicit"]))
    other = await star.claim("other", TaskKind.RED_TEAM, campaign="untimed")
    untimed = await star.start_dialogue(other.id, "other", "scripted")
    await star.add_turns(untimed, [Turn(role="red_teamer", text="hi"), Turn(role="target", text="no")])

    (row,) = [r async for r in lab_export_rows(star, lab, "c")]
    assert row["committed_topic"] == "a joke about age" and row["red_team_seconds"] == times["red"]
    assert row["annotator1_id"] == "ann" and row["annotator1_seconds"] == times["ann"]
    assert row["annotator2_seconds"] is None and row["arbitrator_seconds"] is None  # not rated, not arbitrated
    every = {r["campaign"]: r async for r in lab_export_rows(star, lab)}
    assert set(every) == {"c", "untimed"} and every["c"] == row
    assert {k: every["untimed"][k] for k in LAB_EXPORT_COLUMNS} == dict.fromkeys(LAB_EXPORT_COLUMNS)
