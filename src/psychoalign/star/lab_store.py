"""The lab's own state next to the STAR store: what a lead chose for each campaign, and the time
participants spend on tasks (with the topic a red teamer committed to).

The STAR store keeps the research data (plan, tasks, dialogues, annotations). :class:`LabStore`
keeps what only the lab platform needs: which policy, parameter space and target a campaign uses
(:class:`LabCampaignSettings`), when a participant started and paused each task (time spent, for
time-based compensation), and the topic a red teamer committed to before starting.
:class:`SQLLabStore` keeps it in the STAR store's database, :class:`InMemoryLabStore` beside an
in-memory STAR store.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import (
    Column,
    Float,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    and_,
    bindparam,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from ..errors import InputError
from ..storage import MigrateOnce, created_at_column, time_column
from ..textio import read_text
from ..yamlio import MAX_YAML_CHARS, load_yaml_model
from .campaign import CampaignConfig, TargetConfig
from .model import TaskRecord, TaskStatus
from .parameters import ParameterSpace, load_parameters
from .policy import Policy, PolicyError, load_policy
from .store import StarStore
from .store.rules import aware, task_record
from .store.schema import tasks

__all__ = [
    "LAB_EXPORT_COLUMNS",
    "MAX_DRAFT",
    "Draft",
    "LabCampaignSettings",
    "LabStore",
    "SQLLabStore",
    "TaskTime",
    "lab_export_rows",
]

#: The longest draft kept (characters): above any field's limit, so an over-long text is kept
#: while its author is told to shorten it, and below what would let a page fill the database.
MAX_DRAFT = 50_000

#: ``created_by`` of a campaign the lab did not create: ``psychoalign star campaign run`` recorded it.
FROM_CAMPAIGN_FILE = "psychoalign star campaign run"


class LabCampaignSettings(BaseModel):
    """What a lead chose when creating a campaign in the lab (the plan itself is in the STAR store,
    with the settings the store applies, :class:`~psychoalign.star.store.CampaignSettings`)."""

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
        if self.parameters_yaml is None:
            return load_parameters()
        return load_yaml_model(
            self.parameters_yaml, f"campaign {self.name} parameters", ParameterSpace, error=PolicyError
        )

    @classmethod
    def of_campaign_file(cls, config: CampaignConfig) -> LabCampaignSettings:
        """What the lab needs to open a campaign run from a file (``psychoalign star campaign
        run``): the text of its policy and parameter files (read now: the lab opens the campaign
        without them), its target, plan size, seed and rules."""

        def text(path: str | None, what: str) -> str | None:
            if path is None:
                return None
            return read_text(Path(path), what=what, error=PolicyError, max_bytes=MAX_YAML_CHARS)

        return cls(
            name=config.name,
            policy_yaml=text(config.policy, "policy file"),
            parameters_yaml=text(config.parameters, "parameter file"),
            target=config.target,
            instructions=config.instructions,
            seed=config.seed,
            rules=list(config.rules or []),
            created_by=FROM_CAMPAIGN_FILE,
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


class Draft(BaseModel):
    """What a participant typed on a task page and has not submitted yet (autosaved)."""

    model_config = ConfigDict(frozen=True)

    task_id: str
    participant_id: str
    rating: int | None = None
    text: str = ""
    updated_at: datetime


def _now() -> datetime:
    return datetime.now(UTC)


def _time(row: Mapping[Any, Any]) -> TaskTime:
    """A :class:`TaskTime` from a ``web_task_time`` row (``campaign`` only if the row has it)."""
    started = aware(row["started_at"])
    assert started is not None
    return TaskTime(
        task_id=row["task_id"],
        participant_id=row["participant_id"],
        started_at=started,
        active_since=aware(row["active_since"]),
        seconds=float(row["seconds"]),
        topic=row["topic"],
        campaign=str(row.get("campaign") or ""),
    )


def _started(task_id: str, participant_id: str, campaign: str, kind: str, now: datetime) -> dict[str, Any]:
    """A new ``web_task_time`` row: the task started ``now`` and running, no time spent, no topic yet."""
    return {
        "task_id": task_id,
        "participant_id": participant_id,
        "campaign": campaign,
        "kind": kind,
        "started_at": now,
        "active_since": now,
        "seconds": 0.0,
        "topic": None,
    }


def _time_entry(
    row: Mapping[Any, Any], status: str | None, holder: str | None, dialogue_id: str | None, now: datetime
) -> dict[str, Any]:
    """One line of :meth:`LabStore.times`: a time row with where its task stands for this person."""
    if holder != row["participant_id"]:
        state = "skipped"
    elif status == "submitted":
        state = "done"
    elif status == "claimed":
        state = "working" if row["active_since"] is not None else "paused"
    else:
        state = "skipped"
    return {
        "participant_id": row["participant_id"],
        "task_id": row["task_id"],
        "kind": row["kind"],
        "dialogue_id": dialogue_id,
        "topic": row["topic"],
        "seconds": round(_time(row).total(now), 1),
        "running": row["active_since"] is not None,
        "state": state,
        "started_at": aware(row["started_at"]),
    }


def _campaign_exists(name: str) -> InputError:
    return InputError(f"a campaign named '{name}' exists", hint="choose another name")


class LabStore(ABC):
    """Campaign settings and task time. Each operation is atomic; a participant's time on a task
    is one record, its clock running from :meth:`start` to :meth:`stop`."""

    async def init(self) -> None:  # noqa: B027 - nothing to prepare by default
        """Prepare the store (the SQL store creates its tables if missing). Idempotent."""

    @abstractmethod
    async def save_campaign(self, campaign: LabCampaignSettings) -> None:
        """Store a new campaign's settings; :class:`InputError` if the name is taken."""

    async def record_campaign(self, campaign: LabCampaignSettings) -> bool:
        """Store ``campaign``'s settings unless the lab knows a campaign of that name (made in the
        lab, or recorded by an earlier run of the same file); True if they were stored."""
        if await self.campaign(campaign.name) is not None:
            return False
        try:
            await self.save_campaign(campaign)
        except InputError:  # another run recorded it meanwhile
            return False
        return True

    @abstractmethod
    async def campaign(self, name: str) -> LabCampaignSettings | None:
        """A campaign's settings, or None."""

    @abstractmethod
    async def campaigns(self) -> list[LabCampaignSettings]:
        """Every campaign's settings, oldest first."""

    @abstractmethod
    async def held(self, task_id: str, participant_id: str) -> tuple[TaskRecord, TaskTime | None] | None:
        """The task if ``participant_id`` holds it (claimed), with their time on it (its
        ``campaign`` left empty): what every task page checks first. None otherwise."""

    @abstractmethod
    async def time(self, task_id: str, participant_id: str) -> TaskTime | None:
        """The participant's time on the task, if they started it."""

    @abstractmethod
    async def start(
        self, task_id: str, participant_id: str, campaign: str, kind: str, current: TaskTime | None = None
    ) -> None:
        """The participant read the content warning and starts the task, or resumes it
        (``current`` is the time the caller read; a running clock is left as it is)."""

    @abstractmethod
    async def stop(self, task_id: str, participant_id: str, current: TaskTime | None = None) -> None:
        """Pause, skip or submit: add the running stretch to the time spent. ``current`` is the
        time the caller already read; the change applies only if it is still the stored one, so a
        stale one is a no-op."""

    @abstractmethod
    async def set_topic(self, task_id: str, participant_id: str, topic: str) -> None:
        """Record the topic a red teamer committed to (no-op before :meth:`start`)."""

    @abstractmethod
    async def times(self, campaign: str) -> list[dict[str, Any]]:
        """Time spent per (participant, task) in a campaign, for the lead, oldest start first:
        with the task's kind, its dialogue (annotation and arbitration) and where it stands for
        this person: ``working`` (the clock runs), ``paused``, ``done`` or ``skipped`` (given back)."""

    @abstractmethod
    async def topics(self, campaign: str) -> dict[str, str]:
        """task id -> topic the red teamer committed to."""

    @abstractmethod
    async def save_draft(self, task_id: str, participant_id: str, rating: int | None, text: str) -> Draft:
        """Keep (replace) the participant's unsent work on a task: the rating chosen and the text
        typed (cut to :data:`MAX_DRAFT` characters)."""

    @abstractmethod
    async def draft(self, task_id: str, participant_id: str) -> Draft | None:
        """The participant's saved draft of the task, if any."""

    @abstractmethod
    async def delete_draft(self, task_id: str, participant_id: str) -> None:
        """Forget the draft (the work was submitted, or the task given back)."""

    @abstractmethod
    async def done_since(self, participant_id: str, since: datetime) -> dict[str, int]:
        """Tasks the participant submitted since ``since``, per kind (kinds with none absent)."""


# -- SQL -------------------------------------------------------------------------------------------
metadata = MetaData()
campaigns_table = Table(
    "web_campaigns",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("body", Text, nullable=False),
    created_at_column(),
)
task_time_table = Table(
    "web_task_time",
    metadata,
    Column("task_id", String(32), nullable=False),
    Column("participant_id", String(64), nullable=False),
    Column("campaign", String(64), nullable=False, index=True),
    Column("kind", String(16), nullable=False),
    time_column("started_at", nullable=False),
    time_column("active_since"),
    Column("seconds", Float, nullable=False),
    Column("topic", Text),
    PrimaryKeyConstraint("task_id", "participant_id"),
)
drafts_table = Table(
    "web_drafts",
    metadata,
    Column("task_id", String(32), nullable=False),
    Column("participant_id", String(64), nullable=False),
    Column("rating", Integer),
    Column("text", Text, nullable=False),
    time_column("updated_at", nullable=False),
    PrimaryKeyConstraint("task_id", "participant_id"),
)

_t = task_time_table.c
_d = drafts_table.c
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


def _mine(task_id: str, participant_id: str) -> Any:
    return and_(_t.task_id == task_id, _t.participant_id == participant_id)


class SQLLabStore(LabStore):
    """The lab's state in the STAR store's database (``engine``: that store's; it joins the
    store's tasks to answer :meth:`held` and :meth:`times` in one query)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._reader = engine.execution_options(isolation_level="AUTOCOMMIT")  # reads: no BEGIN / ROLLBACK
        self._migrate = MigrateOnce(engine, "lab")

    async def init(self) -> None:
        await self._migrate()  # DDL only for what is missing

    async def save_campaign(self, campaign: LabCampaignSettings) -> None:
        await self.init()
        try:
            async with self.engine.begin() as conn:
                await conn.execute(
                    insert(campaigns_table).values(
                        name=campaign.name, body=campaign.model_dump_json(), created_at=campaign.created_at
                    )
                )
        except IntegrityError:
            raise _campaign_exists(campaign.name) from None

    async def campaign(self, name: str) -> LabCampaignSettings | None:
        await self.init()
        async with self._reader.connect() as conn:
            row = (await conn.execute(select(campaigns_table.c.body).where(campaigns_table.c.name == name))).first()
        return LabCampaignSettings.model_validate_json(row[0]) if row else None

    async def campaigns(self) -> list[LabCampaignSettings]:
        await self.init()
        async with self._reader.connect() as conn:
            rows = (await conn.execute(select(campaigns_table.c.body).order_by(campaigns_table.c.created_at))).all()
        return [LabCampaignSettings.model_validate_json(r[0]) for r in rows]

    async def held(self, task_id: str, participant_id: str) -> tuple[TaskRecord, TaskTime | None] | None:
        await self.init()
        async with self._reader.connect() as conn:
            row = (await conn.execute(_HELD, {"task_id": task_id, "pid": participant_id})).mappings().first()
        if row is None:
            return None
        time = None
        if row["time_started_at"] is not None:
            time = _time(
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
            query = select(task_time_table).where(_mine(task_id, participant_id))
            row = (await conn.execute(query)).mappings().first()
        return _time(row) if row else None

    async def start(
        self, task_id: str, participant_id: str, campaign: str, kind: str, current: TaskTime | None = None
    ) -> None:
        await self.init()
        now = _now()
        if current is not None:
            await self._resume(task_id, participant_id, now)
            return
        try:
            async with self.engine.begin() as conn:
                await conn.execute(
                    insert(task_time_table).values(_started(task_id, participant_id, campaign, kind, now))
                )
        except IntegrityError:
            await self._resume(task_id, participant_id, now)

    async def _resume(self, task_id: str, participant_id: str, now: datetime) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                update(task_time_table)
                .where(and_(_mine(task_id, participant_id), _t.active_since.is_(None)))
                .values(active_since=now)
            )

    async def stop(self, task_id: str, participant_id: str, current: TaskTime | None = None) -> None:
        if current is None:
            current = await self.time(task_id, participant_id)
        if current is None or current.active_since is None:
            return
        now = _now()
        async with self.engine.begin() as conn:
            await conn.execute(
                update(task_time_table)
                .where(and_(_mine(task_id, participant_id), _t.active_since == current.active_since))
                .values(active_since=None, seconds=current.total(now))
            )

    async def set_topic(self, task_id: str, participant_id: str, topic: str) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(update(task_time_table).where(_mine(task_id, participant_id)).values(topic=topic))

    async def times(self, campaign: str) -> list[dict[str, Any]]:
        await self.init()
        query = (
            select(
                task_time_table,
                tasks.c.status.label("task_status"),
                tasks.c.participant_id.label("holder"),
                tasks.c.dialogue_id,
            )
            .select_from(task_time_table.outerjoin(tasks, tasks.c.id == _t.task_id))
            .where(_t.campaign == campaign)
            .order_by(_t.started_at)
        )
        now = _now()
        async with self._reader.connect() as conn:
            rows = (await conn.execute(query)).mappings().all()
        return [_time_entry(r, r["task_status"], r["holder"], r["dialogue_id"], now) for r in rows]

    async def topics(self, campaign: str) -> dict[str, str]:
        await self.init()
        async with self._reader.connect() as conn:
            query = select(_t.task_id, _t.topic).where(and_(_t.campaign == campaign, _t.topic.is_not(None)))
            return {str(t): str(p) for t, p in (await conn.execute(query)).all()}

    async def save_draft(self, task_id: str, participant_id: str, rating: int | None, text: str) -> Draft:
        await self.init()
        draft = Draft(
            task_id=task_id, participant_id=participant_id, rating=rating, text=text[:MAX_DRAFT], updated_at=_now()
        )
        values = {"rating": draft.rating, "text": draft.text, "updated_at": draft.updated_at}
        mine = and_(_d.task_id == task_id, _d.participant_id == participant_id)
        try:  # update, else insert: portable (no dialect upsert)
            async with self.engine.begin() as conn:
                if not (await conn.execute(update(drafts_table).where(mine).values(**values))).rowcount:
                    row = {"task_id": task_id, "participant_id": participant_id, **values}
                    await conn.execute(insert(drafts_table).values(**row))
        except IntegrityError:  # another tab inserted it meanwhile: this, the newer text, wins
            async with self.engine.begin() as conn:
                await conn.execute(update(drafts_table).where(mine).values(**values))
        return draft

    async def draft(self, task_id: str, participant_id: str) -> Draft | None:
        await self.init()
        async with self._reader.connect() as conn:
            query = select(drafts_table).where(and_(_d.task_id == task_id, _d.participant_id == participant_id))
            row = (await conn.execute(query)).mappings().first()
        if row is None:
            return None
        return Draft.model_validate({**row, "updated_at": aware(row["updated_at"])})

    async def delete_draft(self, task_id: str, participant_id: str) -> None:
        await self.init()
        async with self.engine.begin() as conn:
            await conn.execute(
                delete(drafts_table).where(and_(_d.task_id == task_id, _d.participant_id == participant_id))
            )

    async def done_since(self, participant_id: str, since: datetime) -> dict[str, int]:
        await self.init()
        query = (
            select(tasks.c.kind, func.count())
            .where(
                and_(
                    tasks.c.participant_id == participant_id,
                    tasks.c.status == TaskStatus.SUBMITTED.value,
                    tasks.c.updated_at >= since,
                )
            )
            .group_by(tasks.c.kind)
        )
        async with self._reader.connect() as conn:
            return {str(kind): int(n) for kind, n in (await conn.execute(query)).all()}


# -- in memory -------------------------------------------------------------------------------------
class InMemoryLabStore(LabStore):
    """The lab's state in memory, beside the STAR store ``star`` whose tasks it reads."""

    def __init__(self, star: StarStore) -> None:
        self.star = star
        self._campaigns: dict[str, str] = {}  # name -> settings as JSON, in creation order
        self._times: dict[tuple[str, str], dict[str, Any]] = {}  # (task, participant) -> web_task_time row
        self._drafts: dict[tuple[str, str], Draft] = {}

    async def save_campaign(self, campaign: LabCampaignSettings) -> None:
        if campaign.name in self._campaigns:
            raise _campaign_exists(campaign.name)
        self._campaigns[campaign.name] = campaign.model_dump_json()

    async def campaign(self, name: str) -> LabCampaignSettings | None:
        body = self._campaigns.get(name)
        return LabCampaignSettings.model_validate_json(body) if body else None

    async def campaigns(self) -> list[LabCampaignSettings]:
        found = [LabCampaignSettings.model_validate_json(body) for body in self._campaigns.values()]
        return sorted(found, key=lambda c: c.created_at)

    async def _task(self, task_id: str) -> TaskRecord | None:
        try:
            return await self.star.task(task_id)
        except InputError:
            return None

    async def held(self, task_id: str, participant_id: str) -> tuple[TaskRecord, TaskTime | None] | None:
        task = await self._task(task_id)
        if task is None or task.participant_id != participant_id or task.status is not TaskStatus.CLAIMED:
            return None
        row = self._times.get((task_id, participant_id))
        return task, (_time({k: v for k, v in row.items() if k != "campaign"}) if row else None)

    async def time(self, task_id: str, participant_id: str) -> TaskTime | None:
        row = self._times.get((task_id, participant_id))
        return _time(row) if row else None

    async def start(
        self, task_id: str, participant_id: str, campaign: str, kind: str, current: TaskTime | None = None
    ) -> None:
        now = _now()
        row = self._times.get((task_id, participant_id))
        if row is None:
            self._times[(task_id, participant_id)] = _started(task_id, participant_id, campaign, kind, now)
        elif row["active_since"] is None:
            row["active_since"] = now

    async def stop(self, task_id: str, participant_id: str, current: TaskTime | None = None) -> None:
        if current is None:
            current = await self.time(task_id, participant_id)
        if current is None or current.active_since is None:
            return
        row = self._times.get((task_id, participant_id))
        if row is not None and row["active_since"] == current.active_since:
            row.update(active_since=None, seconds=current.total(_now()))

    async def set_topic(self, task_id: str, participant_id: str, topic: str) -> None:
        row = self._times.get((task_id, participant_id))
        if row is not None:
            row["topic"] = topic

    async def times(self, campaign: str) -> list[dict[str, Any]]:
        now = _now()
        out = []
        for row in sorted(self._times.values(), key=lambda r: r["started_at"]):
            if row["campaign"] == campaign:
                task = await self._task(row["task_id"])
                status, holder, dialogue = (
                    (task.status.value, task.participant_id, task.dialogue_id) if task else (None, None, None)
                )
                out.append(_time_entry(row, status, holder, dialogue, now))
        return out

    async def topics(self, campaign: str) -> dict[str, str]:
        return {
            r["task_id"]: r["topic"]
            for r in self._times.values()
            if r["campaign"] == campaign and r["topic"] is not None
        }

    async def save_draft(self, task_id: str, participant_id: str, rating: int | None, text: str) -> Draft:
        draft = Draft(
            task_id=task_id, participant_id=participant_id, rating=rating, text=text[:MAX_DRAFT], updated_at=_now()
        )
        self._drafts[(task_id, participant_id)] = draft
        return draft

    async def draft(self, task_id: str, participant_id: str) -> Draft | None:
        return self._drafts.get((task_id, participant_id))

    async def delete_draft(self, task_id: str, participant_id: str) -> None:
        self._drafts.pop((task_id, participant_id), None)

    async def done_since(self, participant_id: str, since: datetime) -> dict[str, int]:
        """In memory, submission times are not kept: every task the participant submitted counts."""
        out: dict[str, int] = {}
        for task in await self.star.list_tasks():
            if task.participant_id == participant_id and task.status is TaskStatus.SUBMITTED:
                out[task.kind.value] = out.get(task.kind.value, 0) + 1
        return out


#: The columns the lab adds to the store's export rows (docs/star.md, "Export schema").
LAB_EXPORT_COLUMNS = (
    "committed_topic",
    "red_team_seconds",
    "annotator1_seconds",
    "annotator2_seconds",
    "arbitrator_seconds",
)


async def lab_export_rows(
    store: StarStore, lab: LabStore, campaign: str | None = None
) -> AsyncIterator[dict[str, Any]]:
    """The store's export rows plus what the lab knows: the topic the red teamer committed to and
    the seconds each person spent on the dialogue (red teaming, each annotation, the arbitration).
    Every row carries :data:`LAB_EXPORT_COLUMNS` (null where nothing was recorded), so the lab's
    export and ``psychoalign star export`` have one schema; three queries per campaign for the
    lab's part, whatever its size (``campaign`` None: every campaign, each read when first met)."""
    known: dict[str, tuple[dict[str, str], dict[Any, float], dict[Any, float], dict[str, str]]] = {}
    async for row in store.iter_export_rows(campaign):
        name = str(row["campaign"])
        if name not in known:
            times = await lab.times(name)
            known[name] = (
                await lab.topics(name),
                {(t["participant_id"], t["task_id"]): t["seconds"] for t in times},
                {(t["participant_id"], t["dialogue_id"], t["kind"]): t["seconds"] for t in times if t["dialogue_id"]},
                await store.dialogue_task_ids(name),
            )
        topics, red_team, rating, task_of = known[name]
        task_id = task_of.get(row["dialogue_id"], "")
        row["committed_topic"] = topics.get(task_id)
        row["red_team_seconds"] = red_team.get((row["red_teamer_id"], task_id))
        for who, kind in (("annotator1", "annotate"), ("annotator2", "annotate"), ("arbitrator", "arbitrate")):
            row[f"{who}_seconds"] = rating.get((row.get(f"{who}_id"), row["dialogue_id"], kind))
        yield row
