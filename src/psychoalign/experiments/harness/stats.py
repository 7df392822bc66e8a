"""Statistics shared by the reports: 95 % intervals for a binomial proportion (Wilson) and for a
share pooled over rows that repeat items (:mod:`psychoalign.intervals`, where they live so that
the judges and STAR's analysis use the same ones), and for a mean (a seeded percentile bootstrap,
so reports are reproducible; none on fewer than :data:`MIN_BOOTSTRAP_N` values, where it covers
far less than 95 %)."""

from __future__ import annotations

import math

import numpy as np

from ...intervals import MIN_CLUSTERS as MIN_CLUSTERS
from ...intervals import Z95 as Z95
from ...intervals import bell_mccaffrey_df as bell_mccaffrey_df
from ...intervals import clustered_wilson_ci as clustered_wilson_ci
from ...intervals import repeated_rows_ci as repeated_rows_ci
from ...intervals import wilson_ci as wilson_ci


def bootstrap_ci(values: list[float], seed: int, resamples: int = 2000) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (seeded, so reports are reproducible)."""
    if not values:
        return (math.nan, math.nan)
    arr = np.asarray(values, dtype=float)
    if np.all(arr == arr[0]):
        return (float(arr[0]), float(arr[0]))
    rng = np.random.default_rng(seed)
    means = arr[rng.integers(0, len(arr), size=(resamples, len(arr)))].mean(axis=1)
    return (float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5)))


#: Fewer values than this: a mean gets no bootstrap interval. The percentile bootstrap's "95 %"
#: interval holds the true mean in about half of datasets of two values and three in four of three
#: (tests/experiments/harness/test_stats.py measures it); Wilson intervals for shares stay valid.
MIN_BOOTSTRAP_N = 10


def mean_interval(values: list[float], seed: int) -> tuple[float | None, float | None, str | None]:
    """The bootstrap interval of a mean as a report shows it: (low, high, None), or (None, None,
    why not) on one value, on values that are all the same, or on fewer than MIN_BOOTSTRAP_N."""
    if len(values) < 2:
        return None, None, "one item: no interval" if values else "no items"
    if all(v == values[0] for v in values):
        return None, None, "every item scored the same"
    if len(values) < MIN_BOOTSTRAP_N:
        return None, None, (f"fewer than {MIN_BOOTSTRAP_N} items: a bootstrap interval would cover far less than 95 %")
    lo, hi = bootstrap_ci(values, seed)
    return lo, hi, None
