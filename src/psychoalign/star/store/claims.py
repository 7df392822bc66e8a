"""The SQL STAR store's claims: claim, leases, release, batch assignment, quotas and shortfall.

Claiming is optimistic and safe under concurrent workers: the candidates are read without locks,
then one is taken by a conditional update (``status = 'open'``) plus a unique (dialogue,
participant) exposure row; a lost race moves on to the next candidate.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import and_, bindparam, exists, func, insert, or_, select, tuple_, update
from sqlalchemy.exc import IntegrityError

from ..model import Participant, TaskKind, TaskRecord, TaskStatus
from .base import LIVE, ClaimError
from .rules import (
    CLAIM_PAGE,
    LOADED,
    NO_TASK_SAMPLE,
    AssignmentPlan,
    AssignmentQueue,
    Candidate,
    OpenTask,
    available_count,
    first_beyond,
    no_task_reason,
    not_claimed,
    replacement_row,
    shortfall_entries,
    sort_candidates,
    task_record,
    unknown,
)
from .schema import campaign_rows, declines, dialogues, exposures, members, tasks
from .sqlbase import SQLBase

#: Candidate ids per locking attempt.
TAKE_CHUNK = 50
#: Planned tasks per claiming update of batch assignment (well under any driver's bound parameters).
TAKE_BATCH = 500


def _claimed() -> dict[str, Any]:
    """The columns a claim sets, bound per statement (``new_pid``, ``new_note``, ``new_now``, ``new_lease``)."""
    return {
        "status": "claimed",
        "participant_id": bindparam("new_pid"),
        "relaxed": bindparam("new_note"),
        "updated_at": bindparam("new_now"),
        "lease_expires_at": bindparam("new_lease"),
    }


def _claiming(where: Any) -> Any:
    """The claiming update for the task ``where`` picks, returning the whole row."""
    return update(tasks).where(and_(where, tasks.c.status == "open")).values(**_claimed()).returning(*tasks.c)


# The statements of the claim path, built once (building one costs about what running it does).
_PICK = (
    select(tasks.c.id)
    .where(and_(tasks.c.id.in_(bindparam("ids", expanding=True)), tasks.c.status == "open"))
    .order_by(tasks.c.created_at, tasks.c.id)
    .limit(1)
)
#: PostgreSQL: lock the oldest open one of the candidates, passing over rows other claimers hold.
_TAKE_SKIP_LOCKED = _claiming(tasks.c.id == _PICK.with_for_update(skip_locked=True).scalar_subquery())
#: SQLite: one writer at a time, so the same statement without row locks is atomic.
_TAKE_ONE_OF = _claiming(tasks.c.id == _PICK.scalar_subquery())
#: Waits for a claimer holding the row, then takes it if it is still open.
_TAKE_THIS = _claiming(tasks.c.id == bindparam("task_id"))
_TASK = select(tasks).where(tasks.c.id == bindparam("task_id"))
_EXPIRED = select(tasks.c.id, tasks.c.participant_id).where(
    and_(tasks.c.status == "claimed", tasks.c.lease_expires_at <= bindparam("now"))
)
_HOLDS = (
    select(tasks)
    .where(and_(tasks.c.participant_id == bindparam("pid"), tasks.c.status == "claimed"))
    .order_by(tasks.c.updated_at, tasks.c.id)
)
#: Tasks of a kind a person holds or did, per campaign (the per-person quota).
_LOAD = (
    select(tasks.c.campaign, func.count())
    .where(
        and_(
            tasks.c.participant_id == bindparam("pid"),
            tasks.c.kind == bindparam("kind"),
            tasks.c.status.in_(LOADED),
            tasks.c.campaign.in_(bindparam("campaigns", expanding=True)),
        )
    )
    .group_by(tasks.c.campaign)
)
_HELD_OF_KIND = _HOLDS.with_only_columns(tasks.c.id).where(tasks.c.kind == bindparam("kind")).limit(1)
_UNSEEN = ~exists().where(
    and_(exposures.c.dialogue_id == tasks.c.dialogue_id, exposures.c.participant_id == bindparam("pid"))
)
#: The task's campaign takes claims: no row (a campaign stored before statuses existed) or status live.
_CAMPAIGN_LIVE = ~exists().where(and_(campaign_rows.c.name == tasks.c.campaign, campaign_rows.c.status != LIVE))
#: Batch assignment: the planned tasks of one participant that are still open in a live campaign.
_TAKE_PLANNED = (
    update(tasks)
    .where(and_(tasks.c.id.in_(bindparam("ids", expanding=True)), tasks.c.status == "open", _CAMPAIGN_LIVE))
    .values(**_claimed())
    .returning(tasks.c.id)
)
_IS_MEMBER = exists().where(
    and_(members.c.campaign == campaign_rows.c.name, members.c.participant_id == bindparam("pid"))
)
#: ... and this person (``pid``) may take it: live, and members-only campaigns only for their members.
_MAY_CLAIM = ~exists().where(
    and_(
        campaign_rows.c.name == tasks.c.campaign,
        or_(campaign_rows.c.status != LIVE, and_(campaign_rows.c.members_only, ~_IS_MEMBER)),
    )
)
#: The campaign's status, members-only, and whether the claimer is a member, share-locked on
#: PostgreSQL: a lead's pause or close waits for claims in flight, and they wait for it.
_CLAIMABLE_SHARED = (
    select(campaign_rows.c.status, campaign_rows.c.members_only, _IS_MEMBER.label("member"))
    .where(campaign_rows.c.name == bindparam("campaign"))
    .with_for_update(read=True, of=campaign_rows)
)
_QUEUE = (
    select(tasks.c.id, tasks.c.requirement, tasks.c.dialogue_id, tasks.c.created_at, tasks.c.campaign)
    .where(and_(tasks.c.kind == bindparam("kind"), tasks.c.status == "open", _UNSEEN, _MAY_CLAIM))
    .order_by(tasks.c.created_at, tasks.c.id)
    .limit(CLAIM_PAGE)
)
_QUEUE_IN = _QUEUE.where(tasks.c.campaign == bindparam("campaign"))
#: Red teaming also leaves out the instructions this person skipped (a skip is a "not this one").
_NOT_DECLINED = ~exists().where(
    and_(declines.c.instruction_id == tasks.c.instruction_id, declines.c.participant_id == bindparam("pid"))
)
_QUEUE_RED_TEAM = _QUEUE.where(_NOT_DECLINED)
_QUEUE_RED_TEAM_IN = _QUEUE_IN.where(_NOT_DECLINED)


class _CampaignNotOpenError(Exception):
    """The task just claimed belongs to a campaign that is paused or closed (the claim rolls back)."""


class _SeenDialogueError(Exception):
    """The claimer's exposure row for this dialogue appeared meanwhile (a concurrent claim of theirs)."""

    def __init__(self, dialogue_id: str) -> None:
        super().__init__(dialogue_id)
        self.dialogue_id = dialogue_id


class SQLClaims(SQLBase):
    async def _claim(
        self, person: Participant, kind: TaskKind, campaign: str | None, relax: bool, lease_s: float | None
    ) -> TaskRecord:
        """Concurrent claimers do not contend: the candidates the participant may take (matching
        is Python, :func:`~psychoalign.star.matching.eligible`) are read without locks, then one of
        them is taken in one statement that, on PostgreSQL, locks with ``FOR UPDATE SKIP LOCKED``
        (a row another claimer is taking is passed over, not waited for). On SQLite the single
        writer makes the same statement atomic. If every candidate was locked by others, a
        conditional update that waits for them settles it, so "no task" is only ever answered
        after a read that saw none. The unique exposure row still guards "never twice"."""
        excluded: set[str] = set()  # dialogues whose exposure insert lost a race to this same person
        while True:
            async with self._read() as conn:
                rows = [Candidate(*r) for r in (await conn.execute(*self._queue(person.id, kind, campaign, excluded)))]
            full = await self._at_quota(person.id, kind, {row.campaign for row in rows})
            strict, relaxed = sort_candidates(rows, person, kind, relax, full)
            if not strict and not relaxed:
                if len(rows) < CLAIM_PAGE:
                    raise ClaimError(await self._no_task(person, kind, campaign, full))
                # a full page of tasks this person may not take: look further down the queue
                found = await self._claim_beyond(person, kind, campaign, {r.id for r in rows}, lease_s, relax)
                if isinstance(found, TaskRecord):
                    return found
                raise ClaimError(found)
            try:
                taken = await self._take_first(strict, person.id, kind, None, lease_s)
                for task_id, note in relaxed:
                    if taken is not None:
                        break
                    taken = await self._take_first([task_id], person.id, kind, note, lease_s)
            except _SeenDialogueError as seen:
                excluded.add(seen.dialogue_id)
                continue
            except _CampaignNotOpenError:
                continue  # the next read of the queue leaves that campaign out
            if taken is not None:
                return taken
            # every candidate was taken by someone else meanwhile: read the queue again

    async def available(self, participant_id: str, kind: TaskKind) -> int:
        await self.init()
        async with self._read() as conn:
            person = await self._participant(conn, participant_id)
            rows = [Candidate(*r) for r in (await conn.execute(*self._queue(participant_id, kind, None, ())))]
        full = await self._at_quota(participant_id, kind, {row.campaign for row in rows})
        return available_count(rows, person, kind, full)

    async def _at_quota(self, participant_id: str, kind: TaskKind, campaigns: set[str]) -> set[str]:
        """Which of ``campaigns`` this person has reached the ``kind`` quota of (no query unless one has a quota)."""
        caps = {c: q[kind.value] for c, q in (await self.quotas(campaigns)).items() if kind.value in q}
        if not caps:
            return set()
        async with self._read() as conn:
            params = {"pid": participant_id, "kind": kind.value, "campaigns": list(caps)}
            load = {str(c): int(n) for c, n in (await conn.execute(_LOAD, params)).all()}
        return {c for c, cap in caps.items() if load.get(c, 0) >= cap}

    def _queue(
        self, participant_id: str, kind: TaskKind, campaign: str | None, excluded: Collection[str], after: Any = None
    ) -> tuple[Any, dict[str, Any]]:
        """Open tasks of ``kind``, oldest first, without the dialogues this person has seen (and,
        for red teaming, the instructions they skipped)."""
        if kind is TaskKind.RED_TEAM:
            query = _QUEUE_RED_TEAM_IN if campaign else _QUEUE_RED_TEAM
        else:
            query = _QUEUE_IN if campaign else _QUEUE
        if excluded:
            query = query.where(tasks.c.dialogue_id.not_in(list(excluded)))
        if after is not None:
            query = query.where(tuple_(tasks.c.created_at, tasks.c.id) > tuple_(*after))
        params: dict[str, Any] = {"pid": participant_id, "kind": kind.value}
        if campaign:
            params["campaign"] = campaign
        return query, params

    async def _claim_beyond(
        self,
        person: Participant,
        kind: TaskKind,
        campaign: str | None,
        ineligible: set[str],
        lease_s: float | None,
        relax: bool,
    ) -> TaskRecord | str:
        """The rare deep queue: page past tasks this person may not take (keyset pagination)."""
        after: Any = None
        while True:
            async with self._read() as conn:
                rows = [Candidate(*r) for r in (await conn.execute(*self._queue(person.id, kind, campaign, (), after)))]
            full = await self._at_quota(person.id, kind, {row.campaign for row in rows})
            skip = ineligible | {row.id for row in rows if row.campaign in full}
            for task_id, note in first_beyond(rows, person, kind, relax, skip):
                try:
                    taken = await self._take_first([task_id], person.id, kind, note, lease_s)
                except (_SeenDialogueError, _CampaignNotOpenError):
                    continue
                if taken is not None:
                    return taken
            if len(rows) < CLAIM_PAGE:
                return await self._no_task(person, kind, campaign, full)
            after = (rows[-1].created_at, rows[-1].id)

    async def _take_first(
        self, ids: Sequence[str], participant_id: str, kind: TaskKind, note: str | None, lease_s: float | None
    ) -> TaskRecord | None:
        """Claim the oldest still-open task among ``ids`` (all eligible for this person), or None
        if others took them all. Raises :class:`_SeenDialogueError` if this person meanwhile saw its
        dialogue (two tabs claiming both annotation tasks of one dialogue at once)."""
        postgres = self.engine.dialect.name == "postgresql"
        values = {
            "new_pid": participant_id,
            "new_note": note,
            "new_now": self._now(),
            "new_lease": self._lease(lease_s),
        }
        for start in range(0, len(ids), TAKE_CHUNK):
            chunk = list(ids[start : start + TAKE_CHUNK])
            stmt = _TAKE_SKIP_LOCKED if postgres else _TAKE_ONE_OF
            row = await self._update_task(stmt, {**values, "ids": chunk}, participant_id, kind)
            if row is not None:
                return row
        if postgres:  # all locked by claimers still in flight: wait for them (they may roll back)
            for task_id in ids[:TAKE_CHUNK]:
                row = await self._update_task(_TAKE_THIS, {**values, "task_id": task_id}, participant_id, kind)
                if row is not None:
                    return row
        return None

    async def _update_task(
        self, stmt: Any, params: dict[str, Any], participant_id: str, kind: TaskKind
    ) -> TaskRecord | None:
        """Run the claiming update and write the exposure row, in one transaction."""
        row: Any = None
        try:
            async with self.engine.begin() as conn:
                row = (await conn.execute(stmt, params)).mappings().first()
                if row is None:
                    return None
                # paused, closed or this person removed from its members meanwhile (the queue
                # read saw it open to them): roll the claim back
                state = (
                    await conn.execute(_CLAIMABLE_SHARED, {"campaign": row["campaign"], "pid": participant_id})
                ).first()
                if state is not None and (state.status != LIVE or (state.members_only and not state.member)):
                    raise _CampaignNotOpenError(row["campaign"])
                if row["dialogue_id"] is not None:
                    await conn.execute(
                        insert(exposures).values(
                            dialogue_id=row["dialogue_id"], participant_id=participant_id, role=kind.value
                        )
                    )
        except IntegrityError:
            raise _SeenDialogueError(str(row["dialogue_id"])) from None
        return task_record(row)

    async def _no_task(
        self, person: Participant, kind: TaskKind, campaign: str | None, at_quota: Collection[str] = ()
    ) -> str:
        """Why nothing could be claimed (the failure path only: a plain read of the queue)."""
        async with self._read() as conn:
            query = select(tasks.c.requirement, tasks.c.dialogue_id, tasks.c.instruction_id, tasks.c.campaign).where(
                and_(tasks.c.kind == kind.value, tasks.c.status == "open")
            )
            if campaign:
                query = query.where(tasks.c.campaign == campaign)
            ordered = query.order_by(tasks.c.created_at, tasks.c.id).limit(NO_TASK_SAMPLE)
            rows = [tuple(r) for r in (await conn.execute(ordered)).all()]
            seen_query = select(exposures.c.dialogue_id).where(exposures.c.participant_id == person.id)
            seen = {r[0] for r in (await conn.execute(seen_query)).all()}
            skipped_query = select(declines.c.instruction_id).where(declines.c.participant_id == person.id)
            skipped = {r[0] for r in (await conn.execute(skipped_query)).all()}
        scope = await self._member_scope({r[3] for r in rows})
        return no_task_reason(person, kind, rows, seen, skipped, scope, at_quota)

    async def _member_scope(self, campaigns: Collection[str]) -> dict[str, set[str]]:
        """The members of each members-only campaign among ``campaigns`` (others are absent)."""
        async with self._read() as conn:
            scoped = [
                str(r[0])
                for r in (
                    await conn.execute(
                        select(campaign_rows.c.name).where(
                            and_(campaign_rows.c.name.in_(list(campaigns)), campaign_rows.c.members_only)
                        )
                    )
                ).all()
            ]
            out: dict[str, set[str]] = {c: set() for c in scoped}
            if scoped:
                query = select(members.c.campaign, members.c.participant_id).where(members.c.campaign.in_(scoped))
                for c, pid in (await conn.execute(query)).all():
                    out[str(c)].add(str(pid))
        return out

    async def _assignable(self, kind: TaskKind, campaign: str | None) -> AssignmentQueue:
        async with self.engine.connect() as conn:
            query = select(
                tasks.c.id, tasks.c.dialogue_id, tasks.c.requirement, tasks.c.instruction_id, tasks.c.campaign
            ).where(and_(tasks.c.kind == kind.value, tasks.c.status == "open", _CAMPAIGN_LIVE))
            if campaign:
                query = query.where(tasks.c.campaign == campaign)
            open_tasks = [OpenTask(*t) for t in await conn.execute(query.order_by(tasks.c.created_at, tasks.c.id))]
            seen_rows = (await conn.execute(select(exposures.c.dialogue_id, exposures.c.participant_id))).all()
            declined_rows = (await conn.execute(select(declines.c.instruction_id, declines.c.participant_id))).all()
            load_query = select(tasks.c.participant_id).where(
                and_(tasks.c.kind == kind.value, tasks.c.status.in_(LOADED))
            )
            if campaign:
                load_query = load_query.where(tasks.c.campaign == campaign)
            load_rows = (await conn.execute(load_query)).all()
        return AssignmentQueue(
            open_tasks,
            seen={(d, p) for d, p in seen_rows},
            declined={(i, p) for i, p in declined_rows},
            load=Counter(r[0] for r in load_rows if r[0]),
            scope=await self._member_scope({t.campaign for t in open_tasks}),
        )

    async def _take_planned(self, kind: TaskKind, plan: AssignmentPlan, lease_s: float | None) -> dict[str, str]:
        """The whole batch in one transaction, with the claim's conditional update: one update per
        participant (and relaxed note) over their tasks, not one per task."""
        now = self._now()
        lease = self._lease(lease_s)
        by_taker: dict[tuple[str, str | None], list[str]] = {}
        for task_id, pid, _, note in plan.assignments:
            by_taker.setdefault((pid, note), []).append(task_id)
        claimed: set[str] = set()
        async with self.engine.begin() as conn:
            if plan.assignments:  # a lead's pause or close waits for this batch, or the batch sees it
                await conn.execute(select(campaign_rows.c.name).with_for_update(read=True))
            for (pid, note), task_ids in by_taker.items():
                for start in range(0, len(task_ids), TAKE_BATCH):
                    result = await conn.execute(
                        _TAKE_PLANNED,
                        {
                            "ids": task_ids[start : start + TAKE_BATCH],
                            "new_pid": pid,
                            "new_note": note,
                            "new_now": now,
                            "new_lease": lease,
                        },
                    )
                    claimed.update(r[0] for r in result)
            taken = {task_id: pid for task_id, pid, _, _ in plan.assignments if task_id in claimed}
            seen = [
                {"dialogue_id": dialogue_id, "participant_id": pid, "role": kind.value}
                for task_id, pid, dialogue_id, _ in plan.assignments
                if dialogue_id is not None and task_id in claimed
            ]
            if seen:
                await conn.execute(insert(exposures), seen)
        return taken

    async def task(self, task_id: str) -> TaskRecord:
        async with self._read() as conn:
            row = (await conn.execute(_TASK, {"task_id": task_id})).mappings().first()
        if row is None:
            raise unknown("task", task_id)
        return task_record(row)

    async def list_tasks(self, campaign: str | None = None, *, kind: TaskKind | None = None) -> list[TaskRecord]:
        await self.init()
        query = select(tasks).order_by(tasks.c.created_at, tasks.c.id)
        if campaign is not None:
            query = query.where(tasks.c.campaign == campaign)
        if kind is not None:
            query = query.where(tasks.c.kind == kind.value)
        async with self._read() as conn:
            return [task_record(r) for r in (await conn.execute(query)).mappings().all()]

    async def renew_lease(self, task_id: str, participant_id: str, lease_s: float | None = None) -> None:
        async with self.engine.begin() as conn:
            renewed = await conn.execute(
                update(tasks)
                .where(
                    and_(tasks.c.id == task_id, tasks.c.participant_id == participant_id, tasks.c.status == "claimed")
                )
                .values(lease_expires_at=self._lease(lease_s))
            )
            if renewed.rowcount == 1:
                return
            kind = (await conn.execute(select(tasks.c.kind).where(tasks.c.id == task_id))).scalar_one_or_none()
            if kind is None:
                raise unknown("task", task_id)
            await self._own(conn, task_id, participant_id, TaskKind(kind))  # raises, naming why

    async def expire_leases(self, campaign: str | None = None) -> int:
        await self.init()
        async with self._read() as conn:  # an index range scan (status, lease): usually no row at all
            query = _EXPIRED.where(tasks.c.campaign == campaign) if campaign else _EXPIRED
            expired = (await conn.execute(query, {"now": self._now()})).all()
        # each re-queue is conditional: one re-queued or submitted meanwhile is left alone
        return len(await self._release_each([(str(t), str(p)) for t, p in expired]))

    async def held_task(self, participant_id: str, kind: TaskKind) -> str | None:
        await self.init()
        async with self._read() as conn:
            row = (await conn.execute(_HELD_OF_KIND, {"pid": participant_id, "kind": kind.value})).first()
        return str(row[0]) if row else None

    async def claimed_tasks(self, participant_id: str) -> list[TaskRecord]:
        await self.init()
        await self.expire_leases()
        async with self._read() as conn:
            return [task_record(r) for r in (await conn.execute(_HOLDS, {"pid": participant_id})).mappings().all()]

    async def release(self, task_id: str, participant_id: str, *, decline: bool = False) -> None:
        async with self.engine.begin() as conn:
            row = (await conn.execute(select(tasks).where(tasks.c.id == task_id))).mappings().first()
            if row is None or row["participant_id"] != participant_id or row["status"] != TaskStatus.CLAIMED.value:
                raise not_claimed(task_id, participant_id)
            now = self._now()
            if decline and row["kind"] == TaskKind.RED_TEAM.value and row["instruction_id"]:
                known = select(declines.c.instruction_id).where(
                    and_(
                        declines.c.instruction_id == row["instruction_id"], declines.c.participant_id == participant_id
                    )
                )
                if (await conn.execute(known)).first() is None:  # only the holder releases: no race here
                    await conn.execute(
                        insert(declines).values(
                            instruction_id=row["instruction_id"], participant_id=participant_id, created_at=now
                        )
                    )
            started = (await conn.execute(select(dialogues.c.id).where(dialogues.c.task_id == task_id))).first()
            claimed = and_(tasks.c.id == task_id, tasks.c.status == TaskStatus.CLAIMED.value)
            if started is None:
                result = await conn.execute(
                    update(tasks)
                    .where(claimed)
                    .values(
                        status=TaskStatus.OPEN.value,
                        participant_id=None,
                        relaxed=None,
                        updated_at=now,
                        lease_expires_at=None,
                    )
                )
                if result.rowcount != 1:
                    raise not_claimed(task_id, participant_id)
                return
            await conn.execute(update(dialogues).where(dialogues.c.id == started[0]).values(status="abandoned"))
            result = await conn.execute(
                update(tasks).where(claimed).values(status=TaskStatus.RELEASED.value, updated_at=now)
            )
            if result.rowcount != 1:
                raise not_claimed(task_id, participant_id)
            await conn.execute(insert(tasks).values(**replacement_row(row, now)))

    async def shortfall(
        self, campaign: str | None = None, *, available: Collection[str] | None = None
    ) -> list[dict[str, Any]]:
        people = await self._counted_people(campaign, available)
        async with self.engine.connect() as conn:
            query = select(
                tasks.c.kind, tasks.c.requirement, tasks.c.dialogue_id, tasks.c.instruction_id, tasks.c.campaign
            ).where(tasks.c.status == "open")
            if campaign:
                query = query.where(tasks.c.campaign == campaign)
            rows = [tuple(r) for r in (await conn.execute(query)).all()]
            seen_rows = (await conn.execute(select(exposures.c.dialogue_id, exposures.c.participant_id))).all()
            declined_rows = (await conn.execute(select(declines.c.instruction_id, declines.c.participant_id))).all()
            quotas = {c: q for c, q in (await self.quotas({r[4] for r in rows})).items() if q}
            load: Counter[tuple[str, str, str]] = Counter()  # (campaign, kind, participant) -> held or done
            if quotas:
                load_rows = (
                    await conn.execute(
                        select(tasks.c.campaign, tasks.c.kind, tasks.c.participant_id, func.count())
                        .where(and_(tasks.c.status.in_(LOADED), tasks.c.campaign.in_(list(quotas))))
                        .group_by(tasks.c.campaign, tasks.c.kind, tasks.c.participant_id)
                    )
                ).all()
                load.update({(str(c), str(k), str(p)): int(n) for c, k, p, n in load_rows})
        return shortfall_entries(
            rows,
            people,
            seen={(d, p) for d, p in seen_rows},
            declined={(i, p) for i, p in declined_rows},
            quotas=quotas,
            load=load,
            scope=await self._member_scope({r[4] for r in rows}),  # members-only campaigns: their members
        )
