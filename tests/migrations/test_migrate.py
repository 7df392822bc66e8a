"""How :func:`psychoalign.storage.migrate` opens a database: two engines or two processes at
once on a new one upgrade it once, and a database written by a newer psychoalign is refused
untouched."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from psychoalign import storage
from psychoalign.errors import ConfigError
from psychoalign.storage import STORES, Store, create_engine_for, migrate
from psychoalign.traces import SQLTraceStore
from tests.cli.test_negotiate import write_config

from ..helpers import PG_URL, pg_schema
from ..test_edges import _clean_error, _run
from .conftest import Database
from .stores import heads, schema_diff, versions


async def test_two_engines_opening_a_new_database_at_once_upgrade_it_once(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both engines read "no schema yet" before either upgrades (a barrier, not timing), so both
    take the upgrade path, every store at once: one runs each upgrade, the other finds it done."""
    read = storage._revisions
    barriers = {store: asyncio.Barrier(2) for store in STORES}

    async def both_read_first(engine: AsyncEngine, store: Store) -> Any:
        found = await read(engine, store)
        await barriers[store].wait()
        return found

    monkeypatch.setattr(storage, "_revisions", both_read_first)
    one, two = database.engine(), database.engine()
    try:
        await asyncio.gather(*(migrate(engine, store) for store in STORES for engine in (one, two)))
        async with one.connect() as conn:
            for store in STORES:
                assert await conn.run_sync(versions, store) == heads(store), store
                assert await conn.run_sync(schema_diff, store) == [], store
    finally:
        await one.dispose()
        await two.dispose()


#: One process opening every store of the schema in argv[2] on the server in argv[1].
OPEN_EVERY_STORE = """
import asyncio, sys
from psychoalign.storage import STORES, create_engine_for, migrate
async def main():
    engine = create_engine_for(sys.argv[1], connect_args={"server_settings": {"search_path": sys.argv[2]}})
    for store in STORES:
        await migrate(engine, store)
    await engine.dispose()
asyncio.run(main())
"""


@pytest.mark.postgres
async def test_two_processes_opening_a_new_postgresql_database_at_once_upgrade_it_once() -> None:
    """The test holds every store's migration lock until both processes wait for it, store by
    store (seen in pg_locks, not timed), so both take each upgrade path at once."""
    async with pg_schema("mig") as connect_args:
        holder = create_engine_for(PG_URL)
        async with holder.connect() as conn:
            keys = [storage._lock_key(store) for store in STORES]
            for key in keys:
                await conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": key})
            await conn.commit()
            schema = connect_args["server_settings"]["search_path"]
            processes = [
                await asyncio.create_subprocess_exec(sys.executable, "-c", OPEN_EVERY_STORE, PG_URL, schema)
                for _ in range(2)
            ]
            for key in keys:
                await _until_waiting(conn, key, processes)
                await conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": key})
                await conn.commit()
            assert [await p.wait() for p in processes] == [0, 0]
        await holder.dispose()
        checker = create_engine_for(PG_URL, connect_args=connect_args)
        async with checker.connect() as conn:
            for store in STORES:
                assert await conn.run_sync(versions, store) == heads(store), store
                assert await conn.run_sync(schema_diff, store) == [], store
        await checker.dispose()


async def _until_waiting(conn: AsyncConnection, key: int, processes: list[asyncio.subprocess.Process]) -> None:
    """Until every process waits for the advisory lock ``key``. A process that ends first fails the
    test; the bound (10 minutes of polling) is only a backstop against a hang, never the signal: a
    loaded machine may take a minute to start two interpreters."""
    query = text(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        " AND classid::bigint = :high AND objid::bigint = :low AND objsubid = 1"
    )
    params = {"high": (key >> 32) & 0xFFFFFFFF, "low": key & 0xFFFFFFFF}
    for _ in range(12_000):
        waiting = (await conn.execute(query, params)).scalar_one()
        await conn.commit()
        if waiting == len(processes):
            return
        assert all(p.returncode is None for p in processes), "a process ended before it waited for the lock"
        await asyncio.sleep(0.05)
    raise AssertionError(f"the processes never waited for the migration lock {key}")


async def _stamp(engine: AsyncEngine, store: Store, revision: str) -> None:
    async with engine.begin() as conn:
        await conn.exec_driver_sql(f"CREATE TABLE alembic_version_{store} (version_num VARCHAR(32) PRIMARY KEY)")
        await conn.exec_driver_sql(f"INSERT INTO alembic_version_{store} VALUES ('{revision}')")


async def test_a_database_from_a_newer_version_is_refused_in_one_line_and_left_alone(database: Database) -> None:
    engine = database.engine()
    await _stamp(engine, "traces", "9999")
    store = SQLTraceStore(database.url, **database.engine_kwargs)
    with pytest.raises(ConfigError) as caught:
        await store.list()
    await store.close()
    message = str(caught.value)
    assert "traces" in message and "9999" in message and "newer" in message and "\n" not in message
    assert caught.value.hint is not None and "upgrade psychoalign" in caught.value.hint
    async with engine.connect() as conn:
        assert await conn.run_sync(lambda c: inspect(c).get_table_names()) == ["alembic_version_traces"]
        assert await conn.run_sync(versions, "traces") == ["9999"]
    await engine.dispose()


async def test_a_current_database_is_opened_without_asking_alembic(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One read of the version table answers "current"; a new database still goes to Alembic."""
    engine = database.engine()
    asked: list[Store] = []
    read = storage._revisions

    async def counted(engine: AsyncEngine, store: Store) -> Any:
        asked.append(store)
        return await read(engine, store)

    monkeypatch.setattr(storage, "_revisions", counted)
    try:
        await migrate(engine, "traces")  # new: Alembic upgrades it
        await migrate(engine, "traces")  # current: no Alembic
        async with engine.connect() as conn:
            assert await conn.run_sync(versions, "traces") == heads("traces")
    finally:
        await engine.dispose()
    assert asked == ["traces"]


def test_the_cli_names_the_store_and_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "newer.db"
    engine = storage.create_engine_for(f"sqlite:///{path}")
    asyncio.run(_stamp(engine, "traces", "9999"))
    asyncio.run(engine.dispose())
    out = _run("traces", "list", "--config", str(write_config(tmp_path)), "--store", f"sqlite:///{path}")
    _clean_error(out, "traces tables", "9999", "upgrade psychoalign")
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
