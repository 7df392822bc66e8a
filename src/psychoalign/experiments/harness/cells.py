"""Reading a run's cells back for people: which cells match a filter, and one cell by its key.

The one path from the result store to ``experiment cells`` (the export) and the per-cell viewer
(``experiment view``, ``/experiments`` under ``psychoalign serve``): both read a run with
:func:`read_cells` and filter with the same :class:`CellQuery`, so a filter means the same in
either place.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ...errors import InputError
from .store import NOT_SCORED, CellFilter, CellPage, CellResult, ResultStore, RunRecord

__all__ = ["STATUSES", "CellQuery", "category_of", "read_cell", "read_cells", "read_page"]

#: ``statuses`` of a query: a stored status, or ``not_scored`` (failed or given up).
STATUSES = ("done", "failed", "gave_up", "running", "not_scored")


class CellQuery(BaseModel):
    """Which cells to show. Unset fields match every cell; lists match any of their values.
    ``metric`` with ``metric_min``/``metric_max`` keeps the cells whose metric lies in the range
    (cells without that metric are left out); ``text`` is a case-insensitive substring of the
    item id, a response or the error."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    systems: list[str] | None = None
    benchmarks: list[str] | None = None
    categories: list[str] | None = None
    statuses: list[str] | None = None
    metric: str | None = Field(None, max_length=200)
    metric_min: float | None = None
    metric_max: float | None = None
    text: str | None = Field(None, max_length=500)

    @field_validator("statuses")
    @classmethod
    def _known(cls, statuses: list[str] | None) -> list[str] | None:
        unknown = sorted(set(statuses or ()) - set(STATUSES))
        if unknown:
            raise ValueError(f"unknown status {', '.join(unknown)}: use {', '.join(STATUSES)}")
        return statuses

    @model_validator(mode="after")
    def _range_of_a_metric(self) -> CellQuery:
        if (self.metric_min is not None or self.metric_max is not None) and not self.metric:
            raise ValueError("a metric range needs the metric's name")
        return self

    def store_filter(self) -> CellFilter | None:
        """The query as the store's :class:`~.store.CellFilter` when it asks only for systems,
        benchmarks and statuses (``not_scored`` expanded); None when it needs the cells' bodies."""
        if self.categories is not None or self.metric or self.text:
            return None
        statuses = None
        if self.statuses is not None:
            statuses = tuple(sorted({x for s in self.statuses for x in (NOT_SCORED if s == "not_scored" else (s,))}))
        return CellFilter(
            systems=None if self.systems is None else tuple(self.systems),
            benchmarks=None if self.benchmarks is None else tuple(self.benchmarks),
            statuses=statuses,
        )

    def matches(self, cell: CellResult) -> bool:
        if self.systems is not None and cell.system not in self.systems:
            return False
        if self.benchmarks is not None and cell.benchmark not in self.benchmarks:
            return False
        if self.categories is not None and category_of(cell) not in self.categories:
            return False
        if self.statuses is not None and not any(_status_is(cell, s) for s in self.statuses):
            return False
        if self.metric:
            value = cell.metrics.get(self.metric)
            if value is None:
                return False
            if self.metric_min is not None and value < self.metric_min:
                return False
            if self.metric_max is not None and value > self.metric_max:
                return False
        if self.text:
            needle = self.text.casefold()
            haystack = (cell.item_id, cell.error or "", *cell.responses)
            if not any(needle in h.casefold() for h in haystack):
                return False
        return True


def _status_is(cell: CellResult, status: str) -> bool:
    return cell.status in NOT_SCORED if status == "not_scored" else cell.status == status


def category_of(cell: CellResult) -> str | None:
    """The item's category as the benchmark recorded it (the literature suites and attacks)."""
    value = cell.details.get("category")
    return value if isinstance(value, str) else None


async def read_cells(
    store: ResultStore, run_id: str, query: CellQuery | None = None
) -> tuple[RunRecord, list[CellResult]]:
    """The run (id or unique prefix) and its cells matching ``query``, in key order; an unknown
    run is an :class:`InputError`."""
    run = await store.get_run(run_id)
    if run is None:
        raise InputError(f"no run '{run_id}' in the store", hint="see `psychoalign experiment status`")
    cells = await store.cells(run.id)
    return run, cells if query is None else [c for c in cells if query.matches(c)]


async def read_cell(store: ResultStore, run_id: str, key: str) -> tuple[RunRecord, CellResult | None]:
    """The run (an unknown one is an :class:`InputError`) and its cell ``key``, or None."""
    run = await store.get_run(run_id)
    if run is None:
        raise InputError(f"no run '{run_id}' in the store", hint="see `psychoalign experiment status`")
    return run, await store.cell(run.id, key)


async def read_page(
    store: ResultStore, run_id: str, query: CellQuery, page: int, size: int
) -> tuple[RunRecord, CellPage] | None:
    """Page ``page`` (from 1) of ``size`` cells matching ``query``, read by the store's own
    filter and paging (only that page's cells are parsed), when the query needs no cell body;
    None when it does (read every cell then). An unknown run is an :class:`InputError`."""
    where = query.store_filter()
    if where is None:
        return None
    run = await store.get_run(run_id)
    if run is None:
        raise InputError(f"no run '{run_id}' in the store", hint="see `psychoalign experiment status`")
    return run, await store.cell_page(run.id, where, (max(page, 1) - 1) * size, size)
