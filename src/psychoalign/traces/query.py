"""Filtered, paginated trace listing for the trace viewer and exports.

One query model, two executions: SQL stores filter in the database on the indexed columns
(status, state, defense, framework, tension, created_at, request text); the in-memory store
filters the same way in Python. Conversation ids live in the trace metadata: SQL narrows them
with a LIKE on the stored JSON, then every candidate is checked exactly after parsing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import ColumnElement, and_, func, select, true

from .model import Trace, TraceStatus
from .store import SQLTraceStore, TraceStore, traces_table

__all__ = ["TraceQuery", "query_traces"]


class TraceQuery(BaseModel):
    """Every filter is optional; all given filters must hold. Times are inclusive bounds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: TraceStatus | None = None
    state: str | None = Field(None, max_length=40)
    defense: str | None = Field(None, max_length=40, description="A mechanism, or 'none' for no defense.")
    framework: str | None = Field(None, max_length=200, description="Framework name (any version).")
    tension_min: float | None = Field(None, ge=0.0, le=1.0)
    tension_max: float | None = Field(None, ge=0.0, le=1.0)
    since: datetime | None = None
    until: datetime | None = None
    q: str | None = Field(None, max_length=500, description="Case-insensitive substring of the request.")
    conversation: str | None = Field(None, pattern=r"^[A-Za-z0-9._:-]{1,128}$")
    limit: int = Field(50, ge=1, le=1000)
    offset: int = Field(0, ge=0)

    def matches(self, trace: Trace) -> bool:
        f = trace.final
        tension = f.tension if f is not None else None
        state = f.state.value if f is not None and f.state is not None else None
        defense = f.defense.value if f is not None and f.defense is not None else None
        created = trace.created_at
        checks = [
            self.status is None or trace.status == self.status,
            self.state is None or state == self.state,
            self.defense is None or defense == (None if self.defense == "none" else self.defense),
            self.framework is None or (trace.framework is not None and trace.framework.name == self.framework),
            self.tension_min is None or (tension is not None and tension >= self.tension_min),
            self.tension_max is None or (tension is not None and tension <= self.tension_max),
            self.since is None or created >= _aware(self.since),
            self.until is None or created <= _aware(self.until),
            not self.q or self.q.casefold() in trace.request.casefold(),
            self.conversation is None or trace.metadata.get("conversation_id") == self.conversation,
        ]
        return all(checks)


class TracePage(BaseModel):
    traces: list[Trace]
    total: int
    query: TraceQuery


def _aware(when: datetime) -> datetime:
    from datetime import UTC

    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _conditions(q: TraceQuery) -> list[ColumnElement[bool]]:
    t = traces_table.c
    out: list[ColumnElement[bool]] = []
    if q.status is not None:
        out.append(t.status == q.status.value)
    if q.state is not None:
        out.append(t.state == q.state)
    if q.defense is not None:
        out.append(t.defense.is_(None) if q.defense == "none" else t.defense == q.defense)
    if q.framework is not None:
        out.append(t.framework.startswith(q.framework + "@", autoescape=True))
    if q.tension_min is not None:
        out.append(t.tension >= q.tension_min)
    if q.tension_max is not None:
        out.append(t.tension <= q.tension_max)
    if q.since is not None:
        out.append(t.created_at >= _aware(q.since))
    if q.until is not None:
        out.append(t.created_at <= _aware(q.until))
    if q.q:
        out.append(t.request.icontains(q.q, autoescape=True))
    if q.conversation is not None:
        out.append(t.body.contains(f'"conversation_id":"{q.conversation}"', autoescape=True))
    return out


async def query_traces(store: TraceStore, query: TraceQuery) -> TracePage:
    """Newest first: the page ``[offset, offset + limit)`` of matching traces and the total."""
    if isinstance(store, SQLTraceStore):
        return await _sql(store, query)
    items = [t async for t in store.iter_all()]  # in-memory (or any other implementation): a scan
    hits = sorted((t for t in items if query.matches(t)), key=lambda t: t.created_at, reverse=True)
    return TracePage(traces=hits[query.offset : query.offset + query.limit], total=len(hits), query=query)


async def _sql(store: SQLTraceStore, query: TraceQuery) -> TracePage:
    await store._init()  # the store creates its table lazily
    where = and_(true(), *_conditions(query))
    rows_q = (
        select(traces_table.c.body)
        .where(where)
        .order_by(traces_table.c.created_at.desc())
        .offset(query.offset)
        .limit(query.limit)
    )
    count_q = select(func.count()).select_from(traces_table).where(where)
    async with store.engine.connect() as conn:
        rows = (await conn.execute(rows_q)).all()
        total = int((await conn.execute(count_q)).scalar_one())
    traces: list[Trace] = []
    for (body,) in rows:
        trace = Trace.model_validate_json(body)
        if query.matches(trace):  # exact check (e.g. the conversation id LIKE)
            traces.append(trace)
    return TracePage(traces=traces, total=total, query=query)


def describe(trace: Trace) -> dict[str, Any]:
    """The list row of one trace (no agent text but the request)."""
    row = trace.summary()
    row["conversation_id"] = trace.metadata.get("conversation_id")
    row["deployment"] = trace.metadata.get("deployment")
    return row
