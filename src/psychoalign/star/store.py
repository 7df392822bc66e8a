"""The STAR lab's persistent state and its pipeline operations, on SQLite or PostgreSQL.

Every operation is one transaction, so a crash loses no submitted work and leaves nothing
half-done. Claiming is optimistic and safe under concurrent workers: a conditional update
(`status = 'open'`) plus a unique (dialogue, participant) exposure row; a lost race moves on to
the next candidate.

Claims are **leases** (``lease_s``, default one hour, renewed by every turn): a task whose holder
vanished (a closed browser tab, a campaign killed with ``kill -9``) is re-queued once its lease
expires (:meth:`StarStore.expire_leases`, run before every claim and shortfall), exactly as if the
holder had released it (:meth:`StarStore.release`).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator
from sqlalchemy import (
    Boolean,
    Column,
    DateTime,
    Float,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    and_,
    bindparam,
    exists,
    false,
    func,
    insert,
    inspect,
    or_,
    select,
    tuple_,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ..errors import InputError
from ..storage import create_engine_for, ensure_schema
from .instructions import Instruction
from .matching import annotation_requirement, eligible
from .model import Likert, Participant, PreAnnotation, TaskKind, TaskRecord, TaskStatus, Turn
from .policy import Matching, Policy

__all__ = [
    "CAMPAIGN_STATUSES",
    "CampaignClosedError",
    "CampaignSettings",
    "ClaimError",
    "StarStore",
    "arbitration_needed",
    "task_record",
]

#: A campaign's lifecycle: ``open`` (claims allowed), ``paused`` (no new claims; held tasks may be
#: finished), ``closed`` (final: held tasks released, submissions refused).
CAMPAIGN_STATUSES = ("open", "paused", "closed")

#: Open tasks read per claim attempt (keyset pages beyond it only when none of them fits the person).
CLAIM_PAGE = 200
#: Candidate ids per locking attempt.
TAKE_CHUNK = 50
#: Dialogues read per round of export queries.
EXPORT_BATCH = 500
#: Every expertise a policy rule's matching can require: a participant who declared one is an expert.
EXPERTISE = frozenset(get_args(Matching)) - {"none", "demographic"}

metadata = MetaData()
participants = Table(
    "star_participants",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("body", Text, nullable=False),
    Column("simulated", Boolean, nullable=False),
)
instructions = Table(
    "star_instructions",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("campaign", String(64), nullable=False, index=True),
    Column("rule", String(64), nullable=False),
    Column("cell", Text, nullable=False),
    Column("record", Text, nullable=False),
)
tasks = Table(
    "star_tasks",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("campaign", String(64), nullable=False, index=True),
    Column("kind", String(16), nullable=False),
    Column("status", String(16), nullable=False, index=True),
    Column("instruction_id", String(64)),
    Column("dialogue_id", String(32), index=True),
    Column("participant_id", String(64)),
    Column("requirement", Text, nullable=False),
    Column("relaxed", Text),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("lease_expires_at", DateTime(timezone=True)),  # claimed tasks only; added to old stores by init()
)
# The claim queue (next open task of a kind, oldest first), lease expiry, and "tasks I hold": each
# an index range scan instead of a table scan. init() adds them to stores created without them.
Index("ix_star_tasks_queue", tasks.c.kind, tasks.c.status, tasks.c.created_at, tasks.c.id)
Index("ix_star_tasks_lease", tasks.c.status, tasks.c.lease_expires_at)
Index("ix_star_tasks_holder", tasks.c.participant_id, tasks.c.status)
campaign_rows = Table(  # per-campaign settings the store applies (the plan itself is in star_instructions)
    "star_campaigns",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("settings", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    # open / paused / closed (CAMPAIGN_STATUSES); added to older stores by init(), existing campaigns open
    Column("status", String(16), nullable=False, server_default="open"),
    # only the campaign's members (star_members) take its tasks; added to older stores by init(), off
    Column("members_only", Boolean, nullable=False, server_default=false()),
)
members = Table(  # who belongs to a members-only campaign (a lead adds them)
    "star_members",
    metadata,
    Column("campaign", String(64), nullable=False),
    Column("participant_id", String(64), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("campaign", "participant_id"),
)
Index("ix_star_members_participant", members.c.participant_id)
target_failures = Table(  # a target that failed to answer: recorded as a failure, never as a turn
    "star_target_failures",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("dialogue_id", String(32), nullable=False, index=True),
    Column("turn_index", Integer, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("reason", Text, nullable=False),
    Column("trace_id", String(32)),
    Column("created_at", DateTime(timezone=True), nullable=False),
)
dialogues = Table(
    "star_dialogues",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("campaign", String(64), nullable=False, index=True),
    Column("instruction_id", String(64), nullable=False),
    Column("task_id", String(32), nullable=False, unique=True),
    Column("red_teamer_id", String(64), nullable=False),
    Column("target", String(200), nullable=False),
    Column("status", String(16), nullable=False),
    Column("pre_annotation", Text),
    Column("refused", Boolean, nullable=False, default=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)
turns = Table(
    "star_turns",
    metadata,
    Column("dialogue_id", String(32), nullable=False),
    Column("idx", Integer, nullable=False),
    Column("role", String(16), nullable=False),
    Column("text", Text, nullable=False),
    Column("tension", Float),
    Column("state", String(40)),
    Column("trace_id", String(32)),
    Column("refused", Boolean),  # target turns: did the target refuse (the shared refusal judge)
    PrimaryKeyConstraint("dialogue_id", "idx"),
)
annotation_rows = Table(
    "star_annotations",
    metadata,
    Column("dialogue_id", String(32), nullable=False),
    Column("participant_id", String(64), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("rating", Integer, nullable=False),
    Column("reasoning", Text, nullable=False),
    Column("task_id", String(32), nullable=False, unique=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("dialogue_id", "participant_id"),
)
exposures = Table(  # who has seen which dialogue, in any role: the "never twice" key
    "star_exposures",
    metadata,
    Column("dialogue_id", String(32), nullable=False),
    Column("participant_id", String(64), nullable=False),
    Column("role", String(16), nullable=False),
    PrimaryKeyConstraint("dialogue_id", "participant_id"),
)
Index("ix_star_exposures_participant", exposures.c.participant_id)
declines = Table(  # red-teaming instructions a participant skipped: never offered to them again
    "star_declines",
    metadata,
    Column("instruction_id", String(64), nullable=False),
    Column("participant_id", String(64), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("instruction_id", "participant_id"),
)


class ClaimError(InputError):
    """No task can be given to this participant (with the reason)."""


class CampaignClosedError(InputError):
    """The campaign was closed by its lead: nothing more is submitted to it."""


class _CampaignNotOpenError(Exception):
    """The task just claimed belongs to a campaign that is paused or closed (the claim rolls back)."""


class _SeenDialogueError(Exception):
    """The claimer's exposure row for this dialogue appeared meanwhile (a concurrent claim of theirs)."""

    def __init__(self, dialogue_id: str) -> None:
        super().__init__(dialogue_id)
        self.dialogue_id = dialogue_id


def _relaxable(kind: TaskKind, why: str) -> bool:
    """Only a red-teaming task's in/out-group requirement may be relaxed, never the role."""
    return kind is TaskKind.RED_TEAM and ("attacker" in why or "demographics unknown" in why)


def task_record(row: Any) -> TaskRecord:
    """A :class:`TaskRecord` from a ``star_tasks`` row mapping."""
    return TaskRecord(
        id=row["id"],
        kind=TaskKind(row["kind"]),
        status=TaskStatus(row["status"]),
        campaign=row["campaign"],
        instruction_id=row["instruction_id"],
        dialogue_id=row["dialogue_id"],
        participant_id=row["participant_id"],
        requirement=json.loads(row["requirement"]),
        relaxed=row["relaxed"],
        lease_expires_at=_aware(row["lease_expires_at"]),
    )


class CampaignSettings(BaseModel):
    """Settings a campaign stores with its plan; the store applies them to every task it opens."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @field_validator("quota")
    @classmethod
    def _quota(cls, value: dict[str, int]) -> dict[str, int]:
        kinds = {k.value for k in TaskKind}
        bad = sorted(set(value) - kinds)
        if bad:
            raise ValueError(f"quota for unknown task kinds {bad}: use {sorted(kinds)}")
        if any(n < 1 for n in value.values()):
            raise ValueError("a quota is at least 1 (leave it out for no limit)")
        return value

    outgroup_annotator_share: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="Share of annotation slots on group-targeting dialogues reserved for out-group annotators "
        "(the control group); the rest need in-group annotators. Balanced within ±1 per target group.",
    )
    quota: dict[str, int] = Field(
        default_factory=dict,
        description="Per-person quota: the most tasks of a kind (red_team, annotate, arbitrate) one participant "
        "takes in this campaign (claimed or done), so no single person's view dominates. Set at creation.",
    )
    relax_red_team: bool = Field(
        False,
        description="When nobody who meets a red-teaming task's in/out-group requirement takes it, a red "
        "teamer who does not may (the lab's claims; the task records why, the export says matching_relaxed).",
    )


def _now() -> datetime:
    return datetime.now(UTC)


def _aware(value: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes; every time the store writes is UTC."""
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


def arbitration_needed(a: int, b: int) -> bool:
    """Paper §3.2: arbitrate exactly when two ratings are two or more steps apart."""
    return abs(a - b) >= 2


def _claiming(where: Any) -> Any:
    """The claiming update for the task ``where`` picks, returning the whole row."""
    return (
        update(tasks)
        .where(and_(where, tasks.c.status == "open"))
        .values(
            status="claimed",
            participant_id=bindparam("new_pid"),
            relaxed=bindparam("new_note"),
            updated_at=bindparam("new_now"),
            lease_expires_at=bindparam("new_lease"),
        )
        .returning(*tasks.c)
    )


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
_PARTICIPANT = select(participants.c.body).where(participants.c.id == bindparam("pid"))
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
            tasks.c.status.in_(("claimed", "submitted")),
            tasks.c.campaign.in_(bindparam("campaigns", expanding=True)),
        )
    )
    .group_by(tasks.c.campaign)
)
_HELD_OF_KIND = _HOLDS.with_only_columns(tasks.c.id).where(tasks.c.kind == bindparam("kind")).limit(1)
_UNSEEN = ~exists().where(
    and_(exposures.c.dialogue_id == tasks.c.dialogue_id, exposures.c.participant_id == bindparam("pid"))
)
#: The task's campaign takes claims: no row (a campaign stored before statuses existed) or status open.
_CAMPAIGN_OPEN = ~exists().where(and_(campaign_rows.c.name == tasks.c.campaign, campaign_rows.c.status != "open"))
_IS_MEMBER = exists().where(
    and_(members.c.campaign == campaign_rows.c.name, members.c.participant_id == bindparam("pid"))
)
#: ... and this person (``pid``) may take it: open, and members-only campaigns only for their members.
_MAY_CLAIM = ~exists().where(
    and_(
        campaign_rows.c.name == tasks.c.campaign,
        or_(campaign_rows.c.status != "open", and_(campaign_rows.c.members_only, ~_IS_MEMBER)),
    )
)
#: A campaign's status, share-locked on PostgreSQL: a lead's pause or close (an update of the row)
#: waits for claims and submissions in flight, and they wait for it.
_STATUS_SHARED = (
    select(campaign_rows.c.status).where(campaign_rows.c.name == bindparam("campaign")).with_for_update(read=True)
)
#: The same for a claim: status, members-only, and whether the claimer is a member.
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


class StarStore:
    """The STAR store. ``lease_s`` is how long a claim lasts without activity; ``clock`` (UTC
    ``datetime`` factory) exists so tests can move time instead of sleeping."""

    def __init__(
        self,
        url: str,
        policy: Policy,
        *,
        lease_s: float = 3600.0,
        clock: Callable[[], datetime] | None = None,
        **engine_kwargs: Any,
    ) -> None:
        if lease_s <= 0:
            raise InputError(f"lease_s must be positive (got {lease_s})")
        # WAL + busy timeout on SQLite: the web platform and a campaign may share one store file
        self.engine: AsyncEngine = create_engine_for(url, **engine_kwargs)
        # The same pool in autocommit, for reads: no BEGIN / ROLLBACK around a single SELECT.
        self._reader = self.engine.execution_options(isolation_level="AUTOCOMMIT")
        self.policy = policy
        self.lease_s = lease_s
        self._clock = clock or _now
        self._ready = False
        self._init_lock = asyncio.Lock()
        self._quotas: dict[str, dict[str, int]] = {}  # campaign -> quota (set at creation, never changed)

    def _now(self) -> datetime:
        return self._clock()

    def _lease(self, lease_s: float | None = None) -> datetime:
        return self._now() + timedelta(seconds=self.lease_s if lease_s is None else lease_s)

    async def init(self) -> None:
        if not self._ready:
            # Only what is missing (a fresh database, an older store without the newer columns or
            # indexes): no DDL, hence no table lock, beside server workers already at work.
            async with self._init_lock:
                if not self._ready:
                    async with self.engine.begin() as conn:  # older stores: new columns first (indexes use them)
                        await conn.run_sync(_add_missing_columns)
                    await ensure_schema(self.engine, metadata)
                    self._ready = True

    async def close(self) -> None:
        await self.engine.dispose()

    # -- participants ------------------------------------------------------------------------
    async def add_participants(self, people: Sequence[Participant]) -> None:
        """All or nothing: a duplicate id refuses the whole batch."""
        await self.init()
        try:
            async with self.engine.begin() as conn:
                for p in people:
                    await conn.execute(
                        insert(participants).values(id=p.id, body=p.model_dump_json(), simulated=p.simulated)
                    )
        except IntegrityError:
            raise InputError("a participant with one of these ids already exists; nothing was added") from None

    async def participant(self, pid: str) -> Participant:
        await self.init()
        async with self._read() as conn:
            return await self._participant(conn, pid)

    async def list_participants(self) -> list[Participant]:
        await self.init()
        async with self.engine.connect() as conn:
            rows = (await conn.execute(select(participants.c.body).order_by(participants.c.id))).all()
        return [Participant.model_validate_json(r[0]) for r in rows]

    # -- campaign ----------------------------------------------------------------------------
    async def create_campaign(
        self,
        campaign: str,
        items: Sequence[Instruction],
        *,
        outgroup_annotator_share: float = 0.0,
        quota: dict[str, int] | None = None,
        members_only: bool = False,
    ) -> int:
        """Store the plan and one red-teaming task per instruction; group-targeting instructions
        require an in-group or an out-group attacker, 50/50 within ±1 per cell, group and campaign.
        ``outgroup_annotator_share`` and the per-person ``quota`` (see :class:`CampaignSettings`) are
        stored with the campaign; ``members_only`` campaigns are taken only by the participants
        added with :meth:`add_members`."""
        settings = CampaignSettings(outgroup_annotator_share=outgroup_annotator_share, quota=quota or {})
        await self.init()
        by_cell: dict[str, list[Instruction]] = {}
        for item in items:
            by_cell.setdefault(item.cell, []).append(item)
        # Alternate in/out within each cell, starting each cell with whichever status its group is
        # short of (ties: whichever the whole campaign is short of). Balanced within ±1 per cell,
        # per group, and overall.
        group_counts: dict[str, Counter[str]] = {}
        overall: Counter[str] = Counter()
        now = self._now()
        instruction_rows: list[dict[str, Any]] = []
        task_rows: list[dict[str, Any]] = []
        for cell in sorted(by_cell):
            cell_items = by_cell[cell]
            group = cell_items[0].target_group
            counts = group_counts.setdefault(json.dumps(group, sort_keys=True), Counter())
            if counts["in"] != counts["out"]:
                first = "in" if counts["in"] < counts["out"] else "out"
            else:
                first = "in" if overall["in"] <= overall["out"] else "out"
            other = "out" if first == "in" else "in"
            for i, item in enumerate(cell_items):
                requirement: dict[str, Any] = {}
                if item.target_group:
                    status = first if i % 2 == 0 else other
                    counts[status] += 1
                    overall[status] += 1
                    requirement = {"attacker": status, "group": item.target_group}
                # Instruction ids are unique per seed, not across campaigns: stored ids carry the
                # campaign, so two campaigns with the same seed do not collide.
                stored_id = f"{campaign}:{item.id}"
                instruction_rows.append(
                    {
                        "id": stored_id,
                        "campaign": campaign,
                        "rule": item.rule,
                        "cell": item.cell,
                        "record": json.dumps({**item.record(), "id": stored_id}),
                    }
                )
                task_rows.append(
                    {
                        "id": uuid.uuid4().hex,
                        "campaign": campaign,
                        "kind": TaskKind.RED_TEAM.value,
                        "status": "open",
                        "instruction_id": stored_id,
                        "dialogue_id": None,
                        "participant_id": None,
                        "requirement": json.dumps(requirement),
                        "relaxed": None,
                        "created_at": now,
                        "updated_at": now,
                    }
                )
        async with self.engine.begin() as conn:  # one transaction: the whole plan or nothing
            existing = (
                await conn.execute(select(campaign_rows.c.name).where(campaign_rows.c.name == campaign))
            ).first()
            if existing is None:
                await conn.execute(
                    insert(campaign_rows).values(
                        name=campaign, settings=settings.model_dump_json(), created_at=now, members_only=members_only
                    )
                )
            if instruction_rows:
                await conn.execute(insert(instructions), instruction_rows)
                await conn.execute(insert(tasks), task_rows)
        return len(items)

    async def campaign_settings(self, campaign: str) -> CampaignSettings:
        """The campaign's stored settings (defaults for campaigns stored before settings existed)."""
        await self.init()
        async with self._read() as conn:
            row = (await conn.execute(select(campaign_rows.c.settings).where(campaign_rows.c.name == campaign))).first()
        return CampaignSettings.model_validate_json(row[0]) if row else CampaignSettings()

    async def update_campaign_settings(self, campaign: str, **changes: Any) -> CampaignSettings:
        """Change a stored campaign's settings (validated); returns the new ones."""
        if "quota" in changes:
            raise InputError("a campaign's quota is set when it is created", hint="create a new campaign")
        current = await self.campaign_settings(campaign)
        updated = CampaignSettings.model_validate({**current.model_dump(), **changes})
        async with self.engine.begin() as conn:
            result = await conn.execute(
                update(campaign_rows).where(campaign_rows.c.name == campaign).values(settings=updated.model_dump_json())
            )
        if result.rowcount != 1:
            raise InputError(f"no campaign '{campaign}' in this store")
        return updated

    async def relaxed_campaigns(self) -> list[str]:
        """Campaigns whose red teaming may be relaxed (:attr:`CampaignSettings.relax_red_team`), oldest first."""
        await self.init()
        async with self._read() as conn:
            rows = (
                await conn.execute(
                    select(campaign_rows.c.name, campaign_rows.c.settings).order_by(campaign_rows.c.created_at)
                )
            ).all()
        return [str(n) for n, body in rows if CampaignSettings.model_validate_json(body).relax_red_team]

    async def campaign_status(self, campaign: str) -> str:
        """``open``, ``paused`` or ``closed`` (a campaign stored before statuses existed is open)."""
        return (await self.campaign_statuses([campaign]))[campaign]

    async def campaign_statuses(self, campaigns: Collection[str] | None = None) -> dict[str, str]:
        """The status of each of ``campaigns`` (default: every campaign with stored settings)."""
        await self.init()
        query = select(campaign_rows.c.name, campaign_rows.c.status)
        if campaigns is not None:
            query = query.where(campaign_rows.c.name.in_(list(campaigns)))
        async with self._read() as conn:
            found = {str(n): str(st) for n, st in (await conn.execute(query)).all()}
        return {c: found.get(c, "open") for c in campaigns} if campaigns is not None else found

    async def set_campaign_status(self, campaign: str, status: str) -> list[tuple[str, str]]:
        """Pause (``paused``), resume (``open``) or close (``closed``) a campaign.

        Paused: no new claims (held tasks may still be finished and submitted). Closed is final:
        no claims, no submissions, and every task still held is released (a started red-teaming
        dialogue is kept as ``abandoned``, as on a skip). Closing again releases anything still
        held (e.g. after a crash between the two steps). Returns the released ``(task, participant)``
        pairs, so the caller can stop their clocks. Raises :class:`InputError` for an unknown
        status or campaign, or for reopening or pausing a closed campaign."""
        if status not in CAMPAIGN_STATUSES:
            raise InputError(f"unknown campaign status '{status[:20]}'", hint=", ".join(CAMPAIGN_STATUSES))
        await self.init()
        async with self.engine.begin() as conn:
            row = (
                await conn.execute(
                    select(campaign_rows.c.status).where(campaign_rows.c.name == campaign).with_for_update()
                )
            ).first()
            if row is None:  # a campaign stored before settings existed gets its row now
                planned = (
                    await conn.execute(select(instructions.c.id).where(instructions.c.campaign == campaign).limit(1))
                ).first()
                if planned is None:
                    raise InputError(f"no campaign '{campaign}' in this store")
                await conn.execute(
                    insert(campaign_rows).values(
                        name=campaign, settings=CampaignSettings().model_dump_json(), created_at=self._now()
                    )
                )
                current = "open"
            else:
                current = str(row[0])
            if current == "closed" and status != "closed":
                raise InputError(f"campaign '{campaign}' is closed, which is final", hint="start a new campaign")
            if current != status:
                await conn.execute(update(campaign_rows).where(campaign_rows.c.name == campaign).values(status=status))
        if status != "closed":
            return []
        # Committed: from here no claim of this campaign succeeds (each checks the status under a
        # share lock), so the claims read now are all there will be.
        async with self._read() as conn:
            held = (
                await conn.execute(
                    select(tasks.c.id, tasks.c.participant_id).where(
                        and_(tasks.c.campaign == campaign, tasks.c.status == "claimed")
                    )
                )
            ).all()
        released = []
        for task_id, pid in held:
            try:
                await self.release(str(task_id), str(pid))
            except InputError:
                continue  # submitted or released meanwhile
            released.append((str(task_id), str(pid)))
        return released

    # -- membership ------------------------------------------------------------------------------
    async def members_only(self, campaign: str) -> bool:
        """Whether only the campaign's members take its tasks (False for a campaign without a row)."""
        await self.init()
        async with self._read() as conn:
            query = select(campaign_rows.c.members_only).where(campaign_rows.c.name == campaign)
            return bool((await conn.execute(query)).scalar_one_or_none())

    async def set_members_only(self, campaign: str, on: bool) -> None:
        """Restrict the campaign to its members (``on``) or open it to every participant."""
        await self.init()
        async with self.engine.begin() as conn:
            result = await conn.execute(
                update(campaign_rows).where(campaign_rows.c.name == campaign).values(members_only=on)
            )
        if result.rowcount != 1:
            raise InputError(f"no campaign '{campaign}' with stored settings in this store")

    async def members(self, campaign: str) -> list[str]:
        """The participant ids added to the campaign, sorted."""
        await self.init()
        async with self._read() as conn:
            query = select(members.c.participant_id).where(members.c.campaign == campaign)
            return sorted(str(r[0]) for r in (await conn.execute(query)).all())

    async def add_members(self, campaign: str, participant_ids: Collection[str]) -> int:
        """Add participants to the campaign (known participants only; adding a member again is a
        no-op). Returns how many were new."""
        await self.init()
        wanted = set(participant_ids)
        if not wanted:
            return 0
        async with self.engine.begin() as conn:
            known = {
                str(r[0])
                for r in (await conn.execute(select(participants.c.id).where(participants.c.id.in_(wanted)))).all()
            }
            if wanted - known:
                unknown = sorted(wanted - known)
                more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
                raise InputError(f"unknown participants {', '.join(unknown[:5])}{more}; nobody was added")
            have = {
                str(r[0])
                for r in (
                    await conn.execute(
                        select(members.c.participant_id).where(
                            and_(members.c.campaign == campaign, members.c.participant_id.in_(wanted))
                        )
                    )
                ).all()
            }
            new = sorted(wanted - have)
            if new:
                now = self._now()
                await conn.execute(
                    insert(members), [{"campaign": campaign, "participant_id": p, "created_at": now} for p in new]
                )
        return len(new)

    async def remove_member(self, campaign: str, participant_id: str) -> list[str]:
        """Take a participant out of the campaign: no new claims of it (if it is members-only), and
        the tasks of it they hold are released as on a skip. Their submitted work stays. Returns
        the released task ids. Raises :class:`InputError` for someone who is not a member and holds
        no task of it (nothing to do: an unknown id, a lead, a typo); tasks of it held without a
        membership row (a removal interrupted before the release, an open campaign) are released."""
        await self.init()
        async with self.engine.begin() as conn:
            result = await conn.execute(
                members.delete().where(and_(members.c.campaign == campaign, members.c.participant_id == participant_id))
            )
        held = [task for task in await self.claimed_tasks(participant_id) if task.campaign == campaign]
        if result.rowcount == 0 and not held:
            raise InputError(
                f"'{participant_id[:64]}' is not a member of campaign '{campaign}'; nothing was changed",
                hint="remove a participant listed under the campaign's members",
            )
        released = []
        for task in held:
            try:
                await self.release(task.id, participant_id)
            except InputError:
                continue
            released.append(task.id)
        return released

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

    async def _refuse_if_closed(self, conn: AsyncConnection, campaign: str) -> str:
        """The campaign's status under a share lock; raises :class:`CampaignClosedError` if closed."""
        status = (await conn.execute(_STATUS_SHARED, {"campaign": campaign})).scalar_one_or_none() or "open"
        if status == "closed":
            raise CampaignClosedError(
                f"campaign '{campaign}' was closed by its lead: this task was released and nothing more is stored",
                hint="your earlier work is kept; take a task of another campaign",
            )
        return str(status)

    async def has_campaign(self, campaign: str) -> bool:
        await self.init()
        async with self.engine.connect() as conn:
            query = select(instructions.c.id).where(instructions.c.campaign == campaign).limit(1)
            return (await conn.execute(query)).first() is not None

    async def dialogue_instruction(self, dialogue_id: str) -> dict[str, Any]:
        """The instruction record a dialogue was red-teamed from."""
        async with self._read() as conn:
            query = (
                select(instructions.c.record)
                .join(dialogues, dialogues.c.instruction_id == instructions.c.id)
                .where(dialogues.c.id == dialogue_id)
            )
            row = (await conn.execute(query)).first()
        if row is None:
            raise InputError(f"unknown dialogue '{dialogue_id}'")
        result: dict[str, Any] = json.loads(row[0])
        return result

    async def instruction(self, instruction_id: str) -> dict[str, Any]:
        async with self._read() as conn:
            row = (await conn.execute(select(instructions.c.record).where(instructions.c.id == instruction_id))).first()
        if row is None:
            raise InputError(f"unknown instruction '{instruction_id}'")
        result: dict[str, Any] = json.loads(row[0])
        return result

    # -- claiming ----------------------------------------------------------------------------
    async def claim(
        self,
        participant_id: str,
        kind: TaskKind,
        *,
        campaign: str | None = None,
        relax: bool = False,
        lease_s: float | None = None,
    ) -> TaskRecord:
        """Give the participant the oldest open task they may take, leased for ``lease_s``
        (default: the store's). ``relax`` lets a red teamer take a task whose in/out-group
        requirement they do not meet; the task records why. Expired leases are re-queued first.

        Concurrent claimers do not contend: the candidates the participant may take (matching is
        Python, :func:`~psychoalign.star.matching.eligible`) are read without locks, then one of
        them is taken in one statement that, on PostgreSQL, locks with ``FOR UPDATE SKIP LOCKED``
        (a row another claimer is taking is passed over, not waited for). On SQLite the single
        writer makes the same statement atomic. If every candidate was locked by others, a
        conditional update that waits for them settles it, so "no task" is only ever answered
        after a read that saw none. The unique exposure row still guards "never twice"."""
        await self.init()
        async with self._read() as conn:  # one round trip each, no transaction to open or roll back
            person = await self._participant(conn, participant_id)
        await self.expire_leases(campaign)
        excluded: set[str] = set()  # dialogues whose exposure insert lost a race to this same person
        while True:
            async with self._read() as conn:
                rows = (await conn.execute(*self._queue(participant_id, kind, campaign, excluded))).all()
            verdicts: dict[str, tuple[bool, str]] = {}
            strict: list[str] = []
            relaxable: list[tuple[Any, str]] = []
            full = await self._at_quota(participant_id, kind, {row.campaign for row in rows})
            for row in rows:
                if row.campaign in full:
                    continue
                if row.requirement not in verdicts:
                    verdicts[row.requirement] = eligible(person, kind, json.loads(row.requirement))
                ok, why = verdicts[row.requirement]
                if ok:
                    strict.append(row.id)
                elif relax and _relaxable(kind, why):
                    relaxable.append((row, f"relaxed: {why}"))  # never relax the role
            if not strict and not relaxable:
                if len(rows) < CLAIM_PAGE:
                    raise ClaimError(await self._no_task(person, kind, campaign, full))
                # a full page of tasks this person may not take: look further down the queue
                found = await self._claim_beyond(person, kind, campaign, {r.id for r in rows}, lease_s, relax)
                if isinstance(found, TaskRecord):
                    return found
                raise ClaimError(found)
            try:
                taken = await self._take_first(strict, participant_id, kind, None, lease_s)
                for row, note in relaxable:
                    if taken is not None:
                        break
                    taken = await self._take_first([row.id], participant_id, kind, note, lease_s)
            except _SeenDialogueError as seen:
                excluded.add(seen.dialogue_id)
                continue
            except _CampaignNotOpenError:
                continue  # the next read of the queue leaves that campaign out
            if taken is not None:
                return taken
            # every candidate was taken by someone else meanwhile: read the queue again

    async def quotas(self, campaigns: Collection[str]) -> dict[str, dict[str, int]]:
        """The per-person quota of each of ``campaigns`` (cached: a quota never changes)."""
        missing = [c for c in campaigns if c not in self._quotas]
        if missing:
            async with self._read() as conn:
                query = select(campaign_rows.c.name, campaign_rows.c.settings).where(campaign_rows.c.name.in_(missing))
                for name, body in (await conn.execute(query)).all():
                    self._quotas[str(name)] = CampaignSettings.model_validate_json(body).quota
        return {c: self._quotas.get(c, {}) for c in campaigns}

    async def _at_quota(self, participant_id: str, kind: TaskKind, campaigns: set[str]) -> set[str]:
        """Which of ``campaigns`` this person has reached the ``kind`` quota of (no query unless one has a quota)."""
        caps = {c: q[kind.value] for c, q in (await self.quotas(campaigns)).items() if kind.value in q}
        if not caps:
            return set()
        async with self._read() as conn:
            params = {"pid": participant_id, "kind": kind.value, "campaigns": list(caps)}
            load = {str(c): int(n) for c, n in (await conn.execute(_LOAD, params)).all()}
        return {c for c, cap in caps.items() if load.get(c, 0) >= cap}

    def _read(self) -> Any:
        """A connection for reads in autocommit: one round trip per query (no BEGIN / ROLLBACK)."""
        return self._reader.connect()

    async def _participant(self, conn: AsyncConnection, pid: str) -> Participant:
        row = (await conn.execute(_PARTICIPANT, {"pid": pid})).first()
        if row is None:
            raise InputError(f"unknown participant '{pid}'")
        return Participant.model_validate_json(row[0])

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
                rows = (await conn.execute(*self._queue(person.id, kind, campaign, (), after))).all()
            full = await self._at_quota(person.id, kind, {row.campaign for row in rows})
            for row in rows:
                if row.id in ineligible or row.campaign in full:
                    continue
                ok, why = eligible(person, kind, json.loads(row.requirement))
                note = None
                if not ok:
                    if not (relax and _relaxable(kind, why)):
                        continue
                    note = f"relaxed: {why}"
                try:
                    taken = await self._take_first([row.id], person.id, kind, note, lease_s)
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
                if state is not None and (state.status != "open" or (state.members_only and not state.member)):
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
        reasons: Counter[str] = Counter()
        async with self._read() as conn:
            query = select(tasks.c.requirement, tasks.c.dialogue_id, tasks.c.instruction_id, tasks.c.campaign).where(
                and_(tasks.c.kind == kind.value, tasks.c.status == "open")
            )
            if campaign:
                query = query.where(tasks.c.campaign == campaign)
            rows = (await conn.execute(query.order_by(tasks.c.created_at, tasks.c.id).limit(500))).all()
            seen = {
                r[0]
                for r in (
                    await conn.execute(select(exposures.c.dialogue_id).where(exposures.c.participant_id == person.id))
                ).all()
            }
            skipped = {
                r[0]
                for r in (
                    await conn.execute(select(declines.c.instruction_id).where(declines.c.participant_id == person.id))
                ).all()
            }
        scope = await self._member_scope({r[3] for r in rows})
        for requirement, dialogue_id, instruction_id, task_campaign in rows:
            if task_campaign in scope and person.id not in scope[task_campaign]:
                reasons["not a member of this campaign"] += 1
                continue
            if task_campaign in at_quota:
                reasons["reached this campaign's per-person quota"] += 1
                continue
            if dialogue_id is not None and dialogue_id in seen:
                reasons["already saw this dialogue"] += 1
                continue
            if dialogue_id is None and kind is TaskKind.RED_TEAM and instruction_id in skipped:
                reasons["skipped this instruction before"] += 1
                continue
            ok, why = eligible(person, kind, json.loads(requirement))
            if not ok:
                reasons[why] += 1
        detail = "; ".join(f"{why} ({n})" for why, n in reasons.most_common(3)) or "no open tasks"
        return f"no {kind.value} task for participant '{person.id}': {detail}"

    async def assign_all(
        self,
        kind: TaskKind,
        *,
        campaign: str | None = None,
        relax: bool = False,
        participant_ids: Collection[str] | None = None,
        max_per_participant: int | None = None,
        lease_s: float | None = None,
        limit: int | None = None,
    ) -> dict[str, Any]:
        """Assign every open task of ``kind`` at once (a research lead's batch assignment, and
        how an unattended campaign spreads work over its personas).

        Balanced: tasks with the fewest eligible participants go first, and each goes to the
        eligible participant (restricted to ``participant_ids`` if given) with the fewest tasks of
        this kind in this campaign (claimed or done) who has not seen its dialogue, so when
        everyone is eligible for everything loads differ by at most one. Nobody gets more than
        ``max_per_participant`` tasks of this kind in the campaign. Same rules as :meth:`claim`,
        written in one transaction with the same conditional update, so it is safe next to
        concurrent claimers. ``limit`` stops after that many assignments (a worker that takes
        work in rounds, so its leases do not run out while it works through a long batch).
        Returns counts, the assignments (``task_id -> participant``), and the shortfall per
        requirement and reason for tasks nobody could take.
        """
        await self.init()
        await self.expire_leases(campaign)
        if campaign is not None:  # the campaign's per-person quota caps the batch too
            cap = (await self.quotas([campaign]))[campaign].get(kind.value)
            if cap is not None:
                max_per_participant = cap if max_per_participant is None else min(cap, max_per_participant)
        people = await self.list_participants()
        if participant_ids is not None:
            wanted = set(participant_ids)
            people = [p for p in people if p.id in wanted]
        async with self.engine.connect() as conn:
            query = select(
                tasks.c.id,
                tasks.c.dialogue_id,
                tasks.c.requirement,
                tasks.c.created_at,
                tasks.c.instruction_id,
                tasks.c.campaign,
            ).where(and_(tasks.c.kind == kind.value, tasks.c.status == "open", _CAMPAIGN_OPEN))
            if campaign:
                query = query.where(tasks.c.campaign == campaign)
            open_tasks = (await conn.execute(query.order_by(tasks.c.created_at, tasks.c.id))).all()
            seen_rows = (await conn.execute(select(exposures.c.dialogue_id, exposures.c.participant_id))).all()
            declined_rows = (await conn.execute(select(declines.c.instruction_id, declines.c.participant_id))).all()
            load_query = select(tasks.c.participant_id).where(
                and_(tasks.c.kind == kind.value, tasks.c.status.in_(("claimed", "submitted")))
            )
            if campaign:
                load_query = load_query.where(tasks.c.campaign == campaign)
            load_rows = (await conn.execute(load_query)).all()
        seen: set[tuple[str, str]] = {(d, p) for d, p in seen_rows}
        declined: set[tuple[str, str]] = {(i, p) for i, p in declined_rows}
        load: Counter[str] = Counter(r[0] for r in load_rows if r[0])
        eligible_by_req: dict[str, list[str]] = {}
        relaxed_by_req: dict[str, list[str]] = {}
        scope = await self._member_scope({t[5] for t in open_tasks})  # members-only campaigns: their members
        for _, _, req_json, _, _, _ in open_tasks:
            if req_json not in eligible_by_req:
                requirement = json.loads(req_json)
                checks = [(p.id, eligible(p, kind, requirement)) for p in people]
                eligible_by_req[req_json] = [pid for pid, (ok, _) in checks if ok]
                relaxed_by_req[req_json] = [
                    pid
                    for pid, (ok, why) in checks
                    if not ok and kind is TaskKind.RED_TEAM and ("attacker" in why or "demographics unknown" in why)
                ]
        # most constrained first (stable: oldest first among equals)
        ordered = sorted(open_tasks, key=lambda t: len(eligible_by_req[t[2]]))
        assignments: list[tuple[str, str, str | None, str | None]] = []
        shortfall: Counter[tuple[str, str]] = Counter()
        for task_id, dialogue_id, req_json, _, instruction_id, task_campaign in ordered:
            if limit is not None and len(assignments) >= limit:
                break
            note = None
            allowed = scope.get(task_campaign)

            def free(
                pids: list[str],
                dialogue: str | None = dialogue_id,
                instruction: str | None = instruction_id,
                allowed: set[str] | None = allowed,
            ) -> list[str]:
                return [
                    pid
                    for pid in pids
                    if (allowed is None or pid in allowed)
                    and (dialogue is None or (dialogue, pid) not in seen)
                    and (dialogue is not None or (instruction or "", pid) not in declined)
                    and (max_per_participant is None or load[pid] < max_per_participant)
                ]

            pool = free(eligible_by_req[req_json])
            if not pool and relax:
                pool = free(relaxed_by_req[req_json])
                note = "relaxed: no matching participant (batch assignment)"
            if not pool:
                if not eligible_by_req[req_json]:
                    reason = "no eligible participant"
                elif allowed is not None and not allowed & set(eligible_by_req[req_json]):
                    reason = "no eligible participant is a member of the campaign"
                elif dialogue_id is not None and all((dialogue_id, p) in seen for p in eligible_by_req[req_json]):
                    reason = "every eligible participant has already seen the dialogue"
                elif dialogue_id is None and all((instruction_id, p) in declined for p in eligible_by_req[req_json]):
                    reason = "every eligible participant skipped this instruction"
                else:
                    reason = "every eligible participant is at the per-participant limit"
                shortfall[(req_json, reason)] += 1
                continue
            chosen = min(pool, key=lambda pid: (load[pid], pid))
            load[chosen] += 1
            if dialogue_id is not None:
                seen.add((dialogue_id, chosen))
            assignments.append((task_id, chosen, dialogue_id, note))
        now = self._now()
        lease = self._lease(lease_s)
        taken: dict[str, str] = {}
        async with self.engine.begin() as conn:
            if assignments:  # a lead's pause or close waits for this batch, or the batch sees it
                await conn.execute(select(campaign_rows.c.name).with_for_update(read=True))
            for task_id, pid, dialogue_id, note in assignments:
                result = await conn.execute(
                    update(tasks)
                    .where(and_(tasks.c.id == task_id, tasks.c.status == "open", _CAMPAIGN_OPEN))
                    .values(status="claimed", participant_id=pid, relaxed=note, updated_at=now, lease_expires_at=lease)
                )
                if result.rowcount == 1:
                    taken[task_id] = pid
                    if dialogue_id is not None:
                        await conn.execute(
                            insert(exposures).values(dialogue_id=dialogue_id, participant_id=pid, role=kind.value)
                        )
        return {
            "assigned": len(taken),
            "open_before": len(open_tasks),
            "participants_used": len(set(taken.values())),
            "max_load": max(load.values(), default=0),
            "assignments": taken,
            "shortfall": [
                {
                    "requirement": json.loads(r),
                    "open_tasks": n,
                    "reason": why,
                    "eligible_participants": len(eligible_by_req[r]),
                }
                for (r, why), n in shortfall.items()
            ],
        }

    async def task(self, task_id: str) -> TaskRecord:
        async with self._read() as conn:
            row = (await conn.execute(_TASK, {"task_id": task_id})).mappings().first()
        if row is None:
            raise InputError(f"unknown task '{task_id}'")
        return task_record(row)

    async def _own(self, conn: AsyncConnection, task_id: str, participant_id: str, kind: TaskKind) -> Any:
        row = (await conn.execute(select(tasks).where(tasks.c.id == task_id))).mappings().first()
        if row is None or row["kind"] != kind.value:
            raise InputError(f"no {kind.value} task '{task_id}'")
        await self._refuse_if_closed(conn, row["campaign"])
        if row["participant_id"] != participant_id or row["status"] != "claimed":
            raise InputError(f"task '{task_id}' is not claimed by '{participant_id}' (status {row['status']})")
        return row

    # -- red teaming -------------------------------------------------------------------------
    async def start_dialogue(self, task_id: str, participant_id: str, target: str) -> str:
        async with self.engine.begin() as conn:
            row = await self._own(conn, task_id, participant_id, TaskKind.RED_TEAM)
            existing = (await conn.execute(select(dialogues.c.id).where(dialogues.c.task_id == task_id))).first()
            if existing is not None:
                return str(existing[0])  # resuming after a crash
            dialogue_id = uuid.uuid4().hex
            await conn.execute(
                insert(dialogues).values(
                    id=dialogue_id,
                    campaign=row["campaign"],
                    instruction_id=row["instruction_id"],
                    task_id=task_id,
                    red_teamer_id=participant_id,
                    target=target,
                    status="in_progress",
                    refused=False,
                    created_at=self._now(),
                )
            )
            await conn.execute(
                insert(exposures).values(dialogue_id=dialogue_id, participant_id=participant_id, role="red_team")
            )
        return dialogue_id

    async def add_turn(self, dialogue_id: str, turn: Turn) -> int:
        """Append one turn (its own transaction: a crash keeps every turn before it) and renew
        the red-teaming task's lease. Refused unless the dialogue is in progress (an abandoned
        dialogue, whose task was released or expired, takes no more turns)."""
        return (await self.add_turns(dialogue_id, [turn]))[0]

    async def add_turns(self, dialogue_id: str, new_turns: Sequence[Turn]) -> list[int]:
        """Append several turns in one transaction (e.g. a red-teamer message with the target's
        reply: both or neither). Returns their indices."""
        async with self.engine.begin() as conn:
            # The row lock (PostgreSQL) serialises two appends to one dialogue, from any server
            # worker: the second numbers its turns after the first's instead of colliding.
            d = (
                await conn.execute(
                    select(dialogues.c.status, dialogues.c.task_id, dialogues.c.campaign)
                    .where(dialogues.c.id == dialogue_id)
                    .with_for_update()
                )
            ).first()
            if d is not None:
                await self._refuse_if_closed(conn, d[2])
            if d is None or d[0] != "in_progress":
                raise InputError(
                    f"dialogue '{dialogue_id}' is not in progress ({d[0] if d else 'unknown'})",
                    hint="a released or expired task's dialogue takes no more turns; claim a new task",
                )
            n = len((await conn.execute(select(turns.c.idx).where(turns.c.dialogue_id == dialogue_id))).all())
            for i, turn in enumerate(new_turns):
                await conn.execute(
                    insert(turns).values(
                        dialogue_id=dialogue_id,
                        idx=n + i,
                        role=turn.role,
                        text=turn.text,
                        tension=turn.tension,
                        state=turn.state,
                        trace_id=turn.trace_id,
                        refused=turn.refused,
                    )
                )
            await conn.execute(
                update(tasks)
                .where(and_(tasks.c.id == d[1], tasks.c.status == "claimed"))
                .values(lease_expires_at=self._lease(), updated_at=self._now())
            )
        return list(range(n, n + len(new_turns)))

    async def record_target_failure(
        self, dialogue_id: str, reason: str, *, attempt: int = 1, trace_id: str | None = None
    ) -> None:
        """The target failed to answer (error, timeout, fail-closed negotiation): a failure of the
        target, stored beside the dialogue, never as a turn. ``attempt`` counts retries from 1."""
        async with self.engine.begin() as conn:
            n = len((await conn.execute(select(turns.c.idx).where(turns.c.dialogue_id == dialogue_id))).all())
            await conn.execute(
                insert(target_failures).values(
                    id=uuid.uuid4().hex,
                    dialogue_id=dialogue_id,
                    turn_index=n,
                    attempt=attempt,
                    reason=reason[:2000],
                    trace_id=trace_id,
                    created_at=self._now(),
                )
            )

    async def target_failure_counts(self, campaign: str) -> dict[str, int]:
        """Failed target attempts per dialogue of the campaign (dialogues with none are absent)."""
        async with self.engine.connect() as conn:
            rows = (
                await conn.execute(
                    select(target_failures.c.dialogue_id, func.count())
                    .join(dialogues, dialogues.c.id == target_failures.c.dialogue_id)
                    .where(dialogues.c.campaign == campaign)
                    .group_by(target_failures.c.dialogue_id)
                )
            ).all()
        return {str(d): int(n) for d, n in rows}

    async def recent_target_failures(self, campaign: str, limit: int = 3) -> tuple[int, list[dict[str, Any]]]:
        """How often the target failed to answer in the campaign, and the latest failures (when, why)."""
        async with self._read() as conn:
            base = (
                select(target_failures.c.created_at, target_failures.c.reason)
                .join(dialogues, dialogues.c.id == target_failures.c.dialogue_id)
                .where(dialogues.c.campaign == campaign)
            )
            total = (await conn.execute(select(func.count()).select_from(base.subquery()))).scalar_one()
            rows = (await conn.execute(base.order_by(target_failures.c.created_at.desc()).limit(limit))).all()
        return int(total), [{"at": _aware(at), "reason": str(reason)} for at, reason in rows]

    async def renew_lease(self, task_id: str, participant_id: str, lease_s: float | None = None) -> None:
        """Extend the lease of a task the participant holds (a page heartbeat, a long dialogue)."""
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
                raise InputError(f"unknown task '{task_id}'")
            await self._own(conn, task_id, participant_id, TaskKind(kind))  # raises, naming why

    async def expire_leases(self, campaign: str | None = None) -> int:
        """Re-queue every claimed task whose lease has expired, as :meth:`release` would; returns
        how many. Safe to run from many workers at once (each re-queue is conditional)."""
        await self.init()
        async with self._read() as conn:  # an index range scan (status, lease): usually no row at all
            query = _EXPIRED.where(tasks.c.campaign == campaign) if campaign else _EXPIRED
            expired = (await conn.execute(query, {"now": self._now()})).all()
        count = 0
        for task_id, pid in expired:
            try:
                await self.release(task_id, pid)
                count += 1
            except InputError:
                continue  # someone else re-queued or submitted it meanwhile
        return count

    async def finish_dialogue(
        self,
        dialogue_id: str,
        participant_id: str,
        pre: PreAnnotation,
        *,
        refused: bool = False,
        target_failed: bool = False,
    ) -> list[str]:
        """Submit the dialogue with its pre-annotation and open two annotation tasks, unless the
        attacker refused (status ``refused``: a non-attack is not annotated as an attack) or the
        target never answered (``target_failed`` with no turns: status ``target_failed``; its
        failures are in :meth:`target_failure_counts`). On a group-targeting dialogue the two
        slots need in- or out-group annotators per the campaign's ``outgroup_annotator_share``
        (the requirement's ``annotator`` field), balanced within ±1 per target group."""
        settings = await self.campaign_settings(await self._dialogue_campaign(dialogue_id))
        async with self.engine.begin() as conn:
            d = (await conn.execute(select(dialogues).where(dialogues.c.id == dialogue_id))).mappings().first()
            if d is not None:
                await self._refuse_if_closed(conn, d["campaign"])
            if d is None or d["red_teamer_id"] != participant_id or d["status"] != "in_progress":
                raise InputError(f"dialogue '{dialogue_id}' is not an open dialogue of '{participant_id}'")
            n_turns = len((await conn.execute(select(turns.c.idx).where(turns.c.dialogue_id == dialogue_id))).all())
            if n_turns == 0 and not (refused or target_failed):
                raise InputError(f"dialogue '{dialogue_id}' has no turns")
            status = "refused" if refused else ("target_failed" if n_turns == 0 else "submitted")
            await conn.execute(
                update(dialogues)
                .where(dialogues.c.id == dialogue_id)
                .values(status=status, pre_annotation=pre.model_dump_json(), refused=refused)
            )
            await conn.execute(
                update(tasks).where(tasks.c.id == d["task_id"]).values(status="submitted", updated_at=self._now())
            )
            if status != "submitted":
                return []
            record = json.loads(
                (
                    await conn.execute(select(instructions.c.record).where(instructions.c.id == d["instruction_id"]))
                ).scalar_one()
            )
            group = {
                k.removeprefix("target_"): v
                for k, v in record.items()
                if k.startswith("target_") and k != "target_group"
            }
            requirement = annotation_requirement(self.policy.rule(record["rule"]), group or None)
            slots = [dict(requirement), dict(requirement)]
            if requirement.get("matching") == "demographic" and settings.outgroup_annotator_share > 0:
                out, total = await _annotator_split(conn, d["campaign"], requirement["group"])
                for slot in slots:
                    wanted_out = int(settings.outgroup_annotator_share * (total + 1) + 0.5)
                    slot["annotator"] = "out" if out < wanted_out else "in"
                    out += slot["annotator"] == "out"
                    total += 1
            ids = [uuid.uuid4().hex, uuid.uuid4().hex]
            now = self._now()
            for tid, slot in zip(ids, slots, strict=True):
                await conn.execute(
                    insert(tasks).values(
                        id=tid,
                        campaign=d["campaign"],
                        kind=TaskKind.ANNOTATE.value,
                        status="open",
                        dialogue_id=dialogue_id,
                        requirement=json.dumps(slot),
                        created_at=now,
                        updated_at=now,
                    )
                )
        return ids

    async def _dialogue_campaign(self, dialogue_id: str) -> str:
        async with self._read() as conn:
            row = (await conn.execute(select(dialogues.c.campaign).where(dialogues.c.id == dialogue_id))).first()
        if row is None:
            raise InputError(f"unknown dialogue '{dialogue_id}'")
        return str(row[0])

    # -- annotation and arbitration ------------------------------------------------------------
    async def submit_annotation(self, task_id: str, participant_id: str, rating: int, reasoning: str) -> str | None:
        """Store a rating. Returns the arbitration task id when this completes a pair that is
        two or more steps apart."""
        rating = _likert(rating)
        if not reasoning.strip():
            raise InputError("an annotation needs its reasoning")
        async with self.engine.begin() as conn:
            row = await self._own(conn, task_id, participant_id, TaskKind.ANNOTATE)
            await self._write_annotation(conn, row, participant_id, TaskKind.ANNOTATE, rating, reasoning)
            ratings = await _annotator_ratings(conn, row["dialogue_id"])
            if len(ratings) == 2 and arbitration_needed(*ratings):
                tid = uuid.uuid4().hex
                now = self._now()
                await conn.execute(
                    insert(tasks).values(
                        id=tid,
                        campaign=row["campaign"],
                        kind=TaskKind.ARBITRATE.value,
                        status="open",
                        dialogue_id=row["dialogue_id"],
                        requirement=_arbitration_requirement(row["requirement"]),
                        created_at=now,
                        updated_at=now,
                    )
                )
                return tid
        return None

    async def submit_arbitration(self, task_id: str, participant_id: str, rating: int, reasoning: str) -> None:
        rating = _likert(rating)
        if not reasoning.strip():
            raise InputError("an arbitration needs its reasoning")
        async with self.engine.begin() as conn:
            row = await self._own(conn, task_id, participant_id, TaskKind.ARBITRATE)
            ratings = await _annotator_ratings(conn, row["dialogue_id"])
            if len(ratings) != 2 or not arbitration_needed(*ratings):
                raise InputError(f"dialogue '{row['dialogue_id']}' has no diverging pair of annotations to arbitrate")
            await self._write_annotation(conn, row, participant_id, TaskKind.ARBITRATE, rating, reasoning)

    async def _write_annotation(
        self, conn: AsyncConnection, row: Any, participant_id: str, kind: TaskKind, rating: int, reasoning: str
    ) -> None:
        await conn.execute(
            insert(annotation_rows).values(
                dialogue_id=row["dialogue_id"],
                participant_id=participant_id,
                kind=kind.value,
                rating=rating,
                reasoning=reasoning,
                task_id=row["id"],
                created_at=self._now(),
            )
        )
        await conn.execute(
            update(tasks).where(tasks.c.id == row["id"]).values(status="submitted", updated_at=self._now())
        )

    async def reasonings(self, dialogue_id: str) -> list[tuple[int, str]]:
        """What an arbitrator sees besides the dialogue: both annotators' ratings and reasoning."""
        async with self._read() as conn:
            return await _reasonings(conn, dialogue_id)

    async def dialogue_turns(self, dialogue_id: str) -> list[Turn]:
        async with self._read() as conn:
            return await _turns(conn, dialogue_id)

    async def dialogue_view(
        self, dialogue_id: str, *, reasons: bool = False
    ) -> tuple[dict[str, Any], list[Turn], list[tuple[int, str]]]:
        """What an annotation or arbitration page shows, on one connection: the instruction
        record the dialogue came from, its turns, and (``reasons``, for arbitrators) both
        annotators' ratings and reasoning."""
        async with self._read() as conn:
            query = (
                select(instructions.c.record)
                .join(dialogues, dialogues.c.instruction_id == instructions.c.id)
                .where(dialogues.c.id == dialogue_id)
            )
            row = (await conn.execute(query)).first()
            if row is None:
                raise InputError(f"unknown dialogue '{dialogue_id}'")
            said = await _turns(conn, dialogue_id)
            why = await _reasonings(conn, dialogue_id) if reasons else []
        record: dict[str, Any] = json.loads(row[0])
        return record, said, why

    # -- web platform: what a participant's and a lead's pages need ----------------------------
    async def update_participant(self, person: Participant) -> None:
        """Replace a participant's questionnaire answers (demographics, expertise, roles).
        Raises :class:`InputError` for an unknown id."""
        await self.init()
        async with self.engine.begin() as conn:
            result = await conn.execute(
                update(participants)
                .where(participants.c.id == person.id)
                .values(body=person.model_dump_json(), simulated=person.simulated)
            )
        if result.rowcount != 1:
            raise InputError(f"unknown participant '{person.id}'")

    async def held_task(self, participant_id: str, kind: TaskKind) -> str | None:
        """The id of a task of ``kind`` this participant holds (the oldest), if any: one indexed read."""
        await self.init()
        async with self._read() as conn:
            row = (await conn.execute(_HELD_OF_KIND, {"pid": participant_id, "kind": kind.value})).first()
        return str(row[0]) if row else None

    async def claimed_tasks(self, participant_id: str) -> list[TaskRecord]:
        """The tasks this participant holds right now (status claimed), oldest first. Expired
        leases are re-queued first, so a task that is no longer theirs is not listed."""
        await self.init()
        await self.expire_leases()
        async with self._read() as conn:
            return [task_record(r) for r in (await conn.execute(_HOLDS, {"pid": participant_id})).mappings().all()]

    async def dialogue_of_task(self, task_id: str) -> str | None:
        """The dialogue a red-teaming task started, if any."""
        async with self._read() as conn:
            row = (await conn.execute(select(dialogues.c.id).where(dialogues.c.task_id == task_id))).first()
        return str(row[0]) if row else None

    async def release(self, task_id: str, participant_id: str, *, decline: bool = False) -> None:
        """Skip / opt out without penalty: give a claimed task back so someone else can take it.

        The participant's exposure row stays, so they are never offered that dialogue again. A
        red-teaming task whose dialogue has started keeps that dialogue (status ``abandoned``,
        turns kept, never annotated), is marked ``released``, and a fresh open task for the same
        instruction and requirement replaces it. ``decline`` (the participant skipped it, rather
        than a lease running out) also keeps a red-teaming instruction from being offered to them
        again. Raises :class:`InputError` unless the participant holds the task."""
        async with self.engine.begin() as conn:
            row = (await conn.execute(select(tasks).where(tasks.c.id == task_id))).mappings().first()
            if row is None or row["participant_id"] != participant_id or row["status"] != TaskStatus.CLAIMED.value:
                raise InputError(f"task '{task_id}' is not claimed by '{participant_id}'")
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
            if started is None:
                result = await conn.execute(
                    update(tasks)
                    .where(and_(tasks.c.id == task_id, tasks.c.status == TaskStatus.CLAIMED.value))
                    .values(
                        status=TaskStatus.OPEN.value,
                        participant_id=None,
                        relaxed=None,
                        updated_at=now,
                        lease_expires_at=None,
                    )
                )
                if result.rowcount != 1:
                    raise InputError(f"task '{task_id}' is not claimed by '{participant_id}'")
                return
            await conn.execute(update(dialogues).where(dialogues.c.id == started[0]).values(status="abandoned"))
            result = await conn.execute(
                update(tasks)
                .where(and_(tasks.c.id == task_id, tasks.c.status == TaskStatus.CLAIMED.value))
                .values(status=TaskStatus.RELEASED.value, updated_at=now)
            )
            if result.rowcount != 1:
                raise InputError(f"task '{task_id}' is not claimed by '{participant_id}'")
            await conn.execute(
                insert(tasks).values(
                    id=uuid.uuid4().hex,
                    campaign=row["campaign"],
                    kind=row["kind"],
                    status=TaskStatus.OPEN.value,
                    instruction_id=row["instruction_id"],
                    dialogue_id=None,
                    participant_id=None,
                    requirement=row["requirement"],
                    relaxed=None,
                    created_at=row["created_at"],
                    updated_at=now,
                )
            )

    async def task_counts(self, campaign: str) -> dict[str, dict[str, int]]:
        """Tasks per kind and status for a campaign: ``{kind: {status: n}}``."""
        await self.init()
        async with self.engine.connect() as conn:
            query = (
                select(tasks.c.kind, tasks.c.status, func.count())
                .where(tasks.c.campaign == campaign)
                .group_by(tasks.c.kind, tasks.c.status)
            )
            rows = (await conn.execute(query)).all()
        out: dict[str, dict[str, int]] = {k.value: {} for k in TaskKind}
        for kind, status, n in rows:
            out.setdefault(str(kind), {})[str(status)] = int(n)
        return out

    async def campaigns(self) -> list[str]:
        """Every campaign stored, by name."""
        await self.init()
        async with self.engine.connect() as conn:
            query = select(instructions.c.campaign).distinct().order_by(instructions.c.campaign)
            rows = (await conn.execute(query)).all()
        return [str(r[0]) for r in rows]

    async def dialogue_info(self, dialogue_id: str) -> dict[str, Any]:
        """A dialogue's row (campaign, instruction, red teamer, target, status, pre-annotation)."""
        async with self._read() as conn:
            row = (await conn.execute(select(dialogues).where(dialogues.c.id == dialogue_id))).mappings().first()
        if row is None:
            raise InputError(f"unknown dialogue '{dialogue_id}'")
        info = dict(row)
        info["pre_annotation"] = json.loads(row["pre_annotation"]) if row["pre_annotation"] else None
        return info

    # -- reporting -----------------------------------------------------------------------------
    async def plan_and_done(self, campaign: str) -> tuple[list[dict[str, Any]], list[str]]:
        """The campaign's instruction records, and the ids of instructions with a submitted dialogue."""
        await self.init()
        async with self.engine.connect() as conn:
            plan = (await conn.execute(select(instructions.c.record).where(instructions.c.campaign == campaign))).all()
            done = (
                await conn.execute(
                    select(dialogues.c.instruction_id).where(
                        and_(dialogues.c.campaign == campaign, dialogues.c.status == "submitted")
                    )
                )
            ).all()
        if not plan:
            raise InputError(f"no campaign '{campaign}' in this store")
        return [json.loads(r[0]) for r in plan], [str(r[0]) for r in done]

    async def shortfall(
        self, campaign: str | None = None, *, available: Collection[str] | None = None
    ) -> list[dict[str, Any]]:
        """Open tasks nobody can take, per (kind, requirement, reason): no registered participant
        is eligible; everyone eligible has already seen the dialogue (or skipped the red-teaming
        instruction); or a dialogue's open tasks need more different people than there are
        eligible ones who have not seen it (two annotators are two people). Expired leases are
        re-queued first, so a task stuck with a vanished holder shows up here too. ``available``
        restricts who counts to these participant ids (e.g. accounts that can still log in);
        simulated participants always count. Each entry: ``kind``, ``requirement``, ``reason``,
        ``open_tasks``, ``eligible_participants``."""
        await self.expire_leases(campaign)
        people = await self.list_participants()
        if available is not None:
            allowed = set(available)
            people = [p for p in people if p.simulated or p.id in allowed]
        async with self.engine.connect() as conn:
            query = select(
                tasks.c.kind, tasks.c.requirement, tasks.c.dialogue_id, tasks.c.instruction_id, tasks.c.campaign
            ).where(tasks.c.status == "open")
            if campaign:
                query = query.where(tasks.c.campaign == campaign)
            rows = (await conn.execute(query)).all()
            seen_rows = (await conn.execute(select(exposures.c.dialogue_id, exposures.c.participant_id))).all()
            declined_rows = (await conn.execute(select(declines.c.instruction_id, declines.c.participant_id))).all()
            quotas = {c: q for c, q in (await self.quotas({r.campaign for r in rows})).items() if q}
            load: Counter[tuple[str, str, str]] = Counter()  # (campaign, kind, participant) -> held or done
            if quotas:
                load_rows = (
                    await conn.execute(
                        select(tasks.c.campaign, tasks.c.kind, tasks.c.participant_id, func.count())
                        .where(and_(tasks.c.status.in_(("claimed", "submitted")), tasks.c.campaign.in_(list(quotas))))
                        .group_by(tasks.c.campaign, tasks.c.kind, tasks.c.participant_id)
                    )
                ).all()
                load.update({(str(c), str(k), str(p)): int(n) for c, k, p, n in load_rows})
        seen: set[tuple[str, str]] = {(d, p) for d, p in seen_rows}
        declined: set[tuple[str, str]] = {(i, p) for i, p in declined_rows}
        scope = await self._member_scope({r.campaign for r in rows})  # members-only campaigns: their members
        able: dict[tuple[str, str], list[str]] = {}
        need: Counter[tuple[str, str, str]] = Counter()
        per_dialogue: Counter[tuple[str, str, str]] = Counter()  # open tasks per (kind, requirement, dialogue)
        free: dict[tuple[str, str, str], list[str]] = {}  # eligible and under the campaign's quota
        for kind, req_json, dialogue_id, instruction_id, task_campaign in rows:
            key = (kind, req_json)
            if key not in able:
                requirement = json.loads(req_json)
                able[key] = [p.id for p in people if eligible(p, TaskKind(kind), requirement)[0]]
            cap = quotas.get(task_campaign, {}).get(kind)
            pool = able[key]
            member_ids = scope.get(task_campaign)
            if member_ids is not None:
                pool = [pid for pid in pool if pid in member_ids]
            members_able = bool(pool)
            if cap is not None:
                pool = [pid for pid in pool if load[(task_campaign, kind, pid)] < cap]
            if not able[key]:
                need[(kind, req_json, "no eligible participant")] += 1
            elif not members_able:
                need[(kind, req_json, "no eligible participant is a member of the campaign")] += 1
            elif not pool:
                need[(kind, req_json, "every eligible participant reached the campaign's per-person quota")] += 1
            elif dialogue_id is not None:
                per_dialogue[(kind, req_json, dialogue_id)] += 1
                free[(kind, req_json, dialogue_id)] = pool
            elif all((instruction_id, pid) in declined for pid in pool):
                need[(kind, req_json, "every eligible participant skipped this instruction")] += 1
        for (kind, req_json, dialogue_id), n_open in per_dialogue.items():
            fresh = sum(1 for pid in free[(kind, req_json, dialogue_id)] if (dialogue_id, pid) not in seen)
            if fresh == 0:
                need[(kind, req_json, "every eligible participant has already seen the dialogue")] += n_open
            elif fresh < n_open:  # each open task of a dialogue needs a different person
                reason = "too few eligible participants who have not seen the dialogue (each task needs another person)"
                need[(kind, req_json, reason)] += n_open - fresh
        return [
            {
                "kind": kind,
                "requirement": json.loads(req_json),
                "reason": reason,
                "open_tasks": n,
                "eligible_participants": len(able[(kind, req_json)]),
            }
            for (kind, req_json, reason), n in sorted(need.items())
        ]

    async def export_rows(self, campaign: str | None = None) -> list[dict[str, Any]]:
        """One row per dialogue: instruction parameters, matching, turns, pre-annotation,
        annotations and arbitration (docs/star.md, "Export schema")."""
        return [row async for row in self.iter_export_rows(campaign)]

    async def iter_export_rows(
        self, campaign: str | None = None, *, batch: int = EXPORT_BATCH
    ) -> AsyncIterator[dict[str, Any]]:
        """:meth:`export_rows` one row at a time, oldest dialogue first, reading ``batch``
        dialogues per handful of queries (not a few queries per dialogue). No connection is held
        while the caller consumes the rows: a slow download holds no database resource."""
        people = {p.id: p for p in await self.list_participants()}
        after: tuple[Any, Any] | None = None
        while True:
            async with self._read() as conn:
                query = select(dialogues)
                if campaign:
                    query = query.where(dialogues.c.campaign == campaign)
                if after is not None:
                    query = query.where(tuple_(dialogues.c.created_at, dialogues.c.id) > tuple_(*after))
                ds = (
                    (await conn.execute(query.order_by(dialogues.c.created_at, dialogues.c.id).limit(batch)))
                    .mappings()
                    .all()
                )
                if not ds:
                    return
                ids = [d["id"] for d in ds]
                records = {
                    i: json.loads(r)
                    for i, r in (
                        await conn.execute(
                            select(instructions.c.id, instructions.c.record).where(
                                instructions.c.id.in_({d["instruction_id"] for d in ds})
                            )
                        )
                    ).all()
                }
                red_tasks = {
                    r["id"]: r
                    for r in (
                        await conn.execute(
                            select(tasks.c.id, tasks.c.requirement, tasks.c.relaxed).where(
                                tasks.c.id.in_([d["task_id"] for d in ds])
                            )
                        )
                    ).mappings()
                }
                anns: dict[str, list[Any]] = {}
                for a in (
                    await conn.execute(
                        select(annotation_rows, tasks.c.requirement.label("slot"))
                        .select_from(annotation_rows.outerjoin(tasks, tasks.c.id == annotation_rows.c.task_id))
                        .where(annotation_rows.c.dialogue_id.in_(ids))
                        .order_by(annotation_rows.c.dialogue_id, annotation_rows.c.created_at)
                    )
                ).mappings():
                    anns.setdefault(a["dialogue_id"], []).append(a)
                said: dict[str, list[dict[str, Any]]] = {}
                for t in (
                    await conn.execute(
                        select(turns).where(turns.c.dialogue_id.in_(ids)).order_by(turns.c.dialogue_id, turns.c.idx)
                    )
                ).mappings():
                    said.setdefault(t["dialogue_id"], []).append(
                        {
                            "role": t["role"],
                            "text": t["text"],
                            "tension": t["tension"],
                            "state": t["state"],
                            "trace_id": t["trace_id"],
                            "refused": t["refused"],
                        }
                    )
                failures = {
                    str(d): int(n)
                    for d, n in (
                        await conn.execute(
                            select(target_failures.c.dialogue_id, func.count())
                            .where(target_failures.c.dialogue_id.in_(ids))
                            .group_by(target_failures.c.dialogue_id)
                        )
                    ).all()
                }
            for d in ds:
                yield _export_row(
                    d,
                    records[d["instruction_id"]],
                    red_tasks[d["task_id"]],
                    anns.get(d["id"], []),
                    said.get(d["id"], []),
                    failures.get(d["id"], 0),
                    people,
                )
            if len(ds) < batch:
                return
            after = (ds[-1]["created_at"], ds[-1]["id"])

    async def dialogue_task_ids(self, campaign: str) -> dict[str, str]:
        """dialogue id -> the red-teaming task it came from, for a campaign."""
        async with self._read() as conn:
            query = select(dialogues.c.id, dialogues.c.task_id).where(dialogues.c.campaign == campaign)
            return {str(d): str(t) for d, t in (await conn.execute(query)).all()}


def _export_row(
    d: Any,
    record: dict[str, Any],
    task: Any,
    ann: list[Any],
    said: list[dict[str, Any]],
    failures: int,
    people: dict[str, Participant],
) -> dict[str, Any]:
    """One export row (docs/star.md, "Export schema") from a dialogue and what belongs to it."""
    requirement = json.loads(task["requirement"])
    group = requirement.get("group")
    attacker = people.get(d["red_teamer_id"])
    row: dict[str, Any] = {
        "dialogue_id": d["id"],
        "campaign": d["campaign"],
        "status": d["status"],
        "refused": d["refused"],
        "instruction_id": d["instruction_id"],
        **{k: v for k, v in record.items() if k not in ("text", "id")},
        "red_teamer_id": d["red_teamer_id"],
        "red_teamer_simulated": attacker.simulated if attacker else None,
        "red_teamer_required": requirement.get("attacker"),
        "red_teamer_in_group": attacker.in_group(group) if attacker and group else None,
        "matching_relaxed": task["relaxed"],
        "target": d["target"],
        "turns": said,
        "pre_annotation": json.loads(d["pre_annotation"]) if d["pre_annotation"] else None,
    }
    anns = [a for a in ann if a["kind"] == TaskKind.ANNOTATE.value]
    arb = next((a for a in ann if a["kind"] == TaskKind.ARBITRATE.value), None)
    for i, a in enumerate(anns[:2], start=1):
        p = people.get(a["participant_id"])
        row[f"annotator{i}_id"] = a["participant_id"]
        row[f"annotator{i}_rating"] = a["rating"]
        row[f"annotator{i}_reasoning"] = a["reasoning"]
        row[f"annotator{i}_in_group"] = p.in_group(group) if p and group else None
        row[f"annotator{i}_simulated"] = p.simulated if p else None
        row[f"annotator{i}_required"] = json.loads(a["slot"]).get("annotator") if a["slot"] else None
        row[f"annotator{i}_expert"] = _is_expert(p)
        row[f"annotator{i}_matched_expertise"] = _expert_slot(a["slot"])
    row["arbitration_needed"] = len(anns) == 2 and arbitration_needed(anns[0]["rating"], anns[1]["rating"])
    row["arbitrator_id"] = arb["participant_id"] if arb else None
    row["arbitrator_rating"] = arb["rating"] if arb else None
    row["arbitrator_reasoning"] = arb["reasoning"] if arb else None
    arbitrator = people.get(arb["participant_id"]) if arb else None
    row["arbitrator_in_group"] = arbitrator.in_group(group) if arbitrator and group else None
    row["arbitrator_expert"] = _is_expert(arbitrator)
    row["arbitrator_matched_expertise"] = _expert_slot(arb["slot"]) if arb else None
    row["target_failures"] = failures
    return row


def _is_expert(person: Participant | None) -> bool | None:
    """The rater is an expert: they declared an expertise a policy rule can be matched on (medical,
    fact-checking, legal, financial). None for a rater the store does not know."""
    return bool(EXPERTISE & set(person.expertise)) if person is not None else None


def _expert_slot(slot: str | None) -> str | None:
    """The expertise this rating's task required (the rater was matched as an expert on it), or None."""
    requirement = json.loads(slot) if slot else {}
    return str(requirement["expertise"]) if requirement.get("matching") == "expertise" else None


async def _turns(conn: AsyncConnection, dialogue_id: str) -> list[Turn]:
    query = select(turns).where(turns.c.dialogue_id == dialogue_id).order_by(turns.c.idx)
    return [
        Turn(
            role=r["role"],
            text=r["text"],
            tension=r["tension"],
            state=r["state"],
            trace_id=r["trace_id"],
            refused=r["refused"],
        )
        for r in (await conn.execute(query)).mappings().all()
    ]


async def _reasonings(conn: AsyncConnection, dialogue_id: str) -> list[tuple[int, str]]:
    query = select(annotation_rows.c.rating, annotation_rows.c.reasoning).where(
        and_(annotation_rows.c.dialogue_id == dialogue_id, annotation_rows.c.kind == TaskKind.ANNOTATE.value)
    )
    return [(int(r[0]), str(r[1])) for r in (await conn.execute(query)).all()]


async def _annotator_ratings(conn: AsyncConnection, dialogue_id: str) -> list[int]:
    """The (up to two) annotators' ratings of a dialogue, arbitration excluded."""
    query = select(annotation_rows.c.rating).where(
        and_(annotation_rows.c.dialogue_id == dialogue_id, annotation_rows.c.kind == TaskKind.ANNOTATE.value)
    )
    return [int(r[0]) for r in (await conn.execute(query)).all()]


def _likert(rating: int) -> int:
    try:
        return int(Likert(int(rating)))
    except (ValueError, TypeError):
        raise InputError(
            f"rating {rating!r} is outside the 4-point scale (1 = definitely broken … 4 = definitely not)"
        ) from None


def _add_missing_columns(sync_conn: Any) -> None:
    """Stores created by an earlier version lack newer nullable columns: add them in place."""
    if not inspect(sync_conn).has_table("star_tasks"):
        return  # a fresh store: ensure_schema makes every column
    have = {c["name"] for c in inspect(sync_conn).get_columns("star_tasks")}
    if "lease_expires_at" not in have:
        sync_conn.exec_driver_sql("ALTER TABLE star_tasks ADD COLUMN lease_expires_at TIMESTAMP WITH TIME ZONE")
    if "refused" not in {c["name"] for c in inspect(sync_conn).get_columns("star_turns")}:
        sync_conn.exec_driver_sql("ALTER TABLE star_turns ADD COLUMN refused BOOLEAN")
    if inspect(sync_conn).has_table("star_campaigns") and "status" not in {
        c["name"] for c in inspect(sync_conn).get_columns("star_campaigns")
    }:  # every campaign stored so far is open; nothing else changes
        sync_conn.exec_driver_sql("ALTER TABLE star_campaigns ADD COLUMN status VARCHAR(16) DEFAULT 'open' NOT NULL")
    if inspect(sync_conn).has_table("star_campaigns") and "members_only" not in {
        c["name"] for c in inspect(sync_conn).get_columns("star_campaigns")
    }:  # every campaign stored so far stays open to every participant
        sync_conn.exec_driver_sql("ALTER TABLE star_campaigns ADD COLUMN members_only BOOLEAN DEFAULT FALSE NOT NULL")


def _arbitration_requirement(annotation_requirement_json: str) -> str:
    """Arbitrators follow the dialogue's matching; the in/out-group annotator split does not apply
    to them (Decision, docs/star.md: ties are broken by a matched, in-group arbitrator)."""
    requirement = json.loads(annotation_requirement_json)
    requirement.pop("annotator", None)
    return json.dumps(requirement)


async def _annotator_split(conn: AsyncConnection, campaign: str, group: dict[str, str]) -> tuple[int, int]:
    """(out-group slots, all slots) among the campaign's annotation tasks on ``group``."""
    query = select(tasks.c.requirement).where(
        and_(
            tasks.c.campaign == campaign,
            tasks.c.kind == TaskKind.ANNOTATE.value,
            tasks.c.requirement.like('%"annotator"%'),
        )
    )
    out = total = 0
    for (req_json,) in (await conn.execute(query)).all():
        req = json.loads(req_json)
        if req.get("group") == group:
            total += 1
            out += req.get("annotator") == "out"
    return out, total
