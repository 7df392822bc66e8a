"""95 % intervals for a share, below every layer that reports one: Wilson's for a binomial
proportion, and for a share pooled over rows that repeat a cluster (an item under several
configurations, a prompt answered by several models, one arbitrator's many decisions) Wilson's on
the effective number of rows, from the cluster-robust variance with a small-sample correction.
The judges, STAR's analysis and the experiments' reports all draw their intervals from here."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Sequence

import numpy as np

Z95 = 1.959963984540054


def wilson_ci(successes: float, n: float, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (Wilson 1927). ``n`` may be an effective
    number of rows (:func:`clustered_wilson_ci`), ``successes`` then the share times it."""
    if n == 0:
        return (math.nan, math.nan)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


#: Fewer distinct items than this under a pooled share that repeats them: no interval. The
#: cluster-robust variance is estimated from the items, and on a handful of them even the
#: small-sample corrected interval is unreliable (tests/test_intervals.py
#: measures the coverage).
MIN_CLUSTERS = 10


def bell_mccaffrey_df(rows: Sequence[int]) -> float:
    """Degrees of freedom of the CR2 variance of a share whose clusters hold ``rows`` rows each
    (Bell & McCaffrey 2002; Imbens & Kolesár 2016): (tr B)^2 / tr(B^2) for the clusters' weight
    matrix B = diag(d) - u u'/n, with d = m / (1 - m/n) and u = m / sqrt(1 - m/n) per cluster of
    m rows. G - 1 when the clusters are of equal size; fewer when a few large clusters dominate."""
    m = np.asarray(rows, dtype=float)
    n = float(m.sum())
    d = m / (1.0 - m / n)
    u2 = m * d  # u^2
    trace = d.sum() - u2.sum() / n
    trace_sq = (d * d).sum() - 2.0 * (d * u2).sum() / n + (u2.sum() / n) ** 2
    return float(trace * trace / trace_sq)


def clustered_wilson_ci(
    values: Sequence[bool], clusters: Sequence[Hashable], z: float = Z95
) -> tuple[float, float, float]:
    """(low, high, n_eff): the Wilson interval of the share of ``values`` when rows of the same
    cluster (the same item run under several configurations) are not independent.

    ``n_eff`` is the effective number of rows: p(1-p) / V, with V the cluster-robust variance of
    the share with the CR2 small-sample correction (Bell & McCaffrey 2002), sum over clusters of
    (successes - p * rows)^2 / (1 - rows/n) / n^2, scaled by (z / t)^2, t the quantile of
    Student's t at the same level with :func:`bell_mccaffrey_df` degrees of freedom (Korn &
    Graubard 1998: Wilson's interval on it is the one with t in place of z), and capped at n:
    rows never count for more than themselves (rows that vary no more between clusters than
    independent ones get Wilson's interval on the rows). Without the correction (statsmodels' ``cov_type="cluster"``
    without its factor, and z) the interval held the true share in about 92 % of datasets with
    10-15 clusters (tests/test_intervals.py measures both). Each item once
    (one row per cluster), a caller uses plain Wilson (:func:`repeated_rows_ci`). When every row
    is the same (p = 0 or 1) nothing says how alike the copies are, so they are taken as
    identical: n_eff = n^2 / sum(rows per cluster^2), the number of items when every item has the
    same number of rows. On one cluster with a share strictly between 0 and 1, no interval (NaN)."""
    if len(values) != len(clusters):
        raise ValueError(f"{len(values)} values but {len(clusters)} cluster labels")
    n = len(values)
    if n == 0:
        return (math.nan, math.nan, 0.0)
    hits: dict[Hashable, int] = defaultdict(int)
    rows: dict[Hashable, int] = defaultdict(int)
    for v, c in zip(values, clusters, strict=True):
        hits[c] += bool(v)
        rows[c] += 1
    p = sum(hits.values()) / n
    if p in (0.0, 1.0):
        n_eff = n * n / sum(m * m for m in rows.values())
    elif len(rows) < 2:
        return (math.nan, math.nan, 0.0)
    else:
        variance = sum((hits[c] - p * m) ** 2 / (1.0 - m / n) for c, m in rows.items()) / (n * n)
        if variance <= 0.0:
            n_eff = float(n)
        else:
            from scipy.stats import norm, t  # not at import: the reports load this module

            quantile = float(t.ppf(norm.cdf(z), bell_mccaffrey_df(list(rows.values()))))
            n_eff = min(float(n), p * (1 - p) / variance * (z / quantile) ** 2)
    n_eff = round(n_eff, 9)  # k identical copies give the number of items, not that plus a rounding error
    low, high = wilson_ci(p * n_eff, n_eff, z)
    return (low, high, n_eff)


def repeated_rows_ci(values: Sequence[bool], clusters: Sequence[Hashable]) -> tuple[float, float, float, str] | None:
    """The 95 % interval of a share whose rows may repeat a cluster (an attack under several
    systems, a dialogue's follow-ups), as every report chooses it: ``(low, high, n_eff,
    ci_method)``. Every cluster once: plain Wilson on the rows ("wilson", ``n_eff`` = n). Clusters
    repeated: :func:`clustered_wilson_ci` ("wilson-clustered"), or None under
    :data:`MIN_CLUSTERS` clusters: no interval, and the caller's note says why."""
    n = len(values)
    count = len(set(clusters))
    if count == n:  # the rows are independent, Wilson holds
        low, high = wilson_ci(sum(1 for v in values if v), n)
        return low, high, float(n), "wilson"
    if count < MIN_CLUSTERS:
        return None
    low, high, n_eff = clustered_wilson_ci(values, clusters)
    return low, high, n_eff, "wilson-clustered"


def effective_n(values: Sequence[bool], clusters: Sequence[Hashable]) -> float:
    """The effective number of rows behind the share of ``values`` whose rows fall in
    ``clusters`` (the prompt a labelled row answers, the arbitrator who decided it): n when every
    cluster appears once; the clustered interval's n_eff (:func:`repeated_rows_ci`) when clusters
    repeat; under :data:`MIN_CLUSTERS` clusters, the number of clusters (each one once: the most
    they can show, since rows of one cluster are at most identical). 0 on no rows."""
    if not values:
        return 0.0
    got = repeated_rows_ci(values, clusters)
    return float(len(set(clusters))) if got is None else got[2]


def prompt_key(text: str) -> str:
    """The prompt a row answers, spacing and case aside: rows answering one prompt are a cluster."""
    return " ".join(text.casefold().split())
