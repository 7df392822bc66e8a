"""Batch assignment's plan against its definition, on seeded random queues.

:func:`plan_assignment` is defined as: tasks with the fewest eligible participants first (oldest
first among equals), each to the eligible participant with the lowest (load, id) who may take it
(member of a members-only campaign, has not seen the dialogue, did not skip the instruction, under
the cap); with ``relax``, a task nobody eligible may take goes to a relaxable participant the same
way. ``_reference`` below spells that out as a scan over everyone for every task; the store's
planner must return the same plan (assignments in order, shortfall, eligibility, loads).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

import pytest

from psychoalign.star.matching import eligible
from psychoalign.star.model import Participant, TaskKind
from psychoalign.star.store.rules import (
    AssignmentPlan,
    AssignmentQueue,
    OpenTask,
    _assignment_shortfall,
    plan_assignment,
    relaxable,
)

RACES = ["Asian", "Black", "White", "prefer not to say"]
GENDERS = ["Female", "Male"]


def _reference(
    kind: TaskKind,
    queue: AssignmentQueue,
    people: list[Participant],
    *,
    max_per_participant: int | None,
    relax: bool,
    limit: int | None,
) -> AssignmentPlan:
    open_tasks, seen, declined, load, scope = queue
    able_by: dict[str, list[str]] = {}
    relaxed_by: dict[str, list[str]] = {}
    for task in open_tasks:
        if task.requirement not in able_by:
            requirement = json.loads(task.requirement)
            checks = [(p.id, eligible(p, kind, requirement)) for p in people]
            able_by[task.requirement] = [pid for pid, (ok, _) in checks if ok]
            relaxed_by[task.requirement] = [pid for pid, (ok, why) in checks if not ok and relaxable(kind, why)]
    assignments: list[tuple[str, str, str | None, str | None]] = []
    shortfall: Counter[tuple[str, str]] = Counter()
    for task in sorted(open_tasks, key=lambda t: len(able_by[t.requirement])):
        if limit is not None and len(assignments) >= limit:
            break
        allowed = scope.get(task.campaign)

        def free(pids: list[str], task: OpenTask = task, allowed: set[str] | None = allowed) -> list[str]:
            return [
                pid
                for pid in pids
                if (allowed is None or pid in allowed)
                and (task.dialogue_id is None or (task.dialogue_id, pid) not in seen)
                and (task.dialogue_id is not None or (task.instruction_id or "", pid) not in declined)
                and (max_per_participant is None or load[pid] < max_per_participant)
            ]

        note = None
        pool = free(able_by[task.requirement])
        if not pool and relax:
            pool = free(relaxed_by[task.requirement])
            note = "relaxed: no matching participant (batch assignment)"
        if not pool:
            why = _assignment_shortfall(task, able_by[task.requirement], allowed, seen, declined)
            shortfall[(task.requirement, why)] += 1
            continue
        chosen = min(pool, key=lambda pid: (load[pid], pid))
        load[chosen] += 1
        if task.dialogue_id is not None:
            seen.add((task.dialogue_id, chosen))
        assignments.append((task.id, chosen, task.dialogue_id, note))
    return AssignmentPlan(assignments, shortfall, able_by, load)


def _people(rng: random.Random, n: int) -> list[Participant]:
    out = []
    for i in range(n):
        roles = ["red_teamer", "annotator", "arbitrator"] if rng.random() > 0.15 else ["annotator"]
        out.append(
            Participant(
                id=f"p{rng.randrange(10_000):04d}x{i}",
                demographics={"race": [rng.choice(RACES)], "gender": [rng.choice(GENDERS)]},
                expertise=["medical"] if rng.random() < 0.2 else [],
                roles=roles,
            )
        )
    return out


def _requirement(rng: random.Random, kind: TaskKind) -> str:
    group = {"race": rng.choice(RACES[:3])}
    if kind is TaskKind.RED_TEAM:
        options: list[dict[str, Any]] = [{}, {"attacker": "in", "group": group}, {"attacker": "out", "group": group}]
    else:
        options = [
            {"matching": "none"},
            {"matching": "demographic", "group": group},
            {"matching": "demographic", "group": group, "annotator": "out"},
            {"matching": "expertise", "expertise": "medical"},
        ]
    return json.dumps(rng.choice(options))


def _queue(rng: random.Random, kind: TaskKind, people: list[Participant]) -> AssignmentQueue:
    n_tasks = rng.randrange(0, 400)
    campaigns = ["a", "b", "c"]
    tasks = []
    for i in range(n_tasks):
        dialogue = None if kind is TaskKind.RED_TEAM else f"d{rng.randrange(max(1, n_tasks // 2))}"
        instruction = f"i{i}" if kind is TaskKind.RED_TEAM else None
        tasks.append(OpenTask(f"t{i:05d}", dialogue, _requirement(rng, kind), instruction, rng.choice(campaigns)))
    ids = [p.id for p in people]
    seen = {(f"d{rng.randrange(200)}", rng.choice(ids)) for _ in range(rng.randrange(300))} if ids else set()
    declined = {(f"i{rng.randrange(400)}", rng.choice(ids)) for _ in range(rng.randrange(300))} if ids else set()
    load = Counter({pid: rng.randrange(4) for pid in ids if rng.random() < 0.3})
    scope = {"b": {pid for pid in ids if rng.random() < 0.4}} if rng.random() < 0.5 else {}
    return AssignmentQueue(tasks, seen, declined, load, scope)


def _copy(queue: AssignmentQueue) -> AssignmentQueue:
    return AssignmentQueue(
        list(queue.open_tasks),
        set(queue.seen),
        set(queue.declined),
        Counter(queue.load),
        {c: set(m) for c, m in queue.scope.items()},
    )


@pytest.mark.parametrize("seed", range(40))
def test_plan_matches_its_definition(seed: int) -> None:
    rng = random.Random(seed)
    kind = rng.choice(list(TaskKind))
    people = _people(rng, rng.randrange(0, 40))
    queue = _queue(rng, kind, people)
    options: dict[str, Any] = {
        "max_per_participant": rng.choice([None, 1, 3, 8]),
        "relax": rng.random() < 0.5,
        "limit": rng.choice([None, None, 5, 50]),
    }
    expected = _reference(kind, _copy(queue), people, **options)
    got = plan_assignment(kind, _copy(queue), people, **options)
    assert got.assignments == expected.assignments
    assert got.shortfall == expected.shortfall
    assert got.eligible == expected.eligible
    assert +got.load == +expected.load
