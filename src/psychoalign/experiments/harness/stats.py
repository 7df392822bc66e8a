"""Statistics shared by the reports: 95 % intervals for a binomial proportion (Wilson) and for a mean
(a seeded percentile bootstrap, so reports are reproducible; none on fewer than
:data:`MIN_BOOTSTRAP_N` values, where it covers far less than 95 %)."""

from __future__ import annotations

import math

import numpy as np

Z95 = 1.959963984540054


def wilson_ci(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (Wilson 1927)."""
    if n == 0:
        return (math.nan, math.nan)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


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
