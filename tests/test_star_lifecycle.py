"""STAR store: a campaign's lifecycle (open / paused / closed) on SQLite and PostgreSQL: paused
campaigns' tasks are skipped by claims and batch assignment but held ones may be finished, closing
releases held tasks and refuses submissions and is final, older stores gain the column with
nothing lost, and a pause landing between a claim's queue read and its take rolls the claim back."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, select

from psychoalign.errors import InputError
from psychoalign.star import generate_instructions, load_parameters, load_policy
from psychoalign.star.model import Participant, PreAnnotation, TaskKind, Turn
from psychoalign.star.store import CampaignClosedError, ClaimError, StarStore, campaign_rows, dialogues, tasks

from .helpers import PG_URL, pg_schema

POLICY = load_policy()
SPACE = load_parameters()
RULE = ["sexually-explicit"]  # no group, no expertise: anyone with the role may take every task


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StarStore]:
    if request.param == "sqlite":
        s = StarStore(f"sqlite:///{tmp_path / 'star.db'}", POLICY)
        yield s
        await s.close()
        return
    async with pg_schema("lc") as connect_args:
        s = StarStore(PG_URL, POLICY, connect_args=connect_args)
        try:
            yield s
        finally:
            await s.close()


def people(*ids: str) -> list[Participant]:
    return [Participant(id=i, demographics={"race": ["White"], "gender": ["Female"]}) for i in ids]


async def red_team(store: StarStore, pid: str, task_id: str) -> str:
    dialogue = await store.start_dialogue(task_id, pid, "scripted")
    await store.add_turns(dialogue, [Turn(role="red_teamer", text="hi"), Turn(role="target", text="no")])
    return dialogue


async def test_a_claim_skips_paused_campaigns_and_takes_them_again_on_resume(store: StarStore) -> None:
    await store.add_participants(people("a", "b", "c"))
    await store.create_campaign("old", generate_instructions(POLICY, SPACE, 2, seed=1, rules=RULE))
    await store.create_campaign("new", generate_instructions(POLICY, SPACE, 2, seed=2, rules=RULE))
    assert await store.campaign_statuses(["old", "new", "legacy"]) == {"old": "open", "new": "open", "legacy": "open"}
    held = await store.claim("a", TaskKind.RED_TEAM)
    assert held.campaign == "old"  # oldest first while both are open
    assert await store.set_campaign_status("old", "paused") == []
    assert await store.campaign_status("old") == "paused"
    # the older campaign's remaining open task is skipped: the claim takes the newer campaign's
    assert (await store.claim("b", TaskKind.RED_TEAM)).campaign == "new"
    with pytest.raises(ClaimError):
        await store.claim("c", TaskKind.RED_TEAM, campaign="old")
    # a batch assignment leaves the paused campaign alone too
    batch = await store.assign_all(TaskKind.RED_TEAM, participant_ids=["c"])
    assert {(await store.task(t)).campaign for t in batch["assignments"]} == {"new"}
    assert (await store.task_counts("old"))["red_team"] == {"open": 1, "claimed": 1}
    # the task held when the campaign was paused is finished and opens its annotations
    dialogue = await red_team(store, "a", held.id)
    opened = await store.finish_dialogue(dialogue, "a", PreAnnotation(assigned_rule_broken=True))
    assert len(opened) == 2
    with pytest.raises(ClaimError):  # the annotations wait for the campaign to resume
        await store.claim("b", TaskKind.ANNOTATE)
    await store.set_campaign_status("old", "open")
    assert (await store.claim("b", TaskKind.ANNOTATE)).campaign == "old"
    assert (await store.claim("c", TaskKind.RED_TEAM)).campaign == "old"


async def test_closing_releases_held_tasks_refuses_submissions_and_is_final(store: StarStore) -> None:
    await store.add_participants(people("a", "b", "c", "d"))
    await store.create_campaign("c1", generate_instructions(POLICY, SPACE, 3, seed=1, rules=RULE))
    first = await store.claim("a", TaskKind.RED_TEAM, campaign="c1")
    dialogue = await red_team(store, "a", first.id)
    await store.finish_dialogue(dialogue, "a", PreAnnotation(assigned_rule_broken=True))
    annotation = await store.claim("b", TaskKind.ANNOTATE)
    started = await store.claim("c", TaskKind.RED_TEAM)  # a dialogue under way when the lead closes
    started_dialogue = await red_team(store, "c", started.id)
    untouched = await store.claim("d", TaskKind.RED_TEAM)  # claimed, never started
    released = await store.set_campaign_status("c1", "closed")
    assert sorted(released) == sorted([(annotation.id, "b"), (started.id, "c"), (untouched.id, "d")])
    assert await store.claimed_tasks("b") == [] and await store.claimed_tasks("c") == []
    assert (await store.dialogue_info(started_dialogue))["status"] == "abandoned"  # its turns kept
    assert len(await store.dialogue_turns(started_dialogue)) == 2
    # submissions are refused with the reason, whatever the task's state
    with pytest.raises(CampaignClosedError, match="closed by its lead"):
        await store.submit_annotation(annotation.id, "b", 1, "it broke the rule")
    with pytest.raises(CampaignClosedError):
        await store.add_turns(started_dialogue, [Turn(role="red_teamer", text="more")])
    with pytest.raises(CampaignClosedError):
        await store.finish_dialogue(started_dialogue, "c", PreAnnotation(assigned_rule_broken=False))
    with pytest.raises(CampaignClosedError):
        await store.start_dialogue(untouched.id, "d", "scripted")
    for kind in (TaskKind.RED_TEAM, TaskKind.ANNOTATE):
        with pytest.raises(ClaimError):
            await store.claim("b", kind)
    assert (await store.assign_all(TaskKind.ANNOTATE))["assigned"] == 0
    # final: neither resumed nor paused; closing again is a no-op that releases nothing more
    for status in ("open", "paused"):
        with pytest.raises(InputError, match="final"):
            await store.set_campaign_status("c1", status)
    assert await store.set_campaign_status("c1", "closed") == []
    assert await store.campaign_status("c1") == "closed"
    # the submitted work stays in the export
    rows = await store.export_rows("c1")
    assert {r["status"] for r in rows} == {"submitted", "abandoned"}
    with pytest.raises(InputError, match="unknown campaign status"):
        await store.set_campaign_status("c1", "archived")
    with pytest.raises(InputError, match="no campaign"):
        await store.set_campaign_status("nowhere", "paused")


async def test_a_pause_between_the_queue_read_and_the_take_rolls_the_claim_back(
    store: StarStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No timing: the pause is made inside the claim, after it read the queue (the quota check
    runs between the read and the take), so the take must see it and give the task back."""
    await store.add_participants(people("a"))
    await store.create_campaign("first", generate_instructions(POLICY, SPACE, 1, seed=1, rules=RULE))
    await store.create_campaign("second", generate_instructions(POLICY, SPACE, 1, seed=2, rules=RULE))
    original = store._at_quota
    paused: list[str] = []

    async def pause_meanwhile(*args: Any) -> set[str]:
        if not paused:
            paused.append("first")
            await store.set_campaign_status("first", "paused")
        return await original(*args)

    monkeypatch.setattr(store, "_at_quota", pause_meanwhile)
    taken = await store.claim("a", TaskKind.RED_TEAM)
    assert paused == ["first"] and taken.campaign == "second"
    assert (await store.task_counts("first"))["red_team"] == {"open": 1}  # rolled back, nothing held


async def test_a_store_from_before_statuses_gains_the_column_and_loses_nothing(store: StarStore) -> None:
    await store.add_participants(people("a", "b"))
    await store.create_campaign("c", generate_instructions(POLICY, SPACE, 2, seed=1, rules=RULE), quota={"red_team": 1})
    await store.update_campaign_settings("c", relax_red_team=True)
    held = await store.claim("a", TaskKind.RED_TEAM)
    async with store.engine.begin() as conn:  # an older store: star_campaigns without the columns
        await conn.exec_driver_sql("ALTER TABLE star_campaigns DROP COLUMN status")
        await conn.exec_driver_sql("ALTER TABLE star_campaigns DROP COLUMN members_only")
    url = store.engine.url.render_as_string(hide_password=False)
    kwargs: dict[str, Any] = {}
    if store.engine.dialect.name == "postgresql":
        schema = await _scalar(store, "SELECT current_schema()")
        kwargs["connect_args"] = {"server_settings": {"search_path": schema}}
    again = StarStore(url, POLICY, **kwargs)
    try:
        assert await again.campaign_status("c") == "open"
        assert await again.members_only("c") is False  # still open to every participant
        settings = await again.campaign_settings("c")
        assert settings.quota == {"red_team": 1} and settings.relax_red_team is True
        assert [t.id for t in await again.claimed_tasks("a")] == [held.id]
        assert (await again.claim("b", TaskKind.RED_TEAM)).campaign == "c"
        await again.set_campaign_status("c", "paused")
        assert await again.campaign_status("c") == "paused"
    finally:
        await again.close()


async def _scalar(store: StarStore, sql: str) -> Any:
    async with store.engine.connect() as conn:
        return (await conn.exec_driver_sql(sql)).scalar_one()


async def test_a_campaign_stored_before_settings_existed_can_be_paused(tmp_path: Path) -> None:
    """The oldest stores have no star_campaigns row for a campaign: it counts as open, and pausing
    it writes the row (default settings) without touching its plan."""
    path = tmp_path / "old.db"
    store = StarStore(f"sqlite:///{path}", POLICY)
    await store.add_participants(people("a"))
    await store.create_campaign("c", generate_instructions(POLICY, SPACE, 2, seed=1, rules=RULE))
    await store.close()
    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        conn.execute(campaign_rows.delete())
    store = StarStore(f"sqlite:///{path}", POLICY)
    try:
        assert await store.campaign_status("c") == "open"
        await store.set_campaign_status("c", "paused")
        with pytest.raises(ClaimError):
            await store.claim("a", TaskKind.RED_TEAM)
        assert (await store.task_counts("c"))["red_team"] == {"open": 2}
    finally:
        await store.close()
    with engine.connect() as conn:
        assert conn.execute(select(campaign_rows.c.status)).scalar_one() == "paused"
        assert len(conn.execute(select(tasks.c.id)).all()) == 2
        assert conn.execute(select(dialogues.c.id)).all() == []
    engine.dispose()


async def test_a_members_only_campaign_is_taken_by_its_members_alone(store: StarStore) -> None:
    await store.add_participants(people("m", "n", "x"))
    await store.create_campaign("club", generate_instructions(POLICY, SPACE, 3, seed=1, rules=RULE), members_only=True)
    await store.create_campaign("all", generate_instructions(POLICY, SPACE, 1, seed=2, rules=RULE))
    assert await store.members_only("club") is True and await store.members_only("all") is False
    assert await store.add_members("club", ["m", "n"]) == 2
    assert await store.add_members("club", ["m"]) == 0  # again: a no-op
    with pytest.raises(InputError, match="unknown participants"):
        await store.add_members("club", ["m", "ghost"])
    assert await store.members("club") == ["m", "n"]
    # the non-member gets the open campaign's task though the club's are older, then nothing
    assert (await store.claim("x", TaskKind.RED_TEAM)).campaign == "all"
    with pytest.raises(ClaimError, match="not a member of this campaign"):
        await store.claim("x", TaskKind.RED_TEAM)
    held = await store.claim("m", TaskKind.RED_TEAM)
    assert held.campaign == "club"
    # removing a member releases what they hold of the campaign; their claims stop
    assert await store.remove_member("club", "m") == [held.id]
    assert await store.claimed_tasks("m") == []
    with pytest.raises(ClaimError):
        await store.claim("m", TaskKind.RED_TEAM)
    assert (await store.shortfall("club")) == []  # n, still a member, may take the three
    # removing someone who is not a member (again, unknown, never added) changes nothing and says so
    for nobody in ("m", "ghost", "x"):
        with pytest.raises(InputError, match=f"'{nobody}' is not a member of campaign 'club'; nothing was changed"):
            await store.remove_member("club", nobody)
    assert await store.members("club") == ["n"]
    # without an eligible member the shortfall and a batch assignment say so
    await store.remove_member("club", "n")
    short = await store.shortfall("club")
    assert [(s["reason"], s["open_tasks"]) for s in short] == [
        ("no eligible participant is a member of the campaign", 3)
    ]
    batch = await store.assign_all(TaskKind.RED_TEAM, participant_ids=["n", "x"])
    assert batch["assigned"] == 0
    assert batch["shortfall"][0]["reason"] == "no eligible participant is a member of the campaign"
    # opened to everyone: the non-member takes it
    await store.set_members_only("club", False)
    assert (await store.claim("x", TaskKind.RED_TEAM)).campaign == "club"
    with pytest.raises(InputError):
        await store.set_members_only("nowhere", True)


async def test_a_removal_between_the_queue_read_and_the_take_rolls_the_claim_back(
    store: StarStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.add_participants(people("a"))
    await store.create_campaign("club", generate_instructions(POLICY, SPACE, 1, seed=1, rules=RULE), members_only=True)
    await store.add_members("club", ["a"])
    original = store._at_quota
    removed: list[str] = []

    async def remove_meanwhile(*args: Any) -> set[str]:
        if not removed:
            removed.append("a")
            await store.remove_member("club", "a")
        return await original(*args)

    monkeypatch.setattr(store, "_at_quota", remove_meanwhile)
    with pytest.raises(ClaimError, match="not a member"):
        await store.claim("a", TaskKind.RED_TEAM)
    assert removed == ["a"] and (await store.task_counts("club"))["red_team"] == {"open": 1}
