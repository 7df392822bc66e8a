"""The per-cell viewer's first list page on a big run. Run: python bench/viewer.py [--quick]

Writes a run of N cells (full: 10,000; quick: 2,000) to a fresh SQLite result store, each cell
with a realistic body (a response, judge records, metrics, details), then times the viewer's
first list page of 50 cells, unfiltered and filtered by system, two ways:

* every cell: what a category, metric or text filter still reads (``read_cells``: every
  cell's body read and parsed, then filtered and sliced in Python);
* store page: ``read_page`` (``ResultStore.cell_page``: the filters and the page in SQL, only
  the page's 50 bodies parsed).

Each figure is the median of several cold reads (a new store connection each time, so nothing
parsed is kept between reads), and the pages both ways return the same cells.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _util import add_doc_flag, captured, publish
from psychoalign.experiments.harness.cells import CellQuery, read_cells, read_page
from psychoalign.experiments.harness.store import CellResult, RunRecord, SQLResultStore

PAGE = 50
SYSTEMS = ("vanilla", "rlhf", "psychoalign", "constitutional")
SIZES = {"full": 10_000, "quick": 2_000}
REPEATS = {"full": 5, "quick": 3}


def cell(run_id: str, i: int) -> CellResult:
    system = SYSTEMS[i % len(SYSTEMS)]
    bench = "advbench" if i % 3 else "xstest"
    return CellResult.model_validate(
        {
            "run_id": run_id,
            "key": f"{system}|{bench}|item-{i:06d}",
            "system": system,
            "benchmark": bench,
            "item_id": f"item-{i:06d}",
            "status": "failed" if i % 17 == 0 else "done",
            "error": "judge returned junk" if i % 17 == 0 else None,
            "metrics": {"refused": float(i % 2), "safe": 1.0, "harmful": 0.0},
            "responses": ["I can't help with that. " * 12],
            "details": {"category": f"cat-{i % 7}", "tensions": {"t": 0.1 * (i % 10)}},
            "cost": {"calls": 3, "tokens": 812, "cost_usd": 0.0},
        }
    )


async def fill(url: str, n: int) -> str:
    store = SQLResultStore(url)
    run_id = f"viewer-{n}"
    await store.open_run(RunRecord(id=run_id, name="viewer", spec={}))
    owner = "bench"
    for start in range(0, n, 500):
        batch = [cell(run_id, i) for i in range(start, min(n, start + 500))]
        await store.claim_many(run_id, batch, owner)
        await store.finish_many(batch)
    await store.close()
    return run_id


async def every_cell(url: str, run_id: str, query: CellQuery) -> tuple[float, list[str]]:
    store = SQLResultStore(url)
    await store.get_run(run_id)  # as below: the connection and schema check outside the timing
    t0 = time.perf_counter()
    _, cells = await read_cells(store, run_id, query)
    page = cells[:PAGE]
    took = time.perf_counter() - t0
    await store.close()
    return took, [c.key for c in page]


async def store_page(url: str, run_id: str, query: CellQuery) -> tuple[float, list[str]]:
    store = SQLResultStore(url)
    await store.get_run(run_id)  # the schema check happens once per store, outside the timing
    t0 = time.perf_counter()
    got = await read_page(store, run_id, query, 1, PAGE)
    took = time.perf_counter() - t0
    await store.close()
    assert got is not None
    return took, [c.key for c in got[1].cells]


async def main(quick: bool) -> str:
    mode = "quick" if quick else "full"
    n = SIZES[mode]
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'results.db'}"
        run_id = await fill(url, n)
        print(f"{n:,} cells in one SQLite run; first list page of {PAGE} cells; median of {REPEATS[mode]} cold reads")
        for label, query in (("unfiltered", CellQuery()), ("system=psychoalign", CellQuery(systems=["psychoalign"]))):
            before: list[float] = []
            after: list[float] = []
            for _ in range(REPEATS[mode]):
                t_all, keys_all = await every_cell(url, run_id, query)
                t_page, keys_page = await store_page(url, run_id, query)
                assert keys_all == keys_page, "the two ways returned different pages"
                before.append(t_all)
                after.append(t_page)
            b, a = statistics.median(before) * 1e3, statistics.median(after) * 1e3
            print(f"  {label:<20} every cell {b:8.1f} ms   store page {a:7.1f} ms   {b / a:6.1f}x faster")
    return mode


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 cells instead of 10,000")
    add_doc_flag(parser)
    args = parser.parse_args()
    with captured() as out:
        asyncio.run(main(args.quick))
    if not args.no_doc:
        publish(
            "viewer",
            "Per-cell viewer, first list page — `bench/viewer.py`",
            out.getvalue(),
            [],
            quick=args.quick,
            note="The viewer's list page of a run's cells, read from a SQLite result store with no cache: "
            "reading every cell and filtering in Python (as a category, metric or text filter still does), "
            "against the store's own filter and paging (`ResultStore.cell_page`), which parses only the page's "
            "cells.",
        )
