"""The small-cluster correction (CR2, Bell-McCaffrey df) against closed forms and statsmodels."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from psychoalign.star.analysis.models import cr2_covariance
from psychoalign.star.analysis.simulate import simulate
from psychoalign.star.analysis.stats import compare_binary


def test_cr2_of_a_cluster_level_difference_is_welch_on_cluster_means() -> None:
    """Least squares on a cluster-level 0/1 regressor, equal cluster sizes: CR2's variance of the
    difference is s0^2/G0 + s1^2/G1 over cluster means, and its Bell-McCaffrey df is the
    Welch-Satterthwaite df under equal variances, (1/G0 + 1/G1)^2 / sum(1 / (G^2 (G - 1)))."""
    rng = np.random.default_rng(0)
    g0, g1, size = 4, 6, 3
    codes = np.repeat(np.arange(g0 + g1), size)
    x = np.column_stack([np.ones(codes.size), (codes >= g0).astype(float)])
    y = rng.normal(size=codes.size) + rng.normal(size=g0 + g1)[codes]
    resid = y - x @ np.linalg.lstsq(x, y, rcond=None)[0]
    cov, dfs = cr2_covariance(x, resid, codes)
    means = np.array([y[codes == g].mean() for g in range(g0 + g1)])
    welch = means[:g0].var(ddof=1) / g0 + means[g0:].var(ddof=1) / g1
    satterthwaite = (1 / g0 + 1 / g1) ** 2 / (1 / (g0**2 * (g0 - 1)) + 1 / (g1**2 * (g1 - 1)))
    assert cov[1, 1] == pytest.approx(welch, rel=1e-10)
    assert dfs[1] == pytest.approx(satterthwaite, rel=1e-10)  # 6.58 here, not G - 1 = 9
    assert dfs[0] == pytest.approx(g0 - 1, rel=1e-10)  # the intercept is group 0's mean: its G0 - 1


def test_cr2_with_singleton_clusters_is_hc2() -> None:
    """One observation per cluster: CR2 is HC2, residuals divided by sqrt(1 - leverage)."""
    rng = np.random.default_rng(1)
    x = np.column_stack([np.ones(12), rng.normal(size=12)])
    resid = rng.normal(size=12)
    resid -= x @ np.linalg.lstsq(x, resid, rcond=None)[0]
    cov, _ = cr2_covariance(x, resid, np.arange(12))
    bread = np.linalg.inv(x.T @ x)
    lev = np.einsum("ij,jk,ik->i", x, bread, x)
    scores = x * (resid / np.sqrt(1 - lev))[:, None]
    assert cov == pytest.approx(bread @ scores.T @ scores @ bread, rel=1e-10)


def test_logistic_model_uses_cr2_on_raters_beside_the_item_terms() -> None:
    """Two-way clustering: statsmodels' two-way covariance with its rater term replaced by CR2 on
    the Logit working quantities; the term's df is Bell-McCaffrey's, at most G - 1."""
    import statsmodels.api as sm

    frame = simulate(np.random.default_rng(4), "attribute", n_items=200, n_raters=40, per_item=3)
    result = compare_binary(frame, "attr", frame["y"].to_numpy(), "A")
    x = sm.add_constant((frame["attr"] == "B").astype(float).to_numpy())
    y = frame["y"].to_numpy()
    raters, items = pd.factorize(frame["rater_id"])[0], pd.factorize(frame["item_id"])[0]
    fit = sm.Logit(y, x)
    two_way = fit.fit(disp=False, cov_type="cluster", cov_kwds={"groups": np.column_stack([raters, items])})
    by_rater = fit.fit(disp=False, cov_type="cluster", cov_kwds={"groups": raters})
    mu = two_way.predict()
    sw = np.sqrt(mu * (1 - mu))
    cr2, dfs = cr2_covariance(x * sw[:, None], (y - mu) / sw, raters)
    want = two_way.cov_params() - by_rater.cov_params() + cr2
    term = result["model"]["terms"]["attr=B"]
    assert term["coef"] == pytest.approx(two_way.params[1], rel=1e-6)
    assert term["se"] == pytest.approx(np.sqrt(want[1, 1]), rel=1e-6)
    assert term["se"] > np.sqrt(two_way.cov_params()[1, 1])  # CR2 is larger than CR1 here
    assert term["df"] == pytest.approx(min(dfs[1], 39), rel=1e-9) and term["df"] <= 39
    assert result["model"]["joint_test"]["df"] == [1, term["df"]]
