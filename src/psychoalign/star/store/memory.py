"""The STAR store in memory: the same contract as the SQL store, for tests and throwaway runs.

It keeps the SQL store's rows (``schema.py``'s columns, JSON as text) in dicts and applies the
same decisions (``rules.py``). No operation awaits anything while it reads and writes, so each
is atomic within the event loop; nothing survives the process.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator, Collection, Sequence
from typing import Any

from ..model import Participant, TaskKind, TaskRecord, TaskStatus, Turn
from ._memory_state import _MemoryState, _oldest
from .base import LIVE, ClaimError
from .rules import (
    CLAIM_PAGE,
    EXPORT_BATCH,
    NO_TASK_SAMPLE,
    AssignmentPlan,
    AssignmentQueue,
    Candidate,
    OpenTask,
    annotation_row,
    annotation_tasks,
    arbitration_needed,
    arbitration_requirement,
    available_count,
    check_model_stamp,
    check_reasoning,
    dialogue_requirement,
    dialogue_row,
    export_row,
    failure_row,
    finished_status,
    first_beyond,
    likert,
    no_task_reason,
    not_claimed,
    not_in_progress,
    not_open_dialogue,
    nothing_to_arbitrate,
    replacement_row,
    shortfall_entries,
    sort_candidates,
    task_record,
    task_row,
    turn_dict,
    unknown,
)


class InMemoryStarStore(_MemoryState):
    """:class:`~psychoalign.star.store.StarStore` in memory (see the module doc)."""

    # -- claims, leases, batch assignment ----------------------------------------------------------
    async def _claim(
        self, person: Participant, kind: TaskKind, campaign: str | None, relax: bool, lease_s: float | None
    ) -> TaskRecord:
        queue = self._queue(person.id, kind, campaign)
        full = self._at_quota(person.id, kind, {r.campaign for r in queue})
        page = queue[:CLAIM_PAGE]  # as the SQL store reads it: strict first within the first page
        strict, relaxed = sort_candidates(page, person, kind, relax, full)
        choice: tuple[str, str | None] | None = (strict[0], None) if strict else (relaxed[0] if relaxed else None)
        if choice is None and len(page) == CLAIM_PAGE:
            skip = {r.id for r in page} | {r.id for r in queue if r.campaign in full}
            choice = next(iter(first_beyond(queue, person, kind, relax, skip)), None)
        if choice is None:
            raise ClaimError(self._no_task(person, kind, campaign, full))
        row = self._tasks[choice[0]]
        now = self._now()
        row.update(
            status="claimed",
            participant_id=person.id,
            relaxed=choice[1],
            updated_at=now,
            lease_expires_at=self._lease(lease_s),
        )
        if row["dialogue_id"] is not None:
            self._exposures[(row["dialogue_id"], person.id)] = kind.value
        return task_record(row)

    async def available(self, participant_id: str, kind: TaskKind) -> int:
        person = self._person(participant_id)
        queue = self._queue(participant_id, kind, None)[:CLAIM_PAGE]
        return available_count(queue, person, kind, self._at_quota(participant_id, kind, {r.campaign for r in queue}))

    def _queue(self, participant_id: str, kind: TaskKind, campaign: str | None) -> list[Candidate]:
        """Open tasks of ``kind`` this participant may take: not a dialogue they saw, not an
        instruction they declined, in a campaign they may claim from."""
        return [
            Candidate(r["id"], r["requirement"], r["dialogue_id"], r["created_at"], r["campaign"])
            for r in self._open_tasks(kind.value, campaign)
            if (r["dialogue_id"] is None or (r["dialogue_id"], participant_id) not in self._exposures)
            and self._may_claim(r["campaign"], participant_id)
            and (kind is not TaskKind.RED_TEAM or (r["instruction_id"], participant_id) not in self._declines)
        ]

    def _no_task(self, person: Participant, kind: TaskKind, campaign: str | None, at_quota: Collection[str]) -> str:
        rows = [
            (r["requirement"], r["dialogue_id"], r["instruction_id"], r["campaign"])
            for r in self._open_tasks(kind.value, campaign)[:NO_TASK_SAMPLE]
        ]
        seen = {d for d, p in self._exposures if p == person.id}
        skipped = {i for i, p in self._declines if p == person.id}
        return no_task_reason(person, kind, rows, seen, skipped, self._scope(r[3] for r in rows), at_quota)

    async def _assignable(self, kind: TaskKind, campaign: str | None) -> AssignmentQueue:
        open_tasks = [
            OpenTask(r["id"], r["dialogue_id"], r["requirement"], r["instruction_id"], r["campaign"])
            for r in self._open_tasks(kind.value, campaign)
            if self._status(r["campaign"]) == LIVE
        ]
        load = self._load(None, kind.value, [campaign] if campaign else None)
        scope = self._scope(t.campaign for t in open_tasks)
        return AssignmentQueue(open_tasks, set(self._exposures), set(self._declines), _per_person(load), scope)

    async def _take_planned(self, kind: TaskKind, plan: AssignmentPlan, lease_s: float | None) -> dict[str, str]:
        now, lease = self._now(), self._lease(lease_s)
        taken: dict[str, str] = {}
        for task_id, pid, dialogue_id, note in plan.assignments:
            self._tasks[task_id].update(
                status="claimed", participant_id=pid, relaxed=note, updated_at=now, lease_expires_at=lease
            )
            taken[task_id] = pid
            if dialogue_id is not None:
                self._exposures[(dialogue_id, pid)] = kind.value
        return taken

    async def task(self, task_id: str) -> TaskRecord:
        if task_id not in self._tasks:
            raise unknown("task", task_id)
        return task_record(self._tasks[task_id])

    async def list_tasks(self, campaign: str | None = None, *, kind: TaskKind | None = None) -> list[TaskRecord]:
        rows = [
            r
            for r in self._tasks.values()
            if (campaign is None or r["campaign"] == campaign) and (kind is None or r["kind"] == kind.value)
        ]
        return [task_record(r) for r in sorted(rows, key=_oldest)]

    async def renew_lease(self, task_id: str, participant_id: str, lease_s: float | None = None) -> None:
        row = self._tasks.get(task_id)
        if row is not None and row["participant_id"] == participant_id and row["status"] == "claimed":
            row["lease_expires_at"] = self._lease(lease_s)
            return
        if row is None:
            raise unknown("task", task_id)
        self._own(task_id, participant_id, TaskKind(row["kind"]))  # raises, naming why

    async def expire_leases(self, campaign: str | None = None) -> int:
        now = self._now()
        expired = [
            (r["id"], r["participant_id"])
            for r in self._tasks.values()
            if r["status"] == "claimed"
            and r["lease_expires_at"] is not None
            and r["lease_expires_at"] <= now
            and (not campaign or r["campaign"] == campaign)
        ]
        return len(await self._release_each(expired))

    async def release(self, task_id: str, participant_id: str, *, decline: bool = False) -> None:
        row = self._tasks.get(task_id)
        if row is None or row["participant_id"] != participant_id or row["status"] != TaskStatus.CLAIMED.value:
            raise not_claimed(task_id, participant_id)
        now = self._now()
        if decline and row["kind"] == TaskKind.RED_TEAM.value and row["instruction_id"]:
            self._declines.setdefault((row["instruction_id"], participant_id), now)
        started = self._dialogue_of.get(task_id)
        if started is None:
            row.update(status="open", participant_id=None, relaxed=None, updated_at=now, lease_expires_at=None)
            return
        self._dialogues[started]["status"] = "abandoned"
        row.update(status=TaskStatus.RELEASED.value, updated_at=now)
        fresh = replacement_row(row, now)
        self._tasks[fresh["id"]] = fresh

    def _holds(self, participant_id: str, kind: TaskKind | None = None) -> list[dict[str, Any]]:
        rows = [
            r
            for r in self._tasks.values()
            if r["participant_id"] == participant_id
            and r["status"] == "claimed"
            and (kind is None or r["kind"] == kind.value)
        ]
        return sorted(rows, key=lambda r: (r["updated_at"], r["id"]))

    async def held_task(self, participant_id: str, kind: TaskKind) -> str | None:
        held = self._holds(participant_id, kind)
        return str(held[0]["id"]) if held else None

    async def claimed_tasks(self, participant_id: str) -> list[TaskRecord]:
        await self.expire_leases()
        return [task_record(r) for r in self._holds(participant_id)]

    async def shortfall(
        self, campaign: str | None = None, *, available: Collection[str] | None = None
    ) -> list[dict[str, Any]]:
        people = await self._counted_people(campaign, available)
        rows = [
            (r["kind"], r["requirement"], r["dialogue_id"], r["instruction_id"], r["campaign"])
            for r in self._open_tasks(campaign=campaign)
        ]
        quotas = {c: q for c, q in self._quotas({r[4] for r in rows}).items() if q}
        return shortfall_entries(
            rows,
            people,
            seen=set(self._exposures),
            declined=set(self._declines),
            quotas=quotas,
            load=self._load(None, None, quotas),
            scope=self._scope(r[4] for r in rows),
        )

    # -- red teaming -----------------------------------------------------------------------------
    async def start_dialogue(self, task_id: str, participant_id: str, target: str) -> str:
        row = self._own(task_id, participant_id, TaskKind.RED_TEAM)
        if task_id in self._dialogue_of:
            return self._dialogue_of[task_id]  # resuming after a crash
        dialogue = dialogue_row(row, participant_id, target, self._now())
        self._dialogues[dialogue["id"]] = dialogue
        self._dialogue_of[task_id] = dialogue["id"]
        self._turns[dialogue["id"]] = []
        self._exposures[(dialogue["id"], participant_id)] = "red_team"
        return str(dialogue["id"])

    async def add_turns(self, dialogue_id: str, new_turns: Sequence[Turn]) -> list[int]:
        d = self._dialogues.get(dialogue_id)
        if d is not None:
            self._refuse_if_closed(d["campaign"])
        if d is None or d["status"] != "in_progress":
            raise not_in_progress(dialogue_id, d["status"] if d else None)
        said = self._turns[dialogue_id]
        n = len(said)
        said.extend(turn.model_dump() for turn in new_turns)
        task = self._tasks[d["task_id"]]
        if task["status"] == "claimed":
            task.update(lease_expires_at=self._lease(), updated_at=self._now())
        return list(range(n, n + len(new_turns)))

    async def record_target_failure(
        self, dialogue_id: str, reason: str, *, attempt: int = 1, trace_id: str | None = None
    ) -> None:
        n = len(self._turns.get(dialogue_id, []))
        self._failures.append(failure_row(dialogue_id, n, reason, attempt, trace_id, self._now()))

    def _campaign_failures(self, campaign: str) -> list[dict[str, Any]]:
        return [
            f
            for f in self._failures
            if f["dialogue_id"] in self._dialogues and self._dialogues[f["dialogue_id"]]["campaign"] == campaign
        ]

    async def target_failure_counts(self, campaign: str) -> dict[str, int]:
        return dict(Counter(f["dialogue_id"] for f in self._campaign_failures(campaign)))

    async def recent_target_failures(self, campaign: str, limit: int = 3) -> tuple[int, list[dict[str, Any]]]:
        failures = self._campaign_failures(campaign)
        latest = sorted(failures, key=lambda f: f["created_at"], reverse=True)[:limit]
        return len(failures), [{"at": f["created_at"], "reason": f["reason"]} for f in latest]

    async def _dialogue_campaign(self, dialogue_id: str) -> str:
        if dialogue_id not in self._dialogues:
            raise unknown("dialogue", dialogue_id)
        return str(self._dialogues[dialogue_id]["campaign"])

    async def _submit_dialogue(
        self, dialogue_id: str, participant_id: str, pre: str, refused: bool, target_failed: bool, share: float
    ) -> list[str]:
        d = self._dialogues.get(dialogue_id)
        if d is not None:
            self._refuse_if_closed(d["campaign"])
        if d is None or d["red_teamer_id"] != participant_id or d["status"] != "in_progress":
            raise not_open_dialogue(dialogue_id, participant_id)
        status = finished_status(dialogue_id, len(self._turns[dialogue_id]), refused, target_failed)
        d.update(status=status, pre_annotation=pre, refused=refused)
        self._tasks[d["task_id"]].update(status="submitted", updated_at=self._now())
        if status != "submitted":
            return []
        requirement = dialogue_requirement(self.policy, json.loads(self._instructions[d["instruction_id"]]["record"]))
        earlier = (
            r["requirement"]
            for r in self._tasks.values()
            if r["campaign"] == d["campaign"] and r["kind"] == TaskKind.ANNOTATE.value
        )
        rows = annotation_tasks(d["campaign"], dialogue_id, requirement, share, earlier, self._now())
        self._tasks.update({r["id"]: r for r in rows})
        return [r["id"] for r in rows]

    async def dialogue_turns(self, dialogue_id: str) -> list[Turn]:
        return [Turn.model_validate(t) for t in self._turns.get(dialogue_id, [])]

    async def dialogue_of_task(self, task_id: str) -> str | None:
        return self._dialogue_of.get(task_id)

    async def dialogue_info(self, dialogue_id: str) -> dict[str, Any]:
        if dialogue_id not in self._dialogues:
            raise unknown("dialogue", dialogue_id)
        info = dict(self._dialogues[dialogue_id])
        info["pre_annotation"] = json.loads(info["pre_annotation"]) if info["pre_annotation"] else None
        return info

    async def dialogue_instruction(self, dialogue_id: str) -> dict[str, Any]:
        d = self._dialogues.get(dialogue_id)
        if d is None or d["instruction_id"] not in self._instructions:
            raise unknown("dialogue", dialogue_id)
        return await self.instruction(d["instruction_id"])

    async def dialogue_task_ids(self, campaign: str) -> dict[str, str]:
        return {i: d["task_id"] for i, d in self._dialogues.items() if d["campaign"] == campaign}

    # -- annotation and arbitration -----------------------------------------------------------------
    async def submit_annotation(
        self, task_id: str, participant_id: str, rating: int, reasoning: str, *, model: str | None = None
    ) -> str | None:
        rating = likert(rating)
        check_reasoning(reasoning, "an annotation")
        row = self._own(task_id, participant_id, TaskKind.ANNOTATE)
        check_model_stamp(model, self._person(participant_id))
        self._write_annotation(row, participant_id, TaskKind.ANNOTATE, rating, reasoning, model)
        ratings = [rating for rating, _ in await self.reasonings(row["dialogue_id"])]
        if len(ratings) == 2 and arbitration_needed(*ratings):
            requirement = arbitration_requirement(row["requirement"])
            arbitration = task_row(
                row["campaign"], TaskKind.ARBITRATE.value, requirement, self._now(), dialogue_id=row["dialogue_id"]
            )
            self._tasks[arbitration["id"]] = arbitration
            return str(arbitration["id"])
        return None

    async def submit_arbitration(
        self, task_id: str, participant_id: str, rating: int, reasoning: str, *, model: str | None = None
    ) -> None:
        rating = likert(rating)
        check_reasoning(reasoning, "an arbitration")
        row = self._own(task_id, participant_id, TaskKind.ARBITRATE)
        check_model_stamp(model, self._person(participant_id))
        ratings = [rating for rating, _ in await self.reasonings(row["dialogue_id"])]
        if len(ratings) != 2 or not arbitration_needed(*ratings):
            raise nothing_to_arbitrate(row["dialogue_id"])
        self._write_annotation(row, participant_id, TaskKind.ARBITRATE, rating, reasoning, model)

    def _write_annotation(
        self, row: dict[str, Any], participant_id: str, kind: TaskKind, rating: int, reasoning: str, model: str | None
    ) -> None:
        self._annotations.append(annotation_row(row, participant_id, kind, rating, reasoning, self._now(), model))
        row.update(status="submitted", updated_at=self._now())

    async def reasonings(self, dialogue_id: str) -> list[tuple[int, str]]:
        return [
            (int(a["rating"]), str(a["reasoning"]))
            for a in self._annotations
            if a["dialogue_id"] == dialogue_id and a["kind"] == TaskKind.ANNOTATE.value
        ]

    async def dialogue_view(
        self, dialogue_id: str, *, reasons: bool = False
    ) -> tuple[dict[str, Any], list[Turn], list[tuple[int, str]]]:
        record = await self.dialogue_instruction(dialogue_id)
        why = await self.reasonings(dialogue_id) if reasons else []
        return record, await self.dialogue_turns(dialogue_id), why

    # -- export ----------------------------------------------------------------------------------
    async def iter_export_rows(
        self, campaign: str | None = None, *, batch: int = EXPORT_BATCH
    ) -> AsyncIterator[dict[str, Any]]:
        people = {p.id: p for p in await self.list_participants()}
        chosen = [d for d in self._dialogues.values() if not campaign or d["campaign"] == campaign]
        for d in sorted(chosen, key=_oldest):
            anns = [
                {**a, "slot": self._tasks[a["task_id"]]["requirement"] if a["task_id"] in self._tasks else None}
                for a in sorted(self._annotations, key=lambda a: a["created_at"])
                if a["dialogue_id"] == d["id"]
            ]
            yield export_row(
                d,
                json.loads(self._instructions[d["instruction_id"]]["record"]),
                self._tasks[d["task_id"]],
                anns,
                [turn_dict(t) for t in self._turns[d["id"]]],
                sum(1 for f in self._failures if f["dialogue_id"] == d["id"]),
                people,
                (await self.campaign_settings(d["campaign"])).persona_models,
            )


def _per_person(load: Counter[tuple[str, str, str]]) -> Counter[str]:
    """Load per participant, over campaigns."""
    out: Counter[str] = Counter()
    for (_, _, pid), n in load.items():
        out[pid] += n
    return out
