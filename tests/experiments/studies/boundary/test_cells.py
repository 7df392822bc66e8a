"""The boundary study and H1 as cells of the experiment harness: the same numbers as negotiating
directly, a resume that negotiates nothing already done, shards that split the work, provenance."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from psychoalign.config import Settings
from psychoalign.experiments import run_experiment
from psychoalign.experiments.harness.store import InMemoryResultStore
from psychoalign.experiments.studies.boundary.cells import outcomes_from_cells, study_spec
from psychoalign.experiments.studies.boundary.corpus import Corpus, load_corpus
from psychoalign.experiments.studies.boundary.retest import sampled_settings
from psychoalign.experiments.studies.boundary.run import boundary_report, run_boundary
from psychoalign.experiments.studies.boundary.synthetic import SyntheticWorld, synthetic_models, synthetic_negotiator
from psychoalign.models import ChatModel, ChatRequest, ScriptedBackend

N = 24
MARK = re.compile(r"\[syn:(\d+)\]")


def _world(tmp_path: Path) -> tuple[SyntheticWorld, Corpus, Path]:
    world = SyntheticWorld(n_items=N, coupling=1.0, seed=5)
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(json.dumps(i.model_dump(exclude={"note"})) for i in world.items()) + "\n")
    return world, load_corpus(path), path


def _spec(world: SyntheticWorld, path: Path, repeats: int = 2) -> Any:
    roles = [
        {role: {"seed": 1 + r, "temperature": 1.0} for role in ("drive", "evaluator", "mediator")}
        for r in range(repeats)
    ]
    return study_spec(
        "boundary",
        {"name": "boundary", "options": {"corpus": str(path)}},
        repeats=roles,
        negotiation={"k": 3, "n_proposals": world.n_proposals},
        framework="general",
        concurrency=4,
    )


def _counting(world: SyntheticWorld, seen: list[tuple[int | None, str]]) -> dict[str, ChatModel]:
    """The synthetic agents, with every negotiation counted by its first DRIVE call."""
    models = synthetic_models(world, Settings())
    spec = models["drive"].spec

    def fn(request: ChatRequest) -> Any:
        seen.append((request.seed, request.messages[-1].content))
        return world.drive(request)

    models["drive"] = ChatModel(spec, ScriptedBackend(spec, fn=fn))
    return models


async def test_cells_give_the_numbers_of_the_direct_path_and_resume_without_recomputing(tmp_path: Path) -> None:
    world, corpus, path = _world(tmp_path)
    # the direct path: one Negotiator per repeat, as before the study moved into the store
    runs = sampled_settings(Settings(), repeats=2, temperature=1.0, base_seed=1)
    direct = await run_boundary(corpus, [synthetic_negotiator(world, s) for s in runs], n_boot=300, concurrency=4)

    spec = _spec(world, path)
    store = InMemoryResultStore()
    settings = Settings(home=str(tmp_path / "home"))
    seen: list[tuple[int | None, str]] = []
    models = _counting(world, seen)
    first = await run_experiment(spec, settings, store=store, models=models, max_cells=30)  # killed after 30 cells
    assert first.done == 30 and seen
    done_first = {(c.system, c.item_id) for c in await store.cells(first.run_id) if c.status == "done"}
    seen.clear()
    second = await run_experiment(spec, settings, store=store, models=models)
    assert (second.skipped_done, second.ran) == (30, 2 * N - 30)
    # the requests negotiated on resume are exactly those with a cell the first run had not done
    asked = {f"syn-{int(m.group(1)):04d}" for _, text in seen if (m := MARK.search(text))}
    pending = {i.id for i in corpus.items if {("run-0", i.id), ("run-1", i.id)} - done_first}
    assert asked == pending and len(pending) < N
    assert all(c.attempts == 1 for c in await store.cells(second.run_id))
    seen.clear()
    # `experiment run boundary --concurrency 1`: the same run (concurrency is not its identity)
    third = await run_experiment(spec.model_copy(update={"concurrency": 1}), settings, store=store, models=models)
    assert third.run_id == second.run_id
    assert (third.ran, third.skipped_done) == (0, 2 * N) and seen == []  # nothing negotiated again

    cells = await store.cells(second.run_id)
    via_cells = boundary_report(corpus, outcomes_from_cells(spec, corpus.items, cells), n_boot=300)
    for key in ("overall", "per_domain", "per_category", "heatmap", "kruskal_domains", "definitions", "counts"):
        assert via_cells[key] == direct[key], key
    assert via_cells["retest"]["definitions"] == direct["retest"]["definitions"]
    record = await store.get_run(second.run_id)
    assert record is not None and record.meta["identity"]  # provenance like any run


async def test_shards_split_the_study_and_together_make_it_whole(tmp_path: Path) -> None:
    world, corpus, path = _world(tmp_path)
    spec = _spec(world, path, repeats=1)
    store = InMemoryResultStore()
    settings = Settings(home=str(tmp_path / "home"))
    models = synthetic_models(world, Settings())
    a = await run_experiment(spec, settings, store=store, models=models, shard=(0, 2))
    partial = outcomes_from_cells(spec, corpus.items, await store.cells(a.run_id))[0]
    waiting = [o for o in partial if o.status == "failed"]
    assert 0 < len(waiting) < N and all("not run yet" in (o.error or "") for o in waiting)
    b = await run_experiment(spec, settings, store=store, models=models, shard=(1, 2))
    assert a.ran + b.ran == N and a.ran > 0 and b.ran > 0
    whole = outcomes_from_cells(spec, corpus.items, await store.cells(b.run_id))[0]
    assert all(o.status == "completed" for o in whole)


async def test_a_system_that_is_not_a_negotiation_fails_its_cells_with_the_reason(tmp_path: Path) -> None:
    from tests.experiments.helpers import scripted

    world, _, path = _world(tmp_path)
    spec = _spec(world, path, repeats=1).model_copy(update={"systems": (_vanilla(),)})
    store = InMemoryResultStore()
    summary = await run_experiment(
        spec, Settings(home=str(tmp_path / "h")), store=store, models={"chat": scripted("c", lambda r: "Hi.")}
    )
    assert summary.failed == N
    cell = (await store.cells(summary.run_id))[0]
    assert "not a negotiation" in (cell.error or "")


def _vanilla() -> Any:
    from psychoalign.experiments.harness.systems import SystemSpec

    return SystemSpec(name="run-0", kind="vanilla")


@pytest.mark.parametrize("bad", [{"corpus": "boundary", "shots": 3}])
def test_unknown_study_option_is_one_line(bad: dict[str, Any]) -> None:
    from psychoalign.errors import ConfigError
    from psychoalign.experiments.harness.registry import build_benchmark, default_registry

    with pytest.raises(ConfigError, match="option"):
        build_benchmark("boundary", bad, default_registry().benchmarks)


@pytest.mark.postgres
async def test_two_runners_share_the_study_on_postgresql_and_negotiate_each_cell_once(tmp_path: Path) -> None:
    """Two shards at once on one PostgreSQL store: every (repeat, request) negotiated once, and the
    report from the store equals the direct path's."""
    import asyncio

    from psychoalign.experiments.harness.store import SQLResultStore
    from tests.helpers import PG_URL, pg_schema

    world, corpus, path = _world(tmp_path)
    runs = sampled_settings(Settings(), repeats=2, temperature=1.0, base_seed=1)
    direct = await run_boundary(corpus, [synthetic_negotiator(world, s) for s in runs], n_boot=200, concurrency=4)
    spec = _spec(world, path)
    settings = Settings(home=str(tmp_path / "home"))
    async with pg_schema("b") as connect_args:
        stores = [SQLResultStore(PG_URL, connect_args=connect_args) for _ in range(2)]
        try:
            summaries = await asyncio.gather(
                *(
                    run_experiment(
                        spec, settings, store=stores[i], models=synthetic_models(world, Settings()), shard=(i, 2)
                    )
                    for i in range(2)
                )
            )
            assert sum(s.ran for s in summaries) == 2 * N and all(s.ran > 0 for s in summaries)
            cells = await stores[0].cells(summaries[0].run_id)
            assert len(cells) == 2 * N and all(c.status == "done" and c.attempts == 1 for c in cells)
            report = boundary_report(corpus, outcomes_from_cells(spec, corpus.items, cells), n_boot=200)
            assert report["per_domain"] == direct["per_domain"] and report["retest"] == direct["retest"]
        finally:
            for s in stores:
                await s.close()
