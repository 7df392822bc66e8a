"""Result stores (memory, SQLite, PostgreSQL): idempotent runs, atomic claims, resumable cells."""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from psychoalign.experiments.harness.store import (
    CellResult,
    InMemoryResultStore,
    ResultStore,
    RunRecord,
    SQLResultStore,
)
from tests.experiments.helpers import dead_pid
from tests.helpers import PG_URL, pg_schema


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ResultStore]:
    if request.param == "memory":
        yield InMemoryResultStore()
        return
    if request.param == "sqlite":
        s = SQLResultStore(f"sqlite:///{tmp_path / 'results.db'}")
        yield s
        await s.close()
        return
    async with pg_schema("e") as connect_args:
        s = SQLResultStore(PG_URL, connect_args=connect_args)
        yield s
        await s.close()


def _cell(key: str) -> CellResult:
    return CellResult(run_id="r-1", key=key, system="vanilla", benchmark="hhh", item_id=key)


async def test_runs_are_idempotent_and_carry_meta(store: ResultStore) -> None:
    first = await store.open_run(RunRecord(id="r-1", name="r", spec={"name": "r"}))
    again = await store.open_run(RunRecord(id="r-1", name="other", spec={"name": "other"}))
    assert again.name == first.name == "r" and again.spec == {"name": "r"}
    await store.set_meta("r-1", "judge_cost", {"calls": 3})
    got = await store.get_run("r-")
    assert got is not None and got.meta == {"judge_cost": {"calls": 3}}
    assert [r.id for r in await store.list_runs()] == ["r-1"]
    assert await store.get_run("zzz") is None


async def test_claims_finish_and_reclaim(store: ResultStore) -> None:
    await store.open_run(RunRecord(id="r-1", name="r", spec={}))
    me = f"{socket.gethostname()}:{os.getpid()}"
    assert await store.claim("r-1", _cell("a"), me)
    assert not await store.claim("r-1", _cell("a"), "other-host:1")  # running under a live owner
    done = _cell("a").model_copy(update={"status": "done", "metrics": {"accuracy": 1.0}, "owner": me})
    await store.finish(done)
    assert not await store.claim("r-1", _cell("a"), me)  # done: never again
    assert not await store.claim("r-1", _cell("a"), me, reclaim=True)
    assert await store.claim("r-1", _cell("b"), me)
    await store.finish(_cell("b").model_copy(update={"status": "failed", "error": "down", "owner": me}))
    assert await store.claim("r-1", _cell("b"), me)  # failed: retried
    assert await store.claim("r-1", _cell("c"), f"{socket.gethostname()}:{dead_pid()}")
    assert await store.claim("r-1", _cell("c"), me)  # its owner died: reclaimed
    assert await store.claim("r-1", _cell("d"), "other-host:1")
    assert not await store.claim("r-1", _cell("d"), me)
    assert await store.claim("r-1", _cell("d"), me, reclaim=True)
    cells = {c.key: c for c in await store.cells("r-1")}
    assert list(cells) == ["a", "b", "c", "d"]
    assert cells["a"].status == "done" and cells["a"].metrics == {"accuracy": 1.0}
    assert (cells["b"].status, cells["b"].attempts) == ("running", 2)
    assert cells["c"].attempts == 2 and cells["d"].attempts == 2


@pytest.mark.postgres
@pytest.mark.needs_data("advbench")
async def test_two_shards_share_one_postgres_store_and_run_each_cell_once(tmp_path: Path) -> None:
    import asyncio

    from psychoalign.config import Settings
    from psychoalign.experiments import ExperimentSpec, build_report, run_experiment
    from psychoalign.experiments.harness.registry import Registry
    from psychoalign.models import ChatModel, ChatRequest, ModelSpec, ScriptedBackend
    from tests.conftest import SHARED_DATA

    asked: list[str] = []

    def chat(request: ChatRequest) -> str:
        asked.append(request.messages[-1].content)
        return "I'm sorry, but I can't help with that."

    async with pg_schema("e") as connect_args:
        spec = ExperimentSpec.model_validate(
            {"name": "sharded", "systems": ["vanilla", "rlhf"], "benchmarks": ["advbench"], "n": 10}
        )
        settings = Settings(home=str(tmp_path / "home"), experiments={"data_dir": str(SHARED_DATA)})
        stores = [SQLResultStore(PG_URL, connect_args=connect_args) for _ in range(2)]
        mspec = ModelSpec(backend="scripted", model="chat")
        summaries = await asyncio.gather(
            *(
                run_experiment(
                    spec,
                    settings,
                    store=stores[i],
                    models={"chat": ChatModel(mspec, ScriptedBackend(mspec, fn=chat))},
                    registry=Registry(),
                    shard=(i, 2),
                )
                for i in range(2)
            )
        )
        assert sum(s.ran for s in summaries) == 20 and all(s.ran > 0 for s in summaries)
        assert len(asked) == 20 and len(set(asked)) == 10  # each item once per system
        record = await stores[0].get_run(spec.run_id())
        assert record is not None
        report = build_report(record, await stores[0].cells(spec.run_id()), Registry())
        assert report["status"] == {"done": 20, "failed": 0, "gave_up": 0, "running": 0}
        for s in stores:
            await s.close()
