"""Leases on claimed cells: a live runner's cells are never taken (its heartbeat renews them); a
stopped runner's are reclaimed by any runner on any host once the lease runs out. Time is a
controlled clock, never waited for."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from psychoalign.experiments.harness.runner import _heartbeat
from psychoalign.experiments.harness.store import (
    CellResult,
    InMemoryResultStore,
    ResultStore,
    RunRecord,
    SQLResultStore,
)
from tests.helpers import PG_URL, pg_schema

ME = f"{socket.gethostname()}:{os.getpid()}"
OTHER = "other-host:4242"  # a runner on another machine: its liveness cannot be checked from here


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path, clock: Clock) -> AsyncIterator[ResultStore]:
    if request.param == "memory":
        yield InMemoryResultStore(lease_s=120, clock=clock)
        return
    if request.param == "sqlite":
        s = SQLResultStore(f"sqlite:///{tmp_path / 'results.db'}", lease_s=120, clock=clock)
        yield s
        await s.close()
        return
    async with pg_schema("lease") as connect_args:
        s = SQLResultStore(PG_URL, lease_s=120, clock=clock, connect_args=connect_args)
        yield s
        await s.close()


def _cell(key: str) -> CellResult:
    return CellResult(run_id="r-1", key=key, system="vanilla", benchmark="hhh", item_id=key)


async def test_expired_lease_is_reclaimed_by_another_host(store: ResultStore, clock: Clock) -> None:
    await store.open_run(RunRecord(id="r-1", name="r", spec={}))
    assert await store.claim("r-1", _cell("a"), OTHER)
    clock.advance(119)
    assert not await store.claim("r-1", _cell("a"), ME)  # lease still valid: the runner may be alive
    clock.advance(2)
    assert await store.claim("r-1", _cell("a"), ME)  # lapsed: its runner stopped
    [cell] = await store.cells("r-1")
    assert (cell.owner, cell.attempts, cell.status) == (ME, 2, "running")
    assert not await store.claim("r-1", _cell("a"), OTHER)  # the new claim carries a fresh lease


async def test_heartbeat_keeps_a_live_runner_s_cells(store: ResultStore, clock: Clock) -> None:
    await store.open_run(RunRecord(id="r-1", name="r", spec={}))
    got = await store.claim_many("r-1", [_cell("a"), _cell("b")], OTHER)
    assert got == {"a": 1, "b": 1}
    assert await store.claim("r-1", _cell("c"), ME)
    for _ in range(5):  # ten minutes of beats every 100 s: never lapses
        clock.advance(100)
        assert await store.heartbeat("r-1", OTHER) == 2
        assert await store.claim_many("r-1", [_cell("a"), _cell("b")], ME) == {}
    # ME did not beat: its cell lapsed meanwhile and another host may take it
    assert await store.claim_many("r-1", [_cell("c")], OTHER) == {"c": 2}
    # OTHER stops beating: its cells lapse, by the batch claim too
    clock.advance(121)
    assert await store.claim_many("r-1", [_cell("a"), _cell("b"), _cell("c")], ME) == {"a": 2, "b": 2, "c": 3}


async def test_finished_cells_hold_no_lease(store: ResultStore, clock: Clock) -> None:
    await store.open_run(RunRecord(id="r-1", name="r", spec={}))
    assert await store.claim("r-1", _cell("a"), OTHER)
    await store.finish(_cell("a").model_copy(update={"status": "done", "owner": OTHER}))
    clock.advance(10_000)
    assert not await store.claim("r-1", _cell("a"), ME)  # done stays done
    assert await store.heartbeat("r-1", OTHER) == 0


async def test_runner_heartbeat_renews_until_cancelled() -> None:
    """The runner's beat task calls heartbeat every third of the lease (synchronised on the calls)."""
    beats: asyncio.Queue[str] = asyncio.Queue()

    class Beating(InMemoryResultStore):
        async def heartbeat(self, run_id: str, owner: str) -> int:
            await beats.put(f"{run_id}/{owner}")
            return 0

    task = asyncio.create_task(_heartbeat(Beating(lease_s=0.003), "r-1", ME))
    assert [await beats.get() for _ in range(3)] == [f"r-1/{ME}"] * 3
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_failed_beat_is_logged_and_retried(caplog: pytest.LogCaptureFixture) -> None:
    calls: asyncio.Queue[int] = asyncio.Queue()

    class Flaky(InMemoryResultStore):
        n = 0

        async def heartbeat(self, run_id: str, owner: str) -> int:
            self.n += 1
            await calls.put(self.n)
            if self.n == 1:
                raise OSError("connection reset")
            return 0

    task = asyncio.create_task(_heartbeat(Flaky(lease_s=0.003), "r-1", ME))
    assert [await calls.get() for _ in range(2)] == [1, 2]
    task.cancel()
    assert "lease heartbeat of run r-1 failed" in caplog.text and "connection reset" in caplog.text
