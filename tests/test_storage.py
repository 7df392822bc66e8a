"""The shared SQL helper: SQLite configured for concurrency, one write path, idempotent tables."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sqlalchemy import text

from psychoalign.storage import BUSY_TIMEOUT_MS, create_engine_for, describe_error
from psychoalign.traces import SQLTraceStore, TraceStatus
from tests.scenario import World, evaluation, proposals


async def test_sqlite_engines_use_wal_and_a_busy_timeout(tmp_path: Path) -> None:
    engine = create_engine_for(f"sqlite:///{tmp_path / 'deep' / 'x.db'}")
    async with engine.connect() as conn:
        assert (await conn.execute(text("PRAGMA journal_mode"))).scalar() == "wal"
        assert (await conn.execute(text("PRAGMA busy_timeout"))).scalar() == BUSY_TIMEOUT_MS
    await engine.dispose()


async def test_100_concurrent_clients_on_two_engines_with_zero_failures(tmp_path: Path) -> None:
    """Two stores on one fresh SQLite file (as two server processes would be), 100 concurrent
    negotiations and 100 concurrent reads: every negotiation completes and is stored."""
    db = tmp_path / "traces.db"
    stores = [SQLTraceStore(f"sqlite:///{db}") for _ in range(2)]
    world = World([proposals(("x", 0.9), ("y", 0.5))], judge=lambda t: evaluation(65, "CONDITIONAL"))
    negotiators = [world.negotiator(store=s) for s in stores]
    results = await asyncio.gather(
        *(negotiators[i % 2].negotiate(f"q{i}") for i in range(100)),
        *(stores[i % 2].list(limit=5) for i in range(100)),
    )
    traces = results[:100]
    assert [t.error for t in traces if t.status is not TraceStatus.COMPLETED] == []  # type: ignore[union-attr]
    rows = await stores[0].list(limit=500)
    assert len(rows) == 100 and {r["status"] for r in rows} == {"completed"}
    for s in stores:
        await s.close()


def test_describe_error_never_shows_sql_or_parameters() -> None:
    from sqlalchemy.exc import OperationalError

    exc = OperationalError("SELECT secret FROM t WHERE x = ?", ("PARAM",), Exception("database is locked"))
    assert describe_error(exc) == "Exception: database is locked"
