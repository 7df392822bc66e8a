"""Scores per category: every benchmark that sets ``by_category = True`` and whose items carry
``details["category"]`` (the literature suites: HarmBench's semantic categories, StrongREJECT's
and JBB's categories, and the adaptive attacks on them) gets one row per
(system, benchmark, metric, category), with the same 95 % intervals as the main table (Wilson for
binary metrics, a seeded bootstrap for graded ones). Failed cells are counted, never scored.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from .benchmark import Benchmark
from .stats import mean_interval, wilson_ci
from .store import CellResult

__all__ = ["category_results"]


def _r(x: float | None) -> float | None:
    return None if x is None or x != x else round(float(x), 3)  # NaN (no data) is None


def category_results(
    systems: Sequence[str], benches: Mapping[str, Benchmark], cells: Sequence[CellResult], seed: int
) -> list[dict[str, Any]]:
    """Rows ``{system, benchmark, metric, category, mean, ci_low, ci_high, n, successes, failed, ci_method}``
    in system, benchmark, metric and category order; benchmarks without categories give none."""
    done: dict[tuple[str, str, str], list[CellResult]] = defaultdict(list)
    failed: dict[tuple[str, str, str], int] = defaultdict(int)
    for c in cells:
        category = c.details.get("category")
        if not isinstance(category, str):
            continue
        key = (c.system, c.benchmark, category)
        if c.status == "done":
            done[key].append(c)
        elif c.status == "failed":
            failed[key] += 1
    rows: list[dict[str, Any]] = []
    for system in systems:
        for name, bench in benches.items():
            if not getattr(bench, "by_category", False):
                continue
            categories = sorted({k[2] for k in (*done, *failed) if k[:2] == (system, name)})
            for metric in bench.metrics:
                for category in categories:
                    values = [c.metrics[metric.key] for c in done[(system, name, category)] if metric.key in c.metrics]
                    if not values:
                        continue
                    n = len(values)
                    lo: float | None
                    hi: float | None
                    method: str | None
                    note: str | None = None
                    if metric.binary:
                        successes = round(sum(values))
                        lo, hi = wilson_ci(successes, n)
                        method = "wilson"
                    else:
                        successes = None
                        salt = f"{seed}:{system}:{name}:{metric.key}:{category}"
                        lo, hi, note = mean_interval(values, int(hashlib.sha256(salt.encode()).hexdigest()[:8], 16))
                        method = "bootstrap" if note is None else None
                    rows.append(
                        {
                            "system": system,
                            "benchmark": name,
                            "metric": metric.key,
                            "title": metric.title,
                            "category": category,
                            "mean": _r(sum(values) / n),
                            "ci_low": _r(lo),
                            "ci_high": _r(hi),
                            "n": n,
                            "successes": successes,
                            "ci_method": method,
                            "failed": failed[(system, name, category)],
                        }
                    )
                    if note is not None:
                        rows[-1]["ci_note"] = note
    return rows
