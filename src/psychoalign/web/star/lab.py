"""The lab's own state next to the STAR store: campaign settings, task time and committed topics;
and :class:`StarLab`, the services the pages share (stores, targets).

The STAR store keeps the research data (plan, tasks, dialogues, annotations). This module keeps
what only the platform needs: which policy, parameter space and target a campaign uses, when a
participant started and paused each task (time spent, for time-based compensation), and the
topic a red teamer committed to before starting.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import (
    Column,
    DateTime,
    Float,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    and_,
    bindparam,
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from ...config import Settings
from ...errors import InputError
from ...models import build_model
from ...negotiation.engine import Negotiator
from ...star.campaign import TargetConfig
from ...star.model import TaskRecord, Turn
from ...star.parameters import ParameterSpace
from ...star.personas import ModelTarget, PsychoAlignTarget, Target
from ...star.policy import Policy, PolicyError, load_policy
from ...star.store import SQLStarStore, StarStore
from ...star.store.rules import task_record
from ...star.store.schema import tasks
from ...storage import ensure_schema
from ...yamlio import load_yaml_model
from ..accounts import AccountStore, SQLAccountStore

__all__ = ["CampaignSettings", "LabStore", "StarLab", "TaskTime"]


class CampaignSettings(BaseModel):
    """What a lead chose when creating a campaign (the plan itself is in the STAR store)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    policy_yaml: str | None = Field(None, description="Uploaded policy (None: built-in).")
    parameters_yaml: str | None = Field(None, description="Uploaded parameter space (None: built-in).")
    target: TargetConfig = TargetConfig(kind="model")
    instructions: int = 0
    seed: int = 0
    rules: list[str] = Field(default_factory=list)
    created_by: str = ""
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))

    def policy(self) -> Policy:
        if self.policy_yaml is None:
            return load_policy()
        return load_yaml_model(self.policy_yaml, f"campaign {self.name} policy", Policy, error=PolicyError)

    def parameters(self) -> ParameterSpace:
        from ...star.parameters import load_parameters

        if self.parameters_yaml is None:
            return load_parameters()
        return load_yaml_model(
            self.parameters_yaml, f"campaign {self.name} parameters", ParameterSpace, error=PolicyError
        )


class TaskTime(BaseModel):
    model_config = ConfigDict(frozen=True)

    task_id: str
    participant_id: str
    started_at: datetime
    active_since: datetime | None
    seconds: float
    topic: str | None = None
    campaign: str = ""

    def total(self, now: datetime) -> float:
        """Seconds spent, counting the running stretch."""
        return self.seconds + ((now - self.active_since).total_seconds() if self.active_since else 0.0)


metadata = MetaData()
campaigns_table = Table(
    "web_campaigns",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("body", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)
task_time_table = Table(
    "web_task_time",
    metadata,
    Column("task_id", String(32), nullable=False),
    Column("participant_id", String(64), nullable=False),
    Column("campaign", String(64), nullable=False, index=True),
    Column("kind", String(16), nullable=False),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("active_since", DateTime(timezone=True)),
    Column("seconds", Float, nullable=False),
    Column("topic", Text),
    PrimaryKeyConstraint("task_id", "participant_id"),
)


_t = task_time_table.c
#: What every task page checks first, built once: the task if this person holds it, with their time on it.
_HELD = (
    select(
        tasks,
        _t.started_at.label("time_started_at"),
        _t.active_since.label("time_active_since"),
        _t.seconds.label("time_seconds"),
        _t.topic.label("time_topic"),
    )
    .select_from(
        tasks.outerjoin(task_time_table, and_(_t.task_id == tasks.c.id, _t.participant_id == bindparam("pid")))
    )
    .where(
        and_(
            tasks.c.id == bindparam("task_id"), tasks.c.participant_id == bindparam("pid"), tasks.c.status == "claimed"
        )
    )
)


def _aware(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _now() -> datetime:
    return datetime.now(UTC)


class LabStore:
    """Campaign settings and task time (SQL, same database as the STAR store)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._reader = engine.execution_options(isolation_level="AUTOCOMMIT")  # reads: no BEGIN / ROLLBACK
        self._ready = False
        self._init_lock = asyncio.Lock()

    async def init(self) -> None:
        if not self._ready:
            async with self._init_lock:
                if not self._ready:
                    await ensure_schema(self.engine, metadata)  # DDL only for what is missing
                    self._ready = True

    async def save_campaign(self, campaign: CampaignSettings) -> None:
        await self.init()
        try:
            async with self.engine.begin() as conn:
                await conn.execute(
                    insert(campaigns_table).values(
                        name=campaign.name, body=campaign.model_dump_json(), created_at=campaign.created_at
                    )
                )
        except IntegrityError:
            raise InputError(f"a campaign named '{campaign.name}' exists", hint="choose another name") from None

    async def campaign(self, name: str) -> CampaignSettings | None:
        await self.init()
        async with self._reader.connect() as conn:
            row = (await conn.execute(select(campaigns_table.c.body).where(campaigns_table.c.name == name))).first()
        return CampaignSettings.model_validate_json(row[0]) if row else None

    async def campaigns(self) -> list[CampaignSettings]:
        await self.init()
        async with self._reader.connect() as conn:
            rows = (await conn.execute(select(campaigns_table.c.body).order_by(campaigns_table.c.created_at))).all()
        return [CampaignSettings.model_validate_json(r[0]) for r in rows]

    async def held(self, task_id: str, participant_id: str) -> tuple[TaskRecord, TaskTime | None] | None:
        """The task if ``participant_id`` holds it (claimed), with their time on it: one query
        for what every task page checks first."""
        await self.init()
        async with self._reader.connect() as conn:
            row = (await conn.execute(_HELD, {"task_id": task_id, "pid": participant_id})).mappings().first()
        if row is None:
            return None
        time = None
        if row["time_started_at"] is not None:
            time = self._time(
                {
                    "task_id": task_id,
                    "participant_id": participant_id,
                    "started_at": row["time_started_at"],
                    "active_since": row["time_active_since"],
                    "seconds": row["time_seconds"],
                    "topic": row["time_topic"],
                }
            )
        return task_record(row), time

    async def time(self, task_id: str, participant_id: str) -> TaskTime | None:
        await self.init()
        async with self._reader.connect() as conn:
            row = (
                (
                    await conn.execute(
                        select(task_time_table).where(
                            and_(
                                task_time_table.c.task_id == task_id,
                                task_time_table.c.participant_id == participant_id,
                            )
                        )
                    )
                )
                .mappings()
                .first()
            )
        return self._time(row) if row else None

    @staticmethod
    def _time(row: Any) -> TaskTime:
        started = _aware(row["started_at"])
        assert started is not None
        return TaskTime(
            task_id=row["task_id"],
            participant_id=row["participant_id"],
            started_at=started,
            active_since=_aware(row["active_since"]),
            seconds=float(row["seconds"]),
            topic=row["topic"],
            campaign=str(row.get("campaign") or ""),
        )

    async def start(
        self, task_id: str, participant_id: str, campaign: str, kind: str, current: TaskTime | None = None
    ) -> None:
        """The participant read the content warning and starts (or resumes: ``current`` is the
        time row the caller read) the task."""
        await self.init()
        now = _now()
        if current is not None:
            await self._resume(task_id, participant_id, now)
            return
        try:
            async with self.engine.begin() as conn:
                await conn.execute(
                    insert(task_time_table).values(
                        task_id=task_id,
                        participant_id=participant_id,
                        campaign=campaign,
                        kind=kind,
                        started_at=now,
                        active_since=now,
                        seconds=0.0,
                    )
                )
        except IntegrityError:
            await self._resume(task_id, participant_id, now)

    async def _resume(self, task_id: str, participant_id: str, now: datetime) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                update(task_time_table)
                .where(
                    and_(
                        task_time_table.c.task_id == task_id,
                        task_time_table.c.participant_id == participant_id,
                        task_time_table.c.active_since.is_(None),
                    )
                )
                .values(active_since=now)
            )

    async def stop(self, task_id: str, participant_id: str, current: TaskTime | None = None) -> None:
        """Pause, skip or submit: add the running stretch to the time spent. ``current`` is the
        time row the caller already read (the update is conditional on it, so a stale one is a no-op)."""
        if current is None:
            current = await self.time(task_id, participant_id)
        if current is None or current.active_since is None:
            return
        now = _now()
        async with self.engine.begin() as conn:
            await conn.execute(
                update(task_time_table)
                .where(
                    and_(
                        task_time_table.c.task_id == task_id,
                        task_time_table.c.participant_id == participant_id,
                        task_time_table.c.active_since == current.active_since,
                    )
                )
                .values(active_since=None, seconds=current.total(now))
            )

    async def set_topic(self, task_id: str, participant_id: str, topic: str) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                update(task_time_table)
                .where(and_(task_time_table.c.task_id == task_id, task_time_table.c.participant_id == participant_id))
                .values(topic=topic)
            )

    async def times(self, campaign: str) -> list[dict[str, Any]]:
        """Time spent per (participant, task) in a campaign, for the lead: with the task's kind,
        its dialogue (annotation and arbitration) and where it stands for this person: ``working``
        (the clock runs), ``paused``, ``done`` or ``skipped`` (given back)."""
        await self.init()
        now = _now()
        query = (
            select(
                task_time_table,
                tasks.c.status.label("task_status"),
                tasks.c.participant_id.label("holder"),
                tasks.c.dialogue_id,
            )
            .select_from(task_time_table.outerjoin(tasks, tasks.c.id == task_time_table.c.task_id))
            .where(task_time_table.c.campaign == campaign)
            .order_by(task_time_table.c.started_at)
        )
        async with self._reader.connect() as conn:
            rows = (await conn.execute(query)).mappings().all()
        out = []
        for r in rows:
            if r["holder"] != r["participant_id"]:
                state = "skipped"
            elif r["task_status"] == "submitted":
                state = "done"
            elif r["task_status"] == "claimed":
                state = "working" if r["active_since"] is not None else "paused"
            else:
                state = "skipped"
            out.append(
                {
                    "participant_id": r["participant_id"],
                    "task_id": r["task_id"],
                    "kind": r["kind"],
                    "dialogue_id": r["dialogue_id"],
                    "topic": r["topic"],
                    "seconds": round(self._time(r).total(now), 1),
                    "running": r["active_since"] is not None,
                    "state": state,
                    "started_at": _aware(r["started_at"]),
                }
            )
        return out

    async def topics(self, campaign: str) -> dict[str, str]:
        """task id -> topic the red teamer committed to."""
        await self.init()
        async with self._reader.connect() as conn:
            query = select(task_time_table.c.task_id, task_time_table.c.topic).where(
                and_(task_time_table.c.campaign == campaign, task_time_table.c.topic.is_not(None))
            )
            return {str(t): str(p) for t, p in (await conn.execute(query)).all()}


class StarLab:
    """The services the lab pages share: one STAR store per policy (a campaign may upload its
    own policy), the lab store, and the red-teaming targets (built once per campaign)."""

    def __init__(
        self, settings: Settings, url: str, *, negotiator: Negotiator | None = None, **engine_kwargs: Any
    ) -> None:
        self.settings = settings
        self.negotiator = negotiator
        self._own_negotiator: Negotiator | None = None
        self.url = url
        self.engine_kwargs = engine_kwargs
        self.store = SQLStarStore(url, load_policy(), **engine_kwargs)
        self.lab = LabStore(self.store.engine)
        self.accounts: AccountStore = SQLAccountStore(engine=self.store.engine)
        self._stores: dict[str, StarStore] = {self.store.policy.sha256: self.store}
        self._targets: dict[str, Target] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._campaigns: dict[str, CampaignSettings] = {}
        self.jobs: dict[str, asyncio.Task[dict[str, int]]] = {}  # campaign -> persona run
        self._policies: dict[str, Policy] = {}

    async def init(self) -> None:
        await self.store.init()
        await self.lab.init()

    def job_status(self, campaign: str) -> str | None:
        """The last persona run of a campaign, for the lead: running, its counts, or its error."""
        job = self.jobs.get(campaign)
        if job is None:
            return None
        if not job.done():
            return "LLM personas are working on the shortfall…"
        if job.cancelled():
            return "the persona run was cancelled"
        error = job.exception()
        if error is not None:
            return f"the persona run stopped: {getattr(error, 'message', None) or type(error).__name__}"
        counts = job.result()
        annotations, arbitrations = counts.get("annotate", 0), counts.get("arbitrate", 0)
        return f"LLM personas completed {annotations} annotations and {arbitrations} arbitrations"

    async def close(self) -> None:
        for job in self.jobs.values():
            job.cancel()
        if self._own_negotiator is not None:
            await self._own_negotiator.aclose()
        for target in self._targets.values():
            model = getattr(target, "model", None)
            if model is not None:
                await model.aclose()
        await self.accounts.close()
        for store in self._stores.values():
            await store.close()

    async def campaign(self, name: str) -> CampaignSettings:
        """A campaign's settings (immutable once created, so cached)."""
        if name not in self._campaigns:
            found = await self.lab.campaign(name)
            if found is None:
                raise InputError(f"unknown campaign '{name}'")
            self._campaigns[name] = found
        return self._campaigns[name]

    async def policy(self, name: str) -> Policy:
        """A campaign's parsed policy (parsed once: YAML parsing costs more than a page)."""
        if name not in self._policies:
            self._policies[name] = (await self.campaign(name)).policy()
        return self._policies[name]

    async def store_for(self, campaign: str) -> StarStore:
        """The STAR store that applies ``campaign``'s policy (matching on its rules)."""
        try:
            policy = await self.policy(campaign)
        except InputError:
            policy = self.store.policy
        if policy.sha256 not in self._stores:
            self._stores[policy.sha256] = SQLStarStore(self.url, policy, **self.engine_kwargs)
        return self._stores[policy.sha256]

    def target(self, campaign: CampaignSettings) -> Target:
        """The model red teamers talk to: a configured model role, or PsychoAlign itself."""
        if campaign.name not in self._targets:
            config = campaign.target
            if config.kind == "psychoalign":
                if self.negotiator is None:
                    self.negotiator = self._own_negotiator = Negotiator(self.settings)
                self._targets[campaign.name] = PsychoAlignTarget(self.negotiator, config.framework)
            else:
                model = build_model(self.settings.model_spec(config.role), cache_dir=self.settings.cache_dir())
                self._targets[campaign.name] = ModelTarget(model)
        return self._targets[campaign.name]

    def lock(self, key: str) -> asyncio.Lock:
        """One turn at a time per dialogue (a double click must not interleave turns)."""
        return self._locks.setdefault(key, asyncio.Lock())

    async def reply(self, campaign: CampaignSettings, turns: Sequence[Turn]) -> Turn:
        return await self.target(campaign).reply(list(turns))


def rows_json(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in rows)
