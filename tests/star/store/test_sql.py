"""What only the SQL STAR store promises beyond the contract, on SQLite and PostgreSQL: work
survives a crash (a new process resumes it), a pause or a removal that lands between a claim's
queue read and its take rolls the claim back, and concurrent claimers never share a task."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from psychoalign.star import generate_instructions
from psychoalign.star.model import Participant, TaskKind, Turn
from psychoalign.star.store import ClaimError, StarStore
from tests.star.store.conftest import POLICY, SPACE, SQL_BACKENDS, MakeStore
from tests.star.store.test_contract import RULE, people, pool


@pytest.fixture(params=SQL_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def meanwhile(
    store: StarStore, monkeypatch: pytest.MonkeyPatch, label: str, action: Callable[[], Awaitable[Any]]
) -> list[str]:
    """Run ``action`` once inside the next claim, after it read the queue and before it takes a
    task (the quota check runs between the two); the list returned gets ``label`` when it ran."""
    original = store._at_quota
    ran: list[str] = []

    async def hooked(*args: Any) -> set[str]:
        if not ran:
            ran.append(label)
            await action()
        return await original(*args)

    monkeypatch.setattr(store, "_at_quota", hooked)
    return ran


async def test_turns_survive_a_crash_before_submission(store: StarStore, make_store: MakeStore) -> None:
    await store.add_participants(pool())
    await store.create_campaign("c1", generate_instructions(POLICY, SPACE, 1, seed=1, rules=["dangerous-activities"]))
    task = await store.claim("p000", TaskKind.RED_TEAM)
    did = await store.start_dialogue(task.id, "p000", "t")
    await store.add_turn(did, Turn(role="red_teamer", text="first"))
    # the worker dies here; a new store (process) resumes the same dialogue
    again = await make_store()
    assert await again.start_dialogue(task.id, "p000", "t") == did
    assert [t.text for t in await again.dialogue_turns(did)] == ["first"]


@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_concurrent_claiming_on_postgres_never_double_assigns(make_store: MakeStore) -> None:
    store = await make_store(pool_size=20)
    people = [Participant(id=f"w{i}") for i in range(24)]
    await store.add_participants(people)
    await store.create_campaign("c", generate_instructions(POLICY, SPACE, 60, seed=4, rules=["sexually-explicit"]))

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


async def test_a_pause_between_the_queue_read_and_the_take_rolls_the_claim_back(
    store: StarStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No timing: the pause is made inside the claim, after it read the queue (the quota check
    runs between the read and the take), so the take must see it and give the task back."""
    await store.add_participants(people("a"))
    await store.create_campaign("first", generate_instructions(POLICY, SPACE, 1, seed=1, rules=RULE))
    await store.create_campaign("second", generate_instructions(POLICY, SPACE, 1, seed=2, rules=RULE))
    paused = meanwhile(store, monkeypatch, "first", lambda: store.set_campaign_status("first", "paused"))
    taken = await store.claim("a", TaskKind.RED_TEAM)
    assert paused == ["first"] and taken.campaign == "second"
    assert (await store.task_counts("first"))["red_team"] == {"open": 1}  # rolled back, nothing held


async def test_a_removal_between_the_queue_read_and_the_take_rolls_the_claim_back(
    store: StarStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.add_participants(people("a"))
    await store.create_campaign("club", generate_instructions(POLICY, SPACE, 1, seed=1, rules=RULE), members_only=True)
    await store.add_members("club", ["a"])
    removed = meanwhile(store, monkeypatch, "a", lambda: store.remove_member("club", "a"))
    with pytest.raises(ClaimError, match="not a member"):
        await store.claim("a", TaskKind.RED_TEAM)
    assert removed == ["a"] and (await store.task_counts("club"))["red_team"] == {"open": 1}
