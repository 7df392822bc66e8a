"""Shared statistics: Wilson intervals equal statsmodels'."""

from __future__ import annotations

import pytest

from psychoalign.experiments.harness.stats import wilson_ci


def test_wilson_matches_statsmodels() -> None:
    from statsmodels.stats.proportion import proportion_confint

    for k, n in ((0, 10), (3, 10), (10, 10), (37, 50), (1, 1)):
        lo, hi = proportion_confint(k, n, alpha=0.05, method="wilson")
        got = wilson_ci(k, n)
        assert got == pytest.approx((lo, hi), abs=1e-12)


def test_a_graded_metric_where_every_item_scored_the_same_gets_no_interval() -> None:
    """Two dilemmas both rated 5.5 printed '0.550 [0.550, 0.550]': a zero-width interval that
    reads as certainty, from a judge that gave one rating to everything. Nothing varied, so the
    report gives the point and says so; a yes/no share keeps its Wilson interval (0/2 is wide)."""
    from psychoalign.experiments.harness.report import _stat

    flat = _stat([0.55, 0.55], binary=False, seed=0)
    assert (flat["mean"], flat["ci_low"], flat["ci_high"], flat["n"]) == (0.55, None, None, 2)
    assert flat["all_equal"] is True
    spread = _stat([0.5, 0.6, 0.7], binary=False, seed=0)
    assert spread["ci_low"] is not None and spread["ci_low"] < spread["ci_high"] and "all_equal" not in spread
    share = _stat([0.0, 0.0], binary=True, seed=0)
    assert share["ci_method"] == "wilson" and share["ci_high"] is not None and share["ci_high"] > 0.5
