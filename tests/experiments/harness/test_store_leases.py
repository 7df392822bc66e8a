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
from typing import Any

import pytest

from psychoalign.config import Settings
from psychoalign.experiments import ExperimentSpec, run_experiment
from psychoalign.experiments.harness.registry import Registry
from psychoalign.experiments.harness.runner import _heartbeat, plan_cells
from psychoalign.experiments.harness.store import (
    CellResult,
    InMemoryResultStore,
    ResultStore,
    RunRecord,
    SQLResultStore,
)
from psychoalign.models import ChatModel, ModelSpec, ScriptedBackend
from tests.conftest import SHARED_DATA
from tests.helpers import PG_URL, pg_schema

needs_xstest = pytest.mark.needs_data("xstest")
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


async def test_release_gives_back_unstarted_claims_only(store: ResultStore, clock: Clock) -> None:
    """A stopped run's unstarted claims: a first claim disappears, a retry is claimable at once by
    anyone; another owner's claim and a finished cell are left alone."""
    await store.open_run(RunRecord(id="r-1", name="r", spec={}))
    assert await store.claim_many("r-1", [_cell(k) for k in "abcd"], ME) == dict.fromkeys("abcd", 1)
    await store.finish(_cell("a").model_copy(update={"status": "failed", "owner": ME, "error": "x"}))
    assert await store.claim("r-1", _cell("a"), ME)  # a retry: attempts 2
    await store.finish(_cell("d").model_copy(update={"status": "done", "owner": ME}))
    assert await store.claim("r-1", _cell("e"), OTHER)
    assert await store.release_many("r-1", ["a", "b", "d", "e"], ME) == 2
    got = {c.key: (c.status, c.owner, c.attempts) for c in await store.cells("r-1")}
    assert got == {
        "a": ("running", ME, 2), "c": ("running", ME, 1), "d": ("done", ME, 1), "e": ("running", OTHER, 1)
    }  # fmt: skip
    assert await store.claim("r-1", _cell("a"), OTHER)  # its lease ended: no wait
    assert await store.claim("r-1", _cell("b"), OTHER)  # as if never claimed
    assert [c.attempts for c in await store.cells("r-1") if c.key in "ab"] == [3, 1]
    assert await store.release_many("r-1", [], ME) == 0


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


class Following(InMemoryResultStore):
    """Knows when the runner has claimed its first batch, i.e. is following the others' cells."""

    following = False

    async def claim_many(self, *args: Any, **kw: Any) -> dict[str, int]:
        got = await super().claim_many(*args, **kw)
        self.following = True
        return got


async def _held_run(store: ResultStore, tmp_path: Path) -> tuple[ExperimentSpec, str, Settings]:
    """A 4-cell XSTest run whose first cell another host holds before this runner starts."""
    spec = ExperimentSpec.model_validate({"name": "follow", "systems": ["vanilla"], "benchmarks": ["xstest"], "n": 2})
    cells, _ = plan_cells(spec, SHARED_DATA, Registry())
    key = cells[0].key
    settings = Settings(home=str(tmp_path / "home"), experiments={"data_dir": str(SHARED_DATA)})
    # The run is opened as a runner opens it (with its identity), and no cell runs yet.
    await run_experiment(spec, settings, store=store, models=_chat(), registry=Registry(), max_cells=0)
    held = CellResult(run_id=spec.run_id(), key=key, system="vanilla", benchmark="xstest", item_id=cells[0].item.id)
    assert await store.claim(spec.run_id(), held, OTHER)
    return spec, key, settings


def _chat() -> dict[str, ChatModel]:
    mspec = ModelSpec(backend="scripted", model="chat")
    return {"chat": ChatModel(mspec, ScriptedBackend(mspec, replies=["I'm sorry, I can't."], cycle=True))}


@needs_xstest
async def test_follow_finishes_a_dead_runner_s_cell(tmp_path: Path) -> None:
    clock = Clock()
    # without --follow the held cell is left to its holder
    store = InMemoryResultStore(lease_s=120, clock=clock)
    spec, key, settings = await _held_run(store, tmp_path)
    summary = await run_experiment(spec, settings, store=store, models=_chat(), registry=Registry())
    assert (summary.ran, summary.busy_elsewhere) == (3, 1)

    # with it, the runner waits; the holder is dead, so its lease lapses (an hour passes once it follows)
    following = Following(lease_s=0.003, clock=lambda: clock.now + timedelta(hours=1 if following.following else 0))
    spec, key, settings = await _held_run(following, tmp_path)
    summary = await run_experiment(spec, settings, store=following, models=_chat(), registry=Registry(), follow=True)
    assert (summary.ran, summary.done, summary.busy_elsewhere) == (4, 4, 0)
    cells = {c.key: c for c in await following.cells(spec.run_id())}
    assert cells[key].status == "done" and cells[key].attempts == 2 and cells[key].owner != OTHER


@needs_xstest
async def test_follow_never_takes_a_live_runner_s_cell(tmp_path: Path) -> None:
    class LiveOther(Following):
        """The other runner finishes its cell when this one first looks (its lease never lapses)."""

        async def cells(self, run_id: str) -> list[CellResult]:
            held = next((c for c in await super().cells(run_id) if c.owner == OTHER and c.status == "running"), None)
            if held is not None and self.following:
                await self.finish(held.model_copy(update={"status": "done", "metrics": {"over_refusal": 0.0}}))
            return await super().cells(run_id)

    store = LiveOther(lease_s=0.003, clock=Clock())  # a still clock: the other's lease never lapses
    spec, key, settings = await _held_run(store, tmp_path)
    summary = await run_experiment(spec, settings, store=store, models=_chat(), registry=Registry(), follow=True)
    assert (summary.ran, summary.skipped_done, summary.busy_elsewhere) == (3, 1, 0)
    cells = {c.key: c for c in await store.cells(spec.run_id())}
    assert cells[key].owner == OTHER and cells[key].attempts == 1  # run once, by its own runner
