"""Experiment results behind one interface: in-memory, and SQL (SQLite by default, PostgreSQL).

Follows :mod:`psychoalign.traces.store`: an ABC whose docstrings are the contract, an in-memory
version, and a SQLAlchemy (async) version in the same database as the traces.

Resumability rests on :meth:`ResultStore.claim`: a cell is run only by the worker that claimed
it, and a ``done`` cell is never claimed again. A cell left ``running`` by a process that died
(same host, dead pid) or ``failed`` is claimable again, so a crashed or killed run resumes where
it stopped, and several machines (``--shard``) can share one PostgreSQL store. A claim also
carries a lease that its runner renews (:meth:`ResultStore.heartbeat`): a cell whose lease ran out
(its runner was killed, or its machine lost) is claimable by any runner on any host.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from abc import ABC, abstractmethod
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import (
    Column,
    Integer,
    MetaData,
    Row,
    String,
    Table,
    Text,
    bindparam,
    delete,
    func,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ...errors import ConfigError, redact_url
from ...judges.records import JudgeRecord
from ...storage import MigrateOnce, create_engine_for, created_at_column, normalise_url, time_column, write
from ...traces.store import _owner_is_dead

__all__ = ["ResultStore", "open_result_store"]

#: ``gave_up``: failed twice in a way a retry cannot change (a deterministic judge's unusable
#: output); never claimed again, reported with the failures.
CellStatus = Literal["running", "done", "failed", "gave_up"]
#: The statuses of a cell that ran and could not be scored.
NOT_SCORED = ("failed", "gave_up")


#: Seconds a claimed cell's lease lasts without a heartbeat; the runner renews it every third of that.
DEFAULT_LEASE_S = 120.0


def _now() -> datetime:
    return datetime.now(UTC)


def current_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class RunRecord(BaseModel):
    """One experiment run: its frozen spec (as JSON) and run-level facts (judge calibration…)."""

    id: str
    name: str
    spec: dict[str, Any]
    created_at: datetime = Field(default_factory=_now)
    meta: dict[str, Any] = Field(default_factory=dict)


class CellResult(BaseModel):
    """One (system, benchmark, item) cell. ``metrics`` are only meaningful when ``status == done``."""

    run_id: str
    key: str
    system: str
    benchmark: str
    item_id: str
    status: CellStatus = "running"
    owner: str = ""
    attempts: int = 1
    metrics: dict[str, float] = Field(default_factory=dict)
    responses: list[str] = Field(default_factory=list)
    judges: list[JudgeRecord] = Field(default_factory=list)
    trace_ids: list[str] = Field(default_factory=list)
    details: dict[str, Any] = Field(default_factory=dict)
    cost: dict[str, float] = Field(default_factory=dict)
    wall_s: float = 0.0
    error: str | None = None
    started_at: datetime = Field(default_factory=_now)
    finished_at: datetime | None = None


class CellFilter(BaseModel):
    """What a store can filter cells by without reading their bodies: the indexed columns. None
    matches every cell; a list matches any of its values (``statuses`` are stored statuses)."""

    model_config = ConfigDict(frozen=True)

    systems: tuple[str, ...] | None = None
    benchmarks: tuple[str, ...] | None = None
    statuses: tuple[str, ...] | None = None

    def matches(self, cell: CellResult) -> bool:
        return (
            (self.systems is None or cell.system in self.systems)
            and (self.benchmarks is None or cell.benchmark in self.benchmarks)
            and (self.statuses is None or cell.status in self.statuses)
        )


class CellPage(BaseModel):
    """A page of cells, how many match (``total``) and are in the run (``all``), and the run's
    systems and benchmarks (a viewer's filter choices)."""

    cells: list[CellResult]
    total: int
    all: int
    systems: list[str]
    benchmarks: list[str]


class ResultStore(ABC):
    """Contract:

    * :meth:`open_run` is idempotent: the first call inserts, later ones return the stored run.
    * :meth:`claim` atomically marks a cell ``running`` for ``owner`` and returns True, or returns
      False if the cell is ``done``, ``gave_up`` or ``running`` under a live owner. A ``failed``
      cell, or one left ``running`` by a dead process on this host, or whose lease has expired
      (any host), or any owner's when ``reclaim``, is claimed again with ``attempts`` increased.
    * A claim carries a **lease** until ``clock() + lease_s``; the runner renews the leases of all
      its running cells with :meth:`heartbeat` well inside that time, so a live runner's lease
      never lapses and only a runner that stopped (a killed process, a lost machine) loses its
      cells. Rows claimed before leases existed have none and keep the old rules.
    * :meth:`finish` writes the final state of a claimed cell in one transaction.
    * :meth:`release_many` gives back cells an owner claimed and never ran (a run stopped by a
      limit): a first claim is removed, as if never made; a retry's lease is ended, so any runner
      claims it at once. Cells another owner holds, or that finished, are left as they are.
    """

    #: Seconds a claim stays valid without a heartbeat.
    lease_s: float = DEFAULT_LEASE_S
    clock: Callable[[], datetime]

    def lease_until(self) -> datetime:
        return self.clock() + timedelta(seconds=self.lease_s)

    async def heartbeat(self, run_id: str, owner: str) -> int:
        """Renew the lease of every cell of ``run_id`` that ``owner`` holds ``running``; how many."""
        return 0

    @abstractmethod
    async def open_run(self, run: RunRecord) -> RunRecord: ...

    @abstractmethod
    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run with this id or unique id prefix."""

    @abstractmethod
    async def list_runs(self) -> list[RunRecord]:
        """Newest first."""

    @abstractmethod
    async def set_meta(self, run_id: str, key: str, value: Any) -> None: ...

    async def update_meta(self, run_id: str, updates: dict[str, Any]) -> None:
        """:meth:`set_meta` for several keys (one transaction where the store can)."""
        for key, value in updates.items():
            await self.set_meta(run_id, key, value)

    @abstractmethod
    async def claim(self, run_id: str, cell: CellResult, owner: str, *, reclaim: bool = False) -> bool: ...

    @abstractmethod
    async def finish(self, cell: CellResult) -> None: ...

    @abstractmethod
    async def cells(self, run_id: str) -> list[CellResult]:
        """Every cell of the run, in key order."""

    @abstractmethod
    async def release_many(self, run_id: str, keys: list[str], owner: str) -> int:
        """Give back ``owner``'s unstarted claims of ``keys`` (see the contract); how many."""

    async def cell(self, run_id: str, key: str) -> CellResult | None:
        """The cell ``key`` of the run, or None."""
        return next((c for c in await self.cells(run_id) if c.key == key), None)

    async def fingerprint(self, run_id: str) -> str | None:
        """A value that changes whenever a cell of the run is added, claimed again or finished, read
        without the cells' bodies, so a reader can keep the cells it parsed; None: not offered."""
        return None

    async def cell_page(self, run_id: str, where: CellFilter, offset: int, limit: int) -> CellPage:
        """One page of the run's cells matching ``where``, in key order, with the counts and the
        run's systems and benchmarks: a viewer's list page. This default reads every cell (the
        in-memory twin); the SQL store filters and pages in the query, parsing only the page."""
        every = await self.cells(run_id)
        chosen = [c for c in every if where.matches(c)]
        return CellPage(
            cells=chosen[offset : offset + limit],
            total=len(chosen),
            all=len(every),
            systems=sorted({c.system for c in every}),
            benchmarks=sorted({c.benchmark for c in every}),
        )

    async def claim_many(
        self, run_id: str, cells: list[CellResult], owner: str, *, reclaim: bool = False
    ) -> dict[str, int]:
        """:meth:`claim` for a batch (one transaction where the store can): key -> attempts of
        every cell claimed; cells not claimed are absent."""
        out: dict[str, int] = {}
        for cell in cells:
            if await self.claim(run_id, cell, owner, reclaim=reclaim):
                out[cell.key] = -1
        if out:
            attempts = {c.key: c.attempts for c in await self.cells(run_id) if c.key in out}
            out = {k: attempts.get(k, 1) for k in out}
        return out

    async def finish_many(self, cells: list[CellResult]) -> None:
        """Write several claimed cells (their ``attempts`` as given) in one transaction where the store can."""
        for cell in cells:
            await self.finish(cell)

    async def close(self) -> None:  # noqa: B027 - nothing to release by default
        """Release connections."""


def _aware(when: datetime) -> datetime:
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when  # SQLite drops the zone


def _claimable(
    status: str, owner: str, me: str, reclaim: bool, lease: datetime | None = None, now: datetime | None = None
) -> bool:
    if status == "failed":
        return True
    if status == "running":
        expired = lease is not None and now is not None and _aware(lease) < now
        return reclaim or owner == me or expired or _owner_is_dead(owner)
    return False


class InMemoryResultStore(ResultStore):
    """Cells are kept as their JSON, as the SQL store keeps them: what is read back is a fresh copy
    that went through the same serialisation (a detail that cannot be stored fails here too)."""

    def __init__(self, *, lease_s: float = DEFAULT_LEASE_S, clock: Callable[[], datetime] = _now) -> None:
        self._runs: dict[str, RunRecord] = {}
        self._cells: dict[str, dict[str, CellResult]] = {}
        self._bodies: dict[str, dict[str, str]] = {}
        self._leases: dict[tuple[str, str], datetime] = {}
        self._lock = asyncio.Lock()
        self.lease_s = lease_s
        self.clock = clock

    async def open_run(self, run: RunRecord) -> RunRecord:
        async with self._lock:
            if run.id not in self._runs:
                self._runs[run.id] = run.model_copy(deep=True)
                self._cells[run.id] = {}
            return self._runs[run.id].model_copy(deep=True)

    async def get_run(self, run_id: str) -> RunRecord | None:
        matches = [r for k, r in self._runs.items() if k.startswith(run_id)]
        exact = self._runs.get(run_id)
        if exact is not None:
            return exact.model_copy(deep=True)
        return matches[0].model_copy(deep=True) if len(matches) == 1 else None

    async def list_runs(self) -> list[RunRecord]:
        return sorted((r.model_copy(deep=True) for r in self._runs.values()), key=lambda r: r.created_at, reverse=True)

    async def set_meta(self, run_id: str, key: str, value: Any) -> None:
        async with self._lock:
            self._runs[run_id].meta[key] = value

    async def claim(self, run_id: str, cell: CellResult, owner: str, *, reclaim: bool = False) -> bool:
        async with self._lock:
            cells = self._cells.setdefault(run_id, {})
            old = cells.get(cell.key)
            if old is None:
                cells[cell.key] = cell.model_copy(update={"status": "running", "owner": owner, "attempts": 1})
                self._leases[(run_id, cell.key)] = self.lease_until()
                return True
            lease = self._leases.get((run_id, cell.key))
            if not _claimable(old.status, old.owner, owner, reclaim, lease, self.clock()):
                return False
            cells[cell.key] = cell.model_copy(
                update={"status": "running", "owner": owner, "attempts": old.attempts + 1}
            )
            self._leases[(run_id, cell.key)] = self.lease_until()
            self._bodies.get(run_id, {}).pop(cell.key, None)  # running again: its last result is gone
            return True

    async def heartbeat(self, run_id: str, owner: str) -> int:
        async with self._lock:
            mine = [k for k, c in self._cells.get(run_id, {}).items() if c.status == "running" and c.owner == owner]
            until = self.lease_until()
            for key in mine:
                self._leases[(run_id, key)] = until
            return len(mine)

    async def claim_many(
        self, run_id: str, cells: list[CellResult], owner: str, *, reclaim: bool = False
    ) -> dict[str, int]:
        out: dict[str, int] = {}
        for cell in cells:
            if await self.claim(run_id, cell, owner, reclaim=reclaim):
                out[cell.key] = self._cells[run_id][cell.key].attempts
        return out

    async def finish_many(self, cells: list[CellResult]) -> None:
        async with self._lock:
            for cell in cells:
                self._put(cell)

    async def release_many(self, run_id: str, keys: list[str], owner: str) -> int:
        async with self._lock:
            cells = self._cells.get(run_id, {})
            released = 0
            for key in keys:
                cell = cells.get(key)
                if cell is None or cell.status != "running" or cell.owner != owner:
                    continue
                released += 1
                if cell.attempts == 1:
                    del cells[key]
                    self._leases.pop((run_id, key), None)
                    self._bodies.get(run_id, {}).pop(key, None)
                else:
                    self._leases[(run_id, key)] = self.clock() - timedelta(seconds=1)
            return released

    def _put(self, cell: CellResult) -> None:
        # claims read status, owner and attempts of the cell; readers get a copy from its JSON
        self._cells[cell.run_id][cell.key] = cell
        if cell.status != "running":
            self._leases.pop((cell.run_id, cell.key), None)
        self._bodies.setdefault(cell.run_id, {})[cell.key] = cell.model_dump_json()

    async def finish(self, cell: CellResult) -> None:
        async with self._lock:
            old = self._cells[cell.run_id].get(cell.key)
            attempts = old.attempts if old is not None else cell.attempts
            self._put(cell.model_copy(update={"attempts": attempts}))

    async def cells(self, run_id: str) -> list[CellResult]:
        bodies = self._bodies.get(run_id, {})
        out = []
        for key, cell in sorted(self._cells.get(run_id, {}).items()):
            body = bodies.get(key)
            out.append(CellResult.model_validate_json(body) if body is not None else cell.model_copy(deep=True))
        return out


metadata = MetaData()
runs_table = Table(
    "psychoalign_experiment_runs",
    metadata,
    Column("id", String(120), primary_key=True),
    Column("name", String(120), nullable=False),
    created_at_column(),
    Column("spec", Text, nullable=False),
    Column("meta", Text, nullable=False),
)
cells_table = Table(
    "psychoalign_experiment_cells",
    metadata,
    Column("run_id", String(120), primary_key=True),
    Column("key", String(400), primary_key=True),
    Column("system", String(80), nullable=False),
    Column("benchmark", String(80), nullable=False),
    Column("status", String(16), nullable=False, index=True),
    Column("owner", String(300), nullable=False),
    Column("attempts", Integer, nullable=False),
    time_column("updated_at", nullable=False),
    Column("body", Text, nullable=False),
    # a running cell's lease (ResultStore contract); None once finished, and on rows claimed before leases
    time_column("lease_until", nullable=True),
)


class SQLResultStore(ResultStore):
    """``sqlite+aiosqlite:///file.db`` or ``postgresql+asyncpg://…`` (plain URLs are accepted)."""

    def __init__(
        self, url: str, *, lease_s: float = DEFAULT_LEASE_S, clock: Callable[[], datetime] = _now, **engine_kwargs: Any
    ) -> None:
        self.url = normalise_url(url)
        self.lease_s = lease_s
        self.clock = clock
        # The shared engine settings (WAL, busy timeout, synchronous=NORMAL) and one write path:
        # on SQLite, claims and finished-cell writes queue in-process instead of colliding on the
        # file lock (SQLite's busy handler then sleeps 1-100 ms per collision).
        self.engine: AsyncEngine = create_engine_for(self.url, **engine_kwargs)
        self._migrate = MigrateOnce(self.engine, "experiments")

    async def _init(self) -> None:
        try:  # concurrent shards: one upgrades under the migration lock, the others wait
            await self._migrate()
        except OSError as exc:
            raise ConfigError(f"cannot connect to store {redact_url(self.url)}: {redact_url(str(exc))}") from None

    @staticmethod
    def _run(row: Any) -> RunRecord:
        created = row.created_at if row.created_at.tzinfo else row.created_at.replace(tzinfo=UTC)  # SQLite drops it
        return RunRecord(
            id=row.id, name=row.name, created_at=created, spec=json.loads(row.spec), meta=json.loads(row.meta)
        )

    async def open_run(self, run: RunRecord) -> RunRecord:
        await self._init()
        try:
            async with write(self.engine) as conn:
                await conn.execute(
                    runs_table.insert().values(
                        id=run.id,
                        name=run.name,
                        created_at=run.created_at,
                        spec=json.dumps(run.spec, sort_keys=True),
                        meta=json.dumps(run.meta),
                    )
                )
        except IntegrityError:
            pass  # another worker (or an earlier attempt) opened it
        stored = await self.get_run(run.id)
        assert stored is not None
        return stored

    async def get_run(self, run_id: str) -> RunRecord | None:
        await self._init()
        async with self.engine.connect() as conn:
            exact = (await conn.execute(select(runs_table).where(runs_table.c.id == run_id))).first()
            if exact is not None:
                return self._run(exact)
            rows = (await conn.execute(select(runs_table).where(runs_table.c.id.startswith(run_id)).limit(2))).all()
        return self._run(rows[0]) if len(rows) == 1 else None

    async def list_runs(self) -> list[RunRecord]:
        await self._init()
        async with self.engine.connect() as conn:
            rows = (await conn.execute(select(runs_table).order_by(runs_table.c.created_at.desc()))).all()
        return [self._run(r) for r in rows]

    async def set_meta(self, run_id: str, key: str, value: Any) -> None:
        await self.update_meta(run_id, {key: value})

    async def update_meta(self, run_id: str, updates: dict[str, Any]) -> None:
        await self._init()
        async with write(self.engine) as conn:
            row = (await conn.execute(select(runs_table.c.meta).where(runs_table.c.id == run_id))).first()
            if row is None:
                raise ConfigError(f"unknown run '{run_id}'")
            meta = json.loads(row[0])
            meta.update(updates)
            await conn.execute(update(runs_table).where(runs_table.c.id == run_id).values(meta=json.dumps(meta)))

    async def claim(self, run_id: str, cell: CellResult, owner: str, *, reclaim: bool = False) -> bool:
        await self._init()
        fresh = cell.model_copy(update={"status": "running", "owner": owner, "attempts": 1})
        try:
            async with write(self.engine) as conn:
                await conn.execute(cells_table.insert().values(**self._row(fresh)))
            return True
        except IntegrityError:
            pass
        async with write(self.engine) as conn:
            old = (
                await conn.execute(
                    select(
                        cells_table.c.status, cells_table.c.owner, cells_table.c.attempts, cells_table.c.lease_until
                    ).where(cells_table.c.run_id == run_id, cells_table.c.key == cell.key)
                )
            ).first()
            if old is None or not _claimable(old.status, old.owner, owner, reclaim, old.lease_until, self.clock()):
                return False
            return await self._reclaim(conn, run_id, cell, owner, old)

    async def claim_many(
        self, run_id: str, cells: list[CellResult], owner: str, *, reclaim: bool = False
    ) -> dict[str, int]:
        if not cells:
            return {}
        await self._init()
        keys = [c.key for c in cells]
        try:
            async with write(self.engine) as conn:
                rows = (
                    await conn.execute(
                        select(
                            cells_table.c.key,
                            cells_table.c.status,
                            cells_table.c.owner,
                            cells_table.c.attempts,
                            cells_table.c.lease_until,
                        ).where(cells_table.c.run_id == run_id, cells_table.c.key.in_(keys))
                    )
                ).all()
                existing = {r.key: r for r in rows}
                out: dict[str, int] = {}
                fresh = [c for c in cells if c.key not in existing]
                if fresh:
                    await conn.execute(cells_table.insert(), [self._row(self._claimed(c, owner)) for c in fresh])
                    out.update(dict.fromkeys((c.key for c in fresh), 1))
                now = self.clock()
                for c in cells:
                    old = existing.get(c.key)
                    if old is None or not _claimable(old.status, old.owner, owner, reclaim, old.lease_until, now):
                        continue
                    if await self._reclaim(conn, run_id, c, owner, old):
                        out[c.key] = old.attempts + 1
                return out
        except IntegrityError:  # another worker inserted one of these keys meanwhile: go one by one
            return await super().claim_many(run_id, cells, owner, reclaim=reclaim)

    async def _reclaim(
        self, conn: AsyncConnection, run_id: str, cell: CellResult, owner: str, old: Row[*tuple[Any, ...]]
    ) -> bool:
        """Take over a claimable cell as its next attempt. The update is conditional on the row as
        read (``old``): of several racing workers, only one sees rowcount 1."""
        again = cell.model_copy(update={"status": "running", "owner": owner, "attempts": old.attempts + 1})
        result = await conn.execute(
            update(cells_table)
            .where(
                cells_table.c.run_id == run_id,
                cells_table.c.key == cell.key,
                cells_table.c.status == old.status,
                cells_table.c.owner == old.owner,
                cells_table.c.attempts == old.attempts,
            )
            .values(**self._row(again))
        )
        return bool(result.rowcount == 1)

    async def finish_many(self, cells: list[CellResult]) -> None:
        if not cells:
            return
        await self._init()
        rows = [self._row(c) for c in cells]
        fields = ("status", "owner", "attempts", "updated_at", "body", "lease_until")
        statement = (
            update(cells_table)
            .where(cells_table.c.run_id == bindparam("b_run_id"), cells_table.c.key == bindparam("b_key"))
            .values(**{f: bindparam(f"b_{f}") for f in fields})
        )
        params = [{f"b_{k}": r[k] for k in ("run_id", "key", *fields)} for r in rows]
        async with write(self.engine) as conn:
            await conn.execute(statement, params)

    @staticmethod
    def _claimed(cell: CellResult, owner: str) -> CellResult:
        """``cell`` as a first claim by ``owner`` (no copy when it already is one, as the runner's are)."""
        if cell.status == "running" and cell.owner == owner and cell.attempts == 1:
            return cell
        return cell.model_copy(update={"status": "running", "owner": owner, "attempts": 1})

    def _row(self, cell: CellResult) -> dict[str, Any]:
        return {
            "run_id": cell.run_id,
            "key": cell.key,
            "system": cell.system,
            "benchmark": cell.benchmark,
            "status": cell.status,
            "owner": cell.owner,
            "attempts": cell.attempts,
            "updated_at": _now(),
            "body": cell.model_dump_json(),
            "lease_until": self.lease_until() if cell.status == "running" else None,
        }

    async def release_many(self, run_id: str, keys: list[str], owner: str) -> int:
        if not keys:
            return 0
        await self._init()
        mine = (
            cells_table.c.run_id == run_id,
            cells_table.c.key.in_(keys),
            cells_table.c.owner == owner,
            cells_table.c.status == "running",
        )
        async with write(self.engine) as conn:
            gone = await conn.execute(delete(cells_table).where(*mine, cells_table.c.attempts == 1))
            ended = await conn.execute(
                update(cells_table).where(*mine).values(lease_until=self.clock() - timedelta(seconds=1))
            )
        return int(gone.rowcount or 0) + int(ended.rowcount or 0)

    async def heartbeat(self, run_id: str, owner: str) -> int:
        await self._init()
        async with write(self.engine) as conn:
            result = await conn.execute(
                update(cells_table)
                .where(cells_table.c.run_id == run_id, cells_table.c.owner == owner, cells_table.c.status == "running")
                .values(lease_until=self.lease_until())
            )
        return int(result.rowcount or 0)

    async def finish(self, cell: CellResult) -> None:
        await self._init()
        async with write(self.engine) as conn:
            old = (
                await conn.execute(
                    select(cells_table.c.attempts).where(
                        cells_table.c.run_id == cell.run_id, cells_table.c.key == cell.key
                    )
                )
            ).first()
            final = cell.model_copy(update={"attempts": old.attempts}) if old is not None else cell
            if old is None:
                await conn.execute(cells_table.insert().values(**self._row(final)))
            else:
                await conn.execute(
                    update(cells_table)
                    .where(cells_table.c.run_id == cell.run_id, cells_table.c.key == cell.key)
                    .values(**self._row(final))
                )

    async def cells(self, run_id: str) -> list[CellResult]:
        await self._init()
        async with self.engine.connect() as conn:
            rows = (
                await conn.execute(
                    select(cells_table.c.body).where(cells_table.c.run_id == run_id).order_by(cells_table.c.key)
                )
            ).all()
        return [CellResult.model_validate_json(r[0]) for r in rows]

    async def cell(self, run_id: str, key: str) -> CellResult | None:
        await self._init()
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(
                    select(cells_table.c.body).where(cells_table.c.run_id == run_id, cells_table.c.key == key)
                )
            ).first()
        return None if row is None else CellResult.model_validate_json(row[0])

    async def cell_page(self, run_id: str, where: CellFilter, offset: int, limit: int) -> CellPage:
        # The filters are indexed columns, so only the page's bodies are read and parsed.
        await self._init()
        c = cells_table.c
        conds = [c.run_id == run_id]
        for column, values in ((c.system, where.systems), (c.benchmark, where.benchmarks), (c.status, where.statuses)):
            if values is not None:
                conds.append(column.in_(values))
        async with self.engine.connect() as conn:
            every = select(c.system, c.benchmark, func.count()).where(c.run_id == run_id)
            kinds = (await conn.execute(every.group_by(c.system, c.benchmark))).all()
            total = (await conn.execute(select(func.count()).select_from(cells_table).where(*conds))).scalar_one()
            rows = (await conn.execute(select(c.body).where(*conds).order_by(c.key).offset(offset).limit(limit))).all()
        return CellPage(
            cells=[CellResult.model_validate_json(r[0]) for r in rows],
            total=int(total),
            all=sum(int(n) for _, _, n in kinds),
            systems=sorted({s for s, _, _ in kinds}),
            benchmarks=sorted({b for _, b, _ in kinds}),
        )

    async def fingerprint(self, run_id: str) -> str | None:
        # Rows per status and the attempts count every claim and finish; the newest write is a
        # tie-breaker (alone it could miss a write from a host whose clock runs behind).
        await self._init()
        c = cells_table.c
        query = (
            select(c.status, func.count(), func.sum(c.attempts), func.max(c.updated_at))
            .where(c.run_id == run_id)
            .group_by(c.status)
            .order_by(c.status)
        )
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return ";".join(f"{status}:{n}:{attempts}:{newest}" for status, n, attempts, newest in rows)

    async def close(self) -> None:
        await self.engine.dispose()


def open_result_store(url: str | None, **engine_kwargs: Any) -> ResultStore:
    """``None`` or ``memory://``: in-memory; anything else a SQL store."""
    if url is None or url == "memory://":
        return InMemoryResultStore()
    return SQLResultStore(url, **engine_kwargs)
