"""Trace stores: SQLite (default) and PostgreSQL (real server), atomic writes, crash recovery."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from psychoalign.models import ChatModel, ChatRequest, ModelSpec, ScriptedBackend
from psychoalign.traces import InMemoryTraceStore, SQLTraceStore, TraceStatus, TraceStore
from psychoalign.traces.store import traces_table
from tests.helpers import PG_URL, pg_schema
from tests.scenario import World, evaluation, proposals


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
    async with pg_schema("t") as connect_args:
        s = SQLTraceStore(PG_URL, connect_args=connect_args)
        yield s
        await s.close()


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


def _gated_drive(world: World, started: asyncio.Event, release: asyncio.Event) -> dict[str, ChatModel]:
    """The world's models, with a DRIVE that signals when it is called and then waits to be released:
    tests synchronise on these events, never on sleeps."""
    models = world.models()

    async def drive(request: ChatRequest) -> Any:
        started.set()
        await release.wait()
        return world.drive(request)

    spec = ModelSpec(backend="scripted", model="drive", schema_retries=0, max_retries=0)
    models["drive"] = ChatModel(spec, ScriptedBackend(spec, fn=drive))
    return models


async def test_running_row_is_complete_then_replaced(store: TraceStore) -> None:
    world = World([proposals(("x", 0.9))], judge=lambda t: evaluation(90, "APPROVED"))
    started, release = asyncio.Event(), asyncio.Event()
    from psychoalign.config import Settings
    from psychoalign.negotiation import Negotiator

    negotiator = Negotiator(Settings(), models=_gated_drive(world, started, release), store=store)
    task = asyncio.create_task(negotiator.negotiate("q"))
    await started.wait()  # mid-negotiation: the row exists and is a complete, valid trace
    rows = await store.list()
    assert len(rows) == 1 and rows[0]["status"] == "running"
    seen = await store.get(rows[0]["id"])
    release.set()
    trace = await task
    assert seen is not None and seen.rounds == [] and seen.status is TraceStatus.RUNNING
    final = await store.get(trace.id)
    assert final is not None and final.status is TraceStatus.COMPLETED and final.rounds


async def test_cancelled_negotiation_is_stored_as_failed(store: TraceStore) -> None:
    world = World([proposals(("SECRET", 0.9))])
    started, release = asyncio.Event(), asyncio.Event()
    from psychoalign.config import Settings
    from psychoalign.negotiation import Negotiator

    negotiator = Negotiator(Settings(), models=_gated_drive(world, started, release), store=store)
    task = asyncio.create_task(negotiator.negotiate("q"))
    await started.wait()
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
sys.path.insert(0, {str(Path(__file__).parents[2])!r})
from tests.scenario import World, proposals
from psychoalign.traces import SQLTraceStore
async def main():
    store = SQLTraceStore("sqlite:///{db}")
    world = World([proposals(("x", 0.9))])
    from psychoalign.config import Settings
    from psychoalign.negotiation import Negotiator
    from psychoalign.models import ChatModel, ModelSpec, ScriptedBackend
    models = world.models()
    spec = ModelSpec(backend="scripted", model="drive", schema_retries=0, max_retries=0)
    # The process dies hard when the DRIVE is first called: mid-negotiation, row written.
    models["drive"] = ChatModel(spec, ScriptedBackend(spec, fn=lambda request: os._exit(9)))
    n = Negotiator(Settings(), models=models, store=store)
    await n.negotiate("crash me")
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


class _CountingTraces(dict[str, Any]):
    """The in-memory store's trace dict, counting the traces a lookup reads; a full scan fails."""

    reads = 0

    def __getitem__(self, key: str) -> Any:
        self.reads += 1
        return super().__getitem__(key)

    def values(self) -> Any:
        raise AssertionError("the conversation lookup scanned the whole store")

    def items(self) -> Any:
        raise AssertionError("the conversation lookup scanned the whole store")


async def _one_conversation(store: TraceStore, n: int) -> tuple[list[str], list[str]]:
    """``n`` identical turns filed under the same keys (what repeated identical requests from one
    key make), stored as clones of one real trace; returns the keys and the ids, oldest first."""
    from datetime import timedelta

    from psychoalign.negotiation.track import conversation_ref

    ref = conversation_ref("bench", ["the same request"])
    first = (
        await World([proposals(("Fine.", 0.9))]).negotiator(store=store).negotiate("the same request", conversation=ref)
    )
    ids = [first.id]
    for i in range(1, n):
        clone = first.model_copy(update={"id": f"{i:032x}", "created_at": first.created_at + timedelta(seconds=i)})
        await store.finish(clone)
        ids.append(clone.id)
    return list(ref.look_up), ids


async def test_conversation_lookup_work_does_not_grow_with_the_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: each lookup scanned every stored trace. Now it reads (and copies) only the
    traces it returns, however many the store and the conversation hold."""
    from psychoalign.traces import Trace

    store = InMemoryTraceStore()
    keys, ids = await _one_conversation(store, 400)
    counting = _CountingTraces(store._traces)
    monkeypatch.setattr(store, "_traces", counting)
    copies = 0
    real_copy = Trace.model_copy

    def counted_copy(self: Trace, *a: Any, **k: Any) -> Trace:
        nonlocal copies
        copies += 1
        return real_copy(self, *a, **k)

    monkeypatch.setattr(Trace, "model_copy", counted_copy)
    for limit in (1, 5, 50):
        counting.reads, copies = 0, 0
        got = await store.conversation(keys, limit=limit, exclude=ids[-1])
        assert [t.id for t in got] == ids[-limit - 1 : -1]  # the newest, oldest first, without exclude
        assert counting.reads == limit and copies == limit


async def test_sql_conversation_lookup_reads_the_keys_index(tmp_path: Path) -> None:
    """The SQL twin: each key's newest rows come from the (key, created_at) index, never a scan
    of the key table (SQLite's plan; PostgreSQL has the same index from the migration)."""
    from sqlalchemy import text
    from sqlalchemy.dialects import sqlite

    from psychoalign.traces.store import conversation_query

    store = SQLTraceStore(f"sqlite:///{tmp_path / 'traces.db'}")
    keys, ids = await _one_conversation(store, 60)
    got = await store.conversation(keys, limit=5, exclude=ids[-1])
    assert [t.id for t in got] == ids[-6:-1]
    query = conversation_query(keys, limit=5, exclude=ids[-1])
    compiled = query.compile(dialect=sqlite.dialect(), compile_kwargs={"literal_binds": True})
    async with store.engine.connect() as conn:
        plan = " | ".join(str(row[-1]) for row in await conn.execute(text(f"EXPLAIN QUERY PLAN {compiled}")))
    await store.close()
    assert "ix_psychoalign_trace_keys_key_created_at" in plan, plan
    assert "SCAN psychoalign_trace_keys" not in plan, plan


async def test_memory_store_keeps_its_own_copy_of_each_write() -> None:
    """The in-memory store copies on write (start, finish) and on read: a caller that goes on
    changing its trace, or one it read back, never changes what is stored. A trace that does not
    validate as it stands (a field set outside its constraints without validation) is stored too."""
    from psychoalign.traces import Trace
    from psychoalign.traces.model import NegotiationParams

    store = InMemoryTraceStore()
    trace = Trace(request="r", params=NegotiationParams(), metadata={"a": {"b": [1]}})
    await store.start(trace)
    trace.metadata["a"]["b"].append(2)
    trace.status = TraceStatus.COMPLETED
    running = await store.get(trace.id)
    assert running is not None and running.status is TraceStatus.RUNNING and running.metadata == {"a": {"b": [1]}}

    trace.params = trace.params.model_copy(update={"cross_turn_hot": 2.0})  # outside le=1.0, not validated
    await store.finish(trace)
    trace.metadata["a"]["b"].append(3)
    stored = await store.get(trace.id)
    assert stored is not None and stored.status is TraceStatus.COMPLETED
    assert stored.params.cross_turn_hot == 2.0 and stored.metadata == {"a": {"b": [1, 2]}}
    stored.metadata["a"]["b"].clear()
    again = await store.get(trace.id)
    assert again is not None and again.metadata == {"a": {"b": [1, 2]}}
