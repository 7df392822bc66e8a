"""Databases written before the stores had migrations open with this code, which upgrades them
in place: every row stays, the tables, columns and indexes added since appear, and each store's
version table holds its head. The old schemas are frozen from those commits' own code
(``freeze_schema.py``): 206ed0d is main before migrations (all five stores); 21e8e52 a STAR store
before campaign statuses and membership (star_campaigns without status and members_only);
05141f7 the first STAR store (no leases, no per-turn refusals, no campaign settings, declines or
target failures) beside a trace store without conversation keys."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Column, MetaData, Table, select
from sqlalchemy.engine import Connection

from psychoalign.experiments.harness.store import SQLResultStore
from psychoalign.star import load_policy
from psychoalign.star.lab_store import SQLLabStore
from psychoalign.star.store import SQLStarStore
from psychoalign.storage import STORES
from psychoalign.traces import SQLTraceStore
from psychoalign.web.accounts import SQLAccountStore

from .conftest import Database
from .stores import heads, schema_diff, versions

PREMIGRATION = Path(__file__).with_name("premigration")
ROWS = 3  # per table


def _value(column: Column[Any], i: int) -> Any:
    """Row ``i``'s value for ``column``: distinct per row, so keys stay unique."""
    kind = column.type.python_type
    if kind is str:
        text = f'{{"row": {i}, "column": "{column.name}"}}'
        length = getattr(column.type, "length", None)
        return text if length is None else f"{i}-{column.name}"[:length]
    if kind is datetime:
        return datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=i)
    if kind is bool:
        return i % 2 == 0
    return kind(i + 1) + (0.5 if kind is float else 0)


def _statements(commit: str, dialect: str) -> list[str]:
    """The frozen DDL of ``commit`` for ``dialect``, one statement each."""
    ddl = (PREMIGRATION / f"{commit}.{dialect}.sql").read_text(encoding="utf-8")
    text = "\n".join(line for line in ddl.splitlines() if not line.startswith("--"))
    return [part.strip() for part in text.split(";") if part.strip()]


def _create_and_fill(sync_conn: Connection, statements: list[str]) -> dict[str, Table]:
    """Run the old code's DDL, then put :data:`ROWS` rows in every table."""
    for statement in statements:
        sync_conn.exec_driver_sql(statement)
    tables = MetaData()
    tables.reflect(sync_conn)
    for table in tables.sorted_tables:
        sync_conn.execute(table.insert(), [{c.name: _value(c, i) for c in table.columns} for i in range(ROWS)])
    return dict(tables.tables)


def _rows(sync_conn: Connection, tables: list[Table]) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of ``tables`` (their old columns), in primary-key order."""
    return {
        t.name: [tuple(r) for r in sync_conn.execute(select(t).order_by(*t.primary_key.columns)).all()] for t in tables
    }


async def _open_every_store(database: Database) -> None:
    """Open each store as the code does (the STAR store's engine carries the lab and accounts,
    as in ``psychoalign serve``) and read from it: opening migrates."""
    traces = SQLTraceStore(database.url, **database.engine_kwargs)
    star = SQLStarStore(database.url, load_policy(), **database.engine_kwargs)
    results = SQLResultStore(database.url, **database.engine_kwargs)
    try:
        assert await traces.get("no-such-trace") is None
        await star.init()
        await SQLLabStore(star.engine).init()
        await SQLAccountStore(engine=star.engine).init()
        assert await results.get_run("no-such-run") is None
    finally:
        await traces.close()
        await star.close()
        await results.close()


@pytest.mark.parametrize("commit", ["206ed0d", "21e8e52", "05141f7"])
async def test_a_database_from_before_migrations_is_upgraded_and_keeps_every_row(
    database: Database, commit: str
) -> None:
    engine = database.engine()
    async with engine.begin() as conn:
        old = await conn.run_sync(_create_and_fill, _statements(commit, engine.dialect.name))
        before = await conn.run_sync(_rows, list(old.values()))
    assert sorted(len(rows) for rows in before.values()) == [ROWS] * len(old)

    await _open_every_store(database)

    async with engine.connect() as conn:
        assert await conn.run_sync(_rows, list(old.values())) == before
        for store in STORES:
            assert await conn.run_sync(versions, store) == heads(store), store
            assert await conn.run_sync(schema_diff, store) == [], store  # every table, column and index
        if "star_campaigns" in old and "status" not in old["star_campaigns"].c:  # campaigns from before statuses:
            rows = (await conn.exec_driver_sql("SELECT status, members_only FROM star_campaigns")).all()
            assert [tuple(r) for r in rows] == [("live", False)] * ROWS  # live, and open to every participant
    await engine.dispose()


def _star_at(sync_conn: Connection, revision: str) -> None:
    from alembic import command

    from psychoalign.storage import migrations_config

    command.upgrade(migrations_config("star", sync_conn), revision)


async def test_campaigns_that_took_claims_are_live_after_the_draft_revision(database: Database) -> None:
    """Star revision 0002 (drafts): an ``open`` campaign becomes ``live``; paused and closed ones
    stay as they were, and a campaign written without a status afterwards is live."""
    engine = database.engine()
    async with engine.begin() as conn:
        await conn.run_sync(_star_at, "0001")
        for name, status in (("a", "open"), ("b", "paused"), ("c", "closed")):
            await conn.exec_driver_sql(
                "INSERT INTO star_campaigns (name, settings, created_at, status, members_only) "
                f"VALUES ('{name}', '{{}}', '2026-01-01 00:00:00', '{status}', false)"
            )
    store = SQLStarStore(database.url, load_policy(), **database.engine_kwargs)
    try:
        assert await store.campaign_statuses(["a", "b", "c"]) == {"a": "live", "b": "paused", "c": "closed"}
    finally:
        await store.close()
    async with engine.begin() as conn:
        assert await conn.run_sync(versions, "star") == heads("star")
        assert await conn.run_sync(schema_diff, "star") == []
        await conn.exec_driver_sql(
            "INSERT INTO star_campaigns (name, settings, created_at) VALUES ('d', '{}', '2026-01-02 00:00:00')"
        )
        status = (await conn.exec_driver_sql("SELECT status FROM star_campaigns WHERE name = 'd'")).scalar_one()
    assert status == "live"
    await engine.dispose()


def _star_down(sync_conn: Connection, revision: str) -> None:
    from alembic import command

    from psychoalign.storage import migrations_config

    command.downgrade(migrations_config("star", sync_conn), revision)


async def test_ratings_stored_before_the_model_stamp_keep_no_model_and_new_ones_carry_it(database: Database) -> None:
    """Star revision 0003: ``star_annotations.model``. A rating stored before it stays, with no
    model (its writer is what the campaign recorded, if anything); the store then stamps new
    persona ratings; downgrading drops the column and keeps every rating."""
    engine = database.engine()
    async with engine.begin() as conn:
        await conn.run_sync(_star_at, "0002")
        await conn.exec_driver_sql(
            "INSERT INTO star_annotations (dialogue_id, participant_id, kind, rating, reasoning, task_id, created_at) "
            "VALUES ('d1', 'sim-a', 'annotate', 2, 'old', 't1', '2026-01-01 00:00:00')"
        )
    store = SQLStarStore(database.url, load_policy(), **database.engine_kwargs)
    try:
        await store.init()
    finally:
        await store.close()
    async with engine.begin() as conn:
        assert await conn.run_sync(versions, "star") == heads("star")
        assert await conn.run_sync(schema_diff, "star") == []
        old = (await conn.exec_driver_sql("SELECT reasoning, model FROM star_annotations")).all()
        assert [tuple(r) for r in old] == [("old", None)]
        await conn.run_sync(_star_down, "0002")
        kept = (await conn.exec_driver_sql("SELECT reasoning FROM star_annotations")).all()
        assert [tuple(r) for r in kept] == [("old",)]
    await engine.dispose()
