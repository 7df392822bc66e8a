"""Statistics core of boundary detection, checked against reference implementations
(pingouin for ICC, scipy for Kruskal–Wallis and Spearman) on data with rater and item effects."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from psychoalign.errors import InputError
from psychoalign.experiments.studies.boundary.reliability import icc
from psychoalign.star.analysis.h1 import kruskal, mean_ci, spearman, tension_bins

pg = pytest.importorskip("pingouin")


def _ratings(rng: np.random.Generator, n: int, k: int, item_sd: float, run_sd: float, noise_sd: float) -> np.ndarray:
    """Targets x runs with item effects, run (rater) offsets, noise and a tension-like [0, 1] squash."""
    item = rng.normal(0, item_sd, size=(n, 1))
    run = rng.normal(0, run_sd, size=(1, k))
    raw = 0.4 + item + run + rng.normal(0, noise_sd, size=(n, k))
    return np.asarray(np.clip(raw, 0.0, 1.0))


@pytest.fixture(autouse=True)
def _unrounded_pingouin(monkeypatch: pytest.MonkeyPatch) -> None:
    """pingouin rounds its CI column to 2 decimals by default: compare at full precision."""
    monkeypatch.delitem(pg.options, "round.column.CI95", raising=False)


def _pingouin(x: np.ndarray) -> pd.DataFrame:
    """pingouin's table indexed ICC2 / ICC3 (0.7 names them ICC(A,1) / ICC(C,1))."""
    n, k = x.shape
    long = pd.DataFrame(
        [{"item": i, "run": j, "t": x[i, j]} for i in range(n) for j in range(k) if not np.isnan(x[i, j])]
    )
    out = pg.intraclass_corr(long, targets="item", raters="run", ratings="t", nan_policy="omit")
    names = {"ICC(A,1)": "ICC2", "ICC(C,1)": "ICC3", "ICC2": "ICC2", "ICC3": "ICC3"}
    out = out[out["Type"].isin(names)].assign(Type=lambda f: f["Type"].map(names)).set_index("Type")
    return out.rename(columns={"CI95%": "CI95"})


@pytest.mark.parametrize(
    ("n", "k", "item_sd", "run_sd", "noise_sd", "seed"),
    [
        (30, 2, 0.2, 0.0, 0.05, 1),
        (60, 3, 0.15, 0.05, 0.1, 2),  # a run that shifts every T: ICC(2,1) < ICC(3,1)
        (12, 5, 0.05, 0.02, 0.2, 3),  # mostly noise
        (200, 4, 0.3, 0.1, 0.02, 4),
    ],
)
def test_icc_equals_pingouin(n: int, k: int, item_sd: float, run_sd: float, noise_sd: float, seed: int) -> None:
    x = _ratings(np.random.default_rng(seed), n, k, item_sd, run_sd, noise_sd)
    ours = icc(x)
    ref = _pingouin(x)
    assert ours.icc2 == pytest.approx(ref.loc["ICC2", "ICC"], abs=1e-9)
    assert ours.icc3 == pytest.approx(ref.loc["ICC3", "ICC"], abs=1e-9)
    for name, ci in (("ICC2", ours.icc2_ci), ("ICC3", ours.icc3_ci)):
        assert ci is not None
        lo, hi = ref.loc[name, "CI95"]
        assert ci[0] == pytest.approx(lo, abs=1e-9)
        assert ci[1] == pytest.approx(hi, abs=1e-9)
        assert ci[0] <= (ours.icc2 if name == "ICC2" else ours.icc3) <= ci[1]  # type: ignore[operator]
    assert ours.n_targets == n and ours.n_runs == k


def test_icc_drops_incomplete_targets_like_pingouin() -> None:
    x = _ratings(np.random.default_rng(7), 40, 3, 0.2, 0.05, 0.05)
    x[[3, 17, 29], [0, 2, 1]] = np.nan
    ours = icc(x)
    ref = _pingouin(x)
    assert ours.dropped_targets == 3 and ours.n_targets == 37
    assert ours.icc2 == pytest.approx(ref.loc["ICC2", "ICC"], abs=1e-9)
    assert ours.icc3 == pytest.approx(ref.loc["ICC3", "ICC"], abs=1e-9)


def test_icc_of_identical_runs_is_one_and_of_constant_data_undefined() -> None:
    col = np.linspace(0.0, 0.9, 10)
    same = icc(np.column_stack([col, col]))
    assert same.icc2 == pytest.approx(1.0) and same.icc3 == pytest.approx(1.0)
    flat = icc(np.full((5, 2), 0.2))
    assert flat.icc2 is None and flat.icc3 is None and flat.icc2_ci is None


def test_icc_bad_shapes_give_one_line_errors() -> None:
    with pytest.raises(InputError, match="at least 2 runs"):
        icc(np.zeros((5, 1)))
    with pytest.raises(InputError, match="at least 2 requests"):
        icc(np.array([[0.1, 0.2], [np.nan, 0.3]]))


def test_kruskal_equals_scipy_with_ties_and_unequal_groups() -> None:
    rng = np.random.default_rng(5)
    groups = {
        "medical": np.round(rng.uniform(0.1, 0.6, 25), 2),
        "legal": np.round(rng.uniform(0.0, 0.4, 13), 2),
        "dual_use": np.round(rng.uniform(0.0, 0.2, 31), 1),  # heavy ties
        "empty": np.array([np.nan]),
    }
    res = kruskal(groups)
    ref = sps.kruskal(groups["medical"], groups["legal"], groups["dual_use"])
    assert res.h == pytest.approx(ref.statistic, rel=1e-12)
    assert res.p == pytest.approx(ref.pvalue, rel=1e-12)
    n, k = 69, 3
    assert res.n == n and res.groups == k and res.df == 2
    assert res.epsilon2 == pytest.approx(ref.statistic / (n - 1))
    assert res.eta2_h == pytest.approx((ref.statistic - k + 1) / (n - k))
    assert "empty" not in res.sizes


def test_kruskal_needs_two_groups_and_handles_constant_data() -> None:
    with pytest.raises(InputError, match="at least 2 groups"):
        kruskal({"a": [0.1, 0.2]})
    flat = kruskal({"a": [0.2, 0.2], "b": [0.2, 0.2, 0.2]})
    assert flat.h == 0.0 and flat.p == 1.0


def test_spearman_point_equals_scipy_and_ci_contains_it() -> None:
    rng = np.random.default_rng(11)
    x = rng.normal(size=150)
    y = 0.5 * x + rng.normal(size=150)
    y[::10] = np.nan  # missing outcome: pairwise deletion
    res = spearman(x, y, n_boot=1000, n_perm=1000, seed=3)
    ok = np.isfinite(y)
    ref = sps.spearmanr(x[ok], y[ok])
    assert res.rho == pytest.approx(ref.statistic, rel=1e-12)
    assert res.n == int(ok.sum())
    assert res.ci_low is not None and res.ci_high is not None
    assert res.ci_low < res.rho < res.ci_high
    assert res.ci_low > 0.2  # a clear relation: the interval excludes 0
    assert res.p_permutation == pytest.approx(1 / 1001)  # never 0: (0 + 1) / (B + 1)
    assert spearman(x, y, n_boot=1000, n_perm=1000, seed=3) == res  # seeded: reproducible


def test_spearman_ci_covers_the_population_value() -> None:
    """Bivariate normal with r = 0.4: Spearman's rho_s = (6/pi) asin(r/2). 95 % intervals should
    cover it in about 95 % of samples (bounds for 150 replications: 88 %..99 %)."""
    r = 0.4
    rho_s = 6 / math.pi * math.asin(r / 2)
    rng = np.random.default_rng(21)
    cover = 0
    reps = 150
    for i in range(reps):
        xy = rng.multivariate_normal([0, 0], [[1, r], [r, 1]], size=80)
        res = spearman(xy[:, 0], xy[:, 1], n_boot=600, n_perm=10, seed=i)
        assert res.ci_low is not None and res.ci_high is not None
        cover += res.ci_low <= rho_s <= res.ci_high
    assert 0.88 <= cover / reps <= 0.99


def test_permutation_p_is_calibrated_under_the_null() -> None:
    rng = np.random.default_rng(8)
    reps = 300
    rejections = 0
    for i in range(reps):
        x = rng.integers(0, 4, size=40).astype(float)  # ties, like binned tension
        y = rng.normal(size=40)
        res = spearman(x, y, n_boot=10, n_perm=400, seed=i)
        assert res.p_permutation is not None
        rejections += res.p_permutation < 0.05
    assert 0.02 <= rejections / reps <= 0.09


def test_spearman_undefined_cases_return_none() -> None:
    assert spearman([1, 2], [1, 2]).rho is None
    assert spearman([0.3] * 10, list(range(10))).rho is None
    with pytest.raises(InputError):
        spearman([1, 2, 3], [1, 2])


def test_mean_ci_and_bins() -> None:
    m = mean_ci([0.1, 0.2, 0.3, 0.4], n_boot=500)
    assert m.mean == pytest.approx(0.25)
    assert m.ci_low is not None and m.ci_high is not None and 0.1 <= m.ci_low < 0.25 < m.ci_high <= 0.4
    assert mean_ci([]).mean is None and mean_ci([0.5]).ci_low is None
    t = [0.0, 0.29, 0.3, 0.5, 0.51, 1.0]
    bins, kw = tension_bins(t, [0.1, 0.1, 0.5, 0.5, 0.9, 0.9], n_boot=100)
    assert [b.n for b in bins] == [2, 2, 2]  # 0.3 and 0.5 belong to "medium"
    assert [b.outcome.mean for b in bins] == pytest.approx([0.1, 0.5, 0.9])
    assert kw is not None and kw.groups == 3
    bins, kw = tension_bins([0.1, 0.2], [0.3, 0.4])
    assert [b.n for b in bins] == [2, 0, 0] and kw is None
    with pytest.raises(InputError, match="names"):
        tension_bins(t, t, cuts=(0.3,))
