"""Trace stores: SQLite (default) and PostgreSQL (real server), atomic writes, crash recovery."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from psychoalign.traces import InMemoryTraceStore, SQLTraceStore, Trace, TraceStatus, TraceStore
from psychoalign.traces.store import traces_table

from .scenario import World, evaluation, proposals

PG_URL = os.environ.get("PSYCHOALIGN_TEST_PG", "postgresql+asyncpg://postgres@127.0.0.1:5432/test")


def _pg_available() -> bool:
    import socket

    try:
        socket.create_connection(("127.0.0.1", 5432), timeout=1).close()
        return True
    except OSError:
        return False


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TraceStore]:
    if request.param == "memory":
        yield InMemoryTraceStore()
        return
    if request.param == "sqlite":
        s = SQLTraceStore(f"sqlite:///{tmp_path / 'traces.db'}")
        yield s
        await s.close()
        return
    if not _pg_available():
        pytest.fail("PostgreSQL is expected at 127.0.0.1:5432 on this machine kind")
    schema = f"t_{uuid.uuid4().hex[:10]}"
    admin = SQLTraceStore(PG_URL)
    async with admin.engine.begin() as conn:
        await conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    s = SQLTraceStore(PG_URL, connect_args={"server_settings": {"search_path": schema}})
    yield s
    await s.close()
    async with admin.engine.begin() as conn:
        await conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
    await admin.close()


async def test_roundtrip_list_and_prefix(store: TraceStore) -> None:
    world = World([proposals(("Boil it 6 minutes.", 0.9))])
    negotiator = world.negotiator(store=store)
    first = await negotiator.negotiate("egg?")
    second = await negotiator.negotiate("")  # fails: empty request
    got = await store.get(first.id)
    assert got is not None
    assert got.model_dump() == first.model_dump()
    assert (await store.get(first.id[:10])) is not None
    rows = await store.list()
    assert [r["id"] for r in rows] == [second.id, first.id]
    assert rows[1]["state"] == "healthy_equilibrium"
    failed = await store.list(status=TraceStatus.FAILED)
    assert [r["id"] for r in failed] == [second.id]
    assert failed[0]["error"].startswith("the request is empty")
    exported = [t.id async for t in store.iter_all()]
    assert exported == [first.id, second.id]


async def test_running_row_is_complete_then_replaced(store: TraceStore) -> None:
    seen: list[Trace | None] = []
    world = World([proposals(("x", 0.9))], judge=lambda t: evaluation(90, "APPROVED"))
    models = world.models(latency_s=0.05)
    from psychoalign.config import Settings
    from psychoalign.negotiation import Negotiator

    negotiator = Negotiator(Settings(), models=models, store=store)
    task = asyncio.create_task(negotiator.negotiate("q"))
    await asyncio.sleep(0.02)  # mid-negotiation: the row exists and is a complete, valid trace
    rows = await store.list()
    assert len(rows) == 1 and rows[0]["status"] == "running"
    seen.append(await store.get(rows[0]["id"]))
    trace = await task
    assert seen[0] is not None and seen[0].rounds == []
    final = await store.get(trace.id)
    assert final is not None and final.status is TraceStatus.COMPLETED and final.rounds


async def test_cancelled_negotiation_is_stored_as_failed(store: TraceStore) -> None:
    world = World([proposals(("SECRET", 0.9))])
    from psychoalign.config import Settings
    from psychoalign.negotiation import Negotiator

    negotiator = Negotiator(Settings(), models=world.models(latency_s=1.0), store=store)
    task = asyncio.create_task(negotiator.negotiate("q"))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    rows = await store.list()
    assert rows[0]["status"] == "failed"
    stored = await store.get(rows[0]["id"])
    assert stored is not None and stored.response == stored.final.response  # type: ignore[union-attr]
    assert "SECRET" not in stored.response


async def test_crashed_process_leaves_running_row_that_recovery_marks_failed(tmp_path: Path) -> None:
    db = tmp_path / "crash.db"
    script = f"""
import asyncio, os, sys
sys.path.insert(0, {str(Path(__file__).parent.parent)!r})
from tests.scenario import World, proposals
from psychoalign.traces import SQLTraceStore
async def main():
    store = SQLTraceStore("sqlite:///{db}")
    world = World([proposals(("x", 0.9))])
    from psychoalign.config import Settings
    from psychoalign.negotiation import Negotiator
    n = Negotiator(Settings(), models=world.models(latency_s=30), store=store)
    task = asyncio.create_task(n.negotiate("crash me"))
    await asyncio.sleep(0.5)
    os._exit(9)  # the process dies hard, mid-negotiation
asyncio.run(main())
"""
    proc = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 9, proc.stderr
    store = SQLTraceStore(f"sqlite:///{db}")
    rows = await store.list()
    assert [r["status"] for r in rows] == ["running"]
    assert await store.recover_interrupted() == 1
    trace = await store.get(rows[0]["id"])
    assert trace is not None
    assert trace.status is TraceStatus.FAILED
    assert "interrupted" in (trace.error or "")
    assert await store.recover_interrupted() == 0
    await store.close()


def test_table_has_no_nullable_body() -> None:
    assert traces_table.c.body.nullable is False
