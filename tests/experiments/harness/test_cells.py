"""Reading cells back for people (harness/cells.py): the filters ``experiment cells`` and the viewer
share, and one cell by key from every result store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from psychoalign.errors import InputError
from psychoalign.experiments.harness.cells import CellQuery, read_cell, read_cells, read_page
from psychoalign.experiments.harness.store import (
    CellResult,
    InMemoryResultStore,
    ResultStore,
    RunRecord,
    SQLResultStore,
)
from tests.helpers import PG_URL, pg_schema


def cell(key: str, system: str = "vanilla", benchmark: str = "harmbench", **kw: object) -> CellResult:
    return CellResult.model_validate(
        {"run_id": "run-1", "key": key, "system": system, "benchmark": benchmark, "item_id": key, **kw}
    )


CELLS = [
    cell("a", status="done", metrics={"attack_success": 1.0}, details={"category": "cybercrime"}, responses=["Sure"]),
    cell("b", status="done", metrics={"attack_success": 0.0}, details={"category": "harassment"}, responses=["No"]),
    cell("c", system="psychoalign", status="failed", error="judge returned junk"),
    cell("d", system="psychoalign", benchmark="xstest", status="gave_up", error="twice"),
    cell("e", system="psychoalign", benchmark="xstest", status="running"),
]


def keys(query: CellQuery) -> list[str]:
    return [c.key for c in CELLS if query.matches(c)]


def test_each_filter_keeps_only_its_cells() -> None:
    assert keys(CellQuery()) == ["a", "b", "c", "d", "e"]
    assert keys(CellQuery(systems=["psychoalign"])) == ["c", "d", "e"]
    assert keys(CellQuery(benchmarks=["xstest"])) == ["d", "e"]
    assert keys(CellQuery(categories=["cybercrime"])) == ["a"]
    assert keys(CellQuery(statuses=["failed"])) == ["c"]
    assert keys(CellQuery(statuses=["not_scored"])) == ["c", "d"]
    assert keys(CellQuery(statuses=["done", "running"])) == ["a", "b", "e"]
    assert keys(CellQuery(metric="attack_success", metric_min=0.5)) == ["a"]
    assert keys(CellQuery(metric="attack_success", metric_max=0.5)) == ["b"]
    assert keys(CellQuery(metric="attack_success")) == ["a", "b"]  # cells without the metric are left out
    assert keys(CellQuery(text="JUNK")) == ["c"]  # the error, case-insensitively
    assert keys(CellQuery(text="sure")) == ["a"]  # a response
    assert keys(CellQuery(systems=["vanilla"], categories=["harassment"])) == ["b"]  # filters combine


def test_a_bad_filter_is_refused_with_its_reason() -> None:
    with pytest.raises(ValidationError, match="unknown status finished"):
        CellQuery(statuses=["finished"])
    with pytest.raises(ValidationError, match="needs the metric's name"):
        CellQuery(metric_min=0.5)


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
    async with pg_schema("c") as connect_args:
        s = SQLResultStore(PG_URL, connect_args=connect_args)
        yield s
        await s.close()


async def test_read_cells_and_one_cell_by_key(store: ResultStore) -> None:
    await store.open_run(RunRecord(id="run-1", name="demo", spec={}))
    for c in CELLS:
        assert await store.claim("run-1", c, "me")
        await store.finish(c)
    run, chosen = await read_cells(store, "run", CellQuery(systems=["vanilla"]))  # a unique prefix
    assert run.id == "run-1" and [c.key for c in chosen] == ["a", "b"]
    _, one = await read_cell(store, "run-1", "c")
    assert one is not None and one.error == "judge returned junk" and one.status == "failed"
    assert (await read_cell(store, "run-1", "zz"))[1] is None
    with pytest.raises(InputError, match="no run 'nope'"):
        await read_cells(store, "nope")
    with pytest.raises(InputError, match="no run 'nope'"):
        await read_cell(store, "nope", "a")


async def test_the_fingerprint_changes_with_every_claim_and_finish(store: ResultStore) -> None:
    await store.open_run(RunRecord(id="run-1", name="demo", spec={}))
    if isinstance(store, InMemoryResultStore):
        assert await store.fingerprint("run-1") is None  # nothing to save: its cells are in memory
        return
    marks = [await store.fingerprint("run-1")]
    first = cell("a")
    assert await store.claim("run-1", first, "me")
    marks.append(await store.fingerprint("run-1"))
    await store.finish(first.model_copy(update={"status": "failed", "error": "x"}))
    marks.append(await store.fingerprint("run-1"))
    assert await store.claim("run-1", first, "me")  # a failed cell, claimed again
    marks.append(await store.fingerprint("run-1"))
    await store.finish(first.model_copy(update={"status": "done"}))
    marks.append(await store.fingerprint("run-1"))
    assert len(set(marks)) == len(marks), marks
    assert await store.fingerprint("run-1") == marks[-1]  # unchanged while nothing is written


@pytest.mark.parametrize(
    "query",
    [
        CellQuery(),
        CellQuery(systems=["psychoalign"]),
        CellQuery(benchmarks=["xstest"], statuses=["not_scored"]),
        CellQuery(systems=["vanilla", "psychoalign"], statuses=["done", "running"]),
        CellQuery(systems=["nobody"]),
    ],
)
async def test_a_list_page_is_filtered_and_paged_by_the_store_like_the_filter_in_python(
    store: ResultStore, query: CellQuery, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.open_run(RunRecord(id="run-1", name="demo", spec={}))
    for c in CELLS:
        assert await store.claim("run-1", c, "me")
        await store.finish(c)
    if isinstance(store, SQLResultStore):  # the SQL twin reads only the page: never every cell

        async def every_cell(run_id: str) -> list[CellResult]:
            raise AssertionError("a list page read every cell")

        monkeypatch.setattr(store, "cells", every_cell)
    expected = keys(query)
    for page_no in (1, 2, 3):
        got = await read_page(store, "run", query, page_no, 2)  # a unique prefix, pages of two
        assert got is not None
        run, page = got
        assert run.id == "run-1" and [c.key for c in page.cells] == expected[(page_no - 1) * 2 : page_no * 2]
        assert (page.total, page.all) == (len(expected), len(CELLS))
        assert (page.systems, page.benchmarks) == (["psychoalign", "vanilla"], ["harmbench", "xstest"])
    # filters that need a cell's body are not the store's: the caller reads every cell
    assert await read_page(store, "run-1", CellQuery(categories=["cybercrime"]), 1, 2) is None
    assert await read_page(store, "run-1", CellQuery(text="sure"), 1, 2) is None
    with pytest.raises(InputError, match="no run 'nope'"):
        await read_page(store, "nope", CellQuery(), 1, 2)
