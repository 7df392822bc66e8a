"""95 % intervals of a share: Wilson's equals statsmodels'; the clustered interval's coverage on
rows that repeat a cluster, and its variance and degrees of freedom against a direct computation."""

from __future__ import annotations

import pytest

from psychoalign.intervals import wilson_ci


def test_wilson_matches_statsmodels() -> None:
    from statsmodels.stats.proportion import proportion_confint

    for k, n in ((0, 10), (3, 10), (10, 10), (37, 50), (1, 1)):
        lo, hi = proportion_confint(k, n, alpha=0.05, method="wilson")
        got = wilson_ci(k, n)
        assert got == pytest.approx((lo, hi), abs=1e-12)


def _naive_and_clustered_coverage(items: int, repeats: int, runs: int, seed: int) -> tuple[float, float]:
    """A known clustered process: each attack has its own success rate (Beta(0.6, 1.4), mean 0.3)
    and is run under ``repeats`` configurations that draw from it independently. The share of
    ``runs`` seeded datasets whose interval holds 0.3: Wilson on every row as independent, and the
    clustered interval."""
    import numpy as np

    from psychoalign.intervals import clustered_wilson_ci

    rng = np.random.default_rng(seed)
    clusters = [str(i) for i in range(items) for _ in range(repeats)]
    naive = clustered = 0
    for _ in range(runs):
        rate = rng.beta(0.6, 1.4, size=items)
        values = [bool(v) for v in (rng.random((items, repeats)) < rate[:, None]).ravel()]
        lo, hi = wilson_ci(sum(values), len(values))
        naive += lo <= 0.3 <= hi
        lo, hi, _ = clustered_wilson_ci(values, clusters)
        clustered += lo <= 0.3 <= hi
    return naive / runs, clustered / runs


def test_wilson_on_repeated_items_covers_far_less_than_95_percent_and_the_clustered_interval_does() -> None:
    """Why Table 4's pooled column needs the clustered interval: the same 30 attacks under 4
    configurations, pooled as 120 independent rows, give a "95 %" Wilson interval that holds the
    true rate in about 4 datasets of 5; the clustered interval about 19 of 20."""
    naive, clustered = _naive_and_clustered_coverage(items=30, repeats=4, runs=1000, seed=0)
    assert naive < 0.87
    assert 0.92 <= clustered <= 0.98


def _uncorrected_ci(values: list[bool], clusters: list[str]) -> tuple[float, float]:
    """The clustered interval without a small-sample correction (CR0 variance and z), as it was."""
    n, groups = len(values), sorted(set(clusters))
    p = sum(values) / n
    hits = {g: sum(v for v, c in zip(values, clusters, strict=True) if c == g) for g in groups}
    rows = {g: clusters.count(g) for g in groups}
    variance = sum((hits[g] - p * rows[g]) ** 2 for g in groups) / (n * n)
    n_eff = n * n / sum(m * m for m in rows.values()) if p in (0.0, 1.0) else min(n, p * (1 - p) / variance)
    return wilson_ci(p * n_eff, n_eff)


def _coverage_with_few_clusters(items: int, runs: int, seed: int) -> tuple[float, float]:
    """The clustered process of :func:`_naive_and_clustered_coverage` (rates from Beta(0.6, 1.4),
    mean 0.3), with clusters of unequal size (1 to 4 rows: attacks that not every configuration
    ran) and of equal size (4 rows) in turn: the share of ``runs`` seeded datasets whose interval
    holds 0.3, uncorrected and corrected."""
    import numpy as np

    from psychoalign.intervals import clustered_wilson_ci

    rng = np.random.default_rng(seed)
    old = new = 0
    for run in range(runs):
        sizes = [1 + i % 4 for i in range(items)] if run % 2 else [4] * items
        clusters = [str(i) for i in range(items) for _ in range(sizes[i])]
        rate = rng.beta(0.6, 1.4, size=items)
        values = [bool(rng.random() < rate[int(c)]) for c in clusters]
        lo, hi = _uncorrected_ci(values, clusters)
        old += lo <= 0.3 <= hi
        lo, hi, _ = clustered_wilson_ci(values, clusters)
        new += lo <= 0.3 <= hi
    return old / runs, new / runs


@pytest.mark.parametrize("items", [10, 15, 20])
def test_with_few_clusters_the_small_sample_correction_brings_coverage_to_95_percent(items: int) -> None:
    """With 10-20 attacks repeated, the cluster-robust variance from the attacks is too small and
    z too narrow: the uncorrected "95 %" interval held the true rate in about 92-94 % of 1,000
    seeded datasets. The CR2 variance with Bell-McCaffrey degrees of freedom holds it in 95-96 %."""
    old, new = _coverage_with_few_clusters(items, runs=1000, seed=items)
    assert 0.94 <= new <= 0.975
    assert new > old


def test_the_clustered_interval_of_k_identical_configurations_is_about_the_interval_of_one() -> None:
    """Running the same attacks k times through one configuration adds no information: the pooled
    interval is Wilson's on the distinct attacks, widened by the small-sample correction (CR2
    counts G identical copies as G - 1, t with G - 1 degrees of freedom in place of z), whatever
    k is; each attack once, it is Wilson's on the rows."""
    from scipy.stats import t

    from psychoalign.intervals import Z95, clustered_wilson_ci

    once = [i % 3 == 0 for i in range(20)]
    ids = [str(i) for i in range(20)]
    n_eff = 19 * (Z95 / t.ppf(0.975, 19)) ** 2
    for k in (2, 3, 5):
        repeated = [v for v in once for _ in range(k)]
        got = clustered_wilson_ci(repeated, [i for i in ids for _ in range(k)])
        assert got == pytest.approx((*wilson_ci(7 / 20 * n_eff, n_eff), n_eff), abs=1e-9)
        one = wilson_ci(7, 20)
        assert got[0] < one[0] and one[1] < got[1]  # wider than one configuration's: the correction
        assert got[1] - got[0] < 1.1 * (one[1] - one[0])  # ... and not by much
        assert wilson_ci(7 * k, 20 * k)[1] - wilson_ci(7 * k, 20 * k)[0] < got[1] - got[0]  # the rows': narrower
    # nothing varies (0 of 60): no variance is estimated; the rows of an attack taken as identical
    zero = clustered_wilson_ci([False] * 60, [str(i) for i in range(20) for _ in range(3)])
    assert zero == pytest.approx((*wilson_ci(0, 20), 20.0), abs=1e-9)


def test_the_clustered_variance_and_degrees_of_freedom_are_bell_and_mccaffrey_s() -> None:
    """p(1-p)/n_eff, before the degrees-of-freedom scaling, is the CR2 variance of the share (an
    intercept-only regression: residuals of each cluster adjusted by (I - H_gg)^(-1/2)), and the
    degrees of freedom are Bell and McCaffrey's (tr B)^2 / tr(B^2) with B = Q'Q, Q's columns
    (I - H) A_g' X_g (X'X)^-1 — both computed here from the matrices, for clusters of unequal size;
    without the correction, the variance is statsmodels' cluster-robust one."""
    import numpy as np
    import statsmodels.api as sm
    from scipy.stats import t

    from psychoalign.intervals import Z95, bell_mccaffrey_df, clustered_wilson_ci

    rng = np.random.default_rng(3)
    clusters = [str(i) for i in range(15) for _ in range(1 + i % 4)]
    rate = {str(i): rng.beta(0.6, 1.4) for i in range(15)}  # alike within a cluster: n_eff below n, not capped
    values = [bool(rng.random() < rate[c]) for c in clusters]
    y = np.asarray(values, dtype=float)
    n = len(y)
    groups = np.unique(clusters, return_inverse=True)[1]
    hat = np.full((n, n), 1.0 / n)  # X (X'X)^-1 X' for X = 1
    resid = y - y.mean()
    cr2 = 0.0
    q = []
    for g in range(groups.max() + 1):
        idx = np.flatnonzero(groups == g)
        vals, vecs = np.linalg.eigh(np.eye(len(idx)) - hat[np.ix_(idx, idx)])
        adjust = vecs @ np.diag(vals**-0.5) @ vecs.T
        cr2 += float(np.ones(len(idx)) @ adjust @ resid[idx]) ** 2 / n**2
        column = np.zeros(n)
        column[idx] = adjust @ np.ones(len(idx)) / n
        q.append((np.eye(n) - hat) @ column)
    b = np.asarray(q) @ np.asarray(q).T
    df = float(np.trace(b) ** 2 / np.trace(b @ b))
    rows = [clusters.count(str(i)) for i in range(15)]
    assert bell_mccaffrey_df(rows) == pytest.approx(df, rel=1e-9)
    assert bell_mccaffrey_df([4] * 15) == pytest.approx(14.0, rel=1e-12)
    p = float(y.mean())
    _, _, n_eff = clustered_wilson_ci(values, clusters)
    assert n_eff < n
    assert p * (1 - p) / (n_eff / (Z95 / t.ppf(0.975, df)) ** 2) == pytest.approx(cr2, rel=1e-9)
    fit = sm.OLS(y, np.ones(n)).fit(cov_type="cluster", cov_kwds={"groups": groups, "use_correction": False})
    cr0 = sum((y[groups == g].sum() - p * (groups == g).sum()) ** 2 for g in range(15)) / n**2
    assert cr0 == pytest.approx(float(fit.bse[0]) ** 2, rel=1e-9) and cr0 < cr2
