"""The shared SQL helper: SQLite configured for concurrency, one write path, idempotent tables."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from sqlalchemy import text

from psychoalign.errors import ConfigError
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


def test_a_damaged_sqlite_file_is_named_as_damaged_and_left_as_it_is(tmp_path: Path) -> None:
    """A file that is not a database (or a truncated one) is no matter of permissions: the error
    says the file is damaged and how to go on, and the file is not touched."""
    good = tmp_path / "good.db"
    with closing(sqlite3.connect(good)) as conn:
        conn.execute("CREATE TABLE t (x TEXT)")
        conn.executemany("INSERT INTO t VALUES (?)", [("x" * 500,)] * 200)
        conn.commit()
    truncated = tmp_path / "truncated.db"
    truncated.write_bytes(good.read_bytes()[:5000])
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"garbage\n")
    for damaged in (truncated, garbage):
        before = damaged.read_bytes()
        with pytest.raises(ConfigError) as caught:
            create_engine_for(f"sqlite:///{damaged}")
        assert "cannot open store" in caught.value.message
        assert "damaged or is not a SQLite database" in caught.value.hint
        assert "writable" not in caught.value.hint
        assert damaged.read_bytes() == before
