"""Trace storage behind one interface: in-memory, and SQL (SQLite file by default, PostgreSQL for teams).

Writes are atomic: :meth:`TraceStore.start` inserts a complete ``running`` row, and
:meth:`TraceStore.finish` replaces it in one transaction. A process that dies in between leaves a
``running`` row, which :meth:`TraceStore.recover_interrupted` marks ``failed`` (same host, dead pid).
"""

from __future__ import annotations

import asyncio
import bisect
import builtins
import os
import socket
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Collection, Sequence
from datetime import datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy import (
    Column,
    Float,
    Index,
    MetaData,
    Select,
    String,
    Table,
    Text,
    delete,
    select,
    union,
    update,
)
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from ..errors import ConfigError, PsychoAlignError
from ..storage import (
    MigrateOnce,
    create_engine_for,
    created_at_column,
    describe_error,
    normalise_url,
    time_column,
    write,
)
from .model import Trace, TraceStatus

__all__ = ["StoreError"]


class StoreError(PsychoAlignError):
    """The trace store failed (one clean line: never the SQL statement or its parameters)."""


class TraceStore(ABC):
    """Where traces live. Implementations must make ``start`` and ``finish`` atomic."""

    @abstractmethod
    async def start(self, trace: Trace) -> None:
        """Insert ``trace`` (status running). Raises if the id exists."""

    @abstractmethod
    async def finish(self, trace: Trace) -> None:
        """Write the final state of ``trace`` (insert or replace) in one transaction."""

    @abstractmethod
    async def get(self, trace_id: str) -> Trace | None:
        """The trace with this id, or with this unique id prefix."""

    @abstractmethod
    async def list(self, *, limit: int = 50, status: TraceStatus | None = None) -> list[dict[str, Any]]:
        """Newest first: summaries (see :meth:`Trace.summary`)."""

    @abstractmethod
    def iter_all(self) -> AsyncIterator[Trace]:
        """Every trace, oldest first."""

    @abstractmethod
    async def recover_interrupted(self) -> int:
        """Mark running traces whose process is gone as failed; return how many."""

    async def conversation(
        self, keys: Collection[str], *, limit: int, exclude: str | None = None
    ) -> builtins.list[Trace]:
        """The ``limit`` most recent traces filed under any of ``keys`` (their cross-turn record's
        ``keys``), oldest first, without ``exclude``. The cross-turn track reads a conversation's
        earlier turns with this. Generic version: a scan; the built-in stores answer from an index."""
        wanted = set(keys)
        hits = [t async for t in self.iter_all() if t.id != exclude and _filed_under(t, wanted)]
        return hits[-limit:] if limit > 0 else []

    async def close(self) -> None:  # noqa: B027 - nothing to release by default
        """Release connections."""


def _owner_is_dead(owner: str) -> bool:
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _filed_under(trace: Trace, keys: Collection[str]) -> bool:
    record = trace.cross_turn
    return record is not None and any(k in keys for k in record.keys)


def _keys(trace: Trace) -> list[str]:
    return list(dict.fromkeys(trace.cross_turn.keys)) if trace.cross_turn is not None else []


def _own_copy(trace: Trace) -> Trace:
    """A copy of ``trace`` that shares no container with it (metadata holds JSON values, as the
    SQL store requires), rebuilt from its dump: two to four times cheaper than
    ``model_copy(deep=True)`` (pydantic-core instead of ``copy.deepcopy``). A trace that does not
    validate as it stands (a field set by assignment outside its constraints) is deep-copied as
    before, so whether it is stored never depends on that."""
    try:
        return Trace.model_validate(trace.model_dump())
    except ValidationError:
        return trace.model_copy(deep=True)


def _interrupted(trace: Trace) -> Trace:
    out = trace.model_copy(deep=True)
    out.status = TraceStatus.FAILED
    out.error = f"interrupted: process {trace.metadata.get('owner', '?')} ended mid-negotiation"
    return out


class InMemoryTraceStore(TraceStore):
    def __init__(self) -> None:
        self._traces: dict[str, Trace] = {}
        # Conversation key -> (created_at, id) of the traces filed under it, oldest first: the
        # cross-turn lookup reads the tail of each list, so its cost does not grow with the store.
        self._by_key: dict[str, list[tuple[datetime, str]]] = {}
        self._lock = asyncio.Lock()

    def _index(self, trace: Trace) -> None:
        if trace.id in self._traces:
            return  # filed when it started (a turn's keys are known then and never change)
        entry = (trace.created_at, trace.id)
        for key in _keys(trace):
            entries = self._by_key.setdefault(key, [])
            if not entries or entries[-1] <= entry:
                entries.append(entry)
            else:
                bisect.insort(entries, entry)

    async def start(self, trace: Trace) -> None:
        async with self._lock:
            if trace.id in self._traces:
                raise ValueError(f"trace {trace.id} exists")
            self._index(trace)
            self._traces[trace.id] = _own_copy(trace)  # the caller goes on changing its trace

    async def finish(self, trace: Trace) -> None:
        async with self._lock:
            self._index(trace)
            self._traces[trace.id] = _own_copy(trace)  # the caller goes on changing its trace

    async def get(self, trace_id: str) -> Trace | None:
        matches = [t for k, t in self._traces.items() if k.startswith(trace_id)]
        return matches[0].model_copy(deep=True) if len(matches) == 1 else None

    async def list(self, *, limit: int = 50, status: TraceStatus | None = None) -> list[dict[str, Any]]:
        items = sorted(self._traces.values(), key=lambda t: t.created_at, reverse=True)
        return [t.summary() for t in items if status is None or t.status == status][:limit]

    async def iter_all(self) -> AsyncIterator[Trace]:
        for t in sorted(self._traces.values(), key=lambda t: t.created_at):
            yield t.model_copy(deep=True)

    async def conversation(
        self, keys: Collection[str], *, limit: int, exclude: str | None = None
    ) -> builtins.list[Trace]:
        if limit <= 0:
            return []
        async with self._lock:
            # The newest limit + 1 of each key cover the answer even when ``exclude`` is among them.
            recent = {entry for key in set(keys) for entry in self._by_key.get(key, [])[-(limit + 1) :]}
            chosen = sorted(entry for entry in recent if entry[1] != exclude)[-limit:]
            return [self._traces[trace_id].model_copy(deep=True) for _, trace_id in chosen]

    async def recover_interrupted(self) -> int:
        n = 0
        async with self._lock:
            for key, t in self._traces.items():
                if t.status is TraceStatus.RUNNING and _owner_is_dead(str(t.metadata.get("owner", ""))):
                    self._traces[key] = _interrupted(t)
                    n += 1
        return n


metadata = MetaData()
traces_table = Table(
    "psychoalign_traces",
    metadata,
    Column("id", String(32), primary_key=True),
    created_at_column(index=True),
    time_column("finished_at"),
    Column("status", String(16), nullable=False, index=True),
    Column("owner", String(300), nullable=False),
    Column("request", Text, nullable=False),
    Column("framework", String(200)),
    Column("state", String(40)),
    Column("tension", Float),
    Column("defense", String(40)),
    Column("error", Text),
    Column("body", Text, nullable=False),
)

#: Conversation keys -> traces (the cross-turn track's index; docs/negotiation.md). A turn's keys
#: are known when it starts, so they are written with its running row.
trace_keys_table = Table(
    "psychoalign_trace_keys",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("trace_id", String(32), primary_key=True),
    created_at_column(),
    # The cross-turn lookup reads a key's newest rows: an index scan that stops at the limit.
    Index("ix_psychoalign_trace_keys_key_created_at", "key", "created_at"),
)


def _text(value: str | None) -> str | None:
    """PostgreSQL text cannot hold NUL; input is normalised at the edge, this is the last line."""
    return value.replace("\x00", "\ufffd") if value is not None else None


def _row(trace: Trace) -> dict[str, Any]:
    f = trace.final
    return {
        "id": trace.id,
        "created_at": trace.created_at,
        "finished_at": trace.finished_at,
        "status": trace.status.value,
        "owner": str(trace.metadata.get("owner", "")),
        "request": _text(trace.request),
        "framework": f"{trace.framework.name}@{trace.framework.version}" if trace.framework else None,
        "state": f.state.value if f and f.state else None,
        "tension": f.tension if f else None,
        "defense": f.defense.value if f and f.defense else None,
        "error": _text(trace.error),
        "body": trace.model_dump_json(),
    }


def conversation_query(keys: Sequence[str], *, limit: int, exclude: str | None) -> Select[Any]:
    """The SQL store's cross-turn lookup: bodies, created_at and id of the newest ``limit`` traces
    filed under ``keys`` (unordered; at least one key)."""
    k = trace_keys_table.c
    # Per key, the newest ``limit`` rows besides ``exclude`` (index on key, created_at: a scan
    # that stops at the limit however long the conversation); then the newest of their union.
    per_key = [
        select(k.trace_id, k.created_at)
        .where(k.key == key, *([k.trace_id != exclude] if exclude is not None else []))
        .order_by(k.created_at.desc())
        .limit(limit)
        .subquery()
        for key in keys
    ]
    # Each member wrapped: SQLite refuses ORDER BY / LIMIT directly inside a UNION.
    members = [select(sub.c.trace_id, sub.c.created_at) for sub in per_key]
    recent = union(*members).subquery() if len(members) > 1 else per_key[0]
    ids = select(recent.c.trace_id).order_by(recent.c.created_at.desc(), recent.c.trace_id.desc()).limit(limit)
    return select(traces_table.c.body, traces_table.c.created_at, traces_table.c.id).where(traces_table.c.id.in_(ids))


class SQLTraceStore(TraceStore):
    """SQLAlchemy (async) store. ``url``: ``sqlite+aiosqlite:///file.db`` or ``postgresql+asyncpg://…``."""

    def __init__(self, url: str, **engine_kwargs: Any) -> None:
        self.url = normalise_url(url)
        self.engine: AsyncEngine = create_engine_for(self.url, **engine_kwargs)
        self._migrate = MigrateOnce(self.engine, "traces")

    async def _init(self) -> None:
        try:
            await self._migrate()
        except (OSError, SQLAlchemyError) as exc:
            raise ConfigError(f"cannot open the trace store: {describe_error(exc)}", hint="check store_url") from None

    async def start(self, trace: Trace) -> None:
        await self._init()
        async with write(self.engine) as conn:
            await conn.execute(traces_table.insert().values(**_row(trace)))
            await self._file(conn, trace)

    async def finish(self, trace: Trace) -> None:
        await self._init()
        row = _row(trace)
        async with write(self.engine) as conn:
            result = await conn.execute(update(traces_table).where(traces_table.c.id == trace.id).values(**row))
            if result.rowcount == 0:
                await conn.execute(traces_table.insert().values(**row))
                await self._file(conn, trace)

    @staticmethod
    async def _file(conn: Any, trace: Trace) -> None:
        keys = _keys(trace)
        if keys:
            await conn.execute(delete(trace_keys_table).where(trace_keys_table.c.trace_id == trace.id))
            await conn.execute(
                trace_keys_table.insert(),
                [{"key": k, "trace_id": trace.id, "created_at": trace.created_at} for k in keys],
            )

    async def conversation(
        self, keys: Collection[str], *, limit: int, exclude: str | None = None
    ) -> builtins.list[Trace]:
        await self._init()
        wanted = list(dict.fromkeys(keys))
        if not wanted or limit <= 0:
            return []
        query = conversation_query(wanted, limit=limit, exclude=exclude)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        rows.sort(key=lambda r: (r[1], r[2]))
        return [Trace.model_validate_json(body) for body, _, _ in rows]

    async def get(self, trace_id: str) -> Trace | None:
        await self._init()
        async with self.engine.connect() as conn:
            rows = (
                await conn.execute(select(traces_table.c.body).where(traces_table.c.id.startswith(trace_id)).limit(2))
            ).all()
        return Trace.model_validate_json(rows[0][0]) if len(rows) == 1 else None

    async def list(self, *, limit: int = 50, status: TraceStatus | None = None) -> list[dict[str, Any]]:
        await self._init()
        query = select(traces_table.c.body).order_by(traces_table.c.created_at.desc()).limit(limit)
        if status is not None:
            query = query.where(traces_table.c.status == status.value)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [Trace.model_validate_json(r[0]).summary() for r in rows]

    async def iter_all(self) -> AsyncIterator[Trace]:
        await self._init()
        async with self.engine.connect() as conn:
            result = await conn.stream(select(traces_table.c.body).order_by(traces_table.c.created_at))
            async for row in result:
                yield Trace.model_validate_json(row[0])

    async def recover_interrupted(self) -> int:
        await self._init()
        async with write(self.engine) as conn:
            rows = (
                await conn.execute(
                    select(traces_table.c.id, traces_table.c.owner, traces_table.c.body).where(
                        traces_table.c.status == TraceStatus.RUNNING.value
                    )
                )
            ).all()
            n = 0
            for trace_id, owner, body in rows:
                if _owner_is_dead(owner):
                    failed = _interrupted(Trace.model_validate_json(body))
                    await conn.execute(update(traces_table).where(traces_table.c.id == trace_id).values(**_row(failed)))
                    n += 1
        return n

    async def close(self) -> None:
        await self.engine.dispose()


def open_store(url: str | None) -> TraceStore:
    """``None`` or ``memory://`` gives an in-memory store; anything else a SQL store."""
    if url is None or url == "memory://":
        return InMemoryTraceStore()
    return SQLTraceStore(url)
