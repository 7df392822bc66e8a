"""Repeats (Inspect's epochs): each item runs ``repeats`` times as separate cells, and the report
reduces an item's repeats to one result before anything is aggregated.

A repeat is a cell of its own (key ``system|benchmark|item#rK``), so it is claimed, leased,
sharded and resumed like any other; the item's id is the same in every repeat, which is what the
reduction groups by. Reducers:

* ``mean``: each metric's mean over the repeats. A binary metric's per-item means are no longer
  0/1; its Wilson interval over items is then conservative (a per-item mean varies less than a
  Bernoulli draw with the same mean).
* ``majority``: the value more than half the repeats gave (odd repeats only, checked by the spec);
  for a graded metric where no value has a majority, the median.

An item is scored only when every one of its repeats is done: one failed repeat fails the item
(with the repeat's reason), and an item with repeats still running is reported running. Reducing
over the repeats that happened to finish would bias the score toward the easy ones.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from .store import NOT_SCORED, CellResult

#: Separator of an item's id and its repeat number in a cell key.
REPEAT_MARK = "#r"


def repeat_suffix(repeat: int, repeats: int) -> str:
    """What a cell key carries after the item id: nothing when items run once (keys as before)."""
    return f"{REPEAT_MARK}{repeat}" if repeats > 1 else ""


def reduce_value(values: Sequence[float], reducer: str) -> float:
    """One item's metric from its repeats' values."""
    if reducer == "mean":
        return sum(values) / len(values)
    if reducer == "majority":
        value, count = Counter(values).most_common(1)[0]
        return value if count * 2 > len(values) else float(statistics.median(values))
    raise ValueError(f"unknown reducer {reducer!r}")


def _mean_cost(group: Sequence[CellResult]) -> dict[str, float]:
    keys = sorted({k for c in group for k in c.cost})
    return {k: sum(float(c.cost.get(k, 0.0)) for c in group) / len(group) for k in keys}


def _reduce_item(group: list[CellResult], repeats: int, reducer: str) -> CellResult:
    """One item's repeats as one cell: its first repeat's identity, the reduced metrics, the
    repeats' responses, judges and traces in order, and the mean cost and wall time per repeat."""
    group.sort(key=lambda c: int(c.key.rsplit(REPEAT_MARK, 1)[-1]))
    first = group[0]
    base: dict[str, Any] = {"run_id": first.run_id, "key": first.key.rsplit(REPEAT_MARK, 1)[0], "system": first.system}
    base |= {"benchmark": first.benchmark, "item_id": first.item_id, "owner": first.owner}
    base |= {"attempts": max(c.attempts for c in group), "started_at": min(c.started_at for c in group)}
    failed = [c for c in group if c.status in NOT_SCORED]
    details: dict[str, Any] = {"repeats": len(group), "reducer": reducer}
    if failed:
        status = "gave_up" if all(c.status == "gave_up" for c in failed) else "failed"
        error = "; ".join(f"repeat {c.key.rsplit(REPEAT_MARK, 1)[-1]}: {c.error}" for c in failed)
        return CellResult(**base, status=status, error=error, details=details)
    if len(group) < repeats or any(c.status != "done" for c in group):
        return CellResult(**base, status="running", details=details)
    metrics = {
        key: reduce_value([c.metrics[key] for c in group], reducer)
        for key in sorted(set.intersection(*(set(c.metrics) for c in group)))
    }
    # what the report's breakdowns read (category, judge, ...) is the same in every repeat
    details = {**first.details, **details, "values": {k: [c.metrics[k] for c in group] for k in metrics}}
    finished = [c.finished_at for c in group if c.finished_at is not None]
    return CellResult(
        **base,
        status="done",
        metrics=metrics,
        responses=[r for c in group for r in c.responses],
        judges=[j for c in group for j in c.judges],
        trace_ids=[t for c in group for t in c.trace_ids],
        details=details,
        cost=_mean_cost(group),
        wall_s=sum(c.wall_s for c in group) / len(group),
        finished_at=max(finished) if finished else None,
    )


def reduce_repeats(cells: list[CellResult], repeats: int, reducer: str) -> list[CellResult]:
    """The cells of a run with ``repeats`` > 1 as one cell per (system, benchmark, item); the
    cells unchanged when items ran once."""
    if repeats <= 1:
        return cells
    groups: dict[tuple[str, str, str], list[CellResult]] = defaultdict(list)
    for c in cells:
        groups[(c.system, c.benchmark, c.item_id)].append(c)
    return [_reduce_item(group, repeats, reducer) for group in groups.values()]


def repeats_section(repeats: int, reducer: str, cells: int) -> dict[str, Any]:
    """What the report says about repeats: N, the reducer, and the cells the items came from."""
    return {"n": repeats, "reducer": reducer, "cells": cells}
